#!/bin/bash
# Prepares, on the development machine (Debian 12, apt), the git-ignored
# folders that the GPU machine's runs carry, since that machine has no
# network, DPDK, cmocka, Hyperscan, Jerasure, ISA-L, libpcap or CRoaring:
#
#   .devdeps/         cmocka, xxhash.h + Debian's openvswitch.tar.gz
#                     (scripts/device-run.sh build test)
#   .devdeps-ids/     Hyperscan (bench/run-ids-gpu.sh)
#   .devdeps-parity/  cmocka, Jerasure, gf-complete, ISA-L
#                     (bench/run-parity-gpu.sh)
#   .devdeps-index/   cmocka, libpcap, CRoaring (bench/run-index-gpu.sh)
#   .devbench/        the OVS programs of a DPDK build with the plugin
#                     (switch benchmarks; needs BUILD, default _build)
#
# The test data (ClassBench, Snort community rules) is in the repository
# (data/) and travels with the working tree.
#
# A run carries at most 64 MiB: see docs/PERFORMANCE.md for which folders
# go with which call.
#
#   scripts/make-device-deps.sh [BUILD]
set -e
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/_build}
cd "$SRC"

# unpack DIR PACKAGE...: downloads the packages and unpacks them in DIR/root.
unpack() {
    local dir=$1 tmp
    shift
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download "$@" >/dev/null)
    rm -rf "$dir/root"
    mkdir -p "$dir/root"
    for deb in "$tmp"/*.deb; do
        dpkg -x "$deb" "$dir/root"
    done
    rm -rf "$tmp"
    # Debian 12 still puts some libraries (libdbus) in /lib: one folder
    # for the device's -L, -rpath-link and LD_LIBRARY_PATH.
    if test -d "$dir/root/lib"; then
        mkdir -p "$dir/root/usr/lib"
        cp -a "$dir/root/lib/." "$dir/root/usr/lib/"
        rm -rf "$dir/root/lib"
    fi
    # Static archives are not linked on the device and weigh the most.
    find "$dir/root" -name '*.a' -delete
}

unpack .devdeps libcmocka0 libcmocka-dev libxxhash-dev
cp /usr/src/openvswitch/openvswitch.tar.gz .devdeps/

unpack .devdeps-ids libhyperscan5 libhyperscan-dev

# run-parity-gpu.sh unpacks debs/ itself on the device.
rm -rf .devdeps-parity && mkdir -p .devdeps-parity/debs
(cd .devdeps-parity/debs && apt-get download libcmocka0 libcmocka-dev \
    libjerasure2 libjerasure-dev libgf-complete1 libgf-complete-dev \
    libisal2 libisal-dev >/dev/null)

unpack .devdeps-index libcmocka0 libcmocka-dev libpcap0.8 libpcap0.8-dev \
    libdbus-1-3 libroaring0 libroaring-dev

if test -x "$BUILD/ovs/vswitchd/ovs-vswitchd"; then
    "$SRC/scripts/make-device-bundle.sh" "$BUILD" .devbench
fi
du -sh .devdeps .devdeps-ids .devdeps-parity .devdeps-index .devbench \
    2>/dev/null
