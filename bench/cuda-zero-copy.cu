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
 * Two ways for a service to get a batch of packet payloads to the device,
 * measured before choosing (docs/PERFORMANCE.md, fourteenth session):
 *
 *   copy:   the PMD copies every payload into a pinned buffer, back to
 *           back, and one cudaMemcpyAsync() takes the buffer over (what
 *           gpu_ids, re_encode and fec_encode do now);
 *   gather: the packets' own memory is registered with the device
 *           (cudaHostRegister(), as DPDK's gpudev does for mbuf pools);
 *           the PMD writes a 16-byte descriptor a packet (where, how
 *           long) and a kernel reads the payloads over PCIe, in place.
 *
 * The packets are 2 kB slots of a 32 MB anonymous mapping (as DPDK's
 * --no-huge memory), taken in a shuffled order as a pool hands mbufs
 * out, each written just before (as a receive would: in the core's
 * cache), Internet mix (50% 64, 20% 576, 30% 1500-byte frames, payload
 * from byte 54).  For batches of 256 and 2048 packets: the PMD's time a
 * packet (what the service costs the switch) and the batch's end-to-end
 * time to the device (copy or gather, then a stream sync), and the
 * device's bytes checked against the packets.  Standalone (not built by
 * make):
 *
 *     nvcc -O2 -arch=sm_90 bench/cuda-zero-copy.cu -o /tmp/cuda-zero-copy
 *     /tmp/cuda-zero-copy
 */
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <sys/mman.h>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } \
    } while (0)

enum { SLOT = 2048, N_SLOTS = 16384, HDR = 54 };

struct desc {
    unsigned long long src;     /* Device-usable address of the payload. */
    unsigned int dst;           /* Its offset in the device buffer. */
    unsigned int len;
};

/* One warp a packet: aligned 16-byte loads over PCIe from the packet's
 * memory, bytes stored where the payload goes. */
__global__ void
gather(const desc *d, int n, unsigned char *out)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;

    if (warp >= n) {
        return;
    }
    uintptr_t start = d[warp].src, end = start + d[warp].len;
    uintptr_t base = start & ~(uintptr_t) 15;
    unsigned char *o = out + d[warp].dst;

    for (uintptr_t a = base + 16 * lane; a < end; a += 16 * 32) {
        uint4 v = *(const uint4 *) a;
        unsigned char b[16];

        memcpy(b, &v, 16);
        for (int i = 0; i < 16; i++) {
            if (a + i >= start && a + i < end) {
                o[a + i - start] = b[i];
            }
        }
    }
}

static double
now_ns()
{
    return std::chrono::duration<double, std::nano>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* 'bytes' of anonymous memory (4 kB pages, as DPDK's --no-huge), every
 * page touched; exits if there is none. */
static unsigned char *
map_touched(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    memset(p, 1, bytes);
    return (unsigned char *) p;
}

int
main()
{
    int dev = 0, host_ptr_ok = 0;
    cudaDeviceProp prop;

    CHECK(cudaGetDeviceProperties(&prop, dev));
    CHECK(cudaDeviceGetAttribute(&host_ptr_ok,
          cudaDevAttrCanUseHostPointerForRegisteredMem, dev));
    printf("device: %s; registered memory usable at its host address: %s\n",
           prop.name, host_ptr_ok ? "yes" : "no");

    /* What registering a switch's DPDK memory would cost at start (-m
     * 2560, as the switch benchmark's): the context first, apart. */
    double t = now_ns();
    CHECK(cudaFree(0));
    printf("context: %.1f ms\n", (now_ns() - t) / 1e6);
    size_t big_bytes = (size_t) 2560 << 20;
    unsigned char *big = map_touched(big_bytes);
    t = now_ns();
    CHECK(cudaHostRegister(big, big_bytes, cudaHostRegisterMapped
                                           | cudaHostRegisterPortable));
    printf("cudaHostRegister of %zu MB (4 kB pages, touched): %.1f ms; "
           "unregister: ", big_bytes >> 20, (now_ns() - t) / 1e6);
    t = now_ns();
    CHECK(cudaHostUnregister(big));
    printf("%.1f ms\n", (now_ns() - t) / 1e6);
    munmap(big, big_bytes);

    size_t pool_bytes = (size_t) SLOT * N_SLOTS;
    unsigned char *pool = map_touched(pool_bytes);
    t = now_ns();
    CHECK(cudaHostRegister(pool, pool_bytes,
                           cudaHostRegisterMapped | cudaHostRegisterPortable));
    printf("cudaHostRegister of %zu MB: %.1f ms\n", pool_bytes >> 20,
           (now_ns() - t) / 1e6);
    unsigned char *pool_dev;
    CHECK(cudaHostGetDevicePointer((void **) &pool_dev, pool, 0));

    /* Slots in a shuffled order, as a pool hands mbufs out. */
    std::vector<int> order(N_SLOTS);
    srand(12345);
    for (int i = 0; i < N_SLOTS; i++) {
        order[i] = i;
    }
    for (int i = N_SLOTS - 1; i > 0; i--) {
        std::swap(order[i], order[rand() % (i + 1)]);
    }
    static const int frame_sizes[] = { 64, 64, 64, 64, 64, 576, 576,
                                       1500, 1500, 1500 };
    std::vector<int> lens(N_SLOTS);
    for (int i = 0; i < N_SLOTS; i++) {
        lens[i] = frame_sizes[rand() % 10] - HDR;
        if (lens[i] < 0) {
            lens[i] = 10;
        }
    }

    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const int max_batch = 2048;
    unsigned char *pinned, *dbuf, *check;
    desc *pdesc, *ddesc;
    CHECK(cudaHostAlloc((void **) &pinned, (size_t) max_batch * SLOT, 0));
    CHECK(cudaHostAlloc((void **) &pdesc, max_batch * sizeof(desc), 0));
    CHECK(cudaMalloc((void **) &dbuf, (size_t) max_batch * SLOT));
    CHECK(cudaMalloc((void **) &ddesc, max_batch * sizeof(desc)));
    check = (unsigned char *) malloc((size_t) max_batch * SLOT);

    const int batches[] = { 256, 2048 };
    for (int bi = 0; bi < 2; bi++) {
        int n = batches[bi];
        int rounds = 4000 * 256 / n;
        double pmd_ns[2] = { 0, 0 }, e2e_ns[2] = { 0, 0 };
        long long pkts = 0, bytes = 0, bad = 0;
        int next = 0;

        for (int r = 0; r < rounds + 10; r++) {
            int first = next;
            size_t total = 0;

            /* "Receive": the packets written, so in this core's cache. */
            for (int i = 0; i < n; i++) {
                int slot = order[(first + i) % N_SLOTS];
                unsigned char *p = pool + (size_t) slot * SLOT;

                memset(p, (unsigned char) (r + i), HDR + lens[slot]);
                p[HDR] = (unsigned char) slot;
            }
            next = (first + n) % N_SLOTS;

            for (int way = 0; way < 2; way++) {
                double t0 = now_ns(), t1;

                total = 0;
                if (way == 0) {
                    for (int i = 0; i < n; i++) {
                        int slot = order[(first + i) % N_SLOTS];

                        memcpy(pinned + total,
                               pool + (size_t) slot * SLOT + HDR,
                               lens[slot]);
                        total += lens[slot];
                    }
                    t1 = now_ns();
                    CHECK(cudaMemcpyAsync(dbuf, pinned, total,
                                          cudaMemcpyHostToDevice, s));
                } else {
                    for (int i = 0; i < n; i++) {
                        int slot = order[(first + i) % N_SLOTS];
                        unsigned char *src = (host_ptr_ok ? pool : pool_dev)
                                             + (size_t) slot * SLOT + HDR;

                        pdesc[i].src = (unsigned long long) (uintptr_t) src;
                        pdesc[i].dst = total;
                        pdesc[i].len = lens[slot];
                        total += lens[slot];
                    }
                    t1 = now_ns();
                    CHECK(cudaMemcpyAsync(ddesc, pdesc, n * sizeof(desc),
                                          cudaMemcpyHostToDevice, s));
                    gather<<<(n * 32 + 255) / 256, 256, 0, s>>>(ddesc, n,
                                                                 dbuf);
                }
                CHECK(cudaStreamSynchronize(s));
                double t2 = now_ns();
                if (r >= 10) {
                    pmd_ns[way] += t1 - t0;
                    e2e_ns[way] += t2 - t0;
                }
                if (r % 97 == 0) {
                    /* The device's bytes are the packets'. */
                    CHECK(cudaMemcpy(check, dbuf, total,
                                     cudaMemcpyDeviceToHost));
                    size_t o = 0;
                    for (int i = 0; i < n; i++) {
                        int slot = order[(first + i) % N_SLOTS];

                        bad += memcmp(check + o,
                                      pool + (size_t) slot * SLOT + HDR,
                                      lens[slot]) != 0;
                        o += lens[slot];
                    }
                }
            }
            if (r >= 10) {
                pkts += n;
                bytes += total;
            }
        }
        printf("batch %4d (%.0f B a payload): copy: PMD %.1f ns a packet, "
               "end to end %.1f us a batch; gather: PMD %.1f ns a packet, "
               "end to end %.1f us a batch (%.1f GB/s); %lld batches "
               "checked wrong\n", n, (double) bytes / pkts,
               pmd_ns[0] / pkts, e2e_ns[0] / rounds / 1e3,
               pmd_ns[1] / pkts, e2e_ns[1] / rounds / 1e3,
               bytes / (e2e_ns[1] / 1e9) / 1e9, bad);
    }
    return 0;
}
