#!/bin/bash
# Packs the Open vSwitch programs of a build (with DPDK and the ovs-gpu
# plugin, CUDA included) and the shared libraries they need into DIR, for
# the GPU machine, which has no DPDK: there they run with
# LD_LIBRARY_PATH=DIR/lib and DPDK_PMD_ARGS="-d DIR/pmds".  Where this
# machine has perf, it goes too (DIR/bin/perf, for BENCH_PERF's profiles
# of the switch benchmark), with its libraries in DIR/perf.
#
#   make-device-bundle.sh BUILD_DIR DIR
set -e

# is_elf FILE: whether FILE is an ELF binary (Debian's /usr/bin/perf may
# be a script that runs /usr/bin/perf_VERSION, the running kernel's).
is_elf() {
    test "$(od -An -tx1 -N4 "$1" 2>/dev/null | tr -d ' ')" = 7f454c46
}

# stub_lib LIB PROGRAM OUTDIR: a library in OUTDIR with LIB's soname and
# symbol versions, defining the symbols that PROGRAM takes from LIB:
# functions that say they are stubs and exit, data of the same size.
stub_lib() {
    local lib=$1 prog=$2 out=$3 soname tmp vs=
    soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
    tmp=$(mktemp -d)
    readelf --dyn-syms -W "$prog" \
        | awk 'NR > 3 && $8 != "" { sub(/@.*/, "", $8); print $8 }' \
        | LC_ALL=C sort -u > "$tmp/wanted"
    # NAME SIZE TYPE VERSION of what LIB defines that PROGRAM names.
    readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && $8 != "" &&
            ($4 == "FUNC" || $4 == "IFUNC" || $4 == "OBJECT" ||
             $4 == "TLS") {
            n = $8; v = ""
            if (n ~ /@/) { v = n; sub(/@.*/, "", n); sub(/^[^@]*@+/, "", v) }
            print n, $3, $4, v }' | LC_ALL=C sort -k1,1 -u \
        | LC_ALL=C join - "$tmp/wanted" > "$tmp/syms"
    awk -v so="$soname" '
        BEGIN {
            print "extern int dprintf(int, const char *, ...);"
            print "extern void _exit(int);"
            print "static void stub(const char *f) {"
            printf "    dprintf(2, \"%s: %%s: %s\\n\", f);\n", so,
                "a stub in this bundle"
            print "    _exit(127);"
            print "}"
        }
        $3 == "FUNC" || $3 == "IFUNC" {
            printf "void %s(void) { stub(\"%s\"); }\n", $1, $1 }
        $3 == "OBJECT" { printf "char %s[%d];\n", $1, ($2 > 0 ? $2 : 1) }
        $3 == "TLS" {
            printf "__thread char %s[%d];\n", $1, ($2 > 0 ? $2 : 1) }
    ' "$tmp/syms" > "$tmp/stub.c"
    if awk 'NF == 4 { found = 1 } END { exit !found }' "$tmp/syms"; then
        awk 'NF == 4 { s[$4] = s[$4] " " $1 ";" }
            END { for (v in s) printf "%s {%s };\n", v, s[v] }' \
            "$tmp/syms" > "$tmp/stub.map"
        vs=-Wl,--version-script=$tmp/stub.map
    fi
    cc -shared -fPIC -O1 -fno-builtin -w -o "$out/$soname" \
        -Wl,-soname,"$soname" $vs "$tmp/stub.c"
    rm -rf "$tmp"
}

# Libraries perf needs only for what the profiles never run: Perl and
# Python (perf script), S-Lang (the TUI), babeltrace (perf data convert),
# OpenCSD (Arm CoreSight traces).
perf_stubbed() {
    case ${1##*/} in
        libperl.so*|libpython*|libslang.so*|libbabeltrace*|libopencsd*)
            return 0 ;;
    esac
    return 1
}

# bundle_perf DIR: this machine's perf in DIR/perf/perf, with the
# libraries it needs that DIR/lib lacks in DIR/perf/lib, and DIR/bin/perf
# running it with both.  A folder of its own, not DIR/lib: the GPU
# machine's programs run with LD_LIBRARY_PATH=DIR/lib (its gdb among
# them, which needs that machine's glib, babeltrace and libdw, not
# Debian 12's).  The libraries of perf_stubbed, 27 MB with what they
# need in turn, are stubs: the device's runs carry 64 MiB in all.
bundle_perf() {
    local dir=$1 perf lib path c
    perf=$(command -v perf 2>/dev/null) && perf=$(readlink -f "$perf")
    if test -n "$perf" && ! is_elf "$perf"; then
        for c in $(ls -v "$(dirname "$perf")"/perf_[0-9]* 2>/dev/null); do
            is_elf "$c" && perf=$c
        done
    fi
    if test -z "$perf" || ! is_elf "$perf"; then
        echo "make-device-bundle.sh: no perf here (Debian's linux-perf):" \
            "the bundle goes without it (no BENCH_PERF profiles)" >&2
        return 0
    fi
    if ! command -v cc >/dev/null; then
        echo "make-device-bundle.sh: no C compiler for perf's stub" \
            "libraries: the bundle goes without perf" >&2
        return 0
    fi
    mkdir -p "$dir/perf/lib"
    cp "$perf" "$dir/perf/perf"
    # What perf needs directly, and what those libraries need in turn but
    # for the stubbed ones' (glib, libstdc++, libcrypt...); the C library
    # aside, as above.
    for lib in $(objdump -p "$perf" | awk '$1 == "NEEDED" { print $2 }'); do
        path=$(ldd "$perf" | awk -v l="$lib" '$1 == l { print $3 }')
        if perf_stubbed "$lib"; then
            stub_lib "$path" "$perf" "$dir/perf/lib"
        else
            echo "$path"
            ldd "$path" | awk '/=> \// { print $3 }'
        fi
    done | sort -u \
        | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' \
        | while read -r lib; do
        test -e "$dir/lib/${lib##*/}" || cp -L "$lib" "$dir/perf/lib/"
    done
    strip --strip-unneeded "$dir"/perf/perf "$dir"/perf/lib/* 2>/dev/null \
        || true
    cat > "$dir/bin/perf" <<'EOF'
#!/bin/sh
# The development machine's perf (scripts/make-device-bundle.sh) with its
# libraries: the bundle's perf/lib, then its lib.
d=$(cd "$(dirname "$0")/.." && pwd)
LD_LIBRARY_PATH=$d/perf/lib:$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    exec "$d/perf/perf" "$@"
EOF
    chmod +x "$dir/bin/perf"
    if ! "$dir/bin/perf" version >/dev/null; then
        echo "make-device-bundle.sh: the bundled perf does not start:" \
            "the bundle goes without it" >&2
        rm -rf "$dir/perf" "$dir/bin/perf"
        return 0
    fi
    echo "perf: $perf, $(du -sh "$dir/perf" | cut -f1) in $dir/perf"
}

BUILD=$(cd "$1" && pwd)
DIR=$2
rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/lib" "$DIR/pmds"
for p in vswitchd/ovs-vswitchd ovsdb/ovsdb-server ovsdb/ovsdb-tool \
         utilities/ovs-vsctl utilities/ovs-ofctl utilities/ovs-appctl; do
    cp "$BUILD/ovs/$p" "$DIR/bin/"
done
cp "$BUILD/ovs/vswitchd/vswitch.ovsschema" "$DIR/"
pmddir=$(ls -d /usr/lib/x86_64-linux-gnu/dpdk/pmds-* | head -1)
cp -L "$pmddir"/librte_net_pcap.so "$pmddir"/librte_net_null.so \
   "$pmddir"/librte_mempool_ring.so "$DIR/pmds/"
# Every shared library the programs and drivers need, but the C library
# itself, which the GPU machine has (newer).
for f in "$DIR"/bin/* "$DIR"/pmds/*; do
    ldd "$f" | awk '/=> \// { print $3 }'
done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' \
    | while read -r lib; do cp -L "$lib" "$DIR/lib/"; done
# The IDS switch benchmark's rules, as the build unpacked them from the
# repository's data/.
mkdir -p "$DIR/data"
cp "$BUILD/data/snort-community/community.rules" "$DIR/data/"
# ovs-vswitchd keeps its symbol table (not its debug info), so that the
# switch benchmark's stack samples (BENCH_SAMPLES) name functions.
strip --strip-debug "$DIR"/bin/ovs-vswitchd 2>/dev/null || true
for f in "$DIR"/bin/* "$DIR"/lib/* "$DIR"/pmds/*; do
    case $f in */ovs-vswitchd) continue ;; esac
    strip --strip-unneeded "$f" 2>/dev/null || true
done
# perf, for the switch benchmark's profiles (BENCH_PERF,
# scripts/pmd-perf-profile.sh): the GPU machine has none.
bundle_perf "$DIR"
du -sh "$DIR"
