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

#include "gpu_services/re/re-private.h"
#include "gpu_services/re/re-kernels.cuh"

#define CK(CALL) gpu_cuda_status((CALL), #CALL)

struct cuda_chunker {
    int device;
    uint64_t *d_tables;         /* T[256], then U[256]. */
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
    struct gpu_re_hash *d_payload_hashes;
    cudaStream_t copy;
    cudaEvent_t copied;
    cudaEvent_t done;
    bool fallback;
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
    cudaFree(x->d_data);
    cudaFree(x->d_offsets);
    cudaFree(x->d_order);
    cudaFree(x->d_count);
    cudaFree(x->d_cand);
    cudaFree(x->d_ends);
    cudaFree(x->d_fps);
    cudaFree(x->d_hashes);
    cudaFree(x->d_payload_hashes);
    if (b->ends) {
        cudaFreeHost(b->ends);
    }
    if (b->fps) {
        cudaFreeHost(b->fps);
    }
    if (b->hashes) {
        cudaFreeHost(b->hashes);
    }
    if (b->payload_hashes) {
        cudaFreeHost(b->payload_hashes);
    }
    b->ends = NULL;
    b->fps = NULL;
    b->hashes = NULL;
    b->payload_hashes = NULL;
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
        error = alloc_result((void **) &x->d_payload_hashes,
                             (void **) &b->payload_hashes,
                             np * sizeof *b->payload_hashes);
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
    uint32_t grid = (n + THREADS - 1) / THREADS;

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
        hash_kernel<<<(n + THREADS - 1) / THREADS, THREADS, 0, s>>>(
            x->d_data, x->d_offsets, order, n, b->c->cfg.params.min_chunk,
            x->d_ends, x->d_hashes, x->d_payload_hashes);
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

static int
launch(struct gpu_re_batch *b, cudaStream_t s, bool again)
{
    struct cuda_batch *x = cb(b);
    size_t n = b->n_packets;
    size_t n_slots = gpu_re_n_slots(b->n_bytes, n,
                                    b->c->cfg.params.min_chunk);
    int error = GPU_OK;

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
            error = CK(cudaMemcpyAsync(b->payload_hashes,
                                       x->d_payload_hashes,
                                       n * sizeof *b->payload_hashes,
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

    cudaSetDevice(cc(b->c)->device);
    x->fallback = false;
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
        gpu_re_cpu_chunk_batch(b);
        x->fallback = false;
    }
    return GPU_OK;
}

static int
cuda_wait(struct gpu_re_batch *b)
{
    struct cuda_batch *x = cb(b);

    return cuda_complete(b, x->fallback
                            ? GPU_OK : CK(cudaEventSynchronize(x->done)));
}

static int
cuda_poll(struct gpu_re_batch *b)
{
    struct cuda_batch *x = cb(b);
    cudaError_t e = cudaSuccess;

    if (!x->fallback) {
        e = cudaEventQuery(x->done);
        if (e == cudaErrorNotReady) {
            return GPU_ERR_BUSY;
        }
    }
    return cuda_complete(b, x->fallback ? GPU_OK : CK(e));
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
};
}
