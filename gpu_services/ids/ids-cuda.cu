/*
 * CUDA backend of the IDS matcher (sm_90).
 *
 * One submission is these steps on the caller's stream (the kernels are
 * in ids-kernels.cuh, which says what each does):
 *
 *   1. copy the packed payloads, offsets and headers in;
 *   2. scan: reset the per-packet atomics, walk the DFA and append every
 *      flagged position to a hit list;
 *   3. check, in two kernels: confirm (one thread per hit: the anchor
 *      pattern, a (packet, pattern) claim so that a rule is checked once
 *      per packet, the rule headers; out comes a list of (packet, rule)
 *      work items), then rules (one warp per item: the rule's contents,
 *      32 starts at a time); matches go to per-packet atomics (lowest
 *      verdict key, count) and per-rule counters;
 *   4. write the verdicts and copy them out.
 *
 * Each runtime call costs the submitting thread (a PMD thread, in the
 * switch) microseconds, so a submission makes as few as it can: the
 * buffers the host copies to or from are laid out in one device
 * allocation that the batch's own host buffers (gpu_ids_batch_buffers())
 * mirror, so that one copy moves counters, offsets, headers and payloads
 * in and one moves counters and verdicts out; the scan kernel resets the
 * per-packet atomics, and the copy in zeroes the list counters.  Against
 * the caller's buffers it takes three copies in, a memset and two copies
 * out.  From the batch's own buffers the kernels are one CUDA graph
 * (struct graph), built once per batch with the largest grids it needs
 * and its arguments and input pulled by its first kernels from the
 * mapped host block, so such a submission is one graph launch, and its
 * completion a read of host memory.
 * docs/ARCHITECTURE.md, "Runtime calls per submission", counts them.
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
 * Hits and work items are appended with warp-aggregated atomics: the lanes
 * that append at the same time form a coalesced group and take their slots
 * with one atomicAdd.  If either list overflows, the kernels after it do
 * nothing and the batch is matched on the CPU when waited for; so is a
 * batch whose device work failed.
 */
#include <config.h>

#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_runtime/gpu-gather.cuh"
#include "gpu_runtime/gpu-graph.cuh"
#include "gpu_services/ids/ids-private.h"

namespace cg = cooperative_groups;

/* The primitives ids-kernels.cuh asks of its includer. */
__device__ __forceinline__ uint32_t
ids_append(uint32_t *count)
{
    cg::coalesced_group g = cg::coalesced_threads();
    uint32_t base = 0;

    if (g.thread_rank() == 0) {
        base = atomicAdd(count, g.size());
    }
    return g.shfl(base, 0) + g.thread_rank();
}

template <typename Pred>
__device__ __forceinline__ int
ids_warp_first(Pred pred)
{
    uint32_t m = __ballot_sync(0xffffffffu, pred(threadIdx.x % 32));

    return m ? __ffs(m) - 1 : -1;
}

#include "gpu_services/ids/ids-kernels.cuh"

/* Hit list slots per payload byte, at least; a batch's lists grow to
 * what its recent launches found (rule sets with short anchors hit far
 * more often), since an overflow costs a CPU re-match of the batch (not
 * a wrong answer).  The work list has as many slots as the hit list. */
#define HITS_PER_BYTE_DIV 16
#define MIN_HITS 65536
#define MAX_HITS (1u << 24)
/* Below this many scan items a batch leaves most of the GPU idle, and a
 * thread's chain of dependent table loads (its chunk plus the warm-up of
 * up to GPU_IDS_AC_MAX_DEPTH - 1 bytes) is the batch's latency: chunks
 * are halved, down to MIN_SCAN_CHUNK bytes, until there are this many.
 * A switch's gathers of 32 to 1,024 packets are ~20 to 640 kB.  8 rather
 * than 16 took ~3 us off the scan of such a gather on the H200 (19.8 ->
 * 17.0 us at 32 packets; docs/IDS-NOTES.md, "A small scan's round
 * trip"); the warm-up is then most of a thread's chain. */
#define MIN_SCAN_ITEMS 32768
#ifndef MIN_SCAN_CHUNK
#define MIN_SCAN_CHUNK 8
#endif
/* Grid of the check kernels, which stride over lists whose lengths only
 * the device knows: one full wave of 256-thread blocks on an H100 (132
 * SMs x 8), in round figures. */
#define CHECK_BLOCKS 1024

/* The (packet, pattern) key packs both in 48 bits (ids-kernels.cuh). */
#if GPU_IDS_MAX_BATCH_PACKETS > (1u << (SEEN_TAG_SHIFT - SEEN_PATTERN_BITS))
#error "batch packets do not fit the (packet, pattern) key"
#endif

#define CK(CALL) gpu_cuda_status((CALL), #CALL)

/* Profiling events, in stream order. */
enum {
    PROF_SCAN,                  /* Before the scan. */
    PROF_CONFIRM,               /* After it, before confirm_kernel. */
    PROF_RULES,                 /* Before rules_kernel. */
    PROF_END,                   /* After it. */
    N_PROF
};

/* Device counters of a batch, copied back together. */
enum {
    CTR_HITS,
    CTR_ITEMS,
    N_CTR
};

/* Room for the N_CTR counters, which keeps the verdicts after them
 * aligned. */
#define CTR_BYTES 16
static_assert(N_CTR * sizeof(uint32_t) <= CTR_BYTES, "counters fit");
static_assert(CTR_BYTES % alignof(struct gpu_ids_verdict) == 0,
              "verdicts stay aligned after the counters");

/* Byte offsets, in one device allocation and in the host block of
 * gpu_ids_batch_buffers() alike, of what the host copies out (the
 * counters, as verdict_kernel leaves them, then the verdicts) and in (the
 * counters the kernels count in, zero on the host, then the offsets, the
 * headers and the payloads), so that one copy moves each way.  The copy
 * in also moves the unused tails of the offsets and headers (12 bytes a
 * packet below 'max_packets': 48 kB at most for the switch's gathers of
 * 4096) and what aligns the parts (under 256 bytes each). */
struct io_layout {
    size_t ctr_out;             /* 0. */
    size_t verdicts;            /* max_packets. */
    size_t args;                /* struct graph_args, which a graph
                                 * launch's first kernel pulls. */
    size_t ctr;                 /* CTR_BYTES. */
    size_t offsets;             /* max_packets + 1. */
    size_t hdrs;                /* max_packets. */
    size_t data;                /* max_bytes rounded up to 8, plus 8: the
                                 * scan reads whole aligned words; then
                                 * room for max_packets gather_descs,
                                 * which a graph launch puts right after
                                 * its payloads for its pull kernel. */
    size_t size;
};

/* A submission's arguments, in device memory for the graph's kernels:
 * the graph is built once per batch, so what changes from one launch to
 * the next is read from here, copied in with the input. */
struct graph_args {
    struct scan_args scan;
    struct check_args check;
    uint32_t n_packets;
    uint32_t seq;               /* For gpu_graph_done_kernel(). */
    /* Where graph_pull_kernel() takes each payload from: 'n_descs'
     * descriptors at 'descs', in the batch's host block right after the
     * payloads (read in place, gpu_ids_submit_in_place(), or staged in
     * the block). */
    const struct gpu_gather_desc *descs;
    uint32_t n_descs;
    /* Packets given as frames (GPU_IDS_HDR_FRAME): with any, the pull
     * kernel gathers the input into 'frames', and the frames kernels
     * (ids-kernels.cuh, "Packets given as frames") move each payload from
     * there to 'scan.data' by 'fdescs' and set 'scan.n_bytes'. */
    uint32_t n_frames;
    uint32_t pad;
    uint8_t *frames;
    struct gpu_gather_desc *fdescs;
};
static_assert(sizeof(struct graph_args) % 4 == 0,
              "gpu_graph_args_kernel() copies words");

/* A batch's submissions as one CUDA graph: on a host where each runtime
 * call costs the calling thread microseconds (docs/PERFORMANCE.md: ~2.4
 * us a copy, ~3.5 us a launch), the scan's four kernels, its copy out
 * and its event would cost a PMD thread ~20 us a call; as one copy in
 * and one graph launch, ~6.  The graph's verdict kernel writes the
 * verdicts into the batch's pinned (mapped) host block, and its last
 * kernel the launch's sequence number (struct gpu_graph).  Its first
 * kernels pull the arguments and the input from the batch's host block
 * (mapped), so a submission is the launch alone: no copy is queued
 * before it. */
struct graph {
    struct gpu_graph g;         /* Not built: the batch launches kernel by
                                 * kernel (g.broken: it could not be). */
    uint32_t scan_blocks;       /* The scan's grid, the largest any
                                 * submission needs. */
    char *h_io_dev;             /* The batch's host block, as the device
                                 * addresses it. */
};

struct cuda_matcher {
    int device;
    void *dmem;                 /* All tables, one allocation. */
    struct gpu_ids_tables dview;
    unsigned long long *d_rule_counts;
};

struct cuda_batch {
    struct io_layout io;
    char *d_io;                 /* 'io.size' bytes, laid out as 'io'... */
    char *h_io;                 /* ...and, pinned, gpu_ids_batch_buffers(). */
    /* Into 'd_io': */
    uint8_t *d_data;
    uint32_t *d_offsets;
    struct gpu_ids_pkt_hdr *d_hdrs;
    struct gpu_ids_verdict *d_verdicts;
    uint32_t *d_ctr;            /* N_CTR counters the kernels count in... */
    uint32_t *d_ctr_out;        /* ...and verdict_kernel's copy. */

    unsigned long long *d_keys;
    uint32_t *d_counts;
    struct hit *d_hits;
    struct item *d_items;
    unsigned long long *d_seen;     /* (packet, pattern) set. */
    uint32_t seen_log2;
    uint32_t seen_tag;          /* Of the last launch; 0: clear first. */
    uint32_t *h_ctr;            /* Pinned, for 'd_ctr_out'... */
    /* ...where the submission in flight copies it: 'h_ctr' or into
     * 'h_io'. */
    const uint32_t *launch_ctr;
    /* Runtime calls that queued the submission in flight, and event
     * queries and syncs for it, added to the matcher's n_runtime_calls
     * and n_completion_checks when it finishes. */
    uint64_t n_calls;
    uint64_t n_checks;
    size_t hit_cap;             /* Capacity of 'd_hits' and 'd_items'. */
    /* The hit and work lists and (packet, pattern) set used by the batch
     * in flight, sized by its bytes: a small batch in big buffers uses
     * only what it needs. */
    uint32_t launch_cap;
    uint32_t launch_seen_log2;
    /* Hits per KB of payload in recent launches (the densest, decaying),
     * to size the next launch's hit list. */
    uint32_t hits_per_kb;
    cudaEvent_t done;
    cudaEvent_t prof[N_PROF];
    bool fallback;              /* Match on the CPU at wait time. */
    struct graph graph;
    /* Payloads read in place: descriptors, pinned and on the device, for
     * 'max_packets', made at the first such submission. */
    struct gpu_gather_desc *h_descs, *d_descs;
    /* Packets given as frames (graph_args): where the graph gathers them
     * and the descriptors of their payloads there, made at the first
     * such submission. */
    uint8_t *d_frames;
    struct gpu_gather_desc *d_fdescs;
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

    if (rs->stats.n_patterns >= 1u << SEEN_PATTERN_BITS) {
        /* Beyond the (packet, pattern) key of the dedupe set: 15,000
         * times the Snort community rules' 4,553 patterns. */
        return GPU_ERR_INVALID;
    }
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
    gpu_graph_destroy(&c->graph.g);
    cudaFree(c->d_descs);
    cudaFree(c->d_frames);
    cudaFree(c->d_fdescs);
    if (c->h_descs) {
        cudaFreeHost(c->h_descs);
    }
    cudaFree(c->d_io);
    cudaFree(c->d_keys);
    cudaFree(c->d_counts);
    cudaFree(c->d_hits);
    cudaFree(c->d_items);
    cudaFree(c->d_seen);
    if (c->h_ctr) {
        cudaFreeHost(c->h_ctr);
    }
    if (c->done) {
        cudaEventDestroy(c->done);
    }
    for (int i = 0; i < N_PROF; i++) {
        if (c->prof[i]) {
            cudaEventDestroy(c->prof[i]);
        }
    }
    free(c);
}

/* Gives 'c' hit and work lists and a (packet, pattern) set for 'cap' hits,
 * in place of any it had.  Only between launches of 'c'; cudaFree() waits
 * for the device, which is rare: a batch grows a few times at most. */
static int
grow_hits(struct cuda_batch *c, size_t cap)
{
    unsigned long long *seen = NULL;
    struct item *items = NULL;
    struct hit *hits = NULL;
    uint32_t log2 = c->seen_log2;

    while ((1ull << log2) < 2 * cap) {
        log2++;
    }
    if (cudaMalloc((void **) &hits, cap * sizeof *hits) != cudaSuccess
        || cudaMalloc((void **) &items, cap * sizeof *items) != cudaSuccess
        || cudaMalloc((void **) &seen, sizeof *seen << log2)
           != cudaSuccess) {
        cudaGetLastError();
        cudaFree(hits);
        cudaFree(items);
        return GPU_ERR_NOMEM;
    }
    cudaFree(c->d_hits);
    cudaFree(c->d_items);
    cudaFree(c->d_seen);
    c->d_hits = hits;
    c->d_items = items;
    c->d_seen = seen;
    c->hit_cap = cap;
    c->seen_log2 = log2;
    c->seen_tag = 0;            /* The new set is cleared first. */
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

    struct io_layout *L = &c->io;
    L->ctr_out = 0;
    L->verdicts = CTR_BYTES;
    L->args = align256(L->verdicts + np * sizeof *c->d_verdicts);
    L->ctr = align256(L->args + sizeof(struct graph_args));
    L->offsets = L->ctr + CTR_BYTES;
    L->hdrs = align256(L->offsets + (np + 1) * sizeof *c->d_offsets);
    L->data = align256(L->hdrs + np * sizeof *c->d_hdrs);
    L->size = (L->data + ((b->max_bytes + 7) & ~(size_t) 7) + 8 + 16
               + np * sizeof(struct gpu_gather_desc));
    error = CK(cudaMalloc((void **) &c->d_io, L->size));
    if (!error) {
        c->d_ctr_out = (uint32_t *) (c->d_io + L->ctr_out);
        c->d_verdicts = (struct gpu_ids_verdict *) (c->d_io + L->verdicts);
        c->d_ctr = (uint32_t *) (c->d_io + L->ctr);
        c->d_offsets = (uint32_t *) (c->d_io + L->offsets);
        c->d_hdrs = (struct gpu_ids_pkt_hdr *) (c->d_io + L->hdrs);
        c->d_data = (uint8_t *) (c->d_io + L->data);
        error = CK(cudaMalloc((void **) &c->d_keys, np * sizeof *c->d_keys));
    }
    if (!error) {
        error = CK(cudaMalloc((void **) &c->d_counts,
                              np * sizeof *c->d_counts));
    }
    if (!error) {
        size_t hit_cap = b->max_bytes / HITS_PER_BYTE_DIV;

        error = grow_hits(c, hit_cap < MIN_HITS ? MIN_HITS : hit_cap);
    }
    if (!error) {
        error = CK(cudaMallocHost((void **) &c->h_ctr,
                                  N_CTR * sizeof *c->h_ctr));
    }
    if (!error) {
        error = CK(cudaEventCreateWithFlags(&c->done,
                                            cudaEventDisableTiming));
    }
    for (int i = 0; !error && b->m->cfg.profile && i < N_PROF; i++) {
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

/* gpu_ids_batch_buffers(): a pinned block laid out as the device's
 * 'd_io'. */
static int
cuda_buffers_alloc(struct gpu_ids_batch *b)
{
    struct cuda_batch *c = cb(b);
    const struct io_layout *L = &c->io;

    cudaSetDevice(cm(b->m)->device);
    if (cudaMallocHost((void **) &c->h_io, L->size) != cudaSuccess) {
        cudaGetLastError();
        c->h_io = NULL;
        return GPU_ERR_NOMEM;
    }
    /* Once, all but the payloads (which a copy in moves only as far as
     * the caller wrote them): the counters in stay zero (the host never
     * writes them), and the unused tails the copy moves are defined. */
    memset(c->h_io, 0, L->data);
    b->bufs.data = (uint8_t *) (c->h_io + L->data);
    b->bufs.offsets = (uint32_t *) (c->h_io + L->offsets);
    b->bufs.hdrs = (struct gpu_ids_pkt_hdr *) (c->h_io + L->hdrs);
    b->bufs.verdicts = (struct gpu_ids_verdict *) (c->h_io + L->verdicts);
    return GPU_OK;
}

static void
cuda_buffers_free(struct gpu_ids_batch *b)
{
    struct cuda_batch *c = cb(b);

    cudaSetDevice(cm(b->m)->device);
    cudaFreeHost(c->h_io);
    c->h_io = NULL;
}

/* Records profiling event 'i' if profiling. */
static int
prof_mark(struct cuda_batch *c, int i, cudaStream_t s)
{
    if (!c->prof[i]) {
        return GPU_OK;
    }
    c->n_calls++;
    return CK(cudaEventRecord(c->prof[i], s));
}

/* Below this many bytes, or the submission's own, the unused tails of
 * the offsets and headers that one copy in moves cost the device less
 * than the three copies they save cost the thread (~1 us of PCIe against
 * ~7 us). */
#define MAX_COPY_SLACK (64u << 10)

/* True if the submission's input is the batch's own buffers
 * (gpu_ids_batch_buffers()), from their start, and the batch is not so
 * much bigger than the submission that copying the region would move
 * mostly unused bytes: one copy moves it. */
static bool
input_is_own(const struct gpu_ids_batch *b, const struct io_layout *L)
{
    size_t used = ((b->n_packets + 1) * sizeof *b->offsets
                   + b->n_packets * sizeof *b->hdrs + b->n_bytes);
    size_t slack = L->data - L->ctr + b->n_bytes - used;

    return (b->bufs.data && b->data == b->bufs.data
            && b->offsets == b->bufs.offsets && b->offsets[0] == 0
            && b->hdrs == b->bufs.hdrs
            && (slack <= MAX_COPY_SLACK || slack <= used));
}

/* ---- The graph's kernels: the bodies of ids-kernels.cuh with their
 * arguments read from device memory. ---- */

/* The rest of the input, pulled from the batch's host block: every
 * payload by its descriptor (in place, or staged in the block), the
 * offsets and headers of the launch's packets; and the list counters
 * zeroed.  No copy is queued before the launch, so a submission is the
 * graph's launch alone. */
__global__ void __launch_bounds__(THREADS)
graph_pull_kernel(const struct graph_args *__restrict__ g,
                  const uint32_t *__restrict__ h_offsets,
                  uint32_t *__restrict__ d_offsets,
                  const uint2 *__restrict__ h_hdrs, uint2 *__restrict__ d_hdrs,
                  uint32_t *__restrict__ d_ctr)
{
    uint32_t n = g->n_packets;
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t stride = gridDim.x * blockDim.x;

    static_assert(sizeof(struct gpu_ids_pkt_hdr) == sizeof(uint2),
                  "a header is one 8-byte load");
    if (tid < N_CTR) {
        d_ctr[tid] = 0;
    }
    for (uint32_t i = tid; i <= n; i += stride) {
        d_offsets[i] = h_offsets[i];
    }
    for (uint32_t i = tid; i < n; i += stride) {
        d_hdrs[i] = h_hdrs[i];
    }
    gpu_gather_body(g->descs, g->n_descs,
                    g->n_frames ? g->frames : (uint8_t *) g->scan.data);
}

/* With frames: each packet's payload and header, from what the pull
 * kernel gathered. */
__global__ void __launch_bounds__(THREADS)
graph_frames_parse_kernel(const struct graph_args *__restrict__ g,
                          const uint32_t *__restrict__ offsets,
                          struct gpu_ids_pkt_hdr *__restrict__ hdrs)
{
    if (g->n_frames) {
        frames_parse_body(g->frames, offsets, hdrs, g->fdescs,
                          g->n_packets);
    }
}

/* With frames: the payloads' places back to back, as offsets for the scan
 * and destinations for the move, and their total for the scan.  One
 * block: a gather's 4,096 packets are one pass. */
#define FRAMES_SCAN_THREADS 1024
#define FRAMES_SCAN_ITEMS 4

__global__ void __launch_bounds__(FRAMES_SCAN_THREADS)
graph_frames_offsets_kernel(struct graph_args *g, uint32_t *offsets)
{
    typedef cub::BlockScan<uint32_t, FRAMES_SCAN_THREADS> scan;
    __shared__ typename scan::TempStorage tmp;
    const uint32_t step = FRAMES_SCAN_THREADS * FRAMES_SCAN_ITEMS;
    uint32_t n = g->n_packets;
    uint32_t carry = 0;

    if (!g->n_frames) {
        return;
    }
    for (uint32_t base = 0; base < n; base += step) {
        uint32_t first = base + threadIdx.x * FRAMES_SCAN_ITEMS;
        uint32_t lens[FRAMES_SCAN_ITEMS], starts[FRAMES_SCAN_ITEMS];
        uint32_t total;

        for (int k = 0; k < FRAMES_SCAN_ITEMS; k++) {
            lens[k] = first + k < n ? g->fdescs[first + k].len : 0;
        }
        scan(tmp).ExclusiveSum(lens, starts, total);
        for (int k = 0; k < FRAMES_SCAN_ITEMS; k++) {
            if (first + k < n) {
                offsets[first + k] = carry + starts[k];
                g->fdescs[first + k].dst = carry + starts[k];
            }
        }
        carry += total;
        __syncthreads();        /* 'tmp' again. */
    }
    if (threadIdx.x == 0) {
        offsets[n] = carry;
        g->scan.n_bytes = carry;
    }
}

/* With frames: the payloads moved where the scan reads them. */
__global__ void __launch_bounds__(THREADS)
graph_frames_move_kernel(const struct graph_args *__restrict__ g)
{
    if (g->n_frames) {
        gpu_gather_body(g->fdescs, g->n_packets, (uint8_t *) g->scan.data);
    }
}

template <bool REMAP>
__global__ void __launch_bounds__(THREADS)
graph_scan_kernel(const uint32_t *__restrict__ trans,
                  const uint8_t *__restrict__ class_map,
                  const struct graph_args *g)
{
    scan_body<REMAP>(trans, class_map, g->scan);
}

__global__ void __launch_bounds__(THREADS)
graph_confirm_kernel(struct gpu_ids_tables t, const struct graph_args *g)
{
    confirm_body(t, g->check);
}

__global__ void __launch_bounds__(THREADS)
graph_rules_kernel(struct gpu_ids_tables t, const struct graph_args *g)
{
    rules_body(t, g->check);
}

/* Writes the verdicts and counters straight into the host block. */
__global__ void
graph_verdict_kernel(const unsigned long long *keys, const uint32_t *counts,
                     const struct gpu_ids_pkt_hdr *hdrs,
                     const struct graph_args *g, struct gpu_ids_verdict *v,
                     const uint32_t *ctr, uint32_t *ctr_out)
{
    verdict_body(keys, counts, hdrs, g->n_packets, v, ctr, ctr_out, N_CTR);
    __threadfence_system();
}

/* The scan's chunk for a submission of 'n_bytes' (see MIN_SCAN_ITEMS). */
static uint32_t
scan_chunk(const struct gpu_ids_batch *b, size_t n_bytes)
{
    uint32_t chunk = b->m->cfg.chunk_bytes;

    while (chunk >= 2 * MIN_SCAN_CHUNK
           && n_bytes / chunk < MIN_SCAN_ITEMS) {
        chunk /= 2;
    }
    return chunk;
}

/* Blocks of the scan for a submission of 'n_packets' and 'n_bytes'. */
static uint32_t
scan_blocks(const struct gpu_ids_batch *b, size_t n_packets, size_t n_bytes)
{
    if (b->m->cfg.remap) {
        uint32_t chunk = scan_chunk(b, n_bytes);
        size_t items = (n_bytes + chunk - 1) / chunk;
        size_t blocks = (items + THREADS - 1) / THREADS;

        return blocks ? blocks : 1;
    }
    return (n_packets + THREADS - 1) / THREADS;
}

/* Builds 'c''s graph, by capture on a stream of its own, for the device
 * to launch too if 'device_launch' (with a scheduler, if it may have
 * one).  Grids are the largest any submission of the batch needs; the
 * scan's and check's blocks past a submission's work return at once. */
static int
graph_build(struct gpu_ids_batch *b, bool device_launch)
{
    struct cuda_matcher *m = cm(b->m);
    struct cuda_batch *c = cb(b);
    const struct io_layout *L = &c->io;
    const struct graph_args *d_args;
    size_t np = b->max_packets;
    void *capture;
    cudaStream_t cs;
    char *h_io_dev = NULL;
    int error;

    /* A submission of fewer bytes than the batch holds may halve its
     * chunks (scan_chunk()), so it can need more items than a full one:
     * below 2 * MIN_SCAN_ITEMS at most. */
    uint32_t blocks = scan_blocks(b, np, b->max_bytes);
    uint32_t small = (2 * MIN_SCAN_ITEMS + THREADS - 1) / THREADS;

    if (b->m->cfg.remap && blocks < small) {
        blocks = small;
    }
    c->graph.scan_blocks = blocks;

    /* The check kernels stride over lists of any length; as launch()
     * does for its first lists. */
    uint32_t check_blocks = (c->hit_cap + THREADS - 1) / THREADS;
    if (check_blocks > CHECK_BLOCKS) {
        check_blocks = CHECK_BLOCKS;
    }
    d_args = (const struct graph_args *) (c->d_io + L->args);
    if (cudaHostGetDevicePointer((void **) &h_io_dev, c->h_io, 0)
        != cudaSuccess) {
        cudaGetLastError();
        c->graph.g.broken = true;
        return GPU_ERR_DEVICE;
    }
    error = gpu_graph_capture_begin(&c->graph.g, &capture);
    if (error) {
        return error;
    }
    cs = (cudaStream_t) capture;
    c->graph.h_io_dev = h_io_dev;
    gpu_graph_args_kernel<<<1, THREADS, 0, cs>>>(
        (const uint32_t *) (h_io_dev + L->args), (uint32_t *) d_args,
        sizeof *d_args / 4);
    graph_pull_kernel<<<GPU_GATHER_BLOCKS, THREADS, 0, cs>>>(
        d_args, (const uint32_t *) (h_io_dev + L->offsets), c->d_offsets,
        (const uint2 *) (h_io_dev + L->hdrs), (uint2 *) c->d_hdrs,
        c->d_ctr);
    /* Frames: nothing unless a launch has any (its arguments say). */
    graph_frames_parse_kernel<<<(np + THREADS - 1) / THREADS < CHECK_BLOCKS
                                ? (np + THREADS - 1) / THREADS
                                : CHECK_BLOCKS, THREADS, 0, cs>>>(
        d_args, c->d_offsets, c->d_hdrs);
    graph_frames_offsets_kernel<<<1, FRAMES_SCAN_THREADS, 0, cs>>>(
        (struct graph_args *) d_args, c->d_offsets);
    graph_frames_move_kernel<<<GPU_GATHER_BLOCKS, THREADS, 0, cs>>>(d_args);
    if (b->m->cfg.remap) {
        graph_scan_kernel<true><<<blocks, THREADS, 0, cs>>>(
            m->dview.trans, m->dview.class_map, d_args);
    } else {
        graph_scan_kernel<false><<<blocks, THREADS, 0, cs>>>(
            m->dview.trans, m->dview.class_map, d_args);
    }
    graph_confirm_kernel<<<check_blocks, THREADS, 0, cs>>>(m->dview,
                                                           d_args);
    graph_rules_kernel<<<check_blocks, THREADS, 0, cs>>>(m->dview, d_args);
    graph_verdict_kernel<<<(np + THREADS - 1) / THREADS, THREADS, 0, cs>>>(
        c->d_keys, c->d_counts, c->d_hdrs, d_args,
        (struct gpu_ids_verdict *) (h_io_dev + L->verdicts), c->d_ctr,
        (uint32_t *) (h_io_dev + L->ctr_out));
    gpu_graph_done_kernel<<<1, 1, 0, cs>>>(&d_args->seq,
                                           c->graph.g.flag_dev);
    error = CK(cudaGetLastError());
    if (!device_launch) {
        return gpu_graph_capture_end(&c->graph.g, capture, error);
    }
    error = gpu_graph_capture_end_device(&c->graph.g, capture, error);
    if (!error) {
        /* Without one (too many batches have one), launched from the
         * host. */
        gpu_graph_start_scheduler(&c->graph.g);
    }
    return error;
}

/* True if 'b''s submission can be the graph launch: input and verdicts
 * in the batch's own block (input_is_own()), no profiling events, not
 * configured kernel by kernel. */
static bool
graph_usable(struct gpu_ids_batch *b, const struct io_layout *L)
{
    struct cuda_batch *c = cb(b);

    return (!c->graph.g.broken && !b->m->cfg.kernel_by_kernel && !c->prof[0]
            && b->n_packets
            && input_is_own(b, L) && b->verdicts == b->bufs.verdicts
            && (!b->m->cfg.remap
                || scan_blocks(b, b->n_packets, b->n_bytes)
                   <= (c->graph.g.exec ? c->graph.scan_blocks : UINT32_MAX))
            && (c->graph.g.exec
                || (b->m->cfg.device_launch && !graph_build(b, true))
                || !graph_build(b, false)));
}

/* Writes to 'out' (room for 'b''s packets) the descriptors of the
 * payloads of 'b''s submission that the device gathers
 * (gpu_gather_descs()): those read in place and, if 'h_data_dev' (the
 * batch's host payloads as the device addresses them) is not NULL, those
 * staged there too.  GPU_ERR_INVALID, for the CPU to match the batch,
 * if one is not where the device may read it. */
static int
fill_descs(const struct gpu_ids_batch *b, const char *h_data_dev,
           struct gpu_gather_desc *out, uint32_t *n)
{
    return gpu_gather_descs(b->offsets, b->n_packets, b->srcs, h_data_dev,
                            out, n);
}

/* Queues the copy of the payloads that 'b''s submission left in place
 * into the device's payloads, after the input's copy in (which moved
 * 'data' with holes where they go). */
static int
gather_in_place(struct gpu_ids_batch *b, cudaStream_t s)
{
    struct cuda_batch *c = cb(b);
    uint32_t n = 0;
    int error;

    if (!c->h_descs) {
        error = CK(cudaMallocHost((void **) &c->h_descs,
                                  b->max_packets * sizeof *c->h_descs));
        if (!error) {
            error = CK(cudaMalloc((void **) &c->d_descs,
                                  b->max_packets * sizeof *c->d_descs));
        }
        if (error) {
            if (c->h_descs) {
                cudaFreeHost(c->h_descs);
            }
            c->h_descs = NULL;
            c->d_descs = NULL;
            return error;
        }
    }
    error = fill_descs(b, NULL, c->h_descs, &n);
    if (error) {
        return error;
    }
    c->n_calls += 2;
    error = CK(cudaMemcpyAsync(c->d_descs, c->h_descs, n * sizeof *c->h_descs,
                               cudaMemcpyHostToDevice, s));
    if (!error) {
        uint32_t blocks = (n * 32 + THREADS - 1) / THREADS;

        blocks = blocks < GPU_GATHER_BLOCKS ? blocks : GPU_GATHER_BLOCKS;
        gpu_gather_kernel<<<blocks, THREADS, 0, s>>>(c->d_descs, n,
                                                      c->d_data);
        error = CK(cudaGetLastError());
    }
    return error;
}

/* Launches 'b''s graph, which pulls its arguments and input from the
 * batch's host block itself: rung for its scheduler (no runtime call) or,
 * if 'after_stream' (launch() queued work on 's' first) or it has none,
 * one launch on 's'. */
static int
graph_launch(struct gpu_ids_batch *b, cudaStream_t s, bool after_stream,
             const struct scan_args *a, const struct check_args *ca)
{
    struct cuda_batch *c = cb(b);
    const struct io_layout *L = &c->io;
    struct graph_args *ga = (struct graph_args *) (c->h_io + L->args);
    /* The descriptors right after the payloads. */
    size_t in = (b->n_bytes + 15) & ~(size_t) 15;
    uint32_t n_descs = 0;
    int error;

    error = fill_descs(b, c->graph.h_io_dev + L->data,
                       (struct gpu_gather_desc *) (c->h_io + L->data + in),
                       &n_descs);
    if (!error && b->n_frames && !c->d_frames) {
        /* Read 16 bytes at a time, aligned, up to the last one's
         * 16 (gpu_gather_body()). */
        error = CK(cudaMalloc((void **) &c->d_frames,
                              ((b->max_bytes + 15) & ~(size_t) 15) + 16));
        if (!error) {
            error = CK(cudaMalloc((void **) &c->d_fdescs,
                                  b->max_packets * sizeof *c->d_fdescs));
        }
        if (error) {
            cudaFree(c->d_frames);
            c->d_frames = NULL;
        }
    }
    if (error) {
        return error;
    }
    ga->scan = *a;
    ga->check = *ca;
    ga->n_packets = b->n_packets;
    ga->seq = gpu_graph_next_seq(&c->graph.g);
    ga->descs = (const struct gpu_gather_desc *) (c->graph.h_io_dev + L->data
                                              + in);
    ga->n_descs = n_descs;
    ga->n_frames = b->n_frames;
    ga->frames = c->d_frames;
    ga->fdescs = c->d_fdescs;
    struct gpu_graph *g = &c->graph.g;
    uint64_t n_host_launches = g->n_host_launches;
    uint64_t n_rings = g->n_rings;

    /* After what launch() queued on 's', if anything, on 's'. */
    error = (after_stream ? gpu_graph_launch_on_stream(g, s)
             : gpu_graph_launch(g, s));
    /* The graph's launch, or a parked scheduler's when it was rung. */
    c->n_calls += g->n_host_launches - n_host_launches;
    if (g->n_rings != n_rings) {
        __atomic_fetch_add(&b->m->n_device_launches, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&b->m->n_scheduler_launches,
                           g->n_host_launches - n_host_launches,
                           __ATOMIC_RELAXED);
    }
    if (!error) {
        c->launch_ctr = (const uint32_t *) (c->h_io + L->ctr_out);
    }
    return error;
}

static int
launch(struct gpu_ids_batch *b, cudaStream_t s, bool again)
{
    struct cuda_matcher *m = cm(b->m);
    struct cuda_batch *c = cb(b);
    const struct io_layout *L = &c->io;
    uint32_t n = b->n_packets;
    int error = GPU_OK;
    bool graph = !again && graph_usable(b, L);

    if (!graph && !again && b->n_frames) {
        /* Only the graph parses frames on the device. */
        error = gpu_ids_resolve_frames(b);
        if (error) {
            return error;
        }
    }
    if (graph) {
        /* The input goes in with the arguments, below. */
    } else if (!again && input_is_own(b, L)) {
        /* Zero counters, offsets, headers and payloads, in one copy. */
        c->n_calls++;
        error = CK(cudaMemcpyAsync(c->d_io + L->ctr, c->h_io + L->ctr,
                                   L->data - L->ctr + b->n_bytes,
                                   cudaMemcpyHostToDevice, s));
    } else {
        if (!again) {
            c->n_calls += 3;
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
            c->n_calls++;
            error = CK(cudaMemsetAsync(c->d_ctr, 0, N_CTR * sizeof *c->d_ctr,
                                       s));
        }
    }
    if (!error && !graph && !again && b->n_in_place) {
        error = gather_in_place(b, s);
    }
    size_t cap = b->n_bytes / HITS_PER_BYTE_DIV;
    size_t recent = (uint64_t) b->n_bytes * c->hits_per_kb * 3 / 2048;

    cap = cap < recent ? recent : cap;
    cap = cap < MIN_HITS ? MIN_HITS : cap > MAX_HITS ? MAX_HITS : cap;
    if (cap > c->hit_cap) {
        grow_hits(c, cap);      /* Without memory the CPU redoes overflows. */
    }
    cap = cap > c->hit_cap ? c->hit_cap : cap;
    c->launch_cap = cap;
    for (c->launch_seen_log2 = 10;
         (1ull << c->launch_seen_log2) < 2 * cap
         && c->launch_seen_log2 < c->seen_log2;) {
        c->launch_seen_log2++;
    }
    bool set_cleared = false;   /* On 's', before the launch. */
    if (!error && seen_next_tag(&c->seen_tag)) {
        /* The whole set, whatever part of it this launch uses: later
         * launches may use more.  Once in SEEN_TAG_MAX launches. */
        set_cleared = true;
        c->n_calls++;
        __atomic_fetch_add(&b->m->n_set_clears, 1, __ATOMIC_RELAXED);
        error = CK(cudaMemsetAsync(c->d_seen, 0,
                                   sizeof *c->d_seen << c->seen_log2, s));
        if (error) {
            c->seen_tag = 0;    /* Clear at the next launch. */
        }
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
    a.chunk = scan_chunk(b, b->n_bytes);
    a.warm = m->dview.max_depth ? m->dview.max_depth - 1 : 0;
    a.hits = c->d_hits;
    a.hit_count = &c->d_ctr[CTR_HITS];
    a.hit_cap = c->launch_cap;
    a.keys = c->d_keys;
    a.counts = c->d_counts;

    struct check_args ca;
    ca.data = c->d_data;
    ca.offsets = c->d_offsets;
    ca.base = a.base;
    ca.hdrs = c->d_hdrs;
    ca.hits = c->d_hits;
    ca.hit_count = &c->d_ctr[CTR_HITS];
    ca.items = c->d_items;
    ca.item_count = &c->d_ctr[CTR_ITEMS];
    ca.cap = c->launch_cap;
    ca.seen.slots = c->d_seen;
    ca.seen.log2 = c->launch_seen_log2;
    ca.seen.tag = c->seen_tag;
    ca.keys = c->d_keys;
    ca.counts = c->d_counts;
    ca.rule_counts = m->d_rule_counts;

    if (graph) {
        return graph_launch(b, s, set_cleared, &a, &ca);
    }

    /* The check kernels stride over the lists, whose lengths only the
     * device knows; a batch too small to fill the lists' capacity gets a
     * smaller grid. */
    uint32_t check_blocks = (c->launch_cap + THREADS - 1) / THREADS;
    if (check_blocks > CHECK_BLOCKS) {
        check_blocks = CHECK_BLOCKS;
    }

    error = prof_mark(c, PROF_SCAN, s);
    if (!error) {
        /* Also without payload (n > 0 here): it resets the per-packet
         * atomics that verdict_kernel reads. */
        c->n_calls++;
        if (b->m->cfg.remap) {
            uint32_t items = (b->n_bytes + a.chunk - 1) / a.chunk;
            uint32_t blocks = (items + THREADS - 1) / THREADS;

            scan_kernel<true><<<blocks ? blocks : 1, THREADS, 0,
                                s>>>(m->dview.trans, m->dview.class_map, a);
        } else {
            scan_kernel<false><<<(n + THREADS - 1) / THREADS, THREADS, 0,
                                 s>>>(m->dview.trans, m->dview.class_map,
                                      a);
        }
        error = CK(cudaGetLastError());
    }
    if (!error) {
        error = prof_mark(c, PROF_CONFIRM, s);
    }
    if (!error && b->n_bytes) {
        c->n_calls++;
        confirm_kernel<<<check_blocks, THREADS, 0, s>>>(m->dview, ca);
        error = CK(cudaGetLastError());
    }
    if (!error) {
        error = prof_mark(c, PROF_RULES, s);
    }
    if (!error && b->n_bytes) {
        c->n_calls++;
        rules_kernel<<<check_blocks, THREADS, 0, s>>>(m->dview, ca);
        error = CK(cudaGetLastError());
    }
    if (!error) {
        error = prof_mark(c, PROF_END, s);
    }
    if (!error) {
        c->n_calls++;
        verdict_kernel<<<(n + THREADS - 1) / THREADS, THREADS, 0, s>>>(
            c->d_keys, c->d_counts, c->d_hdrs, n, c->d_verdicts, c->d_ctr,
            c->d_ctr_out, N_CTR);
        error = CK(cudaGetLastError());
    }
    if (!error && !again && b->bufs.data
        && b->verdicts == b->bufs.verdicts) {
        /* Counters and verdicts, adjacent on both sides: one copy. */
        c->n_calls++;
        c->launch_ctr = (const uint32_t *) (c->h_io + L->ctr_out);
        error = CK(cudaMemcpyAsync(c->h_io + L->ctr_out,
                                   c->d_io + L->ctr_out,
                                   L->verdicts + n * sizeof *b->verdicts
                                   - L->ctr_out,
                                   cudaMemcpyDeviceToHost, s));
    } else if (!error && !again) {
        c->n_calls += 2;
        c->launch_ctr = c->h_ctr;
        error = CK(cudaMemcpyAsync(b->verdicts, c->d_verdicts,
                                   n * sizeof *b->verdicts,
                                   cudaMemcpyDeviceToHost, s));
        if (!error) {
            error = CK(cudaMemcpyAsync(c->h_ctr, c->d_ctr_out,
                                       N_CTR * sizeof *c->h_ctr,
                                       cudaMemcpyDeviceToHost, s));
        }
    }
    if (!error) {
        c->n_calls++;
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
        c->n_calls++;
        cudaStreamSynchronize(s);
        cudaGetLastError();
        c->fallback = true;
    }
    return GPU_OK;
}

/* Elapsed milliseconds between profiling events 'from' and 'to', or -1
 * if they cannot be read. */
static float
prof_ms(struct cuda_batch *c, int from, int to)
{
    float ms;

    return (cudaEventElapsedTime(&ms, c->prof[from], c->prof[to])
            == cudaSuccess ? ms : -1);
}

static int
finish(struct gpu_ids_batch *b, int error)
{
    struct cuda_batch *c = cb(b);
    const uint32_t *ctr = c->launch_ctr;
    uint64_t n_matched = 0;

    __atomic_fetch_add(&b->m->n_runtime_calls, c->n_calls, __ATOMIC_RELAXED);
    __atomic_fetch_add(&b->m->n_completion_checks, c->n_checks,
                       __ATOMIC_RELAXED);
    c->n_calls = 0;
    c->n_checks = 0;
    if (!error && !c->fallback && c->prof[0]) {
        float scan_ms = prof_ms(c, PROF_SCAN, PROF_CONFIRM);
        float confirm_ms = prof_ms(c, PROF_CONFIRM, PROF_RULES);
        float check_ms = prof_ms(c, PROF_CONFIRM, PROF_END);

        if (scan_ms >= 0 && confirm_ms >= 0 && check_ms >= 0) {
            __atomic_fetch_add(&b->m->scan_ns, (uint64_t) (scan_ms * 1e6),
                               __ATOMIC_RELAXED);
            __atomic_fetch_add(&b->m->confirm_ns,
                               (uint64_t) (confirm_ms * 1e6),
                               __ATOMIC_RELAXED);
            __atomic_fetch_add(&b->m->check_ns, (uint64_t) (check_ms * 1e6),
                               __ATOMIC_RELAXED);
        }
    }
    cudaGetLastError();

    if (b->again) {
        if (!error) {
            gpu_ids_count_batch(b, 0, 0);
        }
        return error;
    }
    if (!error && !c->fallback) {
        uint32_t found = ctr[CTR_HITS] > ctr[CTR_ITEMS]
                         ? ctr[CTR_HITS] : ctr[CTR_ITEMS];
        uint64_t per_kb = ((uint64_t) found * 1024 + b->n_bytes)
                          / (b->n_bytes + 1);
        uint32_t decayed = c->hits_per_kb - c->hits_per_kb / 8;

        c->hits_per_kb = per_kb > decayed
                         ? (per_kb > UINT32_MAX ? UINT32_MAX : per_kb)
                         : decayed;
        if (ctr[CTR_HITS] > c->launch_cap
            || ctr[CTR_ITEMS] > c->launch_cap) {
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
    gpu_ids_count_batch(b, n_matched, ctr[CTR_HITS]);
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
    c->n_checks++;
    if (c->graph.g.in_flight) {
        int status = gpu_graph_poll(&c->graph.g);

        return status == GPU_ERR_BUSY ? status : finish(b, status);
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
    c->n_checks++;
    if (c->graph.g.in_flight) {
        return finish(b, gpu_graph_wait(&c->graph.g));
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
    cuda_buffers_alloc,
    cuda_buffers_free,
};
}
