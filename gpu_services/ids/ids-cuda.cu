/*
 * CUDA backend of the IDS matcher (sm_90).
 *
 * One submission is four steps on the caller's stream:
 *
 *   1. copy the packed payloads, offsets and headers in;
 *   2. scan: walk the DFA and append every flagged position (a state that
 *      ends an anchor pattern) to a hit list;
 *   3. check: one thread per hit confirms the anchor pattern, claims
 *      (packet, pattern) in a hash set (so a rule is checked once per
 *      packet), and runs the full rule check; matches go to per-packet
 *      atomics (lowest sid, count) and per-rule counters;
 *   4. write the verdicts and copy them out.
 *
 * The scan has two mappings (docs/IDS-NOTES.md):
 *
 *   remap (default): thread-data remapping on the data side.  Thread k
 *     scans bytes [k * chunk, (k + 1) * chunk) of the packed batch,
 *     whatever packets they belong to: first up to max_depth - 1 bytes
 *     before the chunk (inside its packet) to reach the automaton's state,
 *     then the chunk, resetting to the root at each packet start.  Every
 *     lane does the same work whatever the packet sizes, with no barrier.
 *
 *   no remap: one packet per thread, the classic mapping whose warps run
 *     as long as their longest packet (for comparison).
 *
 * Hits are appended with warp-aggregated atomics: the lanes that hit in
 * the same step form a coalesced group and take their slots with one
 * atomicAdd.  If the hit list overflows, the check step does nothing and
 * the batch is matched on the CPU when waited for; so is a batch whose
 * device work failed.
 */
#include <config.h>

#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_services/ids/ids-private.h"

namespace cg = cooperative_groups;

#define THREADS 256
/* Hit list slots per payload byte, at least; a batch's list grows to
 * what its recent launches found (rule sets with short anchors hit far
 * more often), since an overflow costs a CPU re-match of the batch (not
 * a wrong answer). */
#define HITS_PER_BYTE_DIV 16
#define MIN_HITS 65536
#define MAX_HITS (1u << 24)
/* Below this many scan items a batch leaves most of the GPU idle, and a
 * thread's chain of dependent table loads (its chunk plus the warm-up)
 * is the batch's latency: chunks are halved, down to 16 bytes, until
 * there are this many.  A switch's batches of 32 packets are ~20 kB. */
#define MIN_SCAN_ITEMS 32768

#define CK(CALL) gpu_cuda_status((CALL), #CALL)

struct hit {
    uint32_t packet;
    uint32_t pos;               /* Of the hit's last byte, in the packet. */
    uint32_t row;               /* Automaton row offset. */
};

struct cuda_matcher {
    int device;
    void *dmem;                 /* All tables, one allocation. */
    struct gpu_ids_tables dview;
    unsigned long long *d_rule_counts;
};

struct cuda_batch {
    uint8_t *d_data;
    uint32_t *d_offsets;
    struct gpu_ids_pkt_hdr *d_hdrs;
    unsigned long long *d_keys;
    uint32_t *d_counts;
    struct gpu_ids_verdict *d_verdicts;
    struct hit *d_hits;
    uint32_t *d_hit_count;
    unsigned long long *d_seen;     /* (packet, pattern) set. */
    uint32_t seen_log2;
    uint32_t *h_hit_count;      /* Pinned. */
    size_t hit_cap;             /* Capacity of 'd_hits'. */
    /* The hit list and (packet, pattern) set used by the batch in flight,
     * sized by its bytes: a small batch in big buffers clears only what it
     * can use. */
    uint32_t launch_cap;
    uint32_t launch_seen_log2;
    /* Hits per KB of payload in recent launches (the densest, decaying),
     * to size the next launch's hit list. */
    uint32_t hits_per_kb;
    cudaEvent_t done;
    cudaEvent_t prof[3];        /* Before scan, after scan, after check. */
    bool fallback;              /* Match on the CPU at wait time. */
};

static struct cuda_matcher *
cm(struct gpu_ids_matcher *m)
{
    return (struct cuda_matcher *) m->pdata;
}

static struct cuda_batch *
cb(struct gpu_ids_batch *b)
{
    return (struct cuda_batch *) b->pdata;
}

extern "C" int
gpu_ids_cuda_probe(void)
{
    return gpu_device_count(NULL) > 0;
}

/* ---- Kernels. ---- */

/* Claims (packet, pattern) in the open-addressing set 'seen' (zeroed per
 * batch, at least twice the hit list): true for the first claimant only,
 * so each pattern checks its rules once per packet.  O(1) per hit,
 * unlike searching the packet for an earlier occurrence. */
__device__ __forceinline__ bool
claim_first(unsigned long long *seen, uint32_t log2, uint32_t packet,
            uint32_t pid)
{
    unsigned long long key = ((unsigned long long) packet << 32 | pid) + 1;
    uint32_t mask = (1u << log2) - 1;
    uint32_t h = (uint32_t) ((key * 0x9e3779b97f4a7c15ULL) >> (64 - log2));

    for (;;) {
        unsigned long long prev = atomicCAS(&seen[h], 0ull, key);

        if (prev == 0) {
            return true;
        }
        if (prev == key) {
            return false;
        }
        h = (h + 1) & mask;
    }
}

__device__ __forceinline__ void
emit_hit(struct hit *hits, uint32_t *hit_count, uint32_t cap,
         uint32_t packet, uint32_t pos, uint32_t row)
{
    cg::coalesced_group g = cg::coalesced_threads();
    uint32_t base = 0;

    if (g.thread_rank() == 0) {
        base = atomicAdd(hit_count, g.size());
    }
    base = g.shfl(base, 0) + g.thread_rank();
    if (base < cap) {
        hits[base].packet = packet;
        hits[base].pos = pos;
        hits[base].row = row;
    }
}

struct scan_args {
    const uint8_t *data;        /* 8-byte aligned, padded to 8. */
    const uint32_t *offsets;
    uint32_t base;              /* offsets[0]. */
    uint32_t n_packets;
    uint32_t n_bytes;
    uint32_t chunk;
    uint32_t warm;              /* max_depth - 1. */
    struct hit *hits;
    uint32_t *hit_count;
    uint32_t hit_cap;
};

template <bool REMAP>
__global__ void __launch_bounds__(THREADS)
scan_kernel(const uint32_t *__restrict__ trans,
            const uint8_t *__restrict__ class_map, struct scan_args a)
{
    __shared__ uint8_t cmap[256];
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t cs, ce, start, p, pstart, pend;

    for (uint32_t i = threadIdx.x; i < 256; i += blockDim.x) {
        cmap[i] = class_map[i];
    }
    __syncthreads();

    if (REMAP) {
        uint32_t lo = 0, hi = a.n_packets - 1;

        cs = tid * a.chunk;
        if (cs >= a.n_bytes) {
            return;
        }
        ce = min(cs + a.chunk, a.n_bytes);
        /* The last packet starting at or before cs. */
        while (lo < hi) {
            uint32_t mid = (lo + hi + 1) / 2;

            if (__ldg(&a.offsets[mid]) - a.base <= cs) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        p = lo;
        pstart = __ldg(&a.offsets[p]) - a.base;
        start = cs - pstart > a.warm ? cs - a.warm : pstart;
    } else {
        p = tid;
        if (p >= a.n_packets) {
            return;
        }
        cs = pstart = start = __ldg(&a.offsets[p]) - a.base;
        ce = __ldg(&a.offsets[p + 1]) - a.base;
    }
    pend = __ldg(&a.offsets[p + 1]) - a.base;

    const unsigned long long *d64 = (const unsigned long long *) a.data;
    unsigned long long w = start < ce ? __ldg(&d64[start >> 3]) : 0;
    uint32_t row = 0;

    for (uint32_t i = start; i < ce; i++) {
        uint32_t e;
        uint8_t c;

        if (!(i & 7)) {
            w = __ldg(&d64[i >> 3]);
        }
        while (i == pend) {
            /* Next packet (skipping empty ones): back to the root. */
            p++;
            pstart = pend;
            pend = __ldg(&a.offsets[p + 1]) - a.base;
            row = 0;
        }
        c = (uint8_t) (w >> ((i & 7) * 8));
        e = __ldg(&trans[row + cmap[c]]);
        row = e & GPU_IDS_ROW_MASK;
        if ((e & GPU_IDS_HIT) && i >= cs) {
            emit_hit(a.hits, a.hit_count, a.hit_cap, p, i - pstart, row);
        }
    }
}

__global__ void __launch_bounds__(THREADS)
check_kernel(struct gpu_ids_tables t, const uint8_t *__restrict__ data,
             const uint32_t *__restrict__ offsets, uint32_t base,
             const struct gpu_ids_pkt_hdr *__restrict__ hdrs,
             const struct hit *__restrict__ hits,
             const uint32_t *hit_count, uint32_t cap,
             unsigned long long *seen, uint32_t seen_log2,
             unsigned long long *keys, uint32_t *counts,
             unsigned long long *rule_counts)
{
    uint32_t n = *hit_count;

    if (n > cap) {
        return;                 /* Overflow: the host redoes the batch. */
    }
    for (uint32_t h = blockIdx.x * blockDim.x + threadIdx.x; h < n;
         h += gridDim.x * blockDim.x) {
        struct hit ht = hits[h];
        uint32_t ofs = offsets[ht.packet] - base;
        uint32_t len = offsets[ht.packet + 1] - base - ofs;
        const uint8_t *pkt = data + ofs;
        struct gpu_ids_pkt_hdr hd = hdrs[ht.packet];
        const struct gpu_ids_dout o = t.out[ht.row / t.n_classes];

        for (uint32_t k = 0; k < o.n_anchor; k++) {
            uint32_t pid = t.out_ids[o.start + k];
            const struct gpu_ids_dpattern *pt = &t.patterns[pid];
            int64_t s = (int64_t) ht.pos + 1 - pt->depth;

            if (!gpu_ids_pattern_at(&t, pt, pkt, len, (uint32_t) s)) {
                continue;
            }
            /* One occurrence per packet checks the pattern's rules (the
             * check looks at the whole packet, so any one will do). */
            if (!claim_first(seen, seen_log2, ht.packet, pid)) {
                continue;
            }
            for (uint32_t r = 0; r < pt->n_rules; r++) {
                uint32_t idx = t.anchored[pt->rules + r];

                if (gpu_ids_rule_check(&t, idx, pkt, len, hd.proto,
                                       hd.sport, hd.dport)) {
                    atomicMin(&keys[ht.packet],
                              (unsigned long long) gpu_ids_verdict_key(
                                  t.rules[idx].sid, idx));
                    atomicAdd(&counts[ht.packet], 1u);
                    atomicAdd(&rule_counts[idx], 1ull);
                }
            }
        }
    }
}

__global__ void
verdict_kernel(const unsigned long long *keys, const uint32_t *counts,
               uint32_t n, struct gpu_ids_verdict *v)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < n) {
        struct gpu_ids_verdict out;

        out.n_matches = counts[i];
        out.sid = out.n_matches ? (uint32_t) (keys[i] >> 32) : 0;
        out.rule = out.n_matches ? (uint32_t) keys[i] : GPU_IDS_NO_RULE;
        out.pad = 0;
        v[i] = out;
    }
}

/* ---- Provider. ---- */

static size_t
align256(size_t n)
{
    return (n + 255) & ~(size_t) 255;
}

static int
cuda_init(struct gpu_ids_matcher *m)
{
    const struct gpu_ids_ruleset *rs = m->rs;
    struct cuda_matcher *c;
    int error;

    c = (struct cuda_matcher *) calloc(1, sizeof *c);
    if (!c) {
        return GPU_ERR_NOMEM;
    }
    c->device = m->cfg.device;
    error = CK(cudaSetDevice(c->device));
    if (error) {
        free(c);
        return error == GPU_ERR_DEVICE ? GPU_ERR_NO_DEVICE : error;
    }

    /* Every table in one allocation, each 256-byte aligned. */
    struct {
        const void *src;
        size_t size;
    } parts[] = {
        { rs->class_map, 256 },
        { rs->trans, (size_t) rs->stats.n_states * rs->stats.n_classes * 4 },
        { rs->out, rs->stats.n_states * sizeof *rs->out },
        { rs->out_ids, rs->n_out_ids * sizeof *rs->out_ids },
        { rs->patterns, rs->stats.n_patterns * sizeof *rs->patterns },
        { rs->pbytes, rs->n_pbytes },
        { rs->anchored, rs->stats.n_loaded * sizeof *rs->anchored },
        { rs->rules, rs->stats.n_loaded * sizeof *rs->rules },
        { rs->contents, rs->n_contents * sizeof *rs->contents },
        { rs->ports, rs->n_ports * sizeof *rs->ports },
    };
    const size_t n_parts = sizeof parts / sizeof parts[0];
    size_t total = 0, ofs[sizeof parts / sizeof parts[0]];

    for (size_t i = 0; i < n_parts; i++) {
        ofs[i] = total;
        total += align256(parts[i].size + 1);
    }
    error = CK(cudaMalloc(&c->dmem, total));
    if (!error) {
        error = CK(cudaMalloc((void **) &c->d_rule_counts,
                              (rs->stats.n_loaded + 1)
                              * sizeof *c->d_rule_counts));
    }
    for (size_t i = 0; !error && i < n_parts; i++) {
        if (parts[i].size) {
            error = CK(cudaMemcpy((char *) c->dmem + ofs[i], parts[i].src,
                                  parts[i].size, cudaMemcpyHostToDevice));
        }
    }
    if (!error) {
        error = CK(cudaMemset(c->d_rule_counts, 0,
                              (rs->stats.n_loaded + 1)
                              * sizeof *c->d_rule_counts));
    }
    if (error) {
        cudaFree(c->dmem);
        cudaFree(c->d_rule_counts);
        free(c);
        return error;
    }

    char *d = (char *) c->dmem;
    c->dview = rs->view;
    c->dview.class_map = (const uint8_t *) (d + ofs[0]);
    c->dview.trans = (const uint32_t *) (d + ofs[1]);
    c->dview.out = (const struct gpu_ids_dout *) (d + ofs[2]);
    c->dview.out_ids = (const uint32_t *) (d + ofs[3]);
    c->dview.patterns = (const struct gpu_ids_dpattern *) (d + ofs[4]);
    c->dview.pbytes = (const uint8_t *) (d + ofs[5]);
    c->dview.anchored = (const uint32_t *) (d + ofs[6]);
    c->dview.rules = (const struct gpu_ids_drule *) (d + ofs[7]);
    c->dview.contents = (const struct gpu_ids_dcontent *) (d + ofs[8]);
    c->dview.ports = (const struct gpu_ids_dport *) (d + ofs[9]);
    m->pdata = c;
    return GPU_OK;
}

static void
cuda_uninit(struct gpu_ids_matcher *m)
{
    struct cuda_matcher *c = cm(m);

    cudaSetDevice(c->device);
    cudaFree(c->dmem);
    cudaFree(c->d_rule_counts);
    free(c);
}

static void
batch_free(struct cuda_batch *c)
{
    cudaFree(c->d_data);
    cudaFree(c->d_offsets);
    cudaFree(c->d_hdrs);
    cudaFree(c->d_keys);
    cudaFree(c->d_counts);
    cudaFree(c->d_verdicts);
    cudaFree(c->d_hits);
    cudaFree(c->d_hit_count);
    cudaFree(c->d_seen);
    if (c->h_hit_count) {
        cudaFreeHost(c->h_hit_count);
    }
    if (c->done) {
        cudaEventDestroy(c->done);
    }
    for (int i = 0; i < 3; i++) {
        if (c->prof[i]) {
            cudaEventDestroy(c->prof[i]);
        }
    }
    free(c);
}

/* Replaces 'c''s hit list and (packet, pattern) set with ones for 'cap'
 * hits.  Only between launches of 'c'; cudaFree() waits for the device,
 * which is rare: a batch grows a few times at most. */
static int
grow_hits(struct cuda_batch *c, size_t cap)
{
    unsigned long long *seen;
    uint32_t log2 = c->seen_log2;
    struct hit *hits;

    while ((1ull << log2) < 2 * cap) {
        log2++;
    }
    if (cudaMalloc((void **) &hits, cap * sizeof *hits) != cudaSuccess) {
        cudaGetLastError();
        return GPU_ERR_NOMEM;
    }
    if (cudaMalloc((void **) &seen, sizeof *seen << log2) != cudaSuccess) {
        cudaGetLastError();
        cudaFree(hits);
        return GPU_ERR_NOMEM;
    }
    cudaFree(c->d_hits);
    cudaFree(c->d_seen);
    c->d_hits = hits;
    c->d_seen = seen;
    c->hit_cap = cap;
    c->seen_log2 = log2;
    return GPU_OK;
}

static int
cuda_batch_init(struct gpu_ids_batch *b)
{
    struct cuda_batch *c;
    size_t np = b->max_packets;
    int error;

    c = (struct cuda_batch *) calloc(1, sizeof *c);
    if (!c) {
        return GPU_ERR_NOMEM;
    }
    cudaSetDevice(cm(b->m)->device);
    c->hit_cap = b->max_bytes / HITS_PER_BYTE_DIV;
    if (c->hit_cap < MIN_HITS) {
        c->hit_cap = MIN_HITS;
    }
    /* Payload rounded up to 8 bytes plus 8: the scan reads whole
     * aligned words. */
    error = CK(cudaMalloc((void **) &c->d_data,
                          ((b->max_bytes + 7) & ~(size_t) 7) + 8));
    if (!error) {
        error = CK(cudaMalloc((void **) &c->d_offsets,
                              (np + 1) * sizeof *c->d_offsets));
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &c->d_hdrs, np * sizeof *c->d_hdrs));
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &c->d_keys, np * sizeof *c->d_keys));
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &c->d_counts,
                              np * sizeof *c->d_counts));
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &c->d_verdicts,
                              np * sizeof *c->d_verdicts));
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &c->d_hits,
                              c->hit_cap * sizeof *c->d_hits));
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &c->d_hit_count,
                              sizeof *c->d_hit_count));
    }
    for (c->seen_log2 = 10; (1ull << c->seen_log2) < 2 * c->hit_cap;) {
        c->seen_log2++;
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &c->d_seen,
                              sizeof *c->d_seen << c->seen_log2));
    }
    if (!error) {
        error = CK(cudaMallocHost((void **) &c->h_hit_count,
                                  sizeof *c->h_hit_count));
    }
    if (!error) {
        error = CK(cudaEventCreateWithFlags(&c->done,
                                            cudaEventDisableTiming));
    }
    for (int i = 0; !error && b->m->cfg.profile && i < 3; i++) {
        error = CK(cudaEventCreate(&c->prof[i]));
    }
    if (error) {
        batch_free(c);
        return error;
    }
    b->pdata = c;
    return GPU_OK;
}

static void
cuda_batch_uninit(struct gpu_ids_batch *b)
{
    cudaSetDevice(cm(b->m)->device);
    batch_free(cb(b));
}

static int
launch(struct gpu_ids_batch *b, cudaStream_t s, bool again)
{
    struct cuda_matcher *m = cm(b->m);
    struct cuda_batch *c = cb(b);
    uint32_t n = b->n_packets;
    int error = GPU_OK;

    if (!again) {
        error = CK(cudaMemcpyAsync(c->d_data, b->data, b->n_bytes,
                                   cudaMemcpyHostToDevice, s));
        if (!error) {
            error = CK(cudaMemcpyAsync(c->d_offsets, b->offsets,
                                       (n + 1) * sizeof *b->offsets,
                                       cudaMemcpyHostToDevice, s));
        }
        if (!error) {
            error = CK(cudaMemcpyAsync(c->d_hdrs, b->hdrs,
                                       n * sizeof *b->hdrs,
                                       cudaMemcpyHostToDevice, s));
        }
    }
    if (!error) {
        error = CK(cudaMemsetAsync(c->d_hit_count, 0,
                                   sizeof *c->d_hit_count, s));
    }
    if (!error) {
        error = CK(cudaMemsetAsync(c->d_keys, 0xff, n * sizeof *c->d_keys,
                                   s));
    }
    size_t cap = b->n_bytes / HITS_PER_BYTE_DIV;
    size_t recent = (uint64_t) b->n_bytes * c->hits_per_kb * 3 / 2048;

    cap = cap < recent ? recent : cap;
    cap = cap < MIN_HITS ? MIN_HITS : cap > MAX_HITS ? MAX_HITS : cap;
    if (cap > c->hit_cap && grow_hits(c, cap)) {
        cap = c->hit_cap;       /* No memory: the CPU redoes overflows. */
    }
    cap = cap > c->hit_cap ? c->hit_cap : cap;
    c->launch_cap = cap;
    for (c->launch_seen_log2 = 10;
         (1ull << c->launch_seen_log2) < 2 * cap
         && c->launch_seen_log2 < c->seen_log2;) {
        c->launch_seen_log2++;
    }
    if (!error) {
        error = CK(cudaMemsetAsync(c->d_seen, 0,
                                   sizeof *c->d_seen << c->launch_seen_log2,
                                   s));
    }
    if (!error) {
        error = CK(cudaMemsetAsync(c->d_counts, 0, n * sizeof *c->d_counts,
                                   s));
    }
    if (error) {
        return error;
    }

    struct scan_args a;
    a.data = c->d_data;
    a.offsets = c->d_offsets;
    a.base = b->offsets[0];
    a.n_packets = n;
    a.n_bytes = b->n_bytes;
    a.chunk = b->m->cfg.chunk_bytes;
    while (a.chunk >= 32 && b->n_bytes / a.chunk < MIN_SCAN_ITEMS) {
        a.chunk /= 2;
    }
    a.warm = m->dview.max_depth ? m->dview.max_depth - 1 : 0;
    a.hits = c->d_hits;
    a.hit_count = c->d_hit_count;
    a.hit_cap = c->launch_cap;
    if (!error && c->prof[0]) {
        error = CK(cudaEventRecord(c->prof[0], s));
    }
    if (!error && b->n_bytes) {
        if (b->m->cfg.remap) {
            uint32_t items = (b->n_bytes + a.chunk - 1) / a.chunk;

            scan_kernel<true><<<(items + THREADS - 1) / THREADS, THREADS, 0,
                                s>>>(m->dview.trans, m->dview.class_map, a);
        } else {
            scan_kernel<false><<<(n + THREADS - 1) / THREADS, THREADS, 0,
                                 s>>>(m->dview.trans, m->dview.class_map,
                                      a);
        }
        error = CK(cudaGetLastError());
        if (!error && c->prof[1]) {
            error = CK(cudaEventRecord(c->prof[1], s));
        }
        if (!error) {
            /* The hit count is only known on the device: a fixed grid
             * strides over it. */
            uint32_t blocks = (c->launch_cap + THREADS - 1) / THREADS;

            check_kernel<<<blocks < 1024 ? blocks : 1024, THREADS, 0, s>>>(
                m->dview, c->d_data, c->d_offsets, a.base, c->d_hdrs,
                c->d_hits, c->d_hit_count, c->launch_cap, c->d_seen,
                c->launch_seen_log2, c->d_keys,
                c->d_counts, m->d_rule_counts);
            error = CK(cudaGetLastError());
        }
    }
    if (!error && c->prof[2]) {
        if (!b->n_bytes) {
            cudaEventRecord(c->prof[1], s);
        }
        error = CK(cudaEventRecord(c->prof[2], s));
    }
    if (!error) {
        verdict_kernel<<<(n + THREADS - 1) / THREADS, THREADS, 0, s>>>(
            c->d_keys, c->d_counts, n, c->d_verdicts);
        error = CK(cudaGetLastError());
    }
    if (!error && !again) {
        error = CK(cudaMemcpyAsync(b->verdicts, c->d_verdicts,
                                   n * sizeof *b->verdicts,
                                   cudaMemcpyDeviceToHost, s));
        if (!error) {
            error = CK(cudaMemcpyAsync(c->h_hit_count, c->d_hit_count,
                                       sizeof *c->h_hit_count,
                                       cudaMemcpyDeviceToHost, s));
        }
    }
    if (!error) {
        error = CK(cudaEventRecord(c->done, s));
    }
    return error;
}

static int
cuda_submit(struct gpu_ids_batch *b, struct gpu_stream *gs, bool again)
{
    struct cuda_batch *c = cb(b);
    struct gpu_stream *own = gs ? gs : gpu_stream_per_thread();
    cudaStream_t s = own ? (cudaStream_t) gpu_stream_native(own) : 0;
    int error;

    cudaSetDevice(cm(b->m)->device);
    c->fallback = false;
    error = launch(b, s, again);
    if (error) {
        if (again) {
            return error;
        }
        /* The CPU answers for this batch when it is waited for; wait for
         * whatever was queued before the failure first. */
        cudaStreamSynchronize(s);
        cudaGetLastError();
        c->fallback = true;
    }
    return GPU_OK;
}

static int
finish(struct gpu_ids_batch *b, int error)
{
    struct cuda_batch *c = cb(b);
    uint64_t n_matched = 0;
    float scan_ms, check_ms;

    if (!error && !c->fallback && c->prof[0]
        && cudaEventElapsedTime(&scan_ms, c->prof[0], c->prof[1])
           == cudaSuccess
        && cudaEventElapsedTime(&check_ms, c->prof[1], c->prof[2])
           == cudaSuccess) {
        __atomic_fetch_add(&b->m->scan_ns, (uint64_t) (scan_ms * 1e6),
                           __ATOMIC_RELAXED);
        __atomic_fetch_add(&b->m->check_ns, (uint64_t) (check_ms * 1e6),
                           __ATOMIC_RELAXED);
    }
    cudaGetLastError();

    if (b->again) {
        if (!error) {
            gpu_ids_count_batch(b, 0, 0);
        }
        return error;
    }
    if (!error && !c->fallback) {
        uint64_t per_kb = ((uint64_t) *c->h_hit_count * 1024
                           + b->n_bytes) / (b->n_bytes + 1);
        uint32_t decayed = c->hits_per_kb - c->hits_per_kb / 8;

        c->hits_per_kb = per_kb > decayed
                         ? (per_kb > UINT32_MAX ? UINT32_MAX : per_kb)
                         : decayed;
        if (*c->h_hit_count > c->launch_cap) {
            c->fallback = true;
        }
    }
    if (error || c->fallback) {
        __atomic_fetch_add(&b->m->n_fallbacks, 1, __ATOMIC_RELAXED);
        return gpu_ids_cpu_match(b);
    }
    for (size_t i = 0; i < b->n_packets; i++) {
        n_matched += b->verdicts[i].n_matches != 0;
    }
    gpu_ids_count_batch(b, n_matched, *c->h_hit_count);
    return GPU_OK;
}

static int
cuda_poll(struct gpu_ids_batch *b)
{
    struct cuda_batch *c = cb(b);
    cudaError_t e;

    if (c->fallback) {
        return finish(b, GPU_OK);
    }
    e = cudaEventQuery(c->done);
    if (e == cudaErrorNotReady) {
        return GPU_ERR_BUSY;
    }
    return finish(b, CK(e));
}

static int
cuda_wait(struct gpu_ids_batch *b)
{
    struct cuda_batch *c = cb(b);

    if (c->fallback) {
        return finish(b, GPU_OK);
    }
    return finish(b, CK(cudaEventSynchronize(c->done)));
}

static int
cuda_rule_counts(struct gpu_ids_matcher *m, uint64_t *counts)
{
    struct cuda_matcher *c = cm(m);
    size_t n = m->rs->stats.n_loaded;
    unsigned long long *h;
    int error;

    if (!n) {
        return GPU_OK;
    }
    h = (unsigned long long *) malloc(n * sizeof *h);
    if (!h) {
        return GPU_ERR_NOMEM;
    }
    cudaSetDevice(c->device);
    error = CK(cudaDeviceSynchronize());
    if (!error) {
        error = CK(cudaMemcpy(h, c->d_rule_counts, n * sizeof *h,
                              cudaMemcpyDeviceToHost));
    }
    for (size_t i = 0; !error && i < n; i++) {
        counts[i] += h[i];
    }
    free(h);
    return error;
}

extern "C" {
const struct gpu_ids_provider gpu_ids_cuda_provider = {
    "cuda",
    GPU_IDS_BACKEND_CUDA,
    cuda_init,
    cuda_uninit,
    cuda_batch_init,
    cuda_batch_uninit,
    cuda_submit,
    cuda_poll,
    cuda_wait,
    cuda_rule_counts,
};
}
