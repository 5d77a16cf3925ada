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
 * The RE chunking kernels (see re-cuda.cu), apart so that
 * tests/re-kernel-emu.cc can also run them on the CPU, one POSIX thread
 * per CUDA thread, where no GPU is at hand.  Included once, by re-cuda.cu
 * (or the emulator).
 */
#ifndef GPU_RE_KERNELS_CUH
#define GPU_RE_KERNELS_CUH 1

#include "gpu_services/re/re-private.h"

#define THREADS 128
#define SORT_THREADS 256
/* The longest packet whose bytes (hash and shim kernels) or candidate
 * words (select kernel) a warp-a-packet kernel first copies into shared
 * memory (an Ethernet MTU's payloads fit); longer ones are read from
 * global memory. */
#define STAGE_BYTES 2048
#define N_BUCKETS 128

/* Grouping by length, longest first (approximately: into N_BUCKETS
 * buckets spread over [min_len, max_len], as in the seed paper), in three
 * short kernels: per-block histograms added into 'count'; one block
 * turns the counts into start offsets; each block reserves its ranges
 * with one global atomic per bucket and scatters into them.  Only block
 * aggregates touch global atomics, so a batch of one dominant size does
 * not serialise on one counter. */
__device__ __forceinline__ uint32_t
bucket_of(const uint32_t *offsets, uint32_t i, uint32_t min_len,
          uint32_t span)
{
    uint32_t len = offsets[i + 1] - offsets[i];
    uint32_t b = (uint32_t) ((uint64_t) (len - min_len) * (N_BUCKETS - 1)
                             / span);

    return N_BUCKETS - 1 - b;
}

__device__ __forceinline__ void
hist_body(const uint32_t *__restrict__ offsets, uint32_t n,
          uint32_t min_len, uint32_t span, uint32_t *count)
{
    __shared__ uint32_t h[N_BUCKETS];
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

    for (uint32_t k = threadIdx.x; k < N_BUCKETS; k += blockDim.x) {
        h[k] = 0;
    }
    __syncthreads();
    if (i < n) {
        atomicAdd(&h[bucket_of(offsets, i, min_len, span)], 1u);
    }
    __syncthreads();
    for (uint32_t k = threadIdx.x; k < N_BUCKETS; k += blockDim.x) {
        if (h[k]) {
            atomicAdd(&count[k], h[k]);
        }
    }
}

__global__ void __launch_bounds__(SORT_THREADS)
hist_kernel(const uint32_t *__restrict__ offsets, uint32_t n,
            uint32_t min_len, uint32_t span, uint32_t *count)
{
    hist_body(offsets, n, min_len, span, count);
}

__global__ void
scan_kernel(uint32_t *count)
{
    if (threadIdx.x == 0) {
        uint32_t sum = 0;

        for (uint32_t k = 0; k < N_BUCKETS; k++) {
            uint32_t c = count[k];

            count[k] = sum;
            sum += c;
        }
    }
}

__device__ __forceinline__ void
scatter_body(const uint32_t *__restrict__ offsets, uint32_t n,
             uint32_t min_len, uint32_t span, uint32_t *cursor,
             uint32_t *__restrict__ order)
{
    __shared__ uint32_t h[N_BUCKETS], base[N_BUCKETS];
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t b = 0, rank = 0;

    for (uint32_t k = threadIdx.x; k < N_BUCKETS; k += blockDim.x) {
        h[k] = 0;
    }
    __syncthreads();
    if (i < n) {
        b = bucket_of(offsets, i, min_len, span);
        rank = atomicAdd(&h[b], 1u);
    }
    __syncthreads();
    for (uint32_t k = threadIdx.x; k < N_BUCKETS; k += blockDim.x) {
        base[k] = h[k] ? atomicAdd(&cursor[k], h[k]) : 0;
    }
    __syncthreads();
    if (i < n) {
        order[base[b] + rank] = i;
    }
}

__global__ void __launch_bounds__(SORT_THREADS)
scatter_kernel(const uint32_t *__restrict__ offsets, uint32_t n,
               uint32_t min_len, uint32_t span, uint32_t *cursor,
               uint32_t *__restrict__ order)
{
    scatter_body(offsets, n, min_len, span, cursor, order);
}

__device__ __forceinline__ uint8_t
vbyte(const uint4 &v, int j)
{
    uint32_t w = j < 4 ? v.x : j < 8 ? v.y : j < 12 ? v.z : v.w;

    return (uint8_t) (w >> ((j & 3) * 8));
}

__device__ __forceinline__ uint32_t
lead_mask(uint32_t lead, uint32_t k)
{
    /* Keeps the bytes of word k (bytes 4k .. 4k+3) at or after 'lead'. */
    if (lead <= 4 * k) {
        return 0xffffffffu;
    }
    if (lead >= 4 * k + 4) {
        return 0;
    }
    return 0xffffffffu << (8 * (lead - 4 * k));
}

/* W16: window / 16 when the window is 16, 32, 48 or 64 bytes (register
 * ring), else 0 (leaving byte read from memory).  FPS: write the
 * fingerprints too. */
template <int W16, bool FPS>
__device__ __forceinline__ void
chunk_body(const uint64_t *__restrict__ tables,
           const uint8_t *__restrict__ data,
           const uint32_t *__restrict__ offsets,
           const uint32_t *__restrict__ order, uint32_t n,
           struct gpu_re_kparams kp, uint16_t *__restrict__ ends,
           uint64_t *__restrict__ fps)
{
    __shared__ uint64_t sT[256], sU[256];

    for (uint32_t i = threadIdx.x; i < 256; i += blockDim.x) {
        sT[i] = tables[i];
        sU[i] = tables[256 + i];
    }
    __syncthreads();

    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) {
        return;
    }
    uint32_t p = order ? order[t] : t;
    uint32_t base = offsets[0];
    int32_t start = offsets[p] - base;
    int32_t end = offsets[p + 1] - base;
    if (start == end) {
        return;
    }
    uint32_t slot = (uint32_t) start / (uint32_t) kp.min_chunk + p;
    const uint4 *d16 = (const uint4 *) data;
    uint4 ring[W16 > 0 ? W16 : 1];
    uint64_t fp = 0;
    struct gpu_re_cutter cut;
    int32_t blk0 = start >> 4, blkn = (end - 1) >> 4;
    uint32_t lead = start & 15;

    gpu_re_cutter_start(&kp, &cut, start, end);

#pragma unroll
    for (int k = 0; k < (W16 > 0 ? W16 : 1); k++) {
        ring[k] = make_uint4(0, 0, 0, 0);
    }
    for (int32_t blk = blk0; blk <= blkn; blk++) {
        uint4 v = d16[blk];

        if (blk == blk0) {
            v.x &= lead_mask(lead, 0);
            v.y &= lead_mask(lead, 1);
            v.z &= lead_mask(lead, 2);
            v.w &= lead_mask(lead, 3);
        }
#pragma unroll
        for (int j = 0; j < 16; j++) {
            int32_t pos = blk * 16 + j;
            uint8_t out;

            if (W16 > 0) {
                out = vbyte(ring[W16 > 0 ? W16 - 1 : 0], j);
            } else {
                out = pos - kp.window >= start ? data[pos - kp.window] : 0;
            }
            fp = gpu_re_roll(sT, sU, fp, out, vbyte(v, j));
            if (gpu_re_cutter_test(&kp, &cut, fp, pos)) {
                ends[slot] = (uint16_t) (pos + 1 - start);
                if (FPS) {
                    fps[slot] = fp;
                }
                slot++;
                gpu_re_cutter_start(&kp, &cut, pos + 1, end);
            }
        }
        if (W16 > 0) {
#pragma unroll
            for (int k = (W16 > 0 ? W16 : 1) - 1; k > 0; k--) {
                ring[k] = ring[k - 1];
            }
            ring[0] = v;
        }
    }
}

template <int W16, bool FPS>
__global__ void __launch_bounds__(THREADS)
chunk_kernel(const uint64_t *__restrict__ tables,
             const uint8_t *__restrict__ data,
             const uint32_t *__restrict__ offsets,
             const uint32_t *__restrict__ order, uint32_t n,
             struct gpu_re_kparams kp, uint16_t *__restrict__ ends,
             uint64_t *__restrict__ fps)
{
    chunk_body<W16, FPS>(tables, data, offsets, order, n, kp, ends, fps);
}

/* ---- Segment mode (cfg.remap): work by bytes, not by packets. ----
 *
 * A window's fingerprint depends only on the last 'window' bytes, so the
 * fingerprints can be computed in fixed segments of the packed batch,
 * whatever packets they fall in, by threads that first roll the window's
 * worth of bytes before their segment: every thread does the same work,
 * and a batch of few long packets still fills the GPU.  Only the cut
 * rule is sequential (a cut depends on the previous one), and it needs
 * just one bit per byte: where a fingerprint may cut.  So:
 *
 *   cand_kernel:   thread k rolls bytes [k seg - window, (k + 1) seg) and
 *                  writes the candidate bits of [k seg, (k + 1) seg);
 *   select_kernel: thread p walks packet p's bits 32 at a time, applying
 *                  the min/max rule, and writes its cuts (and, if asked,
 *                  the fingerprint at each cut, re-rolled from its
 *                  window: 'window' steps per cut). */
template <int W16>
__device__ __forceinline__ void
cand_body(const uint64_t *__restrict__ tables,
          const uint8_t *__restrict__ data,
          const uint32_t *__restrict__ offsets, uint32_t n,
          uint32_t n_bytes, uint32_t seg, struct gpu_re_kparams kp,
          uint32_t *__restrict__ cand)
{
    __shared__ uint64_t sT[256], sU[256];

    for (uint32_t i = threadIdx.x; i < 256; i += blockDim.x) {
        sT[i] = tables[i];
        sU[i] = tables[256 + i];
    }
    __syncthreads();

    uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if ((uint64_t) k * seg >= n_bytes) {
        return;
    }
    const uint32_t base = offsets[0];
    const int32_t cs = k * seg;
    const int32_t ce = min(cs + (int32_t) seg, (int32_t) n_bytes);

    /* The packet holding byte cs: the last one starting at or before
     * it (it ends after it, as cs < n_bytes). */
    uint32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;

        if ((int32_t) (offsets[mid] - base) <= cs) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    uint32_t p = lo;
    int32_t pstart = offsets[p] - base, pend = offsets[p + 1] - base;
    /* Roll from a window before the segment, or from the packet's
     * start; bytes before 'zlo' leave the window as zeros. */
    int32_t q = max(pstart, cs - kp.window);
    int32_t zlo = q;
    const uint4 *d16 = (const uint4 *) data;
    uint4 ring[W16 > 0 ? W16 : 1];
    uint64_t fp = 0;
    uint32_t word = 0;
    int32_t blk0 = q >> 4, blkn = (ce - 1) >> 4;
    uint32_t lead = q & 15;

#pragma unroll
    for (int i = 0; i < (W16 > 0 ? W16 : 1); i++) {
        ring[i] = make_uint4(0, 0, 0, 0);
    }
    for (int32_t blk = blk0; blk <= blkn; blk++) {
        uint4 v = d16[blk];

        if (blk == blk0) {
            /* Zeros roll as a no-op from fp 0. */
            v.x &= lead_mask(lead, 0);
            v.y &= lead_mask(lead, 1);
            v.z &= lead_mask(lead, 2);
            v.w &= lead_mask(lead, 3);
        }
#pragma unroll
        for (int j = 0; j < 16; j++) {
            int32_t pos = blk * 16 + j;
            uint8_t out;

            if (pos == pend && pos < ce) {
                /* The next (non-empty) packet: a fresh window. */
                while (pos == pend) {
                    p++;
                    pstart = pend;
                    pend = offsets[p + 1] - base;
                }
                fp = 0;
                zlo = pstart;
            }
            if (W16 > 0) {
                out = pos - kp.window >= zlo
                      ? vbyte(ring[W16 > 0 ? W16 - 1 : 0], j) : 0;
            } else {
                out = pos - kp.window >= zlo ? data[pos - kp.window] : 0;
            }
            fp = gpu_re_roll(sT, sU, fp, out, vbyte(v, j));
            if (pos >= cs && pos < ce) {
                word |= (uint32_t) !((uint32_t) fp & (uint32_t) kp.mask)
                        << (pos & 31);
                if ((pos & 31) == 31 || pos == ce - 1) {
                    cand[pos >> 5] = word;
                    word = 0;
                }
            }
        }
        if (W16 > 0) {
#pragma unroll
            for (int i = (W16 > 0 ? W16 : 1) - 1; i > 0; i--) {
                ring[i] = ring[i - 1];
            }
            ring[0] = v;
        }
    }
}

template <int W16>
__global__ void __launch_bounds__(THREADS)
cand_kernel(const uint64_t *__restrict__ tables,
            const uint8_t *__restrict__ data,
            const uint32_t *__restrict__ offsets, uint32_t n,
            uint32_t n_bytes, uint32_t seg, struct gpu_re_kparams kp,
            uint32_t *__restrict__ cand)
{
    cand_body<W16>(tables, data, offsets, n, n_bytes, seg, kp, cand);
}

/* A warp a packet: the warp first copies the packet's candidate words
 * into shared memory, all lanes at once, then every lane walks them in
 * step (the same cuts) and lane 0 writes them.  A thread a packet walking
 * the words in global memory waited on an L2 round trip for each of the
 * ~9 words a chunk's candidates span (25 us of a 106 us call of 600
 * payloads, ncu on the H200).  Packets longer than the stage walk global
 * memory as before. */
#define SELECT_STAGE_WORDS (STAGE_BYTES / 32 + 2)

template <bool FPS>
__device__ __forceinline__ void
select_body(const uint64_t *__restrict__ tables,
            const uint8_t *__restrict__ data,
            const uint32_t *__restrict__ offsets, uint32_t n,
            struct gpu_re_kparams kp, const uint32_t *__restrict__ cand,
            uint16_t *__restrict__ ends, uint64_t *__restrict__ fps)
{
    __shared__ uint64_t sT[256], sU[256];
    __shared__ uint32_t stage[THREADS / 32][SELECT_STAGE_WORDS];

    if (FPS) {
        for (uint32_t i = threadIdx.x; i < 256; i += blockDim.x) {
            sT[i] = tables[i];
            sU[i] = tables[256 + i];
        }
        __syncthreads();
    }

    uint32_t p = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    uint32_t lane = threadIdx.x % 32;
    if (p >= n) {
        return;                 /* The whole warp: 'p' is the warp's. */
    }
    const uint32_t base = offsets[0];
    const int32_t start = offsets[p] - base;
    const int32_t len = offsets[p + 1] - base - start;
    uint32_t slot = (uint32_t) start / (uint32_t) kp.min_chunk + p;
    const uint32_t *words = cand;   /* Word w at words[w - w0]. */
    int32_t w0 = 0;
    struct gpu_re_cutter cut;
    int32_t s = 0;

    if (len > 0 && len <= STAGE_BYTES) {
        uint32_t *buf = stage[threadIdx.x / 32];
        int32_t first = start >> 5, last = (start + len - 1) >> 5;

        for (int32_t k = lane; k <= last - first; k += 32) {
            buf[k] = cand[first + k];
        }
        __syncwarp();
        words = buf;
        w0 = first;
    }
    while (s < len) {
        int32_t c;

        gpu_re_cutter_start(&kp, &cut, s, len);
        c = cut.hi;
        if (cut.lo <= cut.hi) {
            /* The first candidate in [lo, hi], 32 bytes at a time. */
            int32_t a = start + cut.lo, b = start + cut.hi;

            for (int32_t w = a >> 5; w <= b >> 5; w++) {
                uint32_t bits = words[w - w0];

                if (w == a >> 5) {
                    bits &= ~0u << (a & 31);
                }
                if (w == b >> 5 && (b & 31) != 31) {
                    bits &= (1u << ((b & 31) + 1)) - 1;
                }
                if (bits) {
                    c = w * 32 + __ffs(bits) - 1 - start;
                    break;
                }
            }
        }
        if (!lane) {
            ends[slot] = (uint16_t) (c + 1);
            if (FPS) {
                /* The window ending at c, rolled afresh. */
                int32_t from = max(0, c + 1 - kp.window);
                uint64_t fp = 0;

                for (int32_t i = from; i <= c; i++) {
                    fp = gpu_re_roll(sT, sU, fp, 0, data[start + i]);
                }
                fps[slot] = fp;
            }
        }
        slot++;
        s = c + 1;
    }
}

template <bool FPS>
__global__ void __launch_bounds__(THREADS)
select_kernel(const uint64_t *__restrict__ tables,
              const uint8_t *__restrict__ data,
              const uint32_t *__restrict__ offsets, uint32_t n,
              struct gpu_re_kparams kp, const uint32_t *__restrict__ cand,
              uint16_t *__restrict__ ends, uint64_t *__restrict__ fps)
{
    select_body<FPS>(tables, data, offsets, n, kp, cand, ends, fps);
}

/* Copies the 'len' bytes at offset 'start' of 'data' (the batch's
 * 16-byte aligned buffer, with the slack of a 16-byte load past its end)
 * into the warp's shared 'buf' (STAGE_BYTES + 32 bytes), with 16-byte
 * loads by all 32 lanes at once, and returns where they start there.
 * Every lane of the warp calls it. */
__device__ __forceinline__ const uint8_t *
warp_stage(uint4 *buf, const uint8_t *data, uint32_t start, uint32_t len,
           uint32_t lane)
{
    const uint4 *d16 = (const uint4 *) data;
    uint32_t blk0 = start >> 4;
    uint32_t n_blks = ((start + len + 15) >> 4) - blk0;

    for (uint32_t k = lane; k < n_blks; k += 32) {
        buf[k] = d16[blk0 + k];
    }
    __syncwarp();
    return (const uint8_t *) buf + (start & 15);
}

/* XXH64 (gpu_re_xxh64()) of the 'len' bytes at 'p', each quad of the
 * warp (lanes 4q to 4q + 3) its own input: lane 4q + j walks accumulator
 * j over the stripes (an accumulator depends only on its own 8 bytes of
 * each 32-byte stripe), so the stripes take a quarter of one thread's
 * time; each lane of the quad then joins the four and hashes the tail,
 * and returns the hash.  Every lane of the warp calls it ('len' 0 where
 * a quad has nothing to hash).  One lane walking all four was the hash
 * kernel's longest path: for the payload check, 19.5 us of a 92 us call
 * of 600 payloads (ncu on the H200, caches warm, thirty-first session),
 * for MurmurHash3's chunk hashes 14.1 us of 77 (thirty-second). */
__device__ __forceinline__ uint64_t
quad_xxh64(const uint8_t *p, uint32_t len, uint32_t lane)
{
    uint32_t j = lane % 4, q0 = lane - j;
    uint32_t n_stripes = len / 32;
    uint64_t v = gpu_re_xxh64_acc_start(j);

    for (uint32_t s = 0; s < n_stripes; s++) {
        v = gpu_re_xxh64_round(v, gpu_re_load64le(p + 32 * s + 8 * j));
    }
    uint64_t v1 = __shfl_sync(0xffffffffu, (unsigned long long) v, q0);
    uint64_t v2 = __shfl_sync(0xffffffffu, (unsigned long long) v, q0 + 1);
    uint64_t v3 = __shfl_sync(0xffffffffu, (unsigned long long) v, q0 + 2);
    uint64_t v4 = __shfl_sync(0xffffffffu, (unsigned long long) v, q0 + 3);
    uint64_t h = (n_stripes ? gpu_re_xxh64_join(v1, v2, v3, v4)
                  : GPU_RE_XXH_P5);

    return gpu_re_xxh64_finish(h, len, p + 32 * n_stripes, p + len);
}

/* After the cuts: each chunk's hash (gpu_re_chunk_hash()) and each
 * packet's check (gpu_re_payload_check()), the same code as the CPU's
 * (re-inline.h), a warp a packet.  The warp first copies its packet into
 * shared memory with 16-byte loads, all lanes at once; then quad q
 * (lanes 4q to 4q + 3) of the first seven hashes chunks q, q + 7, ...
 * and, at the same time, the eighth the whole packet (quad_xxh64()):
 * one MTU's payload uncut, the batch's longest path, takes the time of
 * one hash, not two.  One thread a packet hashing straight from
 * global memory waited on an L2 round trip every word, twice over the
 * payload, with ~one warp an SM: 168 us of a 275 us call of 600 payloads
 * (ncu, H200), the longest of the call's kernels.  Packets longer than
 * the stage are hashed from global memory as before. */
__device__ __forceinline__ void
hash_body(const uint8_t *__restrict__ data,
          const uint32_t *__restrict__ offsets,
          const uint32_t *__restrict__ order, uint32_t n,
          uint32_t min_chunk, const uint16_t *__restrict__ ends,
          struct gpu_re_hash *__restrict__ hashes,
          uint32_t *__restrict__ payload_checks)
{
    /* Room for a packet's 16-byte words: up to 15 bytes before its
     * start, and the word loads' overreach past its end. */
    __shared__ uint4 stage[THREADS / 32][STAGE_BYTES / 16 + 2];
    uint32_t w = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    uint32_t lane = threadIdx.x % 32, quad = lane / 4;

    if (w >= n) {
        return;                 /* The whole warp: 'w' is the warp's. */
    }
    uint32_t p = order ? order[w] : w;
    uint32_t start = offsets[p] - offsets[0];
    uint32_t len = offsets[p + 1] - offsets[p];
    uint32_t slot = start / min_chunk + p;
    /* Every chunk but the last has min_chunk bytes or more. */
    uint32_t max_chunks = len / min_chunk + 1;
    const uint8_t *pkt = data + start;

    if (len <= STAGE_BYTES) {
        pkt = warp_stage(stage[threadIdx.x / 32], data, start, len, lane);
    }
    for (uint32_t i0 = 0; i0 < max_chunks; i0 += 7) {
        uint32_t i = i0 + quad;
        uint32_t e = quad < 7 && i < max_chunks ? ends[slot + i] : len;
        /* The ends rise to 'len', the last chunk's; slots after it hold
         * nothing of this packet.  (Quad 7's "end" is the packet's.) */
        uint32_t at_end = __ballot_sync(0xffffffffu, e >= len);
        uint32_t last = (__ffs(at_end) - 1) / 4;
        /* An empty packet has no chunk, only its check. */
        bool mine = quad <= last && quad < 7 && len;
        uint32_t s = mine && i ? ends[slot + i - 1] : 0;
        /* Every lane shuffles in quad_xxh64(): one call, each quad its
         * input (quad 7 the packet's check, on the first pass). */
        uint32_t n_in = quad == 7 ? (i0 ? 0 : len) : mine ? e - s : 0;
        uint64_t h = quad_xxh64(quad == 7 ? pkt : pkt + s, n_in, lane);

        if (quad == 7 && !i0 && lane == 28) {
            payload_checks[p] = h >> 32;
        }
        if (mine && lane % 4 == 0) {
            hashes[slot + i] = gpu_re_chunk_hash_of(h);
        }
        if (last < 7) {
            break;
        }
    }
}

__global__ void __launch_bounds__(THREADS)
hash_kernel(const uint8_t *__restrict__ data,
            const uint32_t *__restrict__ offsets,
            const uint32_t *__restrict__ order, uint32_t n,
            uint32_t min_chunk, const uint16_t *__restrict__ ends,
            struct gpu_re_hash *__restrict__ hashes,
            uint32_t *__restrict__ payload_checks)
{
    hash_body(data, offsets, order, n, min_chunk, ends, hashes,
              payload_checks);
}

/* ---- The encoder on the device (re-private.h): insert, encode, append,
 * push.  Each returns past the work that the submission's 'a' gives it,
 * so a graph built for the batch's capacity serves every submission.
 * ---- */

/* Copies payloads a->first .. n - 1 into the ring at their stream
 * positions, after they were encoded; of a batch longer than the ring,
 * only the bytes that stay (two bytes for one place would race). */
__device__ __forceinline__ void
enc_append_body(struct gpu_re_enc_dev kd, const uint8_t *__restrict__ data,
                const uint32_t *__restrict__ offsets, uint32_t n,
                const struct gpu_re_enc_args *a)
{
    if (a->first >= n) {
        return;
    }
    uint64_t from = offsets[a->first] - offsets[0];
    uint64_t total = offsets[n] - offsets[a->first];
    uint64_t skip = total > kd.size ? total - kd.size : 0;
    uint64_t stride = (uint64_t) gridDim.x * blockDim.x;
    uint64_t k = skip + blockIdx.x * blockDim.x + threadIdx.x;
    /* The ring's index of byte k, stepped rather than divided for every
     * byte (a 64-bit division is ~100 instructions on the device). */
    uint64_t r = (a->base + k) % kd.size;
    uint64_t step = stride % kd.size;

    for (; k < total; k += stride) {
        kd.ring[r] = data[from + k];
        r += step;
        if (r >= kd.size) {
            r -= kd.size;
        }
    }
}

__device__ __forceinline__ unsigned long long *
enc_bucket(struct gpu_re_enc_dev kd, const struct gpu_re_hash *h)
{
    return kd.table + (h->lo & kd.mask) * GPU_RE_ENC_WAYS;
}

__device__ __forceinline__ uint64_t
enc_tag(const struct gpu_re_hash *h)
{
    return h->hi >> GPU_RE_ENC_POS_BITS;
}

/* Enters the chunk with hash 'h' at stream position 'pos': keeps the
 * oldest copy of a chunk still cached (entries before 'low', the ring's
 * oldest byte before the batch, are free), else takes a free entry or
 * the oldest.  A lost race costs an entry, never a wrong reference. */
__device__ __forceinline__ void
enc_table_insert(struct gpu_re_enc_dev kd, const struct gpu_re_hash *h,
                 uint64_t pos, uint64_t low)
{
    unsigned long long *b = enc_bucket(kd, h);
    uint64_t tag = enc_tag(h);
    unsigned long long word = (tag << GPU_RE_ENC_POS_BITS)
                              | (pos & GPU_RE_ENC_POS_MASK);

    for (int attempt = 0; attempt < 4; attempt++) {
        unsigned long long victim_word = 0;
        uint64_t victim_age = UINT64_MAX;
        int victim = 0;

        for (int k = 0; k < GPU_RE_ENC_WAYS; k++) {
            unsigned long long w = ((volatile unsigned long long *) b)[k];
            uint64_t wpos = w & GPU_RE_ENC_POS_MASK;
            bool live = w && wpos >= low;

            if (live && (w >> GPU_RE_ENC_POS_BITS) == tag) {
                atomicMin(&b[k], word);
                return;
            }
            if ((live ? wpos + 1 : 0) < victim_age) {
                victim_age = live ? wpos + 1 : 0;
                victim = k;
                victim_word = w;
            }
        }
        if (atomicCAS(&b[victim], victim_word, word) == victim_word) {
            return;
        }
    }
}

/* Enters the chunks of at least min_ref bytes of payloads a->first ..
 * n - 1, a warp a payload, lane i its chunks i, i + 32, ...: a chunk's
 * entry does not depend on its payload's others (a copy already there
 * keeps the oldest position), and a thread a payload waited on a bucket
 * for each chunk in turn (15 us of a 106 us call of 600 payloads, ncu on
 * the H200). */
__device__ __forceinline__ void
enc_insert_body(struct gpu_re_enc_dev kd,
                const uint32_t *__restrict__ offsets, uint32_t n,
                const uint16_t *__restrict__ ends,
                const struct gpu_re_hash *__restrict__ hashes,
                const struct gpu_re_enc_args *a)
{
    uint32_t p = a->first + (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    uint32_t lane = threadIdx.x % 32;

    if (p >= n) {
        return;                 /* The whole warp: 'p' is the warp's. */
    }
    uint32_t len = offsets[p + 1] - offsets[p];
    size_t slot = (offsets[p] - offsets[0]) / kd.min_chunk + p;
    uint64_t pos = a->base + (offsets[p] - offsets[a->first]);
    /* Every chunk but the last has min_chunk bytes or more. */
    uint32_t max_chunks = len / kd.min_chunk + 1;

    for (uint32_t i0 = 0; len && i0 < max_chunks; i0 += 32) {
        uint32_t i = i0 + lane;
        uint32_t e = i < max_chunks ? ends[slot + i] : len;
        /* The ends rise to 'len', the last chunk's. */
        uint32_t at_end = __ballot_sync(0xffffffffu, e >= len);
        uint32_t last = at_end ? __ffs(at_end) - 1 : 31;

        if (lane <= last) {
            uint32_t s = i ? ends[slot + i - 1] : 0;

            if (e - s >= kd.min_ref) {
                enc_table_insert(kd, &hashes[slot + i], pos + s, a->low);
            }
        }
        if (at_end) {
            break;
        }
    }
}

/* The encoder's stream as a payload of the batch sees it: bytes before
 * the batch ('base') in the ring, the batch's own (appended only after
 * the encoding, so that they overwrite nothing a reference may use) in
 * its input, from 'batch' on. */
struct enc_stream {
    const uint8_t *ring;
    uint64_t size;
    uint64_t base;
    const uint8_t *batch;
};

__device__ __forceinline__ uint8_t
enc_byte(const struct enc_stream *st, uint64_t q)
{
    return q < st->base ? st->ring[q % st->size] : st->batch[q - st->base];
}

/* Bytes a lane compares in one step of enc_match(). */
#define MATCH_LANE_BYTES 8

/* Loads into 'b' the stream's bytes at positions q0, q0 + 1, ... (or with
 * 'back' q0, q0 - 1, ...), the first 'n' of MATCH_LANE_BYTES: one 64-bit
 * division for the ring's index, then steps, and no load waits for
 * another. */
__device__ __forceinline__ void
enc_lane_bytes(const struct enc_stream *st, uint64_t q0, uint32_t n,
               bool back, uint8_t *b)
{
    uint64_t r = q0 % st->size;

#pragma unroll
    for (int t = 0; t < MATCH_LANE_BYTES; t++) {
        uint64_t q = back ? q0 - t : q0 + t;

        if (t < n) {
            b[t] = q < st->base ? st->ring[r] : st->batch[q - st->base];
        }
        r = (back ? (r ? r - 1 : st->size - 1)
             : (r + 1 == st->size ? 0 : r + 1));
    }
}

/* How many of the 'max' bytes at 'p' equal the stream's from position
 * 'q' on, or with 'back' how many of those before 'p' equal the stream's
 * before 'q'.  The warp compares 32 * MATCH_LANE_BYTES bytes a step, lane
 * i bytes 8i to 8i + 7 of it: a step waits on one round trip to the ring
 * (global memory), so a payload found whole in the cache (1460 bytes
 * compared forward after its first chunk) takes 6 of them rather than
 * 46 with a byte a lane, which made the shim kernel ~20-27 us of a
 * ~75-90 us call (ncu on the H200, thirty-first session). */
__device__ __forceinline__ uint32_t
enc_match(const struct enc_stream *st, uint64_t q, const uint8_t *p,
          uint32_t max, bool back)
{
    uint32_t lane = threadIdx.x % 32;

    for (uint32_t k = 0; k < max; k += 32 * MATCH_LANE_BYTES) {
        uint32_t i0 = k + lane * MATCH_LANE_BYTES;
        uint32_t first = MATCH_LANE_BYTES;  /* The lane's first differing
                                             * byte, if any. */

        if (i0 < max) {
            uint32_t n = min((uint32_t) MATCH_LANE_BYTES, max - i0);
            uint8_t b[MATCH_LANE_BYTES];

            enc_lane_bytes(st, back ? q - 1 - i0 : q + i0, n, back, b);
#pragma unroll
            for (int t = MATCH_LANE_BYTES - 1; t >= 0; t--) {
                uint32_t i = i0 + t;

                if (t < n && b[t] != (back ? p[-1 - (int64_t) i] : p[i])) {
                    first = t;
                }
            }
        }
        uint32_t differ = __ballot_sync(0xffffffffu,
                                        first < MATCH_LANE_BYTES);

        if (differ) {
            int l = __ffs(differ) - 1;

            return (k + l * MATCH_LANE_BYTES
                    + __shfl_sync(0xffffffffu, first, l));
        }
    }
    return max;
}

/* The oldest cached copy of the 'len'-byte chunk at 'p' with hash 'h'
 * that lies wholly in [low, before), compared byte for byte: each of the
 * bucket's ways in a lane, the candidates then in turn by the warp. */
__device__ __forceinline__ bool
enc_table_find(struct gpu_re_enc_dev kd, const struct enc_stream *st,
               const struct gpu_re_hash *h, const uint8_t *p, uint32_t len,
               uint64_t low, uint64_t before, uint64_t *q)
{
    const unsigned long long *b = enc_bucket(kd, h);
    uint32_t lane = threadIdx.x % 32;
    unsigned long long w = lane < GPU_RE_ENC_WAYS ? b[lane] : 0;
    uint64_t wpos = w & GPU_RE_ENC_POS_MASK;
    bool cand = (w && (w >> GPU_RE_ENC_POS_BITS) == enc_tag(h)
                 && wpos >= low && wpos + len <= before);
    uint32_t cands = __ballot_sync(0xffffffffu, cand);

    while (cands) {
        int k = __ffs(cands) - 1;
        uint64_t at = __shfl_sync(0xffffffffu, (unsigned long long) wpos,
                                  k);

        if (enc_match(st, at, p, len, false) == len) {
            *q = at;
            return true;
        }
        cands &= cands - 1;
    }
    return false;
}

/* Appends a literal of payload bytes [from, to) to the body: its header
 * by lane 0, its bytes by the warp.  Every lane keeps the same '*n'. */
__device__ __forceinline__ bool
enc_emit_literal(uint8_t *out, size_t *n, size_t limit, const uint8_t *p,
                 uint32_t from, uint32_t to)
{
    uint32_t lane = threadIdx.x % 32;
    uint8_t hdr[8];
    size_t hn = 0;

    if (to <= from) {
        return true;
    }
    hdr[hn++] = 0;
    gpu_re_put_varint(hdr, &hn, sizeof hdr, to - from);
    if (limit - *n < hn || limit - *n - hn < to - from) {
        return false;
    }
    for (uint32_t k = lane; k < hn; k += 32) {
        out[*n + k] = hdr[k];
    }
    *n += hn;
    for (uint32_t k = lane; k < to - from; k += 32) {
        out[*n + k] = p[from + k];
    }
    *n += to - from;
    return true;
}

/* Appends a reference to the 'len' bytes 'dist' back. */
__device__ __forceinline__ bool
enc_emit_ref(uint8_t *out, size_t *n, size_t limit, uint32_t dist,
             uint32_t len)
{
    uint32_t lane = threadIdx.x % 32;
    uint8_t item[16];
    size_t in = 0;

    item[in++] = 1;
    gpu_re_put_varint(item, &in, sizeof item, dist);
    gpu_re_put_varint(item, &in, sizeof item, len);
    if (limit - *n < in) {
        return false;
    }
    for (uint32_t k = lane; k < in; k += 32) {
        out[*n + k] = item[k];
    }
    *n += in;
    return true;
}

/* Encodes payload p, a warp each, as the host's encoder does: each chunk
 * of at least min_ref bytes that a match has not covered yet is looked
 * up, and a copy found in earlier bytes still cached for this payload is
 * extended both ways and becomes a reference; the rest are literals.  A
 * body that does not make the shim shorter than the payload (or, for the
 * epoch's START, fit its room) leaves the payload raw.  Every lane walks
 * the same chunks with the same values; the byte work is spread. */
__device__ __forceinline__ void
enc_shim_body(struct gpu_re_enc_dev kd, const uint8_t *__restrict__ data,
              const uint32_t *__restrict__ offsets, uint32_t n,
              const uint16_t *__restrict__ ends,
              const struct gpu_re_hash *__restrict__ hashes,
              const struct gpu_re_enc_args *a,
              uint8_t *__restrict__ bodies,
              struct gpu_re_enc_result *__restrict__ results)
{
    __shared__ uint4 stage[THREADS / 32][STAGE_BYTES / 16 + 2];
    uint32_t p = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    uint32_t lane = threadIdx.x % 32;

    if (p >= n) {
        return;
    }
    struct gpu_re_enc_result r = { 0, 0, 0, 0, 0 };
    uint32_t start = offsets[p] - offsets[0];
    uint32_t len = offsets[p + 1] - offsets[p];
    bool is_start = a->start && p == a->first;
    size_t body_limit;

    if (p < a->first) {
        body_limit = 0;             /* Before the epoch's START: raw. */
    } else if (is_start) {
        body_limit = a->start_room;
    } else if (len > GPU_RE_SHIM_HDR_LEN + 1) {
        body_limit = len - 1 - GPU_RE_SHIM_HDR_LEN;
    } else {
        body_limit = 0;             /* No shim could be shorter. */
    }
    if (!body_limit && !is_start) {
        if (!lane) {
            results[p] = r;
        }
        return;
    }

    const uint8_t *pay = data + start;
    uint8_t *out = bodies + gpu_re_enc_body_slot(offsets, p);

    if (len <= STAGE_BYTES) {
        /* The payload, read at every compare step and for the literals,
         * from shared memory. */
        pay = warp_stage(stage[threadIdx.x / 32], data, start, len, lane);
    }
    uint64_t pos = a->base + (offsets[p] - offsets[a->first]);
    uint64_t low = pos > kd.size ? pos - kd.size : 0;
    struct enc_stream st = {
        kd.ring, kd.size, a->base,
        data + (offsets[a->first] - offsets[0]),
    };
    size_t slot = start / kd.min_chunk + p;
    size_t nb = 0;
    uint32_t cover = 0, hits = 0, hit_bytes = 0;
    bool ok = true;

    for (uint32_t i = 0, s = 0; ok && !is_start && s < len;
         s = ends[slot + i++]) {
        uint32_t e = ends[slot + i];
        uint64_t q;

        if (e - s < kd.min_ref || s < cover
            || !enc_table_find(kd, &st, &hashes[slot + i], pay + s, e - s,
                               low, pos, &q)) {
            continue;
        }

        /* Extend the match both ways as far as the stream agrees: chunks
         * are cut per payload, so its first and last rarely match
         * whole. */
        uint64_t back = q - low;
        uint32_t k = enc_match(&st, q, pay + s,
                               s - cover < back ? s - cover
                               : (uint32_t) back, true);
        uint32_t b = s - k, f = e;
        uint64_t r0 = q - k, t = q + (e - s);
        uint64_t ahead = pos - t;

        f += enc_match(&st, t, pay + f,
                       len - f < ahead ? len - f : (uint32_t) ahead, false);
        ok = (enc_emit_literal(out, &nb, body_limit, pay, cover, b)
              && enc_emit_ref(out, &nb, body_limit, (uint32_t) (pos - r0),
                              f - b));
        hits++;
        hit_bytes += f - b;
        cover = f;
    }
    if (ok) {
        ok = enc_emit_literal(out, &nb, body_limit, pay, cover, len);
    }
    if (ok) {
        r.body_len = nb;
        r.shim = 1;
        r.hits = hits;
        r.hit_bytes = hit_bytes;
    }
    if (!lane) {
        results[p] = r;
    }
}

/* Copies the results of payloads 0 .. n - 1, their bodies and their
 * checks (the shims' check) into the host's mapped buffers, a warp a
 * payload. */
__device__ __forceinline__ void
enc_push_body(const uint32_t *__restrict__ offsets, uint32_t n,
              const struct gpu_re_enc_result *__restrict__ results,
              const uint8_t *__restrict__ bodies,
              const uint32_t *__restrict__ payload_checks,
              struct gpu_re_enc_result *h_results, uint8_t *h_bodies,
              uint32_t *h_payload_checks)
{
    uint32_t lane = threadIdx.x % 32;
    uint32_t warps = gridDim.x * blockDim.x / 32;

    for (uint32_t p = (blockIdx.x * blockDim.x + threadIdx.x) / 32; p < n;
         p += warps) {
        struct gpu_re_enc_result r = results[p];
        size_t slot = gpu_re_enc_body_slot(offsets, p);

        if (!lane) {
            h_results[p] = r;
            if (h_payload_checks) {
                h_payload_checks[p] = payload_checks[p];
            }
        }
        for (uint32_t k = lane; r.shim && k < r.body_len; k += 32) {
            h_bodies[slot + k] = bodies[slot + k];
        }
    }
}

#endif /* re-kernels.cuh */
