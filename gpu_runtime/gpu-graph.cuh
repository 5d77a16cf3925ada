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

#ifndef GPU_GRAPH_CUH
#define GPU_GRAPH_CUH 1

#include <stdint.h>

#include "gpu_runtime/gpu-runtime.h"

/* The last kernel of a struct gpu_graph (gpu-runtime.h): once everything
 * queued before it is done, the launch's sequence number ('*seq', in the
 * device copy of the launch's arguments) goes to the host's flag.  The
 * fence makes the kernels' earlier writes to mapped host memory visible
 * before it.  One thread.  Static: each library's .cu has its own. */
static __global__ void
gpu_graph_done_kernel(const uint32_t *seq, volatile uint32_t *flag)
{
    __threadfence_system();
    *flag = *seq;
}

/* A graph's first kernel where its launch is to be the submission's
 * only runtime call: 'n_words' words of the launch's arguments from
 * pinned, mapped host memory into device memory, where the kernels after
 * it read them.  One block: on the H200 machine, 264 blocks whose first
 * threads each read the same few words of mapped memory took ~800 us,
 * the reads crossing the bus one after the other, while a grid reading
 * distinct words moved 20 kB in ~9 us (docs/PERFORMANCE.md, seventeenth
 * session).  Static: each library's .cu has its own. */
static __global__ void
gpu_graph_args_kernel(const uint32_t *__restrict__ h_args,
                      uint32_t *__restrict__ d_args, uint32_t n_words)
{
    for (uint32_t i = threadIdx.x; i < n_words; i += blockDim.x) {
        d_args[i] = h_args[i];
    }
}

/* The device's clock, in nanoseconds. */
static __device__ __forceinline__ unsigned long long
gpu_graph_clock_ns(void)
{
    unsigned long long t;

    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Launches 'work' (fire and forget) for ring 'ring', then this kernel's
 * own graph again, to run once 'work' is done.  A queue's scheduler
 * ('work' NULL) takes the graph queued 'ring'-th from 'entries'.  If a
 * launch fails the scheduler parks: the ring's poll sees its stream idle
 * without the done flag and reports a device error, and the next ring
 * starts it again. */
static __device__ void
gpu_graph_scheduler_take(volatile uint32_t *bell, unsigned long long *state,
                         cudaGraphExec_t work,
                         const volatile unsigned long long *entries,
                         uint32_t ring)
{
    state[0] = ring;
    if (!work) {
        /* The entry was written before the ring that was read. */
        __threadfence_system();
        work = (cudaGraphExec_t) entries[ring % GPU_GRAPH_QUEUE_LEN];
    }
    if (cudaGraphLaunch(work, cudaStreamGraphFireAndForget) != cudaSuccess
        || cudaGraphLaunch(cudaGetCurrentGraphExec(),
                           cudaStreamGraphTailLaunch) != cudaSuccess) {
        state[1] = 0;
        bell[GPU_GRAPH_BELL_PARKED] = 1;
        __threadfence_system();
    }
}

/* A struct gpu_graph's scheduler (gpu-runtime.h, "Device launch"): one
 * thread that polls the doorbell in mapped host memory and launches
 * 'work' when it moves, or a queue's ('work' NULL) the next graph queued
 * in 'entries', one a run.  'state' (device memory): [0] the last ring
 * taken, [1] when the scheduler was launched from the host (0: it has
 * not run since).  It parks after GPU_GRAPH_IDLE_NS without a ring, or
 * once GPU_GRAPH_LIFE_NS have passed since that launch. */
static __global__ void
gpu_graph_scheduler_kernel(volatile uint32_t *bell, unsigned long long *state,
                           cudaGraphExec_t work,
                           const volatile unsigned long long *entries)
{
    unsigned long long start = gpu_graph_clock_ns();
    uint32_t seen = (uint32_t) state[0];

    if (!state[1]) {
        state[1] = start;
    }
    if (!work) {
        /* This run starts after the graph it last took is done (a tail
         * launch waits for the work its graph launched). */
        bell[GPU_GRAPH_BELL_DONE] = seen;
        __threadfence_system();
    }
    for (;;) {
        if (bell[GPU_GRAPH_BELL_STOP]) {
            return;
        }
        uint32_t ring = bell[GPU_GRAPH_BELL_SEQ];

        if (ring != seen) {
            gpu_graph_scheduler_take(bell, state, work, entries,
                                     work ? ring : seen + 1);
            return;
        }

        unsigned long long now = gpu_graph_clock_ns();

        if (now - start > GPU_GRAPH_IDLE_NS
            || now - state[1] > GPU_GRAPH_LIFE_NS) {
            /* Park, then look at the doorbell once more: a thread that
             * rang before it could see 'parked' expects this scheduler
             * to take its ring (gpu_graph_launch()). */
            state[1] = 0;
            bell[GPU_GRAPH_BELL_PARKED] = 1;
            __threadfence_system();
            ring = bell[GPU_GRAPH_BELL_SEQ];
            if (ring != seen) {
                bell[GPU_GRAPH_BELL_PARKED] = 0;
                state[1] = now;
                gpu_graph_scheduler_take(bell, state, work, entries,
                                         work ? ring : seen + 1);
            }
            return;
        }
    }
}

/* Captures the scheduler kernel of 'g' (its own graph 'work', or a
 * queue's with 'work' NULL) on 'capture', then builds and starts it. */
static inline int
gpu_graph_scheduler_capture(struct gpu_graph *g, void *capture,
                            cudaGraphExec_t work)
{
    gpu_graph_scheduler_kernel<<<1, 1, 0, (cudaStream_t) capture>>>(
        g->bell_dev, (unsigned long long *) g->sched_state_dev, work,
        work ? NULL : (const volatile unsigned long long *) g->entries_dev);
    return gpu_graph_scheduler_end(g, capture,
                                   cudaGetLastError() == cudaSuccess
                                   ? GPU_OK : GPU_ERR_DEVICE);
}

/* Gives 'g' (built by gpu_graph_capture_end_device()) a scheduler, so
 * that gpu_graph_launch() rings instead of calling the runtime.  Returns
 * GPU_OK, or an error with 'g' launched from the host as before. */
static inline int
gpu_graph_start_scheduler(struct gpu_graph *g)
{
    void *capture;
    int error = gpu_graph_scheduler_begin(g, &capture);

    return (error ? error
            : gpu_graph_scheduler_capture(g, capture,
                                          (cudaGraphExec_t) g->exec));
}

/* Makes 'q' a queue (gpu-runtime.h) with its scheduler running, for
 * gpu_graph_queue_launch().  Returns GPU_OK, or an error with 'q' not a
 * queue (its users then launch from the host). */
static inline int
gpu_graph_start_queue(struct gpu_graph *q)
{
    void *capture;
    int error = gpu_graph_queue_begin(q, &capture);

    return error ? error : gpu_graph_scheduler_capture(q, capture, NULL);
}

#endif /* gpu-graph.cuh */
