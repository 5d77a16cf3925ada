/*
 * Internals shared by the classifier core (classifier.c) and its backends
 * (classifier-cpu.c, classifier-cuda.cu).  Not part of the API.
 *
 * The core owns the host mirror of every table: classes, their cuckoo
 * slots and Bloom filters (with the counters that make deletion possible),
 * and the order in which lookups visit classes.  A backend ("provider",
 * like OVS's struct netdev_class) owns whatever lives beside that mirror
 * (device copies) and runs lookups.
 */
#ifndef GPU_CLASSIFIER_PRIVATE_H
#define GPU_CLASSIFIER_PRIVATE_H 1

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpu_classifier/gpu-classifier.h"
#include "gpu_classifier/classifier-inline.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cls_class {
    uint32_t id;                /* Index in table->classes[]. */
    uint32_t order_pos;         /* Index in table->order[]. */
    uint64_t mask_hash;
    struct cls_class *hnext;    /* Chain in table->mask_buckets[]. */

    /* Host mirror, laid out as classifier-inline.h describes. */
    uint64_t *buf;
    size_t buf_bytes;
    uint8_t *counters;          /* 32 per filter word: counting Bloom. */
    struct gpu_cls_dclass view; /* Pointers into 'buf'. */

    void *pdata;                /* The provider's, e.g. device storage. */
};

/* Cost model of one backend for AUTO: estimated cost of one key's lookup,
 * in arbitrary units (nanoseconds for the CPU). */
struct gpu_cls_cost {
    double linear_per_slot;         /* Check one slot (linear search). */
    double hash_per_word;           /* Mask + hash one key word. */
    double filter_test;             /* One Bloom filter test. */
    double probe_cached;            /* Cuckoo probes of a class, tables in
                                     * cache. */
    double probe_uncached;          /* The same, tables not in cache. */
    double cache_bytes;             /* What "in cache" holds. */
    double bloom_fixed;             /* Per key, Bloom only (CUDA: filters
                                     * staged into shared memory). */
};

struct gpu_cls_provider {
    const char *name;
    enum gpu_cls_backend type;
    struct gpu_cls_cost cost;

    int (*init)(struct gpu_cls_table *);
    void (*uninit)(struct gpu_cls_table *);

    /* Storage beside the host mirror for a new or rebuilt class, called
     * under the writer lock before the class is used.  GPU_OK or an error,
     * in which case the core drops the class and the insert fails. */
    int (*class_alloc)(struct gpu_cls_table *, struct cls_class *);
    /* 'cls' left the table; free its storage once lookups in flight that
     * may read it are done. */
    void (*class_free)(struct gpu_cls_table *, struct cls_class *);
    /* Bytes [ofs, ofs + len) of 'cls->buf' changed. */
    void (*class_dirty)(struct gpu_cls_table *, struct cls_class *,
                        size_t ofs, size_t len);
    /* cls->view changed (n_rules, max_priority, ...) or, with 'cls' NULL,
     * the set of classes or their order. */
    void (*meta_dirty)(struct gpu_cls_table *, struct cls_class *);

    int (*batch_init)(struct gpu_cls_batch *);
    void (*batch_uninit)(struct gpu_cls_batch *);
    int (*submit)(struct gpu_cls_batch *, struct gpu_stream *,
                  const uint64_t *keys, size_t n_keys, uint32_t *results,
                  bool device_buffers);
    int (*poll)(struct gpu_cls_batch *);
    int (*wait)(struct gpu_cls_batch *);
};

struct gpu_cls_table {
    struct gpu_cls_config cfg;
    const struct gpu_cls_provider *prov;
    void *pdata;

    /* Writers (and CUDA submitters, briefly) hold it for writing; CPU
     * lookups hold it for reading. */
    pthread_rwlock_t rwlock;

    /* Classes by id; NULL where free. */
    struct cls_class **classes;
    uint32_t n_class_ids;       /* Used prefix of classes[]. */
    uint32_t class_ids_alloc;
    uint32_t n_classes;         /* Non-null entries. */

    /* Ids of all classes in lookup order: by max_priority (highest
     * first) for HIGHEST_PRIORITY, so a search can stop once no later
     * class can beat what it found; by rule count (largest first) for
     * FIRST_MATCH, so hits come early.  Kept sorted incrementally. */
    uint32_t *order;

    /* Classes by mask. */
    struct cls_class **mask_buckets;
    uint32_t n_mask_buckets;    /* Power of 2. */

    uint64_t n_rules;
    uint64_t mem_bytes;
    uint64_t total_slots;       /* Sum of 3d over classes (for AUTO). */
    uint32_t seed_counter;

    enum gpu_cls_algorithm algorithm;

    /* Statistics (n_lookups and n_batches are updated atomically). */
    uint64_t n_grows, n_rebuilds, n_lookups, n_batches, n_upload_bytes;

    /* Batches for gpu_cls_lookup(), reused. */
    pthread_mutex_t pool_mutex;
    struct gpu_cls_batch *pool;
};

struct gpu_cls_batch {
    struct gpu_cls_table *table;
    size_t max_keys;
    struct gpu_cls_batch *pool_next;
    void *pdata;
};

/* The algorithm (GPU_CLS_ALG_*) a lookup should run now.  Caller holds the
 * table's lock (either way). */
int gpu_cls_resolve_algorithm(const struct gpu_cls_table *);

extern const struct gpu_cls_provider gpu_cls_cpu_provider;
#ifdef HAVE_CUDA
extern const struct gpu_cls_provider gpu_cls_cuda_provider;
/* Nonzero if the CUDA backend has a usable device. */
int gpu_cls_cuda_probe(void);
#endif

#ifdef __cplusplus
}
#endif

#endif /* classifier-private.h */
