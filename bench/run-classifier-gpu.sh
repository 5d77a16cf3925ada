#!/bin/bash
# Builds gpu_classifier/ with nvcc on a GPU machine, runs its tests on the
# CUDA backend and the benchmark, and leaves logs under $OUT.
#
#   bench/run-classifier-gpu.sh [tests|bench|sweep|all]...   (default: all)
#
# It builds without the autotools tree, so it runs on a bare machine:
# cmocka comes from .deps/root (unpacked libcmocka0 and libcmocka-dev
# .debs), and gpu_runtime/gpu-runtime.c is compiled in directly.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/classifier-gpu-out}
B=${BUILD:-/tmp/classifier-gpu-build}
mkdir -p "$OUT" "$B"
steps=${*:-all}

DEPS=$PWD/.deps/root
CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=$CUDA/bin/nvcc
LIBDIRS=$DEPS/usr/lib/x86_64-linux-gnu:$CUDA/lib64
export LD_LIBRARY_PATH=$LIBDIRS:${LD_LIBRARY_PATH:-}

log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

log "$(date -u) on $(hostname)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
    | tee -a "$OUT/summary.txt"

echo '#define HAVE_CUDA 1' > "$B/config.h"
# The ClassBench data travels with the working tree (data/).
scripts/unpack-data.sh "$B/data"
CFLAGS="-O2 -g -std=gnu11 -Wall -include $B/config.h -I$B -I. -I$CUDA/include \
 -I$DEPS/usr/include -DOVSGPU_DEFAULT_DATA=\"$B/data\""
build() {
    set -e
    $NVCC -arch=sm_90 -O3 -Xcompiler -fPIC -include "$B/config.h" -I"$B" -I. \
        --resource-usage -c gpu_classifier/classifier-cuda.cu \
        -o "$B/classifier-cuda.o" 2> "$B/nvcc-resource-usage.txt"
    for f in gpu_classifier/classifier.c gpu_classifier/classifier-cpu.c \
             tests/test-classifier.c tests/classifier-classbench.c \
             tests/test-common.c gpu_runtime/gpu-runtime.c \
             bench/classifier-bench.c; do
        gcc $CFLAGS -c "$f" -o "$B/$(basename "$f" .c).o"
    done
    LIBS="$B/classifier.o $B/classifier-cpu.o $B/classifier-cuda.o \
          $B/classifier-classbench.o $B/gpu-runtime.o"
    gcc -o "$B/test-classifier" "$B/test-classifier.o" "$B/test-common.o" \
        $LIBS \
        -L"$DEPS/usr/lib/x86_64-linux-gnu" -L"$CUDA/lib64" \
        -lcmocka -lcudart -lpthread -lstdc++
    gcc -o "$B/classifier-bench" "$B/classifier-bench.o" $LIBS \
        -L"$CUDA/lib64" -lcudart -lpthread -lstdc++
    set +e
}
if ! (build) > "$OUT/build.log" 2>&1; then
    log "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1
fi
log "built"

for step in $steps; do
    case $step in
    tests|all)
        log "tests, CUDA backend"
        GPU_CLS_BACKEND=cuda timeout 240 "$B/test-classifier" \
            > "$OUT/test-cuda.log" 2>&1
        log "test-classifier (cuda) exit $?"
        grep -E "SEED|PASSED|FAILED|ERROR|SKIP" "$OUT/test-cuda.log" | head -20
        log "tests, CUDA backend, Bloom filters always staged in shared memory"
        GPU_TEST_QUICK=1 GPU_CLS_CUDA_STAGE=1 GPU_CLS_BACKEND=cuda \
            timeout 150 "$B/test-classifier" > "$B/test-cuda-stage.log" 2>&1
        log "test-classifier (cuda, staged filters) exit $?"
        grep -E "SEED|PASSED|FAILED|ERROR" "$B/test-cuda-stage.log" \
            | head -10 \
            | tee -a "$OUT/summary.txt"
        log "compute-sanitizer memcheck, a few tests"
        GPU_TEST_QUICK=1 GPU_CLS_BACKEND=cuda \
            GPU_TEST_FILTER='test_b*' timeout 120 \
            "$CUDA/bin/compute-sanitizer" --tool memcheck --error-exitcode 9 \
            "$B/test-classifier" > "$B/memcheck.log" 2>&1
        log "memcheck exit $?"
        tail -3 "$B/memcheck.log" | tee -a "$OUT/summary.txt"
        ;;&
    sweep|all)
        log "sweep: classes per group, shared memory, blocks per SM"
        # First run (2026-11-23) swept 32/128 classes, 24/32/48 KB and
        # 4/8/16 blocks per SM; 128/24 KB/8 won.  Check its neighbours.
        # The second (2026-11-23) compared filters staged in shared memory
        # (1), read through L1/L2 (0) and chosen per launch (auto); 0 won.
        for cfg in "128 24576 8 0" "128 24576 8 1" "128 24576 8 auto" \
                   "64 24576 8 0"; do
            set -- $cfg
            stage=$4
            for set in 131072:512 131072:16 16384:128 16384:16; do
                GPU_CLS_CUDA_GROUP=$1 GPU_CLS_CUDA_SHM=$2 \
                GPU_CLS_CUDA_BLOCKS_PER_SM=$3 GPU_CLS_CUDA_STAGE=$stage \
                    timeout 60 \
                    "$B/classifier-bench" --synth $set --max-seconds 0.1 \
                    | awk -v c="group=$1 shm=$2 bps=$3 stage=$4" \
                        '/^synth/ && $4 == 65536 \
                         && ($5 == "tuple" || $5 == "bloom") {print c, $0}'
            done
        done 2>&1 | tee "$OUT/sweep.txt"
        log "highest-priority synthetic, 128K rules / 512 classes"
        timeout 60 "$B/classifier-bench" --synth 131072:512 --priority \
            --max-seconds 0.15 2>&1 | tee "$OUT/hp.txt" | grep "^synth"
        ;;&
    bench|all)
        log "benchmark"
        timeout 420 "$B/classifier-bench" --max-seconds 0.2 \
            --csv "$OUT/bench.csv" > "$OUT/bench.txt" 2>&1
        log "classifier-bench exit $?"
        cat "$OUT/bench.txt"
        ;;
    esac
done
