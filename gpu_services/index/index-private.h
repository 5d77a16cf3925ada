/*
 * Internals shared by the index core (index.c) and its backends
 * (index-cpu.c, index-cuda.cu).  Not part of the API.
 *
 * A backend is a provider, like OVS's struct netdev_class: a table of
 * functions chosen once when the builder is created.
 */
#ifndef GPU_INDEX_PRIVATE_H
#define GPU_INDEX_PRIVATE_H 1

#include <stdbool.h>
#include <stdint.h>

#include "gpu_services/index/gpu-index.h"
#include "gpu_services/index/index-inline.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gpu_index_provider {
    const char *name;
    enum gpu_index_backend type;

    /* Sets up 'b->pdata' for batches of up to b->max_rows rows. */
    int (*init)(struct gpu_index_builder *b);
    void (*uninit)(struct gpu_index_builder *b);
    /* As gpu_index_build(), arguments already checked. */
    int (*build)(struct gpu_index_builder *b, const uint32_t *values,
                 uint32_t n, unsigned int bits, enum gpu_index_encoding,
                 unsigned int flags, struct gpu_index_bitmaps *out,
                 struct gpu_index_build_times *times);

    /* A segment's indexes from its records, the columns computed where
     * the builds run (ix_attr_value()).  'load_records' makes records
     * [0, n) the source of the following 'build_attr' calls, which are
     * as 'build' for column 'attr' of those records. */
    int (*load_records)(struct gpu_index_builder *b,
                        const struct gpu_index_record *recs, uint32_t n);
    int (*build_attr)(struct gpu_index_builder *b, int attr, uint32_t n,
                      enum gpu_index_encoding,
                      struct gpu_index_bitmaps *out);
};

struct gpu_index_builder {
    const struct gpu_index_provider *prov;
    uint32_t max_rows;
    void *pdata;
    uint64_t n_fallbacks;
    unsigned int faults_left;   /* Injected (test only), atomic. */
    int fault_error;
    char describe[300];
};

extern const struct gpu_index_provider gpu_index_cpu_provider;
#ifdef HAVE_CUDA
extern const struct gpu_index_provider gpu_index_cuda_provider;
/* Fills 'name' with the device's name; nonzero if a device is usable. */
int gpu_index_cuda_probe(char *name, size_t size);
#endif

/* The CPU builder (index-cpu.c), also the CUDA backend's fallback.
 * '*statep' keeps its allocations for the next call (NULL: none kept). */
int gpu_index_cpu_build(void **statep, const uint32_t *values, uint32_t n,
                        unsigned int bits, enum gpu_index_encoding,
                        struct gpu_index_bitmaps *out);

double gpu_index_now_ms(void);

#ifdef __cplusplus
}
#endif

#endif /* index-private.h */
