#include "tests/test-common.h"

#include <inttypes.h>
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
