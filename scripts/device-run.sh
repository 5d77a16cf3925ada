#!/bin/bash
# Builds ovs-gpu with CUDA on the GPU machine (Ubuntu, no DPDK, cmocka or
# openvswitch-source installed) and runs the tests and benchmarks there.
# Run from the repository root by the device tool, with the generated
# autotools files and .devdeps/ (cmocka, the OVS tarball) carried along.
#
#   scripts/device-run.sh [build|test|test-offload|bench|switch-bench|
#                          ids-switch-bench|services-bench|ovs-bench|
#                          classifier-burst|unit|soak|recorder-bench]...
#
# test runs the cmocka tests (every backend) and OVS's testsuite with
# ovs-gpu's tests; test-offload runs OVS's datapath tests with the offload
# forced on (long: a call of its own).
#                                                   (default: build test)
#
# ovs-bench runs bench/classifier-bench-ovs (built by "build"): the
# classifier on the GPU and its CPU backend beside OVS 3.1's own dpcls on
# one core, same rules and keys, with the dpcls's answers checked against
# the classifier's (exit 1 on a mismatch).  OVS_BENCH_ARGS replaces its
# arguments (default: --max-seconds 0.15).
#
# switch-bench runs scripts/bench-dpcls-switch.sh with the OVS programs of
# a DPDK build made on the development machine and carried in .devbench/
# (scripts/make-device-bundle.sh), since the GPU machine has no DPDK.
#
# Logs and results go to $OUT (or _devout/).
set -o pipefail
SRC=$(pwd)
OUT=${OUT:-$SRC/_devout}
mkdir -p "$OUT"
DEPS=$SRC/.devdeps
BUILD=/tmp/ovsgpu-build
steps=${*:-build test}

export CMOCKA_CFLAGS="-I$DEPS/root/usr/include"
export CMOCKA_LIBS="-L$DEPS/root/usr/lib/x86_64-linux-gnu -lcmocka"
# xxhash.h (libxxhash-dev, test-re's oracle), header only.
export CPPFLAGS="${CPPFLAGS:-} -I$DEPS/root/usr/include"
export LD_LIBRARY_PATH=$DEPS/root/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
export PATH=/usr/local/cuda/bin:$PATH

# The other libraries come unpacked from Debian packages as well
# (scripts/make-device-deps.sh): libpcap is required (the recorder's
# segments); Hyperscan, Jerasure, ISA-L and CRoaring are the tests' oracles.
# Their pkg-config files name /usr, so the flags are given directly.
for d in .devdeps-index .devdeps-ids .devdeps-parity; do
    r=$SRC/$d/root/usr
    test -d "$r" || continue
    export CPPFLAGS="${CPPFLAGS:-} -I$r/include"
    # -rpath-link: libpcap needs libdbus, which the GPU machine lacks too.
    export LDFLAGS="${LDFLAGS:-} -L$r/lib/x86_64-linux-gnu \
 -Wl,-rpath-link,$r/lib/x86_64-linux-gnu"
    export LD_LIBRARY_PATH=$r/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
    L="-L$r/lib/x86_64-linux-gnu"
    case $d in
    .devdeps-index)
        export PCAP_CFLAGS="-I$r/include" PCAP_LIBS="$L -lpcap" ;;
    .devdeps-ids)
        export HYPERSCAN_CFLAGS="-I$r/include/hs" HYPERSCAN_LIBS="$L -lhs" ;;
    .devdeps-parity)
        export JERASURE_CFLAGS="-I$r/include/jerasure -I$r/include" \
            JERASURE_LIBS="$L -lJerasure -lgf_complete" \
            ISAL_CFLAGS="-I$r/include" ISAL_LIBS="$L -lisal" ;;
    esac
done

echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv \
    | tee "$OUT/device.txt"

# The tests' data (ClassBench sets, Snort community rules) travels with the
# working tree (data/); "make" unpacks it into the build tree, where the
# tests and benchmarks find it.

# The OVS programs of the DPDK build carried in .devbench/.
use_bundle() {
    B=$SRC/.devbench
    export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
    export PATH=$B/bin:$PATH
    export VSWITCH_SCHEMA=$B/vswitch.ovsschema
    # DPDK loads its drivers from its build-time folder when it exists;
    # the GPU machine has none, so name the carried ones.
    test -d /usr/lib/x86_64-linux-gnu/dpdk || export DPDK_PMD_ARGS="-d $B/pmds"
}

for step in $steps; do
case $step in
build)
    echo "== build"
    mkdir -p "$BUILD" && cd "$BUILD"
    "$SRC/configure" --without-dpdk \
        --with-ovs-tarball="$DEPS/openvswitch.tar.gz" \
        > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
    tail -9 "$OUT/configure.log"
    make -j16 > "$OUT/build.log" 2>&1 || { grep -B5 -A5 -m5 'rror' "$OUT/build.log"; tail -20 "$OUT/build.log"; exit 1; }
    echo "build ok"
    ;;
test)
    echo "== tests"
    cd "$BUILD"
    # One layer at a time, each with its own limit and log.
    # Every library's tests on every backend there is (CPU and CUDA).
    export GPU_IDS_BACKEND=all GPU_RE_BACKEND=all GPU_PARITY_BACKEND=all \
        GPU_INDEX_BACKEND=all
    # All of "make check"'s programs but the fuzz layer: this machine has
    # no clang, and the fuzz targets never use a GPU (CI runs them).
    timeout 240 make -j16 check-TESTS \
        TESTS="$(make -s print-tests | tr ' ' '\n' | grep -v fuzz-targets)" \
        > "$OUT/check-cmocka.log" 2>&1
    echo "cmocka: exit $?"
    timeout 240 make check-ovs TESTSUITEFLAGS=-j12 > "$OUT/check-ovs.log" 2>&1
    echo "check-ovs: exit $?"
    ;;&
test|test-offload)
    cd "$BUILD"
    if test $step = test-offload || test -n "${WITH_OFFLOAD:-}"; then
        timeout 420 make check-ovs-offload TESTSUITEFLAGS=-j12 \
            > "$OUT/check-ovs-offload.log" 2>&1
        echo "check-ovs-offload: exit $?"
        tail -3 "$OUT/check-ovs-offload.log"
    fi
    # Autotest keeps the folders of failed tests only.
    tar czf "$OUT/failed-ovs-tests.tgz" -C ovs/tests testsuite.dir \
        2>/dev/null
    cp tests/*.log "$OUT/" 2>/dev/null
    grep -h -E '^\[  (PASSED|FAILED|SKIPPED) \]|^(PASS|FAIL|SKIP|ERROR):' \
        tests/*.log
    # The summary expects every layer of "make check"; this machine runs
    # some (no DPDK for the smoke test; the dpcls peer check and the
    # forced offload have calls of their own).
    ran=
    test $step = test && ran=ovs-testsuite
    if test $step = test-offload || test -n "${WITH_OFFLOAD:-}"; then
        ran="$ran ovs-testsuite-offload"
    fi
    for l in ovs-testsuite ovs-testsuite-offload dpdk-smoke dpdk-services \
             dpcls-peer \
             install-check fuzz-targets $(sed -n 's/^\(sanitizers-.*\)$/\1/p' \
                             results/expected 2>/dev/null); do
        case " $ran " in
            *" $l "*) ;;
            *) sed -i "/^$l\$/d" results/expected 2>/dev/null ;;
        esac
    done
    "$SRC/scripts/test-summary" "$BUILD"
    echo "== gpu/show from a running ovs-vswitchd (dummy datapath)"
    "$SRC/scripts/gpu-show-live.sh" "$BUILD" 2>&1 | tee "$OUT/gpu-show.txt"
    ;;
soak)
    # scripts/soak.sh on CUDA, with the build's OVS programs (dummy
    # datapath: no DPDK needed).
    echo "== soak, ${SOAK_MINUTES:-3} minutes on CUDA"
    SOAK_OUT=$OUT "$SRC/scripts/soak.sh" --minutes "${SOAK_MINUTES:-3}" \
        --device 0 --build "$BUILD" > "$OUT/soak.log" 2>&1
    echo "soak: exit $?"
    grep '^soak: \(ok\|FAIL\|rss\|[0-9]* seconds\)' "$OUT/soak.log"
    ;;
switch-bench)
    # SWITCH_BENCH_ARGS adds bench-dpcls-switch.sh options (--pmds,
    # --load, --configs, --seconds); SWITCH_BENCH_TAG names the output.
    echo "== switch benchmark: megaflow masks, stock and offloaded"
    use_bundle
    cd "$SRC"
    tag=${SWITCH_BENCH_TAG:-masks}
    scripts/bench-dpcls-switch.sh \
        --masks "${SWITCH_BENCH_MASKS:-1 8 16 32 64 128 256 512}" \
        ${SWITCH_BENCH_ARGS:-} --out "$OUT/switch-bench-$tag.txt" 2>&1 \
        | grep -v '^20[0-9][0-9]-' | tee -a "$OUT/switch-bench.log"
    ;;
ids-switch-bench)
    echo "== switch benchmark: no IDS, gpu_ids on CUDA, gpu_ids on the CPU"
    use_bundle
    cd "$SRC"
    # The community rules travel in the bundle, and in the working tree.
    rules=$B/data/community.rules
    if ! test -f "$rules"; then
        "$SRC/scripts/unpack-data.sh" /tmp/ovsgpu-data
        rules=/tmp/ovsgpu-data/snort-community/community.rules
    fi
    scripts/bench-ids-switch.sh --rules "$rules" \
        --out "$OUT/ids-switch-bench.txt" 2>&1 \
        | grep -v '^20[0-9][0-9]-' | tee -a "$OUT/ids-switch-bench.log"
    ;;
services-bench)
    # Every service action in the switch: no service, CUDA, CPU backend,
    # each against no service in pairs on one switch (--alternate: rows
    # a restart apart moved by 2x on the GPU machines); SERVICES_BENCH_ARGS
    # replaces those arguments (split at spaces: lists within them take
    # commas, "--backends cuda,cpu").
    echo "== switch benchmark of every service action"
    use_bundle
    cd "$SRC"
    "$SRC/scripts/unpack-data.sh" /tmp/ovsgpu-data
    rules=/tmp/ovsgpu-data/snort-community/community.rules
    scripts/bench-services-switch.sh --rules "$rules" --text "$rules" \
        ${SERVICES_BENCH_ARGS:---alternate 5 --seconds 2} \
        --out "$OUT/services-bench.txt" 2>&1 \
        | grep -v '^20[0-9][0-9]-' | tee -a "$OUT/services-bench.log"
    ;;
recorder-bench)
    # gpu_index's recorder without the switch (bench/recorder-bench, made
    # by "build"): the writer alone (a full ring of 1 M frames of the
    # Internet mix drained), the indexer on that segment, a producer
    # paced at 3 and 2.3 Mpps, and a query over 1 M records, on the CPU
    # and CUDA index builders; and the disk's write rate with an fsync,
    # the ceiling for the segments' pcap.
    echo "== recorder benchmark (gpu_index writer and indexer)"
    cd "$BUILD"
    {
        dd if=/dev/zero of=/tmp/ddtest bs=1M count=2048 conv=fsync 2>&1 \
            | tail -1
        rm -f /tmp/ddtest
        for be in cpu cuda; do
            for i in 1 2 3; do
                bench/recorder-bench --backend $be --drain 1000000 \
                    --segment 2000000 --dir /tmp/rbdev
            done
            for rate in 3000000 2300000; do
                bench/recorder-bench --backend $be --rate $rate \
                    --seconds 5 --dir /tmp/rbdev
            done
        done
        bench/recorder-bench --backend cuda --drain 1000000 \
            --segment 2000000 --dir /tmp/rbdev --query 'udp or tcp'
    } 2>&1 | tee "$OUT/recorder-bench.txt"
    ;;
pack)
    # The device tool brings back at most 8 files: pack them into one.
    tar czf /tmp/device-results.tgz -C "$OUT" . && rm -rf "$OUT"/* \
        && mv /tmp/device-results.tgz "$OUT/"
    ;;
ovs-bench)
    echo "== classifier-bench-ovs: OVS's dpcls beside the classifier"
    cd "$BUILD"
    timeout 560 bench/classifier-bench-ovs \
        ${OVS_BENCH_ARGS:---max-seconds 0.15} \
        --csv "$OUT/classifier-bench-ovs.csv" 2>&1 \
        | tee "$OUT/classifier-bench-ovs.txt"
    echo "classifier-bench-ovs: exit ${PIPESTATUS[0]}"
    ;;
unit)
    # Some cmocka programs alone, on every backend (UNIT_TESTS, default:
    # the classifier's and gpu_ids's).
    echo "== unit tests on every backend"
    cd "$BUILD"
    export GPU_IDS_BACKEND=all GPU_RE_BACKEND=all GPU_PARITY_BACKEND=all \
        GPU_INDEX_BACKEND=all
    for t in ${UNIT_TESTS:-test-classifier test-ids}; do
        make -j16 tests/$t > "$OUT/build-$t.log" 2>&1 \
            || { tail -20 "$OUT/build-$t.log"; continue; }
        timeout 300 tests/$t > "$OUT/$t.log" 2>&1
        echo "$t: exit $?"
        grep -E '^\[  (PASSED|FAILED) \]|FAILED|redone on the CPU' \
            "$OUT/$t.log"
    done
    ;;
classifier-burst)
    # The datapath-burst round trip, groups split over blocks (the
    # default) and not.
    echo "== classifier: 32-key bursts"
    cd "$BUILD"
    for split in 1 0; do
        echo "-- GPU_CLS_CUDA_SPLIT=$split"
        GPU_CLS_CUDA_SPLIT=$split timeout 120 bench/classifier-bench \
            --only burst --max-seconds 0.2 2>&1 \
            | tee "$OUT/classifier-burst-split$split.txt"
    done
    ;;
bench)
    echo "== benchmarks"
    cd "$BUILD"
    for b in bench/*-bench; do
        test -x "$b" || continue
        echo "-- $b"
        "./$b" 2>&1 | tee "$OUT/$(basename $b).txt"
    done
    ;;
esac
done
