/*
 * CUDA backend of the classifier (sm_90).
 *
 * Device state of a table: one allocation per class holding the same bytes
 * as the host mirror (mask, Bloom filter, cuckoo slots), an array of class
 * records (struct gpu_cls_dclass with device pointers) indexed by class
 * id, the lookup order, and "groups" of consecutive classes in that order.
 *
 * Updates.  Writers change the host mirror only; this backend notes what
 * they touched (byte ranges of class storage, class records, the order).
 * The next submit, on its own stream S and under the table lock, first
 * makes S wait for every lookup submitted earlier on any stream, then
 * copies the touched bytes to a device staging area in one transfer and
 * scatters them with one small kernel, records an event that later
 * lookups on other streams wait for, and only then launches its own
 * lookup.  So lookups never see a half-applied update, writers never wait
 * for the GPU, and one insert moves one slot or a few (cuckoo moves), one
 * filter word and one class record.  Storage of a grown or rebuilt class is
 * uploaded whole; the old one is freed in stream order (cudaFreeAsync)
 * after the lookups that could read it.
 *
 * Lookup kernel.  A 2-D grid: blockIdx.y picks a group of classes whose
 * records and masks the block copies into shared memory; blockIdx.x picks
 * a tile of keys, one thread per key in turn.  Each thread keeps its key
 * in registers (the key width is a template parameter for widths up to 8
 * words), and for each class of the group masks, hashes, tests the Bloom
 * filter (through L1/L2; staging filters in shared memory, as GSwitch did,
 * is an option that did not pay on the H100) and probes the cuckoo slots
 * in global memory (L2) only on a filter hit.  With one group the kernel
 * writes results directly; with several, first-match results are plain
 * stores (any match will do) and highest-priority ones an atomicMax on a
 * 64-bit rank, converted to handles by a second small kernel.  This is
 * GSwitch's block-per-class scheme widened to a class-group x key-tile
 * grid, so that 132 SMs have work even with a handful of classes.
 */
#include <config.h>

#include "gpu_classifier/classifier-private.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 256
/* Shared memory a lookup block may use at most (48 KB needs no opt-in). */
#define SHM_LIMIT (48 * 1024)
/* What a group fills by default.  Measured on the H100 (see
 * docs/CLASSIFIER-NOTES.md): 24 KB beat 32 and 48 KB by 6% at 512 classes
 * and 18% at 128: smaller groups let more blocks share an SM, and the
 * extra re-reads of keys cost less than the occupancy gained. */
#define SHM_DEFAULT (24 * 1024)
/* Most classes one block visits.  More means fewer blocks re-reading each
 * key; fewer means more parallelism for small batches. */
#define MAX_GROUP 128
/* Largest scatter record, so big uploads spread over many blocks. */
#define RECORD_MAX_BYTES (16 * 1024)

#define CK(CALL) gpu_cuda_status((CALL), #CALL)

/* ---- Device structures. ---- */

struct cuda_group {
    uint32_t first;             /* Index into order[]. */
    uint32_t count;
    uint32_t global_filter;     /* 1: filter too big for shared memory. */
    uint32_t pad;
};

struct scatter_record {
    uint64_t dst;               /* Device address. */
    uint32_t src;               /* Byte offset of the data in staging. */
    uint32_t len;               /* Bytes, multiple of 4. */
};

struct cuda_class {
    void *dbuf;                 /* Device copy of cls->buf. */
    bool full;                  /* Whole class waits for upload. */
    bool meta_queued;
};

struct reader {
    cudaStream_t stream;
    cudaEvent_t event;          /* After its last lookup. */
    uint64_t seen_update;       /* update_gen it has waited for. */
};

struct staging {
    void *host;                 /* Pinned. */
    void *dev;
    size_t size;
    cudaEvent_t copied;
    bool used;
};

struct dirty_range {
    uint32_t id;
    uint32_t ofs;
    uint32_t len;
};

struct cuda_table {
    int device;
    int n_sms;
    uint32_t max_group;         /* Classes per group at most. */
    uint32_t shm_limit;         /* Shared memory a group may fill. */
    uint32_t blocks_per_sm;     /* Blocks to aim for, per SM. */
    bool split_groups;          /* Split groups for small batches. */
    int stage;                  /* Stage filters: 1 always, 0 never
                                 * (default), -1 decide per launch. */
    cudaStream_t alloc_stream;

    /* Device arrays, 'cap' classes. */
    uint32_t cap;
    struct gpu_cls_dclass *d_classes;
    uint32_t *d_order;
    struct cuda_group *d_groups_bloom;
    struct cuda_group *d_groups_plain;

    /* What the device arrays hold now (host copies). */
    struct gpu_cls_dclass *h_classes;
    uint32_t *h_order;
    struct cuda_group *h_groups_bloom, *h_groups_plain;
    uint32_t n_order;
    uint32_t n_groups_bloom, n_groups_plain;
    uint32_t shm_bloom, shm_plain;      /* Dynamic shared memory sizes. */

    /* Pending updates. */
    struct dirty_range *dirty;
    size_t n_dirty, dirty_alloc;
    uint32_t *meta_ids;
    size_t n_meta, meta_alloc;
    struct cls_class **full;
    size_t n_full, full_alloc;
    void **graveyard;
    size_t n_graveyard, graveyard_alloc;
    bool order_dirty;
    bool layout_dirty;          /* Groups must be recomputed. */

    /* Ordering between updates and lookups. */
    struct reader *readers;
    size_t n_readers, readers_alloc;
    cudaEvent_t update_event;
    uint64_t update_gen;        /* 0: no update recorded yet. */

    struct staging staging[2];
    int next_staging;
};

struct cuda_batch {
    uint64_t *d_keys;
    uint32_t *d_results;
    unsigned long long *d_best;
    cudaEvent_t done;
    bool inflight;
};

static struct cuda_table *
ct(const struct gpu_cls_table *t)
{
    return (struct cuda_table *) t->pdata;
}

/* Grows '*array' (of 'elem' bytes each) to hold at least 'n'. */
static bool
reserve(void **array, size_t *alloc, size_t n, size_t elem)
{
    if (n <= *alloc) {
        return true;
    }
    size_t na = *alloc ? *alloc * 2 : 64;
    while (na < n) {
        na *= 2;
    }
    void *p = realloc(*array, na * elem);
    if (!p) {
        return false;
    }
    *array = p;
    *alloc = na;
    return true;
}

/* ---- Kernels. ---- */

__global__ void
scatter_kernel(const struct scatter_record *records, const char *data)
{
    struct scatter_record r = records[blockIdx.x];
    const uint32_t *src = (const uint32_t *) (data + r.src);
    uint32_t *dst = (uint32_t *) (uintptr_t) r.dst;

    for (uint32_t i = threadIdx.x; i < r.len / 4; i += blockDim.x) {
        dst[i] = src[i];
    }
}

__global__ void
finish_kernel(const unsigned long long *best, uint32_t *results, uint32_t n)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < n) {
        results[i] = gpu_cls_rank_handle(best[i]);
    }
}

/* WT: key width in words, or 0 for "read it from memory, width W".
 * ALG: GPU_CLS_ALG_*.  HP: highest-priority semantics.  DIRECT: one group
 * only, so results are written without atomics or initialisation. */
template <int WT, int ALG, bool HP, bool DIRECT>
__global__ void __launch_bounds__(THREADS)
lookup_kernel(const struct gpu_cls_dclass *__restrict__ classes,
              const uint32_t *__restrict__ order,
              const struct cuda_group *__restrict__ groups,
              const uint64_t *__restrict__ keys, uint32_t n, uint32_t w_rt,
              uint32_t keys_per_block, uint32_t *results,
              unsigned long long *best, uint32_t stage_filters,
              uint32_t split)
{
    extern __shared__ uint64_t smem[];
    const unsigned int W = WT ? WT : w_rt;
    struct cuda_group g = groups[blockIdx.y / split];

    if (split > 1) {
        /* A small batch: this block takes one 'split'-th of the group's
         * classes (see launch_lookup()). */
        uint32_t per = (g.count + split - 1) / split;
        uint32_t first = blockIdx.y % split * per;

        if (first >= g.count) {
            return;             /* The whole block: no barrier is missed. */
        }
        g.first += first;
        g.count = min(per, g.count - first);
    }
    /* Bloom filters in shared memory, or read through L1/L2 (see
     * launch_lookup()). */
    const bool shm_filters = ALG == GPU_CLS_ALG_BLOOM && stage_filters
                             && !g.global_filter;
    struct gpu_cls_dclass *s_meta = (struct gpu_cls_dclass *) smem;
    uint64_t *s_mask = (uint64_t *) (s_meta + g.count);
    uint32_t *s_foff = (uint32_t *) (s_mask + g.count * W);
    uint32_t *s_filter = s_foff + ((g.count + 2) & ~1u);

    for (uint32_t i = threadIdx.x; i < g.count; i += blockDim.x) {
        s_meta[i] = classes[order[g.first + i]];
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < g.count * W; i += blockDim.x) {
        s_mask[i] = s_meta[i / W].mask[i % W];
    }
    if (shm_filters) {
        if (threadIdx.x == 0) {
            uint32_t off = 0;

            for (uint32_t c = 0; c < g.count; c++) {
                s_foff[c] = off;
                off += 1u << s_meta[c].log2_fw;
            }
        }
        __syncthreads();
        for (uint32_t c = 0; c < g.count; c++) {
            const uint32_t *f = s_meta[c].filter;
            uint32_t nw = 1u << s_meta[c].log2_fw;
            uint32_t *d = s_filter + s_foff[c];

            for (uint32_t i = threadIdx.x; i < nw; i += blockDim.x) {
                d[i] = f[i];
            }
        }
    }
    __syncthreads();

    uint32_t k0 = blockIdx.x * keys_per_block;
    uint32_t k1 = min(n, k0 + keys_per_block);
    for (uint32_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
        uint64_t kreg[WT ? WT : 1];
        const uint64_t *key;

        if (WT) {
#pragma unroll
            for (int i = 0; i < (WT ? WT : 1); i++) {
                kreg[i] = keys[(size_t) k * W + i];
            }
            key = kreg;
        } else {
            key = keys + (size_t) k * W;
        }

        unsigned long long rank = 0;
        if (!DIRECT) {
            if (HP) {
                /* What other groups already found lets this one skip
                 * classes that cannot beat it. */
                rank = *(volatile unsigned long long *) &best[k];
            } else if (*(volatile uint32_t *) &results[k]
                       != GPU_CLS_NO_MATCH) {
                continue;
            }
        }
        unsigned long long start = rank;
        uint32_t found = GPU_CLS_NO_MATCH;

        for (uint32_t c = 0; c < g.count; c++) {
            const struct gpu_cls_dclass *m = &s_meta[c];

            if (HP && rank && m->max_priority < (uint32_t) (rank >> 32)) {
                break;          /* Sorted: nothing later can win. */
            }
            const uint32_t *filter = shm_filters ? s_filter + s_foff[c]
                                                 : m->filter;
            const uint64_t *slot = gpu_cls_class_search(
                m, s_mask + c * W, filter, key, W, ALG);
            if (slot) {
                if (!HP) {
                    found = (uint32_t) slot[0];
                    break;
                }
                unsigned long long r = gpu_cls_rank(slot[0]);
                if (r > rank) {
                    rank = r;
                }
            }
        }

        if (HP) {
            if (DIRECT) {
                results[k] = gpu_cls_rank_handle(rank);
            } else if (rank > start) {
                atomicMax(&best[k], rank);
            }
        } else if (DIRECT || found != GPU_CLS_NO_MATCH) {
            results[k] = found;
        }
    }
}

typedef void (*lookup_fn)(const struct gpu_cls_dclass *, const uint32_t *,
                          const struct cuda_group *, const uint64_t *,
                          uint32_t, uint32_t, uint32_t, uint32_t *,
                          unsigned long long *, uint32_t, uint32_t);

template <int WT>
static lookup_fn
pick3(int alg, bool hp, bool direct)
{
#define PICK(A)                                                         \
    if (alg == A) {                                                     \
        return hp ? (direct ? lookup_kernel<WT, A, true, true>          \
                            : lookup_kernel<WT, A, true, false>)        \
                  : (direct ? lookup_kernel<WT, A, false, true>         \
                            : lookup_kernel<WT, A, false, false>);      \
    }
    PICK(GPU_CLS_ALG_LINEAR)
    PICK(GPU_CLS_ALG_TUPLE)
    PICK(GPU_CLS_ALG_BLOOM)
#undef PICK
    return NULL;
}

static lookup_fn
pick_kernel(unsigned int n_words, int alg, bool hp, bool direct)
{
    switch (n_words) {
    case 1: return pick3<1>(alg, hp, direct);
    case 2: return pick3<2>(alg, hp, direct);
    case 3: return pick3<3>(alg, hp, direct);
    case 4: return pick3<4>(alg, hp, direct);
    case 5: return pick3<5>(alg, hp, direct);
    case 6: return pick3<6>(alg, hp, direct);
    case 8: return pick3<8>(alg, hp, direct);
    default: return pick3<0>(alg, hp, direct);
    }
}

/* ---- Provider: tables and classes. ---- */

extern "C" int
gpu_cls_cuda_probe(void)
{
    static int cached = -1;

    if (cached < 0) {
        int n = 0;

        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            cudaGetLastError();
            n = 0;
        }
        cached = n > 0;
    }
    return cached;
}

static void cuda_uninit(struct gpu_cls_table *);

static int
cuda_init(struct gpu_cls_table *t)
{
    struct cuda_table *c = (struct cuda_table *) calloc(1, sizeof *c);
    int err;

    if (!c) {
        return GPU_ERR_NOMEM;
    }
    t->pdata = c;
    c->device = t->cfg.device;
    err = CK(cudaSetDevice(c->device));
    if (!err) {
        err = CK(cudaDeviceGetAttribute(&c->n_sms,
                                        cudaDevAttrMultiProcessorCount,
                                        c->device));
    }
    if (!err) {
        err = CK(cudaStreamCreateWithFlags(&c->alloc_stream,
                                           cudaStreamNonBlocking));
    }
    if (!err) {
        err = CK(cudaEventCreateWithFlags(&c->update_event,
                                          cudaEventDisableTiming));
    }
    for (int i = 0; !err && i < 2; i++) {
        err = CK(cudaEventCreateWithFlags(&c->staging[i].copied,
                                          cudaEventDisableTiming));
    }
    if (err) {
        cuda_uninit(t);
        return err == GPU_ERR_DEVICE ? GPU_ERR_NO_DEVICE : err;
    }
    /* Tuning knobs for measurements (the defaults were picked with
     * bench/run-classifier-gpu.sh; see docs/CLASSIFIER-NOTES.md). */
    const char *e = getenv("GPU_CLS_CUDA_GROUP");
    c->max_group = e && atoi(e) > 0 ? atoi(e) : MAX_GROUP;
    e = getenv("GPU_CLS_CUDA_SHM");
    c->shm_limit = (e && atoi(e) >= 4096 && atoi(e) <= SHM_LIMIT
                    ? atoi(e) : SHM_DEFAULT) - 64;
    /* Filters through L1/L2 by default: on the H100 staging them in
     * shared memory never paid (CLASSIFIER-NOTES.md); "auto" lets each
     * launch decide, "1" forces staging (GSwitch's design). */
    e = getenv("GPU_CLS_CUDA_STAGE");
    c->stage = !e || !*e ? 0 : !strcmp(e, "auto") ? -1 : atoi(e) != 0;
    e = getenv("GPU_CLS_CUDA_BLOCKS_PER_SM");
    c->blocks_per_sm = e && atoi(e) > 0 ? atoi(e) : 8;
    e = getenv("GPU_CLS_CUDA_SPLIT");
    c->split_groups = !e || atoi(e) != 0;
    c->layout_dirty = true;
    return GPU_OK;
}

static void
cuda_uninit(struct gpu_cls_table *t)
{
    struct cuda_table *c = ct(t);

    if (!c) {
        return;
    }
    cudaSetDevice(c->device);
    /* Everything this table queued must be done before its memory goes. */
    for (size_t i = 0; i < c->n_readers; i++) {
        cudaEventSynchronize(c->readers[i].event);
        cudaEventDestroy(c->readers[i].event);
    }
    if (c->update_gen) {
        cudaEventSynchronize(c->update_event);
    }
    for (size_t i = 0; i < c->n_graveyard; i++) {
        cudaFreeAsync(c->graveyard[i], c->alloc_stream);
    }
    cudaFreeAsync(c->d_classes, c->alloc_stream);
    cudaFreeAsync(c->d_order, c->alloc_stream);
    cudaFreeAsync(c->d_groups_bloom, c->alloc_stream);
    cudaFreeAsync(c->d_groups_plain, c->alloc_stream);
    for (int i = 0; i < 2; i++) {
        if (c->staging[i].used) {
            cudaEventSynchronize(c->staging[i].copied);
        }
        cudaFreeAsync(c->staging[i].dev, c->alloc_stream);
        cudaFreeHost(c->staging[i].host);
        cudaEventDestroy(c->staging[i].copied);
    }
    if (c->alloc_stream) {
        cudaStreamSynchronize(c->alloc_stream);
        cudaStreamDestroy(c->alloc_stream);
    }
    cudaEventDestroy(c->update_event);
    cudaGetLastError();
    free(c->h_classes);
    free(c->h_order);
    free(c->h_groups_bloom);
    free(c->h_groups_plain);
    free(c->dirty);
    free(c->meta_ids);
    free(c->full);
    free(c->graveyard);
    free(c->readers);
    free(c);
    t->pdata = NULL;
}

static void
queue_meta(struct cuda_table *c, struct cls_class *cls)
{
    struct cuda_class *cc = (struct cuda_class *) cls->pdata;

    if (!cc->meta_queued
        && reserve((void **) &c->meta_ids, &c->meta_alloc, c->n_meta + 1,
                   sizeof *c->meta_ids)) {
        cc->meta_queued = true;
        c->meta_ids[c->n_meta++] = cls->id;
    }
}

static int
cuda_class_alloc(struct gpu_cls_table *t, struct cls_class *cls)
{
    struct cuda_table *c = ct(t);
    struct cuda_class *cc = (struct cuda_class *) calloc(1, sizeof *cc);
    int err;

    if (!cc || !reserve((void **) &c->full, &c->full_alloc, c->n_full + 1,
                        sizeof *c->full)) {
        free(cc);
        return GPU_ERR_NOMEM;
    }
    cudaSetDevice(c->device);
    /* Stream-ordered allocation, waited for here so that a failure is
     * reported to this insert (which then leaves the table unchanged) and
     * the memory is usable from any stream afterwards. */
    err = CK(cudaMallocAsync(&cc->dbuf, cls->buf_bytes, c->alloc_stream));
    if (!err) {
        err = CK(cudaStreamSynchronize(c->alloc_stream));
    }
    if (err) {
        free(cc);
        return err;
    }
    cc->full = true;
    cls->pdata = cc;
    c->full[c->n_full++] = cls;
    c->layout_dirty = true;
    return GPU_OK;
}

static void
cuda_class_free(struct gpu_cls_table *t, struct cls_class *cls)
{
    struct cuda_table *c = ct(t);
    struct cuda_class *cc = (struct cuda_class *) cls->pdata;

    if (!cc) {
        return;
    }
    if (cc->full) {
        for (size_t i = 0; i < c->n_full; i++) {
            if (c->full[i] == cls) {
                c->full[i] = c->full[--c->n_full];
                break;
            }
        }
    }
    if (cc->meta_queued) {
        /* The id stays queued: the flush then uploads whatever holds the
         * id by then (a new class, or an empty record). */
        for (size_t i = 0; i < c->n_meta; i++) {
            if (c->meta_ids[i] == cls->id) {
                c->meta_ids[i] = c->meta_ids[--c->n_meta];
                break;
            }
        }
    }
    if (reserve((void **) &c->graveyard, &c->graveyard_alloc,
                c->n_graveyard + 1, sizeof *c->graveyard)) {
        c->graveyard[c->n_graveyard++] = cc->dbuf;
    } else {
        /* Cannot defer: wait for the device instead. */
        cudaDeviceSynchronize();
        cudaFree(cc->dbuf);
    }
    /* The class's id may now be empty or reused; its record must be
     * rewritten either way. */
    if (reserve((void **) &c->meta_ids, &c->meta_alloc, c->n_meta + 1,
                sizeof *c->meta_ids)) {
        c->meta_ids[c->n_meta++] = cls->id;
    }
    c->layout_dirty = true;
    free(cc);
    cls->pdata = NULL;
}

static void
cuda_class_dirty(struct gpu_cls_table *t, struct cls_class *cls, size_t ofs,
                 size_t len)
{
    struct cuda_table *c = ct(t);
    struct cuda_class *cc = (struct cuda_class *) cls->pdata;

    if (cc->full) {
        return;                 /* The whole class goes up anyway. */
    }
    if (reserve((void **) &c->dirty, &c->dirty_alloc, c->n_dirty + 1,
                sizeof *c->dirty)) {
        c->dirty[c->n_dirty].id = cls->id;
        c->dirty[c->n_dirty].ofs = ofs;
        c->dirty[c->n_dirty].len = len;
        c->n_dirty++;
    } else {
        /* Out of host memory for bookkeeping: upload the class whole. */
        if (reserve((void **) &c->full, &c->full_alloc, c->n_full + 1,
                    sizeof *c->full)) {
            cc->full = true;
            c->full[c->n_full++] = cls;
        }
    }
}

static void
cuda_meta_dirty(struct gpu_cls_table *t, struct cls_class *cls)
{
    struct cuda_table *c = ct(t);

    if (cls) {
        queue_meta(c, cls);
    } else {
        c->order_dirty = true;
    }
}

/* Splits classes, in lookup order, into groups whose shared-memory copy
 * fits SHM_LIMIT.  With 'filters', each class's filter counts too. */
static uint32_t
make_groups(const struct gpu_cls_table *t, bool filters,
            struct cuda_group *groups, uint32_t *shm_max)
{
    uint32_t max_group = ct(t)->max_group;
    size_t limit = ct(t)->shm_limit;
    unsigned int n_words = t->cfg.n_words;
    size_t per_class = sizeof(struct gpu_cls_dclass) + 8 * n_words + 4;
    uint32_t n = 0;
    size_t shm = 0, max = 0;

    for (uint32_t i = 0; i < t->n_classes; i++) {
        const struct cls_class *cls = t->classes[t->order[i]];
        size_t fbytes = filters ? 4 << cls->view.log2_fw : 0;
        size_t add = per_class + fbytes;

        if (n && !groups[n - 1].global_filter
            && groups[n - 1].count < max_group
            && shm + add + 8 <= limit) {
            groups[n - 1].count++;
            shm += add;
        } else {
            if (n) {
                max = shm > max ? shm : max;
            }
            groups[n].first = i;
            groups[n].count = 1;
            groups[n].pad = 0;
            groups[n].global_filter = per_class + fbytes + 8 > limit;
            shm = groups[n].global_filter ? per_class : add;
            n++;
        }
    }
    max = shm > max ? shm : max;
    *shm_max = (uint32_t) (max + 16);
    return n;
}

/* Device arrays for at least t->class_ids_alloc classes.  Called from a
 * flush, after 's' waits for all earlier lookups: old arrays are freed in
 * stream order. */
static int
ensure_capacity(struct gpu_cls_table *t, cudaStream_t s)
{
    struct cuda_table *c = ct(t);
    uint32_t cap = t->class_ids_alloc;
    struct gpu_cls_dclass *dc = NULL;
    uint32_t *dord = NULL;
    struct cuda_group *gb = NULL, *gp = NULL;
    int err;

    if (cap <= c->cap) {
        return GPU_OK;
    }
    err = CK(cudaMallocAsync(&dc, cap * sizeof *dc, s));
    if (!err) {
        err = CK(cudaMallocAsync(&dord, cap * sizeof *dord, s));
    }
    if (!err) {
        err = CK(cudaMallocAsync(&gb, cap * sizeof *gb, s));
    }
    if (!err) {
        err = CK(cudaMallocAsync(&gp, cap * sizeof *gp, s));
    }
    void *hc = realloc(c->h_classes, cap * sizeof *c->h_classes);
    if (hc) {
        c->h_classes = (struct gpu_cls_dclass *) hc;
    }
    void *ho = realloc(c->h_order, cap * sizeof *c->h_order);
    if (ho) {
        c->h_order = (uint32_t *) ho;
    }
    void *hb = realloc(c->h_groups_bloom, cap * sizeof *c->h_groups_bloom);
    if (hb) {
        c->h_groups_bloom = (struct cuda_group *) hb;
    }
    void *hp = realloc(c->h_groups_plain, cap * sizeof *c->h_groups_plain);
    if (hp) {
        c->h_groups_plain = (struct cuda_group *) hp;
    }
    if (!err && (!hc || !ho || !hb || !hp)) {
        err = GPU_ERR_NOMEM;
    }
    if (err) {
        cudaFreeAsync(dc, s);
        cudaFreeAsync(dord, s);
        cudaFreeAsync(gb, s);
        cudaFreeAsync(gp, s);
        cudaGetLastError();
        return err;
    }
    memset(c->h_classes + c->cap, 0, (cap - c->cap) * sizeof *c->h_classes);
    if (c->d_classes) {
        cudaFreeAsync(c->d_classes, s);
        cudaFreeAsync(c->d_order, s);
        cudaFreeAsync(c->d_groups_bloom, s);
        cudaFreeAsync(c->d_groups_plain, s);
    }
    c->d_classes = dc;
    c->d_order = dord;
    c->d_groups_bloom = gb;
    c->d_groups_plain = gp;
    c->cap = cap;
    /* Every record and the order go up again. */
    for (uint32_t id = 0; id < t->n_class_ids; id++) {
        if (t->classes[id]) {
            queue_meta(c, t->classes[id]);
        }
    }
    c->order_dirty = true;
    c->layout_dirty = true;
    return GPU_OK;
}

/* Staging under construction. */
struct stage_builder {
    struct scatter_record *records;
    size_t n_records, records_alloc;
    char *data;
    size_t n_data, data_alloc;
};

static bool
stage_add(struct stage_builder *sb, const void *dev_dst, const void *src,
          size_t len)
{
    const char *s = (const char *) src;
    uint64_t dst = (uint64_t) (uintptr_t) dev_dst;

    while (len) {
        size_t chunk = len < RECORD_MAX_BYTES ? len : RECORD_MAX_BYTES;

        if (!reserve((void **) &sb->records, &sb->records_alloc,
                     sb->n_records + 1, sizeof *sb->records)
            || !reserve((void **) &sb->data, &sb->data_alloc,
                        sb->n_data + chunk, 1)) {
            return false;
        }
        sb->records[sb->n_records].dst = dst;
        sb->records[sb->n_records].src = sb->n_data;
        sb->records[sb->n_records].len = chunk;
        sb->n_records++;
        memcpy(sb->data + sb->n_data, s, chunk);
        sb->n_data += chunk;
        s += chunk;
        dst += chunk;
        len -= chunk;
    }
    return true;
}

static struct reader *
find_reader(struct cuda_table *c, cudaStream_t s, bool create)
{
    for (size_t i = 0; i < c->n_readers; i++) {
        if (c->readers[i].stream == s) {
            return &c->readers[i];
        }
    }
    if (!create || !reserve((void **) &c->readers, &c->readers_alloc,
                            c->n_readers + 1, sizeof *c->readers)) {
        return NULL;
    }
    struct reader *r = &c->readers[c->n_readers];
    if (cudaEventCreateWithFlags(&r->event, cudaEventDisableTiming)
        != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    r->stream = s;
    r->seen_update = 0;
    c->n_readers++;
    return r;
}

static bool
has_pending(const struct cuda_table *c)
{
    return c->n_dirty || c->n_meta || c->n_full || c->order_dirty
           || c->layout_dirty || c->n_graveyard;
}

/* Applies pending updates on stream 's' (see the top of this file).
 * Caller holds the table's write lock. */
static int
flush(struct gpu_cls_table *t, cudaStream_t s)
{
    struct cuda_table *c = ct(t);
    struct stage_builder sb = { NULL, 0, 0, NULL, 0, 0 };
    int err = GPU_OK;

    if (!has_pending(c)) {
        struct reader *r = find_reader(c, s, true);

        if (!r) {
            return GPU_ERR_NOMEM;
        }
        if (c->update_gen && r->seen_update != c->update_gen) {
            err = CK(cudaStreamWaitEvent(s, c->update_event, 0));
            r->seen_update = c->update_gen;
        }
        return err;
    }

    /* Every lookup submitted so far, on any stream, finishes before any
     * byte it may read changes. */
    for (size_t i = 0; i < c->n_readers && !err; i++) {
        if (c->readers[i].stream != s) {
            err = CK(cudaStreamWaitEvent(s, c->readers[i].event, 0));
        }
    }
    if (!err && c->update_gen) {
        err = CK(cudaStreamWaitEvent(s, c->update_event, 0));
    }
    if (!err) {
        err = ensure_capacity(t, s);
    }
    if (err) {
        return err;
    }

    /* Touched slots and filter words.  Entries naming a class that is to
     * be uploaded whole are skipped: its id may even hold a different,
     * smaller class by now (only ids of such classes can be stale). */
    for (size_t i = 0; i < c->n_dirty; i++) {
        const struct dirty_range *d = &c->dirty[i];
        struct cls_class *cls = d->id < t->n_class_ids ? t->classes[d->id]
                                                       : NULL;
        struct cuda_class *cc = cls ? (struct cuda_class *) cls->pdata
                                    : NULL;

        if (cc && !cc->full && d->ofs + d->len <= cls->buf_bytes
            && !stage_add(&sb, (char *) cc->dbuf + d->ofs,
                          (char *) cls->buf + d->ofs, d->len)) {
            err = GPU_ERR_NOMEM;
            goto out;
        }
    }
    c->n_dirty = 0;

    /* Whole classes (new, grown or rebuilt). */
    for (size_t i = 0; i < c->n_full; i++) {
        struct cls_class *cls = c->full[i];
        struct cuda_class *cc = (struct cuda_class *) cls->pdata;

        if (!stage_add(&sb, cc->dbuf, cls->buf, cls->buf_bytes)) {
            err = GPU_ERR_NOMEM;
            goto out;
        }
        cc->full = false;
        queue_meta(c, cls);
    }
    c->n_full = 0;

    /* Class records. */
    for (size_t i = 0; i < c->n_meta; i++) {
        uint32_t id = c->meta_ids[i];
        struct cls_class *cls = id < t->n_class_ids ? t->classes[id] : NULL;
        struct gpu_cls_dclass *h = &c->h_classes[id];

        memset(h, 0, sizeof *h);
        if (cls) {
            struct cuda_class *cc = (struct cuda_class *) cls->pdata;
            char *base = (char *) cc->dbuf;

            *h = cls->view;
            h->mask = (const uint64_t *) base;
            h->filter = (const uint32_t *) (base + ((const char *)
                                                    cls->view.filter
                                                    - (const char *)
                                                    cls->buf));
            h->slots = (const uint64_t *) (base + ((const char *)
                                                   cls->view.slots
                                                   - (const char *)
                                                   cls->buf));
            cc->meta_queued = false;
        }
        if (!stage_add(&sb, &c->d_classes[id], h, sizeof *h)) {
            err = GPU_ERR_NOMEM;
            goto out;
        }
    }
    c->n_meta = 0;

    /* Order and groups. */
    if (c->order_dirty || c->layout_dirty) {
        uint32_t nb, np, sb_shm, sp_shm;

        nb = make_groups(t, true, c->h_groups_bloom, &sb_shm);
        np = make_groups(t, false, c->h_groups_plain, &sp_shm);
        if (!stage_add(&sb, c->d_order, t->order,
                       t->n_classes * sizeof *t->order)
            || !stage_add(&sb, c->d_groups_bloom, c->h_groups_bloom,
                          nb * sizeof *c->h_groups_bloom)
            || !stage_add(&sb, c->d_groups_plain, c->h_groups_plain,
                          np * sizeof *c->h_groups_plain)) {
            err = GPU_ERR_NOMEM;
            goto out;
        }
        c->n_order = t->n_classes;
        c->n_groups_bloom = nb;
        c->n_groups_plain = np;
        c->shm_bloom = sb_shm;
        c->shm_plain = sp_shm;
        c->order_dirty = c->layout_dirty = false;
    }

    if (sb.n_records) {
        struct staging *st = &c->staging[c->next_staging];
        size_t rec_bytes = sb.n_records * sizeof *sb.records;
        size_t total = rec_bytes + sb.n_data;

        c->next_staging ^= 1;
        if (st->used) {
            /* The copy out of this buffer two flushes ago must be done
             * before it is overwritten. */
            err = CK(cudaEventSynchronize(st->copied));
            if (err) {
                goto out;
            }
        }
        if (total > st->size) {
            size_t size = total * 2;

            cudaFreeHost(st->host);
            st->host = NULL;
            if (st->dev) {
                cudaFreeAsync(st->dev, s);
                st->dev = NULL;
            }
            st->size = 0;
            err = CK(cudaMallocHost(&st->host, size));
            if (!err) {
                err = CK(cudaMallocAsync(&st->dev, size, s));
            }
            if (err) {
                cudaFreeHost(st->host);
                st->host = NULL;
                goto out;
            }
            st->size = size;
        }
        memcpy(st->host, sb.records, rec_bytes);
        memcpy((char *) st->host + rec_bytes, sb.data, sb.n_data);
        err = CK(cudaMemcpyAsync(st->dev, st->host, total,
                                 cudaMemcpyHostToDevice, s));
        if (!err) {
            err = CK(cudaEventRecord(st->copied, s));
            st->used = true;
        }
        if (!err) {
            scatter_kernel<<<sb.n_records, 128, 0, s>>>(
                (const struct scatter_record *) st->dev,
                (const char *) st->dev + rec_bytes);
            err = CK(cudaGetLastError());
        }
        __atomic_fetch_add(&t->n_upload_bytes, total, __ATOMIC_RELAXED);
        if (err) {
            goto out;
        }
    }

    /* Storage of replaced or dropped classes: free once 's' gets here,
     * which is after every lookup that could read it. */
    for (size_t i = 0; i < c->n_graveyard; i++) {
        cudaFreeAsync(c->graveyard[i], s);
    }
    c->n_graveyard = 0;
    err = CK(cudaGetLastError());

    if (!err) {
        err = CK(cudaEventRecord(c->update_event, s));
    }
    if (!err) {
        c->update_gen++;
        /* Earlier lookups are all ordered before update_event now. */
        for (size_t i = 0; i < c->n_readers; i++) {
            c->readers[i].seen_update = c->readers[i].stream == s
                                        ? c->update_gen : 0;
        }
        if (!find_reader(c, s, true)) {
            err = GPU_ERR_NOMEM;
        }
    }

out:
    free(sb.records);
    free(sb.data);
    return err;
}

/* ---- Provider: lookups. ---- */

static int
cuda_batch_init(struct gpu_cls_batch *b)
{
    struct gpu_cls_table *t = b->table;
    struct cuda_batch *cb = (struct cuda_batch *) calloc(1, sizeof *cb);
    size_t n = b->max_keys;
    int err;

    if (!cb) {
        return GPU_ERR_NOMEM;
    }
    cudaSetDevice(ct(t)->device);
    err = CK(cudaMalloc(&cb->d_keys, n * t->cfg.n_words * sizeof(uint64_t)));
    if (!err) {
        err = CK(cudaMalloc(&cb->d_results, n * sizeof(uint32_t)));
    }
    if (!err) {
        err = CK(cudaMalloc(&cb->d_best, n * sizeof(unsigned long long)));
    }
    if (!err) {
        err = CK(cudaEventCreateWithFlags(&cb->done,
                                          cudaEventDisableTiming));
    }
    if (err) {
        cudaFree(cb->d_keys);
        cudaFree(cb->d_results);
        cudaFree(cb->d_best);
        cudaGetLastError();
        free(cb);
        return err;
    }
    b->pdata = cb;
    return GPU_OK;
}

static void
cuda_batch_uninit(struct gpu_cls_batch *b)
{
    struct cuda_batch *cb = (struct cuda_batch *) b->pdata;

    if (cb) {
        if (cb->inflight) {
            cudaEventSynchronize(cb->done);
        }
        cudaFree(cb->d_keys);
        cudaFree(cb->d_results);
        cudaFree(cb->d_best);
        cudaEventDestroy(cb->done);
        cudaGetLastError();
        free(cb);
        b->pdata = NULL;
    }
}

static int
cuda_poll(struct gpu_cls_batch *b)
{
    struct cuda_batch *cb = (struct cuda_batch *) b->pdata;

    if (!cb->inflight) {
        return GPU_OK;
    }
    cudaError_t e = cudaEventQuery(cb->done);
    if (e == cudaErrorNotReady) {
        return GPU_ERR_BUSY;
    }
    cb->inflight = false;
    return CK(e);
}

static int
cuda_wait(struct gpu_cls_batch *b)
{
    struct cuda_batch *cb = (struct cuda_batch *) b->pdata;

    if (!cb->inflight) {
        return GPU_OK;
    }
    cb->inflight = false;
    return CK(cudaEventSynchronize(cb->done));
}

/* Enqueues the lookup of 'n' keys already on the device.  Caller holds the
 * table lock and has flushed on 's'. */
static int
launch_lookup(struct gpu_cls_table *t, struct cuda_batch *cb,
              cudaStream_t s, const uint64_t *d_keys, uint32_t n,
              uint32_t *d_results)
{
    struct cuda_table *c = ct(t);
    int alg = gpu_cls_resolve_algorithm(t);
    bool hp = t->cfg.semantics == GPU_CLS_HIGHEST_PRIORITY;
    uint32_t target = c->n_sms * c->blocks_per_sm;
    uint32_t max_tiles = (n + THREADS - 1) / THREADS;
    bool stage = false;
    int err;

    /* Bloom filters staged in shared memory pay only if each block then
     * tests them for enough keys: a block copies its whole group's filters
     * however few keys it has.  Measured on the H100 (CLASSIFIER-NOTES.md):
     * staging 40 KB for ~250 keys made Bloom slower than tuple search,
     * while reading the filters through L1/L2 beat it everywhere we
     * measured, so that is the default (stage == 0): the Bloom kernel runs
     * over the plain groups (no filter bytes in shared memory, more
     * classes per group).  In "auto" a launch stages only when a block
     * has at least as many keys as its group has filter words. */
    if (alg == GPU_CLS_ALG_BLOOM && c->n_groups_bloom) {
        uint32_t tiles = (target + c->n_groups_bloom - 1) / c->n_groups_bloom;
        tiles = tiles < 1 ? 1 : tiles > max_tiles ? max_tiles : tiles;
        uint32_t kpb = (n + tiles - 1) / tiles;

        /* shm_bloom / 4 bounds the filter words of the largest group. */
        stage = c->stage >= 0 ? c->stage : kpb >= (size_t) c->shm_bloom / 4;
    }
    uint32_t n_groups = stage ? c->n_groups_bloom : c->n_groups_plain;
    uint32_t shm = stage ? c->shm_bloom : c->shm_plain;
    const struct cuda_group *groups = stage ? c->d_groups_bloom
                                            : c->d_groups_plain;

    if (!n_groups) {
        return CK(cudaMemsetAsync(d_results, 0xff, n * sizeof *d_results,
                                  s));
    }
    if (n_groups > 65535) {
        return GPU_ERR_INVALID;
    }

    /* Enough blocks to fill the GPU a few times over, split between
     * groups and key tiles. */
    uint32_t tiles = (target + n_groups - 1) / n_groups;
    tiles = tiles < 1 ? 1 : tiles > max_tiles ? max_tiles : tiles;
    uint32_t kpb = (n + tiles - 1) / tiles;
    tiles = (n + kpb - 1) / kpb;

    /* A small batch (a datapath burst of 32 keys) makes a few blocks in
     * which each key's thread probes up to MAX_GROUP classes one after
     * the other: ~128 dependent memory reads, 50 to 100 us on the H100
     * inside ovs-vswitchd.  Splitting each group over several blocks
     * trades that chain for parallel blocks, each staging fewer classes.
     * Large batches already have blocks enough and keep their layout. */
    uint32_t split = 1;
    if (c->split_groups && (size_t) tiles * n_groups * 2 <= target) {
        uint32_t per_group = (t->n_classes + n_groups - 1) / n_groups;

        split = (target + tiles * n_groups - 1) / (tiles * n_groups);
        split = split > per_group ? per_group : split;
        split = split > 65535 / n_groups ? 65535 / n_groups : split;
        split = split < 1 ? 1 : split;
    }
    bool direct = n_groups * split == 1;
    if (!direct) {
        err = hp ? CK(cudaMemsetAsync(cb->d_best, 0, n * sizeof *cb->d_best,
                                      s))
                 : CK(cudaMemsetAsync(d_results, 0xff,
                                      n * sizeof *d_results, s));
        if (err) {
            return err;
        }
    }

    lookup_fn fn = pick_kernel(t->cfg.n_words, alg, hp, direct);
    dim3 grid(tiles, n_groups * split);
    fn<<<grid, THREADS, shm, s>>>(c->d_classes, c->d_order, groups, d_keys,
                                  n, t->cfg.n_words, kpb, d_results,
                                  cb->d_best, stage, split);
    err = CK(cudaGetLastError());
    if (!err && hp && !direct) {
        finish_kernel<<<(n + 255) / 256, 256, 0, s>>>(cb->d_best, d_results,
                                                      n);
        err = CK(cudaGetLastError());
    }
    return err;
}

static int
cuda_submit(struct gpu_cls_batch *b, struct gpu_stream *stream,
            const uint64_t *keys, size_t n_keys, uint32_t *results,
            bool device_buffers)
{
    struct gpu_cls_table *t = b->table;
    struct cuda_table *c = ct(t);
    struct cuda_batch *cb = (struct cuda_batch *) b->pdata;
    /* Not cudaStreamPerThread for NULL: that handle has the same value on
     * every thread, and the update ordering needs to tell streams
     * apart. */
    struct gpu_stream *gs = stream ? stream : gpu_stream_per_thread();
    cudaStream_t s = gs ? (cudaStream_t) gpu_stream_native(gs) : NULL;
    const uint64_t *d_keys = device_buffers ? keys : cb->d_keys;
    uint32_t *d_results = device_buffers ? results : cb->d_results;
    int err;

    if (cb->inflight) {
        err = cuda_poll(b);
        if (err) {
            return err;
        }
    }
    if (!n_keys) {
        return GPU_OK;
    }
    if (!s) {
        return GPU_ERR_DEVICE;
    }
    cudaSetDevice(c->device);
    if (!device_buffers) {
        err = CK(cudaMemcpyAsync(cb->d_keys, keys,
                                 n_keys * t->cfg.n_words * sizeof *keys,
                                 cudaMemcpyHostToDevice, s));
        if (err) {
            return err;
        }
    }

    pthread_rwlock_wrlock(&t->rwlock);
    err = flush(t, s);
    if (!err) {
        err = launch_lookup(t, cb, s, d_keys, n_keys, d_results);
    }
    if (!err) {
        struct reader *r = find_reader(c, s, true);

        err = r ? CK(cudaEventRecord(r->event, s)) : GPU_ERR_NOMEM;
    }
    pthread_rwlock_unlock(&t->rwlock);

    if (!err && !device_buffers) {
        err = CK(cudaMemcpyAsync(results, cb->d_results,
                                 n_keys * sizeof *results,
                                 cudaMemcpyDeviceToHost, s));
    }
    if (!err) {
        err = CK(cudaEventRecord(cb->done, s));
    }
    if (!err) {
        cb->inflight = true;
    }
    return err;
}

extern "C" const struct gpu_cls_provider gpu_cls_cuda_provider = {
    "cuda",
    GPU_CLS_BACKEND_CUDA,
    /* Nanoseconds of GPU time per key on an H100 (kernel-only, 64K
     * batches), fitted to bench/classifier-bench; see
     * docs/CLASSIFIER-NOTES.md.  Linear costs ~4 ps a slot; tuple ~20 ps a
     * class (5-word keys); Bloom ~7 ps a class plus ~0.15 ns a key. */
    {
        0.0039,                 /* linear_per_slot */
        0.0012,                 /* hash_per_word */
        0.001,                  /* filter_test */
        0.014,                  /* probe_cached */
        0.03,                   /* probe_uncached */
        32.0 * 1024 * 1024,     /* cache_bytes: of the 50 MB L2 */
        0.15,                   /* bloom_fixed */
    },
    cuda_init,
    cuda_uninit,
    cuda_class_alloc,
    cuda_class_free,
    cuda_class_dirty,
    cuda_meta_dirty,
    cuda_batch_init,
    cuda_batch_uninit,
    cuda_submit,
    cuda_poll,
    cuda_wait,
};
