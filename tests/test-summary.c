/*
 * Tests of scripts/test-summary, the closing line of "scripts/ovs-gpu
 * test": in fabricated build directories, a failing layer whose log is
 * full of reassuring words is still a failure; passing layers pass; a
 * skip for an absent GPU is named with its reason and passes; a skip for
 * anything else, a layer that did not run, a record that contradicts its
 * exit status, and a failed "make check" all fail.  A test of OVS's
 * testsuite that fails once and passes when run again passes its layer
 * and is named; one that fails twice fails it.  The summary once
 * called a failed DPDK smoke test a skip because its log said "0
 * skipped" about something else.
 *
 * Environment:
 *   OVSGPU_TEST_SUMMARY  the script to test (default: the source tree's).
 */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/test-common.h"

#ifndef OVSGPU_SRCDIR
#define OVSGPU_SRCDIR "."
#endif

/* A fabricated build directory. */
struct build {
    char dir[256];
    char out[16384];            /* What the summary printed. */
    char last[512];             /* Its last line. */
    int status;                 /* Its exit status. */
};

static void
build_init(struct build *b)
{
    memset(b, 0, sizeof *b);
    snprintf(b->dir, sizeof b->dir, "%s/ovsgpu-summary-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(b->dir));
}

static void
build_destroy(struct build *b)
{
    char cmd[512];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", b->dir);
    assert_int_equal(system(cmd), 0);
}

/* Writes 'text' to 'rel' in the build directory, making its folder. */
static void
put(struct build *b, const char *rel, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", b->dir, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    mkdir(path, 0755);
    *slash = '/';
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* Runs the summary on the build directory, with 'extra' arguments. */
static void
summarize(struct build *b, const char *extra)
{
    const char *script = getenv("OVSGPU_TEST_SUMMARY");
    char cmd[1024];
    size_t n;
    FILE *p;

    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' %s 2>&1",
             script && *script ? script
                               : OVSGPU_SRCDIR "/scripts/test-summary",
             b->dir, extra ? extra : "");
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(b->out, 1, sizeof b->out - 1, p);
    b->out[n] = '\0';
    int st = pclose(p);
    assert_true(WIFEXITED(st));
    b->status = WEXITSTATUS(st);

    /* The last non-empty line. */
    while (n && b->out[n - 1] == '\n') {
        b->out[--n] = '\0';
    }
    const char *nl = strrchr(b->out, '\n');
    const char *last = nl ? nl + 1 : b->out;
    size_t len = strlen(last);

    len = len < sizeof b->last - 1 ? len : sizeof b->last - 1;
    memcpy(b->last, last, len);
    b->last[len] = '\0';
    print_message("%s\n", b->out);
}

static void
assert_failed(const struct build *b)
{
    assert_int_not_equal(b->status, 0);
    assert_non_null(strstr(b->last, "tests: "));
    assert_null(strstr(b->last, " 0 failed"));
}

static void
assert_passed(const struct build *b)
{
    assert_int_equal(b->status, 0);
    assert_non_null(strstr(b->last, " 0 failed"));
}

static const char *pass_ids =
    "layer: test-ids\nstatus: 0\npassed: 12\nfailed: 0\nskipped: 0\n";
static const char *pass_ovs =
    "layer: OVS testsuite\nstatus: 0\npassed: 40\nfailed: 0\nskipped: 0\n";

/* Words that the old summary read as a verdict, in every log. */
static void
put_misleading_logs(struct build *b)
{
    static const char *lies =
        "gpu-ids: ruleset demo: 3 rules loaded, 0 skipped\n"
        "smoke test passed\n"
        "[  PASSED  ] 5 test(s).\n"
        "[  SKIPPED ] 1 test(s).\n"
        "All 5 tests were successful.\n"
        "1 test was skipped.\n";

    put(b, "dpdk-smoke.log", lies);
    put(b, "tests/test-ids.log", lies);
    put(b, "testsuite-ovs.log", lies);
    put(b, "dpcls-peer-check.log", lies);
}

/* The failed DPDK smoke test of issue 14: exit 1, log full of "passed"
 * and "skipped". */
static void
test_failed_layer_with_misleading_log(void **state)
{
    struct build b;

    build_init(&b);
    put_misleading_logs(&b);
    put(&b, "results/expected", "test-ids\novs-testsuite\ndpdk-smoke\n");
    put(&b, "results/test-ids.result", pass_ids);
    put(&b, "results/ovs-testsuite.result", pass_ovs);
    put(&b, "results/dpdk-smoke.result",
        "layer: DPDK smoke\nstatus: 1\npassed: 0\nfailed: 1\nskipped: 0\n"
        "fail: missing data file data/classbench/acl1_10000\n");
    summarize(&b, NULL);
    assert_failed(&b);
    assert_non_null(strstr(b.last, "1 failed"));
    assert_non_null(strstr(b.out, "DPDK smoke"));
    /* What the layer said failed, e.g. which file is missing. */
    assert_non_null(strstr(b.out, "missing data file "
                           "data/classbench/acl1_10000"));
    build_destroy(&b);
}

/* A layer whose counts say all passed but whose exit status says not:
 * the exit status wins. */
static void
test_counts_contradict_status(void **state)
{
    struct build b;

    build_init(&b);
    put_misleading_logs(&b);
    put(&b, "results/test-ids.result",
        "layer: test-ids\nstatus: 139\npassed: 12\nfailed: 0\n"
        "skipped: 0\n");
    summarize(&b, NULL);
    assert_failed(&b);
    assert_non_null(strstr(b.out, "exit status 139"));
    build_destroy(&b);
}

static void
test_all_passed(void **state)
{
    struct build b;

    build_init(&b);
    put_misleading_logs(&b);
    put(&b, "results/expected", "test-ids\novs-testsuite\n");
    put(&b, "results/test-ids.result", pass_ids);
    put(&b, "results/ovs-testsuite.result", pass_ovs);
    summarize(&b, "--make-status 0");
    assert_passed(&b);
    assert_string_equal(b.last, "tests: 52 passed, 0 failed, 0 skipped");
    build_destroy(&b);
}

/* A skip for an absent GPU passes, and the summary says which and why. */
static void
test_skip_with_reason(void **state)
{
    struct build b;

    build_init(&b);
    put(&b, "results/test-ids.result", pass_ids);
    put(&b, "results/test-index.result",
        "layer: test-index\nstatus: 0\npassed: 9\nfailed: 0\nskipped: 2\n"
        "skip: gpu: test_cpu_vs_cuda: no CUDA device\n"
        "skip: oracle: test_roaring: built without CRoaring\n");
    summarize(&b, NULL);
    assert_passed(&b);
    assert_string_equal(b.last, "tests: 21 passed, 0 failed, 2 skipped");
    assert_non_null(strstr(b.out, "test_cpu_vs_cuda: no CUDA device"));
    assert_non_null(strstr(b.out, "test_roaring: built without CRoaring"));
    build_destroy(&b);
}

/* Skips without a reason, or for missing data, fail. */
static void
test_skip_not_allowed(void **state)
{
    static const char *records[] = {
        "layer: test-classifier\nstatus: 0\npassed: 9\nfailed: 0\n"
        "skipped: 1\nskip: data: test_classbench_acl1: cannot read it\n",
        "layer: test-classifier\nstatus: 0\npassed: 9\nfailed: 0\n"
        "skipped: 1\n",
        "layer: dpdk-smoke\nstatus: 77\npassed: 0\nfailed: 0\nskipped: 0\n",
    };

    for (size_t i = 0; i < sizeof records / sizeof *records; i++) {
        struct build b;

        build_init(&b);
        put(&b, "results/test-ids.result", pass_ids);
        put(&b, "results/layer.result", records[i]);
        summarize(&b, NULL);
        assert_failed(&b);
        build_destroy(&b);
    }
}

/* An expected layer without a record, an unreadable record, no records
 * at all, and a failed "make check" with passing layers all fail. */
static void
test_missing_and_make_status(void **state)
{
    struct build b;

    build_init(&b);
    put(&b, "results/expected", "test-ids\nkernel-emu\n");
    put(&b, "results/test-ids.result", pass_ids);
    summarize(&b, NULL);
    assert_failed(&b);
    assert_non_null(strstr(b.out, "did not run"));
    build_destroy(&b);

    build_init(&b);
    put(&b, "results/test-ids.result", "layer: test-ids\nstatus: zero\n");
    summarize(&b, NULL);
    assert_failed(&b);
    build_destroy(&b);

    build_init(&b);
    put_misleading_logs(&b);
    summarize(&b, NULL);
    assert_failed(&b);
    build_destroy(&b);

    build_init(&b);
    put(&b, "results/test-ids.result", pass_ids);
    summarize(&b, "--make-status 2");
    assert_failed(&b);
    build_destroy(&b);
}

/* Runs tests/layer-result on 'program' (a script in the build directory)
 * there, with 'prefix' as OVSGPU_LAYER_PREFIX, and returns its exit
 * status.  Both variables are given, since check-sanitizers runs this
 * test with its own. */
static int
layer_result_run(struct build *b, const char *prefix, const char *program)
{
    char cmd[1024];

    snprintf(cmd, sizeof cmd, "cd '%s' && chmod +x '%s' && "
             "OVSGPU_RESULTS=results OVSGPU_LAYER_PREFIX='%s' "
             "sh '%s/tests/layer-result' run ./%s > /dev/null 2>&1",
             b->dir, program, prefix, OVSGPU_SRCDIR, program);
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* The same test run again in another build (check-sanitizers, with
 * OVSGPU_LAYER_PREFIX) is a layer of its own: its failure fails the
 * summary, by its prefixed name, though the unprefixed layer passed. */
static void
test_prefixed_layer(void **state)
{
    struct build b;

    build_init(&b);
    put(&b, "results/expected", "t\nsanitizers-t\n");
    put(&b, "t", "exit 0\n");
    assert_int_equal(layer_result_run(&b, "", "t"), 0);
    put(&b, "t", "echo heap-buffer-overflow; exit 1\n");
    assert_int_equal(layer_result_run(&b, "sanitizers-", "t"), 1);
    summarize(&b, NULL);
    assert_failed(&b);
    assert_non_null(strstr(b.out, "sanitizers-t "));
    assert_non_null(strstr(b.out, "FAILED: exit status 1"));

    put(&b, "t", "exit 0\n");
    assert_int_equal(layer_result_run(&b, "sanitizers-", "t"), 0);
    summarize(&b, NULL);
    assert_passed(&b);
    build_destroy(&b);
}

/* Runs 'cmd' in the build directory with OVSGPU_RESULTS=results and
 * returns its exit status. */
static int
run_in(struct build *b, const char *cmd)
{
    char full[2048];

    snprintf(full, sizeof full, "cd '%s' && OVSGPU_RESULTS=results %s "
             "> run.out 2>&1", b->dir, cmd);
    int st = system(full);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* A stand-in for "make -C OVS_BUILDDIR check TESTSUITEFLAGS=..." that
 * acts as OVS's testsuite of 10 tests would: test 7 fails
 * the first time only, test 8 the first time and, with BROKEN=yes, the
 * second too.  The first run must name the tests; the second must be a
 * --recheck that keeps the job count and names none. */
static const char *fake_make =
    "t=$2/tests; flags=${4#TESTSUITEFLAGS=}\n"
    "mkdir -p $t/testsuite.dir\n"
    "case $flags in\n"
    "'1 2 3 4 5 6 7 8 9 10 -j2')\n"
    "    mkdir -p $t/testsuite.dir/7 $t/testsuite.dir/8\n"
    "    { echo '  7: foo.at:20     flaky one   FAILED (foo.at:25)'\n"
    "      echo '  8: foo.at:30     broken one  FAILED (foo.at:33)'\n"
    "      echo '## Detailed failed tests. ##'\n"
    "      echo 'the line looked for is not in the log yet'\n"
    "    } > $t/testsuite.log\n"
    "    exit 1 ;;\n"
    "'--recheck -j2')\n"
    "    rm -rf $t/testsuite.dir/7\n"
    "    test \"$BROKEN\" = yes || rm -rf $t/testsuite.dir/8\n"
    "    echo '  7: foo.at:20     flaky one   ok' > $t/testsuite.log\n"
    "    test ! -d $t/testsuite.dir/8 ;;\n"
    "*) echo \"unexpected flags: $flags\"; exit 99 ;;\n"
    "esac\n";

/* OVS's testsuite run through tests/ovs-testsuite-run: a test that fails
 * once and passes the second time passes its layer and is named in the
 * summary, with the first run's log kept; a test that fails twice fails
 * the layer. */
static void
test_autotest_rerun(void **state)
{
    for (int broken = 0; broken < 2; broken++) {
        char cmd[1024];
        struct build b;

        build_init(&b);
        put(&b, "fake-make", fake_make);
        put(&b, "ovs/.keep", "");
        put(&b, "ovs/tests/.keep", "");
        put(&b, "results/expected", "ovs-testsuite\n");
        snprintf(cmd, sizeof cmd,
                 "BROKEN=%s MAKE='sh ./fake-make' sh '%s/tests/"
                 "ovs-testsuite-run' ovs first.log 1 2 3 4 5 6 7 8 9 10 -j2",
                 broken ? "yes" : "no", OVSGPU_SRCDIR);
        int status = run_in(&b, cmd);
        assert_int_equal(status, broken ? 1 : 0);
        snprintf(cmd, sizeof cmd, "sh '%s/tests/layer-result' autotest "
                 "ovs-testsuite 'OVS testsuite' %d ovs/tests 10 first.log",
                 OVSGPU_SRCDIR, status);
        assert_int_equal(run_in(&b, cmd), 0);
        summarize(&b, NULL);
        if (broken) {
            assert_failed(&b);
            assert_non_null(strstr(b.last, "9 passed, 1 failed, 0 skipped"));
            assert_null(strstr(b.out, "second run: test 8"));
        } else {
            assert_passed(&b);
            assert_non_null(strstr(b.last, "10 passed, 0 failed, 0 skipped"));
            assert_non_null(strstr(b.out, "second run: test 8"));
        }
        assert_non_null(strstr(b.out, "passed on a second run: test 7: "
                               "flaky one (the first run's log: "
                               "first.log)"));
        /* The first run's log, printed for CI's output and kept. */
        assert_int_equal(run_in(&b, "grep -q 'not in the log yet' "
                                "first.log"), 0);
        build_destroy(&b);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failed_layer_with_misleading_log),
        cmocka_unit_test(test_counts_contradict_status),
        cmocka_unit_test(test_all_passed),
        cmocka_unit_test(test_skip_with_reason),
        cmocka_unit_test(test_skip_not_allowed),
        cmocka_unit_test(test_missing_and_make_status),
        cmocka_unit_test(test_prefixed_layer),
        cmocka_unit_test(test_autotest_rerun),
    };

    return test_run_group("test-summary", tests);
}
