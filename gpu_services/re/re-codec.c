/*
 * Copyright (c) 2026 The ovs-gpu authors.
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at:
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

/*
 * RE encoder and decoder: the FIFO byte cache both ends keep in step, the
 * encoder's chunk table, the shim wire format (gpu-re.h), and the packet
 * helpers on Ethernet frames.
 *
 * The cache is addressed by stream position: the n-th byte of every
 * payload the encoder has passed in this epoch.  The byte at position q
 * is in the cache while q >= pos - min(pos, size), at ring[q % size].  A
 * shim carries the encoder's pos and epoch, and a hash of the payload;
 * the decoder (see its section below) places payloads by those positions,
 * refuses references into bytes it does not hold, and checks every
 * result against the hash, so a lost or reordered packet, or a cache out
 * of step, can make packets undecodable but never wrong.
 */
#include <config.h>

#include "gpu_services/re/re-private.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_CACHE (1ULL << 30)
#define WAYS 4

/* ---- The FIFO byte cache. ---- */

struct re_cache {
    uint8_t *ring;
    uint64_t size;
    uint64_t pos;               /* Stream position of the next byte. */
    uint64_t prefetched;        /* cache_prefetch_append() asked for the
                                 * lines before this position (a line's
                                 * start)... */
    uint64_t prefetched_at;     /* ...whose offset in 'ring' is this. */
};

static uint64_t
cache_fill(const struct re_cache *c)
{
    return c->pos < c->size ? c->pos : c->size;
}

/* Lowest stream position still cached. */
static uint64_t
cache_low(const struct re_cache *c)
{
    return c->pos - cache_fill(c);
}

/* Writes 'n' bytes (at most the cache's size) at stream position 'q'. */
static void
cache_write(struct re_cache *c, uint64_t q, const uint8_t *p, size_t n)
{
    while (n) {
        size_t at = q % c->size;
        size_t k = c->size - at < n ? c->size - at : n;

        memcpy(c->ring + at, p, k);
        p += k;
        q += k;
        n -= k;
    }
}

/* How far ahead of the appends cache_prefetch_append() keeps asking: an
 * MTU's payload. */
#define CACHE_PREFETCH_AHEAD 2048

/* Asks for the cache lines the next appends will write (the oldest bytes
 * the cache holds, cold by then: their reads for ownership stalled each
 * append's copy, a quarter of the decoder's time on 1,460-byte payloads),
 * CACHE_PREFETCH_AHEAD bytes ahead, each line once, so that they arrive
 * while the thread does other work. */
static void
cache_prefetch_append(struct re_cache *c)
{
    uint64_t end = c->pos + CACHE_PREFETCH_AHEAD;
    uint64_t q = c->prefetched;
    uint64_t at = c->prefetched_at;

    if (q + 64 <= c->pos || q > end) {
        /* A new epoch, or a jump past a gap: the ring's offset by a
         * division here, rather than one every call. */
        q = c->pos & ~(uint64_t) 63;
        at = q % c->size;
    }
    for (; q < end; q += 64) {
        __builtin_prefetch(c->ring + at, 1, 3);
        at += 64;
        if (at >= c->size) {
            at -= c->size;
        }
    }
    c->prefetched = q;
    c->prefetched_at = at;
}

/* Appends 'n' bytes to the stream, and asks for the lines the next
 * appends will write. */
static void
cache_append(struct re_cache *c, const uint8_t *p, size_t n)
{
    size_t skip = n > c->size ? n - c->size : 0;

    cache_write(c, c->pos + skip, p + skip, n - skip);
    c->pos += n;
    cache_prefetch_append(c);
}

/* Copies cached bytes [q, q + n) to 'out'; the caller checked the
 * range. */
static void
cache_read(const struct re_cache *c, uint64_t q, uint8_t *out, size_t n)
{
    while (n) {
        size_t at = q % c->size;
        size_t k = c->size - at < n ? c->size - at : n;

        memcpy(out, c->ring + at, k);
        out += k;
        q += k;
        n -= k;
    }
}

static bool
cache_equal(const struct re_cache *c, uint64_t q, const uint8_t *p, size_t n)
{
    while (n) {
        size_t at = q % c->size;
        size_t k = c->size - at < n ? c->size - at : n;

        if (memcmp(c->ring + at, p, k)) {
            return false;
        }
        p += k;
        q += k;
        n -= k;
    }
    return true;
}

static inline uint64_t
load64(const uint8_t *p)
{
    return gpu_re_load64le(p);
}

/* How many bytes match going forward from payload p[0 .. n) and cache
 * position q (at most n), a contiguous run of the ring at a time. */
static size_t
cache_match_fwd(const struct re_cache *c, uint64_t q, const uint8_t *p,
                size_t n)
{
    size_t m = 0;

    while (m < n) {
        size_t at = (q + m) % c->size;
        size_t k = c->size - at < n - m ? c->size - at : n - m;
        const uint8_t *r = c->ring + at;
        size_t i = 0;

        /* Eight bytes a step: the first differing byte is the lowest
         * set byte of the xor (little-endian loads). */
        while (i + 8 <= k) {
            uint64_t x = load64(r + i) ^ load64(p + m + i);

            if (x) {
                return m + i + __builtin_ctzll(x) / 8;
            }
            i += 8;
        }
        while (i < k && r[i] == p[m + i]) {
            i++;
        }
        m += i;
        if (i < k) {
            break;
        }
    }
    return m;
}

/* The same backwards: bytes p[-1], p[-2], ... (at most n) against cache
 * positions q - 1, q - 2, .... */
static size_t
cache_match_back(const struct re_cache *c, uint64_t q, const uint8_t *p,
                 size_t n)
{
    size_t m = 0;

    while (m < n) {
        size_t at = (q - m - 1) % c->size;      /* Position q - m - 1. */
        size_t k = at + 1 < n - m ? at + 1 : n - m;
        const uint8_t *r = c->ring + at;
        const uint8_t *r_end = r + 1, *p_end = p - m;
        size_t i = 0;

        /* Eight bytes a step, as forwards: the last differing byte is
         * the highest set byte of the xor (little-endian loads). */
        while (i + 8 <= k) {
            uint64_t x = load64(r_end - i - 8) ^ load64(p_end - i - 8);

            if (x) {
                return m + i + __builtin_clzll(x) / 8;
            }
            i += 8;
        }
        while (i < k && r[-(ptrdiff_t) i] == p[-(ptrdiff_t) (m + i) - 1]) {
            i++;
        }
        m += i;
        if (i < k) {
            break;
        }
    }
    return m;
}

/* Zero-filled memory of 'size' bytes, 'align'-aligned, with every page
 * faulted in now, at configuration time, rather than a page fault per
 * 4 KB in the datapath while the cache and the table first fill.  A plain
 * malloc() and memset() does not do it: GCC folds the pair into calloc(),
 * which leaves fresh pages untouched (seen in re-bench's profile: a fifth
 * of the encoder's time in page faults).  The stores through a volatile
 * pointer cannot be folded away. */
static void *
alloc_prefaulted(size_t size, size_t align)
{
    size_t rounded, huge = 2 << 20;
    uint8_t *p;

    /* Probes land anywhere in a table or cache of many megabytes: with
     * 4 KB pages nearly each one also misses the TLB (a 32 MB table is
     * 8192 pages, several times a core's second-level TLB).  Ask for
     * 2 MB pages where the kernel has them (transparent huge pages in
     * "madvise" mode); without them this is a no-op. */
    if (size >= huge) {
        align = huge;
    }
    rounded = (size + align - 1) / align * align;
    p = aligned_alloc(align, rounded);
    if (p) {
#ifdef MADV_HUGEPAGE
        if (align == huge) {
            madvise(p, rounded, MADV_HUGEPAGE);
        }
#endif
        memset(p, 0, rounded);
        for (size_t i = 0; i < rounded; i += 4096) {
            ((volatile uint8_t *) p)[i] = 0;
        }
    }
    return p;
}

static int
cache_init(struct re_cache *c, uint64_t size)
{
    c->ring = alloc_prefaulted(size, 64);
    c->size = size;
    c->pos = 0;
    c->prefetched = c->prefetched_at = 0;
    return c->ring ? GPU_OK : GPU_ERR_NOMEM;
}

/* ---- Big-endian fields and varints. ---- */

static inline uint16_t
get16(const uint8_t *p)
{
    return (uint16_t) (p[0] << 8 | p[1]);
}

static inline uint32_t
get32(const uint8_t *p)
{
    return (uint32_t) p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
}

static inline void
put16(uint8_t *p, uint16_t v)
{
    p[0] = v >> 8;
    p[1] = v;
}

static inline void
put32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24;
    p[1] = v >> 16;
    p[2] = v >> 8;
    p[3] = v;
}

/* Reads a LEB128 value of at most 32 bits, refusing overlong forms. */
static bool
get_varint(const uint8_t *p, size_t len, size_t *i, uint32_t *v)
{
    uint64_t r = 0;
    int k;

    for (k = 0; k < 5; k++) {
        uint8_t b;

        if (*i >= len) {
            return false;
        }
        b = p[(*i)++];
        r |= (uint64_t) (b & 0x7f) << (7 * k);
        if (!(b & 0x80)) {
            if ((k && !b) || r > UINT32_MAX) {
                return false;
            }
            *v = r;
            return true;
        }
    }
    return false;
}

/* ---- Shim header. ---- */

struct shim_hdr {
    uint8_t version, next_proto, l4_len, flags;
    uint16_t epoch, orig_len;
    uint32_t pos, check;
};

static void
shim_write(uint8_t *p, const struct shim_hdr *h)
{
    p[0] = h->version;
    p[1] = h->next_proto;
    p[2] = h->l4_len;
    p[3] = h->flags;
    put16(p + 4, h->epoch);
    put16(p + 6, h->orig_len);
    put32(p + 8, h->pos);
    put32(p + 12, h->check);
}

static bool
shim_read(const uint8_t *p, size_t len, struct shim_hdr *h)
{
    if (len < GPU_RE_SHIM_HDR_LEN) {
        return false;
    }
    h->version = p[0];
    h->next_proto = p[1];
    h->l4_len = p[2];
    h->flags = p[3];
    h->epoch = get16(p + 4);
    h->orig_len = get16(p + 6);
    h->pos = get32(p + 8);
    h->check = get32(p + 12);
    return ((h->version == GPU_RE_SHIM_VERSION
             || h->version == GPU_RE_SHIM_VERSION_MURMUR)
            && !(h->flags & ~GPU_RE_SHIM_F_START));
}

/* The check a shim of 'version' (one shim_read() took) carries for the
 * payload 'p'. */
static uint32_t
shim_check(uint8_t version, const uint8_t *p, size_t len)
{
    return (version == GPU_RE_SHIM_VERSION_MURMUR
            ? gpu_re_payload_check_v1(p, len)
            : gpu_re_payload_check(p, len));
}

/* ---- Configuration. ---- */

void
gpu_re_config_init(struct gpu_re_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    gpu_re_params_init(&cfg->params);
    cfg->cache_size = 1 << 20;
    cfg->min_ref = 16;
}

int
gpu_re_config_check(const struct gpu_re_config *cfg, char *err,
                    size_t err_size)
{
    if (gpu_re_params_check(&cfg->params, err, err_size)) {
        return GPU_ERR_INVALID;
    }
    if (cfg->cache_size < 1024 || cfg->cache_size > MAX_CACHE) {
        if (err && err_size) {
            snprintf(err, err_size, "cache must be 1K to 1G bytes");
        }
        return GPU_ERR_INVALID;
    }
    return GPU_OK;
}

static int
config_check(const struct gpu_re_config *cfg)
{
    return gpu_re_config_check(cfg, NULL, 0);
}

int
gpu_re_config_set(struct gpu_re_config *cfg, const char *key,
                  const char *value, char *err, size_t err_size)
{
    unsigned long long v;
    uint64_t max = UINT32_MAX;
    char *end;

    static const char *const keys[] = {
        "cache", "window", "bits", "min_chunk", "max_chunk", "min_ref",
        "resync", "epoch", "encoder", "launch",
    };
    size_t i;

    if (!cfg || !key || !value) {
        return GPU_ERR_INVALID;
    }
    /* An unknown key is named as such, whatever its value. */
    for (i = 0; i < sizeof keys / sizeof *keys; i++) {
        if (!strcmp(key, keys[i])) {
            break;
        }
    }
    if (i == sizeof keys / sizeof *keys) {
        if (err && err_size) {
            snprintf(err, err_size, "unknown option \"%s\"", key);
        }
        return GPU_ERR_INVALID;
    }
    if (!strcmp(key, "encoder") || !strcmp(key, "launch")) {
        if (strcmp(value, "host") && strcmp(value, "device")) {
            if (err && err_size) {
                snprintf(err, err_size, "%s: bad value \"%s\" (host or "
                         "device)", key, value);
            }
            return GPU_ERR_INVALID;
        }
        *(!strcmp(key, "encoder") ? &cfg->device_encode
          : &cfg->device_launch) = !strcmp(value, "device");
        return GPU_OK;
    }
    errno = 0;
    v = strtoull(value, &end, 10);
    if (!strcmp(key, "cache") && end != value) {
        uint64_t mul = *end == 'K' || *end == 'k' ? 1ULL << 10
                       : *end == 'M' || *end == 'm' ? 1ULL << 20
                       : *end == 'G' || *end == 'g' ? 1ULL << 30 : 1;

        end += mul > 1;
        v = v > MAX_CACHE ? MAX_CACHE + 1 : v * mul;
        max = MAX_CACHE;
    } else if (!strcmp(key, "epoch")) {
        max = UINT16_MAX;
    }
    if (end == value || *end || errno || value[0] == '-' || v > max) {
        if (err && err_size) {
            snprintf(err, err_size, "%s: bad value \"%s\"", key, value);
        }
        return GPU_ERR_INVALID;
    }
    if (!strcmp(key, "cache")) {
        cfg->cache_size = v;
    } else if (!strcmp(key, "window")) {
        cfg->params.window = v;
    } else if (!strcmp(key, "bits")) {
        cfg->params.bits = v;
    } else if (!strcmp(key, "min_chunk")) {
        cfg->params.min_chunk = v;
    } else if (!strcmp(key, "max_chunk")) {
        cfg->params.max_chunk = v;
    } else if (!strcmp(key, "min_ref")) {
        cfg->min_ref = v;
    } else if (!strcmp(key, "resync")) {
        cfg->resync_packets = v;
    } else if (!strcmp(key, "epoch")) {
        cfg->epoch = v;
    } else {
        if (err && err_size) {
            snprintf(err, err_size, "unknown option \"%s\"", key);
        }
        return GPU_ERR_INVALID;
    }
    return GPU_OK;
}

/* ---- Encoder. ---- */

/* A chunk table entry, 16 bytes, so that a bucket of WAYS entries is one
 * 64-byte cache line and a probe one line fill: the table's bucket loads
 * were half the encoder's time with 32-byte entries (two lines a probe).
 * The chunk's hash is not kept whole: the bucket index comes from its
 * low bits ('lo'), and 'key' holds the top 48 bits of 'hi' with the
 * chunk's length in the low 16 (0: empty; chunks are 1 to 65535 bytes).
 * Two chunks then share an entry's identity only if 48 more hash bits and
 * their lengths agree (2^-48 a probe), and a reference is made only after
 * the bytes compare equal, so a collision can cost a miss or a skipped
 * insertion, never a wrong reference. */
struct fp_entry {
    uint64_t key;
    uint64_t pos;               /* Stream position of the chunk. */
};

#define FP_LEN_MASK UINT64_C(0xffff)
_Static_assert(GPU_RE_MAX_PAYLOAD <= FP_LEN_MASK, "a length fits a key");
_Static_assert(sizeof(struct fp_entry) * WAYS == 64, "a bucket is a line");

static inline uint64_t
fp_key(const struct gpu_re_hash *h, uint32_t len)
{
    return (h->hi & ~FP_LEN_MASK) | len;
}

struct gpu_re_encoder {
    struct gpu_re_config cfg;
    struct gpu_re_chunker *chunker;
    struct re_cache cache;
    struct fp_entry *table;
    size_t n_buckets;           /* Power of 2; WAYS entries each. */
    uint16_t epoch;
    bool started;               /* The epoch's START shim was made. */
    uint32_t shims_in_epoch;
    struct gpu_re_stats stats;

    /* Encoding on the device (config 'device_encode' with a chunker that
     * can): the cache and the table are there, not in 'cache.ring' and
     * 'table'; 'cache.pos' is still the stream position. */
    void *dev;
    bool clear_dev;             /* Empty the device's table first. */

    /* Scratch. */
    uint16_t ends[GPU_RE_MAX_PAYLOAD + 1];
    struct gpu_re_hash hashes[GPU_RE_MAX_PAYLOAD + 1];
    uint8_t shim[GPU_RE_SHIM_HDR_LEN + 2 * GPU_RE_MAX_PAYLOAD];
    struct gpu_re_batch *batch;
    uint8_t *bdata;
    uint32_t *boffsets;
    size_t b_packets, b_bytes;
};

static uint16_t
random_epoch(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint16_t) (ts.tv_nsec ^ (ts.tv_sec << 3) ^ getpid());
}

int
gpu_re_encoder_create(const struct gpu_re_config *cfg,
                      struct gpu_re_chunker *chunker,
                      struct gpu_re_encoder **ep)
{
    struct gpu_re_encoder *e;
    size_t entries;

    if (!cfg || !ep || config_check(cfg)) {
        return GPU_ERR_INVALID;
    }
    if (chunker && memcmp(gpu_re_chunker_params(chunker), &cfg->params,
                          sizeof cfg->params)) {
        return GPU_ERR_INVALID;
    }
    e = calloc(1, sizeof *e);
    if (!e) {
        return GPU_ERR_NOMEM;
    }
    e->cfg = *cfg;
    e->chunker = chunker;
    if (cfg->device_encode && chunker && chunker->prov->enc_init) {
        /* About one entry per 64 cached bytes, as on the host. */
        uint64_t n_buckets = 16;
        int error;

        while (n_buckets * GPU_RE_ENC_WAYS * 64 < cfg->cache_size) {
            n_buckets *= 2;
        }
        e->cache.size = cfg->cache_size;
        error = chunker->prov->enc_init(chunker, cfg->cache_size, n_buckets,
                                        cfg->min_ref, &e->dev);
        if (error) {
            free(e);
            return error;
        }
    } else {
        /* About one entry per 64 cached bytes: chunks average
         * min_chunk + 2^bits bytes, so most stay findable. */
        for (e->n_buckets = 16; e->n_buckets * WAYS * 64 < cfg->cache_size;) {
            e->n_buckets *= 2;
        }
        entries = e->n_buckets * WAYS;
        /* A bucket (WAYS entries, 64 bytes) on one whole cache line. */
        e->table = alloc_prefaulted(entries * sizeof *e->table, 64);
        if (!e->table || cache_init(&e->cache, cfg->cache_size)) {
            free(e->table);
            free(e);
            return GPU_ERR_NOMEM;
        }
    }
    e->epoch = cfg->epoch ? cfg->epoch : random_epoch();
    e->stats.epochs = 1;
    *ep = e;
    return GPU_OK;
}

void
gpu_re_encoder_destroy(struct gpu_re_encoder *e)
{
    if (e) {
        gpu_re_batch_destroy(e->batch);
        if (e->dev) {
            e->chunker->prov->enc_uninit(e->chunker, e->dev);
        }
        gpu_host_free(e->bdata);
        gpu_host_free(e->boffsets);
        free(e->cache.ring);
        free(e->table);
        free(e);
    }
}

void
gpu_re_encoder_resync(struct gpu_re_encoder *e)
{
    e->epoch++;
    e->started = false;
    e->shims_in_epoch = 0;
    e->cache.pos = 0;
    if (e->table) {
        memset(e->table, 0, e->n_buckets * WAYS * sizeof *e->table);
    }
    e->clear_dev = e->dev != NULL;
    e->stats.epochs++;
}

void
gpu_re_encoder_get_stats(const struct gpu_re_encoder *e,
                         struct gpu_re_stats *s)
{
    *s = e->stats;
    s->cache_fill = cache_fill(&e->cache);
}

static struct fp_entry *
table_bucket(const struct gpu_re_encoder *e, const struct gpu_re_hash *h)
{
    return &e->table[(h->lo & (e->n_buckets - 1)) * WAYS];
}

/* The cached chunk with hash 'h' and length 'len', verified byte for
 * byte (so a hash collision costs a miss, never a wrong reference). */
static bool
table_find(struct gpu_re_encoder *e, const struct gpu_re_hash *h,
           const uint8_t *p, uint32_t len, uint64_t *q)
{
    struct fp_entry *b = table_bucket(e, h);
    uint64_t low = cache_low(&e->cache);
    uint64_t key = fp_key(h, len);
    int k;

    for (k = 0; k < WAYS; k++) {
        if (b[k].key == key && b[k].pos >= low
            && cache_equal(&e->cache, b[k].pos, p, len)) {
            *q = b[k].pos;
            return true;
        }
    }
    return false;
}

static void
table_insert(struct gpu_re_encoder *e, const struct gpu_re_hash *h,
             uint64_t pos, uint32_t len)
{
    struct fp_entry *b = table_bucket(e, h), *victim = &b[0];
    uint64_t key = fp_key(h, len);
    int k;

    for (k = 0; k < WAYS; k++) {
        if (b[k].key == key) {
            if (b[k].pos >= cache_low(&e->cache)) {
                /* Keep pointing at the oldest copy still cached: a
                 * decoder that lost a later copy can still resolve it,
                 * and losses do not spread from copy to copy. */
                return;
            }
            victim = &b[k];
            break;
        }
        if (b[k].pos < victim->pos || !b[k].key) {
            victim = &b[k];
        }
    }
    victim->key = key;
    victim->pos = pos;
}

/* Appends a literal of payload bytes [from, to) to the body. */
static bool
emit_literal(uint8_t *out, size_t *n, size_t limit, const uint8_t *p,
             size_t from, size_t to)
{
    if (to <= from) {
        return true;
    }
    if (*n >= limit) {
        return false;
    }
    out[(*n)++] = 0;
    if (!gpu_re_put_varint(out, n, limit, to - from)
        || limit - *n < to - from) {
        return false;
    }
    memcpy(out + *n, p + from, to - from);
    *n += to - from;
    return true;
}

/* Starts loading the table buckets of the chunks the encoder will look
 * up or insert (those of at least min_ref bytes): a probe is a DRAM miss
 * in a large table, and issued together they overlap. */
static void
prefetch_buckets(const struct gpu_re_encoder *e, const uint16_t *ends,
                 const struct gpu_re_hash *hashes, size_t n_chunks)
{
    size_t i, s;

    for (i = 0, s = 0; i < n_chunks; s = ends[i++]) {
        if (ends[i] - s >= e->cfg.min_ref) {
            __builtin_prefetch(table_bucket(e, &hashes[i]), 1);
        }
    }
}

void
gpu_re_encoder_prefetch(const struct gpu_re_encoder *e,
                        const struct gpu_re_chunks *chunks)
{
    if (e && chunks && chunks->hashes) {
        prefetch_buckets(e, chunks->ends, chunks->hashes, chunks->n);
    }
}

/* The second stage of the prefetching, a few payloads after the first:
 * the buckets are in the cache by now, so look in them and start loading
 * the byte cache's line where each matching entry's chunk starts, which
 * table_find() compares and the match extension reads (one more miss a
 * reference, which no hardware prefetcher can guess). */
static void
prefetch_matches(const struct gpu_re_encoder *e, const uint16_t *ends,
                 const struct gpu_re_hash *hashes, size_t n_chunks)
{
    size_t i, s;

    for (i = 0, s = 0; i < n_chunks; s = ends[i++]) {
        uint32_t len = ends[i] - s;

        if (len >= e->cfg.min_ref) {
            const struct fp_entry *b = table_bucket(e, &hashes[i]);
            uint64_t key = fp_key(&hashes[i], len);

            for (int k = 0; k < WAYS; k++) {
                if (b[k].key == key) {
                    __builtin_prefetch(e->cache.ring
                                       + b[k].pos % e->cache.size);
                    break;
                }
            }
        }
    }
}

/* Payloads between the two stages of the prefetching. */
#define PREFETCH_MATCHES_AHEAD (GPU_RE_PREFETCH_AHEAD / 2)

size_t
gpu_re_encoder_prefetch_batch(const struct gpu_re_encoder *e,
                              const struct gpu_re_batch *b, size_t i,
                              size_t ahead, size_t n)
{
    struct gpu_re_chunks chunks;
    size_t m;

    for (; ahead < n && ahead <= i + GPU_RE_PREFETCH_AHEAD; ahead++) {
        gpu_re_batch_chunks(b, ahead, &chunks);
        gpu_re_encoder_prefetch(e, &chunks);
    }
    /* Each payload's second stage once, as the loop passes 'i' in order
     * (the first few all at once). */
    for (m = i ? i + PREFETCH_MATCHES_AHEAD : 0;
         m <= i + PREFETCH_MATCHES_AHEAD && m < n; m++) {
        gpu_re_batch_chunks(b, m, &chunks);
        if (chunks.hashes) {
            prefetch_matches(e, chunks.ends, chunks.hashes, chunks.n);
        }
    }
    return ahead;
}

/* The encoder proper: 'ends' are the payload's 'n_chunks' chunk ends,
 * 'hashes' their gpu_re_hash128() (those of chunks shorter than min_ref
 * are not read) and 'payload_check' the payload's gpu_re_check32(), or
 * NULL to compute them here.  Returns GPU_RE_SHIM (shim in e->shim,
 * '*shim_len' bytes) or GPU_RE_RAW; updates the cache and the table
 * either way (unless the epoch has not started and no START shim fits in
 * 'out_size'). */
static int
encode(struct gpu_re_encoder *e, const uint8_t *p, size_t len,
       const uint16_t *ends, size_t n_chunks,
       const struct gpu_re_hash *hashes,
       const uint32_t *payload_check, size_t out_size,
       size_t *shim_len)
{
    const uint64_t base = e->cache.pos;
    const uint64_t low = cache_low(&e->cache);
    bool start = !e->started;
    /* A shim is worth sending only if shorter than the payload, except
     * the one that starts an epoch, which only has to fit. */
    size_t limit = start || !len ? out_size
                   : len - 1 < out_size ? len - 1 : out_size;
    uint8_t *out = e->shim + GPU_RE_SHIM_HDR_LEN;
    size_t body_limit, n = 0, cover = 0, s = 0, i;
    uint64_t hits = 0, hit_bytes = 0;
    bool ok = limit >= GPU_RE_SHIM_HDR_LEN && (len || start);
    struct shim_hdr h;

    body_limit = ok ? limit - GPU_RE_SHIM_HDR_LEN : 0;
    if (body_limit > 2 * GPU_RE_MAX_PAYLOAD) {
        body_limit = 2 * GPU_RE_MAX_PAYLOAD;
    }
    if (!hashes) {
        for (i = 0, s = 0; i < n_chunks; s = ends[i++]) {
            if (ends[i] - s >= e->cfg.min_ref) {
                e->hashes[i] = gpu_re_hash128(p + s, ends[i] - s);
            }
        }
        hashes = e->hashes;
    }
    /* All the payload's probes in flight at once, not one per chunk in
     * series (a no-op if gpu_re_encoder_prefetch() got them here). */
    prefetch_buckets(e, ends, hashes, n_chunks);
    for (i = 0, s = 0; i < n_chunks; s = ends[i++]) {
        const uint32_t clen = ends[i] - s;

        if (clen < e->cfg.min_ref || !ok || s < cover || start) {
            continue;
        }

        uint64_t q;
        if (table_find(e, &hashes[i], p + s, clen, &q)) {
            size_t b = s, f = ends[i];
            uint64_t r = q, t = q + clen;

            /* Extend the match both ways, byte by byte, as far as the
             * cache agrees: chunks are cut per packet, so the first and
             * last of a packet rarely match whole. */
            size_t k;

            k = b - cover < r - low ? b - cover : r - low;
            k = cache_match_back(&e->cache, r, p + b, k);
            b -= k;
            r -= k;
            k = len - f < base - t ? len - f : base - t;
            k = cache_match_fwd(&e->cache, t, p + f, k);
            f += k;
            t += k;
            ok = emit_literal(out, &n, body_limit, p, cover, b);
            if (ok && n < body_limit) {
                out[n++] = 1;
                ok = (gpu_re_put_varint(out, &n, body_limit, base - r)
                      && gpu_re_put_varint(out, &n, body_limit, f - b));
            } else {
                ok = false;
            }
            hits++;
            hit_bytes += f - b;
            cover = f;
        }
    }
    if (ok) {
        ok = emit_literal(out, &n, body_limit, p, cover, len);
    }

    if (!e->started && !ok) {
        /* No START shim fits: send it raw, outside any epoch. */
        return GPU_RE_RAW;
    }
    for (i = 0, s = 0; i < n_chunks; s = ends[i++]) {
        if (ends[i] - s >= e->cfg.min_ref) {
            table_insert(e, &hashes[i], base + s, ends[i] - s);
        }
    }
    cache_append(&e->cache, p, len);
    e->stats.cache_fill = cache_fill(&e->cache);
    if (!ok) {
        return GPU_RE_RAW;
    }

    h.version = GPU_RE_SHIM_VERSION;
    h.next_proto = 0;
    h.l4_len = 0;
    h.flags = start ? GPU_RE_SHIM_F_START : 0;
    h.epoch = e->epoch;
    h.orig_len = len;
    h.pos = (uint32_t) base;
    h.check = (payload_check ? *payload_check
               : gpu_re_payload_check(p, len));
    shim_write(e->shim, &h);
    *shim_len = GPU_RE_SHIM_HDR_LEN + n;
    e->started = true;
    e->stats.hits += hits;
    e->stats.hit_bytes += hit_bytes;
    return GPU_RE_SHIM;
}

/* Counts a payload's result and starts a new epoch when it is time. */
static void
encode_done(struct gpu_re_encoder *e, int result, size_t len,
            size_t shim_len)
{
    e->stats.packets++;
    e->stats.bytes_in += len;
    if (result == GPU_RE_SHIM) {
        e->stats.shims++;
        e->stats.bytes_out += shim_len;
        e->shims_in_epoch++;
        /* An encoder on the device starts the new epoch at its next
         * submission: the batches in flight have this one's positions. */
        if (e->cfg.resync_packets && !e->dev
            && e->shims_in_epoch >= e->cfg.resync_packets) {
            gpu_re_encoder_resync(e);
        }
    } else {
        e->stats.bytes_out += len;
    }
}

static size_t
chunk_payload(struct gpu_re_encoder *e, const uint8_t *p, size_t len)
{
    return gpu_re_chunk_cpu(&e->cfg.params, p, len, e->ends,
                            NULL, GPU_RE_MAX_PAYLOAD + 1);
}

int
gpu_re_encode(struct gpu_re_encoder *e, const uint8_t *payload, size_t len,
              const uint16_t *ends, size_t n_chunks, uint8_t *out,
              size_t out_size, size_t *out_len)
{
    struct gpu_re_chunks chunks = { ends, n_chunks, NULL, NULL };

    if (!e || (len && !payload) || len > GPU_RE_MAX_PAYLOAD) {
        return GPU_ERR_INVALID;
    }
    if (!ends) {
        chunks.n = chunk_payload(e, payload, len);
        chunks.ends = e->ends;
    }
    return gpu_re_encode_chunks(e, payload, len, &chunks, out, out_size,
                                out_len);
}

/* True if 'chunks' (from outside) tile a payload of 'len' bytes. */
static bool
chunks_tile(const struct gpu_re_chunks *chunks, size_t len)
{
    const uint16_t *ends = chunks ? chunks->ends : NULL;
    size_t n_chunks = chunks ? chunks->n : 0;

    if (!ends || n_chunks > len
        || (len && (!n_chunks || ends[n_chunks - 1] != len))) {
        return false;
    }
    for (size_t i = 0; i < n_chunks; i++) {
        if (!ends[i] || (i && ends[i] <= ends[i - 1])) {
            return false;
        }
    }
    return true;
}

int
gpu_re_encode_chunks(struct gpu_re_encoder *e, const uint8_t *payload,
                     size_t len, const struct gpu_re_chunks *chunks,
                     uint8_t *out, size_t out_size, size_t *out_len)
{
    const uint16_t *ends = chunks ? chunks->ends : NULL;
    size_t n_chunks = chunks ? chunks->n : 0;
    size_t shim_len = 0;
    int r;

    if (!e || e->dev || (len && !payload) || len > GPU_RE_MAX_PAYLOAD
        || !out || !out_len || !chunks_tile(chunks, len)) {
        return GPU_ERR_INVALID;
    }
    r = encode(e, payload, len, ends, n_chunks, chunks->hashes,
               chunks->payload_check, out_size, &shim_len);
    if (r == GPU_RE_SHIM) {
        memcpy(out, e->shim, shim_len);
        *out_len = shim_len;
    } else {
        *out_len = len;
    }
    encode_done(e, r, len, shim_len);
    return r;
}

/* ---- Decoder. ----
 *
 * The decoder keeps its cache addressed by the encoder's stream
 * positions, which every shim carries (its low 32 bits, widened against
 * the decoder's own position).  Bytes it never saw, or cannot vouch for,
 * are remembered as gaps; a reference into a gap is refused, anything
 * else is expanded and checked against the shim's hash.  So a lost
 * packet costs the references into its bytes, not the rest of the epoch:
 *
 *   - shim at P > pos: bytes [anchor, P) were lost or came raw out of
 *     order: a gap; pos = P.
 *   - shim at anchor <= P < pos: raw payloads were counted twice
 *     (duplicates) or arrived before a late shim: pos = P.
 *   - shim at P < anchor: a late shim.  Decoded if it can be; its bytes
 *     fill the gap its loss left.
 *
 * 'anchor' is the end of the last payload placed by a shim; raw payloads
 * since then are placed at pos on trust, and a check failure makes the
 * ranges that shim referenced gaps. */

#define MAX_GAPS 64

struct gap {
    uint64_t lo, hi;
};

struct gpu_re_decoder {
    struct gpu_re_config cfg;
    struct re_cache cache;      /* cache.pos: where the next byte goes. */
    uint64_t anchor;
    uint64_t floor;             /* Nothing below is valid. */
    struct gap gaps[MAX_GAPS];  /* Sorted, disjoint. */
    int n_gaps;
    uint16_t epoch;
    bool synced;
    struct gpu_re_stats stats;
    uint8_t scratch[GPU_RE_MAX_PAYLOAD];
};

int
gpu_re_decoder_create(const struct gpu_re_config *cfg,
                      struct gpu_re_decoder **dp)
{
    struct gpu_re_decoder *d;

    if (!cfg || !dp || config_check(cfg)) {
        return GPU_ERR_INVALID;
    }
    d = calloc(1, sizeof *d);
    if (!d) {
        return GPU_ERR_NOMEM;
    }
    d->cfg = *cfg;
    if (cache_init(&d->cache, cfg->cache_size)) {
        free(d);
        return GPU_ERR_NOMEM;
    }
    *dp = d;
    return GPU_OK;
}

void
gpu_re_decoder_destroy(struct gpu_re_decoder *d)
{
    if (d) {
        free(d->cache.ring);
        free(d);
    }
}

void
gpu_re_decoder_get_stats(const struct gpu_re_decoder *d,
                         struct gpu_re_stats *s)
{
    *s = d->stats;
    s->cache_fill = cache_fill(&d->cache);
}

/* Empties the cache: the epoch starts (or is taken up) at 'pos'. */
static void
dec_reset(struct gpu_re_decoder *d, uint16_t epoch, uint64_t pos)
{
    d->epoch = epoch;
    d->cache.pos = d->anchor = d->floor = pos;
    d->n_gaps = 0;
    d->synced = true;
    d->stats.epochs++;
}

/* Marks [lo, hi) invalid. */
static void
gap_add(struct gpu_re_decoder *d, uint64_t lo, uint64_t hi)
{
    uint64_t low = cache_low(&d->cache);
    int i, j;

    if (lo < low) {
        lo = low;
    }
    if (lo >= hi || hi <= d->floor) {
        return;
    }
    /* Drop gaps that left the cache, merge the new one in. */
    for (i = j = 0; i < d->n_gaps; i++) {
        struct gap g = d->gaps[i];

        if (g.hi <= low) {
            continue;
        }
        if (g.hi >= lo && g.lo <= hi) {
            lo = g.lo < lo ? g.lo : lo;
            hi = g.hi > hi ? g.hi : hi;
            continue;
        }
        d->gaps[j++] = g;
    }
    d->n_gaps = j;
    if (d->n_gaps == MAX_GAPS) {
        /* Too many holes to track: give up everything below the oldest
         * one's end. */
        d->floor = d->gaps[0].hi;
        memmove(d->gaps, d->gaps + 1, --d->n_gaps * sizeof *d->gaps);
    }
    for (i = d->n_gaps; i > 0 && d->gaps[i - 1].lo > lo; i--) {
        d->gaps[i] = d->gaps[i - 1];
    }
    d->gaps[i].lo = lo;
    d->gaps[i].hi = hi;
    d->n_gaps++;
}

/* True if stream bytes [q, q + n) are cached and trusted. */
static bool
dec_valid(const struct gpu_re_decoder *d, uint64_t q, uint64_t n)
{
    uint64_t low = cache_low(&d->cache);
    int i;

    if (q < low || q < d->floor || q + n > d->cache.pos) {
        return false;
    }
    for (i = 0; i < d->n_gaps; i++) {
        if (d->gaps[i].lo < q + n && d->gaps[i].hi > q) {
            return false;
        }
    }
    return true;
}

/* Writes 'n' bytes at stream position q < pos (a late payload) if they
 * exactly fill part of a gap, and shrinks the gap. */
static void
dec_fill(struct gpu_re_decoder *d, uint64_t q, const uint8_t *p, size_t n)
{
    int i;

    if (q < cache_low(&d->cache) || q < d->floor) {
        return;
    }
    for (i = 0; i < d->n_gaps; i++) {
        struct gap g = d->gaps[i];

        if (g.lo <= q && q + n <= g.hi) {
            cache_write(&d->cache, q, p, n);
            if (q + n < g.hi) {
                d->gaps[i].lo = q + n;
                if (q > g.lo) {
                    d->gaps[i].lo = g.lo;
                    d->gaps[i].hi = q;
                    gap_add(d, q + n, g.hi);
                }
            } else if (q > g.lo) {
                d->gaps[i].hi = q;
            } else {
                memmove(&d->gaps[i], &d->gaps[i + 1],
                        (d->n_gaps - i - 1) * sizeof *d->gaps);
                d->n_gaps--;
            }
            return;
        }
    }
}

void
gpu_re_decoder_observe(struct gpu_re_decoder *d, const uint8_t *p,
                       size_t len)
{
    d->stats.packets++;
    d->stats.bytes_in += len;
    d->stats.bytes_out += len;
    if (d->synced) {
        cache_append(&d->cache, p, len);
    }
}

static int
refuse(struct gpu_re_decoder *d, bool malformed)
{
    d->stats.undecodable++;
    d->stats.malformed += malformed;
    return GPU_RE_UNDECODABLE;
}

/* One element of a shim's body: a literal of 'n' bytes at body + 'lit'
 * or a reference to the 'n' bytes 'dist' before the shim's position. */
struct shim_elem {
    bool is_ref;
    uint32_t n;
    uint32_t dist;              /* A reference's. */
    size_t lit;                 /* A literal's offset in the body. */
};

/* Reads the element of 'body' at '*i' into 'e' and steps '*i' past it;
 * false if it is malformed (an unknown tag, a bad varint, an empty
 * element, a literal past the body's end, a reference longer than its
 * distance: the wire format's rules, docs/RE-NOTES.md). */
static bool
shim_next_elem(const uint8_t *body, size_t body_len, size_t *i,
               struct shim_elem *e)
{
    uint8_t tag = body[(*i)++];

    e->is_ref = tag == 1;
    if (tag == 0) {
        if (!get_varint(body, body_len, i, &e->n) || !e->n
            || e->n > body_len - *i) {
            return false;
        }
        e->lit = *i;
        *i += e->n;
        return true;
    }
    return (tag == 1
            && get_varint(body, body_len, i, &e->dist)
            && get_varint(body, body_len, i, &e->n)
            && e->n && e->n <= e->dist);
}

/* How many of a shim's references, and how many bytes of each,
 * dec_prefetch_refs() asks for. */
#define DEC_PREFETCH_REFS 8
#define DEC_PREFETCH_REF_BYTES 2048

/* Asks for every line of the cached ranges the body of a shim at stream
 * position 'P' refers to, all at once, before decode() copies them out:
 * a range lies anywhere in the ring, mostly out of the core's caches,
 * and its copy met the misses a few lines at a time (half of the
 * decoder's time on 1,460-byte payloads; asking for a range's first
 * lines only did not help).  Stops at the first malformed element, which
 * decode() then refuses. */
static void
dec_prefetch_refs(const struct gpu_re_decoder *d, uint64_t P,
                  const uint8_t *body, size_t body_len)
{
    struct shim_elem e;
    size_t i = 0;
    int n_refs = 0;

    while (i < body_len && n_refs < DEC_PREFETCH_REFS
           && shim_next_elem(body, body_len, &i, &e)) {
        if (e.is_ref && e.dist <= P) {
            uint64_t at = (P - e.dist) % d->cache.size;

            for (uint32_t k = 0; k < e.n && k < DEC_PREFETCH_REF_BYTES;
                 k += 64) {
                __builtin_prefetch(d->cache.ring + at, 0, 3);
                at = at + 64 < d->cache.size ? at + 64 : 0;
            }
            n_refs++;
        }
    }
}

/* Expands the body of a shim with header 'h' into 'out'. */
static int
decode(struct gpu_re_decoder *d, const struct shim_hdr *h,
       const uint8_t *body, size_t body_len, uint8_t *out, size_t out_size)
{
    struct gap refs[16], unknown[16];
    int n_refs = 0, n_unknown = 0;
    uint64_t hits = 0, hit_bytes = 0, P;
    size_t i = 0, o = 0;
    bool late, valid = true, all_unknown = false;

    d->stats.packets++;
    d->stats.shims++;
    d->stats.shims_v1 += h->version == GPU_RE_SHIM_VERSION_MURMUR;
    d->stats.bytes_in += GPU_RE_SHIM_HDR_LEN + body_len;
    if (h->orig_len > out_size) {
        return refuse(d, false);
    }
    if (h->flags & GPU_RE_SHIM_F_START) {
        if (h->pos) {
            return refuse(d, true);
        }
        /* A new epoch: both caches start empty here. */
        dec_reset(d, h->epoch, 0);
    } else if (!d->synced || h->epoch != d->epoch) {
        if (d->synced && (uint16_t) (d->epoch - h->epoch) <= 16) {
            return refuse(d, false);    /* Late, from an older epoch. */
        }
        /* The encoder restarted, or its START was lost: take up its
         * epoch here, with nothing cached. */
        dec_reset(d, h->epoch, h->pos);
    }

    /* The shim's full position, nearest to ours. */
    P = d->cache.pos + (int64_t) (int32_t) (h->pos - (uint32_t) d->cache.pos);
    late = P < d->anchor;
    dec_prefetch_refs(d, P, body, body_len);

    /* Expand; a reference outside the trusted cache makes the payload
     * undecodable, but the body is still checked to the end. */
    while (i < body_len) {
        struct shim_elem e;

        if (!shim_next_elem(body, body_len, &i, &e)
            || e.n > h->orig_len - o) {
            return refuse(d, true);
        }

        uint32_t n = e.n, dist = e.dist;

        if (!e.is_ref) {
            memcpy(out + o, body + e.lit, n);
        } else {
            if (dist > P || !dec_valid(d, P - dist, n)) {
                /* Unknown bytes; the literals around them are still
                 * good to cache. */
                valid = false;
                memset(out + o, 0, n);
                if (n_unknown < 16) {
                    unknown[n_unknown].lo = P + o;
                    unknown[n_unknown++].hi = P + o + n;
                } else {
                    all_unknown = true;
                }
            } else {
                cache_read(&d->cache, P - dist, out + o, n);
                if (n_refs < 16) {
                    refs[n_refs].lo = P - dist;
                    refs[n_refs++].hi = P - dist + n;
                }
            }
            hits++;
            hit_bytes += n;
        }
        o += n;
    }
    if (o != h->orig_len) {
        return refuse(d, true);
    }
    if (valid && shim_check(h->version, out, o) != h->check) {
        /* The cache holds wrong bytes somewhere we referenced (raw
         * payloads reordered): distrust them, and this payload. */
        for (int k = 0; k < n_refs; k++) {
            gap_add(d, refs[k].lo, refs[k].hi);
        }
        valid = false;
        all_unknown = true;
    }

    if (late) {
        if (valid) {
            dec_fill(d, P, out, o);
        }
    } else {
        if (P > d->cache.pos) {
            gap_add(d, d->anchor, P);   /* Lost or misplaced bytes. */
        }
        /* Cached whole, with its unknown parts as gaps: we know how long
         * it was, so we stay in step past it. */
        d->cache.pos = P;
        cache_append(&d->cache, out, o);
        if (all_unknown) {
            gap_add(d, P, P + o);
        } else {
            for (int k = 0; k < n_unknown; k++) {
                gap_add(d, unknown[k].lo, unknown[k].hi);
            }
        }
        d->anchor = d->cache.pos;
    }
    if (!valid) {
        return refuse(d, false);
    }
    d->stats.hits += hits;
    d->stats.hit_bytes += hit_bytes;
    d->stats.bytes_out += o;
    return GPU_RE_DECODED;
}

int
gpu_re_decode(struct gpu_re_decoder *d, const uint8_t *shim, size_t len,
              uint8_t *out, size_t out_size, size_t *out_len)
{
    struct shim_hdr h;
    int r;

    if (!d || (len && !shim) || !out || !out_len) {
        return GPU_ERR_INVALID;
    }
    if (!shim_read(shim, len, &h) || h.l4_len || h.next_proto) {
        d->stats.packets++;
        d->stats.shims++;
        d->stats.bytes_in += len;
        return refuse(d, true);
    }
    r = decode(d, &h, shim + GPU_RE_SHIM_HDR_LEN, len - GPU_RE_SHIM_HDR_LEN,
               out, out_size);
    *out_len = r == GPU_RE_DECODED ? h.orig_len : 0;
    return r;
}

/* ---- Packets. ---- */

#define ETH_HLEN 14
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17


/* The ones' complement sum of 'n' bytes (n even) at 'p', in native byte
 * order and not yet folded (RFC 1071: the sum does not depend on the byte
 * order it is taken in).  Four bytes a step: IP header checksums are
 * taken two or three times a packet (parse, rewrite, and the gathering),
 * and the 16-bit loop of big-endian loads showed as a fifth of the
 * decoder's time in the switch. */
static uint64_t
ones_sum(const uint8_t *p, size_t n)
{
    uint64_t sum = 0;
    size_t i;

    for (i = 0; i + 4 <= n; i += 4) {
        uint32_t w;

        memcpy(&w, p + i, 4);
        sum += w;
    }
    if (i < n) {
        uint16_t w;

        memcpy(&w, p + i, 2);
        sum += w;
    }
    return sum;
}

/* Folds a sum of ones_sum() into the checksum field's value, big-endian
 * as an integer (what get16() reads and put16() writes). */
static uint16_t
ones_fold(uint64_t sum)
{
    uint16_t r;

    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    r = ~sum & 0xffff;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    r = (uint16_t) (r << 8 | r >> 8);
#endif
    return r;
}

/* The IPv4 header checksum of header 'ip' of 'ihl' bytes (a multiple of
 * 4), its own checksum field taken as zero. */
static uint16_t
ipv4_csum(const uint8_t *ip, size_t ihl)
{
    return ones_fold(ones_sum(ip, 10) + ones_sum(ip + 12, ihl - 12));
}

/* Rewrites the total length and the protocol of IPv4 header 'ip', whose
 * checksum is canonical (ipv4_csum_canonical(): every frame re_encode
 * shims, and every shim re_decode restores, was checked so), and moves
 * the checksum by the difference (RFC 1624, eqn. 3) instead of summing
 * the header again.  The result is the canonical checksum of the new
 * header, the bits a new sum would give: a header's sum is never zero
 * (its version byte is not), so the two agree even on the ones'
 * complement zero.  Summing again read the header straight after these
 * stores to it, and the checksum was ~10% of the PMD's samples in the
 * re pair on the H100 machine (docs/PERFORMANCE.md, nineteenth
 * session). */
static void
ipv4_set_len_proto(uint8_t *ip, uint16_t tot_len, uint8_t proto)
{
    uint16_t old_word = get16(ip + 8);          /* TTL and protocol. */
    uint16_t new_word = (old_word & 0xff00) | proto;
    uint32_t sum = (uint16_t) ~get16(ip + 10);

    sum += (uint16_t) ~get16(ip + 2) + tot_len;
    sum += (uint16_t) ~old_word + new_word;
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    put16(ip + 2, tot_len);
    put16(ip + 8, new_word);
    put16(ip + 10, ~sum & 0xffff);
}

/* L4 header length of a TCP or UDP header at 'p' with 'room' bytes to
 * the datagram's end, or 0 if malformed. */
static size_t
l4_hdr_len(uint8_t proto, const uint8_t *p, size_t room)
{
    if (proto == IPPROTO_TCP_) {
        size_t doff;

        if (room < 20) {
            return 0;
        }
        doff = (p[12] >> 4) * 4;
        return doff >= 20 && doff <= room ? doff : 0;
    } else if (proto == IPPROTO_UDP_) {
        return room >= 8 && get16(p + 4) == room ? 8 : 0;
    }
    return 0;
}

/* True if the IPv4 header checksum is valid and canonical (what a new
 * sum of the header gives, and ipv4_set_len_proto() keeps), so that
 * rewriting the header restores it exactly. */
static bool
ipv4_csum_canonical(const uint8_t *ip)
{
    return ipv4_csum(ip, (ip[0] & 0x0f) * 4) == get16(ip + 10);
}

/* Parses the frame down to its L4 header.  Only whole, unfragmented
 * IPv4 datagrams with a canonical header checksum, or IPv6 ones without
 * extension headers, that fill the frame exactly (no Ethernet padding)
 * qualify: both ends then classify the same frame the same way, and a
 * decoded frame is the original byte for byte. */
static bool
parse(const uint8_t *f, size_t len, struct gpu_re_frame *k)
{
    size_t ofs = ETH_HLEN;
    uint16_t type;
    int tags = 0;

    if (len < ETH_HLEN) {
        return false;
    }
    type = get16(f + 12);
    while ((type == 0x8100 || type == 0x88a8) && tags++ < 2) {
        if (len < ofs + 4) {
            return false;
        }
        type = get16(f + ofs + 2);
        ofs += 4;
    }
    k->l3 = ofs;
    if (type == 0x0800) {
        const uint8_t *ip = f + ofs;
        size_t ihl, tot;

        if (len < ofs + 20 || ip[0] >> 4 != 4) {
            return false;
        }
        ihl = (ip[0] & 0x0f) * 4;
        tot = get16(ip + 2);
        if (ihl < 20 || tot < ihl || ofs + tot != len
            || (get16(ip + 6) & 0x3fff) || !ipv4_csum_canonical(ip)) {
            return false;
        }
        k->v6 = false;
        k->proto = ip[9];
        k->l4 = ofs + ihl;
    } else if (type == 0x86dd) {
        const uint8_t *ip = f + ofs;

        if (len < ofs + 40 || ip[0] >> 4 != 6
            || ofs + 40 + get16(ip + 4) != len) {
            return false;
        }
        k->v6 = true;
        k->proto = ip[6];
        k->l4 = ofs + 40;
    } else {
        return false;
    }
    k->end = len;
    return true;
}

/* Parses an eligible TCP/UDP frame: fills 'k' and returns the payload
 * length, or -1. */
static int
eligible(const uint8_t *f, size_t len, struct gpu_re_frame *k)
{
    if (!parse(f, len, k)
        || (k->proto != IPPROTO_TCP_ && k->proto != IPPROTO_UDP_)) {
        return -1;
    }
    k->l4_len = l4_hdr_len(k->proto, f + k->l4, k->end - k->l4);
    if (!k->l4_len || k->end - k->l4 - k->l4_len == 0) {
        return -1;
    }
    return k->end - k->l4 - k->l4_len;
}

/* Sets the IP protocol and the datagram length after a change of
 * 'new_len' for the frame. */
static void
set_ip(uint8_t *f, const struct gpu_re_frame *k, uint8_t proto, size_t new_len)
{
    uint8_t *ip = f + k->l3;

    if (k->v6) {
        ip[6] = proto;
        put16(ip + 4, new_len - k->l3 - 40);
    } else {
        ipv4_set_len_proto(ip, new_len - k->l3, proto);
    }
}

/* Replaces the 'plen'-byte payload of eligible frame 'f' (parsed into
 * 'k') by the shim 'hdr' (GPU_RE_SHIM_HDR_LEN bytes, its next_proto and
 * l4_len filled in here) and 'body': IP protocol 253, the shim header,
 * the original L4 header, the body.  The caller checked that it fits. */
static void
frame_put_shim(uint8_t *f, size_t *len, const struct gpu_re_frame *k,
               size_t plen, uint8_t *hdr, const uint8_t *body,
               size_t body_len)
{
    uint8_t l4[60];
    size_t new_len = *len - plen + GPU_RE_SHIM_HDR_LEN + body_len;

    hdr[1] = k->proto;
    hdr[2] = k->l4_len;
    memcpy(l4, f + k->l4, k->l4_len);
    memcpy(f + k->l4 + GPU_RE_SHIM_HDR_LEN + k->l4_len, body, body_len);
    memcpy(f + k->l4, hdr, GPU_RE_SHIM_HDR_LEN);
    memcpy(f + k->l4 + GPU_RE_SHIM_HDR_LEN, l4, k->l4_len);
    set_ip(f, k, GPU_RE_IPPROTO, new_len);
    *len = new_len;
}

/* Encodes the eligible frame 'f' (parsed into 'k', payload 'plen') with
 * its payload's 'chunks' from a batch, or NULL to chunk it here. */
static int
encode_frame(struct gpu_re_encoder *e, uint8_t *f, size_t *len, size_t cap,
             const struct gpu_re_frame *k, size_t plen,
             const struct gpu_re_chunks *chunks)
{
    uint8_t *pay = f + k->l4 + k->l4_len;
    struct gpu_re_chunks own;
    size_t shim_len = 0, room;
    int r;

    /* The shim replaces the payload: it may use what the payload used
     * plus whatever room the buffer has beyond the frame. */
    room = plen + (cap - *len);
    if (!chunks) {
        own.n = chunk_payload(e, pay, plen);
        own.ends = e->ends;
        own.hashes = NULL;
        own.payload_check = NULL;
        chunks = &own;
    }
    r = encode(e, pay, plen, chunks->ends, chunks->n, chunks->hashes,
               chunks->payload_check, room, &shim_len);
    encode_done(e, r, plen, shim_len);
    if (r != GPU_RE_SHIM) {
        return GPU_RE_RAW;
    }
    frame_put_shim(f, len, k, plen, e->shim,
                   e->shim + GPU_RE_SHIM_HDR_LEN,
                   shim_len - GPU_RE_SHIM_HDR_LEN);
    return GPU_RE_SHIM;
}

/* ---- Encoding on the device. ---- */

bool
gpu_re_encoder_on_device(const struct gpu_re_encoder *e)
{
    return e && e->dev;
}

/* An eligible payload of 'plen' bytes that an encoder on the device
 * could not encode goes raw.  The device may have its bytes cached, or
 * not, so the decoder's cache could be out of step: a new epoch. */
static int
device_raw(struct gpu_re_encoder *e, size_t plen)
{
    if (e->started) {
        gpu_re_encoder_resync(e);
    }
    encode_done(e, GPU_RE_RAW, plen, 0);
    return GPU_RE_RAW;
}

int
gpu_re_encoder_batch_create(struct gpu_re_encoder *e, size_t max_packets,
                            size_t max_bytes, struct gpu_re_batch **bp)
{
    if (!e || !e->chunker) {
        return GPU_ERR_INVALID;
    }
    return gpu_re_batch_create_enc(e->chunker, max_packets, max_bytes,
                                   GPU_RE_BATCH_HASHES, e->dev, bp);
}

/* The body of an epoch's START shim for a payload of 'len' bytes: all
 * literal. */
static size_t
start_body_len(size_t len)
{
    size_t n = 0;
    uint8_t v[8];

    if (!len) {
        return 0;
    }
    gpu_re_put_varint(v, &n, sizeof v, len);
    return 1 + n + len;
}

int
gpu_re_encoder_submit(struct gpu_re_encoder *e, struct gpu_re_batch *b,
                      const uint8_t *data, const uint32_t *offsets,
                      const uint8_t *const *srcs, const uint32_t *rooms,
                      size_t n)
{
    struct gpu_re_enc_args *a;
    uint64_t cached, end;
    size_t first = 0;
    int error;

    if (!e || !b || (n && (!data || !offsets))) {
        return GPU_ERR_INVALID;
    }
    b->enc_ahead = 0;
    if (!e->dev) {
        return gpu_re_batch_submit_in_place(b, NULL, data, offsets, srcs,
                                            n);
    }
    if (b->enc_dev != e->dev || n > b->max_packets) {
        return GPU_ERR_INVALID;
    }
    /* Positions are 40 bits in the device's table: a new epoch long
     * before (a terabyte of payload). */
    if ((e->cfg.resync_packets
         && e->shims_in_epoch >= e->cfg.resync_packets)
        || e->cache.pos + (n ? offsets[n] - offsets[0] : 0)
           >= GPU_RE_ENC_POS_MASK) {
        gpu_re_encoder_resync(e);
    }
    a = &b->enc_args;
    memset(a, 0, sizeof *a);
    if (!e->started) {
        /* The epoch starts with the first payload whose START shim fits
         * its frame; those before go raw, outside any epoch. */
        for (; first < n; first++) {
            size_t len = offsets[first + 1] - offsets[first];
            size_t body = start_body_len(len);

            if (!rooms || GPU_RE_SHIM_HDR_LEN + body <= rooms[first]) {
                a->start = 1;
                a->start_room = body;
                break;
            }
        }
    }
    cached = first < n ? offsets[n] - offsets[first] : 0;
    end = e->cache.pos + cached;
    a->base = e->cache.pos;
    a->low = (e->cache.pos > e->cache.size ? e->cache.pos - e->cache.size
              : 0);
    a->first = first;
    a->clear = e->clear_dev;
    b->enc_epoch = e->epoch;
    error = gpu_re_batch_submit_in_place(b, NULL, data, offsets, srcs, n);
    if (error) {
        return error;
    }
    /* The table is emptied in the submission's stream, before it. */
    e->clear_dev = false;
    e->cache.pos = end;
    if (a->start) {
        e->started = true;
    }
    return GPU_OK;
}

int
gpu_re_encode_packet_result(struct gpu_re_encoder *e, struct gpu_re_batch *b,
                            size_t i, uint8_t *f, size_t *len, size_t cap)
{
    struct gpu_re_frame k;
    int plen;

    if (!e || !b || b->enc_dev != e->dev || i >= b->n_packets || !f || !len
        || *len > cap) {
        return GPU_ERR_INVALID;
    }
    if (!e->dev) {
        /* The host encodes, with the batch's cuts and hashes, its table
         * probes started a few payloads ahead. */
        struct gpu_re_chunks chunks;

        if (!b->want_hashes) {
            return GPU_ERR_INVALID;
        }
        b->enc_ahead = gpu_re_encoder_prefetch_batch(e, b, i, b->enc_ahead,
                                                     b->n_packets);
        gpu_re_batch_chunks(b, i, &chunks);
        return gpu_re_encode_packet_chunks(e, f, len, cap, &chunks);
    }
    plen = eligible(f, *len, &k);
    if (plen < 0) {
        return GPU_ERR_INVALID;
    }
    return gpu_re_encode_frame_result(e, b, i, f, len, cap, &k, plen);
}

int
gpu_re_encode_frame_result(struct gpu_re_encoder *e, struct gpu_re_batch *b,
                           size_t i, uint8_t *f, size_t *len, size_t cap,
                           const struct gpu_re_frame *frame, int plen)
{
    const struct gpu_re_enc_args *a;
    const struct gpu_re_enc_result *r;
    uint8_t hdr[GPU_RE_SHIM_HDR_LEN];
    struct gpu_re_frame k;
    struct shim_hdr h;

    if (e && !e->dev) {
        return gpu_re_encode_packet_result(e, b, i, f, len, cap);
    }
    if (!e || !b || b->enc_dev != e->dev || i >= b->n_packets
        || !f || !len || *len > cap || !frame || plen < 0
        || frame->end != *len
        || (uint32_t) plen != b->offsets[i + 1] - b->offsets[i]) {
        return GPU_ERR_INVALID;
    }
    k = *frame;
    a = &b->enc_args;
    if (i + GPU_RE_PREFETCH_AHEAD < b->n_packets) {
        /* The device wrote the results and bodies into host memory over
         * the bus, so their lines are not in the caches: start loading
         * those of a payload a few ahead (callers go in order). */
        size_t j = i + GPU_RE_PREFETCH_AHEAD;
        const uint8_t *body = b->enc_bodies + gpu_re_enc_body_slot(b->offsets,
                                                                   j);

        __builtin_prefetch(&b->enc_results[j]);
        __builtin_prefetch(body);
        __builtin_prefetch(body + 64);
    }
    if (b->enc_epoch != e->epoch) {
        /* The encoder started a new epoch since (its START empties the
         * decoder's cache): the references would not resolve.  Raw, and
         * the new epoch goes on. */
        encode_done(e, GPU_RE_RAW, plen, 0);
        return GPU_RE_RAW;
    }
    if (b->enc_failed) {
        return device_raw(e, plen);
    }
    if (i < a->first) {
        encode_done(e, GPU_RE_RAW, plen, 0);    /* Before the START. */
        return GPU_RE_RAW;
    }
    r = &b->enc_results[i];
    if (!r->shim || (size_t) (*len - plen) + GPU_RE_SHIM_HDR_LEN
                    + r->body_len > cap) {
        if (a->start && i == a->first) {
            return device_raw(e, plen);         /* The START is lost. */
        }
        encode_done(e, GPU_RE_RAW, plen, 0);
        return GPU_RE_RAW;
    }
    h.version = GPU_RE_SHIM_VERSION;
    h.next_proto = 0;
    h.l4_len = 0;
    h.flags = a->start && i == a->first ? GPU_RE_SHIM_F_START : 0;
    h.epoch = b->enc_epoch;
    h.orig_len = plen;
    h.pos = (uint32_t) (a->base + (b->offsets[i] - b->offsets[a->first]));
    h.check = b->payload_checks[i];
    shim_write(hdr, &h);
    frame_put_shim(f, len, &k, plen, hdr,
                   b->enc_bodies + gpu_re_enc_body_slot(b->offsets, i),
                   r->body_len);
    e->stats.hits += r->hits;
    e->stats.hit_bytes += r->hit_bytes;
    encode_done(e, GPU_RE_SHIM, plen, GPU_RE_SHIM_HDR_LEN + r->body_len);
    return GPU_RE_SHIM;
}

int
gpu_re_frame_parse(const uint8_t *f, size_t len, struct gpu_re_frame *k)
{
    return f && k ? eligible(f, len, k) : -1;
}

int
gpu_re_packet_payload(const uint8_t *f, size_t len, size_t *ofs)
{
    struct gpu_re_frame k;
    int plen = f ? eligible(f, len, &k) : -1;

    if (plen >= 0 && ofs) {
        *ofs = k.l4 + k.l4_len;
    }
    return plen;
}

int
gpu_re_encode_packet_chunks(struct gpu_re_encoder *e, uint8_t *f,
                            size_t *len, size_t cap,
                            const struct gpu_re_chunks *chunks)
{
    struct gpu_re_frame k;
    int plen;

    if (!e || !f || !len || *len > cap) {
        return GPU_ERR_INVALID;
    }
    plen = eligible(f, *len, &k);
    if (plen < 0) {
        if (chunks) {
            return GPU_ERR_INVALID;     /* Chunked as eligible before. */
        }
        e->stats.passed++;
        return GPU_RE_PASS;
    }
    if (chunks && !chunks_tile(chunks, plen)) {
        return GPU_ERR_INVALID;
    }
    if (e->dev) {
        return device_raw(e, plen);
    }
    return encode_frame(e, f, len, cap, &k, plen, chunks);
}

int
gpu_re_encode_packet(struct gpu_re_encoder *e, uint8_t *f, size_t *len,
                     size_t cap)
{
    return gpu_re_encode_packet_chunks(e, f, len, cap, NULL);
}

int
gpu_re_encode_packets_cpu(struct gpu_re_encoder *e, uint8_t **frames,
                          size_t *lens, const size_t *caps, size_t n,
                          int *results)
{
    if (!e || (n && (!frames || !lens || !caps || !results))) {
        return GPU_ERR_INVALID;
    }
    for (size_t i = 0; i < n; i++) {
        results[i] = gpu_re_encode_packet(e, frames[i], &lens[i], caps[i]);
    }
    return GPU_OK;
}

int
gpu_re_encode_packets(struct gpu_re_encoder *e, uint8_t **frames,
                      size_t *lens, const size_t *caps, size_t n,
                      int *results)
{
    size_t i, np = 0, nb = 0, ahead = 0;
    int error;

    if (!e || (n && (!frames || !lens || !caps || !results))) {
        return GPU_ERR_INVALID;
    }
    if (!e->chunker) {
        return gpu_re_encode_packets_cpu(e, frames, lens, caps, n, results);
    }
    for (i = 0; i < n; i++) {
        if (lens[i] > caps[i]) {
            return GPU_ERR_INVALID;
        }
        nb += lens[i];
    }
    /* (Re)size the batch and its pinned staging buffers. */
    if (!e->batch || n > e->b_packets || nb > e->b_bytes) {
        size_t bp = n > 256 ? n : 256, bb = nb > 65536 ? nb : 65536;

        gpu_re_batch_destroy(e->batch);
        gpu_host_free(e->bdata);
        gpu_host_free(e->boffsets);
        e->batch = NULL;
        e->bdata = gpu_host_alloc(bb);
        e->boffsets = gpu_host_alloc((bp + 1) * sizeof *e->boffsets);
        if (!e->bdata || !e->boffsets) {
            return GPU_ERR_NOMEM;
        }
        /* The chunker hashes the chunks too: that and the table's
         * cache misses were most of the encoder's time (on the device,
         * it encodes them as well). */
        error = gpu_re_encoder_batch_create(e, bp, bb, &e->batch);
        if (error) {
            return error;
        }
        e->b_packets = bp;
        e->b_bytes = bb;
    }

    /* Pack the eligible payloads back to back; results[] holds each
     * frame's batch index meanwhile (-1: not eligible). */
    struct gpu_re_frame *ks = malloc(n * sizeof *ks);
    int *idx = malloc(n * sizeof *idx);
    uint32_t *rooms = malloc(n * sizeof *rooms);
    if (n && (!ks || !idx || !rooms)) {
        free(ks);
        free(idx);
        free(rooms);
        return GPU_ERR_NOMEM;
    }
    e->boffsets[0] = 0;
    for (i = 0; i < n; i++) {
        int plen = eligible(frames[i], lens[i], &ks[i]);

        idx[i] = -1;
        if (plen >= 0) {
            memcpy(e->bdata + e->boffsets[np],
                   frames[i] + ks[i].l4 + ks[i].l4_len, plen);
            e->boffsets[np + 1] = e->boffsets[np] + plen;
            rooms[np] = plen + (caps[i] - lens[i]);
            idx[i] = np++;
        }
    }
    error = gpu_re_encoder_submit(e, e->batch, e->bdata, e->boffsets,
                                  NULL, rooms, np);
    if (!error) {
        error = gpu_re_batch_wait(e->batch);
    }
    free(rooms);
    if (error) {
        free(ks);
        free(idx);
        return error;
    }
    for (i = 0; i < n; i++) {
        if (idx[i] < 0) {
            e->stats.passed++;
            results[i] = GPU_RE_PASS;
        } else if (e->dev) {
            results[i] = gpu_re_encode_packet_result(e, e->batch, idx[i],
                                                     frames[i], &lens[i],
                                                     caps[i]);
        } else {
            struct gpu_re_chunks chunks;
            size_t j = idx[i];

            ahead = gpu_re_encoder_prefetch_batch(e, e->batch, j, ahead, np);
            gpu_re_batch_chunks(e->batch, j, &chunks);
            results[i] = encode_frame(e, frames[i], &lens[i], caps[i],
                                      &ks[i], e->boffsets[j + 1]
                                      - e->boffsets[j], &chunks);
        }
    }
    free(ks);
    free(idx);
    return GPU_OK;
}

int
gpu_re_decode_packet(struct gpu_re_decoder *d, uint8_t *f, size_t *len,
                     size_t cap)
{
    struct shim_hdr h;
    struct gpu_re_frame k;
    uint8_t l4[60];
    size_t body_ofs, body_len, new_len, l4room;
    int plen, r;

    if (!d || !f || !len || *len > cap) {
        return GPU_ERR_INVALID;
    }
    /* eligible()'s checks, on one parse: a shim frame fails them only
     * at the protocol. */
    if (!parse(f, *len, &k)) {
        d->stats.passed++;
        return GPU_RE_PASS;
    }
    if (k.proto == IPPROTO_TCP_ || k.proto == IPPROTO_UDP_) {
        k.l4_len = l4_hdr_len(k.proto, f + k.l4, k.end - k.l4);
        plen = k.l4_len ? k.end - k.l4 - k.l4_len : 0;
        if (plen > 0) {
            gpu_re_decoder_observe(d, f + k.l4 + k.l4_len, plen);
            return GPU_RE_RAW;
        }
    }
    if (k.proto != GPU_RE_IPPROTO) {
        d->stats.passed++;
        return GPU_RE_PASS;
    }
    if (!shim_read(f + k.l4, k.end - k.l4, &h)
        || (h.next_proto != IPPROTO_TCP_ && h.next_proto != IPPROTO_UDP_)) {
        d->stats.packets++;
        d->stats.shims++;
        return refuse(d, true);
    }
    body_ofs = k.l4 + GPU_RE_SHIM_HDR_LEN + h.l4_len;
    l4room = k.end - k.l4 - GPU_RE_SHIM_HDR_LEN;
    new_len = k.l4 + h.l4_len + h.orig_len;
    if (body_ofs > k.end || !h.orig_len
        /* The L4 header must be the one the original carried (the
         * header's bytes are there: body_ofs <= end). */
        || (h.next_proto == IPPROTO_UDP_
            ? h.l4_len != 8
              || get16(f + k.l4 + GPU_RE_SHIM_HDR_LEN + 4)
                 != 8 + h.orig_len
            : l4_hdr_len(h.next_proto, f + k.l4 + GPU_RE_SHIM_HDR_LEN,
                         l4room) != h.l4_len)) {
        d->stats.packets++;
        d->stats.shims++;
        return refuse(d, true);
    }
    body_len = k.end - body_ofs;
    if (new_len > cap) {
        d->stats.packets++;
        d->stats.shims++;
        return refuse(d, false);
    }
    if (new_len + body_len <= cap) {
        /* Room for the body past the decoded frame's end: move it there
         * (a shim's body is mostly a few bytes of references), and the
         * L4 header down over the shim header, and expand the payload
         * straight into its place in the frame, rather than into scratch
         * and copied: the copy was an eighth of the decoder's time.  The
         * frame is not restored if the shim is refused; it is dropped. */
        uint8_t *body = f + new_len;

        /* The L4 header first: a payload shorter than the shim header
         * puts the body's new place over the L4 header's old one. */
        memmove(f + k.l4, f + k.l4 + GPU_RE_SHIM_HDR_LEN, h.l4_len);
        memmove(body, f + body_ofs, body_len);
        r = decode(d, &h, body, body_len, f + k.l4 + h.l4_len, h.orig_len);
        if (r != GPU_RE_DECODED) {
            return r;
        }
    } else {
        r = decode(d, &h, f + body_ofs, body_len, d->scratch,
                   sizeof d->scratch);
        if (r != GPU_RE_DECODED) {
            return r;
        }
        memcpy(l4, f + k.l4 + GPU_RE_SHIM_HDR_LEN, h.l4_len);
        memcpy(f + k.l4, l4, h.l4_len);
        memcpy(f + k.l4 + h.l4_len, d->scratch, h.orig_len);
    }
    set_ip(f, &k, h.next_proto, new_len);
    *len = new_len;
    return GPU_RE_DECODED;
}

int
gpu_re_decode_packets(struct gpu_re_decoder *d, uint8_t **frames,
                      size_t *lens, const size_t *caps, size_t n,
                      int *results)
{
    size_t i;

    if (!d || (n && (!frames || !lens || !caps || !results))) {
        return GPU_ERR_INVALID;
    }
    for (i = 0; i < n; i++) {
        if (!frames[i] || lens[i] > caps[i]) {
            return GPU_ERR_INVALID;
        }
    }
    for (i = 0; i < n; i++) {
        results[i] = gpu_re_decode_packet(d, frames[i], &lens[i], caps[i]);
    }
    return GPU_OK;
}
