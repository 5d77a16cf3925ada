/*
 * OVS 3.1's dpcls as a classifier-bench peer: see ovs-dpcls-peer.h.
 *
 * Built against the OVS tree (its config.h and headers) and linked with
 * libopenvswitch.a: the subtables, their lookup functions (generic and its
 * specialized variants, or avx512_gather) and dpcls_lookup_ovs() are OVS's
 * own code.  Only masks and rules are built here, the way
 * netdev_flow_mask_init() and netdev_flow_key_init_masked() build them in
 * dpif-netdev.c (both static there), from dense words instead of a struct
 * match: netdev_flow_mask_init() keeps only the words that make sense for
 * the flow's dl_type, which synthetic rules do not have.
 */
#include <config.h>

#include "bench/ovs-dpcls-peer.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp-packet.h"
#include "dpcls-provider.h"
#include "dpif-netdev-lookup.h"
#include "dpif-netdev-private-dpcls.h"
#include "dpif-netdev-private-flow.h"
#include "flow.h"
#include "hash.h"
#include "openvswitch/vlog.h"
#include "ovs-rcu.h"
#include "util.h"

/* patches/0005-dpif-netdev-standalone-dpcls.patch. */
struct dpcls *dpcls_standalone_create(void);
void dpcls_standalone_destroy(struct dpcls *);
void dpcls_standalone_insert(struct dpcls *, struct dpcls_rule *,
                             const struct netdev_flow_key *mask);
void dpcls_standalone_remove(struct dpcls *, struct dpcls_rule *);

/* A rule as dp_netdev_flow holds it: the dpcls_rule last, sized for its
 * mask (dp_netdev_flow_add()). */
struct peer_rule {
    uint32_t id;
    struct dpcls_rule cr;       /* Must be last. */
};

struct ovs_dpcls_peer {
    unsigned int n_words;
    bool avx512;
    struct dpcls *cls;

    /* Dense word i lives in struct flow u64 word 'flow_idx[i]'; 'order'
     * lists the dense words by increasing flow word, the order of a
     * miniflow's values. */
    size_t flow_idx[FLOW_U64S];
    unsigned int order[FLOW_U64S];
    struct flowmap key_map;

    struct peer_rule **rules;
    size_t n_rules, allocated_rules;

    uint8_t *keys;              /* n_keys netdev_flow_keys, 'key_stride'
                                 * bytes apart, each with only its words. */
    size_t n_keys, key_stride;
};

static const char avx512_name[] = "avx512_gather";

/* The flow words an IPv4 5-tuple megaflow uses, most telling first: the
 * addresses, the ports, then L2 and the rest of L3.  ClassBench's 2-word
 * keys (addresses, ports and protocol) land in the first two. */
static void
peer_map_words(struct ovs_dpcls_peer *p)
{
    static const size_t offsets[] = {
        offsetof(struct flow, nw_src),  /* nw_src, nw_dst. */
        offsetof(struct flow, tp_src),  /* tp_src, tp_dst, ct_tp_*. */
        offsetof(struct flow, dl_dst),
        offsetof(struct flow, dl_type),
        offsetof(struct flow, nw_frag), /* frag, tos, ttl, proto. */
        offsetof(struct flow, vlans),
        offsetof(struct flow, metadata),
    };
    bool used[FLOW_U64S] = { false };
    size_t n = 0;

    for (size_t i = 0; i < ARRAY_SIZE(offsets) && n < p->n_words; i++) {
        size_t idx = offsets[i] / sizeof(uint64_t);

        if (!used[idx]) {
            used[idx] = true;
            p->flow_idx[n++] = idx;
        }
    }
    for (size_t idx = 0; idx < FLOW_U64S && n < p->n_words; idx++) {
        if (!used[idx]) {
            used[idx] = true;
            p->flow_idx[n++] = idx;
        }
    }

    /* Insertion sort of the dense words by flow word. */
    for (unsigned int i = 0; i < p->n_words; i++) {
        unsigned int j = i;

        while (j > 0 && p->flow_idx[p->order[j - 1]] > p->flow_idx[i]) {
            p->order[j] = p->order[j - 1];
            j--;
        }
        p->order[j] = i;
    }

    flowmap_init(&p->key_map);
    for (unsigned int i = 0; i < p->n_words; i++) {
        flowmap_set(&p->key_map, p->flow_idx[i], 1);
    }
}

static struct dpcls_subtable_lookup_info_t *
peer_find_impl(const char *name)
{
    struct dpcls_subtable_lookup_info_t *infos;
    int n = dpcls_subtable_lookup_info_get(&infos);

    for (int i = 0; i < n; i++) {
        if (!strcmp(infos[i].name, name)) {
            return &infos[i];
        }
    }
    return NULL;
}

bool
ovs_dpcls_peer_avx512_available(void)
{
    struct dpcls_subtable_lookup_info_t *info = peer_find_impl(avx512_name);

    /* The probe checks the CPU's ISA; (5,1) is a shape it handles. */
    return info && info->probe(5, 1);
}

struct ovs_dpcls_peer *
ovs_dpcls_peer_create(unsigned int n_words, bool avx512)
{
    struct ovs_dpcls_peer *p;

    if (!n_words || n_words > FLOW_U64S) {
        return NULL;
    }

    /* Quiet: setting a lookup priority logs at INFO level. */
    vlog_set_levels(NULL, VLF_ANY_DESTINATION, VLL_WARN);

    p = xzalloc(sizeof *p);
    p->n_words = n_words;
    p->avx512 = avx512;
    peer_map_words(p);
    p->cls = dpcls_standalone_create();
    if (avx512) {
        /* Subtables pick their function when they are created. */
        dpcls_subtable_set_prio(avx512_name, 5);
    }
    return p;
}

void
ovs_dpcls_peer_finish(struct ovs_dpcls_peer *p)
{
    if (p->avx512) {
        dpcls_subtable_set_prio(avx512_name, 0);
    }
}

void
ovs_dpcls_peer_insert(struct ovs_dpcls_peer *p, const uint64_t *value,
                      const uint64_t *mask, uint32_t id)
{
    struct netdev_flow_key m;
    uint64_t *mv = miniflow_values(&m.mf);
    uint32_t hash = 0;
    size_t n = 0;
    map_t map;

    /* As netdev_flow_mask_init(). */
    flowmap_init(&m.mf.map);
    for (unsigned int k = 0; k < p->n_words; k++) {
        unsigned int i = p->order[k];

        if (mask[i]) {
            flowmap_set(&m.mf.map, p->flow_idx[i], 1);
            mv[n++] = mask[i];
            hash = hash_add64(hash, mask[i]);
        }
    }
    FLOWMAP_FOR_EACH_MAP (map, m.mf.map) {
        hash = hash_add64(hash, map);
    }
    m.hash = hash_finish(hash, n * 8);
    m.len = netdev_flow_key_size(n);

    /* As dp_netdev_flow_add() and netdev_flow_key_init_masked(). */
    struct peer_rule *pr = xmalloc(sizeof *pr - sizeof pr->cr.flow.mf
                                   + m.len);
    struct netdev_flow_key *f = &pr->cr.flow;
    uint64_t *fv = miniflow_values(&f->mf);

    pr->id = id;
    f->len = m.len;
    f->mf = m.mf;
    hash = 0;
    n = 0;
    for (unsigned int k = 0; k < p->n_words; k++) {
        unsigned int i = p->order[k];

        if (mask[i]) {
            fv[n] = value[i] & mask[i];
            hash = hash_add64(hash, fv[n]);
            n++;
        }
    }
    f->hash = hash_finish(hash, n * 8);
    dpcls_standalone_insert(p->cls, &pr->cr, &m);

    if (p->n_rules == p->allocated_rules) {
        p->rules = x2nrealloc(p->rules, &p->allocated_rules,
                              sizeof *p->rules);
    }
    p->rules[p->n_rules++] = pr;
}

static const struct netdev_flow_key *
peer_key(const struct ovs_dpcls_peer *p, size_t i)
{
    return ALIGNED_CAST(const struct netdev_flow_key *,
                        p->keys + i * p->key_stride);
}

void
ovs_dpcls_peer_set_keys(struct ovs_dpcls_peer *p, const uint64_t *keys,
                        size_t n_keys)
{
    size_t len = netdev_flow_key_size(p->n_words);

    free(p->keys);
    p->key_stride = ROUND_UP(offsetof(struct netdev_flow_key, mf) + len, 8);
    /* Padding: vector lookups may load a little past the last word. */
    p->keys = xzalloc(n_keys * p->key_stride + 64);
    p->n_keys = n_keys;
    for (size_t k = 0; k < n_keys; k++) {
        struct netdev_flow_key *key = ALIGNED_CAST(struct netdev_flow_key *,
                                                   p->keys
                                                   + k * p->key_stride);
        uint64_t *v = miniflow_values(&key->mf);

        key->len = len;
        key->mf.map = p->key_map;
        for (unsigned int j = 0; j < p->n_words; j++) {
            v[j] = keys[k * p->n_words + p->order[j]];
        }
    }
}

void
ovs_dpcls_peer_lookup(struct ovs_dpcls_peer *p, size_t first, size_t n,
                      uint32_t *results, uint64_t *probes)
{
    const struct netdev_flow_key *keys[NETDEV_MAX_BURST];
    struct dpcls_rule *rules[NETDEV_MAX_BURST];

    ovs_assert(first + n <= p->n_keys);
    while (n) {
        size_t cnt = MIN(n, NETDEV_MAX_BURST);
        int lookups = 0;

        for (size_t i = 0; i < cnt; i++) {
            keys[i] = peer_key(p, first + i);
        }
        dpcls_lookup_ovs(p->cls, keys, rules, cnt, probes ? &lookups : NULL);
        for (size_t i = 0; i < cnt; i++) {
            results[i] = rules[i]
                         ? CONTAINER_OF(rules[i], struct peer_rule, cr)->id
                         : OVS_DPCLS_PEER_NO_MATCH;
        }
        if (probes) {
            *probes += lookups;
        }
        first += cnt;
        results += cnt;
        n -= cnt;
    }
}

size_t
ovs_dpcls_peer_n_subtables(const struct ovs_dpcls_peer *p)
{
    return dpcls_n_subtables(p->cls);
}

void
ovs_dpcls_peer_describe(const struct ovs_dpcls_peer *p OVS_UNUSED,
                        char *buf, size_t size)
{
    struct dpcls_subtable_lookup_info_t *infos;
    int n = dpcls_subtable_lookup_info_get(&infos);
    size_t len = 0;

    buf[0] = '\0';
    /* Usage counts are global: one peer exists at a time. */
    for (int i = 0; i < n && len < size; i++) {
        unsigned int used = atomic_count_get(&infos[i].usage_cnt);

        if (used) {
            len += snprintf(buf + len, size - len, "%s%s x%u",
                            len ? ", " : "", infos[i].name, used);
        }
    }
}

void
ovs_dpcls_peer_destroy(struct ovs_dpcls_peer *p)
{
    if (!p) {
        return;
    }
    for (size_t i = 0; i < p->n_rules; i++) {
        dpcls_standalone_remove(p->cls, &p->rules[i]->cr);
    }
    dpcls_standalone_destroy(p->cls);
    /* No reader is left (one thread): run what dpcls postponed. */
    ovsrcu_quiesce();
    for (size_t i = 0; i < p->n_rules; i++) {
        free(p->rules[i]);
    }
    free(p->rules);
    free(p->keys);
    free(p);
}
