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
 * What a core pays to write again into packet memory that the device has
 * just read (docs/PERFORMANCE.md, thirty-fifth session).
 *
 * In the switch benchmark the receive (DPDK's net_pcap) copies every
 * frame into an mbuf the pool hands out, the mbufs a service's last
 * batches freed.  Profiles on the H200 machine put most of what a GPU
 * service costs a packet in that copy (re_encode: 105 -> 208 ns a packet,
 * alert-mode gpu_ids +53 ns) while holding the same packets as long with
 * nothing read by the device cost it ~2 ns.  The suspect: the device's
 * reads over PCIe snoop the lines out of the core's caches (or leave them
 * shared), so the next write to each pays an ownership request.
 *
 * This measures it alone.  N slots of 2,176 bytes (an mbuf's stride) in
 * registered 4 kB pages (as DPDK's --no-huge memory, cudaHostRegister()
 * as the services do); each round writes an mbuf header line and a frame
 * of the Internet mix (64, 576, 1500 bytes in 5:2:3) into each slot, as
 * the receive does, then does one of:
 *
 *   hot     nothing (the slots stay in the core's caches: no service);
 *   kernel  a kernel reads every frame in place, a warp a slot (held
 *           frames read by drop-mode gpu_ids and re_encode);
 *   copy    one cudaMemcpyAsync() of the slots to the device (a gather
 *           copied by the copy engine);
 *   flush   clflushopt of every line (the lines in memory, for scale);
 *   kernel+prefetchw  as kernel, then prefetchw of every written line
 *           (timed apart): can the core take the lines back ahead of the
 *           receive, off its path?
 *
 * and times the next round's writes: ns a slot, median of the rounds.
 * It first prints what a read of the clock costs (the services read it a
 * few times a batch).
 * The "nt" rows write the frames' whole lines with non-temporal stores
 * (no read for ownership; what a service's own copy into a gather
 * could do, not the receive's); the "wc" rows write into slots of
 * write-combined pinned memory (cudaHostAllocWriteCombined: not cached
 * by the CPU, so never snooped), as a gather only the device reads
 * could be.
 * Standalone (not built by make):
 *
 *     nvcc -O2 -arch=sm_90 -Xcompiler -mclflushopt,-mprfchw,-mavx512f \
 *         bench/cuda-rewrite-after-read.cu \
 *         -o /tmp/cuda-rewrite-after-read && /tmp/cuda-rewrite-after-read
 */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>
#include <sys/mman.h>
#include <x86intrin.h>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } \
    } while (0)

/* A slot is an mbuf: its 128-byte header (the first line written by the
 * receive), DPDK's 128 bytes of headroom, then the frame. */
enum { STRIDE = 2176, HEADROOM = 128 + 128, MAX_SLOTS = 4096, ROUNDS = 300 };

static double
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* A warp a slot: reads the frame in 16-byte loads, as the services'
 * kernels read held frames. */
__global__ void
read_slots(const uint8_t *base, const int *lens, int n, uint4 *sums)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;

    if (warp >= n) {
        return;
    }
    const uint4 *p = (const uint4 *) (base + (size_t) warp * STRIDE
                                      + HEADROOM);
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (int i = lane; i < (lens[warp] + 15) / 16; i += 32) {
        uint4 v = p[i];
        acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
    }
    if (lane == 0) {
        sums[warp] = acc;
    }
}

/* The cost of a clock read: a loop of them, ns each. */
static void
print_clock_costs(void)
{
    static const struct {
        clockid_t id;
        const char *name;
    } clocks[] = {
        { CLOCK_MONOTONIC, "clock_gettime(CLOCK_MONOTONIC)" },
        { CLOCK_MONOTONIC_COARSE, "clock_gettime(CLOCK_MONOTONIC_COARSE)" },
    };
    enum { N = 200000 };
    struct timespec ts;
    volatile uint64_t sink = 0;

    for (size_t c = 0; c < sizeof clocks / sizeof clocks[0]; c++) {
        double t0 = now_ns();
        for (int i = 0; i < N; i++) {
            clock_gettime(clocks[c].id, &ts);
        }
        printf("# %s: %.1f ns\n", clocks[c].name, (now_ns() - t0) / N);
    }
    double t0 = now_ns();
    for (int i = 0; i < N; i++) {
        sink += __rdtsc();
    }
    printf("# rdtsc: %.1f ns\n", (now_ns() - t0) / N);
}

static uint8_t src[2048];

/* The receive: an mbuf header line reset, the frame copied in. */
static void
write_slots(uint8_t *base, const int *lens, int n)
{
    for (int i = 0; i < n; i++) {
        uint8_t *slot = base + (size_t) i * STRIDE;

        memset(slot, 0, 64);
        memcpy(slot + HEADROOM, src, lens[i]);
    }
}

/* The same with the frame's whole 64-byte lines streamed (non-temporal
 * stores), the tail with plain ones. */
static void
write_slots_nt(uint8_t *base, const int *lens, int n)
{
    for (int i = 0; i < n; i++) {
        uint8_t *slot = base + (size_t) i * STRIDE;
        uint8_t *dst = slot + HEADROOM;
        int len = lens[i], off;

        memset(slot, 0, 64);
        for (off = 0; off + 64 <= len; off += 64) {
            __m512i v = _mm512_loadu_si512(src + off);
            _mm512_stream_si512((__m512i *) (dst + off), v);
        }
        memcpy(dst + off, src + off, len - off);
    }
    _mm_sfence();
}

static void
for_each_line(uint8_t *base, const int *lens, int n, int prefetch)
{
    for (int i = 0; i < n; i++) {
        uint8_t *slot = base + (size_t) i * STRIDE;

        for (int off = 0; off < HEADROOM + lens[i]; off += 64) {
            if (off >= 64 && off < HEADROOM) {
                continue;
            }
            if (prefetch) {
                _m_prefetchw(slot + off);
            } else {
                _mm_clflushopt(slot + off);
            }
        }
    }
    _mm_mfence();
}

static double
median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int
main(void)
{
    size_t bytes = (size_t) MAX_SLOTS * STRIDE;
    uint8_t *base = (uint8_t *) mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    static const int mix[10] = { 64, 64, 64, 64, 64, 576, 576,
                                 1500, 1500, 1500 };
    std::vector<int> lens(MAX_SLOTS);
    int *d_lens;
    uint4 *d_sums;
    uint8_t *d_copy;
    cudaDeviceProp prop;
    cudaStream_t stream;

    if (base == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(base, 1, bytes);
    for (size_t i = 0; i < sizeof src; i++) {
        src[i] = i * 7;
    }
    srand(35);
    for (int i = 0; i < MAX_SLOTS; i++) {
        lens[i] = mix[rand() % 10] - 14;        /* The Ethernet header. */
    }
    CHECK(cudaGetDeviceProperties(&prop, 0));
    CHECK(cudaStreamCreate(&stream));
    CHECK(cudaHostRegister(base, bytes, cudaHostRegisterMapped));
    CHECK(cudaMalloc(&d_lens, MAX_SLOTS * sizeof(int)));
    CHECK(cudaMalloc(&d_sums, MAX_SLOTS * sizeof(uint4)));
    CHECK(cudaMalloc(&d_copy, bytes));
    CHECK(cudaMemcpy(d_lens, lens.data(), MAX_SLOTS * sizeof(int),
                     cudaMemcpyHostToDevice));
    uint8_t *d_base;
    CHECK(cudaHostGetDevicePointer((void **) &d_base, base, 0));

    print_clock_costs();
    printf("# %s; slots of %d bytes, Internet mix (%d-byte frames on "
           "average), %d rounds, median\n", prop.name, STRIDE,
           (5 * 64 + 2 * 576 + 3 * 1500) / 10, ROUNDS);
    printf("%6s %-18s %12s %14s\n", "slots", "between rounds",
           "write ns/slot", "prefetchw ns/slot");

    static const char *modes[] = { "hot", "kernel", "copy", "flush",
                                   "kernel+prefetchw", "hot, nt",
                                   "kernel, nt", "wc, kernel",
                                   "wc, kernel, nt" };
    enum { N_MODES = 9 };
    uint8_t *wc, *d_wc;

    CHECK(cudaHostAlloc((void **) &wc, bytes,
                        cudaHostAllocWriteCombined | cudaHostAllocMapped));
    CHECK(cudaHostGetDevicePointer((void **) &d_wc, wc, 0));
    static const int slot_counts[] = { 32, 256, 1024, 4096 };
    for (int c = 0; c < 4; c++) {
        int n = slot_counts[c];
        for (int m = 0; m < N_MODES; m++) {
            std::vector<double> w, p;
            uint8_t *h = m >= 7 ? wc : base, *d = m >= 7 ? d_wc : d_base;

            write_slots(h, lens.data(), n);
            for (int r = 0; r < ROUNDS; r++) {
                if (m == 1 || m == 4 || m >= 6) {
                    read_slots<<<(n * 32 + 255) / 256, 256, 0, stream>>>(
                        d, d_lens, n, d_sums);
                    CHECK(cudaStreamSynchronize(stream));
                } else if (m == 2) {
                    CHECK(cudaMemcpyAsync(d_copy, base, (size_t) n * STRIDE,
                                          cudaMemcpyHostToDevice, stream));
                    CHECK(cudaStreamSynchronize(stream));
                } else if (m == 3) {
                    for_each_line(base, lens.data(), n, 0);
                }
                if (m == 4) {
                    double t0 = now_ns();
                    for_each_line(base, lens.data(), n, 1);
                    p.push_back((now_ns() - t0) / n);
                }
                double t0 = now_ns();
                if (m == 5 || m == 6 || m == 8) {
                    write_slots_nt(h, lens.data(), n);
                } else {
                    write_slots(h, lens.data(), n);
                }
                w.push_back((now_ns() - t0) / n);
            }
            if (m == 4) {
                printf("%6d %-18s %12.1f %14.1f\n", n, modes[m], median(w),
                       median(p));
            } else {
                printf("%6d %-18s %12.1f %14s\n", n, modes[m], median(w),
                       "-");
            }
        }
    }
    CHECK(cudaHostUnregister(base));
    CHECK(cudaFreeHost(wc));
    return 0;
}
