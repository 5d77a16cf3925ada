#!/bin/bash
# Builds gpu_services/ids/ with nvcc and gcc on a GPU machine (no autotools
# tree needed), runs its tests on the CUDA backend and the benchmark, and
# leaves logs under $OUT.
#
#   bench/run-ids-gpu.sh [tests|bench|latency|all]...   (default: all)
#
# latency: the round trip of one small submission (as a switch's gathers
# are), as one graph and split kernel by kernel; then 1, 2 and 4 such
# submissions in flight at once (whether the device overlaps them).
#
# The device machine has no cmocka or Hyperscan: they come from unpacked
# Debian packages the caller carries, cmocka in .devdeps/root (libcmocka0,
# libcmocka-dev) and Hyperscan in .devdeps-ids/root (libhyperscan5,
# libhyperscan-dev); the community rules travel with the working tree
# (data/snort-community).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ids-gpu-out}
B=${BUILD:-/tmp/ids-gpu-build}
mkdir -p "$OUT" "$B"
steps=${*:-all}

CM=$PWD/.devdeps/root
HS=$PWD/.devdeps-ids/root
CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=$CUDA/bin/nvcc
LIBDIRS="-L$CM/usr/lib/x86_64-linux-gnu -L$HS/usr/lib/x86_64-linux-gnu \
 -L$CUDA/lib64"
export LD_LIBRARY_PATH=$CM/usr/lib/x86_64-linux-gnu:$HS/usr/lib/x86_64-linux-gnu:$CUDA/lib64:${LD_LIBRARY_PATH:-}

log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

log "$(date -u) on $(hostname)"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm \
    --format=csv,noheader | tee -a "$OUT/summary.txt"
log "$(nproc) CPU cores: $(grep -m1 'model name' /proc/cpuinfo)"

printf '#define HAVE_CUDA 1\n#define HAVE_HYPERSCAN 1\n' > "$B/config.h"
scripts/unpack-data.sh "$B/data"
# EXTRA_CFLAGS: for both compilers, e.g. -DGPU_IDS_AC_MAX_DEPTH=16.
EXTRA_CFLAGS=${EXTRA_CFLAGS:-}
CFLAGS="-O2 -g -std=gnu11 -Wall $EXTRA_CFLAGS -I$B -I. -I$CUDA/include \
 -I$CM/usr/include \
 -I$HS/usr/include/hs -DOVSGPU_DEFAULT_DATA=\"$B/data\""
build() {
    set -e
    $NVCC -arch=sm_90 -O3 -std=c++17 -Xcompiler -fPIC $EXTRA_CFLAGS \
        -I"$B" -I. \
        -DHAVE_CONFIG_H --resource-usage -c gpu_services/ids/ids-cuda.cu \
        -o "$B/ids-cuda.o" 2> "$OUT/nvcc-resource-usage.txt"
    for f in gpu_services/ids/ids.c gpu_services/ids/ids-rules.c \
             gpu_services/ids/ids-cpu.c gpu_runtime/gpu-runtime.c \
             tests/test-ids.c tests/test-common.c bench/ids-bench.c; do
        gcc $CFLAGS -c "$f" -o "$B/$(basename "$f" .c).o"
    done
    LIBS="$B/ids.o $B/ids-rules.o $B/ids-cpu.o $B/ids-cuda.o \
          $B/gpu-runtime.o"
    gcc -o "$B/test-ids" "$B/test-ids.o" "$B/test-common.o" $LIBS \
        $LIBDIRS \
        -lcmocka -lhs -lcudart -lpthread -lstdc++
    gcc -o "$B/ids-bench" "$B/ids-bench.o" $LIBS $LIBDIRS \
        -lhs -lcudart -lpthread -lstdc++
    set +e
}
if ! (build) > "$OUT/build.log" 2>&1; then
    log "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1
fi
log "built"
# Per kernel (scan x2, confirm, rules, verdict): registers, stack, spills.
grep -E "Compiling entry|stack frame|registers" \
    "$OUT/nvcc-resource-usage.txt" | head -20

for step in $steps; do
    case $step in
    tests|all)
        log "tests, CUDA backend (and CPU, for comparison)"
        GPU_IDS_BACKEND=all timeout 200 "$B/test-ids" \
            > "$OUT/test-ids.log" 2>&1
        log "test-ids (all backends) exit $?"
        grep -E "SEED|backends|PASSED|FAILED|ERROR|SKIP|Hyperscan" \
            "$OUT/test-ids.log" | head -20
        ;;&
    bench|all)
        log "benchmark"
        cmd="$B/ids-bench --packets 262144 --batch 65536 --iters 5"
        echo "$cmd" >> "$OUT/summary.txt"
        timeout 200 $cmd > "$OUT/bench.log" 2>&1
        log "ids-bench exit $?"
        cat "$OUT/bench.log"
        log "chunk size sweep (remap)"
        for c in 128 256 512; do
            timeout 60 "$B/ids-bench" --packets 262144 --iters 3 \
                --threads 1 --chunk $c 2>&1 | grep -E "remap|command" \
                | tee -a "$OUT/bench-chunks.log"
        done
        ;;&
    latency|all)
        log "small submissions' round trip"
        cmd="$B/ids-bench --packets 16384 --latency 32,256,1024 --overlap"
        echo "$cmd" >> "$OUT/summary.txt"
        timeout 120 $cmd > "$OUT/latency.log" 2>&1
        log "ids-bench --latency exit $?"
        grep -E "graph|kernel by|in flight" "$OUT/latency.log"
        ;;
    esac
done
log "done $(date -u)"
