/*
 * What every ovs-gpu unit test program reports, and where it finds its
 * data (implemented in tests/test-common.c): kept apart from
 * test-common.h so that a program with its own random numbers
 * (test-classifier.c) can use it too.
 */
#ifndef TESTS_TEST_REPORT_H
#define TESTS_TEST_REPORT_H 1

#include <stddef.h>

/* Test data.
 *
 * The tests read their data from one folder laid out like the build
 * tree's data/, which "make" makes from the repository's data/
 * (classbench/ as it is, snort-community/community.rules unpacked):
 * $OVSGPU_DATA if set, else that folder (OVSGPU_DEFAULT_DATA, given by the
 * build).  A missing file is a failure that names it, never a skip: a
 * test that does not run proves nothing. */
const char *test_data_dir(void);

/* Returns the path of 'rel' (e.g. "classbench/acl1_10000") in
 * test_data_dir(), in a static buffer (one of a few, so that two can be
 * used in one call). */
const char *test_data_path(const char *rel);

/* Fails the current test, naming 'path', unless it can be read. */
void test_data_require(const char *path);

/* Skips and counts.
 *
 * A test may skip only for the two reasons below; each skip is recorded
 * with its reason, so that scripts/test-summary can name it.  The counts
 * go to the file named by $OVSGPU_TEST_COUNTS (set by tests/layer-result,
 * which runs each test program under "make check"), as "key: value"
 * lines that test-summary reads instead of the program's log, with a
 * "skip:" line per skip and a "fail:" line per failure noted. */
enum test_skip_kind {
    TEST_SKIP_NO_GPU,           /* No usable CUDA device, or no CUDA build. */
    TEST_SKIP_NO_ORACLE,        /* An optional oracle library (Hyperscan,
                                 * Jerasure, ISA-L, CRoaring) that configure
                                 * did not find. */
};

void test_note_skip(enum test_skip_kind, const char *test,
                    const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* Skips the current test for 'KIND', with a printf-like reason. */
#define test_skip(KIND, ...)                                \
    do {                                                    \
        test_note_skip(KIND, __func__, __VA_ARGS__);        \
        skip();                                             \
    } while (0)

/* Notes why the current test is about to fail (e.g. the missing file),
 * so that test-summary can say it; the test still fails by cmocka's
 * means. */
void test_note_failure(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/* Records the outcome of a group of 'n_tests' of which 'n_failed' failed
 * (cmocka_run_group_tests()'s result) and returns 'n_failed'. */
int test_report(const char *prog, size_t n_tests, int n_failed);

/* How many of the 'n' 'tests' run: those GPU_TEST_FILTER selects (the
 * programs give it to cmocka_set_test_filter()), else all. */
struct CMUnitTest;
size_t test_count_selected(const struct CMUnitTest *tests, size_t n);

/* Runs the cmocka group 'TESTS' (an array) and records its counts. */
#define test_run_group(PROG, TESTS)                                     \
    test_report(PROG,                                                   \
                test_count_selected(TESTS,                              \
                                    sizeof (TESTS) / sizeof (TESTS)[0]), \
                cmocka_run_group_tests(TESTS, NULL, NULL))

#endif /* tests/test-report.h */
