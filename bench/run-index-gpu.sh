#!/bin/bash
# Builds gpu_services/index/ with nvcc and gcc on a GPU machine (no
# autotools tree needed), runs its tests on both backends and the
# benchmark, and leaves logs under $OUT.  About 3 minutes on an H100.
#
#   bench/run-index-gpu.sh [tests|bench|all]...   (default: all)
#
# The device machine has no cmocka, libpcap or CRoaring, and cannot fetch
# them: they travel as unpacked Debian 12 packages in .devdeps-index/
# (git-ignored: pass it in the run's carry list), with the ClassBench
# traces the benchmark reads.  Recipe (on the development machine, from
# the repository root):
#
#   mkdir -p /tmp/d && cd /tmp/d
#   apt-get download libcmocka0 libcmocka-dev libpcap0.8 libpcap0.8-dev \
#       libdbus-1-3 libroaring0 libroaring-dev
#   for d in *.deb; do dpkg -x $d $OLDPWD/.devdeps-index/root; done
#   # Only used if the machine lacks them (libdbus needs libsystemd):
#   apt-get download libsystemd0 libcap2 libgcrypt20 liblz4-1 liblzma5 \
#       libzstd1 libgpg-error0
#   for d in lib[!cdpr]*.deb libcap2*.deb; do
#       dpkg -x $d $OLDPWD/.devdeps-index/fallback; done
#
# The ClassBench traces travel with the working tree (data/classbench).
#
# Run: carry [".devdeps-index"], command "bench/run-index-gpu.sh".
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/index-gpu-out}
B=${BUILD:-/tmp/index-gpu-build}
mkdir -p "$OUT" "$B"
steps=${*:-all}

DD=$PWD/.devdeps-index/root
FB=$PWD/.devdeps-index/fallback
CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=$CUDA/bin/nvcc
# rpath-link: lets the linker resolve libpcap's libdbus (and, if the
# machine lacks it, libdbus's libsystemd) from the carried copies.
A=x86_64-linux-gnu
DDLIB=$DD/usr/lib/$A:$DD/lib/$A
FBLIB=$FB/usr/lib/$A:$FB/lib/$A
LIBDIRS="-L$DD/usr/lib/$A -L$DD/lib/$A -L$CUDA/lib64 \
 -Wl,-rpath-link,$DDLIB:$FBLIB"
export LD_LIBRARY_PATH=$DDLIB:$CUDA/lib64:${LD_LIBRARY_PATH:-}

log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

log "$(date -u) on $(hostname)"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm \
    --format=csv,noheader | tee -a "$OUT/summary.txt"
log "$(nproc) CPU cores: $(grep -m1 'model name' /proc/cpuinfo)"

scripts/unpack-data.sh "$B/data"
printf '#define HAVE_CUDA 1\n#define HAVE_ROARING 1\n' > "$B/config.h"
CFLAGS="-O2 -g -std=gnu11 -Wall -I$B -I. -I$CUDA/include -I$DD/usr/include \
 -DOVSGPU_DEFAULT_DATA=\"$B/data\""
build() {
    set -e
    $NVCC -arch=sm_90 -O3 -std=c++17 -Xcompiler -fPIC -I"$B" -I. \
        -DHAVE_CONFIG_H --resource-usage -c gpu_services/index/index-cuda.cu \
        -o "$B/index-cuda.o" 2> "$OUT/nvcc-resource-usage.txt"
    for f in gpu_services/index/index.c gpu_services/index/index-cpu.c \
             gpu_services/index/query.c gpu_services/index/store.c \
             gpu_runtime/gpu-runtime.c tests/test-index.c \
             tests/test-common.c \
             bench/index-bench.c bench/recorder-bench.c; do
        gcc $CFLAGS -c "$f" -o "$B/$(basename "$f" .c).o"
    done
    LIBS="$B/index.o $B/index-cpu.o $B/query.o $B/store.o \
          $B/index-cuda.o $B/gpu-runtime.o"
    gcc -o "$B/test-index" "$B/test-index.o" "$B/test-common.o" \
        $LIBS $LIBDIRS \
        -lcmocka -lpcap -lroaring -lcudart -lpthread -lstdc++
    gcc -o "$B/index-bench" "$B/index-bench.o" $LIBS $LIBDIRS \
        -lpcap -lroaring -lcudart -lpthread -lstdc++
    gcc -o "$B/recorder-bench" "$B/recorder-bench.o" $LIBS $LIBDIRS \
        -lpcap -lroaring -lcudart -lpthread -lstdc++
    set +e
}
if ! (build) > "$OUT/build.log" 2>&1; then
    log "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1
fi
log "built"
# libpcap needs libdbus, which needs libsystemd: use the carried copies
# only where the machine lacks a library.
if ldd "$B/test-index" | grep -q "not found"; then
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$FBLIB
    log "using carried fallback libraries for:" \
        $(ldd "$B/test-index" | grep "not found" | awk '{print $1}')
fi
ldd "$B/test-index" | grep "not found" && log "LIBRARIES MISSING"
grep -A3 -E "entry function '_Z[0-9]+[a-z]+_kernel" \
    "$OUT/nvcc-resource-usage.txt" | grep -E "entry|Used" | head -10

for step in $steps; do
    case $step in
    tests|all)
        log "tests, CUDA and CPU backends (CPU vs CUDA bytes compared)"
        GPU_INDEX_BACKEND=all timeout 150 "$B/test-index" \
            > "$OUT/test-index.log" 2>&1
        log "test-index (all backends) exit $?"
        grep -E "SEED|backends|compared|PASSED|FAILED|ERROR|SKIP" \
            "$OUT/test-index.log" | head -30
        grep -E "CRoaring|refused|queries|producers" "$OUT/test-index.log"
        ;;&
    bench|all)
        log "benchmark"
        cmd="$B/index-bench --rows 8388608 --iters 10 --query-rows 1048576"
        echo "$cmd" >> "$OUT/summary.txt"
        timeout 240 $cmd > "$OUT/bench.log" 2>&1
        log "index-bench exit $?"
        cat "$OUT/bench.log"
        ;;
    recorder|all)
        # The indexer alone on one segment of a million records (fsync,
        # 40 index builds, index file) on each builder, then the
        # recorder kept full for 4 s: records per second kept.
        for be in cuda cpu; do
            cmd="$B/recorder-bench --dir /tmp/rb-$be --backend $be \
 --drain 1000000 --segment 2000000 --ring 1048576"
            log "recorder-bench --backend $be --drain 1000000"
            timeout 120 $cmd 2>&1 | tee -a "$OUT/recorder.log" | tail -3
            cmd="$B/recorder-bench --dir /tmp/rb-$be --backend $be \
 --seconds 4"
            log "recorder-bench --backend $be --seconds 4 (ring always full)"
            timeout 120 $cmd 2>&1 | tee -a "$OUT/recorder.log" | tail -6
        done
        ;;
    esac
done
log "done $(date -u)"
