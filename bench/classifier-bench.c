/*
 * classifier-bench: lookups per second of gpu_classifier/ on synthetic
 * GSwitch-style rule sets and ClassBench sets, GPU against one CPU core,
 * in the same run on the same machine.
 *
 *   bench/classifier-bench [--quick] [--csv FILE] [--dump DIR]
 *                          [--only synth|classbench|burst]
 *                          [--synth RULES:CLASSES]
 *                          [--priority] [--max-seconds S]
 *
 * For each set and algorithm it prints:
 *   kernel   CUDA, keys and results already in device memory, 4 batches
 *            in flight on 4 streams (M lookups/s);
 *   e2e      CUDA, from pinned host keys to host results, H2D and D2H
 *            copies included, 4 batches in flight on 4 streams;
 *   e2e-sync CUDA, one batch at a time, waiting for each (latency-bound);
 *   cpu      the CPU backend on one core, same table, same keys.
 *
 * --only burst looks up datapath bursts (32 keys) in sets of 1 to 512
 * classes, as ovs-vswitchd's offload does: its e2e-sync column is the
 * synchronous round trip a PMD thread waits for (us per burst = 32 / it).
 *
 * --csv writes one line per measurement, keyed by set name, rule count,
 * class count, semantics, algorithm and batch, so that other peers can be
 * joined on those keys.
 * --dump writes each set's rules and keys as text (one rule a line:
 * "value words / mask words priority handle" in hex) for such peers.
 *
 * Built as bench/classifier-bench-ovs (OVS_DPCLS_PEER defined, linked with
 * the OVS build), each set is also looked up by OVS 3.1's own dpcls on one
 * core (bench/ovs-dpcls-peer.c), with the generic subtable lookup OVS
 * picks by default and, where the CPU has AVX-512, with avx512_gather:
 *   ovs-1c   OVS's dpcls, default lookup functions, one core (M lookups/s);
 *   ovs-avx  the same with avx512_gather preferred ("-" if unavailable).
 * Its answers are checked against the classifier's on the set's first
 * --check-keys keys (default 65536): any mismatch is printed and makes
 * the exit status 1.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "gpu_classifier/gpu-classifier.h"
#include "tests/classifier-classbench.h"
#ifdef OVS_DPCLS_PEER
#include "bench/ovs-dpcls-peer.h"
#endif

#define MAX_W 8
#define INFLIGHT 4

static bool quick;
static FILE *csv;
static const char *dump_dir;
static const char *only;
static double max_seconds = 0.25;
static size_t one_n;            /* --synth N:C */
static unsigned int one_c;
static bool synth_hp;           /* --priority: synthetic sets use
                                 * highest-priority semantics. */
static bool have_cuda;
static size_t check_keys = 65536;   /* --check-keys N. */
static unsigned int n_failures;     /* Sets whose answers differed. */

static double
now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t
rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

struct ruleset {
    char name[64];
    unsigned int n_words;
    enum gpu_cls_semantics sem;
    size_t n_rules;
    uint64_t *values, *masks;   /* n_rules x n_words. */
    uint32_t *prios, *handles;
    size_t n_keys;
    uint64_t *keys;             /* Pinned when CUDA is there. */
};

static void
ruleset_free(struct ruleset *rs)
{
    free(rs->values);
    free(rs->masks);
    free(rs->prios);
    free(rs->handles);
    gpu_host_free(rs->keys);
}

/* GSwitch-style synthetic set: OpenFlow 1.0's 12 match fields packed in 5
 * words; each class matches a distinct subset of the fields exactly and
 * wildcards the rest; rules fill their fields at random; keys come from
 * rules with their wildcarded fields random, so every key hits. */
static const struct {
    unsigned int word, shift, bits;
} of_fields[12] = {
    { 0, 0, 16 },   /* in_port */
    { 0, 16, 48 },  /* eth_src */
    { 1, 0, 48 },   /* eth_dst */
    { 1, 48, 16 },  /* eth_type */
    { 2, 0, 12 },   /* vlan_vid */
    { 2, 12, 3 },   /* vlan_pcp */
    { 2, 16, 32 },  /* ip_src */
    { 3, 0, 32 },   /* ip_dst */
    { 3, 32, 8 },   /* ip_proto */
    { 3, 40, 6 },   /* ip_tos */
    { 4, 0, 16 },   /* tp_src */
    { 4, 16, 16 },  /* tp_dst */
};

static void
make_synthetic(struct ruleset *rs, size_t n_rules, unsigned int n_classes,
               size_t n_keys, uint64_t seed)
{
    unsigned int w = 5;
    uint64_t (*cmasks)[5] = calloc(n_classes, sizeof *cmasks);
    uint32_t *subsets = calloc(n_classes, sizeof *subsets);

    memset(rs, 0, sizeof *rs);
    snprintf(rs->name, sizeof rs->name, "synth-%zu-%u", n_rules, n_classes);
    rs->n_words = w;
    rs->sem = synth_hp ? GPU_CLS_HIGHEST_PRIORITY : GPU_CLS_FIRST_MATCH;
    if (synth_hp) {
        strncat(rs->name, "-hp", sizeof rs->name - strlen(rs->name) - 1);
    }
    for (unsigned int c = 0; c < n_classes; c++) {
        uint32_t sub;
        bool dup;

        /* Distinct field subsets; in_port always exact so rules of
         * different classes rarely overlap (megaflows never do). */
        do {
            sub = (rnd(&seed) & 0xffe) | 1;
            dup = false;
            for (unsigned int d = 0; d < c && !dup; d++) {
                dup = subsets[d] == sub;
            }
        } while (dup);
        subsets[c] = sub;
        for (int f = 0; f < 12; f++) {
            if (sub & (1u << f)) {
                uint64_t fm = of_fields[f].bits == 64
                              ? UINT64_MAX
                              : ((1ULL << of_fields[f].bits) - 1);
                cmasks[c][of_fields[f].word] |= fm << of_fields[f].shift;
            }
        }
    }
    rs->n_rules = n_rules;
    rs->values = malloc(n_rules * w * sizeof *rs->values);
    rs->masks = malloc(n_rules * w * sizeof *rs->masks);
    rs->prios = malloc(n_rules * sizeof *rs->prios);
    rs->handles = malloc(n_rules * sizeof *rs->handles);
    for (size_t r = 0; r < n_rules; r++) {
        unsigned int c = r % n_classes;

        for (unsigned int i = 0; i < w; i++) {
            rs->masks[r * w + i] = cmasks[c][i];
            rs->values[r * w + i] = rnd(&seed) & cmasks[c][i];
        }
        rs->prios[r] = rnd(&seed) % 1000;
        rs->handles[r] = r;
    }
    rs->n_keys = n_keys;
    rs->keys = gpu_host_alloc(n_keys * w * sizeof *rs->keys);
    for (size_t k = 0; k < n_keys; k++) {
        size_t r = rnd(&seed) % n_rules;

        for (unsigned int i = 0; i < w; i++) {
            rs->keys[k * w + i] = rs->values[r * w + i]
                                  | (rnd(&seed) & ~rs->masks[r * w + i]);
        }
    }
    free(cmasks);
    free(subsets);
}

/* ClassBench: highest-priority semantics; keys from the set's trace if
 * there is one, else drawn from random rules (a random point inside). */
static bool
make_classbench(struct ruleset *rs, const char *set, size_t n_keys,
                uint64_t seed)
{
    char path[1024], tpath[1024];
    struct cb_filter *filters;
    struct cb_header *trace = NULL;
    struct cb_rule *rules;
    size_t n_filters, n_trace = 0, n_rules;

    memset(rs, 0, sizeof *rs);
    snprintf(path, sizeof path, "%s/classbench/%s", cb_data_dir(), set);
    if (cb_load_filters(path, &filters, &n_filters)) {
        snprintf(path, sizeof path, "%s/classbench/%s.gz", cb_data_dir(),
                 set);
        if (cb_load_filters(path, &filters, &n_filters)) {
            /* The sets are in the repository: a missing one is an error,
             * by name, not a benchmark quietly run on fewer sets. */
            fprintf(stderr, "classifier-bench: missing data file "
                    "%s/classbench/%s (nor %s) (OVSGPU_DATA names another "
                    "folder)\n", cb_data_dir(), set, path);
            exit(1);
        }
    }
    snprintf(tpath, sizeof tpath, "%s/classbench/%s_trace.gz",
             cb_data_dir(), set);
    cb_load_trace(tpath, &trace, &n_trace);
    cb_expand(filters, n_filters, &rules, &n_rules);

    snprintf(rs->name, sizeof rs->name, "cb-%s", set);
    rs->n_words = CB_KEY_WORDS;
    rs->sem = GPU_CLS_HIGHEST_PRIORITY;
    rs->n_rules = n_rules;
    rs->values = malloc(n_rules * 2 * sizeof *rs->values);
    rs->masks = malloc(n_rules * 2 * sizeof *rs->masks);
    rs->prios = malloc(n_rules * sizeof *rs->prios);
    rs->handles = malloc(n_rules * sizeof *rs->handles);
    for (size_t r = 0; r < n_rules; r++) {
        memcpy(&rs->values[2 * r], rules[r].value, 16);
        memcpy(&rs->masks[2 * r], rules[r].mask, 16);
        rs->prios[r] = n_filters - rules[r].filter;
        rs->handles[r] = rules[r].filter;
    }
    rs->n_keys = n_keys;
    rs->keys = gpu_host_alloc(n_keys * 2 * sizeof *rs->keys);
    for (size_t k = 0; k < n_keys; k++) {
        if (n_trace) {
            cb_key(&trace[k % n_trace], &rs->keys[2 * k]);
        } else {
            size_t r = rnd(&seed) % n_rules;

            for (int i = 0; i < 2; i++) {
                rs->keys[2 * k + i] = rs->values[2 * r + i]
                                      | (rnd(&seed) & ~rs->masks[2 * r + i]);
            }
        }
    }
    free(filters);
    free(trace);
    free(rules);
    return true;
}

static void
dump_ruleset(const struct ruleset *rs)
{
    char path[1024];
    FILE *f;

    if (!dump_dir) {
        return;
    }
    snprintf(path, sizeof path, "%s/%s.rules", dump_dir, rs->name);
    f = fopen(path, "w");
    if (!f) {
        return;
    }
    fprintf(f, "# words=%u semantics=%s\n", rs->n_words,
            rs->sem == GPU_CLS_FIRST_MATCH ? "first" : "priority");
    for (size_t r = 0; r < rs->n_rules; r++) {
        for (unsigned int i = 0; i < rs->n_words; i++) {
            fprintf(f, "%016" PRIx64 " ", rs->values[r * rs->n_words + i]);
        }
        fprintf(f, "/");
        for (unsigned int i = 0; i < rs->n_words; i++) {
            fprintf(f, " %016" PRIx64, rs->masks[r * rs->n_words + i]);
        }
        fprintf(f, " %" PRIx32 " %" PRIx32 "\n", rs->prios[r],
                rs->handles[r]);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/%s.keys", dump_dir, rs->name);
    f = fopen(path, "w");
    if (f) {
        for (size_t k = 0; k < rs->n_keys; k++) {
            for (unsigned int i = 0; i < rs->n_words; i++) {
                fprintf(f, "%016" PRIx64 "%c",
                        rs->keys[k * rs->n_words + i],
                        i + 1 < rs->n_words ? ' ' : '\n');
            }
        }
        fclose(f);
    }
}

/* Builds a table of 'rs''s rules.  Sets dup[r], if 'dup' is nonnull, for
 * each rule the table refused as a duplicate of an earlier one, so that
 * peers skip it too. */
static struct gpu_cls_table *
build(const struct ruleset *rs, enum gpu_cls_backend be,
      enum gpu_cls_algorithm alg, double *secs, bool *dup)
{
    struct gpu_cls_config cfg;
    struct gpu_cls_table *t;
    double t0 = now();
    int err;

    gpu_cls_config_init(&cfg, rs->n_words);
    cfg.semantics = rs->sem;
    cfg.algorithm = alg;
    cfg.backend = be;
    err = gpu_cls_create(&cfg, &t);
    if (err) {
        fprintf(stderr, "create: %s\n", gpu_status_string(err));
        return NULL;
    }
    for (size_t r = 0; r < rs->n_rules; r++) {
        err = gpu_cls_insert(t, &rs->values[r * rs->n_words],
                             &rs->masks[r * rs->n_words], rs->prios[r],
                             rs->handles[r]);
        if (dup) {
            dup[r] = err == GPU_ERR_EXISTS;
        }
        if (err && err != GPU_ERR_EXISTS) {
            fprintf(stderr, "insert: %s\n", gpu_status_string(err));
            gpu_cls_destroy(t);
            return NULL;
        }
    }
    if (secs) {
        *secs = now() - t0;
    }
    return t;
}

/* Lookups per second over batches of 'batch' keys, for about max_seconds
 * after a warm-up round. */
struct meas {
    double kernel, e2e, e2e_sync, cpu;
};

static double
time_cpu(struct gpu_cls_table *t, const struct ruleset *rs, size_t batch,
         uint32_t *res)
{
    size_t done = 0, off = 0;
    double t0, el;

    gpu_cls_lookup(t, rs->keys, batch < 1024 ? batch : 1024, rs->n_words,
                   res);
    t0 = now();
    do {
        size_t n = batch;

        if (off + n > rs->n_keys) {
            off = 0;
        }
        gpu_cls_lookup(t, rs->keys + off * rs->n_words, n, rs->n_words,
                       res);
        done += n;
        off += n;
        el = now() - t0;
    } while (el < max_seconds);
    return done / el;
}

#ifdef HAVE_CUDA
static double
time_cuda(struct gpu_cls_table *t, const struct ruleset *rs, size_t batch,
          int mode)
{
    /* mode 0: kernel-only; 1: end-to-end pipelined; 2: end-to-end sync. */
    struct gpu_cls_batch *b[INFLIGHT];
    struct gpu_stream *s[INFLIGHT];
    uint64_t *d_keys = NULL;
    uint32_t *d_res[INFLIGHT] = { NULL };
    uint32_t *h_res[INFLIGHT];
    size_t n_slices = rs->n_keys / batch;
    int depth = mode == 2 ? 1 : INFLIGHT;
    double t0, el;
    size_t done = 0, it = 0;

    if (!n_slices) {
        return 0;
    }
    for (int i = 0; i < depth; i++) {
        gpu_cls_batch_create(t, batch, &b[i]);
        gpu_stream_create(&s[i]);
        h_res[i] = gpu_host_alloc(batch * sizeof *h_res[i]);
        if (mode == 0 && cudaMalloc((void **) &d_res[i],
                                    batch * sizeof(uint32_t))) {
            return 0;
        }
    }
    if (mode == 0) {
        if (cudaMalloc((void **) &d_keys,
                       n_slices * batch * rs->n_words * sizeof *d_keys)) {
            return 0;
        }
        cudaMemcpy(d_keys, rs->keys,
                   n_slices * batch * rs->n_words * sizeof *d_keys,
                   cudaMemcpyHostToDevice);
    }

    for (int pass = 0; pass < 2; pass++) {
        done = 0;
        it = 0;
        t0 = now();
        do {
            int i = it % depth;
            size_t slice = it % n_slices;
            int err;

            gpu_cls_wait(b[i]);
            if (mode == 0) {
                /* Kernel-only: no copies; like e2e, 4 batches on 4
                 * streams, so kernels may overlap. */
                err = gpu_cls_submit_device(
                    b[i], s[i], d_keys + slice * batch * rs->n_words, batch,
                    rs->n_words, d_res[i]);
            } else {
                err = gpu_cls_submit(b[i], s[i],
                                     rs->keys + slice * batch * rs->n_words,
                                     batch, rs->n_words, h_res[i]);
            }
            if (err) {
                fprintf(stderr, "submit: %s\n", gpu_status_string(err));
                return 0;
            }
            if (mode == 2) {
                gpu_cls_wait(b[i]);
            }
            done += batch;
            it++;
            el = now() - t0;
        } while (pass == 0 ? it < (size_t) depth * 2 : el < max_seconds);
        for (int i = 0; i < depth; i++) {
            gpu_cls_wait(b[i]);
        }
        el = now() - t0;
    }
    for (int i = 0; i < depth; i++) {
        gpu_cls_batch_destroy(b[i]);
        gpu_stream_destroy(s[i]);
        gpu_host_free(h_res[i]);
        cudaFree(d_res[i]);
    }
    cudaFree(d_keys);
    return done / el;
}
#endif

static void
header(void)
{
    printf("%-18s %7s %5s %6s %-6s %-6s %9s %9s %9s %8s %7s", "set",
           "rules", "class", "batch", "alg", "chosen", "kernel", "e2e",
           "e2e-sync", "cpu-1c", "e2e/cpu");
#ifdef OVS_DPCLS_PEER
    printf(" %8s %8s %7s %7s", "ovs-1c", "ovs-avx", "cpu/ovs", "e2e/ovs");
#endif
    printf("\n%-18s %7s %5s %6s %-6s %-6s %9s %9s %9s %8s %7s", "", "", "",
           "", "", "", "Mlk/s", "Mlk/s", "Mlk/s", "Mlk/s", "x");
#ifdef OVS_DPCLS_PEER
    printf(" %8s %8s %7s %7s", "Mlk/s", "Mlk/s", "x", "x");
#endif
    printf("\n");
}

#ifdef OVS_DPCLS_PEER
/* What OVS's dpcls did on one set. */
struct ovs_meas {
    double mlps;                /* M lookups/s on one core; 0: not run. */
    double probes_per_hit;      /* Subtables searched per matched key. */
};

static bool
rule_matches(const struct ruleset *rs, size_t r, const uint64_t *key)
{
    const uint64_t *value = &rs->values[r * rs->n_words];
    const uint64_t *mask = &rs->masks[r * rs->n_words];

    for (unsigned int i = 0; i < rs->n_words; i++) {
        if ((key[i] & mask[i]) != (value[i] & mask[i])) {
            return false;
        }
    }
    return true;
}

static double
time_ovs(struct ovs_dpcls_peer *p, const struct ruleset *rs, uint32_t *res)
{
    size_t chunk = rs->n_keys < 1024 ? rs->n_keys : 1024;
    size_t done = 0, off = 0;
    double t0, el;

    ovs_dpcls_peer_lookup(p, 0, chunk, res, NULL);
    t0 = now();
    do {
        if (off + chunk > rs->n_keys) {
            off = 0;
        }
        ovs_dpcls_peer_lookup(p, off, chunk, res, NULL);
        done += chunk;
        off += chunk;
        el = now() - t0;
    } while (el < max_seconds);
    return done / el;
}

/* Builds OVS's dpcls of 'rs''s rules (but the duplicates the classifier
 * refused, 'dup'), checks its answers against those of 'ref_t' (the
 * classifier's CPU backend, same rules) on the set's first check_keys
 * keys, and times it on one core.  Returns false if an answer was wrong:
 * found by one and not the other, or a rule that does not match the key.
 * dpcls has no priorities and stops at the first subtable with a match,
 * so where rules overlap (ClassBench) it may answer with another matching
 * rule than the classifier's highest-priority one; that is counted, not
 * failed.  Megaflows never overlap, and the synthetic sets almost never
 * do. */
static bool
run_ovs_peer(const struct ruleset *rs, const bool *dup,
             struct gpu_cls_table *ref_t, bool avx512, struct ovs_meas *om)
{
    struct ovs_dpcls_peer *p = ovs_dpcls_peer_create(rs->n_words, avx512);
    size_t n = rs->n_keys < check_keys ? rs->n_keys : check_keys;
    uint32_t *ids = malloc((n > 1024 ? n : 1024) * sizeof *ids);
    uint32_t *ref = malloc(n * sizeof *ref);
    size_t bad = 0, other = 0, found = 0;
    uint64_t probes = 0;
    char impl[256];

    for (size_t r = 0; r < rs->n_rules; r++) {
        if (!dup[r]) {
            ovs_dpcls_peer_insert(p, &rs->values[r * rs->n_words],
                                  &rs->masks[r * rs->n_words], r);
        }
    }
    ovs_dpcls_peer_finish(p);
    ovs_dpcls_peer_set_keys(p, rs->keys, rs->n_keys);
    ovs_dpcls_peer_describe(p, impl, sizeof impl);

    ovs_dpcls_peer_lookup(p, 0, n, ids, &probes);
    gpu_cls_lookup(ref_t, rs->keys, n, rs->n_words, ref);
    for (size_t i = 0; i < n; i++) {
        const uint64_t *key = &rs->keys[i * rs->n_words];
        bool p_found = ids[i] != OVS_DPCLS_PEER_NO_MATCH;
        bool c_found = ref[i] != GPU_CLS_NO_MATCH;

        /* With first-match semantics (synthetic sets, whose handles are
         * rule indexes), two different answers are both right only if the
         * key matches both rules: an overlap, which megaflows never have
         * and these sets very rarely. */
        bool c_wrong = p_found && c_found && rs->handles[ids[i]] != ref[i]
                       && rs->sem == GPU_CLS_FIRST_MATCH
                       && ref[i] < rs->n_rules
                       && rs->handles[ref[i]] == ref[i]
                       && !rule_matches(rs, ref[i], key);

        if (p_found != c_found || c_wrong
            || (p_found && !rule_matches(rs, ids[i], key))) {
            if (++bad <= 5) {
                printf("%-18s MISMATCH: key %zu: OVS dpcls found %s, the "
                       "classifier %s\n", rs->name, i,
                       !p_found ? "no rule"
                       : rule_matches(rs, ids[i], key) ? "a rule"
                       : "a rule that does not match",
                       !c_found ? "no rule"
                       : c_wrong ? "a rule that does not match" : "a rule");
            }
        } else if (p_found && rs->handles[ids[i]] != ref[i]) {
            other++;
        }
        found += p_found;
    }
    om->probes_per_hit = found ? (double) probes / found : 0;
    printf("%-18s ovs dpcls%s: %zu subtables (%s), %.1f searched per hit; "
           "check of %zu keys: %zu found, %zu mismatches, %zu answered by "
           "another matching rule\n", rs->name, avx512 ? " (avx512)" : "",
           ovs_dpcls_peer_n_subtables(p), impl, om->probes_per_hit, n,
           found, bad, other);
    if (bad) {
        printf("%-18s MISMATCH: %zu of %zu OVS dpcls answers differ from "
               "the classifier's\n", rs->name, bad, n);
    }

    om->mlps = time_ovs(p, rs, ids) / 1e6;
    ovs_dpcls_peer_destroy(p);
    free(ids);
    free(ref);
    return !bad;
}
#endif

static void
run_set(const struct ruleset *rs, const size_t *batches, int n_batches,
        bool with_linear, bool with_cpu)
{
    static const enum gpu_cls_algorithm algs[] = {
        GPU_CLS_LINEAR, GPU_CLS_TUPLE, GPU_CLS_BLOOM, GPU_CLS_AUTO,
    };
    struct gpu_cls_table *cpu_t, *gpu_t = NULL;
    struct gpu_cls_stats st;
    size_t max_batch = 0;
    double build_cpu, build_gpu = 0;

    for (int i = 0; i < n_batches; i++) {
        max_batch = batches[i] > max_batch ? batches[i] : max_batch;
    }
    dump_ruleset(rs);
    bool *dup = calloc(rs->n_rules, sizeof *dup);
    cpu_t = build(rs, GPU_CLS_BACKEND_CPU, GPU_CLS_AUTO, &build_cpu, dup);
    if (have_cuda) {
        gpu_t = build(rs, GPU_CLS_BACKEND_CUDA, GPU_CLS_AUTO, &build_gpu,
                      NULL);
    }
    if (!cpu_t || (have_cuda && !gpu_t)) {
        free(dup);
        return;
    }
    gpu_cls_get_stats(cpu_t, &st);

#ifdef OVS_DPCLS_PEER
    /* Once per set: OVS's lookup does not depend on the algorithm. */
    struct ovs_meas om = { 0, 0 }, om_avx = { 0, 0 };
    if (with_cpu) {
        if (!run_ovs_peer(rs, dup, cpu_t, false, &om)) {
            n_failures++;
        }
        if (ovs_dpcls_peer_avx512_available()
            && !run_ovs_peer(rs, dup, cpu_t, true, &om_avx)) {
            n_failures++;
        }
    }
#endif

    uint32_t *ref = malloc(max_batch * sizeof *ref);
    uint32_t *res = malloc(max_batch * sizeof *res);
    for (size_t a = with_linear ? 0 : 1; a < 4; a++) {
        gpu_cls_set_algorithm(cpu_t, algs[a]);
        if (gpu_t) {
            gpu_cls_set_algorithm(gpu_t, algs[a]);
        }
        gpu_cls_get_stats(gpu_t ? gpu_t : cpu_t, &st);
        for (int bi = 0; bi < n_batches; bi++) {
            size_t batch = batches[bi];
            struct meas m = { 0, 0, 0, 0 };

            if (batch > rs->n_keys) {
                continue;
            }
            /* CPU only at one batch size: it does not depend on it. */
            if (with_cpu && (bi == n_batches - 1)) {
                m.cpu = time_cpu(cpu_t, rs, batch, res) / 1e6;
            }
#ifdef HAVE_CUDA
            if (gpu_t) {
                m.kernel = time_cuda(gpu_t, rs, batch, 0) / 1e6;
                m.e2e = time_cuda(gpu_t, rs, batch, 1) / 1e6;
                m.e2e_sync = time_cuda(gpu_t, rs, batch, 2) / 1e6;
            }
#endif
            printf("%-18s %7zu %5" PRIu64 " %6zu %-6s %-6s %9.1f %9.1f "
                   "%9.1f %8.2f %7.0f", rs->name, rs->n_rules,
                   st.n_classes, batch, gpu_cls_algorithm_name(algs[a]),
                   gpu_cls_algorithm_name(st.chosen), m.kernel, m.e2e,
                   m.e2e_sync, m.cpu,
                   m.cpu > 0 && m.e2e > 0 ? m.e2e / m.cpu : 0);
#ifdef OVS_DPCLS_PEER
            /* OVS's figures on the rows with the CPU backend's. */
            double ovs = m.cpu > 0 ? om.mlps : 0;
            double ovs_avx = m.cpu > 0 ? om_avx.mlps : 0;
            char avx[16] = "-";

            if (ovs_avx > 0) {
                snprintf(avx, sizeof avx, "%.2f", ovs_avx);
            }
            printf(" %8.2f %8s %7.1f %7.0f", ovs, avx,
                   ovs > 0 ? m.cpu / ovs : 0,
                   ovs > 0 && m.e2e > 0 ? m.e2e / ovs : 0);
#endif
            printf("\n");
            fflush(stdout);
            if (csv) {
                fprintf(csv, "%s,%zu,%" PRIu64 ",%s,%s,%s,%zu,%.3f,%.3f,"
                        "%.3f,%.4f", rs->name, rs->n_rules, st.n_classes,
                        rs->sem == GPU_CLS_FIRST_MATCH ? "first" : "priority",
                        gpu_cls_algorithm_name(algs[a]),
                        gpu_cls_algorithm_name(st.chosen), batch, m.kernel,
                        m.e2e, m.e2e_sync, m.cpu);
#ifdef OVS_DPCLS_PEER
                fprintf(csv, ",%.4f,%.4f", ovs, ovs_avx);
#endif
                fprintf(csv, "\n");
                fflush(csv);
            }
        }
    }

    /* Correctness check of the whole key set, GPU against CPU. */
    if (gpu_t) {
        size_t n = rs->n_keys < max_batch ? rs->n_keys : max_batch;
        size_t bad = 0;

        gpu_cls_set_algorithm(cpu_t, GPU_CLS_AUTO);
        gpu_cls_set_algorithm(gpu_t, GPU_CLS_BLOOM);
        gpu_cls_lookup(cpu_t, rs->keys, n, rs->n_words, ref);
        gpu_cls_lookup(gpu_t, rs->keys, n, rs->n_words, res);
        for (size_t i = 0; i < n; i++) {
            bad += rs->sem == GPU_CLS_HIGHEST_PRIORITY
                   ? ref[i] != res[i]
                   : (ref[i] == GPU_CLS_NO_MATCH)
                     != (res[i] == GPU_CLS_NO_MATCH);
        }
        if (bad) {
            printf("%-18s MISMATCH: %zu of %zu GPU results differ from the "
                   "CPU backend\n", rs->name, bad, n);
            n_failures++;
        }
    }
    free(ref);
    free(res);
    gpu_cls_destroy(cpu_t);
    gpu_cls_destroy(gpu_t);
    free(dup);
}

int
main(int argc, char *argv[])
{
    const char *csv_path = NULL;
    struct gpu_device_info info;
    char cmd[1024] = "";

    for (int i = 0; i < argc; i++) {
        strncat(cmd, argv[i], sizeof cmd - strlen(cmd) - 2);
        strcat(cmd, " ");
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = true;
        } else if (!strcmp(argv[i], "--csv") && i + 1 < argc) {
            csv_path = argv[++i];
        } else if (!strcmp(argv[i], "--dump") && i + 1 < argc) {
            dump_dir = argv[++i];
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else if (!strcmp(argv[i], "--priority")) {
            synth_hp = true;
        } else if (!strcmp(argv[i], "--synth") && i + 1 < argc) {
            if (sscanf(argv[++i], "%zu:%u", &one_n, &one_c) != 2
                || !one_n || !one_c || one_c > 4096 || one_n < one_c) {
                fprintf(stderr, "--synth wants RULES:CLASSES\n");
                return 2;
            }
            only = "one";
        } else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc) {
            max_seconds = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--check-keys") && i + 1 < argc) {
            check_keys = strtoul(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "usage: %s [--quick] [--csv FILE] [--dump DIR] "
                    "[--only synth|classbench|burst] "
                    "[--synth RULES:CLASSES] "
                    "[--priority] [--max-seconds S] [--check-keys N]\n",
                    argv[0]);
            return 2;
        }
    }
    have_cuda = gpu_cls_cuda_available();
    if (csv_path) {
        csv = fopen(csv_path, "w");
        if (csv) {
            fprintf(csv, "set,rules,classes,semantics,algorithm,chosen,"
                    "batch,gpu_kernel_mlps,gpu_e2e_mlps,gpu_e2e_sync_mlps,"
                    "cpu_1core_mlps");
#ifdef OVS_DPCLS_PEER
            fprintf(csv, ",ovs_dpcls_1core_mlps,ovs_dpcls_avx512_1core_mlps");
#endif
            fprintf(csv, "\n");
        }
    }

    char cpu_model[256] = "unknown CPU";
    FILE *ci = fopen("/proc/cpuinfo", "r");
    if (ci) {
        char line[512];
        while (fgets(line, sizeof line, ci)) {
            if (!strncmp(line, "model name", 10)) {
                char *p = strchr(line, ':');
                if (p) {
                    snprintf(cpu_model, sizeof cpu_model, "%s", p + 2);
                    cpu_model[strcspn(cpu_model, "\n")] = 0;
                }
                break;
            }
        }
        fclose(ci);
    }
    time_t tt = time(NULL);
    printf("# classifier-bench, %s", ctime(&tt));
    printf("# command: %s\n", cmd);
    if (have_cuda && !gpu_device_query(0, &info)) {
        printf("# device: %s, %d SMs, %.1f GiB\n", info.name,
               info.multiprocessors, info.total_mem / 1073741824.0);
    } else {
        printf("# device: none (CPU backend only)\n");
    }
    printf("# cpu: %s (cpu-1c = CPU backend on one core)\n", cpu_model);
    printf("# kernel: keys/results in device memory; e2e: pinned host "
           "buffers, H2D+D2H included, %d batches in flight; e2e-sync: one "
           "at a time\n", INFLIGHT);
#ifdef OVS_DPCLS_PEER
    printf("# ovs-1c: OVS 3.1's dpcls (dpif-netdev, patches/0005), one "
           "core, bursts of 32, subtables in creation order; ovs-avx: the "
           "same with avx512_gather preferred (%s)\n",
           ovs_dpcls_peer_avx512_available() ? "available"
           : "not available on this CPU or build");
#endif

    header();
    if (one_n) {
        static const size_t batches[] = { 1024, 8192, 65536 };
        struct ruleset rs;

        make_synthetic(&rs, one_n, one_c, 1 << 20, 4321);
        run_set(&rs, batches, 3, one_n <= 16384, true);
        ruleset_free(&rs);
    }
    if (!only || !strcmp(only, "synth")) {
        static const unsigned int classes_q[] = { 1, 16, 512 };
        static const unsigned int classes[] = { 1, 4, 16, 64, 128, 256,
                                                512 };
        static const size_t rules_q[] = { 16384, 131072 };
        static const size_t rules[] = { 1024, 16384, 131072 };
        static const size_t batches[] = { 1024, 8192, 65536 };
        const unsigned int *cl = quick ? classes_q : classes;
        int n_cl = quick ? 3 : 7;
        const size_t *rl = quick ? rules_q : rules;
        int n_rl = quick ? 2 : 3;

        for (int r = 0; r < n_rl; r++) {
            for (int c = 0; c < n_cl; c++) {
                struct ruleset rs;

                if (rl[r] < cl[c]) {
                    continue;
                }
                make_synthetic(&rs, rl[r], cl[c], 1 << 20, 1234 + r * 7 + c);
                /* All batch sizes only for the headline set; 64K elsewhere,
                 * to fit the run. */
                bool headline = rl[r] == 131072 && (cl[c] == 512
                                                    || cl[c] == 16);
                if (headline) {
                    run_set(&rs, batches, 3, rl[r] <= 16384, true);
                } else {
                    run_set(&rs, &batches[2], 1, rl[r] <= 16384, true);
                }
                ruleset_free(&rs);
            }
        }
    }
    if (only && !strcmp(only, "burst")) {
        /* One megaflow per mask, as the switch benchmark installs. */
        static const unsigned int classes[] = { 1, 8, 32, 128, 512 };
        static const size_t batches[] = { 32 };

        for (size_t c = 0; c < sizeof classes / sizeof *classes; c++) {
            struct ruleset rs;

            make_synthetic(&rs, classes[c] * 8, classes[c], 1 << 16,
                           777 + c);
            run_set(&rs, batches, 1, true, true);
            ruleset_free(&rs);
        }
    }
    if (!only || !strcmp(only, "classbench")) {
        static const char *sets[] = {
            "acl1_10000", "fw1_10000", "ipc1_10000",
            "acl1_100000", "fw1_100000", "ipc1_100000",
        };
        static const size_t batches[] = { 65536 };

        for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) {
            struct ruleset rs;

            if (make_classbench(&rs, sets[i], 1 << 20, 99 + i)) {
                run_set(&rs, batches, 1, false, true);
                ruleset_free(&rs);
            }
        }
    }
    if (csv) {
        fclose(csv);
    }
    if (n_failures) {
        printf("# FAILED: %u sets gave different answers\n", n_failures);
    }
    return n_failures ? 1 : 0;
}
