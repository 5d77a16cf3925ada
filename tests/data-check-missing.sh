#!/bin/sh
# Proves that a missing data file fails the tests, by name, rather than
# being skipped: on copies of the data,
#
#   - tests/data-check.sh passes on an intact copy, and fails on a copy
#     without each listed file in turn (or with one byte changed), naming
#     that file;
#   - the programs that read the data fail, naming the file, when it is
#     missing: test-ids without the Snort community rules, test-classifier
#     without a ClassBench set (one case each, GPU_TEST_FILTER), run from
#     the build tree as "make check" does.
#
# Counts go to $OVSGPU_TEST_COUNTS when set (tests/layer-result).
set -u
srcdir=${srcdir:-.}
check=$srcdir/tests/data-check.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
: > "$work/fails"

ok() { passed=$((passed + 1)); }
bad() {
    echo "data-check-missing: FAILED: $*"
    echo "$*" >> "$work/fails"
    failed=$((failed + 1))
}

# fresh: an intact copy of the repository's data/ in $work/data.
fresh() {
    rm -rf "$work/data" && cp -R "$srcdir/data" "$work/data"
    # An in-tree build unpacks beside the .gz: not the repository's.
    rm -f "$work/data/snort-community/community.rules"
}

fresh
if OVSGPU_TEST_COUNTS= sh "$check" "$work/data" > "$work/out" 2>&1; then
    ok
else
    bad "data-check fails on an intact copy:"; cat "$work/out"
fi

for path in $(sed -n 's/^[0-9a-f]\{64\}  //p' "$srcdir/data/MANIFEST"); do
    fresh
    rm "$work/data/${path#data/}"
    if OVSGPU_TEST_COUNTS= sh "$check" "$work/data" > "$work/out" 2>&1; then
        bad "data-check passes without $path"
    elif ! grep -q "missing data file: $path\$" "$work/out"; then
        bad "data-check fails without $path but does not name it:"
        cat "$work/out"
    else
        ok
    fi
done

fresh
path=data/classbench/fw1_1000
printf 'x' >> "$work/data/${path#data/}"
if OVSGPU_TEST_COUNTS= sh "$check" "$work/data" > "$work/out" 2>&1 \
        || ! grep -q "checksum differs from data/MANIFEST: $path\$" \
                 "$work/out"; then
    bad "data-check does not name a changed $path"; cat "$work/out"
else
    ok
fi

# The readers: a copy of the build tree's data/ (community rules
# unpacked), less one file.  The programs are in the build tree (the
# current folder); without them (no cmocka) this part cannot run.
# expect_fail NAME FILTER PROGRAM: PROGRAM must fail naming NAME.
expect_fail() {
    name=$1 filter=$2 prog=$3
    if ! test -x "$prog"; then
        bad "$prog not built"
        return
    fi
    rm -rf "$work/bdata" && cp -RL data "$work/bdata" \
        && rm "$work/bdata/$name" || { bad "cannot copy data/"; return; }
    if GPU_TEST_FILTER=$filter OVSGPU_DATA=$work/bdata OVSGPU_TEST_COUNTS= \
            "$prog" > "$work/out" 2>&1; then
        bad "$prog passes without $name"
    elif ! grep -q "missing data file $work/bdata/$name" "$work/out"; then
        bad "$prog fails without $name but does not name it:"
        tail -20 "$work/out"
    else
        ok
    fi
}
expect_fail snort-community/community.rules test_community_counts \
    tests/test-ids
expect_fail classbench/acl1_10000 test_classbench_acl1 tests/test-classifier

echo "data-check-missing: $passed passed, $failed failed"
if test -n "${OVSGPU_TEST_COUNTS:-}"; then
    {
        printf 'passed: %d\nfailed: %d\nskipped: 0\n' $passed $failed
        sed 's/^/fail: /' "$work/fails"
    } > "$OVSGPU_TEST_COUNTS"
fi
test $failed = 0
