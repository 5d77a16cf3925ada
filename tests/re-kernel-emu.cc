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
 * the kernels' logic, not the device.  Also the warp gather of payloads
 * read in place (gpu_runtime/gpu-gather.cuh) that the graphs start
 * with.
 *
 * Build and run (from the top of the tree, no configure needed):
 *
 *   mkdir -p /tmp/re-emu && : > /tmp/re-emu/config.h
 *   for f in re re-cpu re-codec; do gcc -O2 -std=gnu11 -I/tmp/re-emu -I. -c \
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

/* The device encoder's table (threads run at once here). */
static inline unsigned long long
atomicCAS(unsigned long long *p, unsigned long long cmp,
          unsigned long long v)
{
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return cmp;
}

static inline unsigned long long
atomicMin(unsigned long long *p, unsigned long long v)
{
    unsigned long long old = __atomic_load_n(p, __ATOMIC_SEQ_CST);

    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false,
                                                   __ATOMIC_SEQ_CST,
                                                   __ATOMIC_SEQ_CST)) {
        continue;
    }
    return old;
}

/* Warp intrinsics, for the encoder's warp-per-payload kernel (its
 * control flow is the same for every lane of a warp): each warp of the
 * block has a barrier of its own. */
static pthread_barrier_t warp_barriers[32];
static uint64_t warp_slots[1024];

static inline void
warp_sync()
{
    pthread_barrier_wait(&warp_barriers[threadIdx.x / 32]);
}

static inline void
__syncwarp()
{
    warp_sync();
}

static inline uint32_t
__ballot_sync(uint32_t, bool pred)
{
    uint32_t first = threadIdx.x / 32 * 32, r = 0;

    warp_slots[threadIdx.x] = pred;
    warp_sync();
    for (uint32_t l = 0; l < 32 && first + l < blockDim.x; l++) {
        r |= warp_slots[first + l] ? UINT32_C(1) << l : 0;
    }
    warp_sync();
    return r;
}

static inline unsigned long long
__shfl_sync(uint32_t, unsigned long long v, int src)
{
    unsigned long long r;

    warp_slots[threadIdx.x] = v;
    warp_sync();
    r = warp_slots[threadIdx.x / 32 * 32 + src];
    warp_sync();
    return r;
}

using std::min;
using std::max;

static inline int
__ffs(uint32_t x)
{
    return __builtin_ffs(x);
}

#include "gpu_services/re/re-kernels.cuh"
#include "gpu_runtime/gpu-gather.cuh"

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
        for (uint32_t w = 0; w * 32 < threads; w++) {
            pthread_barrier_init(&warp_barriers[w], NULL,
                                 std::min<uint32_t>(32, threads - w * 32));
        }
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
        for (uint32_t w = 0; w * 32 < threads; w++) {
            pthread_barrier_destroy(&warp_barriers[w]);
        }
    }
}

/* The tests' splitmix64 (test-common.h), seeded from the command line. */
static struct rng rng;

static uint64_t
rnd()
{
    return rng_next(&rng);
}

/* mode 0: per packet; 1: grouped by length; 2: segments of 'seg'.
 * 'tiny': payloads mostly of 0 to 30 bytes, many empty, so that a
 * segment of the cand kernel spans many packets and its roll starts
 * afresh at each (a warp-wide packet search tried in the thirty-second
 * session, no faster, was checked on them). */
static int
run_case(const struct gpu_re_params *p, int mode, uint32_t seg, size_t n,
         bool tiny)
{
    bool sort = mode == 1;
    std::vector<uint32_t> offsets(n + 1);
    struct gpu_re_kparams kp;
    struct gpu_re_tables tables;
    uint32_t min_len = UINT32_MAX, max_len = 0;
    int errors = 0;

    offsets[0] = rnd() % 16;
    for (size_t i = 0; i < n; i++) {
        uint32_t len = (tiny ? (rnd() % 128 ? rnd() % 31 : rnd() % 1501)
                        : rnd() % 40 ? rnd() % 1501 : rnd() % 9001);

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
        /* A warp a packet. */
        launch((n * 32 + THREADS - 1) / THREADS, THREADS, [=] {
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

/* The encoder's kernels (insert, encode, append) on a stream of payloads
 * with repeats, in batches of 1 to 300 with the cuts and hashes from the
 * CPU, a ring of 'cache' bytes: each payload's shim (the header written
 * here as the host would) goes through the library's decoder, which must
 * give back the payload; raw ones are observed.  Returns the errors. */
static int
run_encode_case(uint64_t cache, size_t n_docs)
{
    struct gpu_re_config cfg;
    struct gpu_re_decoder *d;
    struct gpu_re_stats ds;
    std::vector<uint8_t> stream;
    std::vector<uint32_t> lens;
    int errors = 0;

    gpu_re_config_init(&cfg);
    cfg.cache_size = cache;
    cfg.epoch = 3;
    if (gpu_re_decoder_create(&cfg, &d)) {
        printf("encode: no decoder\n");
        return 1;
    }
    /* Documents sent two or three times with a few edits, cut into
     * payloads of 1 to 1460 bytes, with an empty payload now and then
     * (a check and no chunk, from the hash kernel too). */
    for (size_t k = 0; k < n_docs; k++) {
        std::vector<uint8_t> doc(1000 + rnd() % 20000);
        int sends = 1 + rnd() % 3;

        for (auto &c : doc) {
            c = rnd() % 4 ? 'a' + rnd() % 26 : rnd();
        }
        for (int s = 0; s < sends; s++) {
            doc[rnd() % doc.size()] = rnd();
            for (size_t o = 0; o < doc.size();) {
                size_t l = std::min<size_t>(1 + rnd() % 1460,
                                            doc.size() - o);

                stream.insert(stream.end(), doc.begin() + o,
                              doc.begin() + o + l);
                lens.push_back(l);
                o += l;
                if (!(rnd() % 64)) {
                    lens.push_back(0);
                }
            }
        }
    }

    uint64_t n_buckets = 16;
    while (n_buckets * GPU_RE_ENC_WAYS * 64 < cache) {
        n_buckets *= 2;
    }
    std::vector<uint8_t> ring(cache);
    std::vector<unsigned long long> table(n_buckets * GPU_RE_ENC_WAYS, 0);
    struct gpu_re_enc_dev kd;
    kd.ring = ring.data();
    kd.size = cache;
    kd.table = table.data();
    kd.mask = n_buckets - 1;
    kd.min_ref = cfg.min_ref;
    kd.min_chunk = cfg.params.min_chunk;

    uint64_t pos = 0, shims = 0, bytes_in = 0, bytes_out = 0;
    size_t at = 0;
    for (size_t i0 = 0; i0 < lens.size();) {
        size_t n = std::min<size_t>(1 + rnd() % 300, lens.size() - i0);
        std::vector<uint32_t> offsets(n + 1);

        offsets[0] = 0;
        for (size_t j = 0; j < n; j++) {
            offsets[j + 1] = offsets[j] + lens[i0 + j];
        }
        const uint8_t *data = stream.data() + at;
        size_t n_slots = gpu_re_n_slots(offsets[n], n, kd.min_chunk);
        std::vector<uint16_t> ends(n_slots);
        std::vector<struct gpu_re_hash> hashes(n_slots);
        std::vector<uint32_t> phash(n);
        for (size_t j = 0; j < n; j++) {
            size_t slot = gpu_re_slot_base(offsets.data(), j, kd.min_chunk);
            uint32_t len = lens[i0 + j];

            gpu_re_chunk_cpu(&cfg.params, data + offsets[j], len,
                             &ends[slot], NULL, n_slots - slot);
            gpu_re_hash_packet(data + offsets[j], len, &ends[slot],
                               &hashes[slot], &phash[j]);
        }

        /* The batch in a buffer aligned as the device's, with the slack
         * its 16-byte loads read (the kernels that stage a packet load
         * uint4s): the kernels below read it there.  First the hash
         * kernel (a warp a packet) on the same cuts: the same hashes as
         * the CPU's. */
        std::vector<uint4> dbuf(offsets[n] / 16 + 2);
        std::vector<struct gpu_re_hash> dev_hashes(n_slots);
        std::vector<uint32_t> dev_checks(n);
        memcpy(dbuf.data(), data, offsets[n]);
        {
            const uint8_t *dd = (const uint8_t *) dbuf.data();
            const uint32_t *off = offsets.data();
            const uint16_t *e = ends.data();
            struct gpu_re_hash *dh = dev_hashes.data();
            uint32_t *dc = dev_checks.data();
            uint32_t min_chunk = kd.min_chunk;

            launch((n * 32 + THREADS - 1) / THREADS, THREADS, [=] {
                hash_body(dd, off, NULL, n, min_chunk, e, dh, dc);
            });
        }
        for (size_t j = 0; j < n; j++) {
            size_t slot = gpu_re_slot_base(offsets.data(), j, kd.min_chunk);
            uint32_t len = lens[i0 + j], s = 0, c = 0;
            bool same = dev_checks[j] == phash[j];

            for (; same && s < len; s = ends[slot + c++]) {
                same = !memcmp(&dev_hashes[slot + c], &hashes[slot + c],
                               sizeof hashes[0]);
            }
            if (!same && errors++ < 5) {
                printf("hash: payload %zu of %u bytes, chunk %u: the "
                       "kernel's hash differs from the CPU's\n", i0 + j,
                       len, c);
            }
        }

        struct gpu_re_enc_args a;
        memset(&a, 0, sizeof a);
        a.base = pos;
        uint64_t end = pos + offsets[n];
        a.low = pos > cache ? pos - cache : 0;
        if (!pos) {
            uint8_t v[8];
            size_t vn = 0;

            /* The epoch's START: all literal (lengths here fit). */
            a.start = 1;
            gpu_re_put_varint(v, &vn, sizeof v, lens[i0]);
            a.start_room = lens[i0] ? 1 + vn + lens[i0] : 0;
        }
        std::vector<uint8_t> bodies(offsets[n] + GPU_RE_ENC_SLACK * n);
        std::vector<struct gpu_re_enc_result> results(n);
        const uint32_t *off = offsets.data();
        const uint16_t *e = ends.data();
        const struct gpu_re_hash *h = hashes.data();
        uint8_t *bo = bodies.data();
        struct gpu_re_enc_result *re = results.data();
        const struct gpu_re_enc_args *ap = &a;

        uint32_t wgrid = (n * 32 + THREADS - 1) / THREADS;
        const uint8_t *aligned = (const uint8_t *) dbuf.data();

        /* As the graph: insert and encode a warp a payload, append. */
        launch(wgrid, THREADS, [=] {
            enc_insert_body(kd, off, n, e, h, ap);
        });
        launch(wgrid, THREADS, [=] {
            enc_shim_body(kd, aligned, off, n, e, h, ap, bo, re);
        });
        launch(4, THREADS, [=] {
            enc_append_body(kd, aligned, off, n, ap);
        });

        for (size_t j = 0; j < n; j++) {
            const uint8_t *pay = data + offsets[j];
            uint32_t len = lens[i0 + j];

            bytes_in += len;
            if (!results[j].shim) {
                bytes_out += len;
                gpu_re_decoder_observe(d, pay, len);
                continue;
            }
            std::vector<uint8_t> shim(GPU_RE_SHIM_HDR_LEN
                                      + results[j].body_len);
            uint32_t p32 = (uint32_t) (pos + offsets[j]);
            uint32_t check = phash[j];
            uint8_t hdr[GPU_RE_SHIM_HDR_LEN] = {
                GPU_RE_SHIM_VERSION, 0, 0,
                (uint8_t) (a.start && !j ? GPU_RE_SHIM_F_START : 0),
                (uint8_t) (cfg.epoch >> 8), (uint8_t) cfg.epoch,
                (uint8_t) (len >> 8), (uint8_t) len,
                (uint8_t) (p32 >> 24), (uint8_t) (p32 >> 16),
                (uint8_t) (p32 >> 8), (uint8_t) p32,
                (uint8_t) (check >> 24), (uint8_t) (check >> 16),
                (uint8_t) (check >> 8), (uint8_t) check,
            };
            memcpy(shim.data(), hdr, sizeof hdr);
            memcpy(shim.data() + sizeof hdr,
                   bodies.data() + gpu_re_enc_body_slot(offsets.data(), j),
                   results[j].body_len);

            std::vector<uint8_t> out(GPU_RE_MAX_PAYLOAD);
            size_t out_len = 0;
            int r = gpu_re_decode(d, shim.data(), shim.size(), out.data(),
                                  out.size(), &out_len);

            shims++;
            bytes_out += shim.size();
            if (r != GPU_RE_DECODED || out_len != len
                || memcmp(out.data(), pay, len)) {
                if (errors++ < 5) {
                    printf("encode: payload %zu of %u bytes: decoded %d "
                           "to %zu bytes, not the payload\n", i0 + j, len,
                           r, out_len);
                }
            }
        }
        pos = end;
        at += offsets[n];
        i0 += n;
    }
    gpu_re_decoder_get_stats(d, &ds);
    gpu_re_decoder_destroy(d);
    printf("  encode, cache %" PRIu64 " KB: %zu payloads, %" PRIu64
           " shims, %.1f%% saved, %" PRIu64 " undecodable: %s\n",
           cache >> 10, lens.size(), shims,
           100.0 * (1 - (double) bytes_out / bytes_in), ds.undecodable,
           errors ? "WRONG" : "every payload restored");
    /* The documents repeat: most later sends must be found, about as
     * many as the host's encoder finds in the same stream (test-re asks
     * the same of the device): within 5% of its savings, since a wrong
     * ring (the append) or table (the insert) only costs matches, every
     * candidate being compared; one epoch here, the host's encoder and
     * the kernels' differ by 0-2% of it (races for a table entry). */
    struct gpu_re_encoder *host;
    struct gpu_re_stats hs;
    std::vector<uint8_t> out(GPU_RE_MAX_PAYLOAD + 64);
    size_t out_len;

    if (gpu_re_encoder_create(&cfg, NULL, &host)) {
        printf("encode: no host encoder\n");
        return errors + 1;
    }
    for (size_t i = 0, at2 = 0; i < lens.size(); at2 += lens[i++]) {
        gpu_re_encode(host, stream.data() + at2, lens[i], NULL, 0,
                      out.data(), out.size(), &out_len);
    }
    gpu_re_encoder_get_stats(host, &hs);
    gpu_re_encoder_destroy(host);

    double saved = 1 - (double) bytes_out / bytes_in;
    double host_saved = 1 - (double) hs.bytes_out / hs.bytes_in;

    printf("  encode, cache %" PRIu64 " KB: the host's encoder saved %.1f%% "
           "of the same stream\n", cache >> 10, 100 * host_saved);
    if (!errors && (saved < 0.1 || saved < 0.95 * host_saved)) {
        printf("encode: saved too little (%.1f%%; the host's encoder "
               "%.1f%%)\n", 100 * saved, 100 * host_saved);
        errors++;
    }
    return errors;
}

/* gpu_gather_kernel() (gpu_runtime/gpu-gather.cuh), as re_encode's and
 * gpu_ids' graphs run it, on 'n' payloads of 0 to 1,499 bytes: first
 * each somewhere in a buffer, at every alignment (the descriptors of
 * payloads read in place), then staged back to back in a block, in the
 * pieces and the merged runs gpu_gather_descs() makes of it.  Each time
 * the gathered copy must be exactly the payloads, and nothing past
 * them written.  Returns the number of failures. */
static int
run_gather_case(size_t n)
{
    std::vector<uint8_t> place(n * 1600 + 64), want, got;
    std::vector<uint32_t> offsets(n + 1);
    std::vector<const uint8_t *> srcs(n, nullptr);
    std::vector<struct gpu_gather_desc> d(n);
    uint32_t n_descs = 0;
    int errors = 0;

    for (auto &b : place) {
        b = rnd();
    }
    offsets[0] = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t len = rnd() % 8 ? rnd() % 1500 : 0;
        /* 16 bytes clear of both ends: the 16-byte loads around a
         * payload stay inside the buffer, as inside a registered page. */
        size_t at = 16 + rnd() % (place.size() - 32 - len);
        const uint8_t *p = place.data() + at;

        offsets[i + 1] = offsets[i] + len;
        want.insert(want.end(), p, p + len);
        if (len) {
            d[n_descs].src = (uintptr_t) p;
            d[n_descs].dst = offsets[i];
            d[n_descs++].len = len;
        }
    }
    std::vector<uint8_t> staged(want);
    staged.resize(want.size() + 32);

    for (int round = 0; round < 3; round++) {
        if (round) {
            /* The same payloads staged: in pieces (no 'srcs'), then in
             * runs merged packet by packet (none of 'srcs' set). */
            gpu_gather_descs(offsets.data(), n,
                             round == 1 ? nullptr : srcs.data(),
                             (const char *) staged.data(), d.data(),
                             &n_descs);
        }
        got.assign(want.size() + 32, 0x5a);
        launch(3, 64, [&] {
            gpu_gather_kernel(d.data(), n_descs, got.data());
        });
        bool ok = !memcmp(got.data(), want.data(), want.size());

        for (size_t k = want.size(); k < got.size(); k++) {
            ok = ok && got[k] == 0x5a;
        }
        printf("  gather of %zu payloads (%s), %u descriptors: %s\n", n,
               round == 0 ? "in place" : round == 1 ? "staged, pieces"
               : "staged, runs", n_descs, ok ? "exact" : "DIFFERENT");
        errors += !ok;
    }
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
            int e = run_case(&ps[k], mode, seg, 700, false);

            printf("  w %2u bits %u min %2u max %4u %s %u: %s\n",
                   ps[k].window, ps[k].bits, ps[k].min_chunk,
                   ps[k].max_chunk, modes[mode], seg,
                   e ? "DIFFERENT" : "identical");
            errors += e;
        }
    }
    for (size_t k = 0; k < 2; k++) {
        int e = run_case(&ps[k], 2, 32, 3000, true);

        printf("  w %2u bits %u min %2u max %4u segments 32, tiny payloads:"
               " %s\n", ps[k].window, ps[k].bits, ps[k].min_chunk,
               ps[k].max_chunk, e ? "DIFFERENT" : "identical");
        errors += e;
    }
    errors += run_encode_case(64 * 1024, 40);
    errors += run_encode_case(1024 * 1024, 40);
    errors += run_gather_case(300);
    printf("re-kernel-emu: %s\n", errors ? "FAILED" : "kernels match the "
           "CPU chunker and the decoder");
    return errors != 0;
}
