#!/bin/sh
# Runs the CUDA kernels of gpu_services/ids and gpu_services/re on the CPU
# against their CPU backends (tests/ids-kernel-emu.cc, re-kernel-emu.cc),
# so that a machine without a GPU (CI) checks the kernels' logic too; the
# H100 runs the same kernels for real with the cmocka tests.
#
# Each emulator is built from the sources alone, with an empty config.h:
# the libraries' CPU parts without their CUDA providers, whose kernels
# the emulator compiles itself.  Exit status: 0 passed, 77 skipped (no C++
# compiler), 1 failed.  The seed is printed; KERNEL_EMU_SEED replaces it.
set -u
srcdir=${srcdir:-.}
CC=${CC:-gcc}
CXX=${CXX:-g++}
if ! command -v "$CXX" > /dev/null 2>&1; then
    echo "kernel-emu: no C++ compiler ($CXX): skipped"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$work/config.h"
seed=${KERNEL_EMU_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "kernel-emu: seed $seed (KERNEL_EMU_SEED=$seed to repeat)"

build() {                       # NAME LIBRARY-SOURCES...
    name=$1
    shift
    mkdir -p "$work/$name"
    for f in "$@" gpu_runtime/gpu-runtime.c; do
        $CC -O2 -std=gnu11 -I"$work" -I"$srcdir" -c "$srcdir/$f" \
            -o "$work/$name/$(basename "$f" .c).o" || return 1
    done
    $CXX -O2 -std=c++17 -I"$work" -I"$srcdir" \
        "$srcdir/tests/$name-kernel-emu.cc" "$work/$name"/*.o -lpthread \
        -o "$work/$name/emu"
}

# The community rules, where the ids emulator finds them.
OVSGPU_SHARED_DATA=${OVSGPU_SHARED_DATA:-$(cd "$srcdir" && pwd)/../shared/data}
export OVSGPU_SHARED_DATA

passed=0
failed=0
run() {                         # NAME LIBRARY-SOURCES...
    name=$1
    echo "== $name-kernel-emu"
    if build "$@" && "$work/$name/emu" "$seed"; then
        passed=$((passed + 1))
    else
        echo "$name-kernel-emu: FAILED"
        failed=$((failed + 1))
    fi
}
run ids gpu_services/ids/ids.c gpu_services/ids/ids-rules.c \
    gpu_services/ids/ids-cpu.c
run re gpu_services/re/re.c gpu_services/re/re-cpu.c

# In cmocka's words, for scripts/test-summary.
test $passed = 0 || echo "[  PASSED  ] $passed test(s)."
test $failed = 0 || { echo "[  FAILED  ] $failed test(s)."; exit 1; }
exit 0
