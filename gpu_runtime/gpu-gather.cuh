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

#ifndef GPU_GATHER_CUH
#define GPU_GATHER_CUH 1

#include <stdint.h>

#include "gpu_runtime/gpu-runtime.h"

/* Copies the 'n' payloads of 'd' (gpu_gather_descs()) from host memory
 * the device reads in place, over the bus, to 'out': one warp a
 * descriptor, in aligned 16-byte loads (a registered range's pages are
 * whole, so the bytes around a payload that the loads cover are
 * readable).  Every thread of the grid calls it.  Included by each
 * library's kernels and by the CPU emulators of tests/. */
static __device__ __forceinline__ void
gpu_gather_body(const struct gpu_gather_desc *__restrict__ d, uint32_t n,
                uint8_t *__restrict__ out)
{
    uint32_t n_warps = gridDim.x * blockDim.x / 32;
    uint32_t lane = threadIdx.x % 32;

    for (uint32_t w = (blockIdx.x * blockDim.x + threadIdx.x) / 32; w < n;
         w += n_warps) {
        uintptr_t start = d[w].src, end = start + d[w].len;
        uint8_t *o = out + d[w].dst;

        for (uintptr_t a = (start & ~(uintptr_t) 15) + 16 * lane; a < end;
             a += 16 * 32) {
            uint4 v = *(const uint4 *) a;
            const uint8_t *bytes = (const uint8_t *) &v;

            for (int i = 0; i < 16; i++) {
                if (a + i >= start && a + i < end) {
                    o[a + i - start] = bytes[i];
                }
            }
        }
    }
}

/* Largest grid of a gather: warps stride over the descriptors. */
#define GPU_GATHER_BLOCKS 264

/* gpu_gather_body() as a kernel of its own, for a submission that is not
 * one graph (its descriptors copied to device memory first).  Static:
 * each library's .cu has its own. */
static __global__ void
gpu_gather_kernel(const struct gpu_gather_desc *__restrict__ d, uint32_t n,
                  uint8_t *__restrict__ out)
{
    gpu_gather_body(d, n, out);
}

#endif /* gpu-gather.cuh */
