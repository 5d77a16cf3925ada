/*
 * ids-kernel-emu: runs the CUDA kernels of gpu_services/ids/ids-kernels.cuh
 * on the CPU and checks them against the CPU backend, for machines
 * without a GPU, where the CUDA backend cannot run: it checks the kernels'
 * logic (scan, confirm and dedupe, the warp-parallel contents search,
 * verdicts, the tagged (packet, pattern) set across launches), not the
 * device.
 *
 * CUDA threads run one after the other.  That is exact for these kernels:
 * the scan's only barrier guards a shared table each block fills the same
 * way (blocks of one thread here), confirm_kernel's threads share nothing
 * but atomics, and rules_kernel is warp-uniform except inside
 * ids_warp_first()'s predicate, so one thread per warp (lane 0) runs it
 * and evaluates the predicate for all 32 lanes.
 *
 * Checked:
 *   - warp_find() against gpu_ids_find() on random windows, patterns and
 *     payloads;
 *   - whole batches (verdicts, per-rule counts, hit counts) against the
 *     CPU backend: random rules with relative/within chains over a small
 *     alphabet (as tests/test-ids.c), and the Snort community rules on
 *     the benchmark's traffic, each with and without remapping, run twice
 *     through one (packet, pattern) set whose tags wrap in between;
 *   - the same traffic given as frames (GPU_IDS_HDR_FRAME): the graph's
 *     parse kernel body, the payloads laid out and scanned, against the
 *     CPU backend and the payloads' own verdicts.
 *
 * Build and run (from the top of the tree, no configure needed):
 *
 *   mkdir -p /tmp/ids-emu && : > /tmp/ids-emu/config.h
 *   for f in ids ids-rules ids-cpu; do gcc -O2 -std=gnu11 -I/tmp/ids-emu \
 *       -I. -c gpu_services/ids/$f.c -o /tmp/ids-emu/$f.o; done
 *   gcc -O2 -std=gnu11 -I/tmp/ids-emu -I. -c gpu_runtime/gpu-runtime.c \
 *       -o /tmp/ids-emu/gpu-runtime.o
 *   g++ -O2 -std=c++17 -Wall -I/tmp/ids-emu -I. tests/ids-kernel-emu.cc \
 *       /tmp/ids-emu/ids*.o /tmp/ids-emu/gpu-runtime.o -lpthread \
 *       -o /tmp/ids-emu/ids-kernel-emu
 *   /tmp/ids-emu/ids-kernel-emu [seed] [community.rules]
 *
 * Without the rules file the community case fails, naming it (default:
 * $OVSGPU_DATA/snort-community/community.rules, else
 * data/snort-community/community.rules in the current folder: the build
 * tree's, unpacked by "make" from the repository's).
 */
#include <config.h>

#include "tests/test-common.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <string>
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

struct dim3 {
    uint32_t x;
};

static dim3 threadIdx, blockIdx, blockDim, gridDim;

static inline void
__syncthreads()
{
}

template <typename T>
static inline T
__ldg(const T *p)
{
    return *p;
}

template <typename T>
static inline T
__ldcg(const T *p)
{
    return *p;
}

static inline unsigned long long
atomicCAS(unsigned long long *p, unsigned long long cmp,
          unsigned long long v)
{
    unsigned long long old = *p;

    if (old == cmp) {
        *p = v;
    }
    return old;
}

static inline unsigned long long
atomicMin(unsigned long long *p, unsigned long long v)
{
    unsigned long long old = *p;

    *p = std::min(old, v);
    return old;
}

static inline uint32_t
atomicAdd(uint32_t *p, uint32_t v)
{
    uint32_t old = *p;

    *p += v;
    return old;
}

static inline unsigned long long
atomicAdd(unsigned long long *p, unsigned long long v)
{
    unsigned long long old = *p;

    *p += v;
    return old;
}

using std::min;

/* The primitives ids-kernels.cuh asks of its includer. */
static inline uint32_t
ids_append(uint32_t *count)
{
    return (*count)++;
}

template <typename Pred>
static inline int
ids_warp_first(Pred pred)
{
    for (uint32_t lane = 0; lane < 32; lane++) {
        if (pred(lane)) {
            return lane;
        }
    }
    return -1;
}

#include "gpu_services/ids/ids-kernels.cuh"

/* Runs kernel 'f' on a grid of 'grid' blocks of 'threads' threads,
 * threads 0, step, 2 step, ... of each block. */
template <typename F>
static void
launch(uint32_t grid, uint32_t threads, uint32_t step, F f)
{
    gridDim.x = grid;
    blockDim.x = threads;
    for (uint32_t b = 0; b < grid; b++) {
        for (uint32_t t = 0; t < threads; t += step) {
            blockIdx.x = b;
            threadIdx.x = t;
            f();
        }
    }
}

/* ---- Random numbers. ---- */

/* The tests' splitmix64 (test-common.h), seeded from the command line. */
static struct rng rng;

static uint64_t
rnd()
{
    return rng_next(&rng);
}

static uint32_t
below(uint32_t n)
{
    return rng_below(&rng, n);
}

static int failures;

#define CHECK(COND, ...)                                \
    do {                                                \
        if (!(COND)) {                                  \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
            if (++failures > 20) {                      \
                exit(1);                                \
            }                                           \
        }                                               \
    } while (0)

/* ---- warp_find() against gpu_ids_find(). ---- */

static void
test_find(void)
{
    static const uint8_t alphabet[] = { 'a', 'b', 'A', 'B', 0, 0xff };
    uint8_t pkt[300], pbytes[40];
    struct gpu_ids_tables t;
    struct gpu_ids_dpattern p;
    size_t n_found = 0, n = 20000;

    memset(&t, 0, sizeof t);
    t.pbytes = pbytes;
    for (size_t k = 0; k < n; k++) {
        uint32_t len = below(5) ? below(300) : below(40);

        for (uint32_t i = 0; i < len; i++) {
            pkt[i] = alphabet[below(sizeof alphabet)];
        }
        p.bytes = 0;
        p.len = 1 + below(below(4) ? 3 : 40);
        p.nocase = below(2);
        p.depth = std::min<uint32_t>(p.len, GPU_IDS_AC_MAX_DEPTH);
        for (uint32_t i = 0; i < p.len; i++) {
            uint8_t c = alphabet[below(sizeof alphabet)];

            pbytes[i] = p.nocase ? gpu_ids_lower(c) : c;
        }
        /* Windows past either end, empty, reversed, around the length. */
        int64_t lo = (int64_t) below(len + 40) - 20;
        int64_t hi = below(4) ? lo + below(80) : (int64_t) below(len + 40);

        int32_t want = gpu_ids_find(&t, &p, pkt, len, lo, hi);
        int32_t got = warp_find(&t, &p, pkt, len, lo, hi);
        CHECK(want == got, "find: len %u pattern len %u nocase %u window "
              "[%" PRId64 ", %" PRId64 "): serial %d, warp %d", len, p.len,
              p.nocase, lo, hi, want, got);
        n_found += want >= 0;
    }
    printf("warp_find: %zu windows (%zu with a match), same as "
           "gpu_ids_find\n", n, n_found);
}

/* ---- Batches: the kernels against the CPU backend. ---- */

struct traffic {
    std::vector<uint8_t> data;  /* Packed; see pack(). */
    std::vector<uint32_t> offsets;
    std::vector<struct gpu_ids_pkt_hdr> hdrs;
};

static uint8_t *
add_packet(struct traffic *tr, size_t len, uint8_t proto, uint16_t sport,
           uint16_t dport)
{
    struct gpu_ids_pkt_hdr h;

    if (tr->offsets.empty()) {
        tr->offsets.push_back(0);
    }
    memset(&h, 0, sizeof h);
    h.proto = proto;
    h.sport = sport;
    h.dport = dport;
    tr->hdrs.push_back(h);
    tr->offsets.push_back(tr->offsets.back() + len);
    tr->data.resize(tr->offsets.back());
    return tr->data.data() + tr->offsets[tr->offsets.size() - 2];
}

/* The device's view of a batch that outlives launches: the (packet,
 * pattern) set and its tag, the per-rule counters, and the per-packet
 * atomics, which no host call resets (the scan kernel does). */
struct device {
    std::vector<unsigned long long> seen;
    uint32_t seen_log2;
    uint32_t seen_tag;
    std::vector<unsigned long long> rule_counts;
    std::vector<unsigned long long> keys;
    std::vector<uint32_t> counts;
};

/* One launch, as ids-cuda.cu's launch() queues it.  Returns the hit
 * count. */
static uint32_t
run_batch(const struct gpu_ids_ruleset *rs, const struct traffic *tr,
          bool remap, uint32_t chunk, uint32_t cap, struct device *dev,
          std::vector<struct gpu_ids_verdict> *v)
{
    const struct gpu_ids_tables *t = &rs->view;
    uint32_t n = tr->hdrs.size();
    uint32_t n_bytes = tr->offsets[n];
    /* As on the device: 8-byte aligned, whole words plus one. */
    std::vector<unsigned long long> words((n_bytes + 7) / 8 + 1, 0);
    uint8_t *data = (uint8_t *) words.data();
    std::vector<struct hit> hits(cap);
    std::vector<struct item> items(cap);
    /* What an earlier launch (or cudaMalloc()) left: the scan kernel
     * must reset it. */
    std::vector<unsigned long long> &keys = dev->keys;
    std::vector<uint32_t> &counts = dev->counts;
    uint32_t ctr[2] = { 0, 0 };
    uint32_t ctr_out[2] = { 0xdeadbeef, 0xdeadbeef };

    if (keys.size() < n) {
        keys.resize(n, 0x5a5a5a5a5a5a5a5aull);
        counts.resize(n, 0x5a5a5a5a);
    }

    memcpy(data, tr->data.data(), n_bytes);
    if (seen_next_tag(&dev->seen_tag)) {
        std::fill(dev->seen.begin(), dev->seen.end(), 0);
    }
    CHECK((1ull << dev->seen_log2) <= dev->seen.size(), "seen set size");

    struct scan_args a;
    a.data = data;
    a.offsets = tr->offsets.data();
    a.base = 0;
    a.n_packets = n;
    a.n_bytes = n_bytes;
    a.chunk = chunk;
    a.warm = t->max_depth ? t->max_depth - 1 : 0;
    a.hits = hits.data();
    a.hit_count = &ctr[0];
    a.hit_cap = cap;
    a.keys = keys.data();
    a.counts = counts.data();

    struct check_args ca;
    ca.data = data;
    ca.offsets = tr->offsets.data();
    ca.base = 0;
    ca.hdrs = tr->hdrs.data();
    ca.hits = hits.data();
    ca.hit_count = &ctr[0];
    ca.items = items.data();
    ca.item_count = &ctr[1];
    ca.cap = cap;
    ca.seen.slots = dev->seen.data();
    ca.seen.log2 = dev->seen_log2;
    ca.seen.tag = dev->seen_tag;
    ca.keys = keys.data();
    ca.counts = counts.data();
    ca.rule_counts = dev->rule_counts.data();

    /* As launch() does, also without payload: the scan resets the
     * per-packet atomics, striding over them (with remapping, one thread
     * per chunk may be fewer threads than packets). */
    if (remap) {
        uint32_t items = (n_bytes + chunk - 1) / chunk;

        launch(items ? items : 1, 1, 1, [&] {
            scan_kernel<true>(t->trans, t->class_map, a);
        });
    } else {
        launch(n, 1, 1, [&] {
            scan_kernel<false>(t->trans, t->class_map, a);
        });
    }
    if (n_bytes) {
        /* Odd grids: the kernels stride over the lists. */
        launch(3, 64, 1, [&] { confirm_kernel(*t, ca); });
        launch(5, 64, WARP, [&] { rules_kernel(*t, ca); });
    }
    v->resize(n);
    launch((n + 63) / 64, 64, 1, [&] {
        verdict_kernel(keys.data(), counts.data(), tr->hdrs.data(), n,
                       v->data(), ctr, ctr_out, 2);
    });
    CHECK(ctr_out[0] == ctr[0] && ctr_out[1] == ctr[1], "verdict_kernel "
          "copied counters %u %u, not %u %u", ctr_out[0], ctr_out[1],
          ctr[0], ctr[1]);
    CHECK(ctr[0] <= cap && ctr[1] <= cap, "lists overflowed: %u hits, %u "
          "items, capacity %u", ctr[0], ctr[1], cap);
    return ctr[0];
}

/* Runs 'tr' through the kernels (both mappings, each three times through
 * one (packet, pattern) set whose tags wrap in between) and the CPU
 * backend, and compares.  'cap' is the lists' capacity, larger than
 * the device's (bytes / 16): one-byte anchors hit up to once per byte,
 * and an overflow would only send the batch to the CPU, testing nothing
 * here. */
static void
check_batch(const char *name, const struct gpu_ids_ruleset *rs,
            const struct traffic *tr, uint32_t cap)
{
    uint32_t n = tr->hdrs.size();
    uint32_t nr = gpu_ids_ruleset_n_rules(rs);
    std::vector<struct gpu_ids_verdict> ref(n + 1);
    std::vector<uint64_t> ref_counts(nr + 1);
    struct gpu_ids_matcher_config cfg;
    struct gpu_ids_matcher_stats ms;
    struct gpu_ids_matcher *m;
    size_t n_matched = 0;

    gpu_ids_matcher_config_init(&cfg);
    cfg.backend = GPU_IDS_BACKEND_CPU;
    CHECK(!gpu_ids_matcher_create(rs, &cfg, &m), "CPU matcher");
    CHECK(!gpu_ids_match(m, tr->data.data(), tr->offsets.data(),
                         tr->hdrs.data(), n, ref.data()), "CPU match");
    CHECK(!gpu_ids_matcher_rule_counts(m, ref_counts.data(), nr),
          "CPU counts");
    gpu_ids_matcher_get_stats(m, &ms);
    gpu_ids_matcher_destroy(m);
    for (uint32_t i = 0; i < n; i++) {
        n_matched += ref[i].n_matches != 0;
    }

    uint32_t n_bytes = tr->offsets[n];
    for (int remap = 0; remap < 2; remap++) {
        struct device dev;
        std::vector<struct gpu_ids_verdict> v;
        uint32_t chunk = remap ? (below(2) ? 64 : 256) : 0;
        const int runs = 3;

        /* The smallest set that cannot fill (claims <= hits <= cap), so
         * that probes collide and step over other launches' slots. */
        for (dev.seen_log2 = 1; (1ull << dev.seen_log2) < 2 * cap;) {
            dev.seen_log2++;
        }
        dev.seen.assign(1ull << dev.seen_log2, 0);
        dev.rule_counts.assign(nr + 1, 0);
        /* Tags SEEN_TAG_MAX - 1, SEEN_TAG_MAX, then a clear and 1. */
        dev.seen_tag = SEEN_TAG_MAX - 2;
        for (int run = 0; run < runs; run++) {
            uint32_t n_hits = run_batch(rs, tr, remap, chunk, cap,
                                       &dev, &v);
            size_t bad = 0;

            CHECK(n_hits == ms.n_hits, "%s remap %d: %u hits, the CPU "
                  "backend %" PRIu64, name, remap, n_hits, ms.n_hits);
            for (uint32_t i = 0; i < n; i++) {
                if (v[i].sid != ref[i].sid || v[i].rule != ref[i].rule
                    || v[i].n_matches != ref[i].n_matches) {
                    CHECK(bad++ > 3, "%s remap %d run %d packet %u: "
                          "kernels sid %u rule %u n %u, CPU sid %u rule "
                          "%u n %u", name, remap, run, i, v[i].sid,
                          v[i].rule, v[i].n_matches, ref[i].sid,
                          ref[i].rule, ref[i].n_matches);
                }
            }
            CHECK(!bad, "%s remap %d run %d: %zu of %u verdicts differ",
                  name, remap, run, bad, n);
        }
        CHECK(dev.seen_tag == 1, "tags did not wrap (%u)", dev.seen_tag);
        for (uint32_t r = 0; r < nr; r++) {
            CHECK(dev.rule_counts[r] == runs * ref_counts[r], "%s remap "
                  "%d rule %u: counted %llu, CPU %" PRIu64 " x %d", name,
                  remap, r, dev.rule_counts[r], ref_counts[r], runs);
        }
    }
    printf("%s: %u packets, %u bytes, %" PRIu64 " hits, %zu matched: "
           "kernels equal to the CPU backend\n", name, n, n_bytes,
           ms.n_hits, n_matched);
}

/* Packets given as frames (GPU_IDS_HDR_FRAME), as the CUDA graph takes
 * them: 'tr''s payloads wrapped in Ethernet/IPv4/TCP or UDP frames (IP
 * options, TCP options, padding; one in four left a payload, one in
 * sixteen an ARP frame), parsed by frames_parse_body(), laid out back to
 * back (here serially, as graph_frames_offsets_kernel() does with CUB)
 * and moved (as gpu_gather_body() does, which re-kernel-emu checks),
 * then scanned.  The verdicts, what they say was scanned included, must
 * be the CPU backend's for the same frames, and each IP frame's its
 * payload's. */
static void
check_frames(const char *name, const struct gpu_ids_ruleset *rs,
             const struct traffic *tr, uint32_t cap)
{
    uint32_t n = tr->hdrs.size();
    struct traffic ft;
    std::vector<bool> is_ip(n);

    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *pl = tr->data.data() + tr->offsets[i];
        uint32_t len = tr->offsets[i + 1] - tr->offsets[i];
        const struct gpu_ids_pkt_hdr *h = &tr->hdrs[i];

        if (!below(4)) {
            memcpy(add_packet(&ft, len, h->proto, h->sport, h->dport), pl,
                   len);
            is_ip[i] = true;
            continue;
        }
        bool arp = !below(16);
        uint32_t ihl = 5 + below(3);
        uint32_t l4_len = (h->proto == 17 ? 8 : h->proto == 6
                           ? 20 + 4 * below(4) : 0);
        uint32_t pad = below(4) ? 0 : 1 + below(20);
        uint32_t tot = ihl * 4 + l4_len + len;
        uint8_t *d = add_packet(&ft, 14 + tot + pad, below(256), below(65536),
                                below(65536));
        uint8_t *ip = d + 14, *l4 = ip + ihl * 4;

        for (uint32_t k = 0; k < 14 + tot + pad; k++) {
            d[k] = rnd();
        }
        d[12] = 0x08;
        d[13] = arp ? 0x06 : 0x00;
        ip[0] = 0x40 | ihl;
        ip[2] = tot >> 8;
        ip[3] = tot;
        ip[6] = ip[7] = 0;
        ip[9] = h->proto;
        if (l4_len) {
            l4[0] = h->sport >> 8;
            l4[1] = h->sport;
            l4[2] = h->dport >> 8;
            l4[3] = h->dport;
        }
        if (h->proto == 6) {
            l4[12] = (l4_len / 4) << 4;
        }
        memcpy(l4 + l4_len, pl, len);
        ft.hdrs.back().flags = GPU_IDS_HDR_FRAME;
        is_ip[i] = !arp;
    }

    /* The graph's frames kernels, on what the pull kernel gathered. */
    std::vector<struct gpu_ids_pkt_hdr> hdrs = ft.hdrs;
    std::vector<struct gpu_gather_desc> descs(n);
    launch((n + 63) / 64, 64, 1, [&] {
        frames_parse_body(ft.data.data(), ft.offsets.data(), hdrs.data(),
                          descs.data(), n);
    });
    struct traffic moved;
    moved.offsets.push_back(0);
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *src = (const uint8_t *) (uintptr_t) descs[i].src;

        descs[i].dst = moved.offsets.back();
        moved.data.insert(moved.data.end(), src, src + descs[i].len);
        moved.offsets.push_back(moved.offsets.back() + descs[i].len);
    }
    moved.hdrs = hdrs;

    std::vector<struct gpu_ids_verdict> ref(n + 1), payload_ref(n + 1);
    struct gpu_ids_matcher_config cfg;
    struct gpu_ids_matcher *m;

    gpu_ids_matcher_config_init(&cfg);
    cfg.backend = GPU_IDS_BACKEND_CPU;
    CHECK(!gpu_ids_matcher_create(rs, &cfg, &m), "CPU matcher");
    CHECK(!gpu_ids_match(m, ft.data.data(), ft.offsets.data(),
                         ft.hdrs.data(), n, ref.data()), "CPU match");
    /* A frame of another protocol than TCP or UDP has no ports. */
    std::vector<struct gpu_ids_pkt_hdr> payload_hdrs = tr->hdrs;
    for (auto &h : payload_hdrs) {
        if (h.proto != 6 && h.proto != 17) {
            h.sport = h.dport = 0;
        }
    }
    CHECK(!gpu_ids_match(m, tr->data.data(), tr->offsets.data(),
                         payload_hdrs.data(), n, payload_ref.data()),
          "CPU match of the payloads");
    gpu_ids_matcher_destroy(m);

    struct device dev;
    std::vector<struct gpu_ids_verdict> v;
    size_t bad = 0, n_frames = 0, n_matched = 0;

    for (dev.seen_log2 = 1; (1ull << dev.seen_log2) < 2 * cap;) {
        dev.seen_log2++;
    }
    dev.seen.assign(1ull << dev.seen_log2, 0);
    dev.rule_counts.assign(gpu_ids_ruleset_n_rules(rs) + 1, 0);
    dev.seen_tag = 1;
    run_batch(rs, &moved, true, 64, cap, &dev, &v);
    for (uint32_t i = 0; i < n; i++) {
        bool frame = ft.hdrs[i].flags & GPU_IDS_HDR_FRAME;
        uint32_t len = tr->offsets[i + 1] - tr->offsets[i];
        uint8_t want_flags = (!frame ? 0 : is_ip[i]
                              ? GPU_IDS_HDR_PARSED | GPU_IDS_HDR_IP
                              : GPU_IDS_HDR_PARSED);

        n_frames += frame;
        n_matched += v[i].n_matches != 0;
        if (v[i].sid != ref[i].sid || v[i].rule != ref[i].rule
            || v[i].n_matches != ref[i].n_matches
            || v[i].flags != ref[i].flags
            || v[i].payload_len != ref[i].payload_len
            || v[i].flags != want_flags
            || (frame && v[i].payload_len != (is_ip[i] ? len : 0))
            || (is_ip[i] && (v[i].sid != payload_ref[i].sid
                             || v[i].n_matches
                                != payload_ref[i].n_matches))) {
            CHECK(bad++ > 3, "%s frames, packet %u (%s): kernels sid %u "
                  "n %u flags %#x payload %u, CPU sid %u n %u flags %#x "
                  "payload %u, its payload's sid %u n %u", name, i,
                  frame ? (is_ip[i] ? "IP frame" : "ARP frame")
                  : "payload", v[i].sid, v[i].n_matches, v[i].flags,
                  v[i].payload_len, ref[i].sid, ref[i].n_matches,
                  ref[i].flags, ref[i].payload_len, payload_ref[i].sid,
                  payload_ref[i].n_matches);
        }
    }
    CHECK(!bad, "%s frames: %zu of %u verdicts differ", name, bad, n);
    printf("%s frames: %zu of %u packets as frames, %zu matched: kernels "
           "equal to the CPU backend and to their payloads\n", name,
           n_frames, n, n_matched);
}

/* Random rules over a small alphabet, with relative/within chains that
 * make the contents search backtrack (after tests/test-ids.c). */
static void
test_random(int n_rules, int n_packets)
{
    static const uint8_t alphabet[] = {
        'a', 'b', 'c', 'A', 'B', 'C', 0x00, 0xff, '|', '"', ';', '\\',
    };
    static const uint16_t portset[] = { 80, 443, 1000, 1001, 8080 };
    static const char *protos[] = { "tcp", "udp", "ip" };
    struct pool {
        uint8_t bytes[48];
        uint32_t len;
    } pool[30];
    std::string text;
    char buf[1024];

    for (auto &p : pool) {
        p.len = below(5) ? 1 + below(6) : 20 + below(28);
        for (uint32_t k = 0; k < p.len; k++) {
            p.bytes[k] = alphabet[below(sizeof alphabet)];
        }
    }
    for (int i = 0; i < n_rules; i++) {
        snprintf(buf, sizeof buf, "alert %s any any %s any %s (",
                 protos[below(3)], below(4) ? "->" : "<>",
                 below(2) ? "any" : std::to_string(portset[below(5)])
                                    .c_str());
        text += buf;
        for (uint32_t c = 0, nc = 1 + below(4); c < nc; c++) {
            const struct pool *p = &pool[below(30)];

            text += "content:\"";
            for (uint32_t k = 0; k < p->len; k++) {
                snprintf(buf, sizeof buf, "|%02X|", p->bytes[k]);
                text += buf;
            }
            text += "\";";
            if (below(3) == 0) {
                text += " nocase;";
            }
            switch (below(6)) {
            case 0:
                snprintf(buf, sizeof buf, " offset:%u;", below(20));
                text += buf;
                if (below(2)) {
                    snprintf(buf, sizeof buf, " depth:%u;",
                             p->len + below(40));
                    text += buf;
                }
                break;
            case 1:
                snprintf(buf, sizeof buf, " depth:%u;", p->len + below(60));
                text += buf;
                break;
            case 2:
                snprintf(buf, sizeof buf, " distance:%d;",
                         (int) below(12) - 3);
                text += buf;
                if (below(2)) {
                    snprintf(buf, sizeof buf, " within:%u;",
                             p->len + below(30));
                    text += buf;
                }
                break;
            case 3:
                snprintf(buf, sizeof buf, " within:%u;", p->len + below(30));
                text += buf;
                break;
            default:
                break;
            }
            text += " ";
        }
        snprintf(buf, sizeof buf, "sid:%u;)\n", 3 * n_rules - 2 * i);
        text += buf;
    }

    struct gpu_ids_ruleset *rs;
    char err[512];
    if (gpu_ids_ruleset_load_string(text.c_str(), "random", NULL, &rs, err,
                                    sizeof err)) {
        CHECK(false, "random rules: %s", err);
        return;
    }

    struct traffic tr;
    for (int i = 0; i < n_packets; i++) {
        static const size_t sizes[] = { 0, 5, 60, 300, 1500 };
        size_t len = below(sizes[below(5)] + 1);
        uint8_t *d = add_packet(&tr, len, "\x06\x11\x01"[below(3)],
                                portset[below(5)], portset[below(5)]);

        for (size_t k = 0; k < len; k++) {
            d[k] = alphabet[below(sizeof alphabet)];
        }
        /* Planted patterns, some case-flipped, some one bit off. */
        for (int k = below(5); k > 0; k--) {
            const struct pool *p = &pool[below(30)];

            if (p->len > len) {
                continue;
            }
            size_t at = below(len - p->len + 1);
            for (uint32_t j = 0; j < p->len; j++) {
                uint8_t c = p->bytes[j];

                d[at + j] = (isalpha(c) && below(2)) ? c ^ 0x20 : c;
            }
            if (below(4) == 0) {
                d[at + below(p->len)] ^= 1;
            }
        }
    }
    snprintf(buf, sizeof buf, "random %d rules", n_rules);
    check_batch(buf, rs, &tr, 4 * tr.offsets.back() + 1024);
    gpu_ids_ruleset_destroy(rs);
}

/* The Snort community rules on the benchmark's traffic (bench/ids-bench.c:
 * half random bytes, half text, 1% of packets with a rule planted). */
static void
test_community(const char *path, int n_packets)
{
    static const char *words[] = {
        "the ", "quick ", "brown ", "fox ", "GET ", "HTTP/1.1\r\n",
        "Host: ", "lorem ", "12 ", "\n", ", ", "|", "/",
    };
    struct gpu_ids_load_options o;
    struct gpu_ids_ruleset *rs;
    char err[512];
    FILE *f = fopen(path, "r");

    if (!f) {
        /* The rules are in the repository: missing means broken. */
        CHECK(false, "missing data file %s", path);
        return;
    }
    fclose(f);
    memset(&o, 0, sizeof o);
    o.partial = true;
    o.commented = true;
    if (gpu_ids_ruleset_load_file(path, &o, &rs, err, sizeof err)) {
        CHECK(false, "%s: %s", path, err);
        return;
    }

    uint32_t nr = gpu_ids_ruleset_n_rules(rs);
    struct traffic tr;
    for (int i = 0; i < n_packets; i++) {
        uint32_t r = below(100);
        size_t len = r < 50 ? 64 : r < 67 ? 65 + below(1336)
                                          : 1400 + below(101);
        uint8_t *d = add_packet(&tr, len, below(10) ? 6 : 17,
                                1024 + below(60000),
                                below(2) ? 80 : 1024 + below(60000));
        size_t k = 0;

        if (below(2)) {
            for (; k < len; k++) {
                d[k] = rnd();
            }
        }
        while (k < len) {
            const char *w = words[below(sizeof words / sizeof words[0])];
            size_t wl = std::min(strlen(w), len - k);

            memcpy(d + k, w, wl);
            k += wl;
        }
        if (below(100) < 3) {
            /* A rule's contents one after the other, at their offsets,
             * and ports its header takes. */
            uint32_t idx = below(nr);
            struct gpu_ids_rule_info ri;
            size_t pos = 0;

            gpu_ids_rule_get(rs, idx, &ri);
            for (uint32_t c = 0; c < ri.n_contents; c++) {
                struct gpu_ids_content_info ci;

                gpu_ids_rule_content(rs, idx, c, &ci);
                if (!ci.relative && ci.offset > 0
                    && (size_t) ci.offset > pos) {
                    pos = ci.offset;
                } else if (ci.relative && ci.distance > 0) {
                    pos += ci.distance;
                }
                if (pos + ci.len > len) {
                    break;
                }
                memcpy(d + pos, ci.bytes, ci.len);
                pos += ci.len;
            }
            tr.hdrs.back().proto = ri.proto ? ri.proto : 6;
            for (int tries = 0; tries < 200; tries++) {
                uint16_t sp = below(2) ? 80 : below(65536);
                uint16_t dp = below(2) ? 80 : below(65536);

                if (gpu_ids_rule_header_matches(rs, idx,
                                                tr.hdrs.back().proto, sp,
                                                dp)) {
                    tr.hdrs.back().sport = sp;
                    tr.hdrs.back().dport = dp;
                    break;
                }
            }
        }
    }
    /* All the rules, with the one- to three-byte anchors that the
     * benchmark leaves out (--min-anchor): ~150 hits per packet, over
     * the device's capacity, which would send the batch to the CPU. */
    check_batch("community", rs, &tr, 4 * tr.offsets.back() + 1024);
    check_frames("community", rs, &tr, 4 * tr.offsets.back() + 1024);
    gpu_ids_ruleset_destroy(rs);
}

int
main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
    const char *dir = getenv("OVSGPU_DATA");
    std::string path = argc > 2 ? argv[2]
                       : std::string(dir && *dir ? dir : "data")
                         + "/snort-community/community.rules";

    printf("seed %" PRIu64 "\n", seed);
    rng.s = seed;
    test_find();
    for (int i = 0; i < 6; i++) {
        test_random(1 + 60 * i, 300);
    }
    test_community(path.c_str(), 3000);
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures != 0;
}
