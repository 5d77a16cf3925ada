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
 * CUDA backend of the parity coder (sm_90).
 *
 * The kernel applies a plan (encode or decode alike: output rows as XORs
 * of input rows over GF(2)) to chunks in device memory.  After G-CRS,
 * with two changes that suit a GPU with 3 TB/s of HBM:
 *
 *   - One thread per column (parity-inline.h): a thread reads the w words
 *     of its column of every input chunk, once, straight from global
 *     memory with 16-byte loads (8 or 4 when the rows do not fit in
 *     registers at 16), and writes the words of its column of every output
 *     row: all m parity chunks, all w rows.  G-CRS gives a thread one row
 *     of a column, so w threads need the same input words and it stages
 *     them through shared memory to read them once from global memory;
 *     here no two threads read the same word, so the same "read once"
 *     holds with no shared memory, barriers or bank conflicts, and
 *     consecutive threads still read consecutive words (coalesced).
 *
 *   - The bitmatrix, one 64-bit word per input row whose bit o says
 *     whether output row o takes it (G-CRS's column packing), travels in
 *     the launch's parameters, which live in the constant bank: every
 *     thread reads the same word at the same time, a broadcast, and two
 *     coders with different matrices on different streams cannot
 *     overwrite each other's, as they could in a __constant__ symbol.
 *
 * The XOR is branch-free: acc ^= word & mask, the mask all ones or all
 * zeros from the bit, one LOP3 per 32-bit lane, unrolled over the output
 * rows (a template parameter) so the accumulators stay in registers.
 *
 * More than 256 input rows (k * w) are done in several launches that
 * accumulate into the outputs; more output rows than fit in registers, in
 * several launches that each read the inputs again.
 *
 * The GF8 code (byte symbols over GF(2^8)) has a kernel of its own,
 * gf8_kernel: one thread per 16-byte (or 8-byte) column of the chunks, as
 * above, multiplying each input word by every output's coefficient with
 * the split-nibble tables of parity-inline.h, which a block first copies
 * into shared memory (32 bytes a coefficient: a warp's lookups of one
 * table fall in 8 banks and are broadcast).  The tables are copied to the
 * device with each submission, ahead of the slices; a decode with
 * segments stages every distinct plan's in one buffer and copies them in
 * at once.  The kernel reads and writes chunks through slot maps, so a
 * segment's plan names its chunks by id as the XOR kernel's rows do.
 * Outputs are done up
 * to GF8_MAX_OUT a launch, fewer where k inputs' tables would not fit in
 * GF8_SHARED bytes.
 *
 * End to end, a submission is cut into slices of whole blocks; slice s
 * runs on internal stream s % N_STREAMS (copy in, kernel, copy out), so
 * one slice's copy in overlaps another's copy out and kernel, and the
 * caller's stream waits for them all.  A submission too small to slice
 * (every packet coder's) runs on the caller's stream alone, and chunks at
 * one host pitch go in and out in one 2D copy each: every runtime call
 * costs the calling thread microseconds (docs/PARITY-NOTES.md).
 */
#include <config.h>

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_runtime/gpu-graph.cuh"
#include "gpu_services/parity/parity-private.h"

#define THREADS 256
#define MAX_IN_ROWS 256
#define MAX_OUT_ROWS 64
#define N_STREAMS 4
#define MAX_SLICES 16
/* Bytes per chunk below which a submission is not sliced. */
#define SLICE_BYTES (1u << 20)

#define CK(CALL) gpu_cuda_status((CALL), #CALL)

#define GF8_MAX_OUT 8
#define GF8_SHARED (32 * 1024)

struct kargs {
    const uint8_t *in_row[MAX_IN_ROWS];     /* Row 0 of block 0. */
    uint64_t mask[MAX_IN_ROWS];             /* Bit o: output row o. */
    uint8_t *out_row[MAX_OUT_ROWS];
    uint64_t col_begin, n_cols;
    uint64_t block_bytes;                   /* w * packetsize. */
    uint32_t units_per_packet;
    uint32_t n_in_rows, n_out_rows;
    uint32_t accumulate;                    /* XOR into the outputs. */
};

/* ---- The kernel. ----
 *
 * Its body (xor_column) is also compiled for the host, so that the tests
 * can run this backend's launch logic and kernel on a machine without a
 * GPU (GPU_PARITY_CUDA_EMULATE, below). */

#define HD __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
#define UNROLL _Pragma("unroll")
#else
#define UNROLL               /* The host build only emulates. */
#endif

HD void
zero(uint4 &v)
{
    v = make_uint4(0, 0, 0, 0);
}

HD void
zero(uint2 &v)
{
    v = make_uint2(0, 0);
}

HD void
zero(uint32_t &v)
{
    v = 0;
}

HD void
step(uint4 &acc, const uint4 &v, uint32_t m)
{
    acc.x = gpu_parity_step32(acc.x, v.x, m);
    acc.y = gpu_parity_step32(acc.y, v.y, m);
    acc.z = gpu_parity_step32(acc.z, v.z, m);
    acc.w = gpu_parity_step32(acc.w, v.w, m);
}

HD void
step(uint2 &acc, const uint2 &v, uint32_t m)
{
    acc.x = gpu_parity_step32(acc.x, v.x, m);
    acc.y = gpu_parity_step32(acc.y, v.y, m);
}

HD void
step(uint32_t &acc, const uint32_t &v, uint32_t m)
{
    acc = gpu_parity_step32(acc, v, m);
}

/* Every input word is read once: stream it past the caches. */
template <typename V>
HD V
load(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    return __ldcs(reinterpret_cast<const V *>(p));
#else
    V v;
    memcpy(&v, p, sizeof v);
    return v;
#endif
}

template <typename V>
HD void
store(uint8_t *p, const V &v)
{
#ifdef __CUDA_ARCH__
    __stcs(reinterpret_cast<V *>(p), v);
#else
    memcpy(p, &v, sizeof v);
#endif
}

template <int R>
HD uint32_t
row_mask(uint64_t colmask, int o)
{
    /* 32-bit shifts where the rows fit, which is the common case. */
    return R <= 32 ? gpu_parity_mask32((uint32_t) colmask, o)
                   : gpu_parity_mask64(colmask, o);
}

template <int R, typename V>
HD void
row_steps(V (&acc)[R], const V &v, uint64_t colmask)
{
UNROLL
    for (int o = 0; o < R; o++) {
        step(acc[o], v, row_mask<R>(colmask, o));
    }
}

/* Computes every output row's word of column 'col' (of this launch). */
template <int R, typename V>
HD void
xor_column(const struct kargs &a, uint64_t col)
{
    const uint64_t off = gpu_parity_col_offset(a.col_begin + col,
                                               a.units_per_packet,
                                               sizeof(V), a.block_bytes);
    V acc[R];

UNROLL
    for (int o = 0; o < R; o++) {
        if (a.accumulate && o < (int) a.n_out_rows) {
            acc[o] = load<V>(a.out_row[o] + off);
        } else {
            zero(acc[o]);
        }
    }

    /* Four rows' loads in flight before their XORs. */
    uint32_t c = 0;
    for (; c + 4 <= a.n_in_rows; c += 4) {
        V v0 = load<V>(a.in_row[c] + off);
        V v1 = load<V>(a.in_row[c + 1] + off);
        V v2 = load<V>(a.in_row[c + 2] + off);
        V v3 = load<V>(a.in_row[c + 3] + off);

        row_steps<R, V>(acc, v0, a.mask[c]);
        row_steps<R, V>(acc, v1, a.mask[c + 1]);
        row_steps<R, V>(acc, v2, a.mask[c + 2]);
        row_steps<R, V>(acc, v3, a.mask[c + 3]);
    }
    for (; c < a.n_in_rows; c++) {
        V v = load<V>(a.in_row[c] + off);

        row_steps<R, V>(acc, v, a.mask[c]);
    }

UNROLL
    for (int o = 0; o < R; o++) {
        if (o < (int) a.n_out_rows) {
            store<V>(a.out_row[o] + off, acc[o]);
        }
    }
}

template <int R, typename V>
__global__ void __launch_bounds__(THREADS)
xor_kernel(const __grid_constant__ struct kargs a)
{
    uint64_t col = (uint64_t) blockIdx.x * THREADS + threadIdx.x;

    if (col < a.n_cols) {
        xor_column<R, V>(a, col);
    }
}

/* ---- The GF8 code's kernel. ---- */

struct gf8_args {
    /* Input i at base + in_slot[i] * stride, output o (of this launch)
     * at base + out_slot[o] * stride: a decode with segments reads and
     * writes chunks by id. */
    uint8_t *base;
    const uint8_t *tables;      /* This launch's: [o][i], 32 bytes. */
    uint64_t stride;
    uint64_t col_begin, n_cols; /* In words of V. */
    uint32_t n_in, n_out;
    uint8_t in_slot[GPU_PARITY_MAX_CHUNKS];
    uint8_t out_slot[GF8_MAX_OUT];
};

HD void
gf8_step(uint4 &acc, const uint4 &v, const uint8_t *tbl)
{
    acc.x = gpu_parity_gf8_step32(acc.x, v.x, tbl);
    acc.y = gpu_parity_gf8_step32(acc.y, v.y, tbl);
    acc.z = gpu_parity_gf8_step32(acc.z, v.z, tbl);
    acc.w = gpu_parity_gf8_step32(acc.w, v.w, tbl);
}

HD void
gf8_step(uint2 &acc, const uint2 &v, const uint8_t *tbl)
{
    acc.x = gpu_parity_gf8_step32(acc.x, v.x, tbl);
    acc.y = gpu_parity_gf8_step32(acc.y, v.y, tbl);
}

/* Every output's word of column 'col' (of this launch), with the tables
 * at 'tables' (shared memory on the device). */
template <int R, typename V>
HD void
gf8_column(const struct gf8_args &a, const uint8_t *tables, uint64_t col)
{
    const uint64_t off = (a.col_begin + col) * sizeof(V);
    V acc[R];

UNROLL
    for (int o = 0; o < R; o++) {
        zero(acc[o]);
    }
    for (uint32_t i = 0; i < a.n_in; i++) {
        V v = load<V>(a.base + a.stride * a.in_slot[i] + off);

UNROLL
        for (int o = 0; o < R; o++) {
            if (o < (int) a.n_out) {
                gf8_step(acc[o], v, tables + ((size_t) o * a.n_in + i) * 32);
            }
        }
    }
UNROLL
    for (int o = 0; o < R; o++) {
        if (o < (int) a.n_out) {
            store<V>(a.base + a.stride * a.out_slot[o] + off, acc[o]);
        }
    }
}

template <int R, typename V>
__global__ void __launch_bounds__(THREADS)
gf8_kernel(const __grid_constant__ struct gf8_args a)
{
    extern __shared__ uint32_t gf8_shared[];
    const uint32_t *src = (const uint32_t *) a.tables;
    uint32_t n_words = a.n_out * a.n_in * 32 / 4;
    uint64_t col = (uint64_t) blockIdx.x * THREADS + threadIdx.x;

    for (uint32_t x = threadIdx.x; x < n_words; x += THREADS) {
        gf8_shared[x] = src[x];
    }
    __syncthreads();
    if (col < a.n_cols) {
        gf8_column<R, V>(a, (const uint8_t *) gf8_shared, col);
    }
}

template <int R, typename V>
static cudaError_t
gf8_launch1(const struct gf8_args *a, cudaStream_t st, bool emulate_)
{
    unsigned int blocks = (a->n_cols + THREADS - 1) / THREADS;
    size_t shared = (size_t) a->n_out * a->n_in * 32;

    if (emulate_) {
        for (uint64_t col = 0; col < a->n_cols; col++) {
            gf8_column<R, V>(*a, a->tables, col);
        }
        return cudaSuccess;
    }
    gf8_kernel<R, V><<<blocks, THREADS, shared, st>>>(*a);
    return cudaGetLastError();
}

template <typename V>
static cudaError_t
gf8_launch(const struct gf8_args *a, cudaStream_t st, bool emulate_)
{
    switch (a->n_out) {
    case 1: return gf8_launch1<1, V>(a, st, emulate_);
    case 2: return gf8_launch1<2, V>(a, st, emulate_);
    case 3: case 4: return gf8_launch1<4, V>(a, st, emulate_);
    default: return gf8_launch1<GF8_MAX_OUT, V>(a, st, emulate_);
    }
}

/* ---- Launching. ---- */

/* Set once by the probe: run the kernels on the host (tests only). */
static bool emulate;
/* Set once by the probe from GPU_PARITY_CUDA_WORD (16, 8 or 4): the word
 * size to use where it is legal, for tuning runs; 0 chooses. */
static int forced_unit;

template <int R, typename V>
static cudaError_t
launch1(const struct kargs *a, cudaStream_t st)
{
    unsigned int blocks = (a->n_cols + THREADS - 1) / THREADS;

    if (emulate) {
        for (uint64_t col = 0; col < a->n_cols; col++) {
            xor_column<R, V>(*a, col);
        }
        return cudaSuccess;
    }
    xor_kernel<R, V><<<blocks, THREADS, 0, st>>>(*a);
    return cudaGetLastError();
}

/* The row counts instantiated for each word size; a launch rounds its
 * rows up to the next one (the extra rows have no bits and no store). */
#define ROWS_16(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(10) X(12) \
                   X(14) X(16)
#define ROWS_8(X) ROWS_16(X) X(20) X(24) X(28) X(32)
#define ROWS_4(X) X(8) X(16) X(24) X(32) X(40) X(48) X(56) X(64)

static const int rows_16[] = {
#define X(R) R,
    ROWS_16(X)
#undef X
};
static const int rows_8[] = {
#define X(R) R,
    ROWS_8(X)
#undef X
};
static const int rows_4[] = {
#define X(R) R,
    ROWS_4(X)
#undef X
};

static int
round_rows(const int *set, size_t n, int rows)
{
    for (size_t i = 0; i < n; i++) {
        if (set[i] >= rows) {
            return set[i];
        }
    }
    return -1;
}

static cudaError_t
launch(int unit, int rows, const struct kargs *a, cudaStream_t st)
{
    int r;

    switch (unit) {
    case 16:
        r = round_rows(rows_16, sizeof rows_16 / sizeof *rows_16, rows);
        switch (r) {
#define X(R) case R: return launch1<R, uint4>(a, st);
        ROWS_16(X)
#undef X
        }
        break;
    case 8:
        r = round_rows(rows_8, sizeof rows_8 / sizeof *rows_8, rows);
        switch (r) {
#define X(R) case R: return launch1<R, uint2>(a, st);
        ROWS_8(X)
#undef X
        }
        break;
    case 4:
        r = round_rows(rows_4, sizeof rows_4 / sizeof *rows_4, rows);
        switch (r) {
#define X(R) case R: return launch1<R, uint32_t>(a, st);
        ROWS_4(X)
#undef X
        }
        break;
    }
    return cudaErrorInvalidValue;
}

/* The word size for a plan: 16 bytes when every output row fits in 16
 * accumulators of 16 bytes, else 8, else 4 (several launches of up to 64
 * rows).  64 accumulator registers keep enough threads resident. */
static int
unit_for(const struct parity_plan *p, unsigned int packetsize)
{
    unsigned int rows = p->n_out * p->w;

    /* A tuning experiment may ask for a word size (benchmark only). */
    if (forced_unit == 16 && packetsize % 16 == 0 && rows <= 16) {
        return 16;
    } else if (forced_unit == 8 && rows <= 32) {
        return 8;
    } else if (forced_unit == 4) {
        return 4;
    }
    if (packetsize % 16 == 0 && rows <= 16) {
        return 16;
    }
    return rows <= 32 ? 8 : 4;
}

/* ---- Coder and batches. ---- */

/* Bytes of a block, the unit a submission's size is a multiple of: w
 * packets, or for the GF8 code (bytes coded alone) one. */
static size_t
block_bytes(const struct gpu_parity *pc)
{
    return (size_t) (pc->cfg.code == GPU_PARITY_CODE_GF8 ? 1 : pc->cfg.w)
           * pc->cfg.packetsize;
}

struct cuda_batch {
    uint8_t *d_base;            /* (k + m) chunks, 'stride' bytes apart. */
    uint8_t *d_tables;          /* GF8 code: a plan's tables... */
    /* ...or with segments, every distinct plan's, staged in 'h_tables'
     * and copied in at once; segment s's at d_tables + seg_table[s].
     * Both buffers 'tables_cap' bytes. */
    uint8_t *h_tables;
    size_t tables_cap;
    size_t *seg_table;
    size_t seg_table_cap;
    size_t stride;
    cudaStream_t streams[N_STREAMS];
    cudaEvent_t start, slice_done[N_STREAMS], done;
    cudaEvent_t prof[2];        /* Around a profiled re-run's kernels. */
    bool profiled;              /* This submission records prof[]. */
    bool fallback;              /* Code on the CPU at wait time. */
    /* GF8: d_tables hold the encode plan's tables (copied once, not with
     * every submission). */
    bool tables_encode;
    /* Packet groups: their offsets and sizes, then their destinations,
     * in pinned memory the kernels read in place ('pkt_cap' groups);
     * and the data chunks last found readable by the device in place. */
    struct pkt_group *pkt_table;
    size_t pkt_cap;
    const uint8_t *pkt_readable[GPU_PARITY_MAX_CHUNKS];
    /* The packet encode as one graph (take in, code, deliver), built at
     * the first submission that can use it; its arguments in pinned
     * memory, which its first node copies to the device; the GF8 code's
     * tables of its own (a decode may move d_tables). */
    struct gpu_graph pkt_graph;
    struct pkt_graph_args *pkt_h_args, *pkt_d_args;
    uint8_t *pkt_tables;
    bool pkt_graph_tried;
    int error;
    uint64_t n_calls;           /* Runtime calls of this submission. */
    cudaStream_t user;          /* The caller's stream it was queued on. */
};

static struct cuda_batch *
cb(struct gpu_parity_batch *b)
{
    return (struct cuda_batch *) b->pdata;
}

extern "C" int
gpu_parity_cuda_probe(int device, char *why, size_t why_size)
{
    const char *reason = NULL;
    const char *word = getenv("GPU_PARITY_CUDA_WORD");
    int n = gpu_device_count(&reason);
    struct cudaFuncAttributes attr;
    cudaError_t e;

    forced_unit = word ? atoi(word) : 0;
    if (!n && getenv("GPU_PARITY_CUDA_EMULATE")
        && strcmp(getenv("GPU_PARITY_CUDA_EMULATE"), "0")) {
        /* Tests on a machine without a GPU: device memory is host memory,
         * copies are memcpy and kernels run their body on the host, so
         * everything but the CUDA runtime itself is exercised. */
        emulate = true;
        return 1;
    }
    if (device < 0 || device >= n) {
        if (why) {
            snprintf(why, why_size, "%s", n ? "no such CUDA device"
                                            : reason);
        }
        return 0;
    }
    /* A device of another architecture has no image of our kernels. */
    e = cudaSetDevice(device);
    if (e == cudaSuccess) {
        e = cudaFuncGetAttributes(&attr, xor_kernel<4, uint4>);
    }
    if (e != cudaSuccess) {
        if (why) {
            snprintf(why, why_size, "CUDA device %d unusable: %s", device,
                     cudaGetErrorString(e));
        }
        cudaGetLastError();
        return 0;
    }
    return 1;
}

static void
cuda_batch_uninit(struct gpu_parity_batch *b)
{
    struct cuda_batch *c = cb(b);
    int i;

    if (!c) {
        return;
    }
    free(c->h_tables);
    free(c->seg_table);
    gpu_host_free(c->pkt_table);
    gpu_host_free(c->pkt_h_args);
    if (emulate) {
        free(c->d_base);
        free(c->d_tables);
        free(c);
        b->pdata = NULL;
        return;
    }
    cudaSetDevice(b->coder->cfg.device);
    for (i = 0; i < N_STREAMS; i++) {
        if (c->streams[i]) {
            cudaStreamSynchronize(c->streams[i]);
            cudaStreamDestroy(c->streams[i]);
        }
        if (c->slice_done[i]) {
            cudaEventDestroy(c->slice_done[i]);
        }
    }
    if (c->start) {
        cudaEventDestroy(c->start);
    }
    for (i = 0; i < 2; i++) {
        if (c->prof[i]) {
            cudaEventDestroy(c->prof[i]);
        }
    }
    if (c->done) {
        cudaEventDestroy(c->done);
    }
    gpu_graph_destroy(&c->pkt_graph);
    cudaFree(c->pkt_d_args);
    cudaFree(c->pkt_tables);
    cudaFree(c->d_base);
    cudaFree(c->d_tables);
    cudaGetLastError();
    free(c);
    b->pdata = NULL;
}

static int
cuda_batch_init(struct gpu_parity_batch *b)
{
    const struct gpu_parity_config *cfg = &b->coder->cfg;
    struct cuda_batch *c = (struct cuda_batch *) calloc(1, sizeof *c);
    int error, i;

    if (!c) {
        return GPU_ERR_NOMEM;
    }
    b->pdata = c;
    c->stride = (b->max_size + 255) / 256 * 256;
    /* A decode plan has at most m outputs of k inputs. */
    size_t tables = (cfg->code == GPU_PARITY_CODE_GF8
                     ? (size_t) cfg->k * cfg->m * 32 : 0);
    c->tables_cap = tables;
    if (emulate) {
        c->d_base = (uint8_t *) malloc(c->stride * (cfg->k + cfg->m));
        c->d_tables = tables ? (uint8_t *) malloc(tables) : NULL;
        return c->d_base && (!tables || c->d_tables)
               ? GPU_OK : GPU_ERR_DEVICE_NOMEM;
    }
    error = CK(cudaSetDevice(cfg->device));
    if (!error) {
        error = CK(cudaMalloc((void **) &c->d_base,
                              c->stride * (cfg->k + cfg->m)));
    }
    if (!error && tables) {
        error = CK(cudaMalloc((void **) &c->d_tables, tables));
    }
    for (i = 0; !error && i < N_STREAMS; i++) {
        error = CK(cudaStreamCreateWithFlags(&c->streams[i],
                                             cudaStreamNonBlocking));
        if (!error) {
            error = CK(cudaEventCreateWithFlags(&c->slice_done[i],
                                                cudaEventDisableTiming));
        }
    }
    if (!error) {
        error = CK(cudaEventCreateWithFlags(&c->start,
                                            cudaEventDisableTiming));
    }
    if (!error) {
        error = CK(cudaEventCreateWithFlags(&c->done,
                                            cudaEventDisableTiming));
    }
    for (i = 0; !error && i < 2; i++) {
        error = CK(cudaEventCreate(&c->prof[i]));
    }
    if (error) {
        cuda_batch_uninit(b);
    }
    return error;
}

/* apply_plan() for the GF8 code, whose blocks are packets, with the
 * plan's tables at 'tables' on the device. */
static cudaError_t
apply_gf8(struct gpu_parity_batch *b, const struct parity_plan *p,
          const int *in_slot, const int *out_slot, const uint8_t *tables,
          size_t b0, size_t b1, cudaStream_t st)
{
    struct cuda_batch *c = cb(b);
    unsigned int ps = b->coder->cfg.packetsize;
    unsigned int unit = ps % 16 ? 8 : 16;
    unsigned int per = GF8_SHARED / (32 * p->n_in);
    cudaError_t e = cudaSuccess;
    struct gf8_args a;

    per = per < 1 ? 1 : per > GF8_MAX_OUT ? GF8_MAX_OUT : per;
    for (unsigned int o0 = 0; o0 < p->n_out && e == cudaSuccess;
         o0 += per) {
        memset(&a, 0, sizeof a);
        a.base = c->d_base;
        a.tables = tables + (size_t) o0 * p->n_in * 32;
        a.stride = c->stride;
        a.col_begin = (uint64_t) b0 * ps / unit;
        a.n_cols = (uint64_t) (b1 - b0) * ps / unit;
        a.n_in = p->n_in;
        a.n_out = p->n_out - o0 < per ? p->n_out - o0 : per;
        for (unsigned int i = 0; i < p->n_in; i++) {
            a.in_slot[i] = in_slot[i];
        }
        for (unsigned int o = 0; o < a.n_out; o++) {
            a.out_slot[o] = out_slot[o0 + o];
        }
        e = (unit == 16 ? gf8_launch<uint4>(&a, st, emulate)
             : gf8_launch<uint2>(&a, st, emulate));
    }
    return e;
}

/* Launches the kernels that apply plan 'p' to the columns of blocks [b0,
 * b1) on 'st': its input i in device chunk slot in_slot[i], its output o
 * in slot out_slot[o]; a GF8 plan's tables at 'tables' on the device. */
static cudaError_t
apply_plan(struct gpu_parity_batch *b, const struct parity_plan *p,
           const int *in_slot, const int *out_slot, const uint8_t *tables,
           size_t b0, size_t b1, cudaStream_t st)
{
    if (p->code == GPU_PARITY_CODE_GF8) {
        return apply_gf8(b, p, in_slot, out_slot, tables, b0, b1, st);
    }

    struct cuda_batch *c = cb(b);
    unsigned int ps = b->coder->cfg.packetsize, w = p->w;
    unsigned int unit = unit_for(p, ps);
    unsigned int out_rows = p->n_out * w, in_rows = p->n_in * w;
    unsigned int pass_rows = unit == 16 ? 16 : unit == 8 ? 32 : 64;
    unsigned int group_chunks = MAX_IN_ROWS / w;
    struct kargs *a = (struct kargs *) malloc(sizeof *a);
    cudaError_t e = cudaSuccess;

    if (!a) {
        return cudaErrorMemoryAllocation;
    }
    for (unsigned int o0 = 0; o0 < out_rows && e == cudaSuccess;
         o0 += pass_rows) {
        unsigned int nr = out_rows - o0 < pass_rows ? out_rows - o0
                                                    : pass_rows;

        for (unsigned int i0 = 0; i0 < p->n_in && e == cudaSuccess;
             i0 += group_chunks) {
            unsigned int ni = p->n_in - i0 < group_chunks ? p->n_in - i0
                                                          : group_chunks;

            memset(a, 0, sizeof *a);
            for (unsigned int o = 0; o < nr; o++) {
                unsigned int row = o0 + o;

                a->out_row[o] = c->d_base + c->stride * out_slot[row / w]
                                + (size_t) (row % w) * ps;
            }
            for (unsigned int r = 0; r < ni * w; r++) {
                unsigned int in_row = i0 * w + r;
                uint64_t mask = 0;

                a->in_row[r] = c->d_base + c->stride * in_slot[in_row / w]
                               + (size_t) (in_row % w) * ps;
                for (unsigned int o = 0; o < nr; o++) {
                    if (p->bits[(size_t) (o0 + o) * in_rows + in_row]) {
                        mask |= 1ull << o;
                    }
                }
                a->mask[r] = mask;
            }
            a->col_begin = (uint64_t) b0 * (ps / unit);
            a->n_cols = (uint64_t) (b1 - b0) * (ps / unit);
            a->block_bytes = (uint64_t) w * ps;
            a->units_per_packet = ps / unit;
            a->n_in_rows = ni * w;
            a->n_out_rows = nr;
            a->accumulate = i0 > 0;
            e = launch(unit, nr, a, st);
            c->n_calls++;
        }
    }
    free(a);
    return e;
}

/* The batch's one plan: inputs in slots 0 .. n_in-1, outputs after. */
static cudaError_t
apply_blocks(struct gpu_parity_batch *b, size_t b0, size_t b1,
             cudaStream_t st)
{
    const struct parity_plan *p = b->plan;
    int in_slot[GPU_PARITY_MAX_CHUNKS], out_slot[GPU_PARITY_MAX_CHUNKS];

    for (unsigned int i = 0; i < p->n_in; i++) {
        in_slot[i] = i;
    }
    for (unsigned int o = 0; o < p->n_out; o++) {
        out_slot[o] = p->n_in + o;
    }
    return apply_plan(b, p, in_slot, out_slot, cb(b)->d_tables, b0, b1,
                      st);
}

/* A decode with segments: chunk id i in slot i.  Consecutive segments
 * with the same plan (the cache hands out one per pattern) are one run
 * of launches; each run its own matrix in the launch parameters. */
static cudaError_t
apply_segments(struct gpu_parity_batch *b, cudaStream_t st)
{
    struct cuda_batch *c = cb(b);
    size_t block = block_bytes(b->coder);
    cudaError_t e = cudaSuccess;

    for (size_t s = 0; s < b->n_segs && e == cudaSuccess; ) {
        const struct parity_plan *p = b->segs[s].plan;
        size_t b0 = b->segs[s].offset / block, b1;
        const uint8_t *tables;

        if (!p) {
            s++;
            continue;
        }
        tables = (p->code == GPU_PARITY_CODE_GF8
                  ? c->d_tables + c->seg_table[s] : NULL);
        b1 = (b->segs[s].offset + b->segs[s].size) / block;
        for (s++; s < b->n_segs && b->segs[s].plan == p
                  && b->segs[s].offset / block == b1; s++) {
            b1 = (b->segs[s].offset + b->segs[s].size) / block;
        }
        e = apply_plan(b, p, p->in_ids, p->out_ids, tables, b0, b1, st);
    }
    return e;
}

/* Each runtime call of a submission is counted in c->n_calls (a kernel
 * launch counts one, its cudaGetLastError none: it does not enter the
 * driver), so that gpu_parity_stats can say what a call costs the
 * calling thread in calls; emulation counts the same calls. */

/* The runtime calls of a submission, or their host equivalents when
 * emulating. */
static cudaError_t
xcopy(struct cuda_batch *c, void *dst, const void *src, size_t n,
      cudaMemcpyKind kind, cudaStream_t st)
{
    c->n_calls++;
    if (emulate) {
        memcpy(dst, src, n);
        return cudaSuccess;
    }
    return cudaMemcpyAsync(dst, src, n, kind, st);
}

/* 'rows' rows of 'width' bytes, 'spitch' apart at 'src' and 'dpitch'
 * apart at 'dst', in one call. */
static cudaError_t
xcopy2d(struct cuda_batch *c, void *dst, size_t dpitch, const void *src,
        size_t spitch, size_t width, size_t rows, cudaMemcpyKind kind,
        cudaStream_t st)
{
    c->n_calls++;
    if (emulate) {
        for (size_t r = 0; r < rows; r++) {
            memcpy((uint8_t *) dst + r * dpitch,
                   (const uint8_t *) src + r * spitch, width);
        }
        return cudaSuccess;
    }
    return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind,
                             st);
}

/* The pitch at which host chunks ptr[first .. first+n) lie, if they lie
 * at one constant pitch of at least 'width' bytes (n >= 2), else 0. */
static size_t
host_pitch(const uint8_t *const *ptr, unsigned int n, size_t width)
{
    uintptr_t base = (uintptr_t) ptr[0];
    size_t pitch;

    if (n < 2 || (uintptr_t) ptr[1] <= base) {
        return 0;
    }
    pitch = (uintptr_t) ptr[1] - base;
    if (pitch < width) {
        return 0;
    }
    for (unsigned int i = 2; i < n; i++) {
        if ((uintptr_t) ptr[i] != base + (uintptr_t) i * pitch) {
            return 0;
        }
    }
    return pitch;
}

/* Copies 'len' bytes at offset 'off' of host chunks ptr[0 .. n) to (or,
 * 'to_host', from) device slots slot0 .. slot0+n-1: one 2D copy when
 * the host chunks lie at a constant pitch (the device slots always do),
 * else one copy per chunk. */
static cudaError_t
copy_chunks(struct cuda_batch *c, const uint8_t *const *ptr, unsigned int n,
            unsigned int slot0, size_t off, size_t len, bool to_host,
            cudaStream_t st)
{
    size_t pitch = host_pitch(ptr, n, len);
    uint8_t *dev = c->d_base + c->stride * slot0 + off;
    cudaError_t e = cudaSuccess;

    if (pitch) {
        return to_host
               ? xcopy2d(c, (uint8_t *) ptr[0] + off, pitch, dev, c->stride,
                         len, n, cudaMemcpyDeviceToHost, st)
               : xcopy2d(c, dev, c->stride, ptr[0] + off, pitch, len, n,
                         cudaMemcpyHostToDevice, st);
    }
    for (unsigned int i = 0; e == cudaSuccess && i < n; i++) {
        e = to_host ? xcopy(c, (uint8_t *) ptr[i] + off, dev + c->stride * i,
                            len, cudaMemcpyDeviceToHost, st)
                    : xcopy(c, dev + c->stride * i, ptr[i] + off, len,
                            cudaMemcpyHostToDevice, st);
    }
    return e;
}

static cudaError_t
xrecord(struct cuda_batch *c, cudaEvent_t e, cudaStream_t st)
{
    c->n_calls++;
    return emulate ? cudaSuccess : cudaEventRecord(e, st);
}

static cudaError_t
xwait_event(struct cuda_batch *c, cudaStream_t st, cudaEvent_t e)
{
    c->n_calls++;
    return emulate ? cudaSuccess : cudaStreamWaitEvent(st, e, 0);
}

/* GF8 code, a decode with segments: stages every distinct plan's tables
 * in 'h_tables', growing both table buffers as needed, and notes where
 * each segment's lie; returns their bytes in '*total'. */
static int
stage_gf8_tables(struct gpu_parity_batch *b, size_t *total)
{
    struct cuda_batch *c = cb(b);
    size_t n = 0;

    if (b->n_segs > c->seg_table_cap) {
        size_t *st = (size_t *) realloc(c->seg_table,
                                        b->n_segs * sizeof *st);

        if (!st) {
            return GPU_ERR_NOMEM;
        }
        c->seg_table = st;
        c->seg_table_cap = b->n_segs;
    }
    /* Where each distinct plan goes: the first segment using it. */
    for (size_t s = 0; s < b->n_segs; s++) {
        const struct parity_plan *p = b->segs[s].plan;
        size_t t;

        c->seg_table[s] = 0;
        if (!p) {
            continue;
        }
        for (t = 0; t < s && b->segs[t].plan != p; t++) {
            continue;
        }
        if (t < s) {
            c->seg_table[s] = c->seg_table[t];
            continue;
        }
        c->seg_table[s] = n;
        n += (size_t) p->n_out * p->n_in * 32;
    }
    if (n > c->tables_cap) {
        uint8_t *h = (uint8_t *) realloc(c->h_tables, n);
        uint8_t *d = NULL;

        if (!h) {
            return GPU_ERR_NOMEM;
        }
        c->h_tables = h;
        /* The batch is idle: nothing on the device reads the old one. */
        if (emulate) {
            d = (uint8_t *) malloc(n);
        } else if (cudaMalloc((void **) &d, n) != cudaSuccess) {
            cudaGetLastError();
            d = NULL;
        }
        if (!d) {
            return GPU_ERR_DEVICE_NOMEM;
        }
        if (emulate) {
            free(c->d_tables);
        } else {
            cudaFree(c->d_tables);
        }
        c->d_tables = d;
        c->tables_cap = n;
    } else if (n && !c->h_tables) {
        c->h_tables = (uint8_t *) malloc(c->tables_cap);
        if (!c->h_tables) {
            return GPU_ERR_NOMEM;
        }
    }
    for (size_t s = 0; s < b->n_segs; s++) {
        const struct parity_plan *p = b->segs[s].plan;

        if (p) {
            memcpy(c->h_tables + c->seg_table[s], p->tables,
                   (size_t) p->n_out * p->n_in * 32);
        }
    }
    *total = n;
    return GPU_OK;
}

/* Copies in the chunks a decode with segments reads or writes, over the
 * segments' span [lo, hi): when the batch's chunks lie at one host pitch,
 * all k + m rows in one 2D copy, holes (chunks no segment touches, e.g.
 * lost ones with no segment writing them) included, provided the bytes
 * copied in vain are at most a quarter of the copy (a hole costs bytes
 * over PCIe, a call costs the PMD thread ~2 us: a fec call's few hundred
 * extra bytes are worth far less than the calls they save); else chunk
 * by chunk.  Copying back, a hole is only allowed where 'hole_ok' says
 * the device holds the host's bytes (a chunk copied in), so that it goes
 * back as it came. */
static cudaError_t
copy_touched(struct cuda_batch *c, const uint8_t *const *ptr,
             const bool *touched, const bool *hole_ok, unsigned int n,
             size_t lo, size_t hi, bool to_host, cudaStream_t st)
{
    unsigned int first = n, last = 0, n_touched = 0;
    bool holes_ok = true;
    cudaError_t e = cudaSuccess;

    for (unsigned int i = 0; i < n; i++) {
        if (touched[i]) {
            first = i < first ? i : first;
            last = i;
            n_touched++;
        }
    }
    if (!n_touched) {
        return cudaSuccess;
    }
    for (unsigned int i = first; hole_ok && i <= last; i++) {
        holes_ok = holes_ok && (touched[i] || hole_ok[i]);
    }
    if (n_touched > 1 && holes_ok
        && (last - first + 1 - n_touched) * 4 <= last - first + 1
        && host_pitch(ptr + first, last - first + 1, hi - lo)) {
        return copy_chunks(c, ptr + first, last - first + 1, first, lo,
                           hi - lo, to_host, st);
    }
    for (unsigned int i = 0; e == cudaSuccess && i < n; i++) {
        if (touched[i]) {
            e = copy_chunks(c, ptr + i, 1, i, lo, hi - lo, to_host, st);
        }
    }
    return e;
}

/* A decode with segments, on the caller's stream (a packet decoder's
 * call is far below SLICE_BYTES a chunk, so slicing or internal streams
 * would only add calls): the chunks any segment reads or writes are
 * copied in over the segments' span, the segments' kernels run, and the
 * chunks written are copied back over the span; bytes of them no segment
 * wrote go back as they came. */
static int
submit_segments(struct gpu_parity_batch *b, cudaStream_t st)
{
    struct cuda_batch *c = cb(b);
    unsigned int n = b->coder->cfg.k + b->coder->cfg.m;
    bool touched[GPU_PARITY_MAX_CHUNKS] = { false };
    bool written[GPU_PARITY_MAX_CHUNKS] = { false };
    size_t lo = SIZE_MAX, hi = 0, tables = 0;
    int error = 0;

    if (b->coder->cfg.code == GPU_PARITY_CODE_GF8) {
        error = stage_gf8_tables(b, &tables);
        if (error) {
            return error;
        }
    }
    for (size_t s = 0; s < b->n_segs; s++) {
        const struct parity_plan *p = b->segs[s].plan;

        if (!p) {
            continue;
        }
        for (unsigned int i = 0; i < p->n_in; i++) {
            touched[p->in_ids[i]] = true;
        }
        for (unsigned int o = 0; o < p->n_out; o++) {
            written[p->out_ids[o]] = touched[p->out_ids[o]] = true;
        }
        lo = b->segs[s].offset < lo ? b->segs[s].offset : lo;
        hi = b->segs[s].offset + b->segs[s].size;
    }
    if (tables) {
        c->tables_encode = false;
        /* The staging buffer is pageable: the copy has taken it when
         * this returns, so the next submission may overwrite it. */
        error = CK(xcopy(c, c->d_tables, c->h_tables, tables,
                         cudaMemcpyHostToDevice, st));
    }
    if (!error && lo < hi) {
        error = CK(copy_touched(c, b->in, touched, NULL, n, lo, hi, false,
                                st));
        if (!error) {
            error = CK(apply_segments(b, st));
        }
        if (!error) {
            error = CK(copy_touched(c, (const uint8_t *const *) b->out,
                                    written, touched, n, lo, hi, true, st));
        }
    }
    if (!error) {
        error = CK(xrecord(c, c->done, st));
    }
    return error;
}

/* ---- Packet groups (gpu_parity_pkt_encode_submit()). ----
 *
 * Two kernels replace the copies in and out of a packet encoder's call,
 * at no more runtime calls: one takes each data chunk in from the host
 * chunk in place, only the bytes its packet uses, and writes the zeros
 * after them on the device (so the host never writes the padding); one
 * writes each group's parity packets from the device straight into their
 * destinations in host memory registered with the device (a switch's
 * packet buffers, so the host never copies them).  A block a chunk of a
 * group, its threads 8 bytes apart. */

struct pkt_group {
    uint64_t ofs, size;
};

#define PKT_THREADS 128

struct pkt_args {
    const uint8_t *in[GPU_PARITY_MAX_CHUNKS];   /* Host data chunks. */
    uint8_t *base;                  /* Device slot 0. */
    uint64_t stride;
    const struct pkt_group *groups; /* Pinned host, read in place. */
    uint8_t *const *dst;            /* Pinned host: n_groups * m. */
    uint32_t n_groups, k, m;
    uint32_t in_aligned;            /* Every host chunk 8-byte aligned. */
};

/* What the graph's first kernel pulls from the batch's pinned block
 * (gpu_graph_args_kernel()) for the kernels after it. */
struct pkt_graph_args {
    struct pkt_args a;
    uint32_t seq;               /* For gpu_graph_done_kernel(). */
};
static_assert(sizeof(struct pkt_graph_args) % 4 == 0,
              "gpu_graph_args_kernel() copies words");

/* The graph's grids, fixed when it is built: blocks stride over the
 * call's chunks. */
#define PKT_GRAPH_BLOCKS 264

/* Block 'blk' (group blk / k, data chunk blk % k), thread 'tid'. */
static HD void
pkt_take_in(const struct pkt_args &a, uint32_t blk, uint32_t tid)
{
    uint32_t g = blk / a.k, i = blk % a.k;
    uint64_t ofs = a.groups[g].ofs, size = a.groups[g].size;
    const uint8_t *src = a.in[i] + ofs;
    uint8_t *dev = a.base + a.stride * i + ofs;
    uint64_t used = gpu_parity_pkt_used(src);

    /* Checked on the host at submission; a header changed since must
     * still not make the kernel write past its chunk. */
    used = used < size ? used : size;
    for (uint64_t x = (uint64_t) tid * 8; x < size; x += PKT_THREADS * 8) {
        uint64_t v = 0;

        if (x < used) {
            if (a.in_aligned) {
                v = *(const uint64_t *) (src + x);
            } else {
                for (int b = 0; b < 8; b++) {
                    v |= (uint64_t) src[x + b] << (8 * b);
                }
            }
            if (used - x < 8) {
                v &= ((uint64_t) 1 << (8 * (used - x))) - 1;
            }
        }
        *(uint64_t *) (dev + x) = v;
    }
}

/* Block 'blk' (group blk / m, parity chunk blk % m), thread 'tid': the
 * destination in aligned 8-byte words, its unaligned ends byte by
 * byte. */
static HD void
pkt_deliver(const struct pkt_args &a, uint32_t blk, uint32_t tid)
{
    uint32_t g = blk / a.m, j = blk % a.m;
    uint64_t ofs = a.groups[g].ofs, size = a.groups[g].size;
    const uint8_t *src = a.base + a.stride * (a.k + j) + ofs;
    uint8_t *dst = a.dst[(uint64_t) g * a.m + j];
    uintptr_t d0 = (uintptr_t) dst, d1 = d0 + size;
    uintptr_t w0 = (d0 + 7) & ~(uintptr_t) 7, w1 = d1 & ~(uintptr_t) 7;

    if (w0 >= w1) {
        w0 = w1 = d1;           /* No whole word: bytes only. */
    }
    for (uintptr_t x = d0 + tid; x < w0; x += PKT_THREADS) {
        *(uint8_t *) x = src[x - d0];
    }
    for (uintptr_t x = w1 + tid; x < d1; x += PKT_THREADS) {
        *(uint8_t *) x = src[x - d0];
    }
    for (uintptr_t x = w0 + (uintptr_t) tid * 8; x < w1;
         x += PKT_THREADS * 8) {
        const uint8_t *s = src + (x - d0);
        uint64_t v = 0;

        for (int b = 0; b < 8; b++) {
            v |= (uint64_t) s[b] << (8 * b);
        }
        *(uint64_t *) x = v;
    }
}

__global__ void __launch_bounds__(PKT_THREADS)
pkt_take_in_kernel(const __grid_constant__ struct pkt_args a)
{
    pkt_take_in(a, blockIdx.x, threadIdx.x);
}

__global__ void __launch_bounds__(PKT_THREADS)
pkt_deliver_kernel(const __grid_constant__ struct pkt_args a)
{
    pkt_deliver(a, blockIdx.x, threadIdx.x);
}

/* The graph's: the call's arguments in device memory. */
__global__ void __launch_bounds__(PKT_THREADS)
pkt_take_in_graph_kernel(const struct pkt_args *a)
{
    for (uint32_t blk = blockIdx.x; blk < a->n_groups * a->k;
         blk += gridDim.x) {
        pkt_take_in(*a, blk, threadIdx.x);
    }
}

__global__ void __launch_bounds__(PKT_THREADS)
pkt_deliver_graph_kernel(const struct pkt_args *a)
{
    for (uint32_t blk = blockIdx.x; blk < a->n_groups * a->m;
         blk += gridDim.x) {
        pkt_deliver(*a, blk, threadIdx.x);
    }
}

static cudaError_t
pkt_launch(struct cuda_batch *c, const struct pkt_args *a, bool take_in,
           uint32_t n_blocks, cudaStream_t st)
{
    c->n_calls++;
    if (emulate) {
        for (uint32_t blk = 0; blk < n_blocks; blk++) {
            for (uint32_t tid = 0; tid < PKT_THREADS; tid++) {
                if (take_in) {
                    pkt_take_in(*a, blk, tid);
                } else {
                    pkt_deliver(*a, blk, tid);
                }
            }
        }
        return cudaSuccess;
    }
    if (take_in) {
        pkt_take_in_kernel<<<n_blocks, PKT_THREADS, 0, st>>>(*a);
    } else {
        pkt_deliver_kernel<<<n_blocks, PKT_THREADS, 0, st>>>(*a);
    }
    return cudaGetLastError();
}

/* Whether the device may read every data chunk of 'b' in place at its
 * host address: pinned or registered memory, which a call's chunks stay
 * in from one submission to the next, so it is asked once per chunk. */
static bool
pkt_in_readable(struct gpu_parity_batch *b)
{
    struct cuda_batch *c = cb(b);

    for (unsigned int i = 0; i < b->coder->cfg.k; i++) {
        struct cudaPointerAttributes attr;

        if (emulate || c->pkt_readable[i] == b->in[i]) {
            continue;
        }
        if (cudaPointerGetAttributes(&attr, b->in[i]) != cudaSuccess
            || attr.type != cudaMemoryTypeHost
            || attr.devicePointer != (const void *) b->in[i]) {
            cudaGetLastError();
            return false;
        }
        c->pkt_readable[i] = b->in[i];
    }
    return true;
}

/* Whether the device may write every destination of 'b' in place. */
static bool
pkt_dst_writable(const struct gpu_parity_batch *b)
{
    unsigned int m = b->coder->cfg.m;

    for (size_t g = 0; !emulate && g < b->n_groups; g++) {
        for (unsigned int j = 0; j < m; j++) {
            if (!gpu_host_registered(b->dst[g * m + j],
                                     b->group_sizes[g])) {
                return false;
            }
        }
    }
    return true;
}

/* Fills the batch's pinned table of groups and destinations, and the
 * kernels' arguments, in pinned memory of the batch's own (made at its
 * first packet encode): the graph's first node copies them from there,
 * and nothing is allocated a call. */
static int
pkt_args_fill(struct gpu_parity_batch *b)
{
    struct cuda_batch *c = cb(b);
    const struct gpu_parity_config *cfg = &b->coder->cfg;
    unsigned int m = cfg->m;
    uintptr_t align = 0;
    struct pkt_args *a;
    size_t ofs = 0;
    uint8_t **dst;

    if (!c->pkt_h_args) {
        c->pkt_h_args = (struct pkt_graph_args *) gpu_host_alloc(
            sizeof *c->pkt_h_args);
        if (!c->pkt_h_args) {
            return GPU_ERR_NOMEM;
        }
    }

    if (b->n_groups > c->pkt_cap) {
        size_t cap = b->n_groups * 2;
        struct pkt_group *t = (struct pkt_group *) gpu_host_alloc(
            cap * (sizeof *t + m * sizeof *dst));

        if (!t) {
            return GPU_ERR_NOMEM;
        }
        /* The batch is idle: no kernel reads the old one. */
        gpu_host_free(c->pkt_table);
        c->pkt_table = t;
        c->pkt_cap = cap;
    }
    dst = (uint8_t **) (c->pkt_table + c->pkt_cap);
    for (size_t g = 0; g < b->n_groups; g++) {
        c->pkt_table[g].ofs = ofs;
        c->pkt_table[g].size = b->group_sizes[g];
        ofs += b->group_sizes[g];
    }
    if (b->has_dst) {
        memcpy(dst, b->dst, b->n_groups * m * sizeof *dst);
    }

    a = &c->pkt_h_args->a;
    for (unsigned int i = 0; i < cfg->k; i++) {
        a->in[i] = b->in[i];
        align |= (uintptr_t) b->in[i];
    }
    a->base = c->d_base;
    a->stride = c->stride;
    a->groups = c->pkt_table;
    a->dst = dst;
    a->n_groups = b->n_groups;
    a->k = cfg->k;
    a->m = m;
    a->in_aligned = !(align & 7);
    return GPU_OK;
}

static bool pkt_graph_build(struct gpu_parity_batch *, bool device_launch);

/* Builds the batch's packet-encode graph if it has none yet, and says
 * whether it can be launched.  Its code kernels run over every column of
 * the batch's max_size (the call's columns and stale ones after them,
 * whose parity no one delivers: a few microseconds of the device at
 * most), so that nothing but the take-in and deliver kernels' arguments
 * changes from one call to the next. */
static bool
pkt_graph_ready(struct gpu_parity_batch *b)
{
    struct cuda_batch *c = cb(b);
    const struct parity_plan *p = &b->coder->encode;
    size_t tables = (size_t) p->n_out * p->n_in * 32;
    int error;

    if (c->pkt_graph.exec || c->pkt_graph_tried || emulate) {
        return c->pkt_graph.exec && !c->pkt_graph.broken;
    }
    c->pkt_graph_tried = true;
    error = CK(cudaMalloc((void **) &c->pkt_d_args, sizeof *c->pkt_d_args));
    if (!error && p->code == GPU_PARITY_CODE_GF8) {
        error = CK(cudaMalloc((void **) &c->pkt_tables, tables));
        if (!error) {
            error = CK(cudaMemcpy(c->pkt_tables, p->tables, tables,
                                  cudaMemcpyHostToDevice));
        }
    }
    if (error) {
        c->pkt_graph.broken = true;
        return false;
    }
    /* For the device's launch if asked, else (or if that cannot be
     * built) the host's. */
    return ((b->coder->cfg.device_launch && pkt_graph_build(b, true))
            || pkt_graph_build(b, false));
}

/* Captures and builds the batch's packet-encode graph, for the device to
 * launch too if 'device_launch' (then with a scheduler, if it may have
 * one).  True if it can be launched. */
static bool
pkt_graph_build(struct gpu_parity_batch *b, bool device_launch)
{
    struct cuda_batch *c = cb(b);
    const struct parity_plan *p = &b->coder->encode;
    int in_slot[GPU_PARITY_MAX_CHUNKS], out_slot[GPU_PARITY_MAX_CHUNKS];
    void *capture;
    cudaStream_t cs;
    int error;

    for (unsigned int i = 0; i < p->n_in; i++) {
        in_slot[i] = i;
    }
    for (unsigned int o = 0; o < p->n_out; o++) {
        out_slot[o] = p->n_in + o;
    }
    error = gpu_graph_capture_begin(&c->pkt_graph, &capture);
    if (error) {
        c->pkt_graph.broken = true;
        return false;
    }
    cs = (cudaStream_t) capture;
    /* The arguments pulled by a kernel rather than copied by a node: the
     * same one runtime call for the host's launch, and a graph the
     * device may launch. */
    gpu_graph_args_kernel<<<1, PKT_THREADS, 0, cs>>>(
        (const uint32_t *) c->pkt_h_args, (uint32_t *) c->pkt_d_args,
        sizeof *c->pkt_d_args / 4);
    error = CK(cudaGetLastError());
    if (!error) {
        pkt_take_in_graph_kernel<<<PKT_GRAPH_BLOCKS, PKT_THREADS, 0, cs>>>(
            &c->pkt_d_args->a);
        error = CK(apply_plan(b, p, in_slot, out_slot, c->pkt_tables, 0,
                              b->max_size / block_bytes(b->coder), cs));
    }
    if (!error) {
        pkt_deliver_graph_kernel<<<PKT_GRAPH_BLOCKS, PKT_THREADS, 0, cs>>>(
            &c->pkt_d_args->a);
        gpu_graph_done_kernel<<<1, 1, 0, cs>>>(&c->pkt_d_args->seq,
                                               c->pkt_graph.flag_dev);
        error = CK(cudaGetLastError());
    }
    if (device_launch) {
        error = gpu_graph_capture_end_device(&c->pkt_graph, capture, error);
        if (!error) {
            /* Without one (too many exist), launched from the host. */
            gpu_graph_start_scheduler(&c->pkt_graph);
        }
    } else {
        error = gpu_graph_capture_end(&c->pkt_graph, capture, error);
    }
    return !error && c->pkt_graph.exec && !c->pkt_graph.broken;
}

/* An encode of packet groups, on the caller's stream (a packet encoder's
 * call is far below SLICE_BYTES a chunk): the data chunks taken in and
 * padded by the device where it can read them in place (else padded on
 * the host and copied in), the code applied, the parity written to the
 * destinations by the device where it can write them all in place (else
 * copied out, and to the destinations when done). */
static int
submit_pkt(struct gpu_parity_batch *b, cudaStream_t st)
{
    struct cuda_batch *c = cb(b);
    const struct gpu_parity_config *cfg = &b->coder->cfg;
    size_t n_blocks = b->size / block_bytes(b->coder);
    const struct pkt_args *a;
    int error;

    error = pkt_args_fill(b);
    if (error) {
        return error;
    }
    a = &c->pkt_h_args->a;

    bool readable = pkt_in_readable(b);

    b->dst_in_place = b->has_dst && pkt_dst_writable(b);
    if (readable && b->dst_in_place && pkt_graph_ready(b)) {
        /* Everything in place: one runtime call, the graph's launch. */
        struct gpu_graph *g = &c->pkt_graph;
        uint64_t n_host_launches = g->n_host_launches;

        c->pkt_h_args->seq = gpu_graph_next_seq(g);
        error = gpu_graph_launch(g, st);
        c->n_calls += g->n_host_launches - n_host_launches;
        if (!error && g->rung) {
            __atomic_add_fetch(&b->coder->n_device_launches, 1,
                               __ATOMIC_RELAXED);
        }
        return error;
    }
    if (readable) {
        error = CK(pkt_launch(c, a, true, b->n_groups * cfg->k, st));
    } else {
        gpu_parity_pkt_pad_host(b);
        error = CK(copy_chunks(c, b->in, cfg->k, 0, 0, b->size, false, st));
    }
    if (!error) {
        error = CK(apply_blocks(b, 0, n_blocks, st));
    }
    if (!error && b->dst_in_place) {
        error = CK(pkt_launch(c, a, false, b->n_groups * cfg->m, st));
    } else if (!error) {
        error = CK(copy_chunks(c, (const uint8_t *const *) b->out, cfg->m,
                               cfg->k, 0, b->size, true, st));
    }
    if (!error) {
        error = CK(xrecord(c, c->done, st));
    }
    return error;
}

static int
cuda_submit(struct gpu_parity_batch *b, struct gpu_stream *stream,
            bool again)
{
    struct cuda_batch *c = cb(b);
    const struct parity_plan *p = b->plan;
    size_t block = block_bytes(b->coder);
    size_t n_blocks = b->size / block, per, s0;
    cudaStream_t user;
    unsigned int n_slices, s, used;
    int error;

    if (!stream) {
        stream = gpu_stream_per_thread();
    }
    user = (cudaStream_t) gpu_stream_native(stream);
    c->user = user;
    c->fallback = false;
    c->error = GPU_OK;
    c->n_calls = 1;             /* cudaSetDevice(). */
    error = emulate ? GPU_OK : CK(cudaSetDevice(b->coder->cfg.device));
    if (error) {
        goto fail;
    }

    if (again) {
        c->profiled = b->coder->cfg.profile && !emulate;
        if (c->profiled) {
            error = CK(cudaEventRecord(c->prof[0], user));
        }
        if (!error) {
            error = CK(b->n_segs ? apply_segments(b, user)
                       : apply_blocks(b, 0, n_blocks, user));
        }
        if (!error && c->profiled) {
            error = CK(cudaEventRecord(c->prof[1], user));
        }
        if (!error) {
            error = CK(xrecord(c, c->done, user));
        }
        if (error) {
            /* Nothing on the host to redo: report it. */
            c->error = error;
        }
        return GPU_OK;
    }

    c->profiled = false;
    if (b->n_segs) {
        error = submit_segments(b, user);
        if (!error) {
            goto done;
        }
        goto fail;
    }
    if (p->code == GPU_PARITY_CODE_GF8
        && !(p == &b->coder->encode && c->tables_encode)) {
        /* Ahead of the slices, which wait for 'start' on 'user'.  The
         * encode plan's stay for the next encode. */
        error = CK(xcopy(c, c->d_tables, p->tables,
                         (size_t) p->n_out * p->n_in * 32,
                         cudaMemcpyHostToDevice, user));
        c->tables_encode = !error && p == &b->coder->encode;
    }
    if (b->pkt) {
        if (!error) {
            error = submit_pkt(b, user);
        }
        if (!error) {
            goto done;
        }
        goto fail;
    }
    n_slices = b->size / SLICE_BYTES;
    n_slices = n_slices < 1 ? 1 : n_slices > MAX_SLICES ? MAX_SLICES
                                                        : n_slices;
    if (n_slices > n_blocks) {
        n_slices = n_blocks;
    }
    if (n_slices <= 1) {
        /* Small (every packet coder's call): copy in, kernels, copy out
         * on the caller's stream, no internal streams or events to
         * order them by. */
        if (!error) {
            error = CK(copy_chunks(c, b->in, p->n_in, 0, 0, b->size, false,
                                   user));
        }
        if (!error) {
            error = CK(apply_blocks(b, 0, n_blocks, user));
        }
        if (!error) {
            error = CK(copy_chunks(c, (const uint8_t *const *) b->out,
                                   p->n_out, p->n_in, 0, b->size, true,
                                   user));
        }
        if (!error) {
            error = CK(xrecord(c, c->done, user));
        }
        if (!error) {
            goto done;
        }
        goto fail;
    }
    per = (n_blocks + n_slices - 1) / n_slices;
    used = n_slices < N_STREAMS ? n_slices : N_STREAMS;

    if (!error) {
        error = CK(xrecord(c, c->start, user));
    }
    for (s = 0; !error && s < used; s++) {
        error = CK(xwait_event(c, c->streams[s], c->start));
    }
    for (s = 0, s0 = 0; !error && s0 < n_blocks; s++, s0 += per) {
        size_t s1 = s0 + per < n_blocks ? s0 + per : n_blocks;
        size_t off = s0 * block, len = (s1 - s0) * block;
        cudaStream_t st = c->streams[s % N_STREAMS];

        error = CK(copy_chunks(c, b->in, p->n_in, 0, off, len, false, st));
        if (!error) {
            error = CK(apply_blocks(b, s0, s1, st));
        }
        if (!error) {
            error = CK(copy_chunks(c, (const uint8_t *const *) b->out,
                                   p->n_out, p->n_in, off, len, true, st));
        }
    }
    for (s = 0; !error && s < used; s++) {
        error = CK(xrecord(c, c->slice_done[s], c->streams[s]));
        if (!error) {
            error = CK(xwait_event(c, user, c->slice_done[s]));
        }
    }
    if (!error) {
        error = CK(xrecord(c, c->done, user));
    }
    if (!error) {
        goto done;
    }
fail:
    /* Code it on the CPU when waited for, once whatever was queued has
     * drained (it may still be writing the outputs). */
    c->fallback = true;
done:
    b->n_runtime_calls = c->n_calls;
    __atomic_add_fetch(&b->coder->n_runtime_calls, c->n_calls,
                       __ATOMIC_RELAXED);
    return GPU_OK;
}

static void
drain(struct cuda_batch *c)
{
    if (emulate) {
        return;
    }
    for (int i = 0; i < N_STREAMS; i++) {
        cudaStreamSynchronize(c->streams[i]);
    }
    /* A small submission runs on the caller's stream. */
    cudaStreamSynchronize(c->user);
    cudaGetLastError();
}

static int
cuda_finish(struct gpu_parity_batch *b, int error)
{
    struct cuda_batch *c = cb(b);

    if (c->error) {
        return c->error;
    }
    if (!error && c->profiled) {
        float ms = 0;

        if (cudaEventElapsedTime(&ms, c->prof[0], c->prof[1])
            == cudaSuccess) {
            __atomic_add_fetch(&b->coder->kernel_ns,
                               (uint64_t) (ms * 1e6), __ATOMIC_RELAXED);
        }
        cudaGetLastError();
    }
    if (error || c->fallback) {
        drain(c);
        b->dst_in_place = false;
        gpu_parity_cpu_apply_batch(b);
        gpu_parity_count(b, true);
    } else if (b->pkt && !b->dst_in_place) {
        gpu_parity_pkt_deliver_host(b);
    }
    return GPU_OK;
}

static int
cuda_poll(struct gpu_parity_batch *b)
{
    struct cuda_batch *c = cb(b);
    cudaError_t e;

    if (c->fallback || c->error || emulate) {
        return cuda_finish(b, GPU_OK);
    }
    if (c->pkt_graph.in_flight) {
        int status = gpu_graph_poll(&c->pkt_graph);

        return status == GPU_ERR_BUSY ? status : cuda_finish(b, status);
    }
    e = cudaEventQuery(c->done);
    if (e == cudaErrorNotReady) {
        return GPU_ERR_BUSY;
    }
    return cuda_finish(b, CK(e));
}

static int
cuda_wait(struct gpu_parity_batch *b)
{
    struct cuda_batch *c = cb(b);

    if (c->fallback || c->error || emulate) {
        return cuda_finish(b, GPU_OK);
    }
    if (c->pkt_graph.in_flight) {
        return cuda_finish(b, gpu_graph_wait(&c->pkt_graph));
    }
    return cuda_finish(b, CK(cudaEventSynchronize(c->done)));
}

extern "C" {
const struct gpu_parity_provider gpu_parity_cuda_provider = {
    "cuda",
    GPU_PARITY_BACKEND_CUDA,
    NULL,
    NULL,
    cuda_batch_init,
    cuda_batch_uninit,
    cuda_submit,
    cuda_poll,
    cuda_wait,
};
}
