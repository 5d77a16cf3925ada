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
 * Who launches a gather's graph: the PMD thread (gpu_ids today: ~7% of
 * the PMD's samples in drop mode are cudaGraphLaunch and its copy), or
 * the device itself, woken by a doorbell in mapped host memory (issue 18;
 * docs/ARCHITECTURE.md, "Not yet built").  Standalone (not built by make):
 *
 *     nvcc -O2 -arch=sm_90 bench/cuda-device-launch.cu -o /tmp/dl
 *     /tmp/dl [BYTES]
 *
 * Both run the same graph, built once by capture: a kernel pulls the
 * gather's BYTES from mapped pinned memory (its size and sequence number
 * from a mapped argument block), three kernels stand for the scan,
 * confirm and rules kernels, and a last one pushes the verdicts and the
 * sequence number to mapped memory, where the PMD sees it done.
 *
 * "host launch": the PMD writes the arguments and calls cudaGraphLaunch.
 *
 * "device launch": a one-thread scheduler graph, launched once from the
 * host, polls a doorbell word in mapped memory; the PMD writes the
 * arguments, then the doorbell.  When the doorbell moves the scheduler
 * launches the work graph from the device (fire and forget) and launches
 * itself again as a tail launch, which runs once the work is done: one
 * gather at a time, in order.
 *
 * Each prints the PMD's time per submission (what the switch pays a
 * gather), the round trip (submission to seen done, one at a time) and,
 * with 64 gathers submitted back to back in the device design's way (the
 * next one as soon as the last is seen done), gathers per second.
 */
#include <atomic>

#include "cuda-bench-gather.cuh"

/* The scheduler: waits for the doorbell to move from '*seen' (or for
 * 'stop'), then launches 'work' and itself again. */
__global__ void
scheduler(const volatile uint32_t *doorbell, uint32_t *seen,
          const volatile uint32_t *stop, cudaGraphExec_t work_graph,
          uint32_t *errors)
{
    uint32_t last = *seen;

    for (;;) {
        if (*stop) {
            return;
        }
        uint32_t ring = *doorbell;
        if (ring != last) {
            *seen = ring;
            if (cudaGraphLaunch(work_graph, cudaStreamGraphFireAndForget)
                != cudaSuccess
                || cudaGraphLaunch(cudaGetCurrentGraphExec(),
                                   cudaStreamGraphTailLaunch)
                   != cudaSuccess) {
                atomicAdd(errors, 1);
            }
            return;
        }
    }
}

/* Spins until the mapped word 'done' reads 'seq'; false after a second
 * (a design that hangs must not hang the machine's run). */
static bool
wait_done(const uint32_t *done, uint32_t seq)
{
    double t0 = now_ns();

    while (*(const volatile uint32_t *) done != seq) {
        if (now_ns() - t0 > 1e9) {
            return false;
        }
    }
    return true;
}

/* Times 'n' rounds of submit(seq) then the wait for 'seq', printing the
 * submitting thread's time a submission and the round trip. */
template <typename Submit>
static bool
time_rounds(const char *name, uint32_t bytes, int n, const uint32_t *done,
            uint32_t *seq, Submit submit)
{
    double sub = 0, rt = 0;

    for (int i = 0; i < n; i++) {
        double t0 = now_ns();
        submit(++*seq);
        double t1 = now_ns();
        if (!wait_done(done, *seq)) {
            printf("%s: %u bytes: round %d not done after 1 s\n", name,
                   bytes, i);
            return false;
        }
        sub += t1 - t0;
        rt += now_ns() - t0;
    }
    printf("%s: %u bytes: submit %.3f us, round trip %.2f us\n", name, bytes,
           sub / n / 1e3, rt / n / 1e3);
    return true;
}

int
main(int argc, char *argv[])
{
    uint32_t bytes = argc > 1 ? atoi(argv[1]) : 100000;
    uint32_t packets = bytes / 600 + 1;
    const int N = 2000;
    uint32_t blocks = (4 << 20) / 64 / 256;
    cudaStream_t s, s_sched;
    uint8_t *h_data, *d_data;
    uint2 *h_verd, *d_verd;
    uint32_t *d_out, *h_words, *d_seen, *d_errors;
    args *h_args, *d_args_copy;
    cudaDeviceProp prop;

    CK(cudaSetDeviceFlags(cudaDeviceMapHost));
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s\n", prop.name);
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s_sched, cudaStreamNonBlocking));
    CK(cudaHostAlloc(&h_data, 4 << 20, cudaHostAllocMapped));
    CK(cudaHostAlloc(&h_verd, 4096 * sizeof *h_verd, cudaHostAllocMapped));
    CK(cudaHostAlloc(&h_args, sizeof *h_args, cudaHostAllocMapped));
    /* done, doorbell, stop: a cache line each. */
    CK(cudaHostAlloc(&h_words, 3 * 64, cudaHostAllocMapped));
    CK(cudaMalloc(&d_data, 4 << 20));
    CK(cudaMalloc(&d_verd, 4096 * sizeof *d_verd));
    CK(cudaMalloc(&d_out, 4096 * sizeof *d_out));
    CK(cudaMalloc(&d_args_copy, sizeof *d_args_copy));
    CK(cudaMalloc(&d_seen, sizeof *d_seen));
    CK(cudaMalloc(&d_errors, sizeof *d_errors));
    CK(cudaMemset(d_seen, 0, sizeof *d_seen));
    CK(cudaMemset(d_errors, 0, sizeof *d_errors));
    for (uint32_t i = 0; i < (4u << 20); i++) {
        h_data[i] = i * 2654435761u >> 24;
    }
    uint32_t *h_done = h_words, *h_doorbell = h_words + 16;
    uint32_t *h_stop = h_words + 32;
    *h_done = *h_doorbell = *h_stop = 0;

    volatile args *d_args;
    uint4 *d_hdata;
    uint2 *d_hverd;
    uint32_t *d_words;
    CK(cudaHostGetDevicePointer((void **) &d_args, h_args, 0));
    CK(cudaHostGetDevicePointer((void **) &d_hdata, h_data, 0));
    CK(cudaHostGetDevicePointer((void **) &d_hverd, h_verd, 0));
    CK(cudaHostGetDevicePointer((void **) &d_words, h_words, 0));
    uint32_t *d_done = d_words, *d_doorbell = d_words + 16;
    uint32_t *d_stop = d_words + 32;

    /* The work graph, launchable from the host and from the device. */
    struct gather_bufs gb = {
        d_hdata, d_data, d_args, d_args_copy, d_out, blocks, d_verd,
        d_hverd, d_done,
    };
    cudaGraph_t g = capture_gather(s, &gb);
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiateWithFlags(&ge, g,
                                     cudaGraphInstantiateFlagDeviceLaunch));
    CK(cudaGraphUpload(ge, s));
    CK(cudaStreamSynchronize(s));

    uint32_t seq = 0;
    auto set_args = [&](uint32_t sq) {
        h_args->n_bytes = bytes;
        h_args->n_packets = packets;
        h_args->seq = sq;
    };
    bool ok = time_rounds("host launch", bytes, N, h_done, &seq,
                          [&](uint32_t sq) {
        set_args(sq);
        CK(cudaGraphLaunch(ge, s));
    });
    CK(cudaStreamSynchronize(s));

    /* The scheduler graph: one node, relaunching itself. */
    cudaGraph_t gs;
    cudaGraphExec_t gse;
    CK(cudaStreamBeginCapture(s_sched, cudaStreamCaptureModeThreadLocal));
    scheduler<<<1, 1, 0, s_sched>>>(d_doorbell, d_seen, d_stop, ge,
                                    d_errors);
    CK(cudaStreamEndCapture(s_sched, &gs));
    CK(cudaGraphInstantiateWithFlags(&gse, gs,
                                     cudaGraphInstantiateFlagDeviceLaunch));
    CK(cudaGraphUpload(gse, s_sched));
    CK(cudaGraphLaunch(gse, s_sched));

    auto ring = [&](uint32_t sq) {
        set_args(sq);
        std::atomic_thread_fence(std::memory_order_release);
        *(volatile uint32_t *) h_doorbell = sq;
    };
    ok = time_rounds("device launch", bytes, N, h_done, &seq, ring) && ok;
    if (ok) {
        double t0 = now_ns();
        int i;
        for (i = 0; i < 64 && ok; i++) {
            ring(++seq);
            ok = wait_done(h_done, seq);
        }
        printf("device launch: %d gathers back to back: %.0f a second\n",
               i, i / ((now_ns() - t0) / 1e9));
    }
    *(volatile uint32_t *) h_stop = 1;
    CK(cudaStreamSynchronize(s_sched));
    uint32_t errors;
    CK(cudaMemcpy(&errors, d_errors, sizeof errors, cudaMemcpyDeviceToHost));
    printf("device launch: %u failed launches on the device\n", errors);
    return ok && !errors ? 0 : 1;
}
