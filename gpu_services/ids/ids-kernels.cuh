/*
 * The IDS kernels (see ids-cuda.cu), apart so that tests/ids-kernel-emu.cc
 * can also run them on the CPU where no GPU is at hand.  Included once, by
 * ids-cuda.cu (or the emulator), after it has defined the two primitives
 * that differ between the device and the emulator:
 *
 *   uint32_t ids_append(uint32_t *count)
 *       A slot of a list: the old value of an atomic increment of
 *       '*count' (on the device, one atomicAdd per group of lanes that
 *       append at once).
 *
 *   int ids_warp_first(pred)
 *       The lowest lane l of the calling warp for which pred(l) holds, or
 *       -1.  Called by all 32 lanes of a warp, converged, with the same
 *       arguments; on the device each lane evaluates pred for itself (one
 *       __ballot_sync), in the emulator one thread evaluates it for every
 *       lane.  'pred' must have no side effects.
 *
 * One batch runs four kernels on one stream:
 *
 *   scan     resets the per-packet verdict atomics of the batch, walks
 *            the DFA over the payload and appends every flagged
 *            position (a state that ends an anchor pattern) to the hit
 *            list;
 *   confirm  one thread per hit: confirms each anchor pattern ending
 *            there, claims (packet, pattern) in a hash set so that a
 *            pattern's rules are looked at once per packet, and appends
 *            (packet, rule) to the work list for each of its rules whose
 *            header matches;
 *   rules    one warp per work item: the rule's contents, the 32 lanes
 *            searching 32 starts at a time; a match goes to per-packet
 *            atomics (lowest verdict key, count) and per-rule counters;
 *   verdict  one thread per packet writes its verdict; the first also
 *            copies the list counters next to the verdicts, so that
 *            one copy brings both back.
 *
 * The host queues no memset for a launch's per-packet atomics (keys,
 * counts): the scan kernel resets them, and only rules_kernel and
 * verdict_kernel, after it in the stream, use them.  The list counters
 * must be zero before the scan (which appends to the hit list at once);
 * the host zeroes them with the copy in or a memset (ids-cuda.cu).
 *
 * The split of the check in two is what makes it cheap (docs/IDS-NOTES.md,
 * "The check step"): done whole by one thread per hit, the contents search
 * ran byte by byte on a few lanes of each warp, each lane in its own
 * packet, while the others waited.  Now the divergent part (confirm) is
 * short, and the long part (the contents) is coalesced and divergence
 * free.
 */
#ifndef GPU_IDS_KERNELS_CUH
#define GPU_IDS_KERNELS_CUH 1

#include "gpu_services/ids/ids-private.h"

#define THREADS 256
#define WARP 32

struct hit {
    uint32_t packet;
    uint32_t pos;               /* Of the hit's last byte, in the packet. */
    uint32_t row;               /* Automaton row offset. */
};

/* A rule whose anchor occurs in a packet and whose header matches it: its
 * contents remain to be checked. */
struct item {
    uint32_t packet;
    uint32_t rule;
};

/* The (packet, pattern) set of a batch: open addressing, linear probing,
 * at least twice as many slots as hits, so it never fills.
 *
 * A slot holds (tag << 48 | packet << 26 | pattern).  Each launch has its
 * own tag, and a slot whose tag is not the launch's counts as empty, so
 * the set need not be cleared between launches (it was 268 MB for the
 * benchmark's batch of 167 MB, ~0.1 ms of memset per launch): only when
 * the tags wrap, and once at first.  Within a launch a slot only ever goes
 * from "empty" (any other tag) to one of the launch's keys, and then stays
 * so, exactly as with a zeroed table; so a key's probe sequence, and which
 * thread claims it, behave as they would there. */
#define SEEN_PATTERN_BITS 26    /* Patterns below 2^26... */
#define SEEN_TAG_SHIFT 48       /* ...and packets below 2^22. */
#define SEEN_TAG_MAX 0xffffu

struct seen_set {
    unsigned long long *slots;
    uint32_t log2;              /* 1 << log2 slots used by this launch. */
    uint32_t tag;               /* 1 .. SEEN_TAG_MAX. */
};

/* The tag of the next launch, from the last one's ('*tag', 0 before the
 * first launch or after a failed clear).  True if the set must be zeroed
 * first: every slot's tag is then 0, and launches use 1, 2, ... up to
 * SEEN_TAG_MAX, so no slot ever holds the tag of the launch that starts. */
static inline bool
seen_next_tag(uint32_t *tag)
{
    if (*tag == 0 || *tag >= SEEN_TAG_MAX) {
        *tag = 1;
        return true;
    }
    ++*tag;
    return false;
}

/* Claims (packet, pattern 'pid') in 's': true for the first claimant
 * only, so each pattern checks its rules once per packet.  O(1) per hit,
 * unlike searching the packet for an earlier occurrence. */
__device__ __forceinline__ bool
claim_first(const struct seen_set &s, uint32_t packet, uint32_t pid)
{
    unsigned long long body = ((unsigned long long) packet
                               << SEEN_PATTERN_BITS) | pid;
    unsigned long long key = ((unsigned long long) s.tag << SEEN_TAG_SHIFT)
                             | body;
    uint32_t mask = (1u << s.log2) - 1;
    uint32_t h = (uint32_t) ((body * 0x9e3779b97f4a7c15ULL)
                             >> (64 - s.log2));
    /* From L2: a stale L1 copy would only cost a failed atomicCAS, but
     * there is no reuse to gain from L1 here. */
    unsigned long long cur = __ldcg(&s.slots[h]);

    for (;;) {
        unsigned long long prev;

        if (cur == key) {
            return false;
        }
        if (cur >> SEEN_TAG_SHIFT == s.tag) {
            /* Another key of this launch: it stays, probe on. */
            h = (h + 1) & mask;
            cur = __ldcg(&s.slots[h]);
            continue;
        }
        /* Empty (another launch's tag): take it, unless someone else
         * did since we looked; then look at what they wrote. */
        prev = atomicCAS(&s.slots[h], cur, key);
        if (prev == cur) {
            return true;
        }
        cur = prev;
    }
}

/* ---- Scan. ---- */

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
    /* Per packet, reset here for rules_kernel: lowest verdict key (all
     * ones: none) and matching rules (0). */
    unsigned long long *keys;
    uint32_t *counts;
};

__device__ __forceinline__ void
emit_hit(struct hit *hits, uint32_t *hit_count, uint32_t cap,
         uint32_t packet, uint32_t pos, uint32_t row)
{
    uint32_t slot = ids_append(hit_count);

    if (slot < cap) {
        hits[slot].packet = packet;
        hits[slot].pos = pos;
        hits[slot].row = row;
    }
}

/* REMAP: thread k scans bytes [k * chunk, (k + 1) * chunk) of the packed
 * batch, whatever packets they belong to: first up to 'warm' bytes before
 * the chunk (inside its packet) to reach the automaton's state, then the
 * chunk, resetting to the root at each packet start.  Else one packet per
 * thread. */
template <bool REMAP>
__device__ __forceinline__ void
scan_body(const uint32_t *__restrict__ trans,
          const uint8_t *__restrict__ class_map, const struct scan_args a)
{
    __shared__ uint8_t cmap[256];
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t cs, ce, start, p, pstart, pend;

    /* Grid-stride: the grid may have fewer threads than packets (many
     * short packets, few chunks).  Before any early return. */
    for (uint32_t i = tid; i < a.n_packets; i += gridDim.x * blockDim.x) {
        a.keys[i] = ~0ull;
        a.counts[i] = 0;
    }
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

/* Each kernel is a body, which a launch with its arguments by value (here)
 * and one that reads them from device memory (ids-cuda.cu's graph) both
 * run. */
template <bool REMAP>
__global__ void __launch_bounds__(THREADS)
scan_kernel(const uint32_t *__restrict__ trans,
            const uint8_t *__restrict__ class_map, struct scan_args a)
{
    scan_body<REMAP>(trans, class_map, a);
}

/* ---- Check, part 1: hits to work items. ---- */

struct check_args {
    const uint8_t *data;
    const uint32_t *offsets;
    uint32_t base;              /* offsets[0]. */
    const struct gpu_ids_pkt_hdr *hdrs;
    const struct hit *hits;
    const uint32_t *hit_count;
    struct item *items;
    uint32_t *item_count;
    uint32_t cap;               /* Of the hit list and of the work list. */
    struct seen_set seen;
    unsigned long long *keys;   /* Per packet: lowest verdict key... */
    uint32_t *counts;           /* ...and matching rules. */
    unsigned long long *rule_counts;
};

/* One thread per hit.  Everything here is short (a pattern compare, one
 * atomicCAS, a few header compares), so the lanes' divergence costs
 * little; the contents, which may take the whole packet, are left to
 * rules_kernel. */
__device__ __forceinline__ void
confirm_body(const struct gpu_ids_tables &t, const struct check_args a)
{
    uint32_t n = *a.hit_count;

    if (n > a.cap) {
        return;                 /* Overflow: the host redoes the batch. */
    }
    for (uint32_t h = blockIdx.x * blockDim.x + threadIdx.x; h < n;
         h += gridDim.x * blockDim.x) {
        struct hit ht = a.hits[h];
        uint32_t ofs = a.offsets[ht.packet] - a.base;
        uint32_t len = a.offsets[ht.packet + 1] - a.base - ofs;
        const uint8_t *pkt = a.data + ofs;
        const struct gpu_ids_dout o = t.out[ht.row / t.n_classes];

        for (uint32_t k = 0; k < o.n_anchor; k++) {
            uint32_t pid = t.out_ids[o.start + k];
            const struct gpu_ids_dpattern *pt = &t.patterns[pid];
            int64_t s = (int64_t) ht.pos + 1 - pt->depth;
            struct gpu_ids_pkt_hdr hd;

            if (!gpu_ids_pattern_at(&t, pt, pkt, len, (uint32_t) s)) {
                continue;
            }
            /* One occurrence per packet checks the pattern's rules (the
             * check looks at the whole packet, so any one will do). */
            if (!claim_first(a.seen, ht.packet, pid)) {
                continue;
            }
            hd = a.hdrs[ht.packet];
            for (uint32_t r = 0; r < pt->n_rules; r++) {
                uint32_t idx = t.anchored[pt->rules + r];

                /* The header half of gpu_ids_rule_check(); the contents
                 * half is rules_kernel's. */
                if (gpu_ids_header_match(&t, &t.rules[idx], hd.proto,
                                         hd.sport, hd.dport)) {
                    uint32_t slot = ids_append(a.item_count);

                    if (slot < a.cap) {
                        a.items[slot].packet = ht.packet;
                        a.items[slot].rule = idx;
                    }
                }
            }
        }
    }
}

/* ---- Check, part 2: the contents, one warp per work item. ---- */

/* gpu_ids_find() on a warp: the same first start, 32 starts per step.
 *
 * Both take the starts [first, last] of gpu_ids_find_range() and test each
 * with gpu_ids_pattern_at().  gpu_ids_find() returns the lowest start that
 * passes.  Here step k tests the starts b_k + l (lane l < 32, b_k = first
 * + 32 k, those above 'last' failing), so the steps cover [first, last]
 * in disjoint, increasing blocks, and the first step in which some start
 * passes returns its lowest one, b_k + (lowest passing lane): no lower
 * start passes, since every lower block had none and lower lanes of this
 * one fail.  If no start passes, both return -1.  Each step's 32 loads are
 * of consecutive packet bytes (one or two L1 lines) and the pattern's
 * bytes are the same for every lane. */
__device__ __forceinline__ int32_t
warp_find(const struct gpu_ids_tables *t, const struct gpu_ids_dpattern *p,
          const uint8_t *pkt, uint32_t len, int64_t lo, int64_t hi_end)
{
    /* In registers: read through 'p', the pattern's fields were loaded
     * again at every step. */
    const struct gpu_ids_dpattern pr = *p;
    int64_t first, last;

    gpu_ids_find_range(&pr, len, lo, hi_end, &first, &last);
    for (int64_t b = first; b <= last; b += WARP) {
        int l = ids_warp_first([&](uint32_t lane) {
            int64_t s = b + lane;

            return s <= last && gpu_ids_pattern_at(t, &pr, pkt, len,
                                                   (uint32_t) s);
        });

        if (l >= 0) {
            return (int32_t) (b + l);
        }
    }
    return -1;
}

/* gpu_ids_contents_match() with warp_find() as its search: the same state
 * machine (ids-inline.h), run redundantly, with the same values, by every
 * lane, so that the warp stays converged for warp_find()'s ballots. */
__device__ __forceinline__ bool
warp_contents_match(const struct gpu_ids_tables *t,
                    const struct gpu_ids_drule *r, const uint8_t *pkt,
                    uint32_t len)
{
    struct gpu_ids_cm st;
    int res;

    if (!r->n_contents) {
        return false;
    }
    gpu_ids_cm_init(&st);
    do {
        const struct gpu_ids_dpattern *p;
        int64_t lo, hi;

        p = gpu_ids_cm_window(t, r, len, &st, &lo, &hi);
        res = gpu_ids_cm_next(t, r, &st, warp_find(t, p, pkt, len, lo, hi));
    } while (res == GPU_IDS_CM_MORE);
    return res == GPU_IDS_CM_MATCH;
}

__global__ void __launch_bounds__(THREADS)
confirm_kernel(struct gpu_ids_tables t, struct check_args a)
{
    confirm_body(t, a);
}

/* One warp per work item, the items strided over the grid's warps (their
 * number is known only on the device).  Every value but the lane's own
 * start in warp_find() is the same on all lanes, so the warp never
 * diverges around the ballots.  blockDim.x must be a multiple of 32. */
__device__ __forceinline__ void
rules_body(const struct gpu_ids_tables &t, const struct check_args a)
{
    uint32_t n = *a.item_count;
    uint32_t lane = threadIdx.x % WARP;
    uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    uint32_t n_warps = gridDim.x * blockDim.x / WARP;

    if (n > a.cap) {
        return;                 /* Overflow: the host redoes the batch. */
    }
    for (uint32_t i = warp; i < n; i += n_warps) {
        struct item it = a.items[i];
        uint32_t ofs = a.offsets[it.packet] - a.base;
        uint32_t len = a.offsets[it.packet + 1] - a.base - ofs;

        if (warp_contents_match(&t, &t.rules[it.rule], a.data + ofs, len)
            && lane == 0) {
            atomicMin(&a.keys[it.packet],
                      (unsigned long long) gpu_ids_verdict_key(
                          t.rules[it.rule].sid, it.rule));
            atomicAdd(&a.counts[it.packet], 1u);
            atomicAdd(&a.rule_counts[it.rule], 1ull);
        }
    }
}

__global__ void __launch_bounds__(THREADS)
rules_kernel(struct gpu_ids_tables t, struct check_args a)
{
    rules_body(t, a);
}

/* ---- Verdicts. ---- */

/* 'ctr_out' gets the 'n_ctr' list counters 'ctr': every kernel that
 * appends to the lists ran before this one. */
__device__ __forceinline__ void
verdict_body(const unsigned long long *keys, const uint32_t *counts,
             const struct gpu_ids_pkt_hdr *hdrs, uint32_t n,
             struct gpu_ids_verdict *v, const uint32_t *ctr,
             uint32_t *ctr_out, uint32_t n_ctr)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < n_ctr) {
        ctr_out[i] = ctr[i];
    }
    if (i < n) {
        struct gpu_ids_verdict out;

        out.n_matches = counts[i];
        out.sid = out.n_matches ? (uint32_t) (keys[i] >> 32) : 0;
        out.rule = out.n_matches ? (uint32_t) keys[i] : GPU_IDS_NO_RULE;
        gpu_ids_verdict_set_frame(&out, &hdrs[i]);
        v[i] = out;
    }
}

__global__ void
verdict_kernel(const unsigned long long *keys, const uint32_t *counts,
               const struct gpu_ids_pkt_hdr *hdrs, uint32_t n,
               struct gpu_ids_verdict *v, const uint32_t *ctr,
               uint32_t *ctr_out, uint32_t n_ctr)
{
    verdict_body(keys, counts, hdrs, n, v, ctr, ctr_out, n_ctr);
}

/* ---- Packets given as frames (GPU_IDS_HDR_FRAME). ----
 *
 * The CUDA graph gathers a submission's packets as they came ('frames',
 * packet i at offsets[i]), then: one thread a packet finds each frame's
 * payload and header (frames_parse_body()); one block lays the payloads
 * out back to back, writing the offsets the scan reads (ids-cuda.cu);
 * warps move them there (gpu_gather_body()).  The scan and the check then
 * run as on payloads given so. */

/* Finds packet i's payload in 'frames' for each of the 'n' packets: its
 * place and length in descs[i] (src, len), and, for a frame, its header
 * in hdrs[i] (gpu_ids_frame_resolve()).  A payload given as one is taken
 * whole. */
__device__ __forceinline__ void
frames_parse_body(const uint8_t *frames, const uint32_t *offsets,
                  struct gpu_ids_pkt_hdr *hdrs, struct gpu_gather_desc *descs,
                  uint32_t n)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += gridDim.x * blockDim.x) {
        uint32_t ofs = offsets[i] - offsets[0];
        uint32_t len = offsets[i + 1] - offsets[i];
        struct gpu_ids_pkt_hdr h = hdrs[i];

        if (h.flags & GPU_IDS_HDR_FRAME) {
            ofs += gpu_ids_frame_resolve(frames + ofs, len, &h);
            len = h.payload_len;
            hdrs[i] = h;
        }
        descs[i].src = (unsigned long long) (uintptr_t) (frames + ofs);
        descs[i].len = len;
    }
}

#endif /* ids-kernels.cuh */
