/*
 * Per-element logic of the IDS matcher, written once for the CPU backend
 * (C) and the CUDA kernels (nvcc): one automaton step, confirming a
 * pattern at a position, searching a content's window, the backtracking
 * content check of a rule, and its header check.  The host compiles the
 * tables that both read, so nothing here may differ between compilers.
 *
 * Tables (the same bytes on the host and on the device):
 *
 *   class_map[256]              byte -> class; the alphabet is lowercased,
 *                               so 'A' and 'a' share a class.
 *   trans[n_states * n_classes] the full DFA.  Entry = the next state's
 *                               row offset (state * n_classes), with
 *                               GPU_IDS_HIT set when that state ends an
 *                               anchor pattern: one load and one add per
 *                               byte, no multiply.
 *   out[n_states]               per state: out_ids[start ..] lists the
 *                               patterns ending there (with those of its
 *                               suffix states), anchors first.
 *   patterns[], pbytes[]        each pattern's bytes (lowercased if
 *                               nocase), its automaton depth, and the
 *                               rules it is the anchor of (anchored[]).
 *   rules[], contents[], ports[]
 */
#ifndef GPU_IDS_INLINE_H
#define GPU_IDS_INLINE_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_runtime/gpu-frame.h"
#include "gpu_services/ids/gpu-ids.h"

#ifdef __CUDACC__
#define GPU_IDS_HD static __host__ __device__ __forceinline__
#else
#define GPU_IDS_HD static inline
#endif

#define GPU_IDS_HIT 0x80000000u
#define GPU_IDS_ROW_MASK 0x7fffffffu

struct gpu_ids_dout {
    uint32_t start;             /* Into out_ids[]. */
    uint32_t n_anchor;          /* Anchors first... */
    uint32_t n_all;             /* ...then the other patterns. */
};

struct gpu_ids_dpattern {
    uint32_t bytes;             /* Offset in pbytes[]. */
    uint32_t len;
    uint32_t depth;             /* min(len, GPU_IDS_AC_MAX_DEPTH). */
    uint32_t nocase;
    uint32_t rules;             /* First index in anchored[]. */
    uint32_t n_rules;           /* Rules this pattern is the anchor of. */
};

enum {
    GPU_IDS_C_RELATIVE = 1 << 0,    /* distance/within, not offset/depth. */
    GPU_IDS_C_BOUNDED = 1 << 1,     /* depth (absolute) or within. */
};

struct gpu_ids_dcontent {
    uint32_t pattern;
    uint32_t flags;             /* GPU_IDS_C_*. */
    int32_t a;                  /* offset or distance. */
    int32_t b;                  /* depth or within (if BOUNDED). */
};

enum {
    GPU_IDS_R_BIDIR = 1 << 0,
};

struct gpu_ids_drule {
    uint32_t sid;
    uint32_t content;           /* First index in contents[]. */
    uint32_t ports;             /* First index in ports[]: src, then dst. */
    uint16_t n_contents;
    uint16_t n_src, n_dst;
    uint8_t proto;              /* enum gpu_ids_proto; 0 = any. */
    uint8_t flags;              /* GPU_IDS_R_*. */
};

/* A port range; 'neg' ranges exclude, the others include (all ports if
 * there are none). */
struct gpu_ids_dport {
    uint16_t lo, hi;
    uint16_t neg;
    uint16_t pad;
};

struct gpu_ids_tables {
    const uint8_t *class_map;
    const uint32_t *trans;
    const struct gpu_ids_dout *out;
    const uint32_t *out_ids;
    const struct gpu_ids_dpattern *patterns;
    const uint8_t *pbytes;
    const uint32_t *anchored;
    const struct gpu_ids_drule *rules;
    const struct gpu_ids_dcontent *contents;
    const struct gpu_ids_dport *ports;
    uint32_t n_states;
    uint32_t n_classes;
    uint32_t n_patterns;
    uint32_t n_rules;
    uint32_t max_depth;
};

GPU_IDS_HD uint8_t
gpu_ids_lower(uint8_t c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* One automaton step from row offset 'row' (without GPU_IDS_HIT). */
GPU_IDS_HD uint32_t
gpu_ids_step(const uint32_t *trans, const uint8_t *class_map, uint32_t row,
             uint8_t c)
{
    return trans[row + class_map[c]];
}

/* True if pattern 'p' occurs in 'pkt' (length 'len') at start 's'. */
GPU_IDS_HD bool
gpu_ids_pattern_at(const struct gpu_ids_tables *t,
                   const struct gpu_ids_dpattern *p, const uint8_t *pkt,
                   uint32_t len, uint32_t s)
{
    const uint8_t *b = t->pbytes + p->bytes;
    uint32_t i;

    if (s > len || len - s < p->len) {
        return false;
    }
    if (p->nocase) {
        for (i = 0; i < p->len; i++) {
            if (gpu_ids_lower(pkt[s + i]) != b[i]) {
                return false;
            }
        }
    } else {
        for (i = 0; i < p->len; i++) {
            if (pkt[s + i] != b[i]) {
                return false;
            }
        }
    }
    return true;
}

/* The starts that a search of pattern 'p' in a window [lo, hi_end) of a
 * packet of 'len' bytes may try: [*first, *last], empty if *first >
 * *last.  Shared by gpu_ids_find() and the CUDA warp search, so that
 * both look at the same positions. */
GPU_IDS_HD void
gpu_ids_find_range(const struct gpu_ids_dpattern *p, uint32_t len,
                   int64_t lo, int64_t hi_end, int64_t *first,
                   int64_t *last)
{
    if (lo < 0) {
        lo = 0;
    }
    if (hi_end > len) {
        hi_end = len;
    }
    *first = lo;
    *last = hi_end - (int64_t) p->len;
}

/* The first start s in [lo, hi_end - len] where pattern 'p' occurs, or
 * -1.  'hi_end' is the end of the window (exclusive).  This is the
 * definition; the CUDA backend searches 32 starts at a time
 * (ids-kernels.cuh, warp_find()) and returns the same start. */
GPU_IDS_HD int32_t
gpu_ids_find(const struct gpu_ids_tables *t, const struct gpu_ids_dpattern *p,
             const uint8_t *pkt, uint32_t len, int64_t lo, int64_t hi_end)
{
    int64_t s, last;

    gpu_ids_find_range(p, len, lo, hi_end, &s, &last);
    for (; s <= last; s++) {
        if (gpu_ids_pattern_at(t, p, pkt, len, (uint32_t) s)) {
            return (int32_t) s;
        }
    }
    return -1;
}

/* The content search of a rule (gpu_ids_contents_match()) as a state
 * machine around its one search primitive, "the first start of this
 * pattern in this window", so that the CPU (one thread, gpu_ids_find())
 * and CUDA (one warp, 32 starts at a time) run the very same backtracking
 * and differ only in how that primitive is computed:
 *
 *     gpu_ids_cm_init(&st);
 *     do {
 *         p = gpu_ids_cm_window(t, r, len, &st, &lo, &hi);
 *         res = gpu_ids_cm_next(t, r, &st, FIND(t, p, pkt, len, lo, hi));
 *     } while (res == GPU_IDS_CM_MORE);
 *
 * Depth-first over the contents in order, each at its earliest position
 * in its window.  When content i finds nothing, a later match of content
 * i - 1 can only help if content i's window moves with it and is bounded
 * (relative with within): otherwise content i's window for any later
 * match is a subset of the one that failed, so the rule fails at once.
 * The same holds going further back, which keeps the search linear for
 * every rule that is not a chain of within-bounded contents. */
struct gpu_ids_cm {
    int32_t pos[GPU_IDS_MAX_CONTENTS];  /* Starts of contents [0, i). */
    uint32_t i;                         /* The content searched next. */
    int64_t from;                       /* Its earliest start, after a
                                         * backtrack; else 0. */
};

enum {
    GPU_IDS_CM_FAIL,            /* The rule's contents do not match. */
    GPU_IDS_CM_MATCH,           /* They do. */
    GPU_IDS_CM_MORE,            /* Search the next window. */
};

GPU_IDS_HD void
gpu_ids_cm_init(struct gpu_ids_cm *st)
{
    st->i = 0;
    st->from = 0;
}

/* The pattern of the content to search next, and its window [*lo, *hi)
 * (gpu_ids_find()'s arguments). */
GPU_IDS_HD const struct gpu_ids_dpattern *
gpu_ids_cm_window(const struct gpu_ids_tables *t,
                  const struct gpu_ids_drule *r, uint32_t len,
                  const struct gpu_ids_cm *st, int64_t *lo, int64_t *hi)
{
    const struct gpu_ids_dcontent *c = &t->contents[r->content + st->i];

    if (c->flags & GPU_IDS_C_RELATIVE) {
        int64_t end = 0;

        if (st->i > 0) {
            const struct gpu_ids_dcontent *pc = c - 1;

            end = st->pos[st->i - 1]
                  + (int64_t) t->patterns[pc->pattern].len;
        }
        *lo = end + c->a;
        *hi = c->flags & GPU_IDS_C_BOUNDED ? *lo + c->b : len;
    } else {
        *lo = c->a;
        *hi = c->flags & GPU_IDS_C_BOUNDED ? *lo + c->b : len;
    }
    /* The window's end does not move with 'from': a backtrack only skips
     * the starts already tried. */
    if (st->from > *lo) {
        *lo = st->from;
    }
    return &t->patterns[c->pattern];
}

/* Takes 's', the first start of the current content in its window (-1 if
 * none), and says what comes next. */
GPU_IDS_HD int
gpu_ids_cm_next(const struct gpu_ids_tables *t,
                const struct gpu_ids_drule *r, struct gpu_ids_cm *st,
                int32_t s)
{
    const struct gpu_ids_dcontent *c = &t->contents[r->content + st->i];

    if (s >= 0) {
        st->pos[st->i] = s;
        if (++st->i == r->n_contents) {
            return GPU_IDS_CM_MATCH;
        }
        st->from = 0;
        return GPU_IDS_CM_MORE;
    }
    /* Back to the previous content only if this one's window follows it
     * and is bounded. */
    if (st->i == 0 || (c->flags & (GPU_IDS_C_RELATIVE | GPU_IDS_C_BOUNDED))
                      != (GPU_IDS_C_RELATIVE | GPU_IDS_C_BOUNDED)) {
        return GPU_IDS_CM_FAIL;
    }
    st->i--;
    st->from = (int64_t) st->pos[st->i] + 1;
    return GPU_IDS_CM_MORE;
}

/* True if rule 'r''s contents match 'pkt': some choice of positions
 * satisfies every content (see struct gpu_ids_cm). */
GPU_IDS_HD bool
gpu_ids_contents_match(const struct gpu_ids_tables *t,
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
        res = gpu_ids_cm_next(t, r, &st,
                              gpu_ids_find(t, p, pkt, len, lo, hi));
    } while (res == GPU_IDS_CM_MORE);
    return res == GPU_IDS_CM_MATCH;
}

GPU_IDS_HD bool
gpu_ids_ports_match(const struct gpu_ids_dport *r, uint32_t n, uint16_t port)
{
    bool pos_seen = false, pos_hit = false;
    uint32_t i;

    for (i = 0; i < n; i++) {
        bool in = port >= r[i].lo && port <= r[i].hi;

        if (r[i].neg) {
            if (in) {
                return false;
            }
        } else {
            pos_seen = true;
            pos_hit = pos_hit || in;
        }
    }
    return !pos_seen || pos_hit;
}

GPU_IDS_HD bool
gpu_ids_header_match(const struct gpu_ids_tables *t,
                     const struct gpu_ids_drule *r, uint8_t proto,
                     uint16_t sport, uint16_t dport)
{
    const struct gpu_ids_dport *src = t->ports + r->ports;
    const struct gpu_ids_dport *dst = src + r->n_src;

    if (r->proto && r->proto != proto) {
        return false;
    }
    if (gpu_ids_ports_match(src, r->n_src, sport)
        && gpu_ids_ports_match(dst, r->n_dst, dport)) {
        return true;
    }
    return ((r->flags & GPU_IDS_R_BIDIR)
            && gpu_ids_ports_match(src, r->n_src, dport)
            && gpu_ids_ports_match(dst, r->n_dst, sport));
}

/* The full check of rule 'idx' on one packet; header first, it is
 * cheap. */
GPU_IDS_HD bool
gpu_ids_rule_check(const struct gpu_ids_tables *t, uint32_t idx,
                   const uint8_t *pkt, uint32_t len, uint8_t proto,
                   uint16_t sport, uint16_t dport)
{
    const struct gpu_ids_drule *r = &t->rules[idx];

    return (gpu_ids_header_match(t, r, proto, sport, dport)
            && gpu_ids_contents_match(t, r, pkt, len));
}

/* Verdict key: the lowest sid wins, then the lowest rule index, so
 * backends that find matches in any order agree. */
GPU_IDS_HD uint64_t
gpu_ids_verdict_key(uint32_t sid, uint32_t rule)
{
    return ((uint64_t) sid << 32) | rule;
}

/* Packet 'hdr' of 'len' bytes at 'data', given as a frame
 * (GPU_IDS_HDR_FRAME): finds its payload and fills in its header (the
 * fields a rule header matches, GPU_IDS_HDR_IP if it is IP, the payload's
 * length, and GPU_IDS_HDR_PARSED in place of GPU_IDS_HDR_FRAME: what
 * follows reads the payload as one given so).  Returns the payload's offset
 * in 'data'.  The CPU backend, the host's resolution and the CUDA graph's
 * parse kernel all call this. */
GPU_IDS_HD uint32_t
gpu_ids_frame_resolve(const uint8_t *data, uint32_t len,
                      struct gpu_ids_pkt_hdr *hdr)
{
    struct gpu_frame_l4 l4;

    gpu_frame_parse(data, len, GPU_FRAME_ETH, &l4);
    hdr->proto = l4.ip_proto;
    hdr->sport = l4.sport;
    hdr->dport = l4.dport;
    hdr->flags = GPU_IDS_HDR_PARSED | (l4.is_ip ? GPU_IDS_HDR_IP : 0);
    hdr->payload_len = (uint16_t) l4.payload_len;
    return l4.is_ip ? l4.payload_ofs : 0;
}

/* The part of packet 'hdr''s verdict that says what was scanned. */
GPU_IDS_HD void
gpu_ids_verdict_set_frame(struct gpu_ids_verdict *v,
                          const struct gpu_ids_pkt_hdr *hdr)
{
    bool parsed = hdr->flags & GPU_IDS_HDR_PARSED;

    v->flags = parsed ? hdr->flags & (GPU_IDS_HDR_PARSED | GPU_IDS_HDR_IP)
               : 0;
    v->pad = 0;
    v->payload_len = parsed ? hdr->payload_len : 0;
}

#endif /* ids-inline.h */
