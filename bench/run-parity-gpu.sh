#!/bin/bash
# Builds gpu_services/parity/ with nvcc and gcc on a GPU machine (no
# autotools tree needed), runs its tests on the CPU and CUDA backends and
# the benchmark, and leaves logs under $OUT.  About 3 minutes on an H100.
#
#   bench/run-parity-gpu.sh [tests|bench|all]...   (default: all)
#
# The device machine has no cmocka, Jerasure or ISA-L.  They travel as
# Debian packages in .devdeps-parity/ (carry it), prepared once on the
# development machine, from the repository root, with nothing but apt:
#
#   mkdir -p .devdeps-parity/debs && cd .devdeps-parity/debs &&
#   apt-get download libcmocka0 libcmocka-dev libjerasure2 \
#       libjerasure-dev libgf-complete1 libgf-complete-dev libisal2 \
#       libisal-dev &&
#   for f in *.deb; do dpkg -x "$f" ../root; done
#
# (Debian 12's builds need only glibc 2.17.)  This script unpacks debs/
# again into a scratch folder on the device, so .devdeps-parity/root need
# not survive the trip.
#
# Device command (the device tool, carry [".devdeps-parity"]):
#
#   OUT=$OUT bench/run-parity-gpu.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/parity-gpu-out}
B=${BUILD:-/tmp/parity-gpu-build}
mkdir -p "$OUT" "$B"
steps=${*:-all}

CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=$CUDA/bin/nvcc
DEPS=$B/deps
rm -rf "$DEPS"
mkdir -p "$DEPS"
for f in .devdeps-parity/debs/*.deb; do
    dpkg -x "$f" "$DEPS" || { echo "cannot unpack $f"; exit 1; }
done
LIB=$DEPS/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$LIB:$CUDA/lib64:${LD_LIBRARY_PATH:-}

log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

log "$(date -u) on $(hostname)"
nvidia-smi --format=csv,noheader \
    --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem | tee -a "$OUT/summary.txt"
log "$(nproc) CPU cores: $(grep -m1 'model name' /proc/cpuinfo)"

printf '#define HAVE_CUDA 1\n#define HAVE_JERASURE 1\n#define HAVE_ISAL 1\n' \
    > "$B/config.h"
CFLAGS="-O2 -g -std=gnu11 -Wall -I$B -I. -I$CUDA/include \
 -I$DEPS/usr/include -I$DEPS/usr/include/jerasure"
build() {
    set -e
    $NVCC -arch=sm_90 -O3 -std=c++17 -Xcompiler -fPIC -I"$B" -I. \
        --resource-usage -c gpu_services/parity/parity-cuda.cu \
        -o "$B/parity-cuda.o" 2> "$OUT/nvcc-resource-usage.txt"
    for f in gpu_services/parity/parity.c gpu_services/parity/parity-cpu.c \
             gpu_runtime/gpu-runtime.c tests/test-parity.c \
             tests/test-common.c \
             bench/parity-bench.c; do
        gcc $CFLAGS -c "$f" -o "$B/$(basename "$f" .c).o"
    done
    LIBS="$B/parity.o $B/parity-cpu.o $B/parity-cuda.o $B/gpu-runtime.o"
    gcc -o "$B/test-parity" "$B/test-parity.o" "$B/test-common.o" \
        $LIBS -L"$LIB" \
        -L"$CUDA/lib64" -lcmocka -lJerasure -lgf_complete -lisal -lcudart \
        -lpthread -lstdc++
    gcc -o "$B/parity-bench" "$B/parity-bench.o" $LIBS -L"$LIB" \
        -L"$CUDA/lib64" -lJerasure -lgf_complete -lisal -lcudart \
        -lpthread -lstdc++
    set +e
}
if ! (build) > "$OUT/build.log" 2>&1; then
    log "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1
fi
log "built"
# Registers and spills of the kernels the benchmark's codes use.
grep -A2 -E "xor_kernelILi(12|16|20|32)E|gf8_kernelILi(4|8)E" \
    "$OUT/nvcc-resource-usage.txt" \
    | grep -E "Function|registers|spill" | head -24

for step in $steps; do
    case $step in
    tests|all)
        log "tests, CPU and CUDA backends"
        GPU_PARITY_BACKEND=all timeout 150 "$B/test-parity" \
            > "$OUT/test-parity.log" 2>&1
        log "test-parity (all backends) exit $?"
        grep -E "SEED|backends|oracle|OK|PASS|FAIL|ERROR|SKIP|auto" \
            "$OUT/test-parity.log" | head -40
        grep -E "decoded|equal|rebuilt" "$OUT/test-parity.log"
        ;;&
    bench|all)
        log "benchmark"
        cmd="$B/parity-bench --gpu-mb 1024 --cpu-mb 64 --iters 10"
        echo "$cmd" >> "$OUT/summary.txt"
        timeout 420 $cmd > "$OUT/bench.log" 2>&1
        log "parity-bench exit $?"
        cat "$OUT/bench.log"
        # Tuning: the same kernels with narrower words (more mask work
        # per byte, fewer registers, more threads resident).
        for word in 8 4; do
            log "GPU_PARITY_CUDA_WORD=$word, kernel-only"
            GPU_PARITY_CUDA_WORD=$word timeout 60 "$B/parity-bench" \
                --no-cpu --gpu-mb 1024 --iters 10 --codes 10,4:8,8 \
                2>&1 | grep "kernel-only" | tee -a "$OUT/bench-words.log"
        done
        ;;
    esac
done
log "done $(date -u)"
