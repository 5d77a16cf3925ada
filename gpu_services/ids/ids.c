/*
 * IDS core: loading rulesets, the public getters, and the matcher and
 * batch API that dispatches to a backend (ids-cpu.c, ids-cuda.cu).
 */
#include <config.h>

#include "gpu_services/ids/ids-private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Rulesets. ---- */

int
gpu_ids_ruleset_load_string(const char *text, const char *name,
                            const struct gpu_ids_load_options *opts,
                            struct gpu_ids_ruleset **rsp,
                            char *err, size_t err_size)
{
    if (!text || !rsp) {
        return GPU_ERR_INVALID;
    }
    return gpu_ids_compile(text, name, opts, rsp, err, err_size);
}

int
gpu_ids_ruleset_load_file(const char *path,
                          const struct gpu_ids_load_options *opts,
                          struct gpu_ids_ruleset **rsp,
                          char *err, size_t err_size)
{
    FILE *f;
    char *text;
    long size;
    int error;

    if (!path || !rsp) {
        return GPU_ERR_INVALID;
    }
    f = fopen(path, "rb");
    if (!f) {
        if (err && err_size) {
            snprintf(err, err_size, "%s: cannot open: %s", path,
                     strerror(errno));
        }
        return GPU_ERR_NOT_FOUND;
    }
    if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0
        || fseek(f, 0, SEEK_SET)) {
        if (err && err_size) {
            snprintf(err, err_size, "%s: cannot read: %s", path,
                     strerror(errno));
        }
        fclose(f);
        return GPU_ERR_NOT_FOUND;
    }
    text = malloc(size + 1);
    if (!text) {
        fclose(f);
        return GPU_ERR_NOMEM;
    }
    if (fread(text, 1, size, f) != (size_t) size) {
        if (err && err_size) {
            snprintf(err, err_size, "%s: short read", path);
        }
        free(text);
        fclose(f);
        return GPU_ERR_NOT_FOUND;
    }
    fclose(f);
    text[size] = '\0';
    if (memchr(text, '\0', size)) {
        if (err && err_size) {
            snprintf(err, err_size, "%s: not a text file (NUL byte)", path);
        }
        free(text);
        return GPU_ERR_INVALID;
    }
    error = gpu_ids_compile(text, path, opts, rsp, err, err_size);
    free(text);
    return error;
}

const char *
gpu_ids_skip_reason_name(enum gpu_ids_skip_reason r)
{
    switch (r) {
    case GPU_IDS_SKIP_ACTION: return "action";
    case GPU_IDS_SKIP_PROTOCOL: return "protocol";
    case GPU_IDS_SKIP_NO_CONTENT: return "no content";
    case GPU_IDS_SKIP_TOO_MANY: return "too many contents";
    case GPU_IDS_SKIP_OPTION: return "unsupported option";
    case GPU_IDS_SKIP_ADDRESS: return "literal address";
    case GPU_IDS_SKIP_N_REASONS: break;
    }
    return "unknown";
}

void
gpu_ids_ruleset_get_stats(const struct gpu_ids_ruleset *rs,
                          struct gpu_ids_ruleset_stats *s)
{
    *s = rs->stats;
}

size_t
gpu_ids_ruleset_option_counts(const struct gpu_ids_ruleset *rs, size_t i,
                              const char **name, uint32_t *count)
{
    if (i < rs->n_options) {
        *name = rs->options[i].name;
        *count = rs->options[i].count;
    }
    return rs->n_options;
}

uint32_t
gpu_ids_ruleset_n_rules(const struct gpu_ids_ruleset *rs)
{
    return rs->stats.n_loaded;
}

bool
gpu_ids_rule_get(const struct gpu_ids_ruleset *rs, uint32_t idx,
                 struct gpu_ids_rule_info *info)
{
    const struct gpu_ids_drule *r;
    const struct ids_rule_meta *m;

    if (idx >= rs->stats.n_loaded) {
        return false;
    }
    r = &rs->rules[idx];
    m = &rs->meta[idx];
    info->sid = r->sid;
    info->line = m->line;
    info->msg = m->msg;
    info->action = m->action;
    info->proto = r->proto;
    info->bidirectional = r->flags & GPU_IDS_R_BIDIR;
    info->partial = m->partial;
    info->n_contents = r->n_contents;
    info->anchor = m->anchor;
    return true;
}

bool
gpu_ids_rule_content(const struct gpu_ids_ruleset *rs, uint32_t idx,
                     uint32_t content, struct gpu_ids_content_info *ci)
{
    const struct gpu_ids_dcontent *c;
    const struct gpu_ids_dpattern *p;

    if (idx >= rs->stats.n_loaded || content >= rs->rules[idx].n_contents) {
        return false;
    }
    c = &rs->contents[rs->rules[idx].content + content];
    p = &rs->patterns[c->pattern];
    memset(ci, 0, sizeof *ci);
    ci->bytes = rs->pbytes + p->bytes;
    ci->len = p->len;
    ci->nocase = p->nocase;
    ci->relative = c->flags & GPU_IDS_C_RELATIVE;
    if (ci->relative) {
        ci->distance = c->a;
        ci->has_within = c->flags & GPU_IDS_C_BOUNDED;
        ci->within = c->b;
    } else {
        ci->offset = c->a;
        ci->has_depth = c->flags & GPU_IDS_C_BOUNDED;
        ci->depth = c->b;
    }
    return true;
}

uint32_t
gpu_ids_rule_find(const struct gpu_ids_ruleset *rs, uint32_t sid)
{
    uint32_t i;

    for (i = 0; i < rs->stats.n_loaded; i++) {
        if (rs->rules[i].sid == sid) {
            return i;
        }
    }
    return GPU_IDS_NO_RULE;
}

bool
gpu_ids_rule_header_matches(const struct gpu_ids_ruleset *rs, uint32_t idx,
                            uint8_t proto, uint16_t sport, uint16_t dport)
{
    return (idx < rs->stats.n_loaded
            && gpu_ids_header_match(&rs->view, &rs->rules[idx], proto,
                                    sport, dport));
}

uint32_t
gpu_ids_ruleset_n_patterns(const struct gpu_ids_ruleset *rs)
{
    return rs->stats.n_patterns;
}

bool
gpu_ids_pattern_get(const struct gpu_ids_ruleset *rs, uint32_t idx,
                    const uint8_t **bytes, uint32_t *len, bool *nocase)
{
    if (idx >= rs->stats.n_patterns) {
        return false;
    }
    *bytes = rs->pbytes + rs->patterns[idx].bytes;
    *len = rs->patterns[idx].len;
    *nocase = rs->patterns[idx].nocase;
    return true;
}

size_t
gpu_ids_scan_patterns(const struct gpu_ids_ruleset *rs, const uint8_t *data,
                      size_t len, uint32_t *ids, size_t max_ids)
{
    const struct gpu_ids_tables *t = &rs->view;
    uint32_t row = 0;
    size_t n = 0, i, k, w;
    uint32_t *found = NULL;
    size_t found_alloc = 0;

    for (i = 0; i < len; i++) {
        const struct gpu_ids_dout *o;
        uint32_t s;

        row = gpu_ids_step(t->trans, t->class_map, row, data[i])
              & GPU_IDS_ROW_MASK;
        s = row / t->n_classes;
        o = &t->out[s];
        for (k = 0; k < o->n_all; k++) {
            uint32_t pid = t->out_ids[o->start + k];
            const struct gpu_ids_dpattern *p = &t->patterns[pid];

            if (gpu_ids_pattern_at(t, p, data, len, i + 1 - p->depth)) {
                if (n >= found_alloc) {
                    size_t na = found_alloc ? 2 * found_alloc : 64;
                    uint32_t *q = realloc(found, na * sizeof *q);

                    if (!q) {
                        break;
                    }
                    found = q;
                    found_alloc = na;
                }
                found[n++] = pid;
            }
        }
    }
    /* Sort and drop duplicates. */
    for (i = 1; i < n; i++) {
        uint32_t v = found[i];

        for (k = i; k > 0 && found[k - 1] > v; k--) {
            found[k] = found[k - 1];
        }
        found[k] = v;
    }
    for (i = w = 0; i < n; i++) {
        if (!w || found[w - 1] != found[i]) {
            found[w++] = found[i];
        }
    }
    for (i = 0; i < w && i < max_ids; i++) {
        ids[i] = found[i];
    }
    free(found);
    return w;
}

/* ---- Matchers and batches. ---- */

static const struct gpu_ids_provider *
pick_provider(enum gpu_ids_backend b, int *error)
{
    *error = GPU_OK;
    switch (b) {
    case GPU_IDS_BACKEND_CPU:
        return &gpu_ids_cpu_provider;
    case GPU_IDS_BACKEND_CUDA:
#ifdef HAVE_CUDA
        if (gpu_ids_cuda_probe()) {
            return &gpu_ids_cuda_provider;
        }
#endif
        *error = GPU_ERR_NO_DEVICE;
        return NULL;
    case GPU_IDS_BACKEND_DEFAULT:
#ifdef HAVE_CUDA
        if (gpu_ids_cuda_probe()) {
            return &gpu_ids_cuda_provider;
        }
#endif
        return &gpu_ids_cpu_provider;
    }
    *error = GPU_ERR_INVALID;
    return NULL;
}

bool
gpu_ids_cuda_available(void)
{
#ifdef HAVE_CUDA
    return gpu_ids_cuda_probe();
#else
    return false;
#endif
}

void
gpu_ids_matcher_config_init(struct gpu_ids_matcher_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->backend = GPU_IDS_BACKEND_DEFAULT;
    cfg->remap = true;
}

const char *
gpu_ids_backend_name(enum gpu_ids_backend b)
{
    switch (b) {
    case GPU_IDS_BACKEND_DEFAULT: return "default";
    case GPU_IDS_BACKEND_CPU: return "cpu";
    case GPU_IDS_BACKEND_CUDA: return "cuda";
    }
    return "unknown";
}

int
gpu_ids_matcher_create(const struct gpu_ids_ruleset *rs,
                       const struct gpu_ids_matcher_config *cfg,
                       struct gpu_ids_matcher **mp)
{
    struct gpu_ids_matcher_config dflt;
    struct gpu_ids_matcher *m;
    int error;

    if (!rs || !mp) {
        return GPU_ERR_INVALID;
    }
    if (!cfg) {
        gpu_ids_matcher_config_init(&dflt);
        cfg = &dflt;
    }
    if (cfg->chunk_bytes && (cfg->chunk_bytes < 16
                             || cfg->chunk_bytes > (1u << 20))) {
        return GPU_ERR_INVALID;
    }
    m = calloc(1, sizeof *m);
    if (!m) {
        return GPU_ERR_NOMEM;
    }
    m->rs = rs;
    m->cfg = *cfg;
    if (!m->cfg.chunk_bytes) {
        /* Measured on the H100 (PERFORMANCE.md, chunk sweeps of two
         * sessions): 64-byte chunks scan 6-8% faster than 256 (more
         * threads in flight outweigh the longer relative warm-up). */
        m->cfg.chunk_bytes = 64;
    }
    m->prov = pick_provider(cfg->backend, &error);
    if (!m->prov) {
        free(m);
        return error;
    }
    m->rule_counts = calloc(rs->stats.n_loaded + 1, sizeof *m->rule_counts);
    if (!m->rule_counts) {
        free(m);
        return GPU_ERR_NOMEM;
    }
    pthread_mutex_init(&m->pool_mutex, NULL);
    error = m->prov->init(m);
    if (error) {
        pthread_mutex_destroy(&m->pool_mutex);
        free(m->rule_counts);
        free(m);
        return error;
    }
    *mp = m;
    return GPU_OK;
}

void
gpu_ids_matcher_destroy(struct gpu_ids_matcher *m)
{
    if (!m) {
        return;
    }
    while (m->pool) {
        struct gpu_ids_batch *b = m->pool;

        m->pool = b->pool_next;
        gpu_ids_batch_destroy(b);
    }
    m->prov->uninit(m);
    pthread_mutex_destroy(&m->pool_mutex);
    free(m->rule_counts);
    free(m);
}

enum gpu_ids_backend
gpu_ids_matcher_backend(const struct gpu_ids_matcher *m)
{
    return m->prov->type;
}

int
gpu_ids_batch_create(struct gpu_ids_matcher *m, size_t max_packets,
                     size_t max_bytes, struct gpu_ids_batch **bp)
{
    struct gpu_ids_batch *b;
    int error;

    if (!m || !bp || !max_packets || max_packets > GPU_IDS_MAX_BATCH_PACKETS
        || max_bytes > GPU_IDS_MAX_BATCH_BYTES) {
        return GPU_ERR_INVALID;
    }
    b = calloc(1, sizeof *b);
    if (!b) {
        return GPU_ERR_NOMEM;
    }
    b->m = m;
    b->max_packets = max_packets;
    b->max_bytes = max_bytes;
    error = m->prov->batch_init(b);
    if (error) {
        free(b);
        return error;
    }
    *bp = b;
    return GPU_OK;
}

void
gpu_ids_batch_destroy(struct gpu_ids_batch *b)
{
    if (!b) {
        return;
    }
    if (b->busy) {
        b->m->prov->wait(b);
    }
    if (b->bufs.data && b->m->prov->buffers_free) {
        b->m->prov->buffers_free(b);
    } else if (b->bufs.data) {
        free(b->bufs.data);
        free(b->bufs.offsets);
        free(b->bufs.hdrs);
        free(b->bufs.verdicts);
    }
    b->m->prov->batch_uninit(b);
    free(b->resolved.data);
    free(b->resolved.offsets);
    free(b->resolved.hdrs);
    free(b->stamps);
    free(b);
}

int
gpu_ids_batch_buffers(struct gpu_ids_batch *b,
                      struct gpu_ids_batch_buffers *bufs)
{
    if (!b->bufs.data) {
        struct gpu_ids_batch_buffers *own = &b->bufs;

        if (b->m->prov->buffers_alloc) {
            int error = b->m->prov->buffers_alloc(b);

            if (error) {
                memset(own, 0, sizeof *own);
                return error;
            }
        } else {
            /* At least one byte, so that 'data' is never null. */
            own->data = malloc(b->max_bytes + 1);
            own->offsets = malloc((b->max_packets + 1)
                                  * sizeof *own->offsets);
            own->hdrs = malloc(b->max_packets * sizeof *own->hdrs);
            own->verdicts = malloc(b->max_packets * sizeof *own->verdicts);
            if (!own->data || !own->offsets || !own->hdrs
                || !own->verdicts) {
                free(own->data);
                free(own->offsets);
                free(own->hdrs);
                free(own->verdicts);
                memset(own, 0, sizeof *own);
                return GPU_ERR_NOMEM;
            }
        }
    }
    *bufs = b->bufs;
    return GPU_OK;
}

int
gpu_ids_submit(struct gpu_ids_batch *b, struct gpu_stream *stream,
               const uint8_t *data, const uint32_t *offsets,
               const struct gpu_ids_pkt_hdr *hdrs, size_t n_packets,
               struct gpu_ids_verdict *verdicts)
{
    return gpu_ids_submit_in_place(b, stream, data, offsets, NULL, hdrs,
                                   n_packets, verdicts);
}

int
gpu_ids_submit_in_place(struct gpu_ids_batch *b, struct gpu_stream *stream,
                        const uint8_t *data, const uint32_t *offsets,
                        const uint8_t *const *srcs,
                        const struct gpu_ids_pkt_hdr *hdrs, size_t n_packets,
                        struct gpu_ids_verdict *verdicts)
{
    size_t i, n_in_place = 0, n_frames = 0;
    int error;

    if (!b || !offsets || n_packets > b->max_packets
        || (n_packets && (!data || !hdrs || !verdicts))) {
        return GPU_ERR_INVALID;
    }
    if (b->busy) {
        return GPU_ERR_BUSY;
    }
    for (i = 0; i < n_packets; i++) {
        if (offsets[i + 1] < offsets[i]) {
            return GPU_ERR_INVALID;
        }
        n_in_place += srcs && srcs[i];
        n_frames += (hdrs[i].flags & GPU_IDS_HDR_FRAME) != 0;
    }
    if (offsets[n_packets] - offsets[0] > b->max_bytes) {
        return GPU_ERR_INVALID;
    }
    b->data = data ? data + offsets[0] : NULL;
    b->srcs = n_in_place ? srcs : NULL;
    b->n_in_place = n_in_place;
    b->n_frames = n_frames;
    b->offsets = offsets;
    b->hdrs = hdrs;
    b->n_packets = n_packets;
    b->n_bytes = offsets[n_packets] - offsets[0];
    b->verdicts = verdicts;
    b->again = false;
    if (!n_packets) {
        return GPU_OK;
    }
    error = b->m->prov->submit(b, stream, false);
    if (!error) {
        b->busy = true;
    }
    return error;
}

int
gpu_ids_resolve_frames(struct gpu_ids_batch *b)
{
    struct gpu_ids_batch_buffers *r = &b->resolved;
    uint32_t ofs = 0;

    if (!r->data) {
        r->data = malloc(b->max_bytes + 1);
        r->offsets = malloc((b->max_packets + 1) * sizeof *r->offsets);
        r->hdrs = malloc(b->max_packets * sizeof *r->hdrs);
        if (!r->data || !r->offsets || !r->hdrs) {
            free(r->data);
            free(r->offsets);
            free(r->hdrs);
            memset(r, 0, sizeof *r);
            return GPU_ERR_NOMEM;
        }
    }
    r->offsets[0] = 0;
    for (size_t i = 0; i < b->n_packets; i++) {
        const uint8_t *payload = gpu_ids_payload(b, i);
        uint32_t len = b->offsets[i + 1] - b->offsets[i];

        r->hdrs[i] = b->hdrs[i];
        if (r->hdrs[i].flags & GPU_IDS_HDR_FRAME) {
            payload += gpu_ids_frame_resolve(payload, len, &r->hdrs[i]);
            len = r->hdrs[i].payload_len;
        }
        /* A payload is never longer than what it came in. */
        memcpy(r->data + ofs, payload, len);
        ofs += len;
        r->offsets[i + 1] = ofs;
    }
    b->data = r->data;
    b->offsets = r->offsets;
    b->hdrs = r->hdrs;
    b->srcs = NULL;
    b->n_in_place = 0;
    b->n_frames = 0;
    b->n_bytes = ofs;
    return GPU_OK;
}

int
gpu_ids_resubmit(struct gpu_ids_batch *b, struct gpu_stream *stream)
{
    int error;

    if (!b) {
        return GPU_ERR_INVALID;
    }
    if (b->busy) {
        return GPU_ERR_BUSY;
    }
    if (!b->n_packets) {
        return GPU_OK;
    }
    if (b->n_frames) {
        return GPU_ERR_INVALID;
    }
    b->again = true;
    error = b->m->prov->submit(b, stream, true);
    if (!error) {
        b->busy = true;
    }
    return error;
}

int
gpu_ids_poll(struct gpu_ids_batch *b)
{
    int error;

    if (!b->busy) {
        return GPU_OK;
    }
    error = b->m->prov->poll(b);
    if (error != GPU_ERR_BUSY) {
        b->busy = false;
    }
    return error;
}

int
gpu_ids_wait(struct gpu_ids_batch *b)
{
    int error;

    if (!b->busy) {
        return GPU_OK;
    }
    error = b->m->prov->wait(b);
    b->busy = false;
    return error;
}

void
gpu_ids_count_batch(struct gpu_ids_batch *b, uint64_t n_matched,
                    uint64_t n_hits)
{
    struct gpu_ids_matcher *m = b->m;

    __atomic_fetch_add(&m->n_packets, b->n_packets, __ATOMIC_RELAXED);
    __atomic_fetch_add(&m->n_bytes, b->n_bytes, __ATOMIC_RELAXED);
    __atomic_fetch_add(&m->n_batches, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&m->n_matched, n_matched, __ATOMIC_RELAXED);
    __atomic_fetch_add(&m->n_hits, n_hits, __ATOMIC_RELAXED);
}

#define MATCH_BATCH_PACKETS 65536
#define MATCH_BATCH_BYTES (64u << 20)

int
gpu_ids_match(struct gpu_ids_matcher *m, const uint8_t *data,
              const uint32_t *offsets, const struct gpu_ids_pkt_hdr *hdrs,
              size_t n_packets, struct gpu_ids_verdict *verdicts)
{
    struct gpu_ids_batch *b;
    size_t i = 0;
    int error = GPU_OK;

    if (!m || !offsets) {
        return GPU_ERR_INVALID;
    }
    pthread_mutex_lock(&m->pool_mutex);
    b = m->pool;
    if (b) {
        m->pool = b->pool_next;
    }
    pthread_mutex_unlock(&m->pool_mutex);
    if (!b) {
        error = gpu_ids_batch_create(m, MATCH_BATCH_PACKETS,
                                     MATCH_BATCH_BYTES, &b);
        if (error) {
            return error;
        }
    }
    while (i < n_packets) {
        size_t j = i;

        /* As many packets as fit; a packet bigger than a whole batch is
         * refused. */
        while (j < n_packets && j - i < MATCH_BATCH_PACKETS
               && offsets[j + 1] - offsets[i] <= MATCH_BATCH_BYTES) {
            j++;
        }
        if (j == i) {
            error = GPU_ERR_INVALID;
            break;
        }
        error = gpu_ids_submit(b, NULL, data, offsets + i, hdrs + i, j - i,
                               verdicts + i);
        if (!error) {
            error = gpu_ids_wait(b);
        }
        if (error) {
            break;
        }
        i = j;
    }
    pthread_mutex_lock(&m->pool_mutex);
    b->pool_next = m->pool;
    m->pool = b;
    pthread_mutex_unlock(&m->pool_mutex);
    return error;
}

void
gpu_ids_matcher_get_stats(struct gpu_ids_matcher *m,
                          struct gpu_ids_matcher_stats *s)
{
    s->backend = m->prov->type;
    s->n_packets = __atomic_load_n(&m->n_packets, __ATOMIC_RELAXED);
    s->n_bytes = __atomic_load_n(&m->n_bytes, __ATOMIC_RELAXED);
    s->n_batches = __atomic_load_n(&m->n_batches, __ATOMIC_RELAXED);
    s->n_matched = __atomic_load_n(&m->n_matched, __ATOMIC_RELAXED);
    s->n_hits = __atomic_load_n(&m->n_hits, __ATOMIC_RELAXED);
    s->n_fallbacks = __atomic_load_n(&m->n_fallbacks, __ATOMIC_RELAXED);
    s->scan_ns = __atomic_load_n(&m->scan_ns, __ATOMIC_RELAXED);
    s->check_ns = __atomic_load_n(&m->check_ns, __ATOMIC_RELAXED);
    s->confirm_ns = __atomic_load_n(&m->confirm_ns, __ATOMIC_RELAXED);
    s->n_runtime_calls = __atomic_load_n(&m->n_runtime_calls,
                                         __ATOMIC_RELAXED);
    s->n_completion_checks = __atomic_load_n(&m->n_completion_checks,
                                             __ATOMIC_RELAXED);
    s->n_set_clears = __atomic_load_n(&m->n_set_clears, __ATOMIC_RELAXED);
    s->n_device_launches = __atomic_load_n(&m->n_device_launches,
                                           __ATOMIC_RELAXED);
    s->n_scheduler_launches = __atomic_load_n(&m->n_scheduler_launches,
                                              __ATOMIC_RELAXED);
}

int
gpu_ids_matcher_rule_counts(struct gpu_ids_matcher *m, uint64_t *counts,
                            size_t n)
{
    size_t i, nr = m->rs->stats.n_loaded;

    if (n < nr) {
        return GPU_ERR_INVALID;
    }
    for (i = 0; i < nr; i++) {
        counts[i] = __atomic_load_n(&m->rule_counts[i], __ATOMIC_RELAXED);
    }
    return m->prov->rule_counts ? m->prov->rule_counts(m, counts) : GPU_OK;
}

double
gpu_ids_scan_cfe(const uint32_t *offsets, size_t n_packets, bool remap,
                 uint32_t chunk_bytes, uint32_t max_depth)
{
    uint64_t work = 0, lanes = 0;
    size_t n_items, w, i;
    uint32_t base = offsets[0];
    size_t total = offsets[n_packets] - base;
    size_t p = 0;

    if (!chunk_bytes) {
        chunk_bytes = 256;
    }
    n_items = remap ? (total + chunk_bytes - 1) / chunk_bytes : n_packets;
    for (w = 0; w < n_items; w += 32) {
        uint64_t max = 0;

        for (i = w; i < w + 32 && i < n_items; i++) {
            uint64_t len;

            if (remap) {
                size_t cs = i * chunk_bytes;
                size_t ce = cs + chunk_bytes < total ? cs + chunk_bytes
                                                     : total;
                size_t warm;

                while (offsets[p + 1] - base <= cs) {
                    p++;
                }
                warm = cs - (offsets[p] - base);
                if (max_depth && warm > max_depth - 1) {
                    warm = max_depth - 1;
                }
                len = ce - cs + warm;
            } else {
                len = offsets[i + 1] - offsets[i];
            }
            work += len;
            if (len > max) {
                max = len;
            }
        }
        lanes += 32 * max;
    }
    return lanes ? (double) work / lanes : 1.0;
}
