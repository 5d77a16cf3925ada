/*
 * What the unit tests of every ovs-gpu library share: the random seed,
 * printed so that a failure can be replayed (GPU_TEST_SEED=0x...), and
 * the choice of backends to run (an environment variable set to "cpu",
 * "cuda" or "all"; unset is "all").
 */
#ifndef TESTS_TEST_COMMON_H
#define TESTS_TEST_COMMON_H 1

#include <stdbool.h>
#include <stdint.h>

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

#endif /* tests/test-common.h */
