/*
 * Per-element logic of the bitmap index builder, written once for the CPU
 * backend (C) and the CUDA kernels (nvcc), so that both produce the same
 * words: the partial literal and chunk of a row, the 0-fill before a
 * literal, and PLWAH's folding of a one-bit literal into its fill.
 *
 * These are the steps of the seed's Algorithms 2, 4 and 7 with the
 * printed errors fixed (docs/INDEX-NOTES.md):
 *   - the first literal of a column in chunk c is preceded by a fill of c
 *     chunks, not c - 1 (chunk ids start at 0);
 *   - PLWAH's "one set bit" test and the position look at the 31 payload
 *     bits only, never at the literal's header bit 31.
 */
#ifndef GPU_INDEX_INLINE_H
#define GPU_INDEX_INLINE_H 1

#include <stdbool.h>
#include <stdint.h>

#include "gpu_services/index/gpu-index.h"

#ifdef __CUDACC__
#define GPU_INDEX_HD static __host__ __device__ __forceinline__
#else
#define GPU_INDEX_HD static inline
#endif

#define IX_CHUNK_BITS 31
#define IX_LIT 0x80000000u          /* Literal header bit. */
#define IX_PAYLOAD 0x7fffffffu      /* A literal's 31 row bits. */
#define IX_FILL1 0x40000000u        /* Result bitmaps: a fill of 1s. */
#define IX_WAH_COUNT 0x3fffffffu    /* Fill count, WAH. */
#define IX_PL_SHIFT 25              /* PLWAH position field, bits 25..29. */
#define IX_PL_COUNT 0x01ffffffu     /* Fill count, PLWAH. */

GPU_INDEX_HD uint32_t
ix_partial_literal(uint32_t row)
{
    return IX_LIT | (1u << (row % IX_CHUNK_BITS));
}

GPU_INDEX_HD uint32_t
ix_chunk(uint32_t row)
{
    return row / IX_CHUNK_BITS;
}

/* The 0-fill word in front of a column's literal for chunk 'ch': the
 * number of empty chunks since the column's previous literal (chunk
 * 'prev'), or since the start for the column's first literal ('head'). */
GPU_INDEX_HD uint32_t
ix_fill(bool head, uint32_t ch, uint32_t prev)
{
    return head ? ch : ch - prev - 1;
}

GPU_INDEX_HD int
ix_ctz(uint32_t x)
{
#ifdef __CUDA_ARCH__
    return __ffs(x) - 1;
#else
    return __builtin_ctz(x);
#endif
}

/* PLWAH: if a fill precedes literal '*lit' and the literal has exactly one
 * payload bit, stores that bit's position + 1 in the fill (so 0 still
 * means "no position") and clears the literal, which is then left out.
 * The count must fit the 25 bits that remain (it always does below
 * GPU_INDEX_MAX_ROWS). */
GPU_INDEX_HD void
ix_plwah_fold(uint32_t *fill, uint32_t *lit)
{
    uint32_t p = *lit & IX_PAYLOAD;

    if (*fill != 0 && *fill <= IX_PL_COUNT && p && !(p & (p - 1))) {
        *fill |= (uint32_t) (ix_ctz(p) + 1) << IX_PL_SHIFT;
        *lit = 0;
    }
}

/* Words the pair (fill, literal) occupies once zero words are dropped. */
GPU_INDEX_HD uint32_t
ix_pair_len(uint32_t fill, uint32_t lit)
{
    return (fill != 0) + (lit != 0);
}

/* The value of attribute 'a' (enum gpu_index_attr) of record 'r': what a
 * column of a segment's index holds for the record's row.  The CUDA
 * builder computes the columns from the records on the device, the CPU
 * builder on the host; this is both. */
GPU_INDEX_HD uint32_t
ix_attr_value(const struct gpu_index_record *r, int a)
{
    bool l4 = r->parsed & GPU_INDEX_PARSED_L4;

    switch (a) {
    case GPU_INDEX_ATTR_TIME:
        return r->ts_ns / 1000000000u;
    case GPU_INDEX_ATTR_IN_PORT:
        return r->in_port;
    case GPU_INDEX_ATTR_VLAN:
        return r->vlan == GPU_INDEX_NO_VLAN ? 4096 : r->vlan & 0xfff;
    case GPU_INDEX_ATTR_IPVER:
        return r->ip_version;
    case GPU_INDEX_ATTR_PROTO:
        return r->ip_version ? r->proto : 256;
    case GPU_INDEX_ATTR_SPORT:
        return l4 ? r->sport : 65536;
    case GPU_INDEX_ATTR_DPORT:
        return l4 ? r->dport : 65536;
    case GPU_INDEX_ATTR_TCP_FLAGS:
        return l4 && r->proto == 6 ? r->tcp_flags : 256;
    default:
        if (a >= GPU_INDEX_ATTR_SRC0 && a < GPU_INDEX_N_ATTRS) {
            bool dst = a >= GPU_INDEX_ATTR_DST0;
            unsigned int i = a - (dst ? GPU_INDEX_ATTR_DST0
                                      : GPU_INDEX_ATTR_SRC0);
            unsigned int n = r->ip_version == 4 ? 4
                             : r->ip_version == 6 ? 16 : 0;

            return i < n ? (dst ? r->dst : r->src)[i] : 256;
        }
        break;
    }
    return 0;
}

#endif /* index-inline.h */
