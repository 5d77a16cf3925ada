#!/bin/bash
# Packs the Open vSwitch programs of a build (with DPDK and the ovs-gpu
# plugin, CUDA included) and the shared libraries they need into DIR, for
# the GPU machine, which has no DPDK: there they run with
# LD_LIBRARY_PATH=DIR/lib and DPDK_PMD_ARGS="-d DIR/pmds".
#
#   make-device-bundle.sh BUILD_DIR DIR
set -e
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
du -sh "$DIR"
