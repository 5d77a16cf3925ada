#!/bin/sh
# Runs the CUDA kernels of gpu_services/ids and gpu_services/re on the CPU
# against their CPU backends (tests/ids-kernel-emu.cc, re-kernel-emu.cc),
# so that a machine without a GPU (CI) checks the kernels' logic too; the
# H100 runs the same kernels for real with the cmocka tests.
#
# Each emulator is built from the sources alone, with an empty config.h:
# the libraries' CPU parts without their CUDA providers, whose kernels
# the emulator compiles itself.  Exit status: 0 passed, 1 failed (a
# missing C++ compiler or data file included: build-essential and the
# repository have both).  The seed is printed; KERNEL_EMU_SEED replaces it.
# The counts go to $OVSGPU_TEST_COUNTS when set (tests/layer-result).
# KERNEL_EMU_FLAGS is added to every compile and link: "make check" in a
# build configured with --enable-sanitizers gives the sanitizers' flags,
# so that the emulators run under ASan and UBSan as the cmocka tests do.
set -u
srcdir=${srcdir:-.}
CC=${CC:-gcc}
CXX=${CXX:-g++}
flags=${KERNEL_EMU_FLAGS:-}
if ! command -v "$CXX" > /dev/null 2>&1; then
    echo "kernel-emu: no C++ compiler ($CXX): FAILED"
    exit 1
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
        $CC -O2 $flags -std=gnu11 -I"$work" -I"$srcdir" -c "$srcdir/$f" \
            -o "$work/$name/$(basename "$f" .c).o" || return 1
    done
    $CXX -O2 $flags -std=c++17 -I"$work" -I"$srcdir" \
        "$srcdir/tests/$name-kernel-emu.cc" "$work/$name"/*.o -lpthread \
        -o "$work/$name/emu"
}

# The community rules, where the ids emulator finds them: the build tree's
# data/ (make unpacks them there from the repository's), run from the top
# of the build tree as "make check" does.
OVSGPU_DATA=${OVSGPU_DATA:-$(pwd)/data}
export OVSGPU_DATA

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
run re gpu_services/re/re.c gpu_services/re/re-cpu.c \
    gpu_services/re/re-codec.c

echo "kernel-emu: $passed passed, $failed failed"
if test -n "${OVSGPU_TEST_COUNTS:-}"; then
    printf 'passed: %d\nfailed: %d\nskipped: 0\n' $passed $failed \
        > "$OVSGPU_TEST_COUNTS"
fi
test $failed = 0
