/*
 * CPU backend of the index builder: the online algorithm of Lemire et al.
 * that the seed measures the GPU against.  Rows are visited in order;
 * each distinct value has a column with one pending literal, which is
 * written out (after its 0-fill) when the column is next touched in a
 * later chunk, or at the end.  The words come from index-inline.h, so the
 * output is byte for byte the CUDA backend's.
 *
 * The column state and word vectors live in the builder and are reused by
 * the next batch: first-touch page faults would otherwise cost more than
 * the indexing (measured 10x on a sandboxed host).
 */
#include <config.h>

#include "gpu_services/index/index-private.h"

#include <stdlib.h>
#include <string.h>

struct cpu_col {
    uint32_t key;
    uint32_t chunk;             /* Of 'lit', when lit != 0. */
    uint32_t lit;               /* Pending literal, 0 if none. */
    uint32_t next;              /* Chunk after the last one written. */
    uint32_t *w;
    uint32_t n, cap;
};

struct cpu_cols {
    struct cpu_col *cols;
    size_t n, cap;

    /* Value -> column: a direct table for small values, else a hash. */
    int32_t *direct;
    uint32_t direct_size;
    uint32_t *hkeys;
    int32_t *hvals;
    uint32_t hmask;
};

static int
col_push(struct cpu_col *c, uint32_t w)
{
    if (c->n == c->cap) {
        uint32_t ncap = c->cap ? 2 * c->cap : 4;
        uint32_t *nw = realloc(c->w, ncap * sizeof *nw);

        if (!nw) {
            return GPU_ERR_NOMEM;
        }
        c->w = nw;
        c->cap = ncap;
    }
    c->w[c->n++] = w;
    return GPU_OK;
}

static int
col_flush(struct cpu_col *c, bool plwah)
{
    uint32_t fill, lit = c->lit;
    int error = GPU_OK;

    if (!lit) {
        return GPU_OK;
    }
    fill = ix_fill(c->next == 0, c->chunk, c->next - 1);
    if (plwah) {
        ix_plwah_fold(&fill, &lit);
    }
    if (fill) {
        error = col_push(c, fill);
    }
    if (lit && !error) {
        error = col_push(c, lit);
    }
    c->next = c->chunk + 1;
    c->lit = 0;
    return error;
}

static uint32_t
hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352d;
    x ^= x >> 15;
    x *= 0x846ca68b;
    x ^= x >> 16;
    return x;
}

static int
cols_new(struct cpu_cols *cs, uint32_t key, int32_t *idx)
{
    struct cpu_col *c;

    if (cs->n == cs->cap) {
        size_t ncap = cs->cap ? 2 * cs->cap : 64;
        struct cpu_col *nc = realloc(cs->cols, ncap * sizeof *nc);

        if (!nc) {
            return GPU_ERR_NOMEM;
        }
        memset(nc + cs->cap, 0, (ncap - cs->cap) * sizeof *nc);
        cs->cols = nc;
        cs->cap = ncap;
    }
    c = &cs->cols[cs->n];
    /* Keep the word vector of an earlier batch's column. */
    c->key = key;
    c->chunk = c->lit = c->next = c->n = 0;
    *idx = cs->n++;
    return GPU_OK;
}

static int
hash_grow(struct cpu_cols *cs)
{
    uint32_t nsize = cs->hmask ? 2 * (cs->hmask + 1) : 1024;
    uint32_t *nk = malloc(nsize * sizeof *nk);
    int32_t *nv = malloc(nsize * sizeof *nv);
    size_t i;

    if (!nk || !nv) {
        free(nk);
        free(nv);
        return GPU_ERR_NOMEM;
    }
    memset(nv, 0xff, nsize * sizeof *nv);
    for (i = 0; i < cs->n; i++) {
        uint32_t h = hash32(cs->cols[i].key) & (nsize - 1);

        while (nv[h] >= 0) {
            h = (h + 1) & (nsize - 1);
        }
        nk[h] = cs->cols[i].key;
        nv[h] = i;
    }
    free(cs->hkeys);
    free(cs->hvals);
    cs->hkeys = nk;
    cs->hvals = nv;
    cs->hmask = nsize - 1;
    return GPU_OK;
}

static inline struct cpu_col *
cols_lookup_direct(struct cpu_cols *cs, uint32_t key)
{
    int32_t idx = cs->direct[key];

    if (idx < 0) {
        if (cols_new(cs, key, &idx)) {
            return NULL;
        }
        cs->direct[key] = idx;
    }
    return &cs->cols[idx];
}

static struct cpu_col *
cols_lookup(struct cpu_cols *cs, uint32_t key)
{
    int32_t idx;
    uint32_t h = hash32(key) & cs->hmask;
    while ((idx = cs->hvals[h]) >= 0) {
        if (cs->hkeys[h] == key) {
            return &cs->cols[idx];
        }
        h = (h + 1) & cs->hmask;
    }
    if (cols_new(cs, key, &idx)) {
        return NULL;
    }
    cs->hkeys[h] = key;
    cs->hvals[h] = idx;
    if (2 * cs->n > cs->hmask && hash_grow(cs)) {
        return NULL;
    }
    return &cs->cols[idx];
}

/* qsort() has no context argument; each thread sorts its own columns. */
static __thread const struct cpu_col *sort_cols;

static int
cmp_col_key(const void *a_, const void *b_)
{
    uint32_t a = sort_cols[*(const uint32_t *) a_].key;
    uint32_t b = sort_cols[*(const uint32_t *) b_].key;

    return a < b ? -1 : a > b;
}

static void
cols_free(struct cpu_cols *cs)
{
    size_t i;

    if (!cs) {
        return;
    }
    for (i = 0; i < cs->cap; i++) {
        free(cs->cols[i].w);
    }
    free(cs->cols);
    free(cs->direct);
    free(cs->hkeys);
    free(cs->hvals);
    free(cs);
}

/* Forgets the previous batch's keys, keeping every allocation. */
static void
cols_reset(struct cpu_cols *cs)
{
    size_t i;

    for (i = 0; i < cs->n; i++) {
        if (cs->direct && cs->cols[i].key < cs->direct_size) {
            cs->direct[cs->cols[i].key] = -1;
        }
    }
    if (cs->hvals) {
        memset(cs->hvals, 0xff, (cs->hmask + 1) * sizeof *cs->hvals);
    }
    cs->n = 0;
}

int
gpu_index_cpu_build(void **statep, const uint32_t *values, uint32_t n,
                    unsigned int bits, enum gpu_index_encoding enc,
                    struct gpu_index_bitmaps *out)
{
    bool plwah = enc == GPU_INDEX_PLWAH;
    struct cpu_cols *cs = statep ? *statep : NULL;
    uint32_t maxv = 0, r, chunk, bit;
    size_t i, total;
    int error = GPU_OK;

    for (r = 0; r < n; r++) {
        maxv = values[r] > maxv ? values[r] : maxv;
    }
    if (bits < 32 && maxv >> bits) {
        return GPU_ERR_INVALID;     /* As the CUDA backend refuses it. */
    }
    if (!cs) {
        cs = calloc(1, sizeof *cs);
        if (!cs) {
            return GPU_ERR_NOMEM;
        }
        if (statep) {
            *statep = cs;
        }
    }
    cols_reset(cs);
    if (maxv < (1u << 20)) {
        if (cs->direct_size < maxv + 1) {
            int32_t *d = realloc(cs->direct, (maxv + 1) * sizeof *d);

            if (!d) {
                error = GPU_ERR_NOMEM;
                goto out;
            }
            memset(d + cs->direct_size, 0xff,
                   (maxv + 1 - cs->direct_size) * sizeof *d);
            cs->direct = d;
            cs->direct_size = maxv + 1;
        }
    } else if (!cs->hvals && hash_grow(cs)) {
        error = GPU_ERR_NOMEM;
        goto out;
    }
    bool direct = maxv < (1u << 20);

    for (r = chunk = bit = 0; r < n; r++) {
        struct cpu_col *c = direct ? cols_lookup_direct(cs, values[r])
                                   : cols_lookup(cs, values[r]);

        if (!c) {
            error = GPU_ERR_NOMEM;
            goto out;
        }
        if (c->lit && c->chunk != chunk && col_flush(c, plwah)) {
            error = GPU_ERR_NOMEM;
            goto out;
        }
        c->chunk = chunk;
        c->lit |= IX_LIT | (1u << bit);
        if (++bit == IX_CHUNK_BITS) {
            bit = 0;
            chunk++;
        }
    }

    total = 0;
    for (i = 0; i < cs->n; i++) {
        if (col_flush(&cs->cols[i], plwah)) {
            error = GPU_ERR_NOMEM;
            goto out;
        }
        total += cs->cols[i].n;
    }
    /* Sort an index, not the columns, so each keeps its vector. */
    uint32_t *order = malloc((cs->n ? cs->n : 1) * sizeof *order);
    if (!order) {
        error = GPU_ERR_NOMEM;
        goto out;
    }
    for (i = 0; i < cs->n; i++) {
        order[i] = i;
    }
    sort_cols = cs->cols;
    qsort(order, cs->n, sizeof *order, cmp_col_key);
    if (total > UINT32_MAX
        || gpu_index_bitmaps_reserve(out, cs->n, total)) {
        free(order);
        error = GPU_ERR_NOMEM;
        goto out;
    }
    out->n_rows = n;
    out->encoding = enc;
    out->n_keys = cs->n;
    out->n_words = total;
    total = 0;
    for (i = 0; i < cs->n; i++) {
        struct cpu_col *c = &cs->cols[order[i]];

        out->keys[i] = c->key;
        out->offsets[i] = total;
        if (c->n) {
            memcpy(out->words + total, c->w, c->n * sizeof *out->words);
        }
        total += c->n;
    }
    out->offsets[cs->n] = total;
    free(order);

out:
    if (!statep) {
        cols_free(cs);
    }
    return error;
}

/* The CPU builder's state: the column builder's allocations and, for
 * builds from a segment's records, the records and the columns of the
 * last pass over them. */
struct cpu_builder {
    void *cols;                 /* gpu_index_cpu_build()'s. */
    const struct gpu_index_record *recs;
    uint32_t n_recs;
    uint32_t *values;           /* CPU_ATTRS_PER_PASS columns. */
    size_t values_cap;
    int first_attr, n_attrs;    /* Columns in 'values'. */
};

/* Columns one pass over the records computes: the records (72 bytes
 * each) of a large segment do not fit in any cache, so a pass per column
 * would read them 40 times. */
#define CPU_ATTRS_PER_PASS 8

static int
cpu_init(struct gpu_index_builder *b)
{
    b->pdata = calloc(1, sizeof(struct cpu_builder));
    return b->pdata ? GPU_OK : GPU_ERR_NOMEM;
}

static void
cpu_uninit(struct gpu_index_builder *b)
{
    struct cpu_builder *c = b->pdata;

    cols_free(c->cols);
    free(c->values);
    free(c);
    b->pdata = NULL;
}

static int
cpu_build(struct gpu_index_builder *b, const uint32_t *values, uint32_t n,
          unsigned int bits, enum gpu_index_encoding enc, unsigned int flags,
          struct gpu_index_bitmaps *out, struct gpu_index_build_times *t)
{
    struct cpu_builder *c = b->pdata;
    double t0 = gpu_index_now_ms();
    int error = gpu_index_cpu_build(&c->cols, values, n, bits, enc, out);

    if (t) {
        memset(t, 0, sizeof *t);
        t->kernel_ms = t->total_ms = gpu_index_now_ms() - t0;
    }
    return error;
}

static int
cpu_load_records(struct gpu_index_builder *b,
                 const struct gpu_index_record *recs, uint32_t n)
{
    struct cpu_builder *c = b->pdata;
    size_t need = (size_t) CPU_ATTRS_PER_PASS * n;

    if (need > c->values_cap) {
        /* Kept for the next segment: a fresh 32 MB every time costs its
         * page faults every time. */
        uint32_t *v = realloc(c->values, need * sizeof *v);

        if (!v) {
            return GPU_ERR_NOMEM;
        }
        c->values = v;
        c->values_cap = need;
    }
    c->recs = recs;
    c->n_recs = n;
    c->n_attrs = 0;
    return GPU_OK;
}

static int
cpu_build_attr(struct gpu_index_builder *b, int attr, uint32_t n,
               enum gpu_index_encoding enc, struct gpu_index_bitmaps *out)
{
    struct cpu_builder *c = b->pdata;

    if (!c->recs || n != c->n_recs) {
        return GPU_ERR_INVALID;
    }
    if (attr < c->first_attr || attr >= c->first_attr + c->n_attrs) {
        int k = GPU_INDEX_N_ATTRS - attr;

        k = k < CPU_ATTRS_PER_PASS ? k : CPU_ATTRS_PER_PASS;
        for (uint32_t i = 0; i < n; i++) {
            for (int j = 0; j < k; j++) {
                c->values[(size_t) j * n + i]
                    = ix_attr_value(&c->recs[i], attr + j);
            }
        }
        c->first_attr = attr;
        c->n_attrs = k;
    }
    return gpu_index_cpu_build(&c->cols,
                               c->values + (size_t) (attr - c->first_attr)
                                           * n,
                               n, gpu_index_attr_bits(attr), enc, out);
}

const struct gpu_index_provider gpu_index_cpu_provider = {
    .name = "cpu",
    .type = GPU_INDEX_BACKEND_CPU,
    .init = cpu_init,
    .uninit = cpu_uninit,
    .build = cpu_build,
    .load_records = cpu_load_records,
    .build_attr = cpu_build_attr,
};
