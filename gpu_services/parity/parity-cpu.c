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
 * tested against, and its fallback.  Packets are XORed whole, as Jerasure
 * does (copy the first source packet, XOR the others in), so the work is
 * the number of ones in the bitmatrix times the packet size, in long runs
 * that the compiler vectorizes.
 */
#include <config.h>

#include "gpu_services/parity/parity-private.h"

#include <string.h>

/* dst ^= src over 'n' bytes, n a multiple of 8.  Through memcpy so that
 * unaligned buffers are fine; compilers turn it into vector loads. */
static void
xor_into(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t i = 0;

    for (; i + 32 <= n; i += 32) {
        uint64_t a[4], b[4];

        memcpy(a, dst + i, 32);
        memcpy(b, src + i, 32);
        a[0] = gpu_parity_step64(a[0], b[0], UINT64_MAX);
        a[1] = gpu_parity_step64(a[1], b[1], UINT64_MAX);
        a[2] = gpu_parity_step64(a[2], b[2], UINT64_MAX);
        a[3] = gpu_parity_step64(a[3], b[3], UINT64_MAX);
        memcpy(dst + i, a, 32);
    }
    for (; i < n; i += 8) {
        uint64_t a, b;

        memcpy(&a, dst + i, 8);
        memcpy(&b, src + i, 8);
        a ^= b;
        memcpy(dst + i, &a, 8);
    }
}

void
gpu_parity_cpu_apply(const struct parity_plan *p, unsigned int packetsize,
                     const uint8_t *const *in, uint8_t *const *out,
                     size_t size)
{
    unsigned int w = p->w, o, r;
    size_t block = (size_t) w * packetsize, off;

    for (off = 0; off < size; off += block) {
        for (o = 0; o < p->n_out; o++) {
            for (r = 0; r < w; r++) {
                size_t row = (size_t) o * w + r;
                uint8_t *dst = out[o] + off + (size_t) r * packetsize;
                uint32_t s = p->src_start[row], e = p->src_start[row + 1];

                if (s == e) {
                    memset(dst, 0, packetsize);
                    continue;
                }
                for (; s < e; s++) {
                    unsigned int c = p->srcs[s];
                    const uint8_t *src = in[c / w] + off
                                         + (size_t) (c % w) * packetsize;

                    if (s == p->src_start[row]) {
                        memcpy(dst, src, packetsize);
                    } else {
                        xor_into(dst, src, packetsize);
                    }
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
