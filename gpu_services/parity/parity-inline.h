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
 * Per-element logic of the parity coder, written once for the CPU backend
 * (C) and the CUDA kernel (nvcc): where a column's word of a packet row
 * lives, and one step of a GF(2) row, "acc ^= word & mask", in which the
 * mask is all ones or all zeros from a bit of the coding bitmatrix so that
 * no branch depends on the matrix.
 *
 * Columns.  A chunk of 'size' bytes is a run of blocks of w packets
 * (packetsize bytes each); packet t of a block is bit-row t.  Cut each
 * packet into words of U bytes (U divides packetsize): word e of row t of
 * block b is at b * w * packetsize + t * packetsize + e * U.  The "column"
 * (b, e) is the set of the w words with the same b and e, one per row;
 * there are size / (w * U) columns, numbered col = b * P + e with
 * P = packetsize / U.  Every output word of column (b, e) depends only on
 * the input words of the same column, so a column is the unit of parallel
 * work: one GPU thread per column computes every output row of it.
 */
#ifndef GPU_PARITY_INLINE_H
#define GPU_PARITY_INLINE_H 1

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GPU_PARITY_HD static __host__ __device__ __forceinline__
#else
#define GPU_PARITY_HD static inline
#endif

/* Byte offset of column 'col''s word in row 0 of its block; row t's word
 * is 'packetsize' bytes further per row. */
GPU_PARITY_HD uint64_t
gpu_parity_col_offset(uint64_t col, uint32_t units_per_packet,
                      uint32_t unit_bytes, uint64_t block_bytes)
{
    uint64_t b = col / units_per_packet;
    uint64_t e = col - b * units_per_packet;

    return b * block_bytes + e * unit_bytes;
}

/* All ones if bit 'o' (< 32) of 'colmask' is set, else zero: the bit is
 * shifted to the sign and spread by an arithmetic shift, two
 * instructions and no branch. */
GPU_PARITY_HD uint32_t
gpu_parity_mask32(uint32_t colmask, unsigned int o)
{
    return (uint32_t) ((int32_t) (colmask << (31 - o)) >> 31);
}

/* The same for bit 'o' (< 64) of a 64-bit column word. */
GPU_PARITY_HD uint32_t
gpu_parity_mask64(uint64_t colmask, unsigned int o)
{
    return (uint32_t) ((int64_t) (colmask << (63 - o)) >> 63);
}

/* One GF(2) step on a 32-bit lane: one LOP3 on the GPU. */
GPU_PARITY_HD uint32_t
gpu_parity_step32(uint32_t acc, uint32_t word, uint32_t mask)
{
    return acc ^ (word & mask);
}

/* The same on a 64-bit lane, for the CPU. */
GPU_PARITY_HD uint64_t
gpu_parity_step64(uint64_t acc, uint64_t word, uint64_t mask)
{
    return acc ^ (word & mask);
}

/* ---- The GF8 code: byte symbols over GF(2^8). ----
 *
 * Multiplying byte x by a constant c is linear over GF(2), so
 * c * x = c * (x & 15) ^ c * (x & 0xf0): a coefficient's "split-nibble"
 * table is 32 bytes, c * n for n = 0 .. 15, then c * (n << 4) (ISA-L's
 * layout without GFNI).  The CUDA kernel keeps them in shared memory,
 * where a warp's lookups of one table fall in 8 banks, broadcast; the
 * tests run it on the host too.  The portable CPU code bit-slices instead
 * (GPU_PARITY_GF8_XTIME below). */
GPU_PARITY_HD uint32_t
gpu_parity_gf8_mul(const uint8_t *tbl, uint32_t x)
{
    return tbl[x & 15] ^ tbl[16 + ((x >> 4) & 15)];
}

/* The product of each of the four bytes of 'v' by the table's constant,
 * XORed into 'acc': one step of a GF(2^8) row on a 32-bit lane. */
GPU_PARITY_HD uint32_t
gpu_parity_gf8_step32(uint32_t acc, uint32_t v, const uint8_t *tbl)
{
    return acc ^ (gpu_parity_gf8_mul(tbl, v)
                  | gpu_parity_gf8_mul(tbl, v >> 8) << 8
                  | gpu_parity_gf8_mul(tbl, v >> 16) << 16
                  | gpu_parity_gf8_mul(tbl, v >> 24) << 24);
}

/* Every byte of 'V' times x (2) in GF(2^8): shifted left, and the
 * polynomial's low byte 0x1d XORed into the bytes whose top bit fell out
 * (AES's "xtime"), eight bytes a 64-bit lane with no carries between
 * them: the top bits, moved to each byte's bit 0 as T, make a byte mask
 * (T << 8) - T, exact byte by byte.  A macro, so that it serves a scalar
 * and a GNU C vector of 64-bit lanes alike (SSE2 has no lane multiply). */
#define GPU_PARITY_GF8_TOPS(V) (((V) >> 7) & 0x0101010101010101ull)
#define GPU_PARITY_GF8_XTIME(V)                                         \
    ((((V) & 0x7f7f7f7f7f7f7f7full) << 1)                               \
     ^ (((GPU_PARITY_GF8_TOPS(V) << 8) - GPU_PARITY_GF8_TOPS(V))        \
        & 0x1d1d1d1d1d1d1d1dull))

GPU_PARITY_HD uint64_t
gpu_parity_gf8_xtime64(uint64_t v)
{
    return GPU_PARITY_GF8_XTIME(v);
}

/* ---- Packet chunks (gpu_parity_pkt_*). ----
 *
 * A packet's chunk starts with its length, 2 bytes big-endian, then its
 * bytes; the rest, up to its group's chunk size, is zeros.  The bytes
 * the packet uses, header included, which the CPU pads after and the
 * CUDA kernel copies in before writing zeros. */
GPU_PARITY_HD uint32_t
gpu_parity_pkt_used(const uint8_t *chunk)
{
    return 2 + ((uint32_t) chunk[0] << 8 | chunk[1]);
}

#endif /* parity-inline.h */
