#!/bin/sh
# Runs ovs-gpu's libFuzzer targets (tests/fuzz/automake.mk), from the
# build directory.
#
#   fuzz-targets.sh          the "make check" layer: every target over its
#                            seed corpus (each input once: a regression
#                            test), then fuzzed for FUZZ_SECONDS (5)
#                            seconds from there
#   fuzz-targets.sh --long   "make fuzz": each target fuzzed for
#                            FUZZ_SECONDS, with what it reached
#
# A target passes if no input crashes it, leaks, trips a sanitizer or
# hangs.  Inputs that do are kept in tests/fuzz/artifacts/ and named in
# the output: add each to the target's corpus with its fix.  New inputs the
# fuzzer finds go to tests/fuzz/work/TARGET/, never into the repository's
# corpus (merge them with TARGET -merge=1 if they are worth keeping).
#
# The layer counts one test per target (tests/layer-result reads the
# counts).  Without clang and libFuzzer, which "scripts/ovs-gpu deps"
# installs, it fails: CI must never skip it.
set -u
env=tests/fuzz/fuzz-env
if ! test -f $env; then
    echo "fuzz-targets.sh: $env missing (run from the build directory," \
         "after make)" >&2
    exit 99
fi
. ./$env
long=false
test "${1:-}" = --long && long=true
counts=${OVSGPU_TEST_COUNTS:-/dev/null}
: > "$counts" 2>/dev/null || counts=/dev/null

if test "$FUZZ_CC_FOUND" != yes; then
    msg="no clang with libFuzzer ($FUZZ_CC -fsanitize=fuzzer failed in"
    msg="$msg configure): apt-get install clang libclang-rt-14-dev"
    echo "fuzz targets FAILED: $msg"
    {
        echo "passed: 0"
        echo "failed: 1"
        echo "skipped: 0"
        echo "fail: $msg"
    } > "$counts"
    exit 1
fi

mkdir -p tests/fuzz/artifacts tests/fuzz/work
passed=0 failed=0
fails=
for t in $FUZZ_TARGETS; do
    name=$(basename $t)
    corpus=$FUZZ_SRCDIR/tests/fuzz/corpus/$name
    dict=$FUZZ_SRCDIR/tests/fuzz/$name.dict
    work=tests/fuzz/work/$name
    log=tests/fuzz/$name.log
    # "make check" starts from the corpus alone each time, so that its
    # time stays the same; "make fuzz" goes on from where it stopped.
    $long || rm -rf $work
    mkdir -p $work
    set -- -artifact_prefix=tests/fuzz/artifacts/$name- -timeout=25 \
        -rss_limit_mb=2048 -print_final_stats=1
    test -f $dict && set -- "$@" -dict=$dict
    status=0
    if ! test -x $t; then
        echo "$name: not built" > $log
        status=1
    elif ! $long; then
        # The corpus first, each input once: a regression test of every
        # bug it holds.
        if ! test -d $corpus || test -z "$(ls $corpus)"; then
            echo "$name: no seed corpus in $corpus" > $log
            status=1
        else
            ./$t "$@" -runs=0 $corpus > $log 2>&1 || status=$?
        fi
        # A target that generates its seeds ("make fuzz-corpus") checks
        # them as it does (fec_decode's must rebuild what they lose), in
        # a scratch folder: the corpus must still reach what it was made
        # for after the code under it changed.
        if test $status = 0 && grep -q FUZZ_GEN_CORPUS \
                $FUZZ_SRCDIR/tests/fuzz/$name.c; then
            gen=tests/fuzz/work/$name.gen
            rm -rf $gen && mkdir -p $gen
            echo "== seeds generated again, in $gen" >> $log
            FUZZ_GEN_CORPUS=$gen ./$t >> $log 2>&1 || status=$?
        fi
    fi
    if test $status = 0; then
        # New inputs go to $work (the first folder), not to the corpus.
        ./$t "$@" -max_total_time=$FUZZ_SECONDS $work $corpus \
            >> $log 2>&1 || status=$?
    fi
    stats=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' \
                $log | tail -1 \
            | sed 's/^#\([0-9]*\)[^c]*\(cov: [0-9]*\) \(ft: [0-9]*\) \(corp: [^ ]*\).*exec\/s: \([0-9]*\).*/\1 runs, \2, \3, \4, \5 exec\/s/')
    if test $status = 0; then
        passed=$((passed + 1))
        echo "$name: passed ($stats)"
    else
        failed=$((failed + 1))
        what=$(grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' $log \
               | head -1)
        art=$(sed -n 's/.*Test unit written to \(.*\)/\1/p' $log | tail -1)
        echo "$name: FAILED, status $status: ${what:-see $log}"
        test -n "$art" && echo "  input: $art"
        tail -30 $log | sed 's/^/  | /'
        fails="${fails}fail: $name: ${what:-status $status, see $log}${art:+ (input $art)}
"
    fi
done
{
    echo "passed: $passed"
    echo "failed: $failed"
    echo "skipped: 0"
    printf '%s' "$fails"
} > "$counts"
test $failed = 0
