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
 * Per-byte logic of Rabin chunking, written once for the CPU backend (C)
 * and the CUDA kernel (nvcc): the LBFS tables, the window roll and the
 * cut rule.  Nothing here may differ between the two compilers; the test
 * checks both against a plain bit-serial reference.
 *
 * The fingerprint of a window b[0..w) is the polynomial
 * sum b[k] x^(8 (w - 1 - k)) reduced modulo P = GPU_RE_POLY over GF(2),
 * so it is below 2^63.  At the start of each payload the window is all
 * zero bytes, which contribute nothing: the fingerprint at byte i is that
 * of bytes [max(0, i - w + 1), i].
 *
 * Rolling (LBFS rabinpoly.C): with 'out' the byte leaving the window,
 *
 *   p  = fp ^ U[out]                    remove out * x^(8 (w - 1))
 *   fp = ((p << 8) | in) ^ T[p >> 55]   append 'in', reduce
 *
 * U[j] = j x^(8 (w - 1)) mod P.  T[j] = (j x^63 mod P) | j << 63: the
 * bits of p shifted past bit 62 are j x^63, and bit 63 of p << 8 (the low
 * bit of j) is cancelled by the j << 63 term.
 */
#ifndef GPU_RE_INLINE_H
#define GPU_RE_INLINE_H 1

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gpu_services/re/gpu-re.h"

#ifdef __CUDACC__
#define GPU_RE_HD static __host__ __device__ __forceinline__
#else
#define GPU_RE_HD static inline
#endif

#define GPU_RE_SHIFT 55         /* Degree 63 - 8. */

struct gpu_re_tables {
    uint64_t T[256];
    uint64_t U[256];
};

/* The per-chunker constants a kernel needs (copied by value). */
struct gpu_re_kparams {
    uint64_t mask;              /* (1 << bits) - 1. */
    int32_t window;
    int32_t min_chunk;
    int32_t max_chunk;
};

/* a * b mod P for a, b of degree < 63 (bit-serial, table building only). */
GPU_RE_HD uint64_t
gpu_re_polymulmod(uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    int i;

    for (i = 62; i >= 0; i--) {
        /* r = r * x mod P, then add b if bit i of a is set. */
        r <<= 1;
        if (r >> 63) {
            r ^= GPU_RE_POLY;
        }
        if ((a >> i) & 1) {
            r ^= b;
        }
    }
    return r;
}

GPU_RE_HD void
gpu_re_tables_init(struct gpu_re_tables *t, uint32_t window)
{
    /* x^63 mod P and x^(8 (w - 1)) mod P. */
    uint64_t x63 = GPU_RE_POLY ^ (1ULL << 63);
    uint64_t xw = 1;
    uint32_t i;

    for (i = 0; i < 8 * (window - 1); i++) {
        xw <<= 1;
        if (xw >> 63) {
            xw ^= GPU_RE_POLY;
        }
    }
    for (i = 0; i < 256; i++) {
        t->T[i] = gpu_re_polymulmod(i, x63) | ((uint64_t) i << 63);
        t->U[i] = gpu_re_polymulmod(i, xw);
    }
}

/* One byte in ('in'), one out ('out', 0 while the window fills). */
GPU_RE_HD uint64_t
gpu_re_roll(const uint64_t *T, const uint64_t *U, uint64_t fp, uint8_t out,
            uint8_t in)
{
    uint64_t p = fp ^ U[out];

    return ((p << 8) | in) ^ T[p >> GPU_RE_SHIFT];
}

/* The cut rule.  With 's' the start of the current chunk and 'end' the
 * payload's end, the chunk ends after byte 'pos' if
 *
 *   pos - s + 1 >= min_chunk and the low 'bits' bits of fp are zero, or
 *   pos - s + 1 == max_chunk, or
 *   pos == end - 1 (the payload's last chunk).
 *
 * Kept as two positions per chunk, so that the test per byte is two
 * compares and a mask: 'lo' is the first byte a fingerprint may end the
 * chunk at, 'hi' the byte it must end at.  After the payload's last
 * chunk, nothing cuts (positions past the end may still be rolled). */
struct gpu_re_cutter {
    int32_t lo, hi;
};

GPU_RE_HD void
gpu_re_cutter_start(const struct gpu_re_kparams *k, struct gpu_re_cutter *c,
                    int32_t s, int32_t end)
{
    if (s >= end) {
        c->lo = INT32_MAX;
        c->hi = -1;
    } else {
        int32_t hi = s + k->max_chunk - 1;

        c->lo = s + k->min_chunk - 1;
        c->hi = hi < end - 1 ? hi : end - 1;
    }
}

GPU_RE_HD bool
gpu_re_cutter_test(const struct gpu_re_kparams *k,
                   const struct gpu_re_cutter *c, uint64_t fp, int32_t pos)
{
    /* bits <= 32: the mask lives in the low word.  Bitwise, not
     * short-circuit: no branch per byte on the GPU. */
    return ((pos >= c->lo) & !((uint32_t) fp & (uint32_t) k->mask))
           | (pos == c->hi);
}

/* ---- MurmurHash3 x64_128 (Austin Appleby, public domain), seed 0. ----
 *
 * Shim version 1's payload check (its high 32 bits), which decoders
 * still take; until the thirty-second session the chunk hash too (now
 * gpu_re_chunk_hash(), below). */

GPU_RE_HD uint64_t
gpu_re_rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

GPU_RE_HD uint64_t
gpu_re_fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

/* The little-endian 64-bit word at 'p', any alignment.  On the device
 * an unaligned 8-byte load faults, so two aligned words are joined; the
 * second is read only if the word straddles it, so no byte past the
 * 8-byte granule of p[7] is touched. */
GPU_RE_HD uint64_t
gpu_re_load64le(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    const uint64_t *w = (const uint64_t *) ((uintptr_t) p & ~(uintptr_t) 7);
    unsigned int shift = ((uintptr_t) p & 7) * 8;

    return shift ? (w[0] >> shift) | (w[1] << (64 - shift)) : w[0];
#else
    uint64_t v;

    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
#endif
}

GPU_RE_HD struct gpu_re_hash
gpu_re_murmur128(const uint8_t *data, uint64_t len)
{
    const uint64_t c1 = 0x87c37b91114253d5ULL;
    const uint64_t c2 = 0x4cf5ad432745937fULL;
    const uint64_t nblocks = len / 16;
    const uint8_t *tail = data + nblocks * 16;
    uint64_t h1 = 0, h2 = 0, k1 = 0, k2 = 0, i;
    struct gpu_re_hash h;

    for (i = 0; i < nblocks; i++) {
        k1 = gpu_re_load64le(data + 16 * i);
        k2 = gpu_re_load64le(data + 16 * i + 8);

        k1 *= c1; k1 = gpu_re_rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        h1 = gpu_re_rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
        k2 *= c2; k2 = gpu_re_rotl64(k2, 33); k2 *= c1; h2 ^= k2;
        h2 = gpu_re_rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
    }

    /* The 0..15 tail bytes as two zero-padded little-endian words
     * (byte by byte: a word load could run past the buffer). */
    k1 = k2 = 0;
    for (i = 0; i < (len & 15); i++) {
        if (i < 8) {
            k1 |= (uint64_t) tail[i] << (8 * i);
        } else {
            k2 |= (uint64_t) tail[i] << (8 * (i - 8));
        }
    }
    if ((len & 15) > 8) {
        k2 *= c2; k2 = gpu_re_rotl64(k2, 33); k2 *= c1; h2 ^= k2;
    }
    if (len & 15) {
        k1 *= c1; k1 = gpu_re_rotl64(k1, 31); k1 *= c2; h1 ^= k1;
    }

    h1 ^= len;
    h2 ^= len;
    h1 += h2;
    h2 += h1;
    h1 = gpu_re_fmix64(h1);
    h2 = gpu_re_fmix64(h2);
    h1 += h2;
    h2 += h1;
    h.hi = h1;
    h.lo = h2;
    return h;
}

/* ---- XXH64 (Yann Collet's xxHash, BSD-2-Clause), seed 0. ----
 *
 * The shim's payload check from version 2 on (gpu_re_payload_check()).
 * The decoder hashes every payload it rebuilds on the datapath thread:
 * MurmurHash3 x64_128, whose two halves wait on each other every 16
 * bytes, was 13% of the re pair's PMD (docs/RE-NOTES.md); XXH64's four
 * independent lanes hash the same bytes about twice as fast on one core,
 * and it needs no table or vector unit on the device.  Written from the
 * xxHash specification; tests/test-re.c checks it against libxxhash. */

#define GPU_RE_XXH_P1 0x9e3779b185ebca87ULL
#define GPU_RE_XXH_P2 0xc2b2ae3d27d4eb4fULL
#define GPU_RE_XXH_P3 0x165667b19e3779f9ULL
#define GPU_RE_XXH_P4 0x85ebca77c2b2ae63ULL
#define GPU_RE_XXH_P5 0x27d4eb2f165667c5ULL

/* The little-endian 32-bit word at 'p', any alignment (as
 * gpu_re_load64le()). */
GPU_RE_HD uint32_t
gpu_re_load32le(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    const uint32_t *w = (const uint32_t *) ((uintptr_t) p & ~(uintptr_t) 3);
    unsigned int shift = ((uintptr_t) p & 3) * 8;

    return shift ? (w[0] >> shift) | (w[1] << (32 - shift)) : w[0];
#else
    uint32_t v;

    memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
#endif
}

GPU_RE_HD uint64_t
gpu_re_xxh64_round(uint64_t acc, uint64_t input)
{
    acc += input * GPU_RE_XXH_P2;
    return gpu_re_rotl64(acc, 31) * GPU_RE_XXH_P1;
}

GPU_RE_HD uint64_t
gpu_re_xxh64_merge(uint64_t acc, uint64_t lane)
{
    acc ^= gpu_re_xxh64_round(0, lane);
    return acc * GPU_RE_XXH_P1 + GPU_RE_XXH_P4;
}

/* XXH64's accumulator 'i' (0 to 3) before the first stripe. */
GPU_RE_HD uint64_t
gpu_re_xxh64_acc_start(unsigned int i)
{
    return (i == 0 ? GPU_RE_XXH_P1 + GPU_RE_XXH_P2
            : i == 1 ? GPU_RE_XXH_P2
            : i == 2 ? 0
            : 0 - GPU_RE_XXH_P1);
}

/* The hash of the four accumulators of an input of 32 bytes or more. */
GPU_RE_HD uint64_t
gpu_re_xxh64_join(uint64_t v1, uint64_t v2, uint64_t v3, uint64_t v4)
{
    uint64_t h = (gpu_re_rotl64(v1, 1) + gpu_re_rotl64(v2, 7)
                  + gpu_re_rotl64(v3, 12) + gpu_re_rotl64(v4, 18));

    h = gpu_re_xxh64_merge(h, v1);
    h = gpu_re_xxh64_merge(h, v2);
    h = gpu_re_xxh64_merge(h, v3);
    return gpu_re_xxh64_merge(h, v4);
}

/* Finishes XXH64 of a 'len'-byte input from 'h' (the join of its
 * stripes, or GPU_RE_XXH_P5 under 32 bytes) and the bytes [p, end) left
 * after its stripes. */
GPU_RE_HD uint64_t
gpu_re_xxh64_finish(uint64_t h, uint64_t len, const uint8_t *p,
                    const uint8_t *end)
{
    h += len;
    for (; end - p >= 8; p += 8) {
        h ^= gpu_re_xxh64_round(0, gpu_re_load64le(p));
        h = gpu_re_rotl64(h, 27) * GPU_RE_XXH_P1 + GPU_RE_XXH_P4;
    }
    if (end - p >= 4) {
        h ^= (uint64_t) gpu_re_load32le(p) * GPU_RE_XXH_P1;
        h = gpu_re_rotl64(h, 23) * GPU_RE_XXH_P2 + GPU_RE_XXH_P3;
        p += 4;
    }
    for (; p < end; p++) {
        h ^= *p * GPU_RE_XXH_P5;
        h = gpu_re_rotl64(h, 11) * GPU_RE_XXH_P1;
    }
    h ^= h >> 33;
    h *= GPU_RE_XXH_P2;
    h ^= h >> 29;
    h *= GPU_RE_XXH_P3;
    h ^= h >> 32;
    return h;
}

/* On one thread; a warp on the device splits the stripes' accumulators
 * among four lanes (re-kernels.cuh, quad_xxh64()). */
GPU_RE_HD uint64_t
gpu_re_xxh64(const uint8_t *p, uint64_t len)
{
    const uint8_t *end = p + len;
    uint64_t h = GPU_RE_XXH_P5;

    if (len >= 32) {
        uint64_t v1 = gpu_re_xxh64_acc_start(0);
        uint64_t v2 = gpu_re_xxh64_acc_start(1);
        uint64_t v3 = gpu_re_xxh64_acc_start(2);
        uint64_t v4 = gpu_re_xxh64_acc_start(3);

        do {
            v1 = gpu_re_xxh64_round(v1, gpu_re_load64le(p));
            v2 = gpu_re_xxh64_round(v2, gpu_re_load64le(p + 8));
            v3 = gpu_re_xxh64_round(v3, gpu_re_load64le(p + 16));
            v4 = gpu_re_xxh64_round(v4, gpu_re_load64le(p + 24));
            p += 32;
        } while (end - p >= 32);
        h = gpu_re_xxh64_join(v1, v2, v3, v4);
    }
    return gpu_re_xxh64_finish(h, len, p, end);
}

/* The chunk hash (gpu_re_hash128()), written once for the CPU and the
 * CUDA kernel that hashes a batch's chunks ahead of the encoder, which
 * takes those hashes in place of its own, so they must be the same bits:
 * 'lo' is the chunk's XXH64 (seed 0), 'hi' the same mixed once more
 * (gpu_re_fmix64(), a bijection).  Both encoders only index their tables
 * with it (bucket from 'lo', tag from 'hi') and compare every candidate
 * byte for byte, so 64 bits of hash do.  XXH64's four accumulators let
 * four lanes of a warp walk one chunk (re-kernels.cuh, quad_xxh64()),
 * where MurmurHash3's single chain left the longest chunk of a batch (an
 * MTU's payload uncut, one lane) setting the hash kernel's time: 14.1 us
 * of a 77 us call of 600 payloads (ncu, H200). */
GPU_RE_HD struct gpu_re_hash
gpu_re_chunk_hash_of(uint64_t xxh64)
{
    struct gpu_re_hash h;

    h.lo = xxh64;
    h.hi = gpu_re_fmix64(xxh64);
    return h;
}

GPU_RE_HD struct gpu_re_hash
gpu_re_chunk_hash(const uint8_t *p, uint64_t len)
{
    return gpu_re_chunk_hash_of(gpu_re_xxh64(p, len));
}

/* Shim version 1's 'check' of a payload: the high 32 bits of its
 * MurmurHash3 x64_128. */
GPU_RE_HD uint32_t
gpu_re_payload_check_v1(const uint8_t *p, uint32_t len)
{
    return gpu_re_murmur128(p, len).hi >> 32;
}

/* The shim's 'check' of a payload: the high 32 bits of its XXH64 (shim
 * version 2; version 1's was MurmurHash3's, gpu_re_payload_check_v1()). */
GPU_RE_HD uint32_t
gpu_re_payload_check(const uint8_t *p, uint32_t len)
{
    return gpu_re_xxh64(p, len) >> 32;
}

/* The hashes a batch gives the encoder for one packet of 'len' bytes:
 * each chunk's (ends[] as the chunker wrote them, the last one 'len'),
 * by slot like the ends, and the whole packet's check for its shim. */
GPU_RE_HD void
gpu_re_hash_packet(const uint8_t *p, uint32_t len, const uint16_t *ends,
                   struct gpu_re_hash *hashes, uint32_t *payload_check)
{
    uint32_t s = 0, i;

    for (i = 0; s < len; s = ends[i++]) {
        hashes[i] = gpu_re_chunk_hash(p + s, ends[i] - s);
    }
    *payload_check = gpu_re_payload_check(p, len);
}

/* Appends LEB128 'v' at out[*n] if it fits before 'limit' (the shim's
 * varints, written by the host encoder and by the device's). */
GPU_RE_HD bool
gpu_re_put_varint(uint8_t *out, size_t *n, size_t limit, uint32_t v)
{
    do {
        if (*n >= limit) {
            return false;
        }
        out[(*n)++] = (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return true;
}

#endif /* re-inline.h */
