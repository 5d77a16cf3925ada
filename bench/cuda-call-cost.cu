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
 * What the CUDA runtime's calls cost the calling CPU thread on this host:
 * a PMD thread pays them per device call, so a service's calls must be
 * few.  Standalone (not built by make):
 *
 *     nvcc -O2 -arch=sm_90 bench/cuda-call-cost.cu -o /tmp/cuda-call-cost
 *     /tmp/cuda-call-cost
 *
 * Each figure is the mean CPU time of one call over many.
 */
#include <cstdio>
#include <chrono>
#include <cuda_runtime.h>
__global__ void spin(long long cycles, volatile int *flag) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
    if (flag) *flag = 1;
}
__global__ void nop() {}
// Kernel parameters of the parity library's bitmatrix kernel (struct
// kargs: 256 row pointers, 256 masks, 64 output pointers: ~4.6 KB) and
// of a compact one (~1 KB): does the launch cost follow their size?
struct big_args { const void *p[256]; unsigned long long m[256];
                  void *o[64]; unsigned long long x[5]; };
struct small_args { const void *p[64]; unsigned long long m[64]; };
__global__ void nop_big(const big_args a, int *out) { if (a.x[0] == 1) *out = 1; }
__global__ void nop_small(const small_args a, int *out) { if (a.m[0] == 1) *out = 1; }
static double now_ns() {
    return std::chrono::duration<double, std::nano>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main() {
    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaEvent_t e; cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    int *flag; cudaHostAlloc(&flag, 64, cudaHostAllocMapped);
    nop<<<1,1,0,s>>>(); cudaEventRecord(e, s); cudaEventSynchronize(e);
    const int N = 200000;
    double t = now_ns();
    for (int i = 0; i < N; i++) cudaEventQuery(e);
    printf("cudaEventQuery, done:      %.0f ns\n", (now_ns() - t) / N);
    t = now_ns();
    for (int i = 0; i < N; i++) cudaStreamQuery(s);
    printf("cudaStreamQuery, idle:     %.0f ns\n", (now_ns() - t) / N);
    *flag = 0;
    spin<<<1,1,0,s>>>(4000000000LL, flag); cudaEventRecord(e, s);
    int n = 0; t = now_ns();
    for (int i = 0; i < N; i++) n += cudaEventQuery(e) == cudaErrorNotReady;
    printf("cudaEventQuery, not ready: %.0f ns (%d not ready)\n",
           (now_ns() - t) / N, n);
    t = now_ns();
    for (int i = 0; i < N; i++) n += cudaStreamQuery(s) == cudaErrorNotReady;
    printf("cudaStreamQuery, busy:     %.0f ns\n", (now_ns() - t) / N);
    t = now_ns();
    for (int i = 0; i < N; i++) n += *(volatile int *) flag;
    printf("mapped flag read:          %.1f ns\n", (now_ns() - t) / N);
    cudaDeviceSynchronize();
    // Submit cost: a launch + record, and a 4 KB async copy.
    void *d, *h; cudaMalloc(&d, 1 << 20); cudaHostAlloc(&h, 1 << 20, 0);
    t = now_ns();
    for (int i = 0; i < 10000; i++) { nop<<<1,1,0,s>>>(); cudaEventRecord(e, s); }
    printf("launch+record:             %.0f ns\n", (now_ns() - t) / 10000);
    cudaStreamSynchronize(s);
    t = now_ns();
    for (int i = 0; i < 10000; i++) cudaMemcpyAsync(d, h, 4096, cudaMemcpyHostToDevice, s);
    printf("memcpyAsync 4 KB enqueue:  %.0f ns\n", (now_ns() - t) / 10000);
    cudaStreamSynchronize(s);
    // Ten chunks in: ten copies against one strided (2D) copy.
    t = now_ns();
    for (int i = 0; i < 1000; i++) {
        for (int j = 0; j < 10; j++) {
            cudaMemcpyAsync((char *) d + j * 8192, (char *) h + j * 16384,
                            4096, cudaMemcpyHostToDevice, s);
        }
    }
    printf("10 x memcpyAsync 4 KB:     %.0f ns\n", (now_ns() - t) / 1000);
    cudaStreamSynchronize(s);
    t = now_ns();
    for (int i = 0; i < 1000; i++) {
        cudaMemcpy2DAsync(d, 8192, h, 16384, 4096, 10,
                          cudaMemcpyHostToDevice, s);
    }
    printf("1 x memcpy2DAsync 10x4 KB: %.0f ns\n", (now_ns() - t) / 1000);
    cudaStreamSynchronize(s);
    t = now_ns();
    for (int i = 0; i < 10000; i++) nop<<<1,1,0,s>>>();
    printf("launch alone:              %.0f ns\n", (now_ns() - t) / 10000);
    cudaStreamSynchronize(s);
    {
        static big_args big;
        static small_args small;
        t = now_ns();
        for (int i = 0; i < 10000; i++) nop_big<<<1,1,0,s>>>(big, flag);
        printf("launch, 4.6 KB arguments:  %.0f ns (%zu bytes)\n",
               (now_ns() - t) / 10000, sizeof big);
        cudaStreamSynchronize(s);
        t = now_ns();
        for (int i = 0; i < 10000; i++) nop_small<<<1,1,0,s>>>(small, flag);
        printf("launch, 1 KB arguments:    %.0f ns (%zu bytes)\n",
               (now_ns() - t) / 10000, sizeof small);
    }
    cudaStreamSynchronize(s);
    // Round trip: copy in, nop, copy out, wait.
    t = now_ns();
    for (int i = 0; i < 1000; i++) {
        cudaMemcpyAsync(d, h, 4096, cudaMemcpyHostToDevice, s);
        nop<<<1,1,0,s>>>();
        cudaMemcpyAsync(h, d, 64, cudaMemcpyDeviceToHost, s);
        cudaEventRecord(e, s); cudaEventSynchronize(e);
    }
    printf("round trip (4 KB in, nop, 64 B out): %.1f us\n", (now_ns() - t) / 1000 / 1000);
    return 0;
}
