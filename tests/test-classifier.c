/*
 * Tests of gpu_classifier/: differential tests against a brute-force
 * reference on random rule sets, ClassBench sets and traces, concurrency,
 * and bad inputs.
 *
 * Environment:
 *   GPU_TEST_SEED       master seed (decimal or 0x hex); else time-based.
 *                       Always printed; every case prints its own seed on
 *                       failure.
 *   GPU_CLS_BACKEND     cpu | cuda | all (default: every backend usable
 *                       here).  "cuda" without a device fails.
 *   OVSGPU_DATA         folder holding classbench/ (default: the build
 *                       tree's data/, made from the repository's); a
 *                       missing set fails its case, naming the file.
 *   GPU_TEST_QUICK      if set, smaller random cases.
 *   GPU_TEST_FILTER     run only tests whose names match this pattern
 *                       (cmocka's filter: '*' and '?' wildcards).
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "gpu_classifier/gpu-classifier.h"
#include "tests/classifier-classbench.h"
#include "tests/test-report.h"

static uint64_t master_seed;
static enum gpu_cls_backend backends[2];
static int n_backends;
static bool quick;

/* ---- Random numbers (splitmix64: small, seedable, good enough). ---- */

struct rng {
    uint64_t s;
};

static uint64_t
rng_next(struct rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t
rng_below(struct rng *r, uint32_t n)
{
    return n ? rng_next(r) % n : 0;
}

static uint64_t
case_seed(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    struct rng r = { master_seed ^ (a * 0x100000001b3ULL)
                     ^ (b << 16) ^ (c << 32) ^ (d << 48) };

    return rng_next(&r);
}

/* ---- Brute-force reference. ---- */

struct ref_rule {
    uint64_t value[GPU_CLS_MAX_WORDS];
    uint64_t mask[GPU_CLS_MAX_WORDS];
    uint32_t priority;
    uint32_t handle;            /* == index in ref.rules. */
    bool live;
};

struct ref {
    unsigned int n_words;
    bool hp;
    struct ref_rule *rules;
    size_t n, alloc;
    size_t *live;               /* Indexes of live rules. */
    size_t n_live;
};

static void
ref_init(struct ref *ref, unsigned int n_words, bool hp)
{
    memset(ref, 0, sizeof *ref);
    ref->n_words = n_words;
    ref->hp = hp;
}

static void
ref_destroy(struct ref *ref)
{
    free(ref->rules);
    free(ref->live);
}

static bool
ref_rule_matches(const struct ref *ref, const struct ref_rule *r,
                 const uint64_t *key)
{
    for (unsigned int i = 0; i < ref->n_words; i++) {
        if ((key[i] & r->mask[i]) != r->value[i]) {
            return false;
        }
    }
    return true;
}

static bool
ref_same(const struct ref *ref, const struct ref_rule *r,
         const uint64_t *value, const uint64_t *mask)
{
    for (unsigned int i = 0; i < ref->n_words; i++) {
        if (r->mask[i] != mask[i] || r->value[i] != (value[i] & mask[i])) {
            return false;
        }
    }
    return true;
}

static struct ref_rule *
ref_find(const struct ref *ref, const uint64_t *value, const uint64_t *mask)
{
    for (size_t i = 0; i < ref->n_live; i++) {
        struct ref_rule *r = &ref->rules[ref->live[i]];

        if (ref_same(ref, r, value, mask)) {
            return r;
        }
    }
    return NULL;
}

static struct ref_rule *
ref_add(struct ref *ref, const uint64_t *value, const uint64_t *mask,
        uint32_t priority)
{
    struct ref_rule *r;

    if (ref->n == ref->alloc) {
        ref->alloc = ref->alloc ? 2 * ref->alloc : 256;
        ref->rules = realloc(ref->rules, ref->alloc * sizeof *ref->rules);
        ref->live = realloc(ref->live, ref->alloc * sizeof *ref->live);
        assert_non_null(ref->rules);
        assert_non_null(ref->live);
    }
    r = &ref->rules[ref->n];
    memset(r, 0, sizeof *r);
    for (unsigned int i = 0; i < ref->n_words; i++) {
        r->mask[i] = mask[i];
        r->value[i] = value[i] & mask[i];
    }
    r->priority = priority;
    r->handle = ref->n;
    r->live = true;
    ref->live[ref->n_live++] = ref->n++;
    return r;
}

static void
ref_kill(struct ref *ref, size_t live_idx)
{
    ref->rules[ref->live[live_idx]].live = false;
    ref->live[live_idx] = ref->live[--ref->n_live];
}

/* Checks one result.  Returns NULL if right, else a description. */
static const char *
ref_check(const struct ref *ref, const uint64_t *key, uint32_t result)
{
    uint32_t best = GPU_CLS_NO_MATCH;
    uint32_t best_prio = 0;
    bool any = false;

    for (size_t i = 0; i < ref->n_live; i++) {
        const struct ref_rule *r = &ref->rules[ref->live[i]];

        if (ref_rule_matches(ref, r, key)) {
            if (!any || r->priority > best_prio
                || (r->priority == best_prio && r->handle < best)) {
                best = r->handle;
                best_prio = r->priority;
            }
            any = true;
        }
    }
    if (ref->hp) {
        return result == best ? NULL : "highest-priority answer differs";
    }
    if (!any) {
        return result == GPU_CLS_NO_MATCH ? NULL : "match where none";
    }
    if (result == GPU_CLS_NO_MATCH) {
        return "no match where one exists";
    }
    if (result >= ref->n || !ref->rules[result].live
        || !ref_rule_matches(ref, &ref->rules[result], key)) {
        return "answer is not a live matching rule";
    }
    return NULL;
}

/* ---- Random rule sets. ---- */

struct gen {
    struct rng rng;
    unsigned int n_words;
    bool overlap;               /* Overlapping rules (else disjoint). */
    uint64_t (*masks)[GPU_CLS_MAX_WORDS];
    unsigned int n_masks;
    uint64_t pool[GPU_CLS_MAX_WORDS][4];    /* Overlap mode: few values. */
    uint64_t next_id;
};

static uint64_t
random_mask_word(struct rng *r)
{
    switch (rng_below(r, 6)) {
    case 0:
        return 0;
    case 1:
        return UINT64_MAX;
    case 2: {
        unsigned int len = rng_below(r, 65);
        return len ? UINT64_MAX << (64 - len) : 0;
    }
    case 3:
        return rng_next(r);
    case 4:
        return 0xffffULL << (16 * rng_below(r, 4));
    default:
        return rng_next(r) & rng_next(r) & rng_next(r);
    }
}

static void
gen_init(struct gen *g, uint64_t seed, unsigned int n_words,
         unsigned int n_masks, bool overlap)
{
    memset(g, 0, sizeof *g);
    g->rng.s = seed;
    g->n_words = n_words;
    g->overlap = overlap;
    g->n_masks = n_masks;
    g->masks = calloc(n_masks, sizeof *g->masks);
    assert_non_null(g->masks);
    for (unsigned int m = 0; m < n_masks; m++) {
        for (unsigned int i = 0; i < n_words; i++) {
            g->masks[m][i] = random_mask_word(&g->rng);
        }
        if (!overlap) {
            /* Word 0 is an exact rule id in every class: rules are then
             * disjoint, as megaflows are. */
            g->masks[m][0] = UINT64_MAX;
        }
    }
    for (unsigned int i = 0; i < n_words; i++) {
        for (int k = 0; k < 4; k++) {
            g->pool[i][k] = rng_next(&g->rng);
        }
    }
    g->next_id = rng_next(&g->rng);
}

static void
gen_destroy(struct gen *g)
{
    free(g->masks);
}

static void
gen_value(struct gen *g, uint64_t *value, const uint64_t **maskp)
{
    const uint64_t *mask = g->masks[rng_below(&g->rng, g->n_masks)];

    for (unsigned int i = 0; i < g->n_words; i++) {
        value[i] = g->overlap ? g->pool[i][rng_below(&g->rng, 3)]
                              : rng_next(&g->rng);
    }
    if (!g->overlap) {
        value[0] = g->next_id++;
    }
    *maskp = mask;
}

/* A key: mostly drawn from a live rule (bits outside its mask random or,
 * in overlap mode, from the value pool so other rules match too), else
 * random. */
static void
gen_key(struct gen *g, const struct ref *ref, uint64_t *key)
{
    if (ref->n_live && rng_below(&g->rng, 10) < 8) {
        const struct ref_rule *r
            = &ref->rules[ref->live[rng_below(&g->rng, ref->n_live)]];

        for (unsigned int i = 0; i < g->n_words; i++) {
            uint64_t other = g->overlap ? g->pool[i][rng_below(&g->rng, 4)]
                                        : rng_next(&g->rng);
            key[i] = r->value[i] | (other & ~r->mask[i]);
        }
    } else {
        for (unsigned int i = 0; i < g->n_words; i++) {
            key[i] = g->overlap && rng_below(&g->rng, 2)
                     ? g->pool[i][rng_below(&g->rng, 4)]
                     : rng_next(&g->rng);
        }
    }
}

/* ---- Helpers. ---- */

static struct gpu_cls_table *
make_table(enum gpu_cls_backend be, unsigned int n_words,
           enum gpu_cls_semantics sem, enum gpu_cls_algorithm alg,
           size_t mem_limit)
{
    struct gpu_cls_config cfg;
    struct gpu_cls_table *t = NULL;
    int err;

    gpu_cls_config_init(&cfg, n_words);
    cfg.semantics = sem;
    cfg.algorithm = alg;
    cfg.backend = be;
    cfg.mem_limit = mem_limit;
    err = gpu_cls_create(&cfg, &t);
    if (err) {
        fail_msg("gpu_cls_create(%s): %s", gpu_cls_backend_name(be),
                 gpu_status_string(err));
    }
    return t;
}

struct case_desc {
    enum gpu_cls_backend backend;
    unsigned int n_words;
    enum gpu_cls_semantics sem;
    enum gpu_cls_algorithm alg;
    unsigned int n_masks;
    unsigned int n_rules;
    bool overlap;
    uint64_t seed;
};

static void
describe(const struct case_desc *c, char *buf, size_t size)
{
    snprintf(buf, size, "backend=%s words=%u %s alg=%s masks=%u rules=%u "
             "%s seed=0x%016" PRIx64,
             gpu_cls_backend_name(c->backend), c->n_words,
             c->sem == GPU_CLS_HIGHEST_PRIORITY ? "highest-priority"
                                                : "first-match",
             gpu_cls_algorithm_name(c->alg), c->n_masks, c->n_rules,
             c->overlap ? "overlapping" : "disjoint", c->seed);
}

/* Looks up 'n' keys, alternately through gpu_cls_lookup() and the
 * asynchronous batch API, and checks every result. */
static void
check_lookups(const struct case_desc *cd, struct gpu_cls_table *t,
              struct gen *g, const struct ref *ref, size_t n, int round)
{
    uint64_t *keys = gpu_host_alloc(n * cd->n_words * sizeof *keys);
    uint32_t *results = gpu_host_alloc(n * sizeof *results);
    char desc[256];
    int err;

    assert_non_null(keys);
    assert_non_null(results);
    for (size_t i = 0; i < n; i++) {
        gen_key(g, ref, keys + i * cd->n_words);
        results[i] = 0x5a5a5a5a;       /* Poison: every one must be set. */
    }
    if (round & 1) {
        struct gpu_cls_batch *b;

        err = gpu_cls_batch_create(t, n, &b);
        assert_int_equal(err, GPU_OK);
        err = gpu_cls_submit(b, NULL, keys, n, cd->n_words, results);
        assert_int_equal(err, GPU_OK);
        while ((err = gpu_cls_poll(b)) == GPU_ERR_BUSY) {
            continue;
        }
        assert_int_equal(err, GPU_OK);
        assert_int_equal(gpu_cls_wait(b), GPU_OK);
        gpu_cls_batch_destroy(b);
    } else {
        err = gpu_cls_lookup(t, keys, n, cd->n_words, results);
        assert_int_equal(err, GPU_OK);
    }
    for (size_t i = 0; i < n; i++) {
        const char *why = ref_check(ref, keys + i * cd->n_words, results[i]);

        if (why) {
            describe(cd, desc, sizeof desc);
            fail_msg("%s: key %zu of %zu, round %d: %s (got %" PRIu32 ")",
                     desc, i, n, round, why, results[i]);
        }
    }
    gpu_host_free(keys);
    gpu_host_free(results);
}

/* One differential case: interleaved inserts, removes, failing inserts
 * and removes, and checked lookups. */
static void
run_case(const struct case_desc *cd, size_t keys_per_check, int n_checks)
{
    bool hp = cd->sem == GPU_CLS_HIGHEST_PRIORITY;
    struct gpu_cls_table *t = make_table(cd->backend, cd->n_words, cd->sem,
                                         cd->alg, 0);
    uint64_t value[GPU_CLS_MAX_WORDS];
    unsigned int n_ops = cd->n_rules * 2;
    struct ref ref;
    struct gen g;
    char desc[256];
    int round = 0;

    ref_init(&ref, cd->n_words, hp);
    gen_init(&g, cd->seed, cd->n_words, cd->n_masks, cd->overlap);
    describe(cd, desc, sizeof desc);

    for (unsigned int op = 0; op < n_ops; op++) {
        unsigned int r = rng_below(&g.rng, 100);
        /* Grow to about n_rules, then churn around it. */
        bool grow = ref.n_live < cd->n_rules / 2
                    || (ref.n_live < cd->n_rules && r < 70);
        int err;

        if (!ref.n_live || (grow && r < 85)) {
            const uint64_t *mask;
            uint32_t prio = hp ? rng_below(&g.rng, cd->overlap ? 8 : 1000)
                               : 0;
            struct ref_rule *old;

            gen_value(&g, value, &mask);
            old = ref_find(&ref, value, mask);
            err = gpu_cls_insert(t, value, mask, prio, ref.n);
            if (old) {
                if (err != GPU_ERR_EXISTS) {
                    fail_msg("%s: op %u: duplicate insert gave %s", desc,
                             op, gpu_status_string(err));
                }
            } else {
                if (err != GPU_OK) {
                    fail_msg("%s: op %u: insert gave %s", desc, op,
                             gpu_status_string(err));
                }
                ref_add(&ref, value, mask, prio);
            }
        } else if (r < 90) {
            size_t li = rng_below(&g.rng, ref.n_live);
            struct ref_rule *rr = &ref.rules[ref.live[li]];
            uint32_t handle = GPU_CLS_NO_MATCH;

            /* Bits outside the mask must not matter. */
            for (unsigned int i = 0; i < cd->n_words; i++) {
                value[i] = rr->value[i] | (rng_next(&g.rng) & ~rr->mask[i]);
            }
            err = gpu_cls_remove(t, value, rr->mask, &handle);
            if (err != GPU_OK || handle != rr->handle) {
                fail_msg("%s: op %u: remove gave %s, handle %" PRIu32
                         " for %" PRIu32, desc, op, gpu_status_string(err),
                         handle, rr->handle);
            }
            ref_kill(&ref, li);
        } else if (r < 95) {
            /* Remove something absent: a dead rule if any is not shadowed
             * by a live one with the same value and mask, else a fresh
             * value. */
            const uint64_t *mask;

            gen_value(&g, value, &mask);
            value[0] ^= 0x8000000000000000ULL;
            if (!ref_find(&ref, value, mask)) {
                err = gpu_cls_remove(t, value, mask, NULL);
                if (err != GPU_ERR_NOT_FOUND) {
                    fail_msg("%s: op %u: absent remove gave %s", desc, op,
                             gpu_status_string(err));
                }
            }
        } else {
            struct ref_rule *rr
                = &ref.rules[ref.live[rng_below(&g.rng, ref.n_live)]];

            for (unsigned int i = 0; i < cd->n_words; i++) {
                value[i] = rr->value[i] | (rng_next(&g.rng) & ~rr->mask[i]);
            }
            err = gpu_cls_insert(t, value, rr->mask, rr->priority + 1,
                                 12345678);
            if (err != GPU_ERR_EXISTS) {
                fail_msg("%s: op %u: duplicate insert gave %s", desc, op,
                         gpu_status_string(err));
            }
        }
        if (n_checks && (op + 1) % (n_ops / n_checks) == 0) {
            check_lookups(cd, t, &g, &ref, 1 + rng_below(&g.rng,
                                                         keys_per_check),
                          round++);
        }
    }
    check_lookups(cd, t, &g, &ref, keys_per_check, round++);

    struct gpu_cls_stats st;
    gpu_cls_get_stats(t, &st);
    assert_int_equal(st.n_rules, ref.n_live);

    gpu_cls_destroy(t);
    gen_destroy(&g);
    ref_destroy(&ref);
}

static const enum gpu_cls_algorithm all_algs[] = {
    GPU_CLS_LINEAR, GPU_CLS_TUPLE, GPU_CLS_BLOOM, GPU_CLS_AUTO,
};
#define N_ALGS 4

static void
test_random_small(void **state)
{
    static const unsigned int widths[] = { 1, 2, 3, 5, 8, 11 };
    (void) state;

    for (int b = 0; b < n_backends; b++) {
        for (int s = 0; s < 2; s++) {
            for (int a = 0; a < N_ALGS; a++) {
                for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
                    for (int ov = 0; ov < 2; ov++) {
                        struct case_desc cd = {
                            .backend = backends[b],
                            .n_words = widths[w],
                            .sem = s ? GPU_CLS_HIGHEST_PRIORITY
                                     : GPU_CLS_FIRST_MATCH,
                            .alg = all_algs[a],
                            .n_masks = ov ? 6 : 1 + (w * 7) % 40,
                            .n_rules = quick ? 150 : 400,
                            .overlap = ov,
                        };
                        cd.seed = case_seed(b * 16 + s, a, w, ov);
                        run_case(&cd, quick ? 300 : 1000, 4);
                    }
                }
            }
        }
    }
}

/* Wide keys (OVS's whole struct flow) still work. */
static void
test_random_wide(void **state)
{
    (void) state;
    for (int b = 0; b < n_backends; b++) {
        for (int a = 0; a < N_ALGS; a++) {
            struct case_desc cd = {
                .backend = backends[b],
                .n_words = GPU_CLS_MAX_WORDS,
                .sem = a & 1 ? GPU_CLS_HIGHEST_PRIORITY
                             : GPU_CLS_FIRST_MATCH,
                .alg = all_algs[a],
                .n_masks = 5,
                .n_rules = 100,
                .overlap = a & 2,
            };
            cd.seed = case_seed(100 + b, a, 0, 0);
            run_case(&cd, 300, 2);
        }
    }
}

/* Disjoint rules in 'n_masks' classes, on every backend, algorithm and
 * semantics, looked up in batches of 1 to 'keys_per_check' keys. */
static void
run_disjoint_cases(int seed_base, unsigned int n_words, unsigned int n_masks,
                   unsigned int n_rules, size_t keys_per_check, int n_checks)
{
    for (int b = 0; b < n_backends; b++) {
        for (int a = 0; a < N_ALGS; a++) {
            for (int s = 0; s < 2; s++) {
                struct case_desc cd = {
                    .backend = backends[b],
                    .n_words = n_words,
                    .sem = s ? GPU_CLS_HIGHEST_PRIORITY
                             : GPU_CLS_FIRST_MATCH,
                    .alg = all_algs[a],
                    .n_masks = n_masks,
                    .n_rules = n_rules,
                    .overlap = false,
                };
                cd.seed = case_seed(seed_base + b, a, s, 0);
                run_case(&cd, keys_per_check, n_checks);
            }
        }
    }
}

/* Many rules and classes: class tables grow and some rebuild. */
static void
test_random_large(void **state)
{
    (void) state;
    run_disjoint_cases(200, 5, 64, quick ? 3000 : 8000, quick ? 2000 : 5000,
                       2);
}

/* More classes than one CUDA block visits (MAX_GROUP), looked up in
 * bursts of up to 64 keys as the datapath does: the CUDA backend then
 * splits every group over several blocks. */
static void
test_random_many_classes(void **state)
{
    (void) state;
    run_disjoint_cases(250, 3, 300, 1500, 64, 8);
}

/* One class of many rules: it grows from 12 slots many times; removing
 * every rule drops the class and all its memory. */
static void
test_growth(void **state)
{
    (void) state;
    for (int b = 0; b < n_backends; b++) {
        struct gpu_cls_table *t = make_table(backends[b], 2,
                                             GPU_CLS_FIRST_MATCH,
                                             GPU_CLS_BLOOM, 0);
        uint64_t mask[2] = { UINT64_MAX, 0xffff0000ffff0000ULL };
        const unsigned int n = 20000;
        uint64_t *keys = gpu_host_alloc(n * 2 * sizeof *keys);
        uint32_t *res = gpu_host_alloc(n * sizeof *res);
        struct gpu_cls_stats st;

        for (unsigned int i = 0; i < n; i++) {
            keys[2 * i] = i * 0x9e3779b97f4a7c15ULL;
            keys[2 * i + 1] = 0x1234000056780000ULL ^ ((uint64_t) i << 48);
            assert_int_equal(gpu_cls_insert(t, &keys[2 * i], mask, 0, i),
                             GPU_OK);
        }
        gpu_cls_get_stats(t, &st);
        assert_int_equal(st.n_classes, 1);
        assert_true(st.n_grows >= 10);
        print_message("  %s: %u rules in one class: %" PRIu64 " grows, %"
                      PRIu64 " rebuilds, %" PRIu64 " bytes\n",
                      gpu_cls_backend_name(backends[b]), n, st.n_grows,
                      st.n_rebuilds, st.mem_bytes);
        assert_int_equal(gpu_cls_lookup(t, keys, n, 2, res), GPU_OK);
        for (unsigned int i = 0; i < n; i++) {
            assert_int_equal(res[i], i);
        }
        for (unsigned int i = 0; i < n; i++) {
            uint32_t h;

            assert_int_equal(gpu_cls_remove(t, &keys[2 * i], mask, &h),
                             GPU_OK);
            assert_int_equal(h, i);
        }
        gpu_cls_get_stats(t, &st);
        assert_int_equal(st.n_classes, 0);
        assert_int_equal(st.mem_bytes, 0);
        assert_int_equal(gpu_cls_lookup(t, keys, n, 2, res), GPU_OK);
        for (unsigned int i = 0; i < n; i++) {
            assert_int_equal(res[i], GPU_CLS_NO_MATCH);
        }
        gpu_host_free(keys);
        gpu_host_free(res);
        gpu_cls_destroy(t);
    }
}

/* Batches of 1 to 64K+ keys, several in flight at once on different
 * streams; and gpu_cls_lookup() of more keys than one internal batch. */
static void
test_batches(void **state)
{
    static const size_t sizes[] = { 1, 2, 31, 1000, 4097, 65536 };
    (void) state;

    for (int b = 0; b < n_backends; b++) {
        struct case_desc cd = {
            .backend = backends[b], .n_words = 3,
            .sem = GPU_CLS_HIGHEST_PRIORITY, .alg = GPU_CLS_BLOOM,
            .n_masks = 20, .n_rules = 2000, .overlap = false,
        };
        struct gpu_cls_table *t = make_table(cd.backend, 3, cd.sem, cd.alg,
                                             0);
        enum { N_INFLIGHT = 3 };
        struct gpu_cls_batch *batches[N_INFLIGHT];
        struct gpu_stream *streams[N_INFLIGHT];
        uint64_t *keys[N_INFLIGHT];
        uint32_t *res[N_INFLIGHT];
        uint64_t value[3];
        struct ref ref;
        struct gen g;

        cd.seed = case_seed(300 + b, 0, 0, 0);
        ref_init(&ref, 3, true);
        gen_init(&g, cd.seed, 3, cd.n_masks, false);
        for (unsigned int i = 0; i < cd.n_rules; i++) {
            const uint64_t *mask;
            uint32_t prio = rng_below(&g.rng, 100);

            gen_value(&g, value, &mask);
            assert_int_equal(gpu_cls_insert(t, value, mask, prio, ref.n),
                             GPU_OK);
            ref_add(&ref, value, mask, prio);
        }
        for (int i = 0; i < N_INFLIGHT; i++) {
            assert_int_equal(gpu_cls_batch_create(t, 65536, &batches[i]),
                             GPU_OK);
            assert_int_equal(gpu_stream_create(&streams[i]), GPU_OK);
            keys[i] = gpu_host_alloc(65536 * 3 * sizeof(uint64_t));
            res[i] = gpu_host_alloc(65536 * sizeof(uint32_t));
        }
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            size_t n = sizes[s];

            for (int i = 0; i < N_INFLIGHT; i++) {
                for (size_t k = 0; k < n; k++) {
                    gen_key(&g, &ref, keys[i] + 3 * k);
                    res[i][k] = 0xa5a5a5a5;
                }
                assert_int_equal(gpu_cls_submit(batches[i], streams[i],
                                                keys[i], n, 3, res[i]),
                                 GPU_OK);
            }
            for (int i = 0; i < N_INFLIGHT; i++) {
                assert_int_equal(gpu_cls_wait(batches[i]), GPU_OK);
                for (size_t k = 0; k < n; k++) {
                    const char *why = ref_check(&ref, keys[i] + 3 * k,
                                                res[i][k]);
                    if (why) {
                        char desc[256];
                        describe(&cd, desc, sizeof desc);
                        fail_msg("%s: batch of %zu, key %zu: %s", desc, n,
                                 k, why);
                    }
                }
            }
        }
        /* More keys than one submission takes. */
        assert_int_equal(gpu_cls_submit(batches[0], NULL, keys[0], 65537, 3,
                                        res[0]), GPU_ERR_INVALID);

        /* gpu_cls_lookup() splits 150,000 keys. */
        size_t big = 150000;
        uint64_t *bk = malloc(big * 3 * sizeof *bk);
        uint32_t *br = malloc(big * sizeof *br);
        for (size_t k = 0; k < big; k++) {
            gen_key(&g, &ref, bk + 3 * k);
        }
        assert_int_equal(gpu_cls_lookup(t, bk, big, 3, br), GPU_OK);
        for (size_t k = 0; k < big; k++) {
            assert_null(ref_check(&ref, bk + 3 * k, br[k]));
        }
        free(bk);
        free(br);

        for (int i = 0; i < N_INFLIGHT; i++) {
            gpu_cls_batch_destroy(batches[i]);
            gpu_stream_destroy(streams[i]);
            gpu_host_free(keys[i]);
            gpu_host_free(res[i]);
        }
        gpu_cls_destroy(t);
        gen_destroy(&g);
        ref_destroy(&ref);
    }
}

/* ---- Concurrency: lookups on two threads while a third inserts and
 * removes.  Rules never removed must always be found; churned ones may be
 * found or not, but nothing else may be returned. ---- */

struct conc {
    struct gpu_cls_table *t;
    unsigned int n_words;
    uint64_t *stable_keys;      /* Key i matches stable rule i only. */
    unsigned int n_stable;
    uint32_t churn_base;        /* Handles >= this are churned rules. */
    bool stop;                  /* Accessed with __atomic builtins. */
    const char *error;          /* Likewise. */
    uint64_t lookups;
};

static void *
conc_reader(void *arg)
{
    struct conc *c = arg;
    struct gpu_cls_batch *b;
    uint32_t *res = gpu_host_alloc(c->n_stable * sizeof *res);
    uint64_t *keys = gpu_host_alloc(c->n_stable * c->n_words
                                    * sizeof *keys);

    memcpy(keys, c->stable_keys, c->n_stable * c->n_words * sizeof *keys);
    if (gpu_cls_batch_create(c->t, c->n_stable, &b)) {
        __atomic_store_n(&c->error, "batch_create failed", __ATOMIC_RELEASE);
        return NULL;
    }
    while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)
           && !__atomic_load_n(&c->error, __ATOMIC_ACQUIRE)) {
        if (gpu_cls_submit(b, NULL, keys, c->n_stable, c->n_words, res)
            || gpu_cls_wait(b)) {
            __atomic_store_n(&c->error, "lookup failed", __ATOMIC_RELEASE);
            break;
        }
        for (unsigned int i = 0; i < c->n_stable; i++) {
            if (res[i] != i) {
                __atomic_store_n(&c->error,
                                 "stable rule not found during updates",
                                 __ATOMIC_RELEASE);
                break;
            }
        }
        __atomic_fetch_add(&c->lookups, c->n_stable, __ATOMIC_RELAXED);
    }
    gpu_cls_batch_destroy(b);
    gpu_host_free(res);
    gpu_host_free(keys);
    return NULL;
}

static void
test_concurrent_updates(void **state)
{
    (void) state;
    for (int b = 0; b < n_backends; b++) {
        for (int a = 1; a < N_ALGS; a++) {
            struct conc c = { .n_words = 4, .n_stable = 2000 };
            struct rng rng = { case_seed(400 + b, a, 0, 0) };
            uint64_t masks[16][4];
            pthread_t th[2];

            c.t = make_table(backends[b], 4, GPU_CLS_FIRST_MATCH,
                             all_algs[a], 0);
            for (int m = 0; m < 16; m++) {
                masks[m][0] = UINT64_MAX;   /* Rule id: rules disjoint. */
                for (int i = 1; i < 4; i++) {
                    masks[m][i] = random_mask_word(&rng);
                }
            }
            c.stable_keys = malloc(c.n_stable * 4 * sizeof(uint64_t));
            for (unsigned int i = 0; i < c.n_stable; i++) {
                uint64_t *k = &c.stable_keys[4 * i];

                k[0] = i;
                for (int w = 1; w < 4; w++) {
                    k[w] = rng_next(&rng);
                }
                assert_int_equal(gpu_cls_insert(c.t, k, masks[i % 16], 0,
                                                i), GPU_OK);
            }
            for (int i = 0; i < 2; i++) {
                pthread_create(&th[i], NULL, conc_reader, &c);
            }
            /* Churn: insert and remove rules with other ids, often enough
             * that classes grow, shrink away and come back. */
            uint64_t v[4];
            unsigned int ops = quick ? 20000 : 60000;
            for (unsigned int op = 0;
                 op < ops && !__atomic_load_n(&c.error, __ATOMIC_ACQUIRE);
                 op++) {
                unsigned int id = 1000000 + (op % 5000);
                const uint64_t *m = masks[(op / 5000 + id) % 16];

                v[0] = id;
                v[1] = v[2] = v[3] = id * 0x9e3779b97f4a7c15ULL;
                if ((op / 5000) % 2 == 0) {
                    assert_int_equal(gpu_cls_insert(c.t, v, m, 0, id),
                                     GPU_OK);
                } else {
                    assert_int_equal(gpu_cls_remove(c.t, v,
                                                     masks[(op / 5000 - 1
                                                            + id) % 16],
                                                     NULL), GPU_OK);
                }
            }
            __atomic_store_n(&c.stop, true, __ATOMIC_RELEASE);
            for (int i = 0; i < 2; i++) {
                pthread_join(th[i], NULL);
            }
            if (c.error) {
                fail_msg("backend %s alg %s seed 0x%016" PRIx64 ": %s",
                         gpu_cls_backend_name(backends[b]),
                         gpu_cls_algorithm_name(all_algs[a]), rng.s,
                         c.error);
            }
            print_message("  %s/%s: %" PRIu64 " lookups during %u updates\n",
                          gpu_cls_backend_name(backends[b]),
                          gpu_cls_algorithm_name(all_algs[a]), c.lookups,
                          ops);
            free(c.stable_keys);
            gpu_cls_destroy(c.t);
        }
    }
}

/* ---- Bad inputs. ---- */

static void
test_config_invalid(void **state)
{
    struct gpu_cls_config cfg;
    struct gpu_cls_table *t;
    (void) state;

    gpu_cls_config_init(&cfg, 0);
    assert_int_equal(gpu_cls_create(&cfg, &t), GPU_ERR_INVALID);
    assert_null(t);
    gpu_cls_config_init(&cfg, GPU_CLS_MAX_WORDS + 1);
    assert_int_equal(gpu_cls_create(&cfg, &t), GPU_ERR_INVALID);
    gpu_cls_config_init(&cfg, 2);
    cfg.algorithm = 17;
    assert_int_equal(gpu_cls_create(&cfg, &t), GPU_ERR_INVALID);
    gpu_cls_config_init(&cfg, 2);
    cfg.backend = GPU_CLS_BACKEND_CUDA;
    if (!gpu_cls_cuda_available()) {
        assert_int_equal(gpu_cls_create(&cfg, &t), GPU_ERR_NO_DEVICE);
    }
    assert_int_equal(gpu_cls_create(NULL, &t), GPU_ERR_INVALID);

    enum gpu_cls_algorithm alg;
    assert_int_equal(gpu_cls_algorithm_parse("bloom", &alg), GPU_OK);
    assert_int_equal(alg, GPU_CLS_BLOOM);
    assert_int_equal(gpu_cls_algorithm_parse("Bloom", &alg),
                     GPU_ERR_INVALID);
    assert_int_equal(gpu_cls_algorithm_parse(NULL, &alg), GPU_ERR_INVALID);
}

static void
test_bad_inputs(void **state)
{
    (void) state;
    for (int b = 0; b < n_backends; b++) {
        struct gpu_cls_table *t = make_table(backends[b], 2,
                                             GPU_CLS_HIGHEST_PRIORITY,
                                             GPU_CLS_AUTO, 0);
        uint64_t v[3] = { 0x1111, 0x2222, 0x3333 };
        uint64_t m[2] = { 0xffff, 0xff00 };
        uint64_t v2[2] = { 0x1111 | 0xabcd0000ULL, 0x22ff };
        uint64_t keys[6] = { 0x1111, 0x2200, 0, 0, 0, 0 };
        uint32_t res[3] = { 7, 7, 7 };
        struct gpu_cls_batch *batch;
        uint32_t h = 0;

        assert_int_equal(gpu_cls_insert(t, v, m, 5, 42), GPU_OK);
        /* Same masked value and mask, other bits, priority and handle. */
        assert_int_equal(gpu_cls_insert(t, v2, m, 9, 43), GPU_ERR_EXISTS);
        assert_int_equal(gpu_cls_insert(t, v, m, 5, GPU_CLS_NO_MATCH),
                         GPU_ERR_INVALID);
        assert_int_equal(gpu_cls_insert(t, NULL, m, 5, 1), GPU_ERR_INVALID);
        assert_int_equal(gpu_cls_insert(t, v, NULL, 5, 1), GPU_ERR_INVALID);

        /* Absent: unknown mask, and known mask with another value. */
        uint64_t m3[2] = { 0xffff, 0 };
        assert_int_equal(gpu_cls_remove(t, v, m3, &h), GPU_ERR_NOT_FOUND);
        uint64_t v3[2] = { 0x1112, 0x2222 };
        assert_int_equal(gpu_cls_remove(t, v3, m, &h), GPU_ERR_NOT_FOUND);
        assert_int_equal(gpu_cls_remove(t, NULL, m, &h), GPU_ERR_INVALID);

        /* Zero-length batches are no-ops. */
        assert_int_equal(gpu_cls_lookup(t, keys, 0, 2, res), GPU_OK);
        assert_int_equal(gpu_cls_lookup(t, NULL, 0, 2, NULL), GPU_OK);
        assert_int_equal(res[0], 7);
        assert_int_equal(gpu_cls_batch_create(t, 3, &batch), GPU_OK);
        assert_int_equal(gpu_cls_submit(batch, NULL, keys, 0, 2, res),
                         GPU_OK);
        assert_int_equal(gpu_cls_poll(batch), GPU_OK);
        assert_int_equal(gpu_cls_wait(batch), GPU_OK);
        assert_int_equal(res[0], 7);

        /* Keys wider or narrower than the table's. */
        assert_int_equal(gpu_cls_lookup(t, keys, 2, 3, res),
                         GPU_ERR_INVALID);
        assert_int_equal(gpu_cls_lookup(t, keys, 2, 1, res),
                         GPU_ERR_INVALID);
        assert_int_equal(gpu_cls_submit(batch, NULL, keys, 2, 3, res),
                         GPU_ERR_INVALID);
        /* Too many keys for the batch, null buffers. */
        assert_int_equal(gpu_cls_submit(batch, NULL, keys, 4, 2, res),
                         GPU_ERR_INVALID);
        assert_int_equal(gpu_cls_submit(batch, NULL, NULL, 1, 2, res),
                         GPU_ERR_INVALID);
        assert_int_equal(gpu_cls_submit(batch, NULL, keys, 1, 2, NULL),
                         GPU_ERR_INVALID);
        gpu_cls_batch_destroy(batch);
        assert_int_equal(gpu_cls_batch_create(t, 0, &batch), GPU_ERR_INVALID);
        assert_null(batch);

        assert_int_equal(gpu_cls_batch_create(t, 3, &batch), GPU_OK);
        assert_int_equal(gpu_cls_submit(batch, NULL, keys, 3, 2, res),
                         GPU_OK);
        assert_int_equal(gpu_cls_wait(batch), GPU_OK);
        assert_int_equal(res[0], 42);
        assert_int_equal(res[1], GPU_CLS_NO_MATCH);
        assert_int_equal(res[2], GPU_CLS_NO_MATCH);
        gpu_cls_batch_destroy(batch);

        assert_int_equal(gpu_cls_remove(t, v2, m, &h), GPU_OK);
        assert_int_equal(h, 42);
        assert_int_equal(gpu_cls_remove(t, v, m, &h), GPU_ERR_NOT_FOUND);
        assert_int_equal(gpu_cls_set_algorithm(t, 99), GPU_ERR_INVALID);
        gpu_cls_destroy(t);
    }
}

/* Out of memory: with a memory limit, inserts fail cleanly once the table
 * would exceed it, the table stays correct, and freeing room lets inserts
 * succeed again. */
static void
test_out_of_memory(void **state)
{
    (void) state;
    for (int b = 0; b < n_backends; b++) {
        const size_t limit = 256 * 1024;
        struct gpu_cls_table *t = make_table(backends[b], 4,
                                             GPU_CLS_FIRST_MATCH,
                                             GPU_CLS_BLOOM, limit);
        int want = backends[b] == GPU_CLS_BACKEND_CUDA
                   ? GPU_ERR_DEVICE_NOMEM : GPU_ERR_NOMEM;
        struct case_desc cd = {
            .backend = backends[b], .n_words = 4,
            .sem = GPU_CLS_FIRST_MATCH, .alg = GPU_CLS_BLOOM,
            .n_masks = 50, .n_rules = 0, .overlap = false,
        };
        uint64_t value[4];
        struct gpu_cls_stats st;
        struct ref ref;
        struct gen g;
        int err = GPU_OK, fails = 0;

        cd.seed = case_seed(500 + b, 0, 0, 0);
        ref_init(&ref, 4, false);
        gen_init(&g, cd.seed, 4, cd.n_masks, false);
        for (int i = 0; i < 100000 && fails < 50; i++) {
            const uint64_t *mask;

            gen_value(&g, value, &mask);
            err = gpu_cls_insert(t, value, mask, 0, ref.n);
            if (err == GPU_OK) {
                ref_add(&ref, value, mask, 0);
            } else {
                assert_int_equal(err, want);
                fails++;
            }
            gpu_cls_get_stats(t, &st);
            assert_true(st.mem_bytes <= limit);
        }
        assert_int_equal(fails, 50);
        print_message("  %s: %zu rules fit in %zu bytes\n",
                      gpu_cls_backend_name(backends[b]), ref.n_live, limit);
        check_lookups(&cd, t, &g, &ref, 3000, 0);
        check_lookups(&cd, t, &g, &ref, 3000, 1);

        /* Remove half; inserts work again. */
        while (ref.n_live > ref.n / 2) {
            struct ref_rule *r = &ref.rules[ref.live[0]];
            assert_int_equal(gpu_cls_remove(t, r->value, r->mask, NULL),
                             GPU_OK);
            ref_kill(&ref, 0);
        }
        const uint64_t *mask;
        gen_value(&g, value, &mask);
        assert_int_equal(gpu_cls_insert(t, value, mask, 0, ref.n), GPU_OK);
        ref_add(&ref, value, mask, 0);
        check_lookups(&cd, t, &g, &ref, 3000, 0);

        gpu_cls_destroy(t);
        gen_destroy(&g);
        ref_destroy(&ref);
    }
}

/* ---- ClassBench. ---- */

static void
classbench_one(enum gpu_cls_backend be, const char *name)
{
    char fpath[1024], tpath[1024];
    struct cb_filter *filters;
    struct cb_header *trace;
    struct cb_rule *rules;
    size_t n_filters, n_trace, n_rules;

    snprintf(fpath, sizeof fpath, "%s/classbench/%s_10000", cb_data_dir(),
             name);
    snprintf(tpath, sizeof tpath, "%s/classbench/%s_10000_trace.gz",
             cb_data_dir(), name);
    /* The sets are in the repository: a missing one fails, by name. */
    test_data_require(fpath);
    test_data_require(tpath);
    if (cb_load_filters(fpath, &filters, &n_filters)) {
        fail_msg("cannot read ClassBench filters %s", fpath);
    }
    if (cb_load_trace(tpath, &trace, &n_trace)) {
        fail_msg("cannot read ClassBench trace %s", tpath);
    }
    assert_int_equal(cb_expand(filters, n_filters, &rules, &n_rules), 0);
    if (quick && n_trace > 10000) {
        n_trace = 10000;
    }

    uint64_t *keys = gpu_host_alloc(n_trace * CB_KEY_WORDS * sizeof *keys);
    uint32_t *res = gpu_host_alloc(n_trace * sizeof *res);
    size_t *expect = malloc(n_trace * sizeof *expect);
    for (size_t i = 0; i < n_trace; i++) {
        cb_key(&trace[i], keys + i * CB_KEY_WORDS);
        expect[i] = cb_first_match(filters, n_filters, &trace[i]);
        /* The trace's own filter must match and can't beat the first. */
        assert_true(trace[i].ref < n_filters);
        assert_true(cb_match(&filters[trace[i].ref], &trace[i]));
        assert_true(expect[i] <= trace[i].ref);
    }

    for (int a = 0; a < N_ALGS; a++) {
        struct gpu_cls_table *t = make_table(be, CB_KEY_WORDS,
                                             GPU_CLS_HIGHEST_PRIORITY,
                                             all_algs[a], 0);
        size_t dups = 0, better = 0;
        struct gpu_cls_stats st;

        for (size_t i = 0; i < n_rules; i++) {
            /* Earlier filters have higher priority.  An expanded rule
             * identical to an earlier one is shadowed by it: skip. */
            int err = gpu_cls_insert(t, rules[i].value, rules[i].mask,
                                     n_filters - rules[i].filter,
                                     rules[i].filter);
            if (err == GPU_ERR_EXISTS) {
                dups++;
            } else {
                assert_int_equal(err, GPU_OK);
            }
        }
        assert_int_equal(gpu_cls_lookup(t, keys, n_trace, CB_KEY_WORDS,
                                         res), GPU_OK);
        for (size_t i = 0; i < n_trace; i++) {
            if (res[i] != expect[i]) {
                fail_msg("ClassBench %s (%s, %s): header %zu: got filter "
                         "%" PRIu32 ", first matching filter %zu, trace "
                         "says %" PRIu32, name, gpu_cls_backend_name(be),
                         gpu_cls_algorithm_name(all_algs[a]), i, res[i],
                         expect[i], trace[i].ref);
            }
            better += res[i] < trace[i].ref;
        }
        gpu_cls_get_stats(t, &st);
        print_message("  %s %s/%s: %zu filters -> %zu rules (%zu shadowed) "
                      "in %" PRIu64 " classes; %zu headers, %zu matched a "
                      "higher-priority filter than the trace's\n",
                      name, gpu_cls_backend_name(be),
                      gpu_cls_algorithm_name(all_algs[a]), n_filters,
                      n_rules, dups, st.n_classes, n_trace, better);
        gpu_cls_destroy(t);
    }
    gpu_host_free(keys);
    gpu_host_free(res);
    free(expect);
    free(filters);
    free(trace);
    free(rules);
}

static void
test_classbench_acl1(void **state)
{
    (void) state;
    for (int b = 0; b < n_backends; b++) {
        classbench_one(backends[b], "acl1");
    }
}

static void
test_classbench_fw1(void **state)
{
    (void) state;
    for (int b = 0; b < n_backends; b++) {
        classbench_one(backends[b], "fw1");
    }
}

static void
test_classbench_ipc1(void **state)
{
    (void) state;
    for (int b = 0; b < n_backends; b++) {
        classbench_one(backends[b], "ipc1");
    }
}

int
main(void)
{
    const char *seed_env = getenv("GPU_TEST_SEED");
    const char *be_env = getenv("GPU_CLS_BACKEND");
    bool cuda = gpu_cls_cuda_available();

    master_seed = seed_env && *seed_env ? strtoull(seed_env, NULL, 0)
                                        : (uint64_t) time(NULL);
    quick = getenv("GPU_TEST_QUICK") != NULL;
    printf("test-classifier: GPU_TEST_SEED=0x%016" PRIx64 "\n",
           master_seed);

    if (!be_env || !*be_env || !strcmp(be_env, "all")) {
        backends[n_backends++] = GPU_CLS_BACKEND_CPU;
        if (cuda) {
            backends[n_backends++] = GPU_CLS_BACKEND_CUDA;
        }
    } else if (!strcmp(be_env, "cpu")) {
        backends[n_backends++] = GPU_CLS_BACKEND_CPU;
    } else if (!strcmp(be_env, "cuda")) {
        if (!cuda) {
            fprintf(stderr, "test-classifier: GPU_CLS_BACKEND=cuda but no "
                    "usable CUDA device (or no CUDA build)\n");
            return 1;
        }
        backends[n_backends++] = GPU_CLS_BACKEND_CUDA;
    } else {
        fprintf(stderr, "test-classifier: GPU_CLS_BACKEND must be cpu, cuda "
                "or all, not \"%s\"\n", be_env);
        return 1;
    }
    printf("test-classifier: backends:");
    for (int i = 0; i < n_backends; i++) {
        printf(" %s", gpu_cls_backend_name(backends[i]));
    }
    printf("%s\n", cuda ? "" : " (no CUDA device here)");

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_invalid),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_random_small),
        cmocka_unit_test(test_random_wide),
        cmocka_unit_test(test_random_large),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_random_many_classes),
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_concurrent_updates),
        cmocka_unit_test(test_classbench_acl1),
        cmocka_unit_test(test_classbench_fw1),
        cmocka_unit_test(test_classbench_ipc1),
    };
    const char *filter = getenv("GPU_TEST_FILTER");
    if (filter && *filter) {
        cmocka_set_test_filter(filter);
    }
    int rc = test_run_group("test-classifier", tests);
    if (rc) {
        printf("test-classifier: FAILED; rerun with GPU_TEST_SEED=0x%016"
               PRIx64 "\n", master_seed);
    }
    return rc;
}
