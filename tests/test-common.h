/*
 * What the unit tests of every ovs-gpu library share: the random seed,
 * printed so that a failure can be replayed (GPU_TEST_SEED=0x...), and
 * the choice of backends to run (an environment variable set to "cpu",
 * "cuda" or "all"; unset is "all"); where the test data is; and the
 * record of skips and counts that scripts/test-summary reads.
 */
#ifndef TESTS_TEST_COMMON_H
#define TESTS_TEST_COMMON_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Random numbers: splitmix64, small and reproducible from one seed. */
struct rng {
    uint64_t s;
};

static inline uint64_t
rng_next(struct rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint32_t
rng_below(struct rng *r, uint32_t n)
{
    return n ? rng_next(r) % n : 0;
}

/* A generator for test case (a, b) of a run seeded with 'master', so that
 * each case's data depends on the printed seed and on nothing else. */
static inline struct rng
rng_for_case(uint64_t master, uint64_t a, uint64_t b)
{
    struct rng r = { master ^ (a * 0x100000001b3ULL) ^ (b << 32) };

    return r;
}

/* Returns GPU_TEST_SEED if set, else the time, after printing it as
 * "PROG: GPU_TEST_SEED=0x...". */
uint64_t test_seed_init(const char *prog);

/* Reads environment variable 'var' and stores in 'backends' the values to
 * test, in order: 'cpu' and, where 'cuda_available', 'cuda'.  Returns how
 * many (1 or 2), or 0 after printing why the setting cannot be honoured
 * (a bad value, or "cuda" without a device). */
int test_backends_from_env(const char *prog, const char *var,
                           bool cuda_available, int cpu, int cuda,
                           int backends[2]);

/* Milliseconds of CLOCK_MONOTONIC, for tests that bound a duration. */
double test_monotonic_ms(void);

/* Test data, skips and counts: tests/test-report.h. */
#include "tests/test-report.h"

#endif /* tests/test-common.h */
