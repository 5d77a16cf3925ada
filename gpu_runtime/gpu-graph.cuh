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

#endif /* gpu-graph.cuh */
