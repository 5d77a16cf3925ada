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
 * CPU backend of the parity coder: the reference the CUDA backend is
 * tested against, and its fallback.  Each output packet is the XOR of its
 * source packets (the ones of its bitmatrix row), so the work is the
 * number of ones in the bitmatrix times the packet size.
 */
#include <config.h>

#include "gpu_services/parity/parity-private.h"

#include <string.h>

/* dst = XOR of the 'n' (>= 1) packets srcs[i] + off, over 'len' bytes (a
 * multiple of 8).  The sum of a stretch is kept in registers while every
 * source is read once, so memory sees one load per source byte and one
 * store per output byte, not Jerasure's load-load-store per source.
 * Through memcpy so unaligned buffers are fine; the fixed-size inner
 * loops compile to vector instructions. */
#define STRETCH 64

static void
xor_sources(uint8_t *dst, const uint8_t *const *srcs, size_t n, size_t len)
{
    size_t i = 0;

    for (; i + STRETCH <= len; i += STRETCH) {
        uint64_t acc[STRETCH / 8], v[STRETCH / 8];

        memcpy(acc, srcs[0] + i, STRETCH);
        for (size_t s = 1; s < n; s++) {
            memcpy(v, srcs[s] + i, STRETCH);
            for (int x = 0; x < STRETCH / 8; x++) {
                acc[x] = gpu_parity_step64(acc[x], v[x], UINT64_MAX);
            }
        }
        memcpy(dst + i, acc, STRETCH);
    }
    for (; i < len; i += 8) {
        uint64_t acc, v;

        memcpy(&acc, srcs[0] + i, 8);
        for (size_t s = 1; s < n; s++) {
            memcpy(&v, srcs[s] + i, 8);
            acc ^= v;
        }
        memcpy(dst + i, &acc, 8);
    }
}

void
gpu_parity_cpu_apply(const struct parity_plan *p, unsigned int packetsize,
                     const uint8_t *const *in, uint8_t *const *out,
                     size_t size)
{
    unsigned int w = p->w, o, r;
    size_t block = (size_t) w * packetsize, off;
    const uint8_t *srcs[GPU_PARITY_MAX_CHUNKS * GPU_PARITY_MAX_W];

    for (off = 0; off < size; off += block) {
        for (o = 0; o < p->n_out; o++) {
            for (r = 0; r < w; r++) {
                size_t row = (size_t) o * w + r;
                uint8_t *dst = out[o] + off + (size_t) r * packetsize;
                uint32_t s = p->src_start[row], e = p->src_start[row + 1];
                size_t n = 0;

                for (; s < e; s++) {
                    unsigned int c = p->srcs[s];

                    srcs[n++] = in[c / w] + off
                                + (size_t) (c % w) * packetsize;
                }
                if (n) {
                    xor_sources(dst, srcs, n, packetsize);
                } else {
                    memset(dst, 0, packetsize);
                }
            }
        }
    }
}

static int
cpu_submit(struct gpu_parity_batch *b, struct gpu_stream *stream,
           bool again)
{
    (void) stream;
    (void) again;
    gpu_parity_cpu_apply(b->plan, b->coder->cfg.packetsize, b->in, b->out,
                         b->size);
    return GPU_OK;
}

static int
cpu_done(struct gpu_parity_batch *b)
{
    (void) b;
    return GPU_OK;
}

const struct gpu_parity_provider gpu_parity_cpu_provider = {
    .name = "cpu",
    .type = GPU_PARITY_BACKEND_CPU,
    .init = NULL,
    .uninit = NULL,
    .batch_init = NULL,
    .batch_uninit = NULL,
    .submit = cpu_submit,
    .poll = cpu_done,
    .wait = cpu_done,
};
