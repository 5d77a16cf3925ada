/*
 * CUDA backend of the index builder (sm_90): the seed's Algorithm 1 with
 * CUB primitives, on the builder's own stream.
 *
 *   1. copy the values in; rid[i] = i (and flag any value that does not
 *      fit value_bits, which the sort would otherwise ignore);
 *   2. stable radix sort of (value, rid) over value_bits bits
 *      (cub::DeviceRadixSort::SortPairs): values ascend, rids ascend
 *      within a value;
 *   3. per row a partial literal (its bit in its chunk, plus the literal
 *      header) and the key (value << 32 | chunk);
 *   4. segmented OR of the partial literals per (value, chunk)
 *      (cub::DeviceReduce::ReduceByKey): k complete literals;
 *   5. per literal the 0-fill before it, from the chunk-id gap to the
 *      previous literal of the same value (from chunk 0 for a value's
 *      first literal: the seed's printed Algorithm 4 is one short there),
 *      reading the neighbour's original chunk id, not an updated one; for
 *      PLWAH a one-bit literal (payload bits only) folds into its fill;
 *   6. fuse and compact: an exclusive scan of each pair's length (0, 1 or
 *      2 non-zero words) gives its place in the output, so fills and
 *      literals are written side by side with the zero words left out, in
 *      one pass instead of the seed's scatter and stream compaction;
 *   7. column lengths: sum of pair lengths per value (ReduceByKey), then
 *      an exclusive scan over those counts (the seed scans the wrong
 *      array) gives the offsets;
 *   8. copy keys, offsets and words out.
 *
 * The per-element steps are index-inline.h's, shared with the CPU
 * backend, so both give the same bytes.  Two small reads of counts (k
 * after step 4, n_keys and the word count at the end) synchronize the
 * stream; every CUDA call is checked, and a failure makes the call
 * return GPU_ERR_DEVICE so that gpu_index_build() falls back to the CPU.
 */
#include <config.h>

#include <cub/cub.cuh>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_services/index/index-private.h"

#define THREADS 256
#define CK(CALL) gpu_cuda_status((CALL), #CALL)

struct OrOp {
    __host__ __device__ __forceinline__ uint32_t
    operator()(uint32_t a, uint32_t b) const
    {
        return a | b;
    }
};

struct SumOp {
    __host__ __device__ __forceinline__ uint32_t
    operator()(uint32_t a, uint32_t b) const
    {
        return a + b;
    }
};

struct cuda_builder {
    uint32_t cap;
    uint32_t *d_vals, *d_svals, *d_rid, *d_srid;
    unsigned long long *d_key, *d_ukey;
    uint32_t *d_lit, *d_ulit, *d_fill, *d_len, *d_pos, *d_vkey;
    uint32_t *d_words, *d_keys, *d_counts, *d_offsets;
    uint32_t *d_num;            /* k, bad value, n_keys, n_words. */
    uint32_t *h_num;            /* Pinned copy of d_num. */
    void *d_temp;
    size_t temp_bytes;
    struct gpu_stream *gs;      /* The runtime's stream... */
    cudaStream_t stream;        /* ...and its CUDA handle. */
    cudaEvent_t ev[4];
    uint32_t last_n;            /* Values resident on the device. */

    /* A segment's records (load_records), allocated at the first: a
     * builder of benchmarks' values never needs them. */
    struct gpu_index_record *d_recs;
    uint32_t recs_cap;
};

static struct cuda_builder *
cb(struct gpu_index_builder *b)
{
    return (struct cuda_builder *) b->pdata;
}

extern "C" int
gpu_index_cuda_probe(char *name, size_t size)
{
    struct gpu_device_info info;

    if (gpu_device_count(NULL) <= 0 || gpu_device_query(0, &info)) {
        return 0;
    }
    snprintf(name, size, "%s", info.name);
    return 1;
}

/* ---- Kernels. ---- */

__global__ void
init_kernel(const uint32_t *__restrict__ vals, uint32_t *__restrict__ rid,
            uint32_t n, unsigned int bits, uint32_t *num)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < n) {
        rid[i] = i;
        if (bits < 32 && (vals[i] >> bits)) {
            atomicOr(&num[1], 1u);
        }
    }
}

/* One column of a segment's index from its records: what the host
 * computes for the CPU builder (ix_attr_value()), one row a thread. */
__global__ void
attr_kernel(const struct gpu_index_record *__restrict__ recs, uint32_t n,
            int attr, uint32_t *__restrict__ vals)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < n) {
        vals[i] = ix_attr_value(&recs[i], attr);
    }
}

/* Algorithm 2: partial literal and chunk of each (sorted) row. */
__global__ void
partial_kernel(const uint32_t *__restrict__ svals,
               const uint32_t *__restrict__ srid, uint32_t n,
               unsigned long long *__restrict__ key,
               uint32_t *__restrict__ lit)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < n) {
        uint32_t r = srid[i];

        key[i] = (unsigned long long) svals[i] << 32 | ix_chunk(r);
        lit[i] = ix_partial_literal(r);
    }
}

/* Algorithms 4 and 7 (fixed): the fill before each literal, PLWAH's
 * fold, and each pair's length.  Reads ukey[i - 1], never writes ukey, so
 * there is no race between neighbours. */
__global__ void
fill_kernel(const unsigned long long *__restrict__ ukey,
            uint32_t *__restrict__ lit, const uint32_t *__restrict__ num,
            bool plwah, uint32_t *__restrict__ fill,
            uint32_t *__restrict__ len, uint32_t *__restrict__ vkey)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t k = num[0];

    if (i < k) {
        unsigned long long x = ukey[i];
        uint32_t v = x >> 32, ch = (uint32_t) x;
        bool head = i == 0 || (uint32_t) (ukey[i - 1] >> 32) != v;
        uint32_t f = ix_fill(head, ch, head ? 0 : (uint32_t) ukey[i - 1]);
        uint32_t l = lit[i];

        if (plwah) {
            ix_plwah_fold(&f, &l);
        }
        fill[i] = f;
        lit[i] = l;
        len[i] = ix_pair_len(f, l);
        vkey[i] = v;
    }
}

/* Algorithm 5, fused with the compaction: each pair to its place. */
__global__ void
scatter_kernel(const uint32_t *__restrict__ fill,
               const uint32_t *__restrict__ lit,
               const uint32_t *__restrict__ pos,
               const uint32_t *__restrict__ num,
               uint32_t *__restrict__ words)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < num[0]) {
        uint32_t p = pos[i], f = fill[i], l = lit[i];

        if (f) {
            words[p++] = f;
        }
        if (l) {
            words[p] = l;
        }
    }
}

__global__ void
tail_kernel(const uint32_t *offsets, uint32_t *num)
{
    num[3] = offsets[num[2]];
}

/* ---- Setup. ---- */

static void
cuda_free_all(struct cuda_builder *c)
{
    void *ptrs[] = {
        c->d_vals, c->d_svals, c->d_rid, c->d_srid, c->d_key, c->d_ukey,
        c->d_lit, c->d_ulit, c->d_fill, c->d_len, c->d_pos, c->d_vkey,
        c->d_words, c->d_keys, c->d_counts, c->d_offsets, c->d_num,
        c->d_temp, c->d_recs,
    };

    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) {
        if (ptrs[i]) {
            cudaFree(ptrs[i]);
        }
    }
    if (c->h_num) {
        cudaFreeHost(c->h_num);
    }
    for (int i = 0; i < 4; i++) {
        if (c->ev[i]) {
            cudaEventDestroy(c->ev[i]);
        }
    }
    gpu_stream_destroy(c->gs);
    free(c);
}

static int
cuda_init(struct gpu_index_builder *b)
{
    struct cuda_builder *c =
        (struct cuda_builder *) calloc(1, sizeof *c);
    size_t n, t, tmax = 0;
    int error;

    if (!c) {
        return GPU_ERR_NOMEM;
    }
    n = c->cap = b->max_rows;
    error = CK(cudaSetDevice(0));
#define ALLOC(PTR, COUNT)                                               \
    if (!error) {                                                       \
        error = CK(cudaMalloc((void **) &(PTR), (COUNT) * sizeof *(PTR))); \
    }
    ALLOC(c->d_vals, n);
    ALLOC(c->d_svals, n);
    ALLOC(c->d_rid, n);
    ALLOC(c->d_srid, n);
    ALLOC(c->d_key, n);
    ALLOC(c->d_ukey, n);
    ALLOC(c->d_lit, n);
    ALLOC(c->d_ulit, n);
    ALLOC(c->d_fill, n);
    ALLOC(c->d_len, n);
    ALLOC(c->d_pos, n);
    ALLOC(c->d_vkey, n);
    ALLOC(c->d_words, 2 * n);
    ALLOC(c->d_keys, n);
    ALLOC(c->d_counts, n + 1);
    ALLOC(c->d_offsets, n + 1);
    ALLOC(c->d_num, 4);
#undef ALLOC
    if (!error) {
        error = CK(cudaMallocHost((void **) &c->h_num, 4 * sizeof *c->h_num));
    }
    if (!error) {
        error = gpu_stream_create(&c->gs);
        c->stream = error ? 0 : (cudaStream_t) gpu_stream_native(c->gs);
        if (!error && !c->stream) {
            error = GPU_ERR_NO_DEVICE;
        }
    }
    for (int i = 0; i < 4 && !error; i++) {
        error = CK(cudaEventCreate(&c->ev[i]));
    }
    /* One temporary buffer big enough for every CUB call. */
    if (!error) {
        t = 0;
        error = CK(cub::DeviceRadixSort::SortPairs(
                       NULL, t, c->d_vals, c->d_svals, c->d_rid, c->d_srid,
                       (int) n, 0, 32, c->stream));
        tmax = t > tmax ? t : tmax;
    }
    if (!error) {
        t = 0;
        error = CK(cub::DeviceReduce::ReduceByKey(
                       NULL, t, c->d_key, c->d_ukey, c->d_lit, c->d_ulit,
                       c->d_num, OrOp(), (int) n, c->stream));
        tmax = t > tmax ? t : tmax;
    }
    if (!error) {
        t = 0;
        error = CK(cub::DeviceScan::ExclusiveSum(
                       NULL, t, c->d_len, c->d_pos, (int) n + 1, c->stream));
        tmax = t > tmax ? t : tmax;
    }
    if (!error) {
        t = 0;
        error = CK(cub::DeviceReduce::ReduceByKey(
                       NULL, t, c->d_vkey, c->d_keys, c->d_len, c->d_counts,
                       c->d_num + 2, SumOp(), (int) n, c->stream));
        tmax = t > tmax ? t : tmax;
    }
    if (!error) {
        c->temp_bytes = tmax;
        error = CK(cudaMalloc(&c->d_temp, tmax ? tmax : 1));
    }
    if (error) {
        cuda_free_all(c);
        return error;
    }
    b->pdata = c;
    return GPU_OK;
}

static void
cuda_uninit(struct gpu_index_builder *b)
{
    cuda_free_all(cb(b));
    b->pdata = NULL;
}

static unsigned int
blocks(uint32_t n)
{
    return (n + THREADS - 1) / THREADS;
}

/* Steps 1 (but the copy) to 8 of the build, from the values in d_vals:
 * the rest of cuda_build(), and of cuda_build_attr() after its values
 * came from the records.  'resident' leaves the result on the device. */
static int
build_from_device_values(struct cuda_builder *c, uint32_t n,
                         unsigned int bits, enum gpu_index_encoding enc,
                         bool resident, struct gpu_index_bitmaps *out)
{
    cudaStream_t s = c->stream;
    size_t tb = c->temp_bytes;
    uint32_t k, n_keys, n_words;
    int error = GPU_OK;

    if (!error) {
        error = CK(cudaMemsetAsync(c->d_num, 0, 4 * sizeof *c->d_num, s));
    }
    if (!error) {
        init_kernel<<<blocks(n), THREADS, 0, s>>>(c->d_vals, c->d_rid, n,
                                                  bits, c->d_num);
        error = CK(cudaGetLastError());
    }
    if (!error) {
        /* The temporary storage was sized for n = max_rows over 32 bits;
         * make sure that covers this size and bit count. */
        size_t need = 0;

        error = CK(cub::DeviceRadixSort::SortPairs(
                       NULL, need, c->d_vals, c->d_svals, c->d_rid,
                       c->d_srid, (int) n, 0, (int) bits, s));
        if (!error && need > tb) {
            return GPU_ERR_DEVICE_NOMEM;
        }
    }
    if (!error) {
        error = CK(cub::DeviceRadixSort::SortPairs(
                       c->d_temp, tb, c->d_vals, c->d_svals, c->d_rid,
                       c->d_srid, (int) n, 0, (int) bits, s));
    }
    if (!error) {
        partial_kernel<<<blocks(n), THREADS, 0, s>>>(c->d_svals, c->d_srid,
                                                     n, c->d_key, c->d_lit);
        error = CK(cudaGetLastError());
    }
    if (!error) {
        error = CK(cub::DeviceReduce::ReduceByKey(
                       c->d_temp, tb, c->d_key, c->d_ukey, c->d_lit,
                       c->d_ulit, c->d_num, OrOp(), (int) n, s));
    }
    if (!error) {
        error = CK(cudaMemcpyAsync(c->h_num, c->d_num, 2 * sizeof *c->h_num,
                                   cudaMemcpyDeviceToHost, s));
    }
    if (!error) {
        error = CK(cudaStreamSynchronize(s));
    }
    if (error) {
        return error;
    }
    if (c->h_num[1]) {
        return GPU_ERR_INVALID;     /* A value wider than 'bits'. */
    }
    k = c->h_num[0];

    fill_kernel<<<blocks(k), THREADS, 0, s>>>(
        c->d_ukey, c->d_ulit, c->d_num, enc == GPU_INDEX_PLWAH, c->d_fill,
        c->d_len, c->d_vkey);
    error = CK(cudaGetLastError());
    if (!error) {
        error = CK(cub::DeviceScan::ExclusiveSum(c->d_temp, tb, c->d_len,
                                                 c->d_pos, (int) k, s));
    }
    if (!error) {
        scatter_kernel<<<blocks(k), THREADS, 0, s>>>(
            c->d_fill, c->d_ulit, c->d_pos, c->d_num, c->d_words);
        error = CK(cudaGetLastError());
    }
    if (!error) {
        error = CK(cub::DeviceReduce::ReduceByKey(
                       c->d_temp, tb, c->d_vkey, c->d_keys, c->d_len,
                       c->d_counts, c->d_num + 2, SumOp(), (int) k, s));
    }
    /* Counts past n_keys are stale, but an exclusive scan's element
     * n_keys sums only the n_keys before it: the total. */
    if (!error) {
        error = CK(cub::DeviceScan::ExclusiveSum(
                       c->d_temp, tb, c->d_counts, c->d_offsets,
                       (int) k + 1, s));
    }
    if (!error) {
        tail_kernel<<<1, 1, 0, s>>>(c->d_offsets, c->d_num);
        error = CK(cudaGetLastError());
    }
    if (!error) {
        error = CK(cudaMemcpyAsync(c->h_num, c->d_num, 4 * sizeof *c->h_num,
                                   cudaMemcpyDeviceToHost, s));
    }
    if (!error) {
        error = CK(cudaEventRecord(c->ev[2], s));
    }
    if (!error) {
        error = CK(cudaStreamSynchronize(s));
    }
    if (error) {
        return error;
    }
    n_keys = c->h_num[2];
    n_words = c->h_num[3];
    c->last_n = n;

    if (!resident) {
        if (gpu_index_bitmaps_reserve(out, n_keys, n_words)) {
            return GPU_ERR_NOMEM;
        }
        error = CK(cudaMemcpyAsync(out->keys, c->d_keys,
                                   n_keys * sizeof *out->keys,
                                   cudaMemcpyDeviceToHost, s));
        if (!error) {
            error = CK(cudaMemcpyAsync(out->offsets, c->d_offsets,
                                       (n_keys + 1) * sizeof *out->offsets,
                                       cudaMemcpyDeviceToHost, s));
        }
        if (!error) {
            error = CK(cudaMemcpyAsync(out->words, c->d_words,
                                       n_words * sizeof *out->words,
                                       cudaMemcpyDeviceToHost, s));
        }
    }
    if (!error) {
        error = CK(cudaEventRecord(c->ev[3], s));
    }
    if (!error) {
        error = CK(cudaStreamSynchronize(s));
    }
    if (error) {
        return error;
    }
    out->n_rows = n;
    out->encoding = enc;
    out->n_keys = n_keys;
    out->n_words = n_words;
    return GPU_OK;
}

static int
cuda_build(struct gpu_index_builder *b, const uint32_t *values, uint32_t n,
           unsigned int bits, enum gpu_index_encoding enc,
           unsigned int flags, struct gpu_index_bitmaps *out,
           struct gpu_index_build_times *t)
{
    struct cuda_builder *c = cb(b);
    cudaStream_t s = c->stream;
    bool resident = flags & GPU_INDEX_BUILD_RESIDENT;
    double t0 = gpu_index_now_ms();
    int error;

    if (resident && n != c->last_n) {
        return GPU_ERR_INVALID;
    }
    error = CK(cudaEventRecord(c->ev[0], s));
    if (!error && !resident) {
        error = CK(cudaMemcpyAsync(c->d_vals, values, n * sizeof *values,
                                   cudaMemcpyHostToDevice, s));
    }
    if (!error) {
        error = CK(cudaEventRecord(c->ev[1], s));
    }
    if (!error) {
        error = build_from_device_values(c, n, bits, enc, resident, out);
    }
    if (error) {
        return error;
    }
    if (t) {
        float ms;

        memset(t, 0, sizeof *t);
        if (!cudaEventElapsedTime(&ms, c->ev[0], c->ev[1])) {
            t->h2d_ms = ms;
        }
        if (!cudaEventElapsedTime(&ms, c->ev[1], c->ev[2])) {
            t->kernel_ms = ms;
        }
        if (!cudaEventElapsedTime(&ms, c->ev[2], c->ev[3])) {
            t->d2h_ms = ms;
        }
        t->total_ms = gpu_index_now_ms() - t0;
    }
    return GPU_OK;
}

/* Copies a segment's records to the device, for cuda_build_attr(). */
static int
cuda_load_records(struct gpu_index_builder *b,
                  const struct gpu_index_record *recs, uint32_t n)
{
    struct cuda_builder *c = cb(b);
    int error;

    if (n > c->recs_cap) {
        if (c->d_recs) {
            cudaFree(c->d_recs);
            c->d_recs = NULL;
            c->recs_cap = 0;
        }
        error = CK(cudaMalloc((void **) &c->d_recs, c->cap * sizeof *recs));
        if (error) {
            return GPU_ERR_DEVICE_NOMEM;
        }
        c->recs_cap = c->cap;
    }
    /* Synchronous: the caller may reuse 'recs' when this returns. */
    error = CK(cudaMemcpyAsync(c->d_recs, recs, n * sizeof *recs,
                               cudaMemcpyHostToDevice, c->stream));
    return error ? error : CK(cudaStreamSynchronize(c->stream));
}

static int
cuda_build_attr(struct gpu_index_builder *b, int attr, uint32_t n,
                enum gpu_index_encoding enc, struct gpu_index_bitmaps *out)
{
    struct cuda_builder *c = cb(b);
    int error;

    if (!c->d_recs || n > c->recs_cap) {
        return GPU_ERR_INVALID;
    }
    attr_kernel<<<blocks(n), THREADS, 0, c->stream>>>(c->d_recs, n, attr,
                                                      c->d_vals);
    error = CK(cudaGetLastError());
    return error ? error : build_from_device_values(
                               c, n, gpu_index_attr_bits(
                                         (enum gpu_index_attr) attr),
                               enc, false, out);
}

const struct gpu_index_provider gpu_index_cuda_provider = {
    "cuda",
    GPU_INDEX_BACKEND_CUDA,
    cuda_init,
    cuda_uninit,
    cuda_build,
    cuda_load_records,
    cuda_build_attr,
};
