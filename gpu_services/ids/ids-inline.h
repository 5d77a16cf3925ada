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

/* The first start s in [lo, hi_end - len] where pattern 'p' occurs, or
 * -1.  'hi_end' is the end of the window (exclusive). */
GPU_IDS_HD int32_t
gpu_ids_find(const struct gpu_ids_tables *t, const struct gpu_ids_dpattern *p,
             const uint8_t *pkt, uint32_t len, int64_t lo, int64_t hi_end)
{
    int64_t s, last;

    if (lo < 0) {
        lo = 0;
    }
    if (hi_end > len) {
        hi_end = len;
    }
    last = hi_end - (int64_t) p->len;
    for (s = lo; s <= last; s++) {
        if (gpu_ids_pattern_at(t, p, pkt, len, (uint32_t) s)) {
            return (int32_t) s;
        }
    }
    return -1;
}

/* True if rule 'r''s contents match 'pkt'.
 *
 * Depth-first over the contents in order, each at its earliest position
 * in its window.  When content i finds nothing, a later match of content
 * i - 1 can only help if content i's window moves with it and is bounded
 * (relative with within): otherwise content i's window for any later
 * match is a subset of the one that failed, so the rule fails at once.
 * The same holds going further back, which keeps the search linear for
 * every rule that is not a chain of within-bounded contents. */
GPU_IDS_HD bool
gpu_ids_contents_match(const struct gpu_ids_tables *t,
                       const struct gpu_ids_drule *r, const uint8_t *pkt,
                       uint32_t len)
{
    int32_t pos[GPU_IDS_MAX_CONTENTS];
    uint32_t n = r->n_contents;
    uint32_t i = 0;
    int64_t from = 0;

    if (!n) {
        return false;
    }
    for (;;) {
        const struct gpu_ids_dcontent *c = &t->contents[r->content + i];
        const struct gpu_ids_dpattern *p = &t->patterns[c->pattern];
        int64_t lo, hi;
        int32_t s;

        if (c->flags & GPU_IDS_C_RELATIVE) {
            int64_t end = 0;

            if (i > 0) {
                const struct gpu_ids_dcontent *pc = c - 1;

                end = pos[i - 1] + (int64_t) t->patterns[pc->pattern].len;
            }
            lo = end + c->a;
            hi = c->flags & GPU_IDS_C_BOUNDED ? lo + c->b : len;
        } else {
            lo = c->a;
            hi = c->flags & GPU_IDS_C_BOUNDED ? lo + c->b : len;
        }
        if (from > lo) {
            lo = from;
        }
        s = gpu_ids_find(t, p, pkt, len, lo, hi);
        if (s >= 0) {
            pos[i] = s;
            if (++i == n) {
                return true;
            }
            from = 0;
        } else {
            /* Back to the previous content only if this one's window
             * follows it and is bounded. */
            if (i == 0 || (c->flags & (GPU_IDS_C_RELATIVE | GPU_IDS_C_BOUNDED))
                          != (GPU_IDS_C_RELATIVE | GPU_IDS_C_BOUNDED)) {
                return false;
            }
            i--;
            from = (int64_t) pos[i] + 1;
        }
    }
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

#endif /* ids-inline.h */
