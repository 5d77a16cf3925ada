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

if ! test -f "$manifest"; then
    echo "data-check: missing data file: data/MANIFEST ($manifest)"
    test -z "${OVSGPU_TEST_COUNTS:-}" \
        || printf 'passed: 0\nfailed: 1\nskipped: 0\n' > "$OVSGPU_TEST_COUNTS"
    exit 1
fi

passed=0
failed=0
# One line per file: "SHA256  PATH", PATH relative to the repository.
while read -r sum path; do
    case $sum in ''|'#'*) continue ;; esac
    f=$dir/${path#data/}
    if ! test -f "$f"; then
        echo "data-check: missing data file: $path"
    elif test "$(wc -c < "$f")" -gt $max; then
        echo "data-check: over 2 MiB: $path"
    elif test "$(sha256sum < "$f" | cut -d' ' -f1)" != "$sum"; then
        echo "data-check: checksum differs from data/MANIFEST: $path"
    else
        passed=$((passed + 1))
        continue
    fi
    failed=$((failed + 1))
done < "$manifest"

# Files nobody listed: the manifest must say what the repository carries.
# The folder's own READMEs and automake.mk are the repository's, and a
# file unpacked beside its .gz (by an in-tree build) is the build's.
(cd "$dir" && find . -type f ! -name MANIFEST ! -name README.md \
    ! -name automake.mk) \
    | sed 's|^\./|data/|' | sort | while read -r path; do
    if ! grep -q "  $path\$" "$manifest" \
            && ! grep -q "  $path.gz\$" "$manifest"; then
        echo "data-check: not in data/MANIFEST: $path"
    fi
done > "${TMPDIR:-/tmp}/data-check.$$"
if test -s "${TMPDIR:-/tmp}/data-check.$$"; then
    cat "${TMPDIR:-/tmp}/data-check.$$"
    failed=$((failed + $(wc -l < "${TMPDIR:-/tmp}/data-check.$$")))
fi
rm -f "${TMPDIR:-/tmp}/data-check.$$"

echo "data-check: $passed files good, $failed problems"
test -z "${OVSGPU_TEST_COUNTS:-}" \
    || printf 'passed: %d\nfailed: %d\nskipped: 0\n' $passed $failed \
           > "$OVSGPU_TEST_COUNTS"
test $failed = 0 && test $passed -gt 0
