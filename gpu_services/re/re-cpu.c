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
 * CPU backend of the RE chunker: one payload at a time, byte by byte,
 * with the roll and cut rule of re-inline.h.  It is the reference the
 * CUDA backend is tested against, its fallback, and the per-core peer in
 * the benchmark.
 */
#include <config.h>

#include "gpu_services/re/re-private.h"

#include <stdlib.h>
#include <string.h>

static size_t
chunk_one(const struct gpu_re_tables *t, const struct gpu_re_kparams *k,
          const uint8_t *d, int32_t len, uint16_t *ends, uint64_t *fps,
          size_t max)
{
    int32_t w = k->window, i;
    struct gpu_re_cutter cut;
    uint64_t fp = 0;
    size_t n = 0;

    gpu_re_cutter_start(k, &cut, 0, len);
    for (i = 0; i < len; i++) {
        fp = gpu_re_roll(t->T, t->U, fp, i >= w ? d[i - w] : 0, d[i]);
        if (gpu_re_cutter_test(k, &cut, fp, i)) {
            if (n < max) {
                ends[n] = i + 1;
                if (fps) {
                    fps[n] = fp;
                }
            }
            n++;
            gpu_re_cutter_start(k, &cut, i + 1, len);
        }
    }
    return n;
}

size_t
gpu_re_chunk_cpu(const struct gpu_re_params *p, const uint8_t *data,
                 size_t len, uint16_t *ends, uint64_t *fps, size_t max)
{
    /* Tables per window size, built once: small and immutable. */
    static struct gpu_re_tables *cache[GPU_RE_MAX_WINDOW + 1];
    struct gpu_re_tables *t;
    struct gpu_re_kparams k;

    if (p->window < GPU_RE_MIN_WINDOW || p->window > GPU_RE_MAX_WINDOW
        || len > GPU_RE_MAX_PAYLOAD) {
        return 0;
    }
    t = __atomic_load_n(&cache[p->window], __ATOMIC_ACQUIRE);
    if (!t) {
        struct gpu_re_tables *nt = malloc(sizeof *nt), *expected = NULL;

        if (!nt) {
            return 0;
        }
        gpu_re_tables_init(nt, p->window);
        if (__atomic_compare_exchange_n(&cache[p->window], &expected, nt,
                                        false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            t = nt;
        } else {
            free(nt);
            t = expected;
        }
    }
    k.mask = (p->bits >= 64 ? 0 : (1ULL << p->bits)) - 1;
    k.window = p->window;
    k.min_chunk = p->min_chunk;
    k.max_chunk = p->max_chunk;
    return chunk_one(t, &k, data, len, ends, fps, max);
}

void
gpu_re_cpu_chunk_batch(struct gpu_re_batch *b)
{
    const struct gpu_re_chunker *c = b->c;
    size_t i;

    for (i = 0; i < b->n_packets; i++) {
        const uint8_t *payload = gpu_re_batch_payload(b, i);
        uint32_t len = b->offsets[i + 1] - b->offsets[i];
        size_t slot = gpu_re_slot_base(b->offsets, i,
                                       c->cfg.params.min_chunk);

        chunk_one(&c->tables, &c->kp, payload, len, b->ends + slot,
                  b->want_fps ? b->fps + slot : NULL, len + 1);
        if (b->want_hashes) {
            gpu_re_hash_packet(payload, len, b->ends + slot,
                               b->hashes + slot, &b->payload_checks[i]);
        }
    }
}

static int
cpu_init(struct gpu_re_chunker *c)
{
    return GPU_OK;
}

static void
cpu_uninit(struct gpu_re_chunker *c)
{
}

static void
cpu_batch_uninit(struct gpu_re_batch *b)
{
    free(b->ends);
    free(b->fps);
    free(b->hashes);
    free(b->payload_checks);
}

static int
cpu_batch_init(struct gpu_re_batch *b)
{
    b->ends = malloc(b->max_slots * sizeof *b->ends);
    b->fps = b->want_fps ? malloc(b->max_slots * sizeof *b->fps) : NULL;
    if (b->want_hashes) {
        b->hashes = malloc(b->max_slots * sizeof *b->hashes);
        b->payload_checks = malloc(b->max_packets
                                   * sizeof *b->payload_checks);
    }
    if (!b->ends || (b->want_fps && !b->fps)
        || (b->want_hashes && (!b->hashes || !b->payload_checks))) {
        cpu_batch_uninit(b);
        return GPU_ERR_NOMEM;
    }
    return GPU_OK;
}

static int
cpu_submit(struct gpu_re_batch *b, struct gpu_stream *s, bool again)
{
    gpu_re_cpu_chunk_batch(b);
    return GPU_OK;
}

static int
cpu_wait(struct gpu_re_batch *b)
{
    return GPU_OK;
}

const struct gpu_re_provider gpu_re_cpu_provider = {
    "cpu",
    GPU_RE_BACKEND_CPU,
    cpu_init,
    cpu_uninit,
    cpu_batch_init,
    cpu_batch_uninit,
    cpu_submit,
    cpu_wait,
    cpu_wait,                   /* Chunked at submit: always done. */
    NULL,                       /* The host's encoder encodes. */
    NULL,
};
