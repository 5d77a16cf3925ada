/*
 * CPU backend of the IDS matcher: the reference the CUDA backend is
 * tested against, and its fallback.  One packet at a time: walk the DFA,
 * and on a flagged state confirm each anchor pattern ending there and
 * check the rules it anchors.
 */
#include <config.h>

#include "gpu_services/ids/ids-private.h"

#include <stdlib.h>
#include <string.h>

static void
match_packet(struct gpu_ids_batch *b, const struct gpu_ids_tables *t,
             const uint8_t *pkt, uint32_t len,
             const struct gpu_ids_pkt_hdr *h, struct gpu_ids_verdict *v,
             uint64_t *n_hits)
{
    uint64_t best = UINT64_MAX;
    uint32_t n_matches = 0, row = 0, i;
    uint32_t gen;

    /* A new stamp per packet, so a pattern's rules are checked once per
     * packet however often it occurs. */
    if (++b->gen == 0) {
        memset(b->stamps, 0, t->n_patterns * sizeof *b->stamps);
        b->gen = 1;
    }
    gen = b->gen;

    for (i = 0; i < len; i++) {
        uint32_t e = gpu_ids_step(t->trans, t->class_map, row, pkt[i]);

        row = e & GPU_IDS_ROW_MASK;
        if (e & GPU_IDS_HIT) {
            const struct gpu_ids_dout *o = &t->out[row / t->n_classes];
            uint32_t k;

            ++*n_hits;
            for (k = 0; k < o->n_anchor; k++) {
                uint32_t pid = t->out_ids[o->start + k];
                const struct gpu_ids_dpattern *p = &t->patterns[pid];
                uint32_t r;

                if (b->stamps[pid] == gen
                    || !gpu_ids_pattern_at(t, p, pkt, len,
                                           i + 1 - p->depth)) {
                    continue;
                }
                b->stamps[pid] = gen;
                for (r = 0; r < p->n_rules; r++) {
                    uint32_t idx = t->anchored[p->rules + r];

                    if (gpu_ids_rule_check(t, idx, pkt, len, h->proto,
                                           h->sport, h->dport)) {
                        uint64_t key = gpu_ids_verdict_key(
                            t->rules[idx].sid, idx);

                        n_matches++;
                        __atomic_fetch_add(&b->m->rule_counts[idx], 1,
                                           __ATOMIC_RELAXED);
                        if (key < best) {
                            best = key;
                        }
                    }
                }
            }
        }
    }
    v->n_matches = n_matches;
    gpu_ids_verdict_set_frame(v, h);
    if (n_matches) {
        v->sid = best >> 32;
        v->rule = (uint32_t) best;
    } else {
        v->sid = 0;
        v->rule = GPU_IDS_NO_RULE;
    }
}

int
gpu_ids_cpu_match(struct gpu_ids_batch *b)
{
    const struct gpu_ids_tables *t = &b->m->rs->view;
    uint64_t n_hits = 0, n_matched = 0;
    size_t i;

    if (!b->stamps) {
        b->stamps = calloc(t->n_patterns + 1, sizeof *b->stamps);
        if (!b->stamps) {
            return GPU_ERR_NOMEM;
        }
        b->gen = 0;
    }
    for (i = 0; i < b->n_packets; i++) {
        const uint8_t *payload = gpu_ids_payload(b, i);
        uint32_t len = b->offsets[i + 1] - b->offsets[i];
        struct gpu_ids_pkt_hdr hdr = b->hdrs[i];

        if (hdr.flags & GPU_IDS_HDR_FRAME) {
            payload += gpu_ids_frame_resolve(payload, len, &hdr);
            len = hdr.payload_len;
        }
        match_packet(b, t, payload, len, &hdr, &b->verdicts[i], &n_hits);
        n_matched += b->verdicts[i].n_matches != 0;
    }
    gpu_ids_count_batch(b, n_matched, n_hits);
    return GPU_OK;
}

static int
cpu_init(struct gpu_ids_matcher *m)
{
    return GPU_OK;
}

static void
cpu_uninit(struct gpu_ids_matcher *m)
{
}

static int
cpu_batch_init(struct gpu_ids_batch *b)
{
    return GPU_OK;
}

static void
cpu_batch_uninit(struct gpu_ids_batch *b)
{
}

/* The match runs here, so the batch is complete when this returns. */
static int
cpu_submit(struct gpu_ids_batch *b, struct gpu_stream *stream, bool again)
{
    return gpu_ids_cpu_match(b);
}

static int
cpu_poll(struct gpu_ids_batch *b)
{
    return GPU_OK;
}

static int
cpu_wait(struct gpu_ids_batch *b)
{
    return GPU_OK;
}

const struct gpu_ids_provider gpu_ids_cpu_provider = {
    .name = "cpu",
    .type = GPU_IDS_BACKEND_CPU,
    .init = cpu_init,
    .uninit = cpu_uninit,
    .batch_init = cpu_batch_init,
    .batch_uninit = cpu_batch_uninit,
    .submit = cpu_submit,
    .poll = cpu_poll,
    .wait = cpu_wait,
    .rule_counts = NULL,
};
