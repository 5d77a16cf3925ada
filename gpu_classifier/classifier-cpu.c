/*
 * CPU backend: lookups run on the calling thread, straight from the host
 * mirror, under the table's read lock.  It is what CI tests, what runs
 * without a GPU, and the per-core peer in the benchmark.
 */
#include <config.h>

#include "gpu_classifier/classifier-private.h"

/* One key.  'n_words' is a constant where this is inlined below, so the
 * per-word loops of classifier-inline.h unroll. */
static inline __attribute__((always_inline)) uint32_t
cpu_lookup_one(const struct gpu_cls_table *t, const uint64_t *key,
               unsigned int n_words, int alg, bool hp)
{
    uint64_t best = 0;

    for (uint32_t i = 0; i < t->n_classes; i++) {
        const struct cls_class *c = t->classes[t->order[i]];
        const uint64_t *slot;

        /* Classes are sorted by max_priority: none after this one can beat
         * what we have (equal priority still can, by a lower handle). */
        if (hp && best && c->view.max_priority < (uint32_t) (best >> 32)) {
            break;
        }
        slot = gpu_cls_class_search(&c->view, c->view.mask, c->view.filter,
                                    key, n_words, alg);
        if (slot) {
            uint64_t rank;

            if (!hp) {
                return (uint32_t) slot[0];
            }
            rank = gpu_cls_rank(slot[0]);
            if (rank > best) {
                best = rank;
            }
        }
    }
    return gpu_cls_rank_handle(best);
}

static inline __attribute__((always_inline)) void
cpu_lookup_batch(const struct gpu_cls_table *t, const uint64_t *keys,
                 size_t n, uint32_t *results, unsigned int n_words, int alg)
{
    bool hp = t->cfg.semantics == GPU_CLS_HIGHEST_PRIORITY;

    for (size_t i = 0; i < n; i++) {
        results[i] = cpu_lookup_one(t, keys + i * n_words, n_words, alg, hp);
    }
}

#define CPU_LOOKUP_W(W)                                             \
    static void                                                     \
    cpu_lookup_w##W(const struct gpu_cls_table *t,                  \
                    const uint64_t *keys, size_t n, uint32_t *res,  \
                    int alg)                                        \
    {                                                               \
        cpu_lookup_batch(t, keys, n, res, W, alg);                  \
    }
CPU_LOOKUP_W(1)
CPU_LOOKUP_W(2)
CPU_LOOKUP_W(3)
CPU_LOOKUP_W(4)
CPU_LOOKUP_W(5)
CPU_LOOKUP_W(6)
CPU_LOOKUP_W(8)

static void
cpu_lookup_generic(const struct gpu_cls_table *t, const uint64_t *keys,
                   size_t n, uint32_t *res, int alg)
{
    cpu_lookup_batch(t, keys, n, res, t->cfg.n_words, alg);
}

static int
cpu_submit(struct gpu_cls_batch *b, struct gpu_stream *stream,
           const uint64_t *keys, size_t n_keys, uint32_t *results,
           bool device_buffers)
{
    struct gpu_cls_table *t = b->table;

    (void) stream;
    (void) device_buffers;
    if (!n_keys) {
        return GPU_OK;
    }
    pthread_rwlock_rdlock(&t->rwlock);
    int alg = gpu_cls_resolve_algorithm(t);
    switch (t->cfg.n_words) {
    case 1:
        cpu_lookup_w1(t, keys, n_keys, results, alg);
        break;
    case 2:
        cpu_lookup_w2(t, keys, n_keys, results, alg);
        break;
    case 3:
        cpu_lookup_w3(t, keys, n_keys, results, alg);
        break;
    case 4:
        cpu_lookup_w4(t, keys, n_keys, results, alg);
        break;
    case 5:
        cpu_lookup_w5(t, keys, n_keys, results, alg);
        break;
    case 6:
        cpu_lookup_w6(t, keys, n_keys, results, alg);
        break;
    case 8:
        cpu_lookup_w8(t, keys, n_keys, results, alg);
        break;
    default:
        cpu_lookup_generic(t, keys, n_keys, results, alg);
        break;
    }
    pthread_rwlock_unlock(&t->rwlock);
    return GPU_OK;
}

static int
cpu_done(struct gpu_cls_batch *b)
{
    (void) b;
    return GPU_OK;
}

const struct gpu_cls_provider gpu_cls_cpu_provider = {
    .name = "cpu",
    .type = GPU_CLS_BACKEND_CPU,
    /* Nanoseconds per key on one core, fitted to bench/classifier-bench
     * (FIRST_MATCH, 5-word keys; see docs/CLASSIFIER-NOTES.md). */
    .cost = {
        .linear_per_slot = 1.2,
        .hash_per_word = 1.2,
        .filter_test = 4.0,
        .probe_cached = 12.0,
        .probe_uncached = 30.0,
        .cache_bytes = 1 << 20,
        .bloom_fixed = 0.0,
    },
    .submit = cpu_submit,
    .poll = cpu_done,
    .wait = cpu_done,
};
