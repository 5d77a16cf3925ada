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
 * Two ways for a PMD thread to submit a gather of packets to the GPU, and
 * what each costs the thread (issue 18: drop-mode gpu_ids makes a device
 * call per ~100 us of traffic, so the call's CPU time is per-packet cost).
 * Standalone (not built by make):
 *
 *     nvcc -O2 -arch=sm_90 bench/cuda-submit-designs.cu -o /tmp/sd
 *     /tmp/sd [BYTES]
 *
 * "calls": gpu_ids' submission today: one copy in, four kernel launches,
 * one copy out, one event record; completion by cudaEventQuery.
 *
 * "graph": the same four kernels and two copies as one CUDA graph built
 * once: the first node pulls the gather's bytes from mapped pinned memory
 * (the size read from a mapped argument block), the last pushes the
 * verdicts and a sequence number to mapped memory, so the submission is
 * one cudaGraphLaunch and completion a read of host memory.  "graph
 * kernels alone" times its kernels one by one.
 *
 * "graph2": copies as memcpy nodes (the copy in's size set before each
 * launch), the kernels, and a one-thread kernel writing the sequence
 * number to mapped memory.
 *
 * gpu_ids first built a fourth from these figures (one cudaMemcpyAsync
 * of the input and arguments, then a graph of kernels only), when the
 * pull took ~800 us: each of its blocks read the argument block itself.
 * With the arguments pulled once, by pull_args(), gpu_ids builds
 * "graph" (ids-cuda.cu).
 *
 * Each prints the thread's CPU time per submission (enqueue only), the
 * round trip (submit to seen done, one at a time), and the CPU time spent
 * polling during a round trip.
 */
#include "cuda-bench-gather.cuh"

__global__ void work_n(const uint8_t *d, uint32_t n, uint32_t *o)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i * 64 < n) {
        o[i & 4095] += d[i * 64];
    }
}

/* Writes the sequence number to mapped memory once the graph's copies
 * and kernels before it are done. */
__global__ void signal(uint32_t *count, volatile uint32_t *done)
{
    uint32_t seq = ++*count;

    __threadfence_system();
    *done = seq;
}

/* Times 'n' rounds of submit(i) then done(i) (true once round i is
 * done), printing the submitting thread's time per submission, the round
 * trip and the part of it spent polling. */
template <typename Submit, typename Done>
static void
time_rounds(const char *name, uint32_t bytes, int n, Submit submit,
            Done done)
{
    double sub = 0, rt = 0, polls = 0;

    for (int i = 0; i < n; i++) {
        double t0 = now_ns();
        submit(i);
        double t1 = now_ns();
        while (!done(i)) {
            continue;
        }
        double t2 = now_ns();
        sub += t1 - t0;
        rt += t2 - t0;
        polls += t2 - t1;
    }
    printf("%s: %u bytes: submit %.2f us, round trip %.2f us "
           "(polling %.2f us)\n", name, bytes, sub / n / 1e3, rt / n / 1e3,
           polls / n / 1e3);
}

int main(int argc, char *argv[])
{
    uint32_t bytes = argc > 1 ? atoi(argv[1]) : 100000;
    uint32_t packets = bytes / 600 + 1;
    const int N = 2000;
    cudaStream_t s;
    cudaEvent_t e;
    uint8_t *h_data, *d_data;
    uint2 *h_verd, *d_verd;
    uint32_t *d_out;
    args *h_args;
    uint32_t *h_done;

    CK(cudaSetDeviceFlags(cudaDeviceMapHost));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CK(cudaHostAlloc(&h_data, 4 << 20, cudaHostAllocMapped));
    CK(cudaHostAlloc(&h_verd, 4096 * sizeof *h_verd, cudaHostAllocMapped));
    CK(cudaHostAlloc(&h_args, sizeof *h_args, cudaHostAllocMapped));
    CK(cudaHostAlloc(&h_done, 64, cudaHostAllocMapped));
    CK(cudaMalloc(&d_data, 4 << 20));
    CK(cudaMalloc(&d_verd, 4096 * sizeof *d_verd));
    CK(cudaMalloc(&d_out, 4096 * sizeof *d_out));
    uint32_t blocks = (4 << 20) / 64 / 256;
    uint32_t n_blocks = (bytes / 64 + 255) / 256;

    /* "calls". */
    time_rounds("calls", bytes, N, [&](int) {
        CK(cudaMemcpyAsync(d_data, h_data, bytes, cudaMemcpyHostToDevice,
                           s));
        for (int k = 0; k < 4; k++) {
            work_n<<<n_blocks, 256, 0, s>>>(d_data, bytes, d_out);
        }
        CK(cudaMemcpyAsync(h_verd, d_verd, packets * sizeof *h_verd,
                           cudaMemcpyDeviceToHost, s));
        CK(cudaEventRecord(e, s));
    }, [&](int) { return cudaEventQuery(e) != cudaErrorNotReady; });

    /* "graph": built once, by capture, with the argument block mapped. */
    volatile args *d_args;
    uint4 *d_hdata;
    uint2 *d_hverd;
    uint32_t *d_done;
    args *d_args_copy;
    CK(cudaMalloc(&d_args_copy, sizeof *d_args_copy));
    CK(cudaHostGetDevicePointer((void **) &d_args, h_args, 0));
    CK(cudaHostGetDevicePointer((void **) &d_hdata, h_data, 0));
    CK(cudaHostGetDevicePointer((void **) &d_hverd, h_verd, 0));
    CK(cudaHostGetDevicePointer((void **) &d_done, h_done, 0));
    struct gather_bufs gb = {
        d_hdata, d_data, d_args, d_args_copy, d_out, blocks, d_verd,
        d_hverd, d_done,
    };
    cudaGraph_t g = capture_gather(s, &gb);
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphUpload(ge, s));
    time_rounds("graph", bytes, N, [&](int i) {
        h_args->n_bytes = bytes;
        h_args->n_packets = packets;
        h_args->seq = i + 1;
        CK(cudaGraphLaunch(ge, s));
    }, [&](int i) {
        return *(volatile uint32_t *) h_done == (uint32_t) i + 1;
    });
    CK(cudaStreamSynchronize(s));

    /* Each kernel of the graph alone, timed with events. */
    {
        cudaEvent_t a, b;
        float ms[3];
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        for (int k = 0; k < 3; k++) {
            CK(cudaEventRecord(a, s));
            if (k == 0) {
                pull_args<<<1, 1, 0, s>>>(d_args, d_args_copy);
                pull<<<132 * 2, 512, 0, s>>>(d_hdata, (uint4 *) d_data,
                                             d_args_copy);
            } else if (k == 1) {
                work<<<blocks, 256, 0, s>>>(d_data, d_args_copy, d_out);
            } else {
                push<<<1, 512, 0, s>>>(d_verd, d_hverd, d_args_copy, d_done);
            }
            CK(cudaEventRecord(b, s));
            CK(cudaEventSynchronize(b));
            CK(cudaEventElapsedTime(&ms[k], a, b));
        }
        printf("graph kernels alone: pull %.1f us, work %.1f us, "
               "push %.1f us\n", ms[0] * 1e3, ms[1] * 1e3, ms[2] * 1e3);
    }

    /* "graph2": the copies as memcpy nodes (the copy in's size set
     * before each launch), a kernel that only signals. */
    {
        cudaGraph_t g2;
        cudaGraphExec_t ge2;
        cudaGraphNode_t copy_in;
        uint32_t *d_count;
        CK(cudaMalloc(&d_count, sizeof *d_count));
        CK(cudaMemset(d_count, 0, sizeof *d_count));
        CK(cudaGraphCreate(&g2, 0));
        CK(cudaGraphAddMemcpyNode1D(&copy_in, g2, NULL, 0, d_data, h_data,
                                    bytes, cudaMemcpyHostToDevice));
        cudaGraphNode_t prev = copy_in, node;
        for (int k = 0; k < 3; k++) {
            cudaKernelNodeParams kp = {};
            void *kargs[] = { &d_data, &d_args_copy, &d_out };
            kp.func = (void *) work;
            kp.gridDim = dim3(blocks);
            kp.blockDim = dim3(256);
            kp.kernelParams = kargs;
            CK(cudaGraphAddKernelNode(&node, g2, &prev, 1, &kp));
            prev = node;
        }
        CK(cudaGraphAddMemcpyNode1D(&node, g2, &prev, 1, h_verd, d_verd,
                                    4096 * sizeof *h_verd,
                                    cudaMemcpyDeviceToHost));
        prev = node;
        {
            cudaKernelNodeParams kp = {};
            void *kargs[] = { &d_count, &d_done };
            kp.func = (void *) signal;
            kp.gridDim = dim3(1);
            kp.blockDim = dim3(1);
            kp.kernelParams = kargs;
            CK(cudaGraphAddKernelNode(&node, g2, &prev, 1, &kp));
        }
        CK(cudaGraphInstantiate(&ge2, g2, 0));
        CK(cudaGraphUpload(ge2, s));
        time_rounds("graph2", bytes, N, [&](int) {
            CK(cudaGraphExecMemcpyNodeSetParams1D(ge2, copy_in, d_data,
                                                  h_data, bytes,
                                                  cudaMemcpyHostToDevice));
            CK(cudaGraphLaunch(ge2, s));
        }, [&](int i) {
            return *(volatile uint32_t *) h_done == (uint32_t) i + 1;
        });
        double submit = 0;
        for (int i = 0; i < N; i++) {
            double t0 = now_ns();
            CK(cudaGraphExecMemcpyNodeSetParams1D(ge2, copy_in, d_data,
                                                  h_data, bytes,
                                                  cudaMemcpyHostToDevice));
            double t1 = now_ns();
            submit += t1 - t0;
        }
        printf("graph2: memcpy node update alone: %.2f us\n",
               submit / N / 1e3);
    }

    /* Submissions back to back. */
    double t0 = now_ns();
    for (int i = 0; i < 200; i++) {
        CK(cudaGraphLaunch(ge, s));
    }
    double t1 = now_ns();
    CK(cudaStreamSynchronize(s));
    printf("graph: 200 launches back to back: %.2f us each to enqueue, "
           "%.2f us each to run\n", (t1 - t0) / 200 / 1e3,
           (now_ns() - t0) / 200 / 1e3);
    return 0;
}
