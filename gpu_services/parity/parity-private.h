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
 * Internals shared by the parity core (parity.c) and its backends
 * (parity-cpu.c, parity-cuda.cu).  Not part of the API.
 *
 * The core owns the mathematics: GF(2^w), the Cauchy matrix, its
 * bitmatrix, and the decoding matrices, all on the host.  What a backend
 * runs is a "plan": n_out output chunks, each row of which is the XOR of
 * some rows of n_in input chunks.  Encoding is the plan (inputs: the data
 * chunks; outputs: the parity chunks; rows: the bitmatrix).  Decoding is a
 * plan built per erasure pattern (inputs: k surviving chunks; outputs:
 * every erased chunk, data or parity, in one pass as in G-CRS).  A backend
 * ("provider", like OVS's struct netdev_class) applies plans to buffers.
 */
#ifndef GPU_PARITY_PRIVATE_H
#define GPU_PARITY_PRIVATE_H 1

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpu_services/parity/gpu-parity.h"
#include "gpu_services/parity/parity-inline.h"

#ifdef __cplusplus
extern "C" {
#endif

struct parity_plan {
    enum gpu_parity_code code;
    unsigned int w;             /* GF8: 1 (one byte row a "block"). */
    unsigned int n_in, n_out;   /* Chunks. */
    /* (n_out * w) x (n_in * w) over GF(2), row-major, one byte each.
     * GF8: the n_out x n_in coefficients over GF(2^8). */
    uint8_t *bits;
    /* GF8: per coefficient [o][i], at (o * n_in + i) * 32, its split-nibble
     * table (parity-inline.h), for the CUDA kernel; and,
     * with ISA-L, its ec_init_tables() of the coefficients (whose layout
     * is ISA-L's own: GFNI machines take another). */
    uint8_t *tables;
    uint8_t *isal_tables;
    bool isal;                  /* GF8 on the CPU codes with ISA-L. */
    /* For the CPU: the input rows of output row o are
     * srcs[src_start[o] .. src_start[o + 1]). */
    uint32_t *src_start;
    uint16_t *srcs;
    /* Decode plans: the chunk ids read and written. */
    int in_ids[GPU_PARITY_MAX_CHUNKS];
    int out_ids[GPU_PARITY_MAX_CHUNKS];
    /* Decode plans are shared, read-only, by the coder's cache and the
     * batches using them: freed when the last reference goes. */
    int refcnt;
};

/* One segment of a decode submission with segments: its byte range of
 * every chunk and its own plan (a reference), NULL if it rebuilds
 * nothing. */
struct parity_seg {
    size_t offset, size;
    struct parity_plan *plan;
};

/* Decode plans the coder keeps, by erasure pattern: a call with segments
 * sees a few patterns (which packet of a group was lost) over and over. */
#define PARITY_PLAN_CACHE 32

static inline uint8_t
parity_plan_bit(const struct parity_plan *p, unsigned int out_row,
                unsigned int in_row)
{
    return p->bits[(size_t) out_row * p->n_in * p->w + in_row];
}

struct gpu_parity_provider {
    const char *name;
    enum gpu_parity_backend type;

    int (*init)(struct gpu_parity *);
    void (*uninit)(struct gpu_parity *);
    int (*batch_init)(struct gpu_parity_batch *);
    void (*batch_uninit)(struct gpu_parity_batch *);
    /* Starts applying the batch's current plan to its current buffers
     * (see struct gpu_parity_batch); 'again' asks for a kernel-only re-run
     * on the data already on the device. */
    int (*submit)(struct gpu_parity_batch *, struct gpu_stream *,
                  bool again);
    int (*poll)(struct gpu_parity_batch *);
    int (*wait)(struct gpu_parity_batch *);
};

struct gpu_parity {
    struct gpu_parity_config cfg;   /* backend: CPU or CUDA. */
    bool isal;                      /* GF8 on the CPU with ISA-L. */
    char why[160];
    const struct gpu_parity_provider *prov;
    void *pdata;

    int *matrix;                /* m x k over GF(2^w). */
    int *bitmatrix;             /* (m*w) x (k*w). */
    struct parity_plan encode;

    /* Recent decode plans, by erasure pattern (and chunks wanted);
     * replaced round robin. */
    pthread_mutex_t cache_mutex;
    uint8_t cache_key[PARITY_PLAN_CACHE][GPU_PARITY_MAX_CHUNKS];
    struct parity_plan *cache_plan[PARITY_PLAN_CACHE];
    unsigned int cache_next;

    /* Batches for the synchronous calls, reused. */
    pthread_mutex_t pool_mutex;
    struct gpu_parity_batch *pool;

    /* Updated atomically. */
    uint64_t n_encodes, n_decodes, n_bytes, n_fallbacks, n_refused;
    uint64_t kernel_ns;
    uint64_t n_runtime_calls;   /* CUDA: runtime calls of submissions. */
    uint64_t n_device_launches; /* CUDA: submissions the device launched. */
};

struct gpu_parity_batch {
    struct gpu_parity *coder;
    size_t max_size;
    struct gpu_parity_batch *pool_next;
    void *pdata;

    /* The current submission. */
    uint64_t n_runtime_calls;   /* CUDA runtime calls it made. */
    struct parity_plan *plan;   /* &coder->encode, or 'dplan'. */
    struct parity_plan *dplan;  /* Decode plan referenced, or NULL. */
    /* A decode with segments (n_segs > 0): each segment its own plan,
     * 'plan' and 'dplan' NULL; 'in' and 'out' then hold every chunk by
     * id, data then parity. */
    struct parity_seg *segs;
    size_t n_segs, segs_cap;
    const uint8_t *in[GPU_PARITY_MAX_CHUNKS];
    uint8_t *out[GPU_PARITY_MAX_CHUNKS];
    size_t size;
    /* An encode of packet groups (gpu_parity_pkt_encode_submit()): the
     * data chunks' padding is the backend's to write, group g's chunks
     * are group_sizes[g] bytes side by side, and its parity goes to
     * dst[g * m .. g * m + m) where 'dst' is not NULL; 'dst_in_place'
     * if the device wrote them there. */
    bool pkt;
    size_t *group_sizes;
    size_t n_groups, groups_cap;
    uint8_t **dst;              /* NULL, or room for groups_cap * m. */
    bool has_dst;
    bool dst_in_place;
    bool busy;                  /* Submitted, not yet waited for. */
    bool decode;
    bool counted;               /* Stats taken for this submission. */
};

/* Applies 'plan' on the CPU: out[o] from in[0 .. n_in), 'size' bytes each.
 * Used by the CPU backend and by the CUDA backend's fallback. */
void gpu_parity_cpu_apply(const struct parity_plan *, unsigned int packetsize,
                          const uint8_t *const *in, uint8_t *const *out,
                          size_t size);

/* The GF8 part of gpu_parity_cpu_apply(). */
void gpu_parity_cpu_apply_gf8(const struct parity_plan *,
                              const uint8_t *const *in, uint8_t *const *out,
                              size_t size);

/* Codes the batch's current submission on the CPU, whatever its kind
 * (one plan, or segments): the CPU backend, and the CUDA backend's
 * fallback. */
void gpu_parity_cpu_apply_batch(const struct gpu_parity_batch *);

/* For a packet-group encode: writes the zeros after each packet in the
 * host data chunks, and copies each group's parity from the host parity
 * chunks to its destinations.  The CPU backend and the CUDA backend's
 * fallback do both; the CUDA backend copies where the device could not
 * write the destinations itself. */
void gpu_parity_pkt_pad_host(const struct gpu_parity_batch *);
void gpu_parity_pkt_deliver_host(const struct gpu_parity_batch *);

/* Adds a finished submission to the coder's stats. */
void gpu_parity_count(struct gpu_parity_batch *, bool fallback);

extern const struct gpu_parity_provider gpu_parity_cpu_provider;
#ifdef HAVE_CUDA
extern const struct gpu_parity_provider gpu_parity_cuda_provider;
/* Nonzero if the CUDA backend has a usable device; 'why' says otherwise. */
int gpu_parity_cuda_probe(int device, char *why, size_t why_size);
#endif

/* ---- GF(2^w) and the Cauchy matrix (parity.c), for tests too. ---- */

unsigned int gpu_parity_gf_mul(unsigned int a, unsigned int b,
                               unsigned int w);
unsigned int gpu_parity_gf_div(unsigned int a, unsigned int b,
                               unsigned int w);
/* Fills 'tbl' (32 bytes) with the split-nibble table of 'c' over
 * GF(2^8). */
void gpu_parity_gf8_table(uint8_t c, uint8_t *tbl);
/* Ones in the w x w bitmatrix of 'e' (Jerasure's cauchy_n_ones). */
unsigned int gpu_parity_n_ones(unsigned int e, unsigned int w);

#ifdef __cplusplus
}
#endif

#endif /* parity-private.h */
