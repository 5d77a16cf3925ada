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
 * The stand-in for a gather's graph that the standalone submission
 * benchmarks (cuda-submit-designs.cu, cuda-device-launch.cu) submit in
 * their different ways: a kernel pulls the gather from mapped host
 * memory, three stand for gpu_ids' scan, confirm and rules kernels, and
 * a last one pushes the verdicts and the sequence number to mapped
 * memory, where the submitting thread sees the gather done.
 */
#ifndef CUDA_BENCH_GATHER_CUH
#define CUDA_BENCH_GATHER_CUH 1

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, \
            cudaGetErrorString(e_)); exit(1); } } while (0)

/* A gather's argument block, in mapped host memory. */
struct args {
    uint32_t n_bytes;
    uint32_t n_packets;
    uint32_t seq;
};

static inline double
now_ns(void)
{
    return std::chrono::duration<double, std::nano>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* Stands for the scan, confirm and rules kernels: touches the data.  Its
 * arguments are the device's copy that pull() made: a read of mapped
 * memory by every thread would cross PCIe for each. */
__global__ void
work(const uint8_t *d, const args *a, uint32_t *o)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i * 64 < a->n_bytes) {
        o[i & 4095] += d[i * 64];
    }
}

/* Copies the argument block from mapped host memory to 'da', for the
 * kernels after it.  One thread: when each of pull()'s 264 blocks read
 * the block's words itself, the reads of the same words crossed the bus
 * one after the other, ~800 us in all on the H200 machine, where a grid
 * reading distinct words pulls 20 kB in ~9 us (docs/PERFORMANCE.md,
 * seventeenth session). */
__global__ void
pull_args(const volatile args *a, args *da)
{
    da->n_bytes = a->n_bytes;
    da->n_packets = a->n_packets;
    da->seq = a->seq;
}

/* Pulls da->n_bytes from mapped host memory into device memory. */
__global__ void
pull(const uint4 *h, uint4 *d, const args *da)
{
    uint32_t n = (da->n_bytes + 15) / 16;

    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += gridDim.x * blockDim.x) {
        d[i] = h[i];
    }
}

/* Pushes the verdicts to mapped host memory, then the sequence number. */
__global__ void
push(const uint2 *d, uint2 *h, const args *a, volatile uint32_t *done)
{
    for (uint32_t i = threadIdx.x; i < a->n_packets; i += blockDim.x) {
        h[i] = d[i];
    }
    __threadfence_system();
    __syncthreads();
    if (!threadIdx.x) {
        *done = a->seq;
    }
}

/* Where the gather's graph reads and writes: the pointers the device
 * uses ("mapped": host memory, as the device sees it). */
struct gather_bufs {
    const uint4 *mapped_data;           /* The gather. */
    uint8_t *d_data;                    /* Its copy on the device. */
    const volatile args *mapped_args;
    args *d_args;                       /* Their copy on the device. */
    uint32_t *d_out;                    /* work()'s. */
    uint32_t work_blocks;
    const uint2 *d_verdicts;
    uint2 *mapped_verdicts;
    uint32_t *mapped_done;              /* The sequence number, done. */
};

/* The gather's graph, captured on 's': pull, three works, push. */
static inline cudaGraph_t
capture_gather(cudaStream_t s, const struct gather_bufs *b)
{
    cudaGraph_t g;

    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    pull_args<<<1, 1, 0, s>>>(b->mapped_args, b->d_args);
    pull<<<132 * 2, 512, 0, s>>>(b->mapped_data, (uint4 *) b->d_data,
                                 b->d_args);
    for (int k = 0; k < 3; k++) {
        work<<<b->work_blocks, 256, 0, s>>>(b->d_data, b->d_args, b->d_out);
    }
    push<<<1, 512, 0, s>>>(b->d_verdicts, b->mapped_verdicts, b->d_args,
                           b->mapped_done);
    CK(cudaStreamEndCapture(s, &g));
    return g;
}

#endif /* cuda-bench-gather.cuh */
