#!/bin/sh
# Checks the repository's test data against data/MANIFEST: every file it
# lists is there with its SHA-256, none is over 2 MiB (the repository's
# limit: compress what is larger), and every file in data/ is listed.
# Each problem is printed with the file's name, and fails the check.
#
#   data-check.sh [DATA_DIR]      (default: $srcdir/data)
#
# Exit status: 0 all good, 1 a problem.  Counts go to $OVSGPU_TEST_COUNTS
# when set (tests/layer-result): one test per listed file.
set -u
srcdir=${srcdir:-.}
dir=${1:-$srcdir/data}
manifest=$dir/MANIFEST
max=$((2 * 1024 * 1024))

problems=${TMPDIR:-/tmp}/data-check.$$
trap 'rm -f "$problems"' EXIT
: > "$problems"

# problem TEXT: prints TEXT and keeps it for the layer's record.
problem() {
    echo "data-check: $*"
    echo "$*" >> "$problems"
}

# report PASSED: the counts and problems, for tests/layer-result.
report() {
    test -z "${OVSGPU_TEST_COUNTS:-}" && return
    {
        printf 'passed: %d\nfailed: %d\nskipped: 0\n' $1 \
            $(wc -l < "$problems")
        sed 's/^/fail: /' "$problems"
    } > "$OVSGPU_TEST_COUNTS"
}

if ! test -f "$manifest"; then
    problem "missing data file: data/MANIFEST ($manifest)"
    report 0
    exit 1
fi

passed=0
# One line per file: "SHA256  PATH", PATH relative to the repository.
while read -r sum path; do
    case $sum in ''|'#'*) continue ;; esac
    f=$dir/${path#data/}
    if ! test -f "$f"; then
        problem "missing data file: $path"
    elif test "$(wc -c < "$f")" -gt $max; then
        problem "over 2 MiB: $path"
    elif test "$(sha256sum < "$f" | cut -d' ' -f1)" != "$sum"; then
        problem "checksum differs from data/MANIFEST: $path"
    else
        passed=$((passed + 1))
    fi
done < "$manifest"

# Files nobody listed: the manifest must say what the repository carries.
# The folder's own READMEs and automake.mk are the repository's, and a
# file unpacked beside its .gz (by an in-tree build) is the build's.
(cd "$dir" && find . -type f ! -name MANIFEST ! -name README.md \
    ! -name automake.mk) \
    | sed 's|^\./|data/|' | sort | while read -r path; do
    if ! grep -q "  $path\$" "$manifest" \
            && ! grep -q "  $path.gz\$" "$manifest"; then
        problem "not in data/MANIFEST: $path"
    fi
done

failed=$(wc -l < "$problems")
echo "data-check: $passed files good, $failed problems"
report $passed
test $failed = 0 && test $passed -gt 0
