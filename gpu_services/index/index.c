/*
 * The index core: bitmaps, the reference decoder and checker, builders
 * and their backend choice, packet records and their attributes.
 */
#include <config.h>

#include "gpu_services/index/index-private.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double
gpu_index_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void
set_err(char *err, size_t size, const char *fmt, ...)
{
    va_list args;

    if (err && size) {
        va_start(args, fmt);
        vsnprintf(err, size, fmt, args);
        va_end(args);
    }
}

const char *
gpu_index_encoding_name(enum gpu_index_encoding e)
{
    return e == GPU_INDEX_PLWAH ? "plwah" : "wah";
}

/* ---- Bitmaps. ---- */

void
gpu_index_bitmaps_init(struct gpu_index_bitmaps *bm)
{
    memset(bm, 0, sizeof *bm);
}

void
gpu_index_bitmaps_init_pinned(struct gpu_index_bitmaps *bm)
{
    gpu_index_bitmaps_init(bm);
    bm->pinned = true;
}

void
gpu_index_bitmaps_free(struct gpu_index_bitmaps *bm)
{
    if (bm) {
        bool pinned = bm->pinned;

        if (pinned) {
            gpu_host_free(bm->keys);
            gpu_host_free(bm->offsets);
            gpu_host_free(bm->words);
        } else {
            free(bm->keys);
            free(bm->offsets);
            free(bm->words);
        }
        gpu_index_bitmaps_init(bm);
        bm->pinned = pinned;
    }
}

/* realloc() for either kind of memory. */
static uint32_t *
grow(uint32_t *p, size_t old_n, size_t new_n, bool pinned)
{
    uint32_t *q;

    if (!pinned) {
        return realloc(p, new_n * sizeof *p);
    }
    q = gpu_host_alloc(new_n * sizeof *q);
    if (q) {
        if (p) {
            memcpy(q, p, old_n * sizeof *p);
        }
        gpu_host_free(p);
    }
    return q;
}

int
gpu_index_bitmaps_reserve(struct gpu_index_bitmaps *bm, size_t n_keys,
                          size_t n_words)
{
    if (n_keys > bm->keys_cap || !bm->offsets) {
        size_t cap = n_keys > 2 * bm->keys_cap ? n_keys : 2 * bm->keys_cap;
        uint32_t *k, *o;

        cap = cap ? cap : 1;
        k = grow(bm->keys, bm->keys_cap, cap, bm->pinned);
        if (k) {
            bm->keys = k;
        }
        o = grow(bm->offsets, bm->offsets ? bm->keys_cap + 1 : 0, cap + 1,
                 bm->pinned);
        if (o) {
            bm->offsets = o;
        }
        if (!k || !o) {
            return GPU_ERR_NOMEM;
        }
        bm->keys_cap = cap;
    }
    if (n_words > bm->words_cap || !bm->words) {
        size_t cap = n_words > 2 * bm->words_cap ? n_words
                                                 : 2 * bm->words_cap;
        uint32_t *w;

        cap = cap ? cap : 1;
        w = grow(bm->words, bm->words_cap, cap, bm->pinned);
        if (!w) {
            return GPU_ERR_NOMEM;
        }
        bm->words = w;
        bm->words_cap = cap;
    }
    return GPU_OK;
}

bool
gpu_index_bitmaps_equal(const struct gpu_index_bitmaps *a,
                        const struct gpu_index_bitmaps *b)
{
    return (a->n_rows == b->n_rows && a->encoding == b->encoding
            && a->n_keys == b->n_keys && a->n_words == b->n_words
            && !memcmp(a->keys, b->keys, a->n_keys * sizeof *a->keys)
            && !memcmp(a->offsets, b->offsets,
                       (a->n_keys + 1) * sizeof *a->offsets)
            && !memcmp(a->words, b->words, a->n_words * sizeof *a->words));
}

int64_t
gpu_index_bitmaps_find(const struct gpu_index_bitmaps *bm, uint32_t value)
{
    uint32_t lo = 0, hi = bm->n_keys;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (bm->keys[mid] < value) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < bm->n_keys && bm->keys[lo] == value ? (int64_t) lo : -1;
}

/* Walks column 'col', checking it strictly (as the builders write it),
 * and stores up to 'max' row ids in 'rows' (may be NULL).  Returns the
 * number of rows or GPU_ERR_INVALID with the reason in 'err'. */
static int64_t
walk_column(const struct gpu_index_bitmaps *bm, uint32_t col,
            uint32_t *rows, size_t max, char *err, size_t err_size)
{
    const uint32_t *w = bm->words + bm->offsets[col];
    const uint32_t *end = bm->words + bm->offsets[col + 1];
    uint64_t n_chunks = (bm->n_rows + 30ull) / 31;
    uint64_t chunk = 0;
    int64_t n = 0;
    bool plwah = bm->encoding == GPU_INDEX_PLWAH;
    bool need_lit = false;

    if (w == end) {
        set_err(err, err_size, "column %"PRIu32" is empty", col);
        return GPU_ERR_INVALID;
    }
    for (; w < end; w++) {
        uint32_t x = *w, p, pos = 0;

        if (x & IX_LIT) {
            p = x & IX_PAYLOAD;
            if (!p) {
                set_err(err, err_size, "column %"PRIu32": empty literal",
                        col);
                return GPU_ERR_INVALID;
            }
            need_lit = false;
        } else {
            uint64_t count = plwah ? x & IX_PL_COUNT : x & IX_WAH_COUNT;

            if (x & IX_FILL1) {
                set_err(err, err_size, "column %"PRIu32": 1-fill in an "
                        "index", col);
                return GPU_ERR_INVALID;
            }
            if (need_lit || count == 0) {
                set_err(err, err_size, "column %"PRIu32": %s", col,
                        count ? "two fills in a row" : "empty fill");
                return GPU_ERR_INVALID;
            }
            chunk += count;
            pos = plwah ? (x >> IX_PL_SHIFT) & 31 : 0;
            if (pos == 0) {
                need_lit = true;
                continue;
            }
            p = 1u << (pos - 1);
        }
        if (chunk >= n_chunks) {
            set_err(err, err_size, "column %"PRIu32": chunk %"PRIu64
                    " past the end (%"PRIu64" chunks)", col, chunk,
                    n_chunks);
            return GPU_ERR_INVALID;
        }
        while (p) {
            uint64_t row = chunk * 31 + ix_ctz(p);

            if (row >= bm->n_rows) {
                set_err(err, err_size, "column %"PRIu32": row %"PRIu64
                        " past the end (%"PRIu32" rows)", col, row,
                        bm->n_rows);
                return GPU_ERR_INVALID;
            }
            if (rows && (size_t) n < max) {
                rows[n] = row;
            }
            n++;
            p &= p - 1;
        }
        chunk++;
    }
    if (need_lit) {
        set_err(err, err_size, "column %"PRIu32" ends in a fill", col);
        return GPU_ERR_INVALID;
    }
    return n;
}

int64_t
gpu_index_decode_column(const struct gpu_index_bitmaps *bm, uint32_t col,
                        uint32_t *rows, size_t max)
{
    if (col >= bm->n_keys || bm->offsets[col] > bm->offsets[col + 1]
        || bm->offsets[col + 1] > bm->n_words) {
        return GPU_ERR_INVALID;
    }
    return walk_column(bm, col, rows, max, NULL, 0);
}

int
gpu_index_bitmaps_check(const struct gpu_index_bitmaps *bm, char *err,
                        size_t err_size)
{
    uint64_t total = 0;
    uint32_t i;

    if (bm->n_rows > GPU_INDEX_MAX_ROWS
        || (bm->encoding != GPU_INDEX_WAH
            && bm->encoding != GPU_INDEX_PLWAH)) {
        set_err(err, err_size, "bad row count or encoding");
        return GPU_ERR_INVALID;
    }
    if (bm->n_keys > bm->n_rows || bm->offsets[0] != 0
        || bm->offsets[bm->n_keys] != bm->n_words) {
        set_err(err, err_size, "column directory does not add up");
        return GPU_ERR_INVALID;
    }
    for (i = 0; i < bm->n_keys; i++) {
        int64_t n;

        if (i && bm->keys[i] <= bm->keys[i - 1]) {
            set_err(err, err_size, "keys not ascending at %"PRIu32, i);
            return GPU_ERR_INVALID;
        }
        if (bm->offsets[i + 1] <= bm->offsets[i]
            || bm->offsets[i + 1] > bm->n_words) {
            set_err(err, err_size, "bad offsets at column %"PRIu32, i);
            return GPU_ERR_INVALID;
        }
        n = walk_column(bm, i, NULL, 0, err, err_size);
        if (n < 0) {
            return GPU_ERR_INVALID;
        }
        total += n;
    }
    /* Every row has exactly one value. */
    if (total != bm->n_rows) {
        set_err(err, err_size, "columns hold %"PRIu64" rows, not %"PRIu32,
                total, bm->n_rows);
        return GPU_ERR_INVALID;
    }
    return GPU_OK;
}

/* ---- Builders. ---- */

const char *
gpu_index_backend_name(enum gpu_index_backend b)
{
    switch (b) {
    case GPU_INDEX_BACKEND_AUTO: return "auto";
    case GPU_INDEX_BACKEND_CPU: return "cpu";
    case GPU_INDEX_BACKEND_CUDA: return "cuda";
    }
    return "?";
}

bool
gpu_index_cuda_available(void)
{
#ifdef HAVE_CUDA
    char name[256];

    return gpu_index_cuda_probe(name, sizeof name);
#else
    return false;
#endif
}

int
gpu_index_builder_create(enum gpu_index_backend backend, uint32_t max_rows,
                         struct gpu_index_builder **bp, char *why,
                         size_t why_size)
{
    struct gpu_index_builder *b;
    const char *reason = NULL;
    char name[256] = "";
    int error;

    *bp = NULL;
    set_err(why, why_size, "%s", "");
    if (max_rows == 0 || max_rows > GPU_INDEX_MAX_ROWS
        || (backend != GPU_INDEX_BACKEND_AUTO
            && backend != GPU_INDEX_BACKEND_CPU
            && backend != GPU_INDEX_BACKEND_CUDA)) {
        return GPU_ERR_INVALID;
    }
    b = calloc(1, sizeof *b);
    if (!b) {
        return GPU_ERR_NOMEM;
    }
    b->max_rows = max_rows;
    b->prov = &gpu_index_cpu_provider;

    if (backend != GPU_INDEX_BACKEND_CPU) {
#ifdef HAVE_CUDA
        if (gpu_index_cuda_probe(name, sizeof name)) {
            b->prov = &gpu_index_cuda_provider;
        } else {
            gpu_device_count(&reason);
            reason = reason ? reason : "no usable CUDA device";
        }
#else
        reason = "built without CUDA";
#endif
        if (reason && backend == GPU_INDEX_BACKEND_CUDA) {
            set_err(why, why_size, "%s", reason);
            free(b);
            return GPU_ERR_NO_DEVICE;
        }
    }

    error = b->prov->init(b);
    if (error && b->prov != &gpu_index_cpu_provider
        && backend == GPU_INDEX_BACKEND_AUTO) {
        reason = "CUDA builder could not be set up (device memory?)";
        b->prov = &gpu_index_cpu_provider;
        error = b->prov->init(b);
    }
    if (error) {
        set_err(why, why_size, "%s", gpu_status_string(error));
        free(b);
        return error;
    }
    if (b->prov == &gpu_index_cpu_provider) {
        snprintf(b->describe, sizeof b->describe, "cpu%s%s%s",
                 reason ? " (" : "", reason ? reason : "",
                 reason ? ")" : "");
        if (reason) {
            set_err(why, why_size, "%s", reason);
        }
    } else {
        snprintf(b->describe, sizeof b->describe, "cuda: %s", name);
    }
    *bp = b;
    return GPU_OK;
}

void
gpu_index_builder_destroy(struct gpu_index_builder *b)
{
    if (b) {
        b->prov->uninit(b);
        free(b);
    }
}

enum gpu_index_backend
gpu_index_builder_backend(const struct gpu_index_builder *b)
{
    return b->prov->type;
}

const char *
gpu_index_builder_describe(const struct gpu_index_builder *b)
{
    return b->describe;
}

uint64_t
gpu_index_builder_fallbacks(const struct gpu_index_builder *b)
{
    return __atomic_load_n(&b->n_fallbacks, __ATOMIC_RELAXED);
}

void
gpu_index_builder_inject_fault(struct gpu_index_builder *b, int error,
                               unsigned int n)
{
    __atomic_store_n(&b->fault_error, error, __ATOMIC_RELAXED);
    __atomic_store_n(&b->faults_left, n, __ATOMIC_RELEASE);
}

/* Returns the error of an injected fault, using it up, or 0. */
static int
take_fault(struct gpu_index_builder *b)
{
    unsigned int n = __atomic_load_n(&b->faults_left, __ATOMIC_ACQUIRE);

    while (n) {
        if (__atomic_compare_exchange_n(&b->faults_left, &n, n - 1, true,
                                        __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            return __atomic_load_n(&b->fault_error, __ATOMIC_RELAXED);
        }
    }
    return 0;
}

int
gpu_index_build(struct gpu_index_builder *b, const uint32_t *values,
                uint32_t n, unsigned int bits, enum gpu_index_encoding enc,
                unsigned int flags, struct gpu_index_bitmaps *out,
                struct gpu_index_build_times *times)
{
    int error;

    if (n > b->max_rows || bits < 1 || bits > 32
        || (enc != GPU_INDEX_WAH && enc != GPU_INDEX_PLWAH)
        || (!values && n && (!(flags & GPU_INDEX_BUILD_RESIDENT)
                             || b->prov == &gpu_index_cpu_provider))) {
        return GPU_ERR_INVALID;
    }
    if (n == 0) {
        if (gpu_index_bitmaps_reserve(out, 0, 0)) {
            return GPU_ERR_NOMEM;
        }
        out->n_rows = out->n_keys = out->n_words = 0;
        out->encoding = enc;
        out->offsets[0] = 0;
        if (times) {
            memset(times, 0, sizeof *times);
        }
        return GPU_OK;
    }
    error = take_fault(b);
    if (!error) {
        error = b->prov->build(b, values, n, bits, enc, flags, out, times);
    }
    if ((error == GPU_ERR_DEVICE || error == GPU_ERR_DEVICE_NOMEM)
        && values && !(flags & GPU_INDEX_BUILD_RESIDENT)) {
        /* The device failed this batch; the CPU still answers it. */
        __atomic_add_fetch(&b->n_fallbacks, 1, __ATOMIC_RELAXED);
        error = gpu_index_cpu_build(NULL, values, n, bits, enc, out);
    }
    return error;
}

/* ---- Records. ---- */

static uint16_t
rd16(const uint8_t *p)
{
    return (uint16_t) p[0] << 8 | p[1];
}

static void
parse_l4(struct gpu_index_record *rec, const uint8_t *p, uint32_t len,
         uint8_t proto)
{
    rec->proto = proto;
    if (proto == 6 || proto == 17 || proto == 132) {
        if (len < 4) {
            return;
        }
        rec->sport = rd16(p);
        rec->dport = rd16(p + 2);
        if (proto == 6) {
            /* Flags sit at byte 13; a TCP header cut before them keeps
             * its ports but is not a TCP record with flags. */
            if (len < 14) {
                return;
            }
            rec->tcp_flags = p[13];
        }
        rec->parsed |= GPU_INDEX_PARSED_L4;
    }
}

void
gpu_index_record_from_frame(struct gpu_index_record *rec,
                            const uint8_t *frame, uint32_t cap_len,
                            uint32_t wire_len, uint64_t ts_ns,
                            uint32_t in_port)
{
    uint32_t off = 12, len = cap_len;
    uint16_t type;
    int tags;

    memset(rec, 0, sizeof *rec);
    rec->ts_ns = ts_ns;
    rec->in_port = in_port;
    rec->wire_len = wire_len;
    rec->cap_len = cap_len;
    rec->vlan = GPU_INDEX_NO_VLAN;
    if (!frame || len < 14) {
        return;
    }
    type = rd16(frame + off);
    off += 2;
    for (tags = 0; (type == 0x8100 || type == 0x88a8) && tags < 2;
         tags++) {
        if (len < off + 4) {
            return;
        }
        if (rec->vlan == GPU_INDEX_NO_VLAN) {
            rec->vlan = rd16(frame + off) & 0xfff;
        }
        type = rd16(frame + off + 2);
        off += 4;
    }
    rec->eth_type = type;
    rec->parsed |= GPU_INDEX_PARSED_ETH;

    const uint8_t *p = frame + off;
    len -= off;
    if (type == 0x0800) {
        uint32_t ihl;

        if (len < 20 || (p[0] >> 4) != 4 || (ihl = (p[0] & 15) * 4) < 20) {
            return;
        }
        rec->ip_version = 4;
        rec->proto = p[9];
        memcpy(rec->src, p + 12, 4);
        memcpy(rec->dst, p + 16, 4);
        rec->parsed |= GPU_INDEX_PARSED_IP;
        /* Only a first fragment carries the L4 header. */
        if ((rd16(p + 6) & 0x1fff) || len < ihl) {
            return;
        }
        parse_l4(rec, p + ihl, len - ihl, p[9]);
    } else if (type == 0x86dd) {
        uint8_t nh;
        int hops;

        if (len < 40 || (p[0] >> 4) != 6) {
            return;
        }
        rec->ip_version = 6;
        nh = p[6];
        memcpy(rec->src, p + 8, 16);
        memcpy(rec->dst, p + 24, 16);
        rec->proto = nh;
        rec->parsed |= GPU_INDEX_PARSED_IP;
        p += 40;
        len -= 40;
        /* Extension headers: hop-by-hop, routing, fragment, destination
         * options, AH; a bounded number, each checked against len. */
        for (hops = 0; hops < 8; hops++) {
            uint32_t hlen;

            if (nh != 0 && nh != 43 && nh != 44 && nh != 60 && nh != 51) {
                break;
            }
            if (len < 8) {
                rec->proto = nh;
                return;
            }
            if (nh == 44) {
                if (rd16(p + 2) & 0xfff8) {
                    rec->proto = p[0];
                    return;     /* Not the first fragment. */
                }
                hlen = 8;
            } else if (nh == 51) {
                hlen = (p[1] + 2) * 4;
            } else {
                hlen = (p[1] + 1) * 8;
            }
            nh = p[0];
            rec->proto = nh;
            if (len < hlen) {
                return;
            }
            p += hlen;
            len -= hlen;
        }
        parse_l4(rec, p, len, nh);
    }
}

static const char *attr_names[GPU_INDEX_N_ATTRS] = {
    "time", "in_port", "vlan", "ipver", "proto", "sport", "dport",
    "tcp_flags",
    "src0", "src1", "src2", "src3", "src4", "src5", "src6", "src7",
    "src8", "src9", "src10", "src11", "src12", "src13", "src14", "src15",
    "dst0", "dst1", "dst2", "dst3", "dst4", "dst5", "dst6", "dst7",
    "dst8", "dst9", "dst10", "dst11", "dst12", "dst13", "dst14", "dst15",
};

const char *
gpu_index_attr_name(enum gpu_index_attr a)
{
    return a < GPU_INDEX_N_ATTRS ? attr_names[a] : "?";
}

unsigned int
gpu_index_attr_bits(enum gpu_index_attr a)
{
    switch (a) {
    case GPU_INDEX_ATTR_TIME:
    case GPU_INDEX_ATTR_IN_PORT:
        return 32;
    case GPU_INDEX_ATTR_VLAN:
        return 13;
    case GPU_INDEX_ATTR_IPVER:
        return 3;
    case GPU_INDEX_ATTR_SPORT:
    case GPU_INDEX_ATTR_DPORT:
        return 17;
    default:
        return 9;
    }
}

uint32_t
gpu_index_attr_value(const struct gpu_index_record *r, enum gpu_index_attr a)
{
    return ix_attr_value(r, a);
}

void
gpu_index_segment_index_init(struct gpu_index_segment_index *s)
{
    int i;

    memset(s, 0, sizeof *s);
    for (i = 0; i < GPU_INDEX_N_ATTRS; i++) {
        gpu_index_bitmaps_init(&s->attrs[i]);
    }
}

void
gpu_index_segment_index_free(struct gpu_index_segment_index *s)
{
    int i;

    for (i = 0; i < GPU_INDEX_N_ATTRS; i++) {
        gpu_index_bitmaps_free(&s->attrs[i]);
    }
    free(s->values);
    s->values = NULL;
    s->values_cap = 0;
}

/* One builder's share of a segment: attributes [first, end). */
struct attr_range {
    struct gpu_index_builder *b;
    const struct gpu_index_record *recs;
    uint32_t n;
    enum gpu_index_encoding enc;
    struct gpu_index_segment_index *seg;
    uint32_t *values;           /* n, for a column built on the CPU. */
    int first, end;
    int error;
};

/* Builds column 'a' of 'ar->seg' on the host, for a column whose device
 * build failed, and counts it as gpu_index_build() counts its
 * fallbacks. */
static int
build_attr_on_cpu(const struct attr_range *ar, int a)
{
    for (uint32_t i = 0; i < ar->n; i++) {
        ar->values[i] = ix_attr_value(&ar->recs[i], a);
    }
    __atomic_add_fetch(&ar->b->n_fallbacks, 1, __ATOMIC_RELAXED);
    return gpu_index_cpu_build(NULL, ar->values, ar->n,
                               gpu_index_attr_bits(a), ar->enc,
                               &ar->seg->attrs[a]);
}

/* Builds a share of a segment's columns from its records, where the
 * builder runs: the CUDA builder has the records cross PCIe once, 72
 * bytes a row, instead of 40 columns of 4 bytes a row that a host core
 * computed walking them.  A column the device fails (or all of them, if
 * the records could not be loaded) is built on the CPU and counted. */
static void *
build_range(void *ar_)
{
    struct attr_range *ar = ar_;
    struct gpu_index_builder *b = ar->b;
    int error = b->prov->load_records(b, ar->recs, ar->n);
    bool loaded = !error;

    if (error && error != GPU_ERR_DEVICE && error != GPU_ERR_DEVICE_NOMEM) {
        ar->error = error;
        return NULL;
    }
    for (int a = ar->first; a < ar->end; a++) {
        error = loaded ? take_fault(b) : GPU_ERR_DEVICE;
        if (!error) {
            error = b->prov->build_attr(b, a, ar->n, ar->enc,
                                        &ar->seg->attrs[a]);
        }
        if (error == GPU_ERR_DEVICE || error == GPU_ERR_DEVICE_NOMEM) {
            error = build_attr_on_cpu(ar, a);
        }
        if (error) {
            ar->error = error;
            return NULL;
        }
    }
    ar->error = GPU_OK;
    return NULL;
}

int
gpu_index_segment_index_build(struct gpu_index_builder *b,
                              const struct gpu_index_record *recs,
                              uint32_t n, enum gpu_index_encoding enc,
                              struct gpu_index_segment_index *seg)
{
    return gpu_index_segment_index_build_n(&b, 1, recs, n, enc, seg);
}

int
gpu_index_segment_index_build_n(struct gpu_index_builder **b,
                                int n_builders,
                                const struct gpu_index_record *recs,
                                uint32_t n, enum gpu_index_encoding enc,
                                struct gpu_index_segment_index *seg)
{
    struct attr_range ranges[GPU_INDEX_N_ATTRS];
    pthread_t threads[GPU_INDEX_N_ATTRS];
    int nb = n_builders < 1 ? 1
             : n_builders > GPU_INDEX_N_ATTRS ? GPU_INDEX_N_ATTRS
             : n_builders;
    int error = GPU_OK;

    for (int t = 0; t < nb; t++) {
        if (n > b[t]->max_rows) {
            return GPU_ERR_INVALID;
        }
    }
    seg->n_rows = n;
    seg->encoding = enc;
    if (!n) {
        for (int a = 0; a < GPU_INDEX_N_ATTRS && !error; a++) {
            error = gpu_index_build(b[0], NULL, 0, gpu_index_attr_bits(a),
                                    enc, 0, &seg->attrs[a], NULL);
        }
        return error;
    }
    if (seg->values_cap < (size_t) n * nb) {
        /* Kept for the next segment: a fresh buffer every time costs its
         * page faults every time. */
        uint32_t *v = realloc(seg->values, (size_t) n * nb * sizeof *v);

        if (!v) {
            return GPU_ERR_NOMEM;
        }
        seg->values = v;
        seg->values_cap = (size_t) n * nb;
    }
    for (int t = 0; t < nb; t++) {
        ranges[t] = (struct attr_range) {
            .b = b[t], .recs = recs, .n = n, .enc = enc, .seg = seg,
            .values = seg->values + (size_t) n * t,
            .first = t * GPU_INDEX_N_ATTRS / nb,
            .end = (t + 1) * GPU_INDEX_N_ATTRS / nb,
        };
    }
    /* The first share in this thread, the others in threads of their
     * own (one segment a second or so: starting them costs nothing). */
    for (int t = 1; t < nb; t++) {
        if (pthread_create(&threads[t], NULL, build_range, &ranges[t])) {
            build_range(&ranges[t]);
            threads[t] = pthread_self();
        }
    }
    build_range(&ranges[0]);
    for (int t = 0; t < nb; t++) {
        if (t && !pthread_equal(threads[t], pthread_self())) {
            pthread_join(threads[t], NULL);
        }
        if (!error) {
            error = ranges[t].error;
        }
    }
    return error;
}

void
gpu_index_record_format(const struct gpu_index_record *r, char *buf,
                        size_t size)
{
    char src[INET6_ADDRSTRLEN] = "-", dst[INET6_ADDRSTRLEN] = "-";
    char proto[16];
    int af = r->ip_version == 4 ? AF_INET : AF_INET6;
    time_t secs = r->ts_ns / 1000000000u;
    struct tm tm;
    char when[32];

    gmtime_r(&secs, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    if (r->ip_version) {
        inet_ntop(af, r->src, src, sizeof src);
        inet_ntop(af, r->dst, dst, sizeof dst);
    }
    switch (r->ip_version ? r->proto : 256) {
    case 6: snprintf(proto, sizeof proto, "tcp"); break;
    case 17: snprintf(proto, sizeof proto, "udp"); break;
    case 1: snprintf(proto, sizeof proto, "icmp"); break;
    case 58: snprintf(proto, sizeof proto, "icmp6"); break;
    case 132: snprintf(proto, sizeof proto, "sctp"); break;
    case 256: snprintf(proto, sizeof proto, "eth:0x%04x", r->eth_type);
        break;
    default: snprintf(proto, sizeof proto, "ip:%u", r->proto); break;
    }
    if (r->parsed & GPU_INDEX_PARSED_L4) {
        snprintf(buf, size, "%s.%09"PRIu64"Z %s %s%s%s:%u > %s%s%s:%u "
                 "len %"PRIu32, when, r->ts_ns % 1000000000u, proto,
                 af == AF_INET6 ? "[" : "", src, af == AF_INET6 ? "]" : "",
                 r->sport, af == AF_INET6 ? "[" : "", dst,
                 af == AF_INET6 ? "]" : "", r->dport, r->wire_len);
    } else {
        snprintf(buf, size, "%s.%09"PRIu64"Z %s %s > %s len %"PRIu32,
                 when, r->ts_ns % 1000000000u, proto, src, dst,
                 r->wire_len);
    }
}
