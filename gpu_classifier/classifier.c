/*
 * Classifier core: the host mirror of a table (classes, cuckoo slots,
 * counting Bloom filters, lookup order), rule insertion and removal, the
 * AUTO cost model, and the batch API, which it hands to a backend.
 */
#include <config.h>

#include "gpu_classifier/gpu-classifier.h"
#include "gpu_classifier/classifier-private.h"

#include <stdlib.h>
#include <string.h>

/* Smallest class table: 3 subtables of 4 slots. */
#define MIN_LOG2_D 2
/* Grow a class when an insert would take it past 90% of its slots
 * (GSwitch's load; 3-way cuckoo hashing holds up to ~91%). */
#define MAX_LOAD_PERCENT 90
/* Evictions one insert may make before the class is rebuilt with a new
 * hash seed. */
#define MAX_KICKS 500
/* Rebuilds with new seeds at one size before the class is grown. */
#define MAX_REBUILDS 4

static uint64_t
mask_hash(const uint64_t *mask, unsigned int n_words)
{
    /* Any fixed hash will do: this only finds a class by its mask. */
    uint64_t h = 0x243f6a8885a308d3ULL ^ n_words;
    for (unsigned int i = 0; i < n_words; i++) {
        h = gpu_cls_rotl64((h ^ mask[i]) * 0xff51afd7ed558ccdULL, 29);
    }
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

static size_t
class_bytes(unsigned int n_words, uint32_t log2_d, uint32_t log2_fw)
{
    return n_words * sizeof(uint64_t)
           + (sizeof(uint32_t) << log2_fw)
           + ((size_t) GPU_CLS_SUBTABLES << log2_d)
             * (n_words + 1) * sizeof(uint64_t);
}

static uint32_t
table_rand(struct gpu_cls_table *t)
{
    /* xorshift32: only for choosing which slot to evict; writers hold the
     * lock, so no atomics needed. */
    uint32_t x = t->seed_counter;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    t->seed_counter = x;
    return x;
}

static void
class_free_host(struct cls_class *c)
{
    if (c) {
        free(c->buf);
        free(c->counters);
        free(c);
    }
}

/* A new, empty class that is not yet in any table. */
static struct cls_class *
class_new(const struct gpu_cls_table *t, const uint64_t *mask,
          uint32_t log2_d, uint32_t seed)
{
    unsigned int n_words = t->cfg.n_words;
    uint32_t log2_fw = log2_d + GPU_CLS_FILTER_WORDS_LOG2_PER_D;
    struct cls_class *c = calloc(1, sizeof *c);
    size_t bytes = class_bytes(n_words, log2_d, log2_fw);

    if (!c) {
        return NULL;
    }
    /* Round up for aligned_alloc(), which wants a multiple of the
     * alignment; 64 bytes keeps slots from straddling more cache lines
     * than they must. */
    c->buf_bytes = bytes;
    c->buf = aligned_alloc(64, (bytes + 63) & ~(size_t) 63);
    c->counters = calloc((size_t) 32 << log2_fw, 1);
    if (!c->buf || !c->counters) {
        class_free_host(c);
        return NULL;
    }
    memcpy(c->buf, mask, n_words * sizeof(uint64_t));
    memset((char *) c->buf + n_words * sizeof(uint64_t), 0,
           sizeof(uint32_t) << log2_fw);
    c->view.mask = c->buf;
    c->view.filter = (uint32_t *) (c->buf + n_words);
    c->view.slots = (uint64_t *) ((char *) c->buf
                                  + n_words * sizeof(uint64_t)
                                  + (sizeof(uint32_t) << log2_fw));
    memset((void *) c->view.slots, 0xff,
           ((size_t) GPU_CLS_SUBTABLES << log2_d)
           * (n_words + 1) * sizeof(uint64_t));
    c->view.log2_d = log2_d;
    c->view.log2_fw = log2_fw;
    c->view.seed = seed;
    c->mask_hash = mask_hash(mask, n_words);
    return c;
}

static uint64_t *
class_slot(const struct gpu_cls_table *t, const struct cls_class *c,
           uint32_t idx)
{
    return (uint64_t *) c->view.slots + (size_t) idx * (t->cfg.n_words + 1);
}

static void
notify_slot(struct gpu_cls_table *t, struct cls_class *c, uint32_t idx)
{
    if (t->prov->class_dirty) {
        size_t stride = (t->cfg.n_words + 1) * sizeof(uint64_t);
        size_t ofs = (const char *) c->view.slots - (const char *) c->buf;

        t->prov->class_dirty(t, c, ofs + idx * stride, stride);
    }
}

static void
notify_filter_word(struct gpu_cls_table *t, struct cls_class *c,
                   uint32_t word)
{
    if (t->prov->class_dirty) {
        size_t ofs = (const char *) c->view.filter - (const char *) c->buf;

        t->prov->class_dirty(t, c, ofs + word * sizeof(uint32_t),
                             sizeof(uint32_t));
    }
}

static void
notify_meta(struct gpu_cls_table *t, struct cls_class *c)
{
    if (t->prov->meta_dirty) {
        t->prov->meta_dirty(t, c);
    }
}

/* Counting Bloom filter: the host keeps an 8-bit counter per bit so that a
 * removal clears a bit only when no other rule set it.  A counter that
 * reaches 255 sticks there: its bit then stays set for good, which costs
 * false positives but never a false negative. */
static void
bloom_add(struct gpu_cls_table *t, struct cls_class *c, uint64_t h,
          bool notify)
{
    uint32_t word = gpu_cls_bloom_word(h, c->view.log2_fw);
    uint32_t bits = gpu_cls_bloom_bits(h, c->view.log2_fw);
    uint32_t *filter = (uint32_t *) c->view.filter;
    uint32_t old = filter[word];

    for (uint32_t b = 0; b < 32; b++) {
        if (bits & (1u << b)) {
            uint8_t *cnt = &c->counters[word * 32 + b];

            if (*cnt < UINT8_MAX) {
                (*cnt)++;
            }
        }
    }
    filter[word] |= bits;
    if (notify && filter[word] != old) {
        notify_filter_word(t, c, word);
    }
}

static void
bloom_remove(struct gpu_cls_table *t, struct cls_class *c, uint64_t h)
{
    uint32_t word = gpu_cls_bloom_word(h, c->view.log2_fw);
    uint32_t bits = gpu_cls_bloom_bits(h, c->view.log2_fw);
    uint32_t *filter = (uint32_t *) c->view.filter;
    uint32_t old = filter[word];

    for (uint32_t b = 0; b < 32; b++) {
        if (bits & (1u << b)) {
            uint8_t *cnt = &c->counters[word * 32 + b];

            if (*cnt < UINT8_MAX && --*cnt == 0) {
                filter[word] &= ~(1u << b);
            }
        }
    }
    if (filter[word] != old) {
        notify_filter_word(t, c, word);
    }
}

/* Cuckoo insertion of 'item' (word 0 and the masked value) into 'c'.
 * Records the slots it swapped with in 'path' (at most MAX_KICKS + 1) and
 * their number in '*n_swaps' so that a failed insert can be undone.
 * Returns true on success.  Returns false if after MAX_KICKS evictions an
 * item is still homeless: then 'item' holds that item and the class holds
 * all the others. */
static bool
cuckoo_insert(struct gpu_cls_table *t, struct cls_class *c, uint64_t *item,
              bool notify, uint32_t *path, int *n_swaps)
{
    unsigned int n_words = t->cfg.n_words;
    size_t stride = n_words + 1;
    unsigned int last = GPU_CLS_SUBTABLES;
    uint64_t tmp[GPU_CLS_MAX_WORDS + 1];
    int n = 0;

    for (int kick = 0; kick <= MAX_KICKS; kick++) {
        uint64_t h = gpu_cls_hash(item + 1, c->view.mask, n_words,
                                  c->view.seed);
        uint32_t idx = 0;
        unsigned int i;

        for (i = 0; i < GPU_CLS_SUBTABLES; i++) {
            idx = gpu_cls_cuckoo_index(h, i, c->view.log2_d);
            if (class_slot(t, c, idx)[0] == GPU_CLS_EMPTY_SLOT) {
                break;
            }
        }
        if (i == GPU_CLS_SUBTABLES) {
            if (kick == MAX_KICKS) {
                break;
            }
            /* Evict from a random subtable other than the one this item
             * was just evicted from (it would come straight back). */
            do {
                i = table_rand(t) % GPU_CLS_SUBTABLES;
            } while (i == last);
            idx = gpu_cls_cuckoo_index(h, i, c->view.log2_d);
        }

        uint64_t *slot = class_slot(t, c, idx);
        memcpy(tmp, slot, stride * sizeof(uint64_t));
        memcpy(slot, item, stride * sizeof(uint64_t));
        memcpy(item, tmp, stride * sizeof(uint64_t));
        if (path) {
            path[n] = idx;
        }
        n++;
        if (notify) {
            notify_slot(t, c, idx);
        }
        if (item[0] == GPU_CLS_EMPTY_SLOT) {
            *n_swaps = n;
            return true;
        }
        last = i;
    }
    *n_swaps = n;
    return false;
}

/* Undoes a failed cuckoo_insert() of 'n' swaps: afterwards 'item' is the
 * item that was being inserted and the slots are as before. */
static void
cuckoo_undo(struct gpu_cls_table *t, struct cls_class *c, uint64_t *item,
            const uint32_t *path, int n)
{
    size_t stride = t->cfg.n_words + 1;
    uint64_t tmp[GPU_CLS_MAX_WORDS + 1];

    while (n-- > 0) {
        uint64_t *slot = class_slot(t, c, path[n]);

        memcpy(tmp, slot, stride * sizeof(uint64_t));
        memcpy(slot, item, stride * sizeof(uint64_t));
        memcpy(item, tmp, stride * sizeof(uint64_t));
        notify_slot(t, c, path[n]);
    }
}

static void
class_recompute_max_priority(const struct gpu_cls_table *t,
                             struct cls_class *c)
{
    uint32_t n = GPU_CLS_SUBTABLES << c->view.log2_d;
    uint32_t max = 0;

    for (uint32_t i = 0; i < n; i++) {
        uint64_t w0 = class_slot(t, c, i)[0];

        if (w0 != GPU_CLS_EMPTY_SLOT && (uint32_t) (w0 >> 32) > max) {
            max = w0 >> 32;
        }
    }
    c->view.max_priority = max;
}

static int
nomem_code(const struct gpu_cls_table *t)
{
    return t->prov->type == GPU_CLS_BACKEND_CUDA ? GPU_ERR_DEVICE_NOMEM
                                                 : GPU_ERR_NOMEM;
}

static bool
over_limit(const struct gpu_cls_table *t, size_t freed, size_t added)
{
    return t->cfg.mem_limit
           && t->mem_bytes - freed + added > t->cfg.mem_limit;
}

/* Builds a replacement for 'old' (which may be NULL for a new class) with
 * 2^log2_d slots per subtable, holding old's rules plus 'extra' (word 0
 * and value, or NULL).  Tries new hash seeds, then doubles, until every
 * rule fits.  Storage is checked against the memory limit and allocated
 * from the provider.  Returns GPU_OK with '*newp' ready but not yet in
 * the table. */
static int
class_build(struct gpu_cls_table *t, const struct cls_class *old,
            const uint64_t *mask, uint32_t log2_d, const uint64_t *extra,
            struct cls_class **newp)
{
    unsigned int n_words = t->cfg.n_words;
    size_t stride = n_words + 1;
    uint64_t item[GPU_CLS_MAX_WORDS + 1];
    size_t old_bytes = old ? old->buf_bytes : 0;
    int tries = 0;

    for (;;) {
        uint32_t log2_fw = log2_d + GPU_CLS_FILTER_WORDS_LOG2_PER_D;
        struct cls_class *c;
        bool ok = true;

        if (log2_d > GPU_CLS_MAX_LOG2_D) {
            return nomem_code(t);
        }
        if (over_limit(t, old_bytes, class_bytes(n_words, log2_d,
                                                 log2_fw))) {
            return nomem_code(t);
        }
        c = class_new(t, mask, log2_d, table_rand(t));
        if (!c) {
            return GPU_ERR_NOMEM;
        }

        uint32_t n_old = old ? GPU_CLS_SUBTABLES << old->view.log2_d : 0;
        for (uint32_t i = 0; ok && i <= n_old; i++) {
            const uint64_t *src;

            if (i < n_old) {
                src = class_slot(t, old, i);
                if (src[0] == GPU_CLS_EMPTY_SLOT) {
                    continue;
                }
            } else if (extra) {
                src = extra;
            } else {
                break;
            }
            int n_swaps;

            memcpy(item, src, stride * sizeof(uint64_t));
            if (!cuckoo_insert(t, c, item, false, NULL, &n_swaps)) {
                ok = false;
                break;
            }
            bloom_add(t, c, gpu_cls_hash(src + 1, mask, n_words,
                                         c->view.seed), false);
            c->view.n_rules++;
            if ((uint32_t) (src[0] >> 32) > c->view.max_priority) {
                c->view.max_priority = src[0] >> 32;
            }
        }
        if (ok) {
            int err = t->prov->class_alloc ? t->prov->class_alloc(t, c)
                                           : GPU_OK;
            if (err) {
                class_free_host(c);
                return err;
            }
            *newp = c;
            return GPU_OK;
        }
        class_free_host(c);
        if (++tries >= MAX_REBUILDS) {
            tries = 0;
            log2_d++;
        }
    }
}

static struct cls_class *
find_class(const struct gpu_cls_table *t, const uint64_t *mask)
{
    uint64_t h = mask_hash(mask, t->cfg.n_words);
    struct cls_class *c;

    for (c = t->mask_buckets[h & (t->n_mask_buckets - 1)]; c;
         c = c->hnext) {
        if (c->mask_hash == h
            && !memcmp(c->view.mask, mask,
                       t->cfg.n_words * sizeof(uint64_t))) {
            return c;
        }
    }
    return NULL;
}

static void
bucket_insert(struct gpu_cls_table *t, struct cls_class *c)
{
    struct cls_class **b = &t->mask_buckets[c->mask_hash
                                            & (t->n_mask_buckets - 1)];

    c->hnext = *b;
    *b = c;
}

static void
bucket_remove(struct gpu_cls_table *t, struct cls_class *c)
{
    struct cls_class **p = &t->mask_buckets[c->mask_hash
                                            & (t->n_mask_buckets - 1)];

    while (*p != c) {
        p = &(*p)->hnext;
    }
    *p = c->hnext;
}

static int
grow_buckets(struct gpu_cls_table *t)
{
    uint32_t n = t->n_mask_buckets * 2;
    struct cls_class **b = calloc(n, sizeof *b);

    if (!b) {
        return GPU_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < t->n_mask_buckets; i++) {
        struct cls_class *c, *next;

        for (c = t->mask_buckets[i]; c; c = next) {
            next = c->hnext;
            c->hnext = b[c->mask_hash & (n - 1)];
            b[c->mask_hash & (n - 1)] = c;
        }
    }
    free(t->mask_buckets);
    t->mask_buckets = b;
    t->n_mask_buckets = n;
    return GPU_OK;
}

/* True if 'a' should be visited before 'b'. */
static bool
order_before(const struct gpu_cls_table *t, const struct cls_class *a,
             const struct cls_class *b)
{
    if (t->cfg.semantics == GPU_CLS_HIGHEST_PRIORITY) {
        return a->view.max_priority > b->view.max_priority;
    }
    return a->view.n_rules > b->view.n_rules;
}

static void
order_swap(struct gpu_cls_table *t, uint32_t i, uint32_t j)
{
    uint32_t tmp = t->order[i];

    t->order[i] = t->order[j];
    t->order[j] = tmp;
    t->classes[t->order[i]]->order_pos = i;
    t->classes[t->order[j]]->order_pos = j;
}

/* Moves 'c' to its place in t->order after its key changed.  The order
 * stays sorted because only one class changes at a time. */
static void
order_fix(struct gpu_cls_table *t, struct cls_class *c)
{
    uint32_t pos = c->order_pos;
    bool moved = false;

    while (pos > 0 && order_before(t, c, t->classes[t->order[pos - 1]])) {
        order_swap(t, pos, pos - 1);
        pos--;
        moved = true;
    }
    while (pos + 1 < t->n_classes
           && order_before(t, t->classes[t->order[pos + 1]], c)) {
        order_swap(t, pos, pos + 1);
        pos++;
        moved = true;
    }
    if (moved) {
        notify_meta(t, NULL);
    }
}

/* Adds new class 'c' to the table. */
static int
class_register(struct gpu_cls_table *t, struct cls_class *c)
{
    uint32_t id;

    if (t->n_classes + 1 > t->n_mask_buckets && grow_buckets(t)) {
        return GPU_ERR_NOMEM;
    }
    for (id = 0; id < t->n_class_ids && t->classes[id]; id++) {
        continue;
    }
    if (id == t->class_ids_alloc) {
        uint32_t n = t->class_ids_alloc ? 2 * t->class_ids_alloc : 16;
        struct cls_class **classes = realloc(t->classes,
                                             n * sizeof *classes);
        uint32_t *order;

        if (!classes) {
            return GPU_ERR_NOMEM;
        }
        t->classes = classes;
        order = realloc(t->order, n * sizeof *order);
        if (!order) {
            return GPU_ERR_NOMEM;
        }
        t->order = order;
        t->class_ids_alloc = n;
    }
    if (id == t->n_class_ids) {
        t->n_class_ids++;
    }
    c->id = id;
    t->classes[id] = c;
    c->order_pos = t->n_classes;
    t->order[t->n_classes++] = id;
    bucket_insert(t, c);
    t->mem_bytes += c->buf_bytes;
    t->total_slots += GPU_CLS_SUBTABLES << c->view.log2_d;
    notify_meta(t, c);
    notify_meta(t, NULL);
    order_fix(t, c);
    return GPU_OK;
}

static void
class_unregister(struct gpu_cls_table *t, struct cls_class *c)
{
    bucket_remove(t, c);
    for (uint32_t i = c->order_pos; i + 1 < t->n_classes; i++) {
        t->order[i] = t->order[i + 1];
        t->classes[t->order[i]]->order_pos = i;
    }
    t->n_classes--;
    t->classes[c->id] = NULL;
    while (t->n_class_ids && !t->classes[t->n_class_ids - 1]) {
        t->n_class_ids--;
    }
    t->mem_bytes -= c->buf_bytes;
    t->total_slots -= GPU_CLS_SUBTABLES << c->view.log2_d;
    if (t->prov->class_free) {
        t->prov->class_free(t, c);
    }
    notify_meta(t, NULL);
}

/* Puts 'new' in the place of 'old' (same mask, same id). */
static void
class_replace(struct gpu_cls_table *t, struct cls_class *old,
              struct cls_class *new)
{
    new->id = old->id;
    new->order_pos = old->order_pos;
    t->classes[new->id] = new;
    bucket_remove(t, old);
    bucket_insert(t, new);
    t->mem_bytes += new->buf_bytes - old->buf_bytes;
    t->total_slots += (GPU_CLS_SUBTABLES << new->view.log2_d)
                      - (GPU_CLS_SUBTABLES << old->view.log2_d);
    if (t->prov->class_free) {
        t->prov->class_free(t, old);
    }
    class_free_host(old);
    notify_meta(t, new);
    order_fix(t, new);
}

void
gpu_cls_config_init(struct gpu_cls_config *cfg, unsigned int n_words)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->n_words = n_words;
    cfg->semantics = GPU_CLS_FIRST_MATCH;
    cfg->algorithm = GPU_CLS_AUTO;
    cfg->backend = GPU_CLS_BACKEND_DEFAULT;
}

bool
gpu_cls_cuda_available(void)
{
#ifdef HAVE_CUDA
    return gpu_cls_cuda_probe();
#else
    return false;
#endif
}

int
gpu_cls_create(const struct gpu_cls_config *cfg, struct gpu_cls_table **tp)
{
    const struct gpu_cls_provider *prov;
    struct gpu_cls_table *t;
    int err;

    if (!tp) {
        return GPU_ERR_INVALID;
    }
    *tp = NULL;
    if (!cfg || cfg->n_words < 1 || cfg->n_words > GPU_CLS_MAX_WORDS
        || (cfg->semantics != GPU_CLS_FIRST_MATCH
            && cfg->semantics != GPU_CLS_HIGHEST_PRIORITY)
        || (unsigned int) cfg->algorithm > GPU_CLS_BLOOM) {
        return GPU_ERR_INVALID;
    }
    switch (cfg->backend) {
    case GPU_CLS_BACKEND_DEFAULT:
        prov = gpu_cls_cuda_available() ? NULL : &gpu_cls_cpu_provider;
#ifdef HAVE_CUDA
        if (!prov) {
            prov = &gpu_cls_cuda_provider;
        }
#endif
        break;
    case GPU_CLS_BACKEND_CPU:
        prov = &gpu_cls_cpu_provider;
        break;
    case GPU_CLS_BACKEND_CUDA:
        if (!gpu_cls_cuda_available()) {
            return GPU_ERR_NO_DEVICE;
        }
#ifdef HAVE_CUDA
        prov = &gpu_cls_cuda_provider;
#endif
        break;
    default:
        return GPU_ERR_INVALID;
    }

    t = calloc(1, sizeof *t);
    if (!t) {
        return GPU_ERR_NOMEM;
    }
    t->cfg = *cfg;
    t->cfg.backend = prov->type;
    t->prov = prov;
    t->algorithm = cfg->algorithm;
    t->seed_counter = 0x9e3779b9;
    t->n_mask_buckets = 16;
    t->mask_buckets = calloc(t->n_mask_buckets, sizeof *t->mask_buckets);
    if (!t->mask_buckets) {
        free(t);
        return GPU_ERR_NOMEM;
    }
    /* Writers first: on the CPU backend lookups hold the read lock for a
     * whole batch, and threads that look up back to back (a PMD thread)
     * would otherwise keep an insert waiting for ever, since glibc's
     * default lets new readers in while a writer waits. */
    pthread_rwlockattr_t rwattr;
    pthread_rwlockattr_init(&rwattr);
#ifdef __GLIBC__
    pthread_rwlockattr_setkind_np(&rwattr,
                                  PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
    pthread_rwlock_init(&t->rwlock, &rwattr);
    pthread_rwlockattr_destroy(&rwattr);
    pthread_mutex_init(&t->pool_mutex, NULL);
    err = prov->init ? prov->init(t) : GPU_OK;
    if (err) {
        pthread_rwlock_destroy(&t->rwlock);
        pthread_mutex_destroy(&t->pool_mutex);
        free(t->mask_buckets);
        free(t);
        return err;
    }
    *tp = t;
    return GPU_OK;
}

void
gpu_cls_destroy(struct gpu_cls_table *t)
{
    struct gpu_cls_batch *b, *next;

    if (!t) {
        return;
    }
    for (b = t->pool; b; b = next) {
        next = b->pool_next;
        if (t->prov->batch_uninit) {
            t->prov->batch_uninit(b);
        }
        free(b);
    }
    for (uint32_t id = 0; id < t->n_class_ids; id++) {
        struct cls_class *c = t->classes[id];

        if (c) {
            if (t->prov->class_free) {
                t->prov->class_free(t, c);
            }
            class_free_host(c);
        }
    }
    if (t->prov->uninit) {
        t->prov->uninit(t);
    }
    free(t->classes);
    free(t->order);
    free(t->mask_buckets);
    pthread_rwlock_destroy(&t->rwlock);
    pthread_mutex_destroy(&t->pool_mutex);
    free(t);
}

static void
mask_value(const struct gpu_cls_table *t, const uint64_t *value,
           const uint64_t *mask, uint64_t *out)
{
    for (unsigned int i = 0; i < t->cfg.n_words; i++) {
        out[i] = value[i] & mask[i];
    }
}

int
gpu_cls_insert(struct gpu_cls_table *t, const uint64_t *value,
               const uint64_t *mask, uint32_t priority, uint32_t handle)
{
    unsigned int n_words;
    uint64_t item[GPU_CLS_MAX_WORDS + 1];
    uint32_t path[MAX_KICKS + 1];
    struct cls_class *c, *new;
    bool created = false;
    int err = GPU_OK;
    uint64_t h;

    if (!t || !value || !mask || handle == GPU_CLS_NO_MATCH) {
        return GPU_ERR_INVALID;
    }
    n_words = t->cfg.n_words;
    item[0] = ((uint64_t) priority << 32) | handle;
    mask_value(t, value, mask, item + 1);

    pthread_rwlock_wrlock(&t->rwlock);
    c = find_class(t, mask);
    if (!c) {
        err = class_build(t, NULL, mask, MIN_LOG2_D, NULL, &c);
        if (!err) {
            err = class_register(t, c);
            if (err) {
                if (t->prov->class_free) {
                    t->prov->class_free(t, c);
                }
                class_free_host(c);
            }
        }
        if (err) {
            goto out;
        }
        created = true;
    }

    h = gpu_cls_hash(item + 1, mask, n_words, c->view.seed);
    if (gpu_cls_probe(c->view.slots, c->view.log2_d, item + 1, mask,
                      n_words, h)) {
        err = GPU_ERR_EXISTS;
        goto out;
    }

    if ((uint64_t) (c->view.n_rules + 1) * 100
        > (uint64_t) MAX_LOAD_PERCENT * (GPU_CLS_SUBTABLES
                                         << c->view.log2_d)) {
        /* Full: double this class only. */
        err = class_build(t, c, mask, c->view.log2_d + 1, item, &new);
        if (!err) {
            t->n_grows++;
            class_replace(t, c, new);
        }
        goto out;
    }

    int n_swaps;
    if (!cuckoo_insert(t, c, item, true, path, &n_swaps)) {
        /* 'item' is now some other rule left homeless.  Rehash this class
         * alone with a new seed (class_build() grows it if need be). */
        err = class_build(t, c, mask, c->view.log2_d, item, &new);
        if (err) {
            cuckoo_undo(t, c, item, path, n_swaps);
        } else {
            t->n_rebuilds++;
            class_replace(t, c, new);
        }
        goto out;
    }
    bloom_add(t, c, h, true);
    c->view.n_rules++;
    if (priority > c->view.max_priority || c->view.n_rules == 1) {
        c->view.max_priority = priority;
    }
    notify_meta(t, c);
    order_fix(t, c);

out:
    if (!err) {
        t->n_rules++;
    } else if (created) {
        class_unregister(t, c);
        class_free_host(c);
    }
    pthread_rwlock_unlock(&t->rwlock);
    return err;
}

int
gpu_cls_remove(struct gpu_cls_table *t, const uint64_t *value,
               const uint64_t *mask, uint32_t *handlep)
{
    uint64_t v[GPU_CLS_MAX_WORDS];
    struct cls_class *c;
    const uint64_t *slot;
    int err = GPU_OK;

    if (!t || !value || !mask) {
        return GPU_ERR_INVALID;
    }
    mask_value(t, value, mask, v);

    pthread_rwlock_wrlock(&t->rwlock);
    c = find_class(t, mask);
    if (!c) {
        err = GPU_ERR_NOT_FOUND;
        goto out;
    }
    uint64_t h = gpu_cls_hash(v, mask, t->cfg.n_words, c->view.seed);
    slot = gpu_cls_probe(c->view.slots, c->view.log2_d, v, mask,
                         t->cfg.n_words, h);
    if (!slot) {
        err = GPU_ERR_NOT_FOUND;
        goto out;
    }

    uint32_t priority = slot[0] >> 32;
    uint32_t idx = (slot - c->view.slots) / (t->cfg.n_words + 1);
    if (handlep) {
        *handlep = (uint32_t) slot[0];
    }
    t->n_rules--;
    if (c->view.n_rules == 1) {
        /* Last rule: drop the class, as dpcls drops empty subtables, so
         * lookups stop visiting it. */
        class_unregister(t, c);
        class_free_host(c);
        goto out;
    }
    *(uint64_t *) slot = GPU_CLS_EMPTY_SLOT;
    notify_slot(t, c, idx);
    bloom_remove(t, c, h);
    c->view.n_rules--;
    if (priority == c->view.max_priority) {
        class_recompute_max_priority(t, c);
    }
    notify_meta(t, c);
    order_fix(t, c);

out:
    pthread_rwlock_unlock(&t->rwlock);
    return err;
}

int
gpu_cls_set_algorithm(struct gpu_cls_table *t, enum gpu_cls_algorithm alg)
{
    if (!t || (unsigned int) alg > GPU_CLS_BLOOM) {
        return GPU_ERR_INVALID;
    }
    pthread_rwlock_wrlock(&t->rwlock);
    t->algorithm = alg;
    pthread_rwlock_unlock(&t->rwlock);
    return GPU_OK;
}

/* AUTO.  Estimated cost of one key's lookup under each algorithm, from
 * the backend's constants, fitted to measurements (docs/CLASSIFIER-NOTES.md
 * gives the data):
 *
 *   linear: every slot of every class is checked;
 *   tuple:  every class is masked and hashed, then probed, cheaply while
 *           the tables fit in cache;
 *   Bloom:  every class is masked and hashed and its filter tested; only
 *           hits and false positives (~0.2%) are probed; plus a fixed cost
 *           per key (on the GPU, staging filters in shared memory).
 *
 * The result has GSwitch's shape: linear only for tiny tables, tuple at a
 * handful of classes, Bloom beyond (on an H100 the crossover is between 4
 * and 16 classes). */
int
gpu_cls_resolve_algorithm(const struct gpu_cls_table *t)
{
    const struct gpu_cls_cost *k = &t->prov->cost;
    double n_words = t->cfg.n_words;
    double c = t->n_classes;
    double probe, linear, tuple, bloom;

    switch (t->algorithm) {
    case GPU_CLS_LINEAR:
        return GPU_CLS_ALG_LINEAR;
    case GPU_CLS_TUPLE:
        return GPU_CLS_ALG_TUPLE;
    case GPU_CLS_BLOOM:
        return GPU_CLS_ALG_BLOOM;
    case GPU_CLS_AUTO:
    default:
        break;
    }
    probe = t->mem_bytes <= k->cache_bytes ? k->probe_cached
                                           : k->probe_uncached;
    linear = t->total_slots * k->linear_per_slot;
    tuple = c * (n_words * k->hash_per_word + probe);
    bloom = c * (n_words * k->hash_per_word + k->filter_test
                 + 0.002 * probe) + probe + k->bloom_fixed;
    if (linear <= tuple && linear <= bloom) {
        return GPU_CLS_ALG_LINEAR;
    }
    return tuple <= bloom ? GPU_CLS_ALG_TUPLE : GPU_CLS_ALG_BLOOM;
}

int
gpu_cls_batch_create(struct gpu_cls_table *t, size_t max_keys,
                     struct gpu_cls_batch **bp)
{
    struct gpu_cls_batch *b;
    int err;

    if (!bp) {
        return GPU_ERR_INVALID;
    }
    *bp = NULL;
    if (!t || !max_keys || max_keys > GPU_CLS_MAX_BATCH) {
        return GPU_ERR_INVALID;
    }
    b = calloc(1, sizeof *b);
    if (!b) {
        return GPU_ERR_NOMEM;
    }
    b->table = t;
    b->max_keys = max_keys;
    err = t->prov->batch_init ? t->prov->batch_init(b) : GPU_OK;
    if (err) {
        free(b);
        return err;
    }
    *bp = b;
    return GPU_OK;
}

void
gpu_cls_batch_destroy(struct gpu_cls_batch *b)
{
    if (b) {
        if (b->table->prov->batch_uninit) {
            b->table->prov->batch_uninit(b);
        }
        free(b);
    }
}

static int
submit__(struct gpu_cls_batch *b, struct gpu_stream *stream,
         const uint64_t *keys, size_t n_keys, size_t key_words,
         uint32_t *results, bool device_buffers)
{
    struct gpu_cls_table *t;

    if (!b) {
        return GPU_ERR_INVALID;
    }
    t = b->table;
    if (key_words != t->cfg.n_words || n_keys > b->max_keys
        || (n_keys && (!keys || !results))) {
        return GPU_ERR_INVALID;
    }
    __atomic_fetch_add(&t->n_batches, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&t->n_lookups, n_keys, __ATOMIC_RELAXED);
    return t->prov->submit(b, stream, keys, n_keys, results,
                           device_buffers);
}

int
gpu_cls_submit(struct gpu_cls_batch *b, struct gpu_stream *stream,
               const uint64_t *keys, size_t n_keys, size_t key_words,
               uint32_t *results)
{
    return submit__(b, stream, keys, n_keys, key_words, results, false);
}

int
gpu_cls_submit_device(struct gpu_cls_batch *b, struct gpu_stream *stream,
                      const uint64_t *keys, size_t n_keys,
                      size_t key_words, uint32_t *results)
{
    return submit__(b, stream, keys, n_keys, key_words, results, true);
}

int
gpu_cls_poll(struct gpu_cls_batch *b)
{
    return b ? b->table->prov->poll(b) : GPU_ERR_INVALID;
}

int
gpu_cls_wait(struct gpu_cls_batch *b)
{
    return b ? b->table->prov->wait(b) : GPU_ERR_INVALID;
}

#define POOL_BATCH_KEYS 65536

int
gpu_cls_lookup(struct gpu_cls_table *t, const uint64_t *keys, size_t n_keys,
               size_t key_words, uint32_t *results)
{
    struct gpu_cls_batch *b;
    int err = GPU_OK;

    if (!t || key_words != t->cfg.n_words
        || (n_keys && (!keys || !results))) {
        return GPU_ERR_INVALID;
    }
    if (!n_keys) {
        return GPU_OK;
    }

    pthread_mutex_lock(&t->pool_mutex);
    b = t->pool;
    if (b) {
        t->pool = b->pool_next;
    }
    pthread_mutex_unlock(&t->pool_mutex);
    if (!b) {
        err = gpu_cls_batch_create(t, POOL_BATCH_KEYS, &b);
        if (err) {
            return err;
        }
    }

    for (size_t i = 0; i < n_keys && !err; i += POOL_BATCH_KEYS) {
        size_t n = n_keys - i < POOL_BATCH_KEYS ? n_keys - i
                                                : POOL_BATCH_KEYS;

        err = gpu_cls_submit(b, NULL, keys + i * key_words, n, key_words,
                             results + i);
        if (!err) {
            err = gpu_cls_wait(b);
        }
    }

    pthread_mutex_lock(&t->pool_mutex);
    b->pool_next = t->pool;
    t->pool = b;
    pthread_mutex_unlock(&t->pool_mutex);
    return err;
}

void
gpu_cls_get_stats(struct gpu_cls_table *t, struct gpu_cls_stats *s)
{
    memset(s, 0, sizeof *s);
    pthread_rwlock_rdlock(&t->rwlock);
    s->backend = t->prov->type;
    s->algorithm = t->algorithm;
    switch (gpu_cls_resolve_algorithm(t)) {
    case GPU_CLS_ALG_LINEAR:
        s->chosen = GPU_CLS_LINEAR;
        break;
    case GPU_CLS_ALG_TUPLE:
        s->chosen = GPU_CLS_TUPLE;
        break;
    default:
        s->chosen = GPU_CLS_BLOOM;
        break;
    }
    s->n_words = t->cfg.n_words;
    s->n_rules = t->n_rules;
    s->n_classes = t->n_classes;
    s->mem_bytes = t->mem_bytes;
    s->n_grows = t->n_grows;
    s->n_rebuilds = t->n_rebuilds;
    s->n_upload_bytes = __atomic_load_n(&t->n_upload_bytes,
                                        __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&t->rwlock);
    s->n_lookups = __atomic_load_n(&t->n_lookups, __ATOMIC_RELAXED);
    s->n_batches = __atomic_load_n(&t->n_batches, __ATOMIC_RELAXED);
}

const char *
gpu_cls_algorithm_name(enum gpu_cls_algorithm alg)
{
    switch (alg) {
    case GPU_CLS_AUTO:
        return "auto";
    case GPU_CLS_LINEAR:
        return "linear";
    case GPU_CLS_TUPLE:
        return "tuple";
    case GPU_CLS_BLOOM:
        return "bloom";
    }
    return "?";
}

int
gpu_cls_algorithm_parse(const char *s, enum gpu_cls_algorithm *alg)
{
    static const enum gpu_cls_algorithm all[] = {
        GPU_CLS_AUTO, GPU_CLS_LINEAR, GPU_CLS_TUPLE, GPU_CLS_BLOOM,
    };

    for (size_t i = 0; s && i < sizeof all / sizeof all[0]; i++) {
        if (!strcmp(s, gpu_cls_algorithm_name(all[i]))) {
            *alg = all[i];
            return GPU_OK;
        }
    }
    return GPU_ERR_INVALID;
}

const char *
gpu_cls_backend_name(enum gpu_cls_backend b)
{
    switch (b) {
    case GPU_CLS_BACKEND_DEFAULT:
        return "default";
    case GPU_CLS_BACKEND_CPU:
        return "cpu";
    case GPU_CLS_BACKEND_CUDA:
        return "cuda";
    }
    return "?";
}
