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
 * re-kernel-emu: runs the CUDA chunking kernels of
 * gpu_services/re/re-kernels.cuh on the CPU, one POSIX thread per CUDA
 * thread and a barrier for __syncthreads(), and checks them against the
 * CPU chunker: grouping by length (a permutation, longest first) and the
 * cuts and fingerprints of every packet, for every window variant.  For
 * machines without a GPU, where the CUDA backend cannot run: it checks
 * the kernels' logic, not the device.
 *
 * Build and run (from the top of the tree, no configure needed):
 *
 *   mkdir -p /tmp/re-emu && : > /tmp/re-emu/config.h
 *   for f in re re-cpu; do gcc -O2 -std=gnu11 -I/tmp/re-emu -I. -c \
 *       gpu_services/re/$f.c -o /tmp/re-emu/$f.o; done
 *   gcc -O2 -std=gnu11 -I/tmp/re-emu -I. -c gpu_runtime/gpu-runtime.c \
 *       -o /tmp/re-emu/gpu-runtime.o
 *   g++ -O2 -std=c++17 -I/tmp/re-emu -I. tests/re-kernel-emu.cc \
 *       /tmp/re-emu/*.o -lpthread -o /tmp/re-emu/re-kernel-emu
 *   /tmp/re-emu/re-kernel-emu [seed]
 */
#include <config.h>

#include "tests/test-common.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <thread>
#include <vector>

/* ---- Just enough CUDA for the kernels. ---- */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(X)
/* Shared memory: one block runs at a time, so function statics are
 * exactly the block's shared memory. */
#define __shared__ static

struct uint4 {
    uint32_t x, y, z, w;
};

static inline uint4
make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w)
{
    return uint4 { x, y, z, w };
}

struct dim3 {
    uint32_t x;
};

static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static pthread_barrier_t barrier;

static inline void
__syncthreads()
{
    pthread_barrier_wait(&barrier);
}

static inline uint32_t
atomicAdd(uint32_t *p, uint32_t v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}

using std::min;
using std::max;

static inline int
__ffs(uint32_t x)
{
    return __builtin_ffs(x);
}

#include "gpu_services/re/re-kernels.cuh"

/* Runs kernel 'f' on a grid of 'grid' blocks of 'threads' threads. */
template <typename F>
static void
launch(uint32_t grid, uint32_t threads, F f)
{
    gridDim.x = grid;
    blockDim.x = threads;
    for (uint32_t b = 0; b < grid; b++) {
        std::vector<std::thread> ts;

        pthread_barrier_init(&barrier, NULL, threads);
        for (uint32_t t = 0; t < threads; t++) {
            ts.emplace_back([=] {
                blockIdx.x = b;
                threadIdx.x = t;
                f();
            });
        }
        for (auto &t : ts) {
            t.join();
        }
        pthread_barrier_destroy(&barrier);
    }
}

/* The tests' splitmix64 (test-common.h), seeded from the command line. */
static struct rng rng;

static uint64_t
rnd()
{
    return rng_next(&rng);
}

/* mode 0: per packet; 1: grouped by length; 2: segments of 'seg'. */
static int
run_case(const struct gpu_re_params *p, int mode, uint32_t seg, size_t n)
{
    bool sort = mode == 1;
    std::vector<uint32_t> offsets(n + 1);
    struct gpu_re_kparams kp;
    struct gpu_re_tables tables;
    uint32_t min_len = UINT32_MAX, max_len = 0;
    int errors = 0;

    offsets[0] = rnd() % 16;
    for (size_t i = 0; i < n; i++) {
        uint32_t len = rnd() % 40 ? rnd() % 1501 : rnd() % 9001;

        offsets[i + 1] = offsets[i] + len;
        min_len = std::min(min_len, len);
        max_len = std::max(max_len, len);
    }
    size_t bytes = offsets[n] - offsets[0];
    /* As on the device: 16-byte aligned, whole vectors plus one. */
    uint8_t *buf = (uint8_t *) aligned_alloc(16, ((bytes + 15) & ~15) + 16);
    uint8_t *data = buf;
    for (size_t i = 0; i < bytes; i++) {
        data[i] = rnd();
    }
    /* Some zero runs: a cut at every allowed byte. */
    memset(data + bytes / 3, 0, std::min<size_t>(bytes / 10, 5000));

    gpu_re_tables_init(&tables, p->window);
    kp.mask = (1ULL << p->bits) - 1;
    kp.window = p->window;
    kp.min_chunk = p->min_chunk;
    kp.max_chunk = p->max_chunk;
    std::vector<uint64_t> dt(512);
    memcpy(dt.data(), tables.T, 256 * 8);
    memcpy(dt.data() + 256, tables.U, 256 * 8);
    size_t n_slots = gpu_re_n_slots(bytes, n, p->min_chunk);
    std::vector<uint16_t> ends(n_slots, 0xdead);
    std::vector<uint64_t> fps(n_slots);
    std::vector<uint32_t> order(n, UINT32_MAX), count(N_BUCKETS, 0);
    const uint32_t *ord = NULL;
    const uint32_t *off = offsets.data();

    if (sort && max_len != min_len) {
        uint32_t sgrid = (n + SORT_THREADS - 1) / SORT_THREADS;
        uint32_t span = max_len - min_len;
        uint32_t *cnt = count.data(), *o = order.data();

        launch(sgrid, SORT_THREADS, [=] {
            hist_kernel(off, n, min_len, span, cnt);
        });
        launch(1, 32, [=] { scan_kernel(cnt); });
        launch(sgrid, SORT_THREADS, [=] {
            scatter_kernel(off, n, min_len, span, cnt, o);
        });
        /* A permutation, longest bucket first. */
        std::vector<bool> seen(n);
        for (size_t t = 0; t < n; t++) {
            if (order[t] >= n || seen[order[t]]) {
                printf("sort: order[%zu] = %u is not a permutation\n", t,
                       order[t]);
                return 1;
            }
            seen[order[t]] = true;
            if (t && (offsets[order[t] + 1] - offsets[order[t]]) / 1
                     > (offsets[order[t - 1] + 1] - offsets[order[t - 1]])
                       + span / (N_BUCKETS - 1) + 1) {
                printf("sort: packet at %zu longer than its predecessor "
                       "beyond a bucket\n", t);
                return 1;
            }
        }
        ord = order.data();
    }

    uint32_t grid = (n + THREADS - 1) / THREADS;
    const uint64_t *tp = dt.data();
    uint16_t *ep = ends.data();
    uint64_t *fpp = fps.data();
    if (mode == 2) {
        std::vector<uint32_t> cand(bytes / 32 + 2, 0xdeadbeef);
        uint32_t *cp = cand.data();
        uint32_t items = (bytes + seg - 1) / seg;
        uint32_t cgrid = (items + THREADS - 1) / THREADS;
        uint32_t nb = bytes;

        switch (p->window) {
#define W(N) \
        case 16 * N: \
            launch(cgrid, THREADS, [=] { \
                cand_kernel<N>(tp, data, off, n, nb, seg, kp, cp); \
            }); \
            break;
        W(1) W(2) W(3) W(4)
#undef W
        default:
            launch(cgrid, THREADS, [=] {
                cand_kernel<0>(tp, data, off, n, nb, seg, kp, cp);
            });
        }
        launch(grid, THREADS, [=] {
            select_kernel<true>(tp, data, off, n, kp, cp, ep, fpp);
        });
    } else switch (p->window) {
#define W(N) \
    case 16 * N: \
        launch(grid, THREADS, [=] { \
            chunk_kernel<N, true>(tp, data, off, ord, n, kp, ep, fpp); \
        }); \
        break;
    W(1) W(2) W(3) W(4)
#undef W
    default:
        launch(grid, THREADS, [=] {
            chunk_kernel<0, true>(tp, data, off, ord, n, kp, ep, fpp);
        });
    }

    std::vector<uint16_t> e(65536);
    std::vector<uint64_t> f(65536);
    for (size_t i = 0; i < n && errors < 5; i++) {
        size_t len = offsets[i + 1] - offsets[i];
        size_t k = gpu_re_chunk_cpu(p, data + offsets[i] - offsets[0], len,
                                    e.data(), f.data(), 65536);
        size_t slot = gpu_re_slot_base(off, i, p->min_chunk);

        for (size_t j = 0; j < k; j++) {
            if (ends[slot + j] != e[j] || fps[slot + j] != f[j]) {
                printf("w %u mode %d packet %zu (len %zu, start %u) chunk "
                       "%zu: kernel %u %016" PRIx64 ", CPU %u %016" PRIx64
                       "\n", p->window, mode, i, len,
                       offsets[i] - offsets[0], j, ends[slot + j],
                       fps[slot + j], e[j], f[j]);
                errors++;
                break;
            }
        }
    }
    free(buf);
    return errors;
}

int
main(int argc, char **argv)
{
    static const struct gpu_re_params ps[] = {
        { 32, 8, 32, 2048 }, { 16, 8, 16, 1024 }, { 48, 6, 1, 300 },
        { 64, 8, 64, 4096 }, { 20, 5, 8, 200 }, { 32, 8, 1, 1 },
        { 4, 2, 1, 64 },
    };
    int errors = 0;

    rng.s = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
    printf("re-kernel-emu: seed %" PRIu64 "\n", rng.s);
    static const char *modes[] = { "per packet", "grouped", "segments" };
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        for (int mode = 0; mode < 3; mode++) {
            uint32_t seg = mode == 2 ? 32 << (k % 4) : 0;
            int e = run_case(&ps[k], mode, seg, 700);

            printf("  w %2u bits %u min %2u max %4u %s %u: %s\n",
                   ps[k].window, ps[k].bits, ps[k].min_chunk,
                   ps[k].max_chunk, modes[mode], seg,
                   e ? "DIFFERENT" : "identical");
            errors += e;
        }
    }
    printf("re-kernel-emu: %s\n", errors ? "FAILED" : "kernels match the "
           "CPU chunker");
    return errors != 0;
}
