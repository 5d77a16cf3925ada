#include "tests/test-common.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t
test_seed_init(const char *prog)
{
    const char *env = getenv("GPU_TEST_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0)
                                : (uint64_t) time(NULL);

    printf("%s: GPU_TEST_SEED=0x%016" PRIx64 "\n", prog, seed);
    return seed;
}

int
test_backends_from_env(const char *prog, const char *var,
                       bool cuda_available, int cpu, int cuda,
                       int backends[2])
{
    const char *value = getenv(var);
    int n = 0;

    if (!value || !*value || !strcmp(value, "all")) {
        backends[n++] = cpu;
        if (cuda_available) {
            backends[n++] = cuda;
        }
    } else if (!strcmp(value, "cpu")) {
        backends[n++] = cpu;
    } else if (!strcmp(value, "cuda")) {
        if (!cuda_available) {
            fprintf(stderr, "%s: %s=cuda but no usable CUDA device (or no "
                    "CUDA build)\n", prog, var);
            return 0;
        }
        backends[n++] = cuda;
    } else {
        fprintf(stderr, "%s: %s must be cpu, cuda or all, not \"%s\"\n",
                prog, var, value);
        return 0;
    }
    return n;
}

#ifndef OVSGPU_DEFAULT_DATA
#define OVSGPU_DEFAULT_DATA "data"
#endif

const char *
test_data_dir(void)
{
    const char *env = getenv("OVSGPU_DATA");

    return env && *env ? env : OVSGPU_DEFAULT_DATA;
}

const char *
test_data_path(const char *rel)
{
    static char bufs[4][4096];
    static unsigned int next;
    char *buf = bufs[next++ % 4];

    snprintf(buf, sizeof bufs[0], "%s/%s", test_data_dir(), rel);
    return buf;
}

void
test_data_require(const char *path)
{
    FILE *f = fopen(path, "r");

    if (!f) {
        test_note_failure("missing data file %s", path);
        fail_msg("missing data file %s (the build unpacks it from the "
                 "repository's data/; OVSGPU_DATA names another folder)",
                 path);
    }
    fclose(f);
}

/* The skips recorded so far, as "skip: KIND: TEST: reason" lines, and the
 * failures noted, as "fail: reason" lines. */
static char *skip_lines;
static size_t n_skips;
static char *fail_lines;

/* Appends "KEY: TEXT\n" to '*lines', TEXT on one line. */
static void
add_line(char **lines, const char *key, char *text)
{
    size_t old = *lines ? strlen(*lines) : 0;
    size_t add = strlen(key) + strlen(text) + 4;

    for (char *p = text; *p; p++) {
        if (*p == '\n') {
            *p = ' ';
        }
    }
    *lines = realloc(*lines, old + add);
    snprintf(*lines + old, add, "%s: %s\n", key, text);
}

void
test_note_failure(const char *format, ...)
{
    char reason[512];
    va_list args;

    va_start(args, format);
    vsnprintf(reason, sizeof reason, format, args);
    va_end(args);
    add_line(&fail_lines, "fail", reason);
}

void
test_note_skip(enum test_skip_kind kind, const char *test,
               const char *format, ...)
{
    char reason[512];
    va_list args;

    va_start(args, format);
    vsnprintf(reason, sizeof reason, format, args);
    va_end(args);
    print_message("  SKIP %s: %s\n", test, reason);

    char line[1024];

    snprintf(line, sizeof line, "%s: %s: %s",
             kind == TEST_SKIP_NO_GPU ? "gpu" : "oracle", test, reason);
    add_line(&skip_lines, "skip", line);
    n_skips++;
}

size_t
test_count_selected(const struct CMUnitTest *tests, size_t n)
{
    const char *filter = getenv("GPU_TEST_FILTER");
    size_t k = 0;

    if (!filter || !*filter) {
        return n;
    }
    /* cmocka's filter: '*' and '?' wildcards, as fnmatch() has them. */
    for (size_t i = 0; i < n; i++) {
        k += !fnmatch(filter, tests[i].name, 0);
    }
    return k;
}

int
test_report(const char *prog, size_t n_tests, int n_failed)
{
    const char *path = getenv("OVSGPU_TEST_COUNTS");
    size_t failed = n_failed > 0 ? n_failed : 0;
    size_t passed = n_tests - (failed + n_skips < n_tests
                               ? failed + n_skips : n_tests);

    if (path && *path) {
        FILE *f = fopen(path, "w");

        if (!f) {
            fprintf(stderr, "%s: cannot write %s\n", prog, path);
            return n_failed ? n_failed : 1;
        }
        fprintf(f, "passed: %zu\nfailed: %zu\nskipped: %zu\n%s%s", passed,
                failed, n_skips, skip_lines ? skip_lines : "",
                fail_lines ? fail_lines : "");
        if (fclose(f)) {
            fprintf(stderr, "%s: cannot write %s\n", prog, path);
            return n_failed ? n_failed : 1;
        }
    }
    return n_failed;
}

double
test_monotonic_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
