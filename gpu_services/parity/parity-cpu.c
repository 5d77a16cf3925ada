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
 *
 * The GF8 code (byte symbols over GF(2^8)) is coded by ISA-L's
 * ec_encode_data() where the library was built with ISA-L, and by the
 * portable code below otherwise (or when the coder asks for it): ISA-L
 * keeps split-nibble tables in vector registers and looks up 16 to 64
 * bytes an instruction (PSHUFB, or GF2P8AFFINE), which portable C cannot
 * express; without byte shuffles, lookups byte by byte cost more than
 * bit-slicing, so the portable code multiplies by the coefficients' bits
 * (xtime, parity-inline.h), 16 bytes an operation.  The CUDA kernel,
 * whose shared memory makes lookups cheap, uses the tables.
 */
#include <config.h>

#include "gpu_services/parity/parity-private.h"

#include <string.h>

#ifdef HAVE_ISAL
#include <isa-l.h>
#endif

/* dst = XOR of the 'n' (>= 1) packets srcs[i] + off, over 'len' bytes (a
 * multiple of 8).  The sum of a stretch is kept in registers while every
 * source is read once, so memory sees one load per source byte and one
 * store per output byte, not Jerasure's load-load-store per source.
 * Through memcpy so unaligned buffers are fine; the fixed-size inner
 * loops compile to vector instructions. */
#define STRETCH 64

static void
xor_sources(uint8_t *dst, const uint8_t *const *srcs, size_t n, size_t off,
            size_t len)
{
    size_t i = 0;

    for (; i + STRETCH <= len; i += STRETCH) {
        uint64_t acc[STRETCH / 8], v[STRETCH / 8];

        memcpy(acc, srcs[0] + off + i, STRETCH);
        for (size_t s = 1; s < n; s++) {
            memcpy(v, srcs[s] + off + i, STRETCH);
            for (int x = 0; x < STRETCH / 8; x++) {
                acc[x] = gpu_parity_step64(acc[x], v[x], UINT64_MAX);
            }
        }
        memcpy(dst + i, acc, STRETCH);
    }
    for (; i < len; i += 8) {
        uint64_t acc, v;

        memcpy(&acc, srcs[0] + off + i, 8);
        for (size_t s = 1; s < n; s++) {
            memcpy(&v, srcs[s] + off + i, 8);
            acc ^= v;
        }
        memcpy(dst + i, &acc, 8);
    }
}

/* Bytes of a chunk coded row by row before the next stretch: the rows of
 * one block are far apart in a chunk, so a tile keeps the stretch of
 * every input in the cache while all rows are made from it. */
#define TILE 4096

/* Bytes of the GF8 code coded for every output before the next stretch:
 * the outputs' stretches stay in the L1 cache while every input's is read
 * once. */
#define GF8_TILE 2048

/* Two 64-bit lanes (GNU C vectors: SSE2 on x86-64, NEON on arm64, plain
 * words elsewhere), GF8_VECS of them a stretch: 64 bytes. */
typedef uint64_t gf8_vec __attribute__((vector_size(16)));
#define GF8_VECS 4

/* One stretch of 'n' vectors (GF8_VECS, or 1 for the tail) of input 'i'
 * ('src') into every output at 'off': its products by 1, 2, 4 .. 128
 * (parity-inline.h) are made once, and every output takes the XOR of
 * those its coefficient's bits name, branch-free: about 2 operations per
 * 16 bytes and output bit, where table lookups byte by byte cost several
 * times that.  Inlined with 'n' a constant, so the stretch stays in
 * registers. */
static inline __attribute__((always_inline)) void
gf8_stretch(const struct parity_plan *p, unsigned int i, const uint8_t *src,
            uint8_t *const *out, size_t off, const size_t n)
{
    gf8_vec pow[8][GF8_VECS];

    memcpy(pow[0], src, n * sizeof(gf8_vec));
    /* Unrolled (GCC and clang both read the pragma), so that the stretch
     * lives in registers rather than on the stack. */
#pragma GCC unroll 8
    for (int b = 1; b < 8; b++) {
#pragma GCC unroll 4
        for (size_t e = 0; e < n; e++) {
            pow[b][e] = GPU_PARITY_GF8_XTIME(pow[b - 1][e]);
        }
    }
    for (unsigned int o = 0; o < p->n_out; o++) {
        uint32_t c = p->bits[(size_t) o * p->n_in + i];
        gf8_vec acc[GF8_VECS];

        if (!c) {
            continue;
        }
        memcpy(acc, out[o] + off, n * sizeof(gf8_vec));
#pragma GCC unroll 8
        for (int b = 0; b < 8; b++) {
            uint64_t mask = 0 - (uint64_t) ((c >> b) & 1);

#pragma GCC unroll 4
            for (size_t e = 0; e < n; e++) {
                acc[e] ^= pow[b][e] & mask;
            }
        }
        memcpy(out[o] + off, acc, n * sizeof(gf8_vec));
    }
}

/* The portable GF8 code. */
static void
gf8_apply_portable(const struct parity_plan *p, const uint8_t *const *in,
                   uint8_t *const *out, size_t size)
{
    for (size_t t0 = 0; t0 < size; t0 += GF8_TILE) {
        size_t len = size - t0 < GF8_TILE ? size - t0 : GF8_TILE;

        for (unsigned int o = 0; o < p->n_out; o++) {
            memset(out[o] + t0, 0, len);
        }
        for (unsigned int i = 0; i < p->n_in; i++) {
            size_t x = 0;

            for (; x + GF8_VECS * sizeof(gf8_vec) <= len;
                 x += GF8_VECS * sizeof(gf8_vec)) {
                gf8_stretch(p, i, in[i] + t0 + x, out, t0 + x, GF8_VECS);
            }
            for (; x + sizeof(gf8_vec) <= len; x += sizeof(gf8_vec)) {
                gf8_stretch(p, i, in[i] + t0 + x, out, t0 + x, 1);
            }
            if (x < len) {
                /* Sizes are multiples of 8: one 64-bit word left. */
                uint64_t pow[8];

                memcpy(&pow[0], in[i] + t0 + x, 8);
                for (int b = 1; b < 8; b++) {
                    pow[b] = gpu_parity_gf8_xtime64(pow[b - 1]);
                }
                for (unsigned int o = 0; o < p->n_out; o++) {
                    uint32_t c = p->bits[(size_t) o * p->n_in + i];
                    uint64_t acc;

                    memcpy(&acc, out[o] + t0 + x, 8);
                    for (int b = 0; b < 8; b++) {
                        acc ^= pow[b] & (0 - (uint64_t) ((c >> b) & 1));
                    }
                    memcpy(out[o] + t0 + x, &acc, 8);
                }
            }
        }
    }
}

void
gpu_parity_cpu_apply_gf8(const struct parity_plan *p,
                         const uint8_t *const *in, uint8_t *const *out,
                         size_t size)
{
#ifdef HAVE_ISAL
    if (p->isal) {
        ec_encode_data(size, p->n_in, p->n_out, p->isal_tables,
                       (unsigned char **) in, (unsigned char **) out);
        return;
    }
#endif
    gf8_apply_portable(p, in, out, size);
}

void
gpu_parity_cpu_apply(const struct parity_plan *p, unsigned int packetsize,
                     const uint8_t *const *in, uint8_t *const *out,
                     size_t size)
{
    unsigned int w = p->w;

    if (p->code == GPU_PARITY_CODE_GF8) {
        gpu_parity_cpu_apply_gf8(p, in, out, size);
        return;
    }

    size_t block = (size_t) w * packetsize;
    size_t tile = TILE > block ? TILE / block * block : block;
    const uint8_t *srcs[GPU_PARITY_MAX_CHUNKS * GPU_PARITY_MAX_W];

    /* The sources of a row are the same in every block, at the same
     * offset from the block's start: found once per row and tile (the
     * fec services' packetsize of 8 makes blocks of 8 to 64 bytes, where
     * finding them per block cost more than the XORs). */
    for (size_t t0 = 0; t0 < size; t0 += tile) {
        size_t t1 = t0 + tile < size ? t0 + tile : size;

        for (size_t row = 0; row < (size_t) p->n_out * w; row++) {
            uint8_t *dst = out[row / w] + (row % w) * packetsize;
            uint32_t s = p->src_start[row], e = p->src_start[row + 1];
            size_t n = 0;

            for (; s < e; s++) {
                unsigned int c = p->srcs[s];

                srcs[n++] = in[c / w] + (size_t) (c % w) * packetsize;
            }
            for (size_t off = t0; off < t1; off += block) {
                if (n) {
                    xor_sources(dst + off, srcs, n, off, packetsize);
                } else {
                    memset(dst + off, 0, packetsize);
                }
            }
        }
    }
}

void
gpu_parity_cpu_apply_batch(const struct gpu_parity_batch *b)
{
    unsigned int ps = b->coder->cfg.packetsize;

    if (b->pkt) {
        gpu_parity_pkt_pad_host(b);
        gpu_parity_cpu_apply(b->plan, ps, b->in, b->out, b->size);
        gpu_parity_pkt_deliver_host(b);
        return;
    }
    if (!b->n_segs) {
        gpu_parity_cpu_apply(b->plan, ps, b->in, b->out, b->size);
        return;
    }
    /* Segments: 'in' and 'out' hold every chunk by id; each segment reads
     * and writes the chunks its plan names, at its offset. */
    for (size_t s = 0; s < b->n_segs; s++) {
        const struct parity_seg *seg = &b->segs[s];
        const struct parity_plan *p = seg->plan;
        const uint8_t *in[GPU_PARITY_MAX_CHUNKS];
        uint8_t *out[GPU_PARITY_MAX_CHUNKS];

        if (!p) {
            continue;
        }
        for (unsigned int i = 0; i < p->n_in; i++) {
            in[i] = b->in[p->in_ids[i]] + seg->offset;
        }
        for (unsigned int o = 0; o < p->n_out; o++) {
            out[o] = b->out[p->out_ids[o]] + seg->offset;
        }
        gpu_parity_cpu_apply(p, ps, in, out, seg->size);
    }
}

static int
cpu_submit(struct gpu_parity_batch *b, struct gpu_stream *stream,
           bool again)
{
    (void) stream;
    (void) again;
    gpu_parity_cpu_apply_batch(b);
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
