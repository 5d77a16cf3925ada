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
 * RE core: parameters, the chunker and batch API that dispatches to a
 * backend (re-cpu.c, re-cuda.cu), and the 128-bit chunk hash.
 */
#include <config.h>

#include "gpu_services/re/re-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
gpu_re_params_init(struct gpu_re_params *p)
{
    p->window = 32;
    p->bits = 8;
    p->min_chunk = 32;
    p->max_chunk = 2048;
}

int
gpu_re_params_check(const struct gpu_re_params *p, char *err,
                    size_t err_size)
{
    const char *why = NULL;

    if (p->window < GPU_RE_MIN_WINDOW || p->window > GPU_RE_MAX_WINDOW) {
        why = "window must be 4 to 64 bytes";
    } else if (p->bits < 1 || p->bits > 32) {
        why = "bits must be 1 to 32";
    } else if (p->min_chunk < 1 || p->min_chunk > p->max_chunk) {
        why = "min_chunk must be 1 to max_chunk";
    } else if (p->max_chunk > GPU_RE_MAX_PAYLOAD) {
        why = "max_chunk must be at most 65535";
    }
    if (why && err && err_size) {
        snprintf(err, err_size, "%s", why);
    }
    return why ? GPU_ERR_INVALID : GPU_OK;
}

const char *
gpu_re_backend_name(enum gpu_re_backend b)
{
    switch (b) {
    case GPU_RE_BACKEND_AUTO: return "auto";
    case GPU_RE_BACKEND_CPU: return "cpu";
    case GPU_RE_BACKEND_CUDA: return "cuda";
    }
    return "unknown";
}

void
gpu_re_chunker_config_init(struct gpu_re_chunker_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    gpu_re_params_init(&cfg->params);
    cfg->backend = GPU_RE_BACKEND_AUTO;
    cfg->sort = true;
}

bool
gpu_re_cuda_available(void)
{
#ifdef HAVE_CUDA
    return gpu_device_count(NULL) > 0;
#else
    return false;
#endif
}

/* Picks the provider for 'cfg', saying why in 'why'. */
static const struct gpu_re_provider *
pick_provider(const struct gpu_re_chunker_config *cfg, char *why,
              size_t why_size, int *error)
{
    const char *no_cuda = "built without CUDA";
    struct gpu_device_info info;

    *error = GPU_OK;
#ifdef HAVE_CUDA
    if (cfg->backend != GPU_RE_BACKEND_CPU) {
        if (gpu_device_count(&no_cuda) > 0) {
            if (!gpu_device_query(cfg->device, &info)) {
                snprintf(why, why_size, "CUDA device %d (%s)", cfg->device,
                         info.name);
                return &gpu_re_cuda_provider;
            }
            no_cuda = "no such CUDA device";
        }
    }
#else
    (void) info;
#endif
    switch (cfg->backend) {
    case GPU_RE_BACKEND_CPU:
        snprintf(why, why_size, "CPU backend requested");
        return &gpu_re_cpu_provider;
    case GPU_RE_BACKEND_AUTO:
        snprintf(why, why_size, "CPU backend: %s", no_cuda);
        return &gpu_re_cpu_provider;
    case GPU_RE_BACKEND_CUDA:
        snprintf(why, why_size, "CUDA requested but unusable: %s", no_cuda);
        *error = GPU_ERR_NO_DEVICE;
        return NULL;
    }
    *error = GPU_ERR_INVALID;
    return NULL;
}

int
gpu_re_chunker_create(const struct gpu_re_chunker_config *cfg,
                      struct gpu_re_chunker **cp)
{
    struct gpu_re_chunker_config dflt;
    struct gpu_re_chunker *c;
    int error;

    if (!cp) {
        return GPU_ERR_INVALID;
    }
    if (!cfg) {
        gpu_re_chunker_config_init(&dflt);
        cfg = &dflt;
    }
    if (gpu_re_params_check(&cfg->params, NULL, 0)
        || cfg->segment % 32 || cfg->segment > (1u << 20)) {
        return GPU_ERR_INVALID;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        return GPU_ERR_NOMEM;
    }
    c->cfg = *cfg;
    if (!c->cfg.segment) {
        c->cfg.segment = 256;
    }
    c->kp.mask = (1ULL << cfg->params.bits) - 1;
    c->kp.window = cfg->params.window;
    c->kp.min_chunk = cfg->params.min_chunk;
    c->kp.max_chunk = cfg->params.max_chunk;
    gpu_re_tables_init(&c->tables, cfg->params.window);
    c->prov = pick_provider(cfg, c->why, sizeof c->why, &error);
    if (c->prov) {
        error = c->prov->init(c);
    }
    if (error) {
        free(c);
        return error;
    }
    *cp = c;
    return GPU_OK;
}

void
gpu_re_chunker_destroy(struct gpu_re_chunker *c)
{
    if (c) {
        c->prov->uninit(c);
        free(c);
    }
}

enum gpu_re_backend
gpu_re_chunker_backend(const struct gpu_re_chunker *c)
{
    return c->prov->type;
}

const char *
gpu_re_chunker_why(const struct gpu_re_chunker *c)
{
    return c->why;
}

const struct gpu_re_params *
gpu_re_chunker_params(const struct gpu_re_chunker *c)
{
    return &c->cfg.params;
}

void
gpu_re_chunker_get_stats(struct gpu_re_chunker *c,
                         struct gpu_re_chunker_stats *s)
{
    s->n_batches = __atomic_load_n(&c->n_batches, __ATOMIC_RELAXED);
    s->n_packets = __atomic_load_n(&c->n_packets, __ATOMIC_RELAXED);
    s->n_bytes = __atomic_load_n(&c->n_bytes, __ATOMIC_RELAXED);
    s->n_fallbacks = __atomic_load_n(&c->n_fallbacks, __ATOMIC_RELAXED);
    s->n_graph_launches = __atomic_load_n(&c->n_graph_launches,
                                          __ATOMIC_RELAXED);
    s->n_device_launches = __atomic_load_n(&c->n_device_launches,
                                           __ATOMIC_RELAXED);
    s->n_scheduler_launches = __atomic_load_n(&c->n_scheduler_launches,
                                              __ATOMIC_RELAXED);
}

int
gpu_re_batch_create(struct gpu_re_chunker *c, size_t max_packets,
                    size_t max_bytes, bool want_fps,
                    struct gpu_re_batch **bp)
{
    return gpu_re_batch_create_flags(c, max_packets, max_bytes,
                                     want_fps ? GPU_RE_BATCH_FPS : 0, bp);
}

int
gpu_re_batch_create_flags(struct gpu_re_chunker *c, size_t max_packets,
                          size_t max_bytes, unsigned int flags,
                          struct gpu_re_batch **bp)
{
    return gpu_re_batch_create_enc(c, max_packets, max_bytes, flags, NULL,
                                   bp);
}

int
gpu_re_batch_create_enc(struct gpu_re_chunker *c, size_t max_packets,
                        size_t max_bytes, unsigned int flags, void *enc_dev,
                        struct gpu_re_batch **bp)
{
    struct gpu_re_batch *b;
    int error;

    /* Positions in a batch are int32 on the device, with room for a
     * chunk past the last one. */
    if (!c || !bp || !max_packets || max_packets > (1u << 24)
        || max_bytes > (1ull << 30)
        || flags & ~(GPU_RE_BATCH_FPS | GPU_RE_BATCH_HASHES)) {
        return GPU_ERR_INVALID;
    }
    b = calloc(1, sizeof *b);
    if (!b) {
        return GPU_ERR_NOMEM;
    }
    b->c = c;
    b->max_packets = max_packets;
    b->max_bytes = max_bytes;
    b->max_slots = gpu_re_n_slots(max_bytes, max_packets,
                                  c->cfg.params.min_chunk);
    b->want_fps = flags & GPU_RE_BATCH_FPS;
    b->want_hashes = flags & GPU_RE_BATCH_HASHES;
    b->enc_dev = enc_dev;
    error = c->prov->batch_init(b);
    if (error) {
        free(b);
        return error;
    }
    *bp = b;
    return GPU_OK;
}

void
gpu_re_batch_destroy(struct gpu_re_batch *b)
{
    if (b) {
        if (b->busy) {
            b->c->prov->wait(b);
        }
        b->c->prov->batch_uninit(b);
        free(b);
    }
}

static void
count_batch(struct gpu_re_batch *b)
{
    struct gpu_re_chunker *c = b->c;

    __atomic_fetch_add(&c->n_batches, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->n_packets, b->n_packets, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->n_bytes, b->n_bytes, __ATOMIC_RELAXED);
}

int
gpu_re_batch_submit(struct gpu_re_batch *b, struct gpu_stream *stream,
                    const uint8_t *data, const uint32_t *offsets,
                    size_t n_packets)
{
    return gpu_re_batch_submit_in_place(b, stream, data, offsets, NULL,
                                        n_packets);
}

int
gpu_re_batch_submit_in_place(struct gpu_re_batch *b,
                             struct gpu_stream *stream, const uint8_t *data,
                             const uint32_t *offsets,
                             const uint8_t *const *srcs, size_t n_packets)
{
    size_t i, n_in_place = 0;
    int error;

    if (!b || !offsets || n_packets > b->max_packets
        || (n_packets && !data)) {
        return GPU_ERR_INVALID;
    }
    if (b->busy) {
        return GPU_ERR_BUSY;
    }
    b->min_len = UINT32_MAX;
    b->max_len = 0;
    for (i = 0; i < n_packets; i++) {
        uint32_t len = offsets[i + 1] - offsets[i];

        if (offsets[i + 1] < offsets[i] || len > GPU_RE_MAX_PAYLOAD) {
            return GPU_ERR_INVALID;
        }
        b->min_len = len < b->min_len ? len : b->min_len;
        b->max_len = len > b->max_len ? len : b->max_len;
        n_in_place += srcs && srcs[i] && len;
    }
    if (offsets[n_packets] - offsets[0] > b->max_bytes) {
        return GPU_ERR_INVALID;
    }
    b->data = data ? data + offsets[0] : NULL;
    b->offsets = offsets;
    b->srcs = n_in_place ? srcs : NULL;
    b->n_packets = n_packets;
    b->n_bytes = offsets[n_packets] - offsets[0];
    if (!n_packets) {
        return GPU_OK;
    }
    error = b->c->prov->submit(b, stream, false);
    if (!error) {
        b->busy = true;
    }
    return error;
}

int
gpu_re_batch_resubmit(struct gpu_re_batch *b, struct gpu_stream *stream)
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
    error = b->c->prov->submit(b, stream, true);
    if (!error) {
        b->busy = true;
    }
    return error;
}

/* Waits for the batch's submission if 'block', else only looks: the two
 * ways a caller learns that a submission is done, counted once. */
static int
batch_finish(struct gpu_re_batch *b, bool block)
{
    int error;

    if (!b) {
        return GPU_ERR_INVALID;
    }
    if (!b->busy) {
        return GPU_OK;
    }
    error = block ? b->c->prov->wait(b) : b->c->prov->poll(b);
    if (error == GPU_ERR_BUSY && !block) {
        return error;
    }
    b->busy = false;
    if (!error) {
        count_batch(b);
    }
    return error;
}

int
gpu_re_batch_wait(struct gpu_re_batch *b)
{
    return batch_finish(b, true);
}

int
gpu_re_batch_poll(struct gpu_re_batch *b)
{
    return batch_finish(b, false);
}

void
gpu_re_batch_results(const struct gpu_re_batch *b, const uint16_t **ends,
                     const uint64_t **fps)
{
    *ends = b->ends;
    if (fps) {
        *fps = b->fps;
    }
}

void
gpu_re_batch_hashes(const struct gpu_re_batch *b,
                    const struct gpu_re_hash **chunk_hashes,
                    const uint32_t **payload_checks)
{
    *chunk_hashes = b->hashes;
    *payload_checks = b->payload_checks;
}

void
gpu_re_batch_chunks(const struct gpu_re_batch *b, size_t i,
                    struct gpu_re_chunks *chunks)
{
    uint32_t len = b->offsets[i + 1] - b->offsets[i];
    size_t slot = gpu_re_slot_base(b->offsets, i,
                                   b->c->cfg.params.min_chunk);
    size_t n = 0;

    /* The packet's chunks end at its length (none if it is empty). */
    while (n < len && (!n || b->ends[slot + n - 1] < len)) {
        n++;
    }
    chunks->ends = b->ends + slot;
    chunks->n = n;
    chunks->hashes = b->hashes ? b->hashes + slot : NULL;
    chunks->payload_check = (b->payload_checks ? &b->payload_checks[i]
                             : NULL);
}

/* ---- The 128-bit chunk hash (re-inline.h, shared with CUDA). ---- */

struct gpu_re_hash
gpu_re_hash128(const void *data, size_t len)
{
    return gpu_re_chunk_hash(data, len);
}

uint32_t
gpu_re_check32_v1(const void *data, size_t len)
{
    return gpu_re_payload_check_v1(data, len);
}

uint32_t
gpu_re_check32(const void *data, size_t len)
{
    return gpu_re_payload_check(data, len);
}
