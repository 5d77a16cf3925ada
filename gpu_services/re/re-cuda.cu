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
 * CUDA backend of the RE chunker (sm_90).
 *
 * A submission is, on the caller's stream 's' and a helper stream 'copy'
 * of the batch:
 *
 *   s:    copy the offsets in (metadata first, small);
 *   copy: copy the packed payloads in, at the same time;
 *   s:    group the packets by length (a histogram of 128 length
 *         buckets, a scan, a scatter), which overlaps the payload copy;
 *   s:    wait for the payload; chunk, one thread per packet, longest
 *         packets first, so a warp's threads run similar lengths;
 *   s:    copy the chunk ends (and fingerprints, if asked) out.
 *
 * The chunk kernel keeps the LBFS tables in shared memory and reads the
 * payload as 16-byte aligned vectors.  For windows of 16, 32, 48 or 64
 * bytes the byte leaving the window sits at the same place in the vector
 * loaded window/16 steps earlier, so the window lives in registers (a
 * ring of uint4) and costs no memory traffic at all; other windows read
 * the leaving byte back from global memory (an L1 hit).  Packets start
 * anywhere: the kernel loads the aligned vectors that cover a packet and
 * zeroes the bytes before its start, which the zero-filled window makes
 * a no-op.  Cuts and fingerprints come from re-inline.h, as on the CPU.
 */
#include <config.h>

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_runtime/gpu-gather.cuh"
#include "gpu_runtime/gpu-graph.cuh"
#include "gpu_services/re/re-private.h"
#include "gpu_services/re/re-kernels.cuh"

#define CK(CALL) gpu_cuda_status((CALL), #CALL)

struct cuda_chunker {
    int device;
    uint64_t *d_tables;         /* T[256], then U[256]. */
};

/* A submission's arguments for the batch's graph (below), followed in
 * the same pinned block by its n + 1 offsets and its descriptors: the
 * graph's first kernels pull them from there (mapped), so a submission
 * queues no copy. */
struct graph_args {
    uint32_t n;
    uint32_t n_bytes;
    uint32_t min_len;
    uint32_t span;              /* max_len - min_len, at least 1. */
    uint32_t n_slots;
    uint32_t seq;               /* For gpu_graph_done_kernel(). */
    uint32_t pull_offsets;      /* 0: the device has them (a rerun). */
    /* Payloads the graph gathers itself, from where they are (read in
     * place, or staged in the caller's pinned block): 'n_descs'
     * descriptors 'descs_at' bytes from the start of these arguments,
     * after the offsets. */
    uint32_t n_descs;
    uint32_t descs_at;
    struct gpu_re_enc_args enc; /* An encoder's batch. */
};

/* An encoder's state on the device (re-private.h). */
struct cuda_enc {
    struct gpu_re_enc_dev kd;
    /* Every batch of the encoder runs on this stream, whichever thread
     * submits it (under the caller's lock): the ring and the table are
     * one ordered stream of payloads.  (An event between the threads'
     * own streams cost two more runtime calls a submission.) */
    cudaStream_t stream;
    /* Or, with the chunker's 'device_launch', launched by the device:
     * one queue (gpu-runtime.h) for all the encoder's batches, whose
     * scheduler runs them one after the other in the order they were
     * submitted, as the stream would.  A submission the queue cannot
     * take (a block that must be copied first) waits for the queue to
     * drain and goes on the stream, and the next queued one waits for
     * the stream. */
    struct gpu_graph queue;
    bool queue_failed;          /* Could not be started: the stream. */
    bool stream_busy;           /* Work on 'stream' since the queue's. */
};

struct cuda_batch {
    uint8_t *d_data;
    uint32_t *d_offsets;
    uint32_t *d_order;
    uint32_t *d_count;          /* N_BUCKETS counters of the grouping. */
    uint32_t *d_cand;           /* Segment mode: a bit per byte. */
    uint16_t *d_ends;
    uint64_t *d_fps;
    struct gpu_re_hash *d_hashes;          /* GPU_RE_BATCH_HASHES. */
    uint32_t *d_payload_checks;
    struct gpu_re_enc_result *d_enc_results;   /* An encoder's batch. */
    uint8_t *d_enc_bodies;
    cudaStream_t copy;
    cudaEvent_t copied;
    cudaEvent_t done;
    bool fallback;

    /* The batch's submissions as one CUDA graph: a PMD thread's gather
     * (re_encode's) made ~14 runtime calls kernel by kernel, each
     * microseconds of the thread (gpu_runtime's struct gpu_graph); as
     * two copies in and one graph launch it makes 3.  Its kernels read
     * the sizes from 'd_args' and the last ones push the results into
     * the batch's pinned (mapped) host buffers. */
    struct gpu_graph graph;
    struct graph_args *h_args;  /* Pinned, with room for the offsets and
                                 * the descriptors... */
    const char *h_args_dev;     /* ...as the device addresses it... */
    struct graph_args *d_args;  /* ...and the device's copy of the
                                 * arguments and offsets. */
    bool graph_inputs;          /* The inputs on the device are the last
                                 * graph launch's (for a resubmission). */

    /* The caller's block of staged payloads as the device addresses it
     * (NULL: not pinned, so copied), for the last block seen. */
    const uint8_t *staged_host;
    const char *staged_dev;
};

static struct cuda_chunker *
cc(struct gpu_re_chunker *c)
{
    return (struct cuda_chunker *) c->pdata;
}

static struct cuda_batch *
cb(struct gpu_re_batch *b)
{
    return (struct cuda_batch *) b->pdata;
}

/* ---- Provider. ---- */

static int
cuda_init(struct gpu_re_chunker *c)
{
    struct cuda_chunker *x;
    int error;

    x = (struct cuda_chunker *) calloc(1, sizeof *x);
    if (!x) {
        return GPU_ERR_NOMEM;
    }
    x->device = c->cfg.device;
    error = CK(cudaSetDevice(x->device));
    if (!error) {
        error = CK(cudaMalloc((void **) &x->d_tables, 512 * sizeof(uint64_t)));
    }
    if (!error) {
        error = CK(cudaMemcpy(x->d_tables, c->tables.T, 256 * sizeof(uint64_t),
                              cudaMemcpyHostToDevice));
    }
    if (!error) {
        error = CK(cudaMemcpy(x->d_tables + 256, c->tables.U,
                              256 * sizeof(uint64_t),
                              cudaMemcpyHostToDevice));
    }
    if (error) {
        cudaFree(x->d_tables);
        free(x);
        return error;
    }
    c->pdata = x;
    return GPU_OK;
}

static void
cuda_uninit(struct gpu_re_chunker *c)
{
    struct cuda_chunker *x = cc(c);

    cudaSetDevice(x->device);
    cudaFree(x->d_tables);
    free(x);
}

static void
batch_free(struct gpu_re_batch *b, struct cuda_batch *x)
{
    gpu_graph_destroy(&x->graph);
    cudaFree(x->d_args);
    if (x->h_args) {
        cudaFreeHost(x->h_args);
    }
    cudaFree(x->d_data);
    cudaFree(x->d_offsets);
    cudaFree(x->d_order);
    cudaFree(x->d_count);
    cudaFree(x->d_cand);
    cudaFree(x->d_ends);
    cudaFree(x->d_fps);
    cudaFree(x->d_hashes);
    cudaFree(x->d_payload_checks);
    cudaFree(x->d_enc_results);
    cudaFree(x->d_enc_bodies);
    if (b->enc_results) {
        cudaFreeHost(b->enc_results);
    }
    if (b->enc_bodies) {
        cudaFreeHost(b->enc_bodies);
    }
    b->enc_results = NULL;
    b->enc_bodies = NULL;
    if (b->ends) {
        cudaFreeHost(b->ends);
    }
    if (b->fps) {
        cudaFreeHost(b->fps);
    }
    if (b->hashes) {
        cudaFreeHost(b->hashes);
    }
    if (b->payload_checks) {
        cudaFreeHost(b->payload_checks);
    }
    b->ends = NULL;
    b->fps = NULL;
    b->hashes = NULL;
    b->payload_checks = NULL;
    if (x->copy) {
        cudaStreamDestroy(x->copy);
    }
    if (x->copied) {
        cudaEventDestroy(x->copied);
    }
    if (x->done) {
        cudaEventDestroy(x->done);
    }
    free(x);
}

/* A result buffer of 'size' bytes on the device and its pinned copy on
 * the host. */
static int
alloc_result(void **dev, void **host, size_t size)
{
    int error = CK(cudaMalloc(dev, size));

    return error ? error : CK(cudaMallocHost(host, size));
}

static int
cuda_batch_init(struct gpu_re_batch *b)
{
    struct cuda_batch *x;
    size_t np = b->max_packets, ns = b->max_slots;
    int error;

    x = (struct cuda_batch *) calloc(1, sizeof *x);
    if (!x) {
        return GPU_ERR_NOMEM;
    }
    cudaSetDevice(cc(b->c)->device);
    /* Whole 16-byte vectors, one more past the end. */
    error = CK(cudaMalloc((void **) &x->d_data,
                          ((b->max_bytes + 15) & ~(size_t) 15) + 16));
    if (!error) {
        error = CK(cudaMalloc((void **) &x->d_offsets,
                              (np + 1) * sizeof *x->d_offsets));
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &x->d_order, np * sizeof *x->d_order));
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &x->d_count,
                              N_BUCKETS * sizeof *x->d_count));
    }
    if (!error && b->c->cfg.remap) {
        error = CK(cudaMalloc((void **) &x->d_cand,
                              (b->max_bytes / 32 + 2) * sizeof *x->d_cand));
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &x->d_ends, ns * sizeof *x->d_ends));
    }
    if (!error && b->want_fps) {
        error = CK(cudaMalloc((void **) &x->d_fps, ns * sizeof *x->d_fps));
    }
    if (!error) {
        error = CK(cudaMallocHost((void **) &b->ends, ns * sizeof *b->ends));
    }
    if (!error && b->want_fps) {
        error = CK(cudaMallocHost((void **) &b->fps, ns * sizeof *b->fps));
    }
    /* Chunk hashes by slot, payload hashes by packet. */
    if (!error && b->want_hashes) {
        error = alloc_result((void **) &x->d_hashes, (void **) &b->hashes,
                             ns * sizeof *b->hashes);
    }
    if (!error && b->want_hashes) {
        error = alloc_result((void **) &x->d_payload_checks,
                             (void **) &b->payload_checks,
                             np * sizeof *b->payload_checks);
    }
    /* Encoding: each payload's result and shim body. */
    if (!error && b->enc_dev) {
        error = alloc_result((void **) &x->d_enc_results,
                             (void **) &b->enc_results,
                             np * sizeof *b->enc_results);
    }
    if (!error && b->enc_dev) {
        error = alloc_result((void **) &x->d_enc_bodies,
                             (void **) &b->enc_bodies,
                             b->max_bytes + GPU_RE_ENC_SLACK * np);
    }
    if (!error) {
        error = CK(cudaStreamCreateWithFlags(&x->copy,
                                             cudaStreamNonBlocking));
    }
    if (!error) {
        error = CK(cudaEventCreateWithFlags(&x->copied,
                                            cudaEventDisableTiming));
    }
    if (!error) {
        error = CK(cudaEventCreateWithFlags(&x->done,
                                            cudaEventDisableTiming));
    }
    if (error) {
        batch_free(b, x);
        return error;
    }
    b->pdata = x;
    return GPU_OK;
}

static void
cuda_batch_uninit(struct gpu_re_batch *b)
{
    cudaSetDevice(cc(b->c)->device);
    batch_free(b, cb(b));
}

template <bool FPS>
static void
launch_chunk(struct gpu_re_chunker *c, struct cuda_batch *x, cudaStream_t s,
             const uint32_t *order, uint32_t n, uint32_t grid)
{
    switch (c->cfg.params.window) {
#define W(N) \
    case 16 * N: \
        chunk_kernel<N, FPS><<<grid, THREADS, 0, s>>>( \
            cc(c)->d_tables, x->d_data, x->d_offsets, order, n, c->kp, \
            x->d_ends, x->d_fps); \
        break;
    W(1) W(2) W(3) W(4)
#undef W
    default:
        chunk_kernel<0, FPS><<<grid, THREADS, 0, s>>>(
            cc(c)->d_tables, x->d_data, x->d_offsets, order, n, c->kp,
            x->d_ends, x->d_fps);
        break;
    }
}

/* Segment mode: candidate bits, then the cuts per packet. */
static void
launch_remap(struct gpu_re_batch *b, struct cuda_batch *x, cudaStream_t s)
{
    struct gpu_re_chunker *c = b->c;
    uint32_t n = b->n_packets;
    uint32_t seg = c->cfg.segment;
    uint32_t items = (b->n_bytes + seg - 1) / seg;
    uint32_t cgrid = (items + THREADS - 1) / THREADS;
    uint32_t grid = (n * 32 + THREADS - 1) / THREADS;    /* A warp each. */

    if (items) {
        switch (c->cfg.params.window) {
#define W(N) \
        case 16 * N: \
            cand_kernel<N><<<cgrid, THREADS, 0, s>>>( \
                cc(c)->d_tables, x->d_data, x->d_offsets, n, b->n_bytes, \
                seg, c->kp, x->d_cand); \
            break;
        W(1) W(2) W(3) W(4)
#undef W
        default:
            cand_kernel<0><<<cgrid, THREADS, 0, s>>>(
                cc(c)->d_tables, x->d_data, x->d_offsets, n, b->n_bytes,
                seg, c->kp, x->d_cand);
            break;
        }
    }
    if (b->want_fps) {
        select_kernel<true><<<grid, THREADS, 0, s>>>(
            cc(c)->d_tables, x->d_data, x->d_offsets, n, c->kp, x->d_cand,
            x->d_ends, x->d_fps);
    } else {
        select_kernel<false><<<grid, THREADS, 0, s>>>(
            cc(c)->d_tables, x->d_data, x->d_offsets, n, c->kp, x->d_cand,
            x->d_ends, x->d_fps);
    }
}

/* If the batch wants hashes: each chunk's and packet's, after the cuts,
 * in the chunk kernel's packet order ('order', or NULL). */
static void
launch_hash(struct gpu_re_batch *b, struct cuda_batch *x, cudaStream_t s,
            const uint32_t *order)
{
    uint32_t n = b->n_packets;

    if (b->want_hashes) {
        /* A warp a packet. */
        hash_kernel<<<(n * 32 + THREADS - 1) / THREADS, THREADS, 0, s>>>(
            x->d_data, x->d_offsets, order, n, b->c->cfg.params.min_chunk,
            x->d_ends, x->d_hashes, x->d_payload_checks);
    }
}

/* Queues the grouping and chunk kernels on 's'; the chunk kernel waits
 * for 'copied' (if not NULL) first, so the grouping overlaps the payload
 * copy. */
static int
launch_kernels(struct gpu_re_batch *b, cudaStream_t s, cudaEvent_t copied)
{
    struct gpu_re_chunker *c = b->c;
    struct cuda_batch *x = cb(b);
    uint32_t n = b->n_packets;
    uint32_t grid = (n + THREADS - 1) / THREADS;
    const uint32_t *order = NULL;

    if (c->cfg.remap) {
        if (copied) {
            int error = CK(cudaStreamWaitEvent(s, copied, 0));

            if (error) {
                return error;
            }
        }
        launch_remap(b, x, s);
        launch_hash(b, x, s, NULL);
        return CK(cudaGetLastError());
    }
    /* Group only when lengths differ (one length: nothing to gain). */
    if (c->cfg.sort && n > 1 && b->max_len != b->min_len) {
        uint32_t sgrid = (n + SORT_THREADS - 1) / SORT_THREADS;
        uint32_t span = b->max_len - b->min_len;
        int error = CK(cudaMemsetAsync(x->d_count, 0,
                                       N_BUCKETS * sizeof *x->d_count, s));

        if (error) {
            return error;
        }
        hist_kernel<<<sgrid, SORT_THREADS, 0, s>>>(x->d_offsets, n,
                                                   b->min_len, span,
                                                   x->d_count);
        scan_kernel<<<1, 32, 0, s>>>(x->d_count);
        scatter_kernel<<<sgrid, SORT_THREADS, 0, s>>>(x->d_offsets, n,
                                                      b->min_len, span,
                                                      x->d_count,
                                                      x->d_order);
        order = x->d_order;
    }
    if (copied) {
        int error = CK(cudaStreamWaitEvent(s, copied, 0));

        if (error) {
            return error;
        }
    }
    if (b->want_fps) {
        launch_chunk<true>(c, x, s, order, n, grid);
    } else {
        launch_chunk<false>(c, x, s, order, n, grid);
    }
    launch_hash(b, x, s, order);
    return CK(cudaGetLastError());
}

/* ---- The batch's graph: the bodies of re-kernels.cuh with the sizes
 * and offsets read from the device's copy of struct graph_args. ---- */

__device__ __forceinline__ const uint32_t *
args_offsets(const struct graph_args *a)
{
    return (const uint32_t *) (a + 1);
}

/* The graph's second kernel (after gpu_graph_args_kernel()): the
 * offsets, from the pinned block 'h_args' (mapped) to after the device's
 * arguments 'a', the payloads the descriptors there name (none if the
 * submission copied them all), and, if the arguments say so, an
 * encoder's table emptied (a new epoch) before the insert kernel. */
static __global__ void __launch_bounds__(THREADS)
graph_gather_kernel(struct graph_args *a, const char *__restrict__ h_args,
                    uint8_t *__restrict__ out, uint4 *__restrict__ table,
                    size_t table_vecs)
{
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t stride = gridDim.x * blockDim.x;

    if (a->pull_offsets) {
        const uint32_t *h_offsets = (const uint32_t *) (h_args + sizeof *a);
        uint32_t *d_offsets = (uint32_t *) (a + 1);

        for (uint32_t i = tid; i <= a->n; i += stride) {
            d_offsets[i] = h_offsets[i];
        }
    }
    if (table && a->enc.clear) {
        for (size_t i = tid; i < table_vecs; i += stride) {
            table[i] = make_uint4(0, 0, 0, 0);
        }
    }
    gpu_gather_body((const struct gpu_gather_desc *) (h_args + a->descs_at),
                    a->n_descs, out);
}

__global__ void __launch_bounds__(SORT_THREADS)
graph_hist_kernel(const struct graph_args *a, uint32_t *count)
{
    hist_body(args_offsets(a), a->n, a->min_len, a->span, count);
}

__global__ void __launch_bounds__(SORT_THREADS)
graph_scatter_kernel(const struct graph_args *a, uint32_t *cursor,
                     uint32_t *__restrict__ order)
{
    scatter_body(args_offsets(a), a->n, a->min_len, a->span, cursor,
                 order);
}

template <int W16, bool FPS>
__global__ void __launch_bounds__(THREADS)
graph_chunk_kernel(const uint64_t *__restrict__ tables,
                   const uint8_t *__restrict__ data,
                   const struct graph_args *a,
                   const uint32_t *__restrict__ order,
                   struct gpu_re_kparams kp, uint16_t *__restrict__ ends,
                   uint64_t *__restrict__ fps)
{
    chunk_body<W16, FPS>(tables, data, args_offsets(a), order, a->n, kp,
                         ends, fps);
}

template <int W16>
__global__ void __launch_bounds__(THREADS)
graph_cand_kernel(const uint64_t *__restrict__ tables,
                  const uint8_t *__restrict__ data,
                  const struct graph_args *a, uint32_t seg,
                  struct gpu_re_kparams kp, uint32_t *__restrict__ cand)
{
    cand_body<W16>(tables, data, args_offsets(a), a->n, a->n_bytes, seg, kp,
                   cand);
}

template <bool FPS>
__global__ void __launch_bounds__(THREADS)
graph_select_kernel(const uint64_t *__restrict__ tables,
                    const uint8_t *__restrict__ data,
                    const struct graph_args *a, struct gpu_re_kparams kp,
                    const uint32_t *__restrict__ cand,
                    uint16_t *__restrict__ ends, uint64_t *__restrict__ fps)
{
    select_body<FPS>(tables, data, args_offsets(a), a->n, kp, cand, ends,
                     fps);
}

/* The cuts, then their hashes, in one node: both take a warp a packet,
 * so each warp hashes the chunks it has just cut, once its lanes see
 * lane 0's ends (__syncwarp() orders their memory), and the graph saves
 * a node (~2 us). */
template <bool FPS>
__global__ void __launch_bounds__(THREADS)
graph_select_hash_kernel(const uint64_t *__restrict__ tables,
                         const uint8_t *__restrict__ data,
                         const struct graph_args *a,
                         struct gpu_re_kparams kp,
                         const uint32_t *__restrict__ cand,
                         uint16_t *__restrict__ ends,
                         uint64_t *__restrict__ fps,
                         struct gpu_re_hash *__restrict__ hashes,
                         uint32_t *__restrict__ payload_checks)
{
    select_body<FPS>(tables, data, args_offsets(a), a->n, kp, cand, ends,
                     fps);
    __syncwarp();
    hash_body(data, args_offsets(a), NULL, a->n, kp.min_chunk, ends,
              hashes, payload_checks);
}

__global__ void __launch_bounds__(THREADS)
graph_hash_kernel(const uint8_t *__restrict__ data,
                  const struct graph_args *a,
                  const uint32_t *__restrict__ order, uint32_t min_chunk,
                  const uint16_t *__restrict__ ends,
                  struct gpu_re_hash *__restrict__ hashes,
                  uint32_t *__restrict__ payload_checks)
{
    hash_body(data, args_offsets(a), order, a->n, min_chunk, ends, hashes,
              payload_checks);
}

/* Copies the results of a launch ('n_slots' cuts, fingerprints and chunk
 * hashes, 'n' payload hashes; NULL: not wanted) into the host's pinned
 * buffers, as mapped: the device's writes to host memory are cheap, and
 * this replaces up to four copies out. */
__global__ void
graph_push_kernel(const struct graph_args *a,
                  const uint16_t *__restrict__ ends, uint16_t *h_ends,
                  const uint64_t *__restrict__ fps, uint64_t *h_fps,
                  const struct gpu_re_hash *__restrict__ hashes,
                  struct gpu_re_hash *h_hashes,
                  const uint32_t *__restrict__ payload_checks,
                  uint32_t *h_payload_checks)
{
    uint32_t stride = gridDim.x * blockDim.x;
    uint32_t first = blockIdx.x * blockDim.x + threadIdx.x;

    for (uint32_t i = first; h_ends && i < a->n_slots; i += stride) {
        h_ends[i] = ends[i];
        if (h_fps) {
            h_fps[i] = fps[i];
        }
        if (h_hashes) {
            h_hashes[i] = hashes[i];
        }
    }
    for (uint32_t i = first; h_payload_checks && i < a->n; i += stride) {
        h_payload_checks[i] = payload_checks[i];
    }
}

__global__ void __launch_bounds__(THREADS)
graph_enc_insert_kernel(struct gpu_re_enc_dev kd, const struct graph_args *a,
                        const uint16_t *__restrict__ ends,
                        const struct gpu_re_hash *__restrict__ hashes)
{
    enc_insert_body(kd, args_offsets(a), a->n, ends, hashes, &a->enc);
}

__global__ void __launch_bounds__(THREADS)
graph_enc_shim_kernel(struct gpu_re_enc_dev kd,
                      const uint8_t *__restrict__ data,
                      const struct graph_args *a,
                      const uint16_t *__restrict__ ends,
                      const struct gpu_re_hash *__restrict__ hashes,
                      uint8_t *__restrict__ bodies,
                      struct gpu_re_enc_result *__restrict__ results)
{
    enc_shim_body(kd, data, args_offsets(a), a->n, ends, hashes, &a->enc,
                  bodies, results);
}

/* After the encoding: appends the payloads to the ring and copies the
 * results, bodies and checks to the host, in one node (the two touch
 * nothing of each other's; each node of a graph costs ~2 us). */
__global__ void __launch_bounds__(THREADS)
graph_enc_out_kernel(struct gpu_re_enc_dev kd,
                     const uint8_t *__restrict__ data,
                     const struct graph_args *a,
                     const struct gpu_re_enc_result *__restrict__ results,
                     const uint8_t *__restrict__ bodies,
                     const uint32_t *__restrict__ payload_checks,
                     struct gpu_re_enc_result *h_results, uint8_t *h_bodies,
                     uint32_t *h_payload_checks)
{
    enc_append_body(kd, data, args_offsets(a), a->n, &a->enc);
    enc_push_body(args_offsets(a), a->n, results, bodies, payload_checks,
                  h_results, h_bodies, h_payload_checks);
}

/* The device address of pinned host buffer 'p' (NULL for NULL). */
template <typename T>
static T *
mapped(T *p, int *error)
{
    void *d = NULL;

    if (p && !*error) {
        *error = CK(cudaHostGetDevicePointer(&d, p, 0));
    }
    return (T *) d;
}

/* Queues the chain of 'b''s configuration on 'cs' (capturing), with the
 * largest grids the batch can need: the kernels return past the work
 * 'd_args' gives them. */
static int
graph_queue(struct gpu_re_batch *b, struct cuda_batch *x, cudaStream_t cs)
{
    struct gpu_re_chunker *c = b->c;
    const uint64_t *tables = cc(c)->d_tables;
    const struct graph_args *a = x->d_args;
    uint32_t np = b->max_packets;
    uint32_t grid = (np + THREADS - 1) / THREADS;
    const uint32_t *order = NULL;
    struct cuda_enc *ce = (struct cuda_enc *) b->enc_dev;
    int error = GPU_OK;

    static_assert(sizeof *a % 4 == 0, "the arguments are whole words");
    gpu_graph_args_kernel<<<1, THREADS, 0, cs>>>(
        (const uint32_t *) x->h_args_dev, (uint32_t *) x->d_args,
        sizeof *a / 4);
    graph_gather_kernel<<<GPU_GATHER_BLOCKS, THREADS, 0, cs>>>(
        x->d_args, x->h_args_dev, x->d_data,
        ce ? (uint4 *) ce->kd.table : NULL,
        ce ? ((ce->kd.mask + 1) * GPU_RE_ENC_WAYS * sizeof *ce->kd.table
              / sizeof(uint4)) : 0);
    if (c->cfg.remap) {
        uint32_t seg = c->cfg.segment;
        uint32_t items = (b->max_bytes + seg - 1) / seg;
        uint32_t cgrid = (items + THREADS - 1) / THREADS;

        switch (c->cfg.params.window) {
#define W(N) \
        case 16 * N: \
            graph_cand_kernel<N><<<cgrid ? cgrid : 1, THREADS, 0, cs>>>( \
                tables, x->d_data, a, seg, c->kp, x->d_cand); \
            break;
        W(1) W(2) W(3) W(4)
#undef W
        default:
            graph_cand_kernel<0><<<cgrid ? cgrid : 1, THREADS, 0, cs>>>(
                tables, x->d_data, a, seg, c->kp, x->d_cand);
            break;
        }
        /* A warp a packet, hashing its chunks too if wanted. */
        uint32_t sgrid = (np * 32 + THREADS - 1) / THREADS;

        if (b->want_hashes && b->want_fps) {
            graph_select_hash_kernel<true><<<sgrid, THREADS, 0, cs>>>(
                tables, x->d_data, a, c->kp, x->d_cand, x->d_ends, x->d_fps,
                x->d_hashes, x->d_payload_checks);
        } else if (b->want_hashes) {
            graph_select_hash_kernel<false><<<sgrid, THREADS, 0, cs>>>(
                tables, x->d_data, a, c->kp, x->d_cand, x->d_ends, x->d_fps,
                x->d_hashes, x->d_payload_checks);
        } else if (b->want_fps) {
            graph_select_kernel<true><<<sgrid, THREADS, 0, cs>>>(
                tables, x->d_data, a, c->kp, x->d_cand, x->d_ends, x->d_fps);
        } else {
            graph_select_kernel<false><<<sgrid, THREADS, 0, cs>>>(
                tables, x->d_data, a, c->kp, x->d_cand, x->d_ends, x->d_fps);
        }
    } else {
        if (c->cfg.sort) {
            uint32_t sgrid = (np + SORT_THREADS - 1) / SORT_THREADS;

            error = CK(cudaMemsetAsync(x->d_count, 0,
                                       N_BUCKETS * sizeof *x->d_count, cs));
            graph_hist_kernel<<<sgrid, SORT_THREADS, 0, cs>>>(a, x->d_count);
            scan_kernel<<<1, 32, 0, cs>>>(x->d_count);
            graph_scatter_kernel<<<sgrid, SORT_THREADS, 0, cs>>>(
                a, x->d_count, x->d_order);
            order = x->d_order;
        }
        switch (c->cfg.params.window) {
#define W(N) \
        case 16 * N: \
            if (b->want_fps) { \
                graph_chunk_kernel<N, true><<<grid, THREADS, 0, cs>>>( \
                    tables, x->d_data, a, order, c->kp, x->d_ends, \
                    x->d_fps); \
            } else { \
                graph_chunk_kernel<N, false><<<grid, THREADS, 0, cs>>>( \
                    tables, x->d_data, a, order, c->kp, x->d_ends, \
                    x->d_fps); \
            } \
            break;
        W(1) W(2) W(3) W(4)
#undef W
        default:
            if (b->want_fps) {
                graph_chunk_kernel<0, true><<<grid, THREADS, 0, cs>>>(
                    tables, x->d_data, a, order, c->kp, x->d_ends, x->d_fps);
            } else {
                graph_chunk_kernel<0, false><<<grid, THREADS, 0, cs>>>(
                    tables, x->d_data, a, order, c->kp, x->d_ends, x->d_fps);
            }
            break;
        }
    }
    if (b->want_hashes && !c->cfg.remap) {
        /* A warp a packet (segment mode hashed with its cuts). */
        uint32_t hgrid = (np * 32 + THREADS - 1) / THREADS;

        graph_hash_kernel<<<hgrid, THREADS, 0, cs>>>(
            x->d_data, a, order, c->cfg.params.min_chunk, x->d_ends,
            x->d_hashes, x->d_payload_checks);
    }

    /* Encoding: the host needs only each payload's result, its shim's
     * body and the payload's hash (the shim's check), not the cuts. */
    bool enc = ce != NULL;

    if (enc) {
        struct gpu_re_enc_dev kd = ce->kd;
        struct gpu_re_enc_result *h_results = mapped(b->enc_results,
                                                     &error);
        uint8_t *h_bodies = mapped(b->enc_bodies, &error);
        uint32_t *h_checks = mapped(b->want_hashes ? b->payload_checks
                                    : NULL, &error);
        uint32_t agrid = (b->max_bytes + THREADS - 1) / THREADS;
        uint32_t wgrid = (np * 32 + THREADS - 1) / THREADS;
        uint32_t ogrid = agrid > wgrid ? agrid : wgrid;

        /* Insert and encode (a warp a payload), then append: the
         * ring's old bytes stay for the encoding. */
        graph_enc_insert_kernel<<<wgrid, THREADS, 0, cs>>>(kd, a, x->d_ends,
                                                           x->d_hashes);
        graph_enc_shim_kernel<<<wgrid, THREADS, 0, cs>>>(
            kd, x->d_data, a, x->d_ends, x->d_hashes, x->d_enc_bodies,
            x->d_enc_results);
        if (!error) {
            graph_enc_out_kernel<<<ogrid < 264 ? ogrid : 264, THREADS, 0,
                                   cs>>>(
                kd, x->d_data, a, x->d_enc_results, x->d_enc_bodies,
                x->d_payload_checks, h_results, h_bodies, h_checks);
        }
    }

    uint16_t *h_ends = mapped(enc ? NULL : b->ends, &error);
    uint64_t *h_fps = mapped(b->want_fps ? b->fps : NULL, &error);
    struct gpu_re_hash *h_hashes
        = mapped(b->want_hashes && !enc ? b->hashes : NULL, &error);
    uint32_t *h_payload_checks
        = mapped(b->want_hashes && !enc ? b->payload_checks : NULL, &error);
    uint32_t most = b->max_slots > np ? b->max_slots : np;
    uint32_t pgrid = (most + THREADS - 1) / THREADS;

    if (!error && (h_ends || h_fps || h_hashes || h_payload_checks)) {
        /* Not for the encoding, whose last node pushed what it needs. */
        graph_push_kernel<<<pgrid < 264 ? pgrid : 264, THREADS, 0, cs>>>(
            a, x->d_ends, h_ends, x->d_fps, h_fps, x->d_hashes, h_hashes,
            x->d_payload_checks, h_payload_checks);
    }
    if (!error) {
        gpu_graph_done_kernel<<<1, 1, 0, cs>>>(&a->seq, x->graph.flag_dev);
    }
    return error ? error : CK(cudaGetLastError());
}

/* Where the descriptors go in the arguments of a submission of 'n'
 * payloads: after the offsets, 16-byte aligned. */
static size_t
args_descs_at(size_t n)
{
    return ((sizeof(struct graph_args) + (n + 1) * sizeof(uint32_t) + 15)
            & ~(size_t) 15);
}

/* The batch's argument blocks, pinned and on the device, once. */
static int
args_alloc(struct gpu_re_batch *b, struct cuda_batch *x)
{
    size_t size = (args_descs_at(b->max_packets)
                   + b->max_packets * sizeof(struct gpu_gather_desc));
    int error;

    if (x->h_args) {
        return GPU_OK;
    }
    error = CK(cudaMallocHost((void **) &x->h_args, size));
    if (!error) {
        x->h_args_dev = mapped((char *) x->h_args, &error);
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &x->d_args, size));
    }
    if (error && x->h_args) {
        cudaFreeHost(x->h_args);
        x->h_args = NULL;
    }
    return error;
}

/* The device's address of the caller's block of staged payloads, or
 * NULL if it has none (not pinned: the block is copied). */
static const char *
staged_dev(struct gpu_re_batch *b, struct cuda_batch *x)
{
    if (x->staged_host != b->data) {
        void *d = NULL;

        x->staged_host = b->data;
        if (cudaHostGetDevicePointer(&d, (void *) b->data, 0)
            != cudaSuccess) {
            cudaGetLastError();
            d = NULL;
        }
        x->staged_dev = (const char *) d;
    }
    return x->staged_dev;
}

/* Writes the descriptors of the payloads the device gathers for the
 * current submission into the arguments 'a' (pinned), after its offsets:
 * those read in place, and if 'staged' those staged there too.  Returns
 * the arguments' bytes with them, or 0 (GPU_ERR_INVALID in '*error') if
 * a payload is not where the device may read it. */
static size_t
args_put_descs(struct gpu_re_batch *b, struct graph_args *a,
               const char *staged, int *error)
{
    size_t at = args_descs_at(b->n_packets);
    uint32_t n_descs;

    *error = gpu_gather_descs(b->offsets, b->n_packets, b->srcs, staged,
                              (struct gpu_gather_desc *) ((char *) a + at),
                              &n_descs);
    a->n_descs = *error ? 0 : n_descs;
    a->descs_at = at;
    return *error ? 0 : at + n_descs * sizeof(struct gpu_gather_desc);
}

/* Builds 'b''s graph and its argument blocks, once, for the device to
 * launch too if 'device_launch' (an encoder's batch: then the encoder's
 * queue is started if it has none).  Returns GPU_OK, or an error after
 * which the batch goes on kernel by kernel. */
static int
graph_build(struct gpu_re_batch *b, struct cuda_batch *x, bool device_launch)
{
    struct cuda_enc *ce = (struct cuda_enc *) b->enc_dev;
    void *capture;
    int error;

    error = args_alloc(b, x);
    if (!error) {
        error = gpu_graph_capture_begin(&x->graph, &capture);
    }
    if (!error) {
        error = graph_queue(b, x, (cudaStream_t) capture);
        error = (device_launch
                 ? gpu_graph_capture_end_device(&x->graph, capture, error)
                 : gpu_graph_capture_end(&x->graph, capture, error));
    }
    if (!error && device_launch && !ce->queue.sched_exec
        && !ce->queue_failed) {
        ce->queue_failed = gpu_graph_start_queue(&ce->queue) != GPU_OK;
    }
    if (error) {
        x->graph.broken = true;
    }
    return error;
}

/* Launches 'b''s graph, whose arguments are written: by the encoder's
 * queue where it can ('queue_ok': nothing to copy first), else on 's'
 * from this thread, after the queue's launches if the encoder has a
 * queue. */
static int
graph_launch_one(struct gpu_re_batch *b, struct cuda_batch *x,
                 cudaStream_t s, bool queue_ok)
{
    struct cuda_enc *ce = (struct cuda_enc *) b->enc_dev;
    struct gpu_graph *q = ce && ce->queue.sched_exec ? &ce->queue : NULL;
    int error;

    if (q && queue_ok && x->graph.device_launchable) {
        if (ce->stream_busy) {
            error = CK(cudaStreamSynchronize(ce->stream));
            if (error) {
                return error;
            }
            ce->stream_busy = false;
        }
        uint64_t n_host_launches = q->n_host_launches;

        error = gpu_graph_queue_launch(q, &x->graph);
        if (!error) {
            __atomic_fetch_add(&b->c->n_device_launches, 1,
                               __ATOMIC_RELAXED);
            __atomic_fetch_add(&b->c->n_scheduler_launches,
                               q->n_host_launches - n_host_launches,
                               __ATOMIC_RELAXED);
        }
        return error;
    }
    error = q ? gpu_graph_queue_drain(q) : GPU_OK;
    if (!error) {
        error = gpu_graph_launch_on_stream(&x->graph, s);
    }
    if (!error && ce) {
        ce->stream_busy = true;
    }
    return error;
}

/* Submits 'b' as its graph, whose first kernels pull the arguments and
 * offsets from the batch's pinned block: the launch alone, or, if the
 * payloads are not all where the device may read them, a copy of the
 * block first.  With payloads read in place the graph gathers them all
 * by descriptors (in the pinned block too) from where they are, the
 * staged ones from the caller's pinned block, and nothing is copied.
 * 'again': the inputs on the device are the last graph launch's; only
 * the arguments go again (a new sequence number). */
static int
graph_launch(struct gpu_re_batch *b, struct cuda_batch *x, cudaStream_t s,
             bool again)
{
    struct graph_args *a = x->h_args;
    size_t n = b->n_packets;
    bool copy_data = !again;
    int error = GPU_OK;

    a->n_descs = 0;
    a->pull_offsets = !again;
    a->enc.clear = 0;
    if (!again) {
        a->n = n;
        a->n_bytes = b->n_bytes;
        a->min_len = b->min_len;
        a->span = b->max_len > b->min_len ? b->max_len - b->min_len : 1;
        a->n_slots = gpu_re_n_slots(b->n_bytes, n,
                                    b->c->cfg.params.min_chunk);
        a->enc = b->enc_args;
        memcpy(a + 1, b->offsets, (n + 1) * sizeof *b->offsets);

        /* With payloads read in place, or for an encoder (whose calls
         * the device may launch: nothing to queue before), a pinned
         * block is gathered by the graph too, in pieces if nothing is
         * read in place.  A plain chunking batch of the whole block
         * goes by one copy, the bus's DMA being faster than the graph's
         * reads of mapped memory for megabytes. */
        if (b->srcs || b->enc_dev) {
            const char *staged = staged_dev(b, x);

            args_put_descs(b, a, staged, &error);
            if (error) {
                return error;
            }
            copy_data = !staged;
        }
    }
    a->seq = gpu_graph_next_seq(&x->graph);
    if (copy_data) {
        /* Holes where the payloads read in place go, if any: the graph
         * gathers them after. */
        error = CK(cudaMemcpyAsync(x->d_data, b->data, b->n_bytes,
                                   cudaMemcpyHostToDevice, s));
    }
    if (!error) {
        error = graph_launch_one(b, x, s, !copy_data);
    }
    if (!error) {
        x->graph_inputs = true;
        __atomic_fetch_add(&b->c->n_graph_launches, 1, __ATOMIC_RELAXED);
    }
    return error;
}

/* True if 'b''s submission goes as its graph (built here if need be). */
static bool
graph_usable(struct gpu_re_batch *b, struct cuda_batch *x, bool again)
{
    if (again) {
        return x->graph_inputs;
    }
    /* An encoding batch has no kernel-by-kernel path. */
    bool device_launch = b->enc_dev && b->c->cfg.device_launch;

    return ((!b->c->cfg.kernel_by_kernel || b->enc_dev) && !x->graph.broken
            && (x->graph.exec
                || (device_launch && !graph_build(b, x, true))
                || !graph_build(b, x, false)));
}

static int
launch(struct gpu_re_batch *b, cudaStream_t s, bool again)
{
    struct cuda_batch *x = cb(b);
    size_t n = b->n_packets;
    size_t n_slots = gpu_re_n_slots(b->n_bytes, n,
                                    b->c->cfg.params.min_chunk);
    int error = GPU_OK;

    if (graph_usable(b, x, again)) {
        return graph_launch(b, x, s, again);
    }
    x->graph_inputs = false;
    if (b->enc_dev) {
        return GPU_ERR_DEVICE;
    }
    if (!again) {
        /* Metadata first: the sort needs only the offsets and runs
         * while the payload is still on its way. */
        error = CK(cudaMemcpyAsync(x->d_offsets, b->offsets,
                                   (n + 1) * sizeof *b->offsets,
                                   cudaMemcpyHostToDevice, s));
        if (!error) {
            error = CK(cudaMemcpyAsync(x->d_data, b->data, b->n_bytes,
                                       cudaMemcpyHostToDevice, x->copy));
        }
        if (!error && b->srcs) {
            /* Then the payloads read in place, into the copy's holes. */
            size_t size = 0;

            error = args_alloc(b, x);
            if (!error) {
                size = args_put_descs(b, x->h_args, NULL, &error);
            }
            if (!error) {
                error = CK(cudaMemcpyAsync(x->d_args, x->h_args, size,
                                           cudaMemcpyHostToDevice,
                                           x->copy));
            }
            if (!error) {
                gpu_gather_kernel<<<GPU_GATHER_BLOCKS, THREADS, 0, x->copy>>>(
                    (const struct gpu_gather_desc *)
                    ((const char *) x->d_args + x->h_args->descs_at),
                    x->h_args->n_descs, x->d_data);
                error = CK(cudaGetLastError());
            }
        }
        if (!error) {
            error = CK(cudaEventRecord(x->copied, x->copy));
        }
    }
    if (!error) {
        error = launch_kernels(b, s, again ? NULL : x->copied);
    }
    if (!error && !again) {
        error = CK(cudaMemcpyAsync(b->ends, x->d_ends,
                                   n_slots * sizeof *b->ends,
                                   cudaMemcpyDeviceToHost, s));
        if (!error && b->want_fps) {
            error = CK(cudaMemcpyAsync(b->fps, x->d_fps,
                                       n_slots * sizeof *b->fps,
                                       cudaMemcpyDeviceToHost, s));
        }
        /* 16 bytes a slot: about half the payload's bytes back, on the
         * link's idle direction. */
        if (!error && b->want_hashes) {
            error = CK(cudaMemcpyAsync(b->hashes, x->d_hashes,
                                       n_slots * sizeof *b->hashes,
                                       cudaMemcpyDeviceToHost, s));
        }
        if (!error && b->want_hashes) {
            error = CK(cudaMemcpyAsync(b->payload_checks,
                                       x->d_payload_checks,
                                       n * sizeof *b->payload_checks,
                                       cudaMemcpyDeviceToHost, s));
        }
    }
    if (!error) {
        error = CK(cudaEventRecord(x->done, s));
    }
    return error;
}

static int
cuda_submit(struct gpu_re_batch *b, struct gpu_stream *gs, bool again)
{
    struct cuda_batch *x = cb(b);
    struct gpu_stream *own = gs ? gs : gpu_stream_per_thread();
    cudaStream_t s = own ? (cudaStream_t) gpu_stream_native(own) : 0;
    int error;

    if (b->enc_dev) {
        s = ((struct cuda_enc *) b->enc_dev)->stream;
    }
    cudaSetDevice(cc(b->c)->device);
    x->fallback = false;
    b->enc_failed = false;
    error = launch(b, s, again);
    if (error) {
        if (again) {
            return error;
        }
        /* The CPU chunks this batch when it is waited for. */
        cudaStreamSynchronize(s);
        cudaStreamSynchronize(x->copy);
        cudaGetLastError();
        x->fallback = true;
    }
    return GPU_OK;
}

/* Completes the batch's submission, whose event 'done' ended with
 * 'error' (or whose launch failed): on the CPU if the device failed. */
static int
cuda_complete(struct gpu_re_batch *b, int error)
{
    struct cuda_batch *x = cb(b);

    if (x->fallback || error) {
        __atomic_fetch_add(&b->c->n_fallbacks, 1, __ATOMIC_RELAXED);
        if (b->enc_dev) {
            /* The encoder's state on the device is not to be trusted:
             * the host sends the batch raw (no cuts needed) and starts a
             * new epoch. */
            b->enc_failed = true;
        } else {
            gpu_re_cpu_chunk_batch(b);
        }
        x->fallback = false;
    }
    return GPU_OK;
}

static int
cuda_wait(struct gpu_re_batch *b)
{
    struct cuda_batch *x = cb(b);

    if (!x->fallback && x->graph.in_flight) {
        return cuda_complete(b, gpu_graph_wait(&x->graph));
    }
    return cuda_complete(b, x->fallback
                            ? GPU_OK : CK(cudaEventSynchronize(x->done)));
}

static int
cuda_poll(struct gpu_re_batch *b)
{
    struct cuda_batch *x = cb(b);
    cudaError_t e = cudaSuccess;

    if (!x->fallback && x->graph.in_flight) {
        int status = gpu_graph_poll(&x->graph);

        return status == GPU_ERR_BUSY ? status : cuda_complete(b, status);
    }
    if (!x->fallback) {
        e = cudaEventQuery(x->done);
        if (e == cudaErrorNotReady) {
            return GPU_ERR_BUSY;
        }
    }
    return cuda_complete(b, x->fallback ? GPU_OK : CK(e));
}

static void
cuda_enc_uninit(struct gpu_re_chunker *c, void *dev)
{
    struct cuda_enc *ce = (struct cuda_enc *) dev;

    if (ce) {
        cudaSetDevice(cc(c)->device);
        /* Its scheduler stops once the launches queued are done. */
        gpu_graph_destroy(&ce->queue);
        if (ce->stream) {
            cudaStreamSynchronize(ce->stream);
            cudaStreamDestroy(ce->stream);
        }
        cudaFree(ce->kd.ring);
        cudaFree(ce->kd.table);
        free(ce);
    }
}

static int
cuda_enc_init(struct gpu_re_chunker *c, uint64_t cache_size,
              uint64_t n_buckets, uint32_t min_ref, void **devp)
{
    struct cuda_enc *ce = (struct cuda_enc *) calloc(1, sizeof *ce);
    size_t table_size = n_buckets * GPU_RE_ENC_WAYS * sizeof *ce->kd.table;
    int error;

    if (!ce) {
        return GPU_ERR_NOMEM;
    }
    cudaSetDevice(cc(c)->device);
    ce->kd.size = cache_size;
    ce->kd.mask = n_buckets - 1;
    ce->kd.min_chunk = c->cfg.params.min_chunk;
    ce->kd.min_ref = min_ref;
    error = CK(cudaMalloc((void **) &ce->kd.ring, cache_size));
    if (!error) {
        error = CK(cudaMalloc((void **) &ce->kd.table, table_size));
    }
    if (!error) {
        error = CK(cudaMemset(ce->kd.table, 0, table_size));
    }
    if (!error) {
        error = CK(cudaStreamCreateWithFlags(&ce->stream,
                                             cudaStreamNonBlocking));
    }
    if (error) {
        cuda_enc_uninit(c, ce);
        return error;
    }
    *devp = ce;
    return GPU_OK;
}

extern "C" {
const struct gpu_re_provider gpu_re_cuda_provider = {
    "cuda",
    GPU_RE_BACKEND_CUDA,
    cuda_init,
    cuda_uninit,
    cuda_batch_init,
    cuda_batch_uninit,
    cuda_submit,
    cuda_wait,
    cuda_poll,
    cuda_enc_init,
    cuda_enc_uninit,
};
}
