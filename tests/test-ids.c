/*
 * Tests of gpu_services/ids/: the rule parser on the Snort community rules
 * and on bad lines, content semantics on hand-made cases, the automaton
 * and the full matcher against a brute-force reference on random rules
 * and payloads with planted patterns, and Hyperscan as an independent
 * oracle for the literal matches.
 *
 * Environment:
 *   GPU_TEST_SEED       master seed (decimal or 0x hex); else time-based.
 *                       Always printed; failing cases print their seed.
 *   GPU_IDS_BACKEND     cpu | cuda | all (default: every backend usable
 *                       here).  "cuda" without a device fails.
 *   OVSGPU_DATA         folder holding snort-community/community.rules
 *                       (default: the build tree's data/, unpacked from
 *                       the repository's); a missing file fails the
 *                       community-rule cases, naming it.
 *   GPU_TEST_FILTER     run only tests whose names match this pattern.
 */
#include <config.h>

#include <ctype.h>
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

#include "tests/test-common.h"

#ifdef HAVE_HYPERSCAN
#include <hs.h>
#endif

#include "gpu_services/ids/gpu-ids.h"

static uint64_t master_seed;
static enum gpu_ids_backend backends[2];
static int n_backends;

/* ---- Random numbers (the generator is in tests/test-common.h). ---- */

static uint64_t
case_seed(uint64_t a, uint64_t b)
{
    struct rng r = rng_for_case(master_seed, a, b);

    return rng_next(&r);
}

static const char *
community_path(void)
{
    return test_data_path("snort-community/community.rules");
}

static struct gpu_ids_ruleset *
load_community(bool commented, bool partial)
{
    struct gpu_ids_load_options o = { .partial = partial,
                                      .commented = commented };
    struct gpu_ids_ruleset *rs = NULL;
    char err[512];

    /* The rules are in the repository: a missing file fails, by name. */
    test_data_require(community_path());
    int error = gpu_ids_ruleset_load_file(community_path(), &o, &rs, err,
                                          sizeof err);
    if (error) {
        fail_msg("loading %s: %s", community_path(), err);
    }
    return rs;
}

/* ---- Brute-force reference: contents as the API reports them. ---- */

struct ref_content {
    uint8_t bytes[512];
    uint32_t len;
    bool nocase, relative, bounded;
    int32_t a, b;               /* offset/depth or distance/within. */
};

static bool
ref_at(const struct ref_content *c, const uint8_t *p, size_t len, long s)
{
    if (s < 0 || (size_t) s + c->len > len) {
        return false;
    }
    for (uint32_t i = 0; i < c->len; i++) {
        uint8_t x = p[s + i], y = c->bytes[i];

        if (c->nocase ? tolower(x) != tolower(y) : x != y) {
            return false;
        }
    }
    return true;
}

/* Does some choice of positions for contents i.. satisfy them all, given
 * the previous match ended at 'end'?  Exhaustive, memoized on (i, end):
 * nothing clever, so it can judge the matcher's pruned backtracking. */
static bool
ref_rec(const struct ref_content *cs, size_t n, size_t i, long end,
        const uint8_t *p, size_t len, uint8_t *memo)
{
    if (i == n) {
        return true;
    }
    if (memo[i * (len + 1) + end]) {
        return false;
    }
    const struct ref_content *c = &cs[i];
    for (long s = 0; s + (long) c->len <= (long) len; s++) {
        long lo, hi;

        if (c->relative) {
            lo = end + c->a;
            hi = c->bounded ? end + c->a + c->b : (long) len;
        } else {
            lo = c->a;
            hi = c->bounded ? c->a + c->b : (long) len;
        }
        if (s < lo || s + (long) c->len > hi || !ref_at(c, p, len, s)) {
            continue;
        }
        if (ref_rec(cs, n, i + 1, s + c->len, p, len, memo)) {
            return true;
        }
    }
    memo[i * (len + 1) + end] = 1;
    return false;
}

static bool
ref_contents(const struct ref_content *cs, size_t n, const uint8_t *p,
             size_t len)
{
    uint8_t *memo = calloc((n + 1) * (len + 1), 1);
    bool r = ref_rec(cs, n, 0, 0, p, len, memo);

    free(memo);
    return r;
}

static void
ref_from_ruleset(const struct gpu_ids_ruleset *rs, uint32_t idx,
                 struct ref_content *cs, size_t *n)
{
    struct gpu_ids_rule_info ri;

    assert_true(gpu_ids_rule_get(rs, idx, &ri));
    *n = ri.n_contents;
    for (uint32_t i = 0; i < ri.n_contents; i++) {
        struct gpu_ids_content_info ci;

        assert_true(gpu_ids_rule_content(rs, idx, i, &ci));
        assert_true(ci.len <= sizeof cs[i].bytes);
        memcpy(cs[i].bytes, ci.bytes, ci.len);
        cs[i].len = ci.len;
        cs[i].nocase = ci.nocase;
        cs[i].relative = ci.relative;
        if (ci.relative) {
            cs[i].a = ci.distance;
            cs[i].bounded = ci.has_within;
            cs[i].b = ci.within;
        } else {
            cs[i].a = ci.offset;
            cs[i].bounded = ci.has_depth;
            cs[i].b = ci.depth;
        }
    }
}

/* ---- Packed batches. ---- */

struct pkts {
    uint8_t *data;
    uint32_t *offsets;
    struct gpu_ids_pkt_hdr *hdrs;
    size_t n, cap_bytes;
};

static void
pkts_init(struct pkts *p, size_t n, size_t max_bytes)
{
    p->data = gpu_host_alloc(max_bytes + 1);
    p->offsets = gpu_host_alloc((n + 1) * sizeof *p->offsets);
    p->hdrs = gpu_host_alloc((n + 1) * sizeof *p->hdrs);
    assert_non_null(p->data);
    assert_non_null(p->offsets);
    assert_non_null(p->hdrs);
    memset(p->hdrs, 0, (n + 1) * sizeof *p->hdrs);
    p->n = 0;
    p->cap_bytes = max_bytes;
    p->offsets[0] = 0;
}

static void
pkts_free(struct pkts *p)
{
    gpu_host_free(p->data);
    gpu_host_free(p->offsets);
    gpu_host_free(p->hdrs);
}

/* Appends a packet of 'len' bytes (returned for filling). */
static uint8_t *
pkts_add(struct pkts *p, size_t len, uint8_t proto, uint16_t sport,
         uint16_t dport)
{
    uint8_t *d = p->data + p->offsets[p->n];

    assert_true(p->offsets[p->n] + len <= p->cap_bytes);
    p->hdrs[p->n].proto = proto;
    p->hdrs[p->n].sport = sport;
    p->hdrs[p->n].dport = dport;
    p->offsets[p->n + 1] = p->offsets[p->n] + len;
    p->n++;
    return d;
}

/* True if some packet of 'p' is given as a frame. */
static bool
pkts_have_frames(const struct pkts *p)
{
    for (size_t i = 0; i < p->n; i++) {
        if (p->hdrs[i].flags & GPU_IDS_HDR_FRAME) {
            return true;
        }
    }
    return false;
}

static void
check_verdicts(const struct pkts *p, const struct gpu_ids_verdict *v,
               const struct gpu_ids_verdict *expect, uint64_t seed,
               enum gpu_ids_backend backend, int remap, const char *how)
{
    for (size_t i = 0; i < p->n; i++) {
        if (v[i].sid != expect[i].sid || v[i].rule != expect[i].rule
            || v[i].n_matches != expect[i].n_matches
            || v[i].flags != expect[i].flags
            || v[i].payload_len != expect[i].payload_len) {
            fail_msg("seed 0x%016" PRIx64 " backend %s remap %d (%s) "
                     "packet %zu (len %u%s): got sid %u rule %u n %u "
                     "flags %#x payload %u, expected sid %u rule %u n %u "
                     "flags %#x payload %u", seed,
                     gpu_ids_backend_name(backend), remap, how, i,
                     p->offsets[i + 1] - p->offsets[i],
                     p->hdrs[i].flags & GPU_IDS_HDR_FRAME ? ", a frame" : "",
                     v[i].sid, v[i].rule, v[i].n_matches, v[i].flags,
                     v[i].payload_len, expect[i].sid, expect[i].rule,
                     expect[i].n_matches, expect[i].flags,
                     expect[i].payload_len);
        }
    }
}

/* gpu_ids_submit_in_place() on 'batch' (whose own buffers 'own' hold
 * 'p'): a seeded subset of the payloads (then all of them) read where
 * they are, each in its own 2 kB slot of "packet memory" registered with
 * the device on CUDA, at a random offset, the batch's data garbage where
 * they would be; the verdicts must be 'expect'.  On CUDA the device
 * gathers them without the CPU's help, and a payload outside registered
 * memory makes the CPU match the batch, still right. */
static void
check_in_place(struct gpu_ids_matcher *m, struct gpu_ids_batch *batch,
               const struct gpu_ids_batch_buffers *own, const struct pkts *p,
               const struct gpu_ids_verdict *expect, uint64_t seed,
               enum gpu_ids_backend backend, int remap)
{
    enum { SLOT = 2048 };
    /* One region for every case, grown (and registered again) by
     * doubling, as a switch registers its packet memory once: the
     * runtime keeps a bounded number of ranges. */
    static uint8_t *mem, *slots;
    static size_t slots_len;
    size_t len = p->n * SLOT + 4096;
    const uint8_t **srcs = calloc(p->n, sizeof *srcs);
    bool cuda = backend == GPU_IDS_BACKEND_CUDA;
    struct rng r = rng_for_case(seed, 0x1d5, p->n);

    assert_non_null(srcs);
    if (len > slots_len) {
        if (slots && gpu_device_count(NULL) > 0) {
            assert_int_equal(gpu_host_unregister(slots), GPU_OK);
        }
        free(mem);
        slots_len = 1 << 20;
        while (slots_len < len) {
            slots_len *= 2;
        }
        mem = malloc(slots_len + 4096);
        assert_non_null(mem);
        slots = (uint8_t *) (((uintptr_t) mem + 4095) & ~4095ul);
        if (gpu_device_count(NULL) > 0) {
            assert_int_equal(gpu_host_register(slots, slots_len, 0),
                             GPU_OK);
        }
    }
    for (int round = 0; round < 3; round++) {
        struct gpu_ids_matcher_stats before, after;
        size_t n_in_place = 0;
        char how[64];

        for (size_t i = 0; i < p->n; i++) {
            size_t plen = p->offsets[i + 1] - p->offsets[i];
            uint8_t *slot = slots + i * SLOT;

            /* Round 0: one in three; 1 and 2: all (2: one of them not
             * registered on CUDA). */
            srcs[i] = NULL;
            memcpy(own->data + own->offsets[i], p->data + p->offsets[i],
                   plen);
            if (round == 0 && rng_below(&r, 3)) {
                continue;
            }
            uint8_t *at = slot + rng_below(&r, SLOT - plen + 1);
            memcpy(at, p->data + p->offsets[i], plen);
            memset(own->data + own->offsets[i], 0x5a, plen);
            srcs[i] = at;
            n_in_place++;
        }
        uint8_t *outside = NULL;
        size_t outside_len = 0;
        if (round == 2 && p->n) {
            /* The last packet's payload on the heap. */
            size_t plen = p->offsets[p->n] - p->offsets[p->n - 1];

            outside_len = plen;

            outside = malloc(plen + 1);
            memcpy(outside, p->data + p->offsets[p->n - 1], plen);
            srcs[p->n - 1] = outside;
        }
        memset(own->verdicts, 0xa5, p->n * sizeof *own->verdicts);
        gpu_ids_matcher_get_stats(m, &before);
        assert_int_equal(gpu_ids_submit_in_place(batch, NULL, own->data,
                                                 own->offsets, srcs,
                                                 own->hdrs, p->n,
                                                 own->verdicts), GPU_OK);
        assert_int_equal(gpu_ids_wait(batch), GPU_OK);
        gpu_ids_matcher_get_stats(m, &after);
        snprintf(how, sizeof how, "in place, %zu of %zu payloads%s",
                 n_in_place, p->n, round == 2 ? ", one unregistered" : "");
        check_verdicts(p, own->verdicts, expect, seed, backend, remap, how);
        if (cuda && outside_len && pkts_have_frames(p) && remap == 2) {
            /* Kernel by kernel, the host parsed the frames (reading
             * the heap too): nothing for the device to refuse. */
            assert_int_equal(after.n_fallbacks, before.n_fallbacks);
        } else if (cuda && outside_len) {
            /* The device was not asked to read the heap (an empty
             * payload there is nothing to read). */
            assert_true(after.n_fallbacks > before.n_fallbacks);
        } else if (cuda && after.n_fallbacks != before.n_fallbacks) {
            /* The same payloads copied did not overflow the hit lists
             * just before: the device must have gathered them. */
            fail_msg("%s: matched on the CPU, not gathered", how);
        }
        free(outside);
    }
    free(srcs);
}

/* Runs 'p' through a batch of 'm' four times, with each mix of the
 * batch's own buffers (gpu_ids_batch_buffers()) and the caller's for the
 * input and the verdicts: on CUDA each mix takes its own copies; then
 * with payloads read in place (check_in_place()).  'remap' 2 is
 * remapping with 'kernel_by_kernel' set, 3 with 'device_launch'. */
static void
check_own_buffers(struct gpu_ids_matcher *m, const struct pkts *p,
                  const struct gpu_ids_verdict *expect, uint64_t seed,
                  enum gpu_ids_backend backend, int remap)
{
    size_t n_bytes = p->offsets[p->n] - p->offsets[0];
    struct gpu_ids_verdict *v = gpu_host_alloc((p->n + 1) * sizeof *v);
    struct gpu_ids_batch_buffers own;
    struct gpu_ids_batch *batch;

    if (!p->n) {
        gpu_host_free(v);
        return;
    }
    assert_int_equal(gpu_ids_batch_create(m, p->n, n_bytes, &batch),
                     GPU_OK);
    assert_int_equal(gpu_ids_batch_buffers(batch, &own), GPU_OK);
    memcpy(own.data, p->data + p->offsets[0], n_bytes);
    for (size_t i = 0; i <= p->n; i++) {
        own.offsets[i] = p->offsets[i] - p->offsets[0];
    }
    memcpy(own.hdrs, p->hdrs, p->n * sizeof *own.hdrs);
    /* Mix 4 is mix 0 again: a batch's first submission clears its
     * (packet, pattern) set on the stream first, and is launched there. */
    for (int mix = 0; mix < 5; mix++) {
        bool own_in = !(mix & 2), own_out = !(mix & 1);
        struct gpu_ids_verdict *out = own_out ? own.verdicts : v;
        struct gpu_ids_matcher_stats before, after;
        char how[64];

        memset(out, 0xa5, p->n * sizeof *out);
        gpu_ids_matcher_get_stats(m, &before);
        assert_int_equal(gpu_ids_submit(batch, NULL,
                                        own_in ? own.data : p->data,
                                        own_in ? own.offsets : p->offsets,
                                        own_in ? own.hdrs : p->hdrs, p->n,
                                        out), GPU_OK);
        assert_int_equal(gpu_ids_wait(batch), GPU_OK);
        gpu_ids_matcher_get_stats(m, &after);
        snprintf(how, sizeof how, "%s input, %s verdicts",
                 own_in ? "own" : "caller's", own_out ? "own" : "caller's");
        check_verdicts(p, out, expect, seed, backend, remap, how);
        if (backend == GPU_IDS_BACKEND_CUDA) {
            /* Own input and verdicts: the batch's graph, which pulls
             * its input itself: one launch, or none where the device
             * launches it (its scheduler rung; one if the scheduler had
             * parked and was launched again).  Else copies in (1 or 3,
             * then a memset for the counters), the scan (and with
             * payload, confirm and rules), verdict_kernel, copies out (1
             * or 2) and the event.  Then the wait's sync.  A clear of
             * the (packet, pattern) set is one more, and the graph then
             * goes on the stream after it: the first submission's, and
             * one whenever the hit lists grow with the hits seen
             * (n_set_clears counts them). */
            uint64_t calls = after.n_runtime_calls - before.n_runtime_calls;
            uint64_t clears = after.n_set_clears - before.n_set_clears;
            uint64_t rung = (after.n_device_launches
                             - before.n_device_launches);
            bool graph = own_in && own_out && remap != 2;
            /* Frames that the graph does not parse, the host does, into
             * buffers of its own: the caller's input's copies. */
            bool own_copy = own_in && !(pkts_have_frames(p) && !graph);
            uint64_t expect_calls = ((graph
                                      ? (rung ? (after.n_scheduler_launches
                                                 - before
                                                   .n_scheduler_launches)
                                         : 1)
                                      : ((own_copy ? 1 : 4)
                                         + (n_bytes ? 4 : 2)
                                         + (own_out ? 1 : 2) + 1))
                                     + clears);

            if (rung && (!graph || clears || remap != 3)) {
                fail_msg("%s: launched by the device (%" PRIu64 " set "
                         "clears, remap %d)", how, clears, remap);
            }
            if (graph && mix == 4 && !clears && remap == 3 && rung != 1) {
                fail_msg("%s: %" PRIu64 " launches by the device, "
                         "expected 1", how, rung);
            }
            uint64_t checks = (after.n_completion_checks
                               - before.n_completion_checks);

            if (calls != expect_calls || checks != 1) {
                fail_msg("%s: %" PRIu64 " runtime calls and %" PRIu64
                         " completion checks, expected %" PRIu64 " and 1",
                         how, calls, checks, expect_calls);
            }
        }
    }
    check_in_place(m, batch, &own, p, expect, seed, backend, remap);
    gpu_ids_batch_destroy(batch);
    gpu_host_free(v);
}

/* Runs the batch on every backend and checks it against 'expect'. */
static void
check_backends(const struct gpu_ids_ruleset *rs, const struct pkts *p,
               const struct gpu_ids_verdict *expect, uint64_t seed)
{
    struct gpu_ids_verdict *v = gpu_host_alloc((p->n + 1) * sizeof *v);

    for (int b = 0; b < n_backends; b++) {
        /* On CUDA: 0, 1 remap with the batch's graph, 2 remap kernel by
         * kernel, 3 remap with the graph launched by the device. */
        for (int remap = 0; remap < 4; remap++) {
            struct gpu_ids_matcher_config cfg;
            struct gpu_ids_matcher *m;

            if (backends[b] == GPU_IDS_BACKEND_CPU && remap) {
                continue;       /* Remapping is a CUDA setting. */
            }
            gpu_ids_matcher_config_init(&cfg);
            cfg.backend = backends[b];
            cfg.remap = remap != 0;
            cfg.kernel_by_kernel = remap == 2;
            cfg.device_launch = remap == 3;
            cfg.chunk_bytes = remap ? 64 : 0;   /* Many chunk edges. */
            assert_int_equal(gpu_ids_matcher_create(rs, &cfg, &m), GPU_OK);
            memset(v, 0xa5, (p->n + 1) * sizeof *v);
            assert_int_equal(gpu_ids_match(m, p->data, p->offsets, p->hdrs,
                                           p->n, v), GPU_OK);
            check_verdicts(p, v, expect, seed, backends[b], remap,
                           "gpu_ids_match");
            check_own_buffers(m, p, expect, seed, backends[b], remap);
            gpu_ids_matcher_destroy(m);
        }
    }
    gpu_host_free(v);
}

/* The expected verdicts by brute force over every rule of 'rs'. */
static void
ref_verdicts(const struct gpu_ids_ruleset *rs, const struct pkts *p,
             struct gpu_ids_verdict *expect)
{
    uint32_t nr = gpu_ids_ruleset_n_rules(rs);
    struct ref_content cs[GPU_IDS_MAX_CONTENTS];

    for (size_t i = 0; i < p->n; i++) {
        const uint8_t *d = p->data + p->offsets[i];
        size_t len = p->offsets[i + 1] - p->offsets[i];
        const struct gpu_ids_pkt_hdr *h = &p->hdrs[i];

        memset(&expect[i], 0, sizeof expect[i]);
        expect[i].rule = GPU_IDS_NO_RULE;
        for (uint32_t r = 0; r < nr; r++) {
            struct gpu_ids_rule_info ri;
            size_t n;

            if (!gpu_ids_rule_header_matches(rs, r, h->proto, h->sport,
                                             h->dport)) {
                continue;
            }
            ref_from_ruleset(rs, r, cs, &n);
            if (!ref_contents(cs, n, d, len)) {
                continue;
            }
            gpu_ids_rule_get(rs, r, &ri);
            expect[i].n_matches++;
            if (expect[i].rule == GPU_IDS_NO_RULE || ri.sid < expect[i].sid
                || (ri.sid == expect[i].sid && r < expect[i].rule)) {
                expect[i].sid = ri.sid;
                expect[i].rule = r;
            }
        }
    }
}

/* ---- Parser: the community rules. ---- */

static void
test_community_counts(void **state)
{
    struct gpu_ids_ruleset *rs;
    struct gpu_ids_ruleset_stats s;
    const char *name;
    uint32_t count;
    bool saw_flow = false;

    /* Active rules only, strict: every one of the 545 active community
     * rules uses "flow", which a per-packet scan cannot honour. */
    rs = load_community(false, false);
    assert_non_null(rs);
    gpu_ids_ruleset_get_stats(rs, &s);
    print_message("  strict: %u rules, %u loaded, %u skipped\n", s.n_rules,
                  s.n_loaded, s.n_skipped);
    assert_int_equal(s.n_rules, 545);   /* grep -c '^alert' */
    assert_int_equal(s.n_loaded, 0);
    assert_int_equal(s.n_skipped, 545);
    assert_int_equal(s.n_skipped_by[GPU_IDS_SKIP_OPTION], 545);
    size_t n_opts = gpu_ids_ruleset_option_counts(rs, 0, &name, &count);
    for (size_t i = 0; i < n_opts; i++) {
        gpu_ids_ruleset_option_counts(rs, i, &name, &count);
        if (!strcmp(name, "flow")) {
            assert_int_equal(count, 545);
            saw_flow = true;
        }
    }
    assert_true(saw_flow);
    /* Most frequent first. */
    gpu_ids_ruleset_option_counts(rs, 0, &name, &count);
    assert_string_equal(name, "flow");
    gpu_ids_ruleset_destroy(rs);

    /* Active rules, partial: all of them have a content. */
    rs = load_community(false, true);
    gpu_ids_ruleset_get_stats(rs, &s);
    print_message("  partial: %u loaded (%u partial), %u patterns, %u "
                  "states, %u classes, %" PRIu64 " table bytes\n",
                  s.n_loaded, s.n_partial, s.n_patterns, s.n_states,
                  s.n_classes, s.table_bytes);
    assert_int_equal(s.n_rules, 545);
    assert_int_equal(s.n_loaded + s.n_skipped, 545);
    assert_int_equal(s.n_partial, s.n_loaded);
    gpu_ids_ruleset_destroy(rs);

    /* Everything, commented rules included: 4005 rules (one sid each). */
    rs = load_community(true, true);
    gpu_ids_ruleset_get_stats(rs, &s);
    print_message("  commented+partial: %u rules, %u loaded, skipped:",
                  s.n_rules, s.n_loaded);
    for (int r = 0; r < GPU_IDS_SKIP_N_REASONS; r++) {
        print_message(" %s %u", gpu_ids_skip_reason_name(r),
                      s.n_skipped_by[r]);
    }
    print_message("; %u patterns, %u states x %u classes, max depth %u, "
                  "%" PRIu64 " table bytes\n", s.n_patterns, s.n_states,
                  s.n_classes, s.max_depth, s.table_bytes);
    assert_int_equal(s.n_rules, 4005);
    assert_int_equal(s.n_loaded + s.n_skipped, 4005);
    uint32_t sum = 0;
    for (int r = 0; r < GPU_IDS_SKIP_N_REASONS; r++) {
        sum += s.n_skipped_by[r];
    }
    assert_int_equal(sum, s.n_skipped);
    /* Rules without any content (e.g. icmp itype rules) cannot load. */
    assert_true(s.n_skipped_by[GPU_IDS_SKIP_NO_CONTENT] > 0);
    assert_true(s.max_depth <= GPU_IDS_AC_MAX_DEPTH);
    assert_true(s.n_loaded > 3000);
    gpu_ids_ruleset_destroy(rs);
}

static void
test_community_known_rules(void **state)
{
    struct gpu_ids_ruleset *rs = load_community(true, true);
    struct gpu_ids_rule_info ri;
    struct gpu_ids_content_info ci;
    uint32_t idx;

    assert_non_null(rs);

    /* sid 118: alert tcp $HOME_NET 666 -> $EXTERNAL_NET any
     *   content:"Remote|3A| "; depth:11; nocase;
     *   content:"You are connected to me.|0D 0A|Remote|3A| Ready for
     *   commands"; distance:0; nocase; */
    idx = gpu_ids_rule_find(rs, 118);
    assert_int_not_equal(idx, GPU_IDS_NO_RULE);
    assert_true(gpu_ids_rule_get(rs, idx, &ri));
    assert_string_equal(ri.msg, "MALWARE-BACKDOOR SatansBackdoor.2.0.Beta");
    assert_int_equal(ri.proto, GPU_IDS_PROTO_TCP);
    assert_true(ri.partial);    /* flow:to_client,established */
    assert_int_equal(ri.n_contents, 2);
    assert_int_equal(ri.anchor, 1);     /* The longer content. */
    assert_true(gpu_ids_rule_content(rs, idx, 0, &ci));
    assert_int_equal(ci.len, 8);
    assert_memory_equal(ci.bytes, "remote: ", 8);   /* nocase: lowered. */
    assert_true(ci.nocase);
    assert_false(ci.relative);
    assert_int_equal(ci.offset, 0);
    assert_true(ci.has_depth);
    assert_int_equal(ci.depth, 11);
    assert_true(gpu_ids_rule_content(rs, idx, 1, &ci));
    assert_int_equal(ci.len, 52);
    assert_memory_equal(ci.bytes, "you are connected to me.\r\nremote: "
                        "ready for commands", 52);
    assert_true(ci.relative);
    assert_int_equal(ci.distance, 0);
    assert_false(ci.has_within);
    assert_true(gpu_ids_rule_header_matches(rs, idx, 6, 666, 1234));
    assert_false(gpu_ids_rule_header_matches(rs, idx, 6, 667, 1234));
    assert_false(gpu_ids_rule_header_matches(rs, idx, 17, 666, 1234));

    /* sid 115: content:"BN|10 00 02 00|"; depth:6; content:"|05 00|";
     * depth:2; offset:8; from port 20034. */
    idx = gpu_ids_rule_find(rs, 115);
    assert_int_not_equal(idx, GPU_IDS_NO_RULE);
    assert_true(gpu_ids_rule_get(rs, idx, &ri));
    assert_int_equal(ri.n_contents, 2);
    assert_true(gpu_ids_rule_content(rs, idx, 0, &ci));
    assert_int_equal(ci.len, 6);
    assert_memory_equal(ci.bytes, "BN\x10\x00\x02\x00", 6);
    assert_false(ci.nocase);
    assert_int_equal(ci.depth, 6);
    assert_true(gpu_ids_rule_content(rs, idx, 1, &ci));
    assert_int_equal(ci.len, 2);
    assert_memory_equal(ci.bytes, "\x05\x00", 2);
    assert_int_equal(ci.offset, 8);
    assert_int_equal(ci.depth, 2);
    assert_true(gpu_ids_rule_header_matches(rs, idx, 6, 20034, 1));
    assert_false(gpu_ids_rule_header_matches(rs, idx, 6, 20035, 1));

    /* sid 121: ports 1000:1300 -> 146. */
    idx = gpu_ids_rule_find(rs, 121);
    assert_int_not_equal(idx, GPU_IDS_NO_RULE);
    assert_true(gpu_ids_rule_header_matches(rs, idx, 6, 1000, 146));
    assert_true(gpu_ids_rule_header_matches(rs, idx, 6, 1300, 146));
    assert_false(gpu_ids_rule_header_matches(rs, idx, 6, 999, 146));
    assert_false(gpu_ids_rule_header_matches(rs, idx, 6, 1301, 146));
    assert_false(gpu_ids_rule_header_matches(rs, idx, 6, 1000, 147));

    /* A $HTTP_PORTS rule: 8080 is in Snort's default list, 8081 not. */
    uint32_t n = gpu_ids_ruleset_n_rules(rs), http = GPU_IDS_NO_RULE;
    for (uint32_t i = 0; i < n && http == GPU_IDS_NO_RULE; i++) {
        if (gpu_ids_rule_header_matches(rs, i, 6, 1234, 8080)
            && !gpu_ids_rule_header_matches(rs, i, 6, 1234, 8081)
            && gpu_ids_rule_header_matches(rs, i, 6, 1234, 80)
            && gpu_ids_rule_header_matches(rs, i, 6, 1234, 55555)) {
            http = i;
        }
    }
    assert_int_not_equal(http, GPU_IDS_NO_RULE);

    /* Every pattern's automaton depth is bounded and msg set. */
    for (uint32_t i = 0; i < n; i++) {
        assert_true(gpu_ids_rule_get(rs, i, &ri));
        assert_non_null(ri.msg);
        assert_true(ri.n_contents >= 1);
    }
    gpu_ids_ruleset_destroy(rs);
}

/* ---- Parser: bad lines. ---- */

static void
test_bad_lines(void **state)
{
    static const struct {
        const char *line;
        const char *msg;        /* Expected in the error. */
    } bad[] = {
        { "alert tcp any any -> any any (content:\"abc; sid:1;)",
          "unterminated" },
        { "alert tcp any any => any any (content:\"a\"; sid:1;)",
          "direction" },
        { "alert tcp any 70000 -> any any (content:\"a\"; sid:1;)",
          "bad port" },
        { "alert tcp any 90:80 -> any any (content:\"a\"; sid:1;)",
          "empty port range" },
        { "alert tcp any [80,81 -> any any (content:\"a\"; sid:1;)",
          "" },
        { "alert tcp any any -> any any (content:\"|4g|\"; sid:1;)",
          "hex digit" },
        { "alert tcp any any -> any any (content:\"|414|\"; sid:1;)",
          "odd number" },
        { "alert tcp any any -> any any (content:\"|41\"; sid:1;)",
          "unterminated |hex|" },
        { "alert tcp any any -> any any (nocase; content:\"a\"; sid:1;)",
          "without a preceding content" },
        { "alert tcp any any -> any any (content:\"a\"; depth:0; sid:1;)",
          "bad value" },
        { "alert tcp any any -> any any (content:\"a\"; offset:1; "
          "distance:2; sid:1;)", "mixes" },
        { "alert tcp any any -> any any (content:\"a\"; depth:3; depth:4; "
          "sid:1;)", "twice" },
        { "alert tcp any any -> any any (content:\"a\"; sid:1)",
          "not terminated" },
        { "alert tcp any any -> any any content:\"a\"; sid:1;",
          "expected '('" },
        { "alert tcp any any -> any any (content:\"a\"; sid:1;",
          "not closed" },
        { "alrt tcp any any -> any any (content:\"a\"; sid:1;)",
          "unknown action" },
        { "alert tcp any any -> any any (content:\"a\";)", "no sid" },
        { "alert tcp any any -> any any (content:\"a\"; sid:x;)",
          "bad sid" },
        { "alert tcp any any -> any any (content:\"\"; sid:1;)",
          "empty content" },
        { "alert tcp any any -> any (content:\"a\"; sid:1;)", "" },
        { "alert tcp any# any -> any any (content:\"a\"; sid:1;)",
          "bad address" },
        { "alert tcp", "missing" },
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gpu_ids_ruleset *rs = (struct gpu_ids_ruleset *) &rs;
        struct gpu_ids_ruleset *sentinel = rs;
        char text[1024], err[512];

        /* The bad rule is on line 3, after a comment and a good rule. */
        snprintf(text, sizeof text, "# comment\n"
                 "alert tcp any any -> any 80 (msg:\"ok\"; content:\"x\"; "
                 "sid:9;)\n%s\n", bad[i].line);
        err[0] = '\0';
        int error = gpu_ids_ruleset_load_string(text, "bad.rules", NULL,
                                                &rs, err, sizeof err);
        print_message("  %-62.62s -> %s\n", bad[i].line, err);
        assert_int_equal(error, GPU_ERR_INVALID);
        assert_ptr_equal(rs, sentinel);     /* Nothing half-built. */
        assert_non_null(strstr(err, "bad.rules:3: "));
        assert_non_null(strstr(err, bad[i].msg));
    }

    /* A missing file. */
    struct gpu_ids_ruleset *rs = NULL;
    char err[512];
    assert_int_equal(gpu_ids_ruleset_load_file("/nonexistent/x.rules", NULL,
                                               &rs, err, sizeof err),
                     GPU_ERR_NOT_FOUND);
    assert_null(rs);
    assert_non_null(strstr(err, "/nonexistent/x.rules"));

    /* Continuation lines, skipped rules and their reasons. */
    const char *text =
        "alert tcp any any -> any any \\\n"
        "    (msg:\"two lines\"; content:\"ab\"; sid:1;)\n"
        "pass tcp any any -> any any (content:\"a\"; sid:2;)\n"
        "alert http any any -> any any (content:\"a\"; sid:3;)\n"
        "alert tcp any any -> any any (msg:\"none\"; sid:4;)\n"
        "alert tcp any any -> any any (content:\"a\"; pcre:\"/a/\"; "
        "sid:5;)\n"
        "alert tcp 10.0.0.1 any -> any any (content:\"a\"; sid:6;)\n"
        "alert tcp any any -> any any (content:!\"a\"; sid:7;)\n"
        "alert tcp any any -> any any (content:\"a\"; content:!\"b\"; "
        "sid:8;)\n"
        "alert tcp any $FOO_PORTS -> any any (content:\"q\"; sid:10;)\n"
        "# alert tcp any any -> any any (content:\"c\"; sid:11;)\n";
    assert_int_equal(gpu_ids_ruleset_load_string(text, "t", NULL, &rs, err,
                                                 sizeof err), GPU_OK);
    struct gpu_ids_ruleset_stats s;
    gpu_ids_ruleset_get_stats(rs, &s);
    assert_int_equal(s.n_rules, 9);
    assert_int_equal(s.n_loaded, 2);    /* sids 1 and 10. */
    assert_int_equal(s.n_skipped_by[GPU_IDS_SKIP_ACTION], 1);
    assert_int_equal(s.n_skipped_by[GPU_IDS_SKIP_PROTOCOL], 1);
    assert_int_equal(s.n_skipped_by[GPU_IDS_SKIP_NO_CONTENT], 2);
    assert_int_equal(s.n_skipped_by[GPU_IDS_SKIP_OPTION], 2);
    assert_int_equal(s.n_skipped_by[GPU_IDS_SKIP_ADDRESS], 1);
    assert_int_equal(s.n_unknown_vars, 1);
    assert_int_not_equal(gpu_ids_rule_find(rs, 1), GPU_IDS_NO_RULE);
    gpu_ids_ruleset_destroy(rs);

    struct gpu_ids_load_options o = { .partial = true, .commented = true };
    assert_int_equal(gpu_ids_ruleset_load_string(text, "t", &o, &rs, err,
                                                 sizeof err), GPU_OK);
    gpu_ids_ruleset_get_stats(rs, &s);
    assert_int_equal(s.n_rules, 10);
    /* 1, 5, 6, 8, 10, 11; 7 has no positive content left. */
    assert_int_equal(s.n_loaded, 6);
    assert_int_equal(s.n_partial, 3);
    assert_int_equal(s.n_skipped_by[GPU_IDS_SKIP_NO_CONTENT], 2);
    gpu_ids_ruleset_destroy(rs);
}

/* ---- Content semantics, by hand. ---- */

static void
test_semantics(void **state)
{
    static const struct {
        const char *rule;       /* Options after the header. */
        const char *payload;
        bool match;
    } cases[] = {
        { "content:\"abc\";", "xxabcxx", true },
        { "content:\"abc\";", "xxABCxx", false },
        { "content:\"abc\"; nocase;", "xxABcxx", true },
        { "content:\"ABC\";", "xxabcxx", false },
        { "content:\"abc\"; offset:2;", "xxabc", true },
        { "content:\"abc\"; offset:3;", "xxabc", false },
        { "content:\"abc\"; depth:5;", "xxabc", true },
        { "content:\"abc\"; depth:4;", "xxabc", false },
        { "content:\"abc\"; offset:1; depth:4;", "xxabc", true },
        { "content:\"abc\"; offset:1; depth:3;", "xxabc", false },
        { "content:\"ab\"; content:\"cd\"; distance:0;", "abcd", true },
        { "content:\"ab\"; content:\"cd\"; distance:1;", "abcd", false },
        { "content:\"ab\"; content:\"cd\"; distance:1;", "abxcd", true },
        { "content:\"ab\"; content:\"cd\"; within:2;", "abcd", true },
        { "content:\"ab\"; content:\"cd\"; within:3;", "abxcd", true },
        { "content:\"ab\"; content:\"cd\"; within:2;", "abxcd", false },
        { "content:\"ab\"; content:\"cd\"; distance:1; within:2;", "abxcd",
          true },
        { "content:\"ab\"; content:\"cd\"; distance:-2;", "cdab", false },
        { "content:\"ab\"; content:\"cd\"; distance:-3;", "xcdab", false },
        { "content:\"ab\"; content:\"b\"; distance:-1; within:1;", "ab",
          true },
        /* Backtracking: the first "ab" is too far from "cd". */
        { "content:\"ab\"; content:\"cd\"; within:2;", "abxxxabcd", true },
        /* Order matters: "cd" must follow "ab". */
        { "content:\"ab\"; content:\"cd\"; distance:0;", "cdab", false },
        /* Absolute contents need no order. */
        { "content:\"ab\"; content:\"cd\";", "cdab", true },
        /* Hex, escapes, case of hex. */
        { "content:\"a|00 FF|b\";", "xa\x01\xff" "b", false },
        { "content:\"|3b|\\\"\\;\";", "x;\";", true },
        /* Pattern longer than the automaton's depth. */
        { "content:\"0123456789abcdef0123456789ABCDEF-tail\";",
          "xx0123456789abcdef0123456789ABCDEF-tail", true },
        { "content:\"0123456789abcdef0123456789ABCDEF-tail\";",
          "xx0123456789abcdef0123456789ABCDEF-tai!", false },
        { "content:\"0123456789abcdef0123456789ABCDEF-tail\"; nocase;",
          "xx0123456789ABCDEF0123456789abcdef-TAIL", true },
    };
    struct pkts p;
    struct gpu_ids_verdict expect[64];
    char text[16384];
    size_t n = sizeof cases / sizeof cases[0], used = 0;

    pkts_init(&p, n + 1, 1 << 16);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(cases[i].payload);

        /* Only rule i may match packet i: each rule's header takes port
         * 1000 + i. */
        used += snprintf(text + used, sizeof text - used,
                         "alert tcp any any -> any %zu (%s sid:%zu;)\n",
                         1000 + i, cases[i].rule, 100 + i);
        memcpy(pkts_add(&p, len, 6, 5, 1000 + i), cases[i].payload, len);
        expect[i].sid = cases[i].match ? 100 + i : 0;
        expect[i].rule = cases[i].match ? i : GPU_IDS_NO_RULE;
        expect[i].n_matches = cases[i].match;
        expect[i].flags = expect[i].pad = 0;
        expect[i].payload_len = 0;
    }
    struct gpu_ids_ruleset *rs;
    char err[256];
    assert_int_equal(gpu_ids_ruleset_load_string(text, "sem", NULL, &rs,
                                                 err, sizeof err), GPU_OK);
    assert_int_equal(gpu_ids_ruleset_n_rules(rs), n);

    /* The brute-force reference must agree with the table too. */
    struct gpu_ids_verdict ref[64];
    ref_verdicts(rs, &p, ref);
    for (size_t i = 0; i < n; i++) {
        if (ref[i].n_matches != expect[i].n_matches) {
            fail_msg("reference disagrees on case %zu: %s on \"%s\"", i,
                     cases[i].rule, cases[i].payload);
        }
    }
    check_backends(rs, &p, expect, 0);
    gpu_ids_ruleset_destroy(rs);
    pkts_free(&p);
}

static void
test_headers(void **state)
{
    const char *text =
        "alert tcp any any -> any [80,443,8000:8010] (content:\"a\"; "
        "sid:1;)\n"
        "alert udp any !53 -> any any (content:\"a\"; sid:2;)\n"
        "alert ip any any -> any ![1:1023,!22] (content:\"a\"; sid:3;)\n"
        "alert tcp any 7 <> any 9 (content:\"a\"; sid:4;)\n"
        "alert tcp any any -> any $SHELLCODE_PORTS (content:\"a\"; "
        "sid:5;)\n"
        "alert icmp any any -> any any (content:\"a\"; sid:6;)\n"
        "alert tcp any :10 -> any 60000: (content:\"a\"; sid:7;)\n";
    static const struct {
        uint8_t proto;
        uint16_t sport, dport;
        uint32_t sids;          /* Bit i: sid i matches. */
    } cases[] = {
        { 6, 1, 80, 1 << 1 },
        { 6, 1, 8005, 1 << 1 | 1 << 3 | 1 << 5 },
        { 6, 11, 8011, 1 << 3 | 1 << 5 },
        { 17, 53, 80, 0 },
        { 17, 54, 80, 1 << 2 },
        { 17, 54, 22, 1 << 2 | 1 << 3 },
        { 6, 7, 9, 1 << 4 | 1 << 5 },
        { 6, 9, 7, 1 << 4 | 1 << 5 },
        { 6, 7, 10, 1 << 5 },
        { 1, 0, 0, 1 << 3 | 1 << 6 },
        { 6, 10, 60000, 1 << 3 | 1 << 5 | 1 << 7 },
        { 6, 11, 60000, 1 << 3 | 1 << 5 },
    };
    size_t n = sizeof cases / sizeof cases[0];
    struct gpu_ids_verdict expect[32];
    struct gpu_ids_ruleset *rs;
    struct pkts p;
    char err[256];

    assert_int_equal(gpu_ids_ruleset_load_string(text, "hdr", NULL, &rs,
                                                 err, sizeof err), GPU_OK);
    pkts_init(&p, n + 1, 1024);
    for (size_t i = 0; i < n; i++) {
        pkts_add(&p, 1, cases[i].proto, cases[i].sport, cases[i].dport)[0]
            = 'a';
        expect[i].n_matches = __builtin_popcount(cases[i].sids);
        expect[i].sid = cases[i].sids ? __builtin_ctz(cases[i].sids) : 0;
        expect[i].rule = cases[i].sids ? expect[i].sid - 1 : GPU_IDS_NO_RULE;
        expect[i].flags = expect[i].pad = 0;
        expect[i].payload_len = 0;
    }
    check_backends(rs, &p, expect, 0);
    gpu_ids_ruleset_destroy(rs);
    pkts_free(&p);
}

/* ---- Random rules and payloads. ---- */

static const uint8_t alphabet[] = {
    'a', 'b', 'c', 'A', 'B', 'C', 0x00, 0xff, '|', '"', ';', '\\', ':',
};

struct gen_pattern {
    uint8_t bytes[48];
    uint32_t len;
};

/* Writes 'len' bytes as a content string, escaping what must be. */
static size_t
write_content(char *out, const uint8_t *b, uint32_t len)
{
    size_t n = 0;

    for (uint32_t i = 0; i < len; i++) {
        uint8_t c = b[i];

        if (c == '"' || c == ';' || c == '\\') {
            n += sprintf(out + n, "\\%c", c);
        } else if (c == '|' || c < 0x20 || c > 0x7e || (i & 7) == 5) {
            /* Some printable bytes as hex too, for the parser. */
            n += sprintf(out + n, "|%02X|", c);
        } else {
            out[n++] = c;
        }
    }
    out[n] = '\0';
    return n;
}

static void
plant(struct rng *r, uint8_t *d, size_t len, const struct gen_pattern *pp,
      bool flip_case)
{
    if (pp->len > len) {
        return;
    }
    size_t at = rng_below(r, len - pp->len + 1);

    for (uint32_t i = 0; i < pp->len; i++) {
        uint8_t c = pp->bytes[i];

        if (flip_case && isalpha(c) && rng_below(r, 2)) {
            c ^= 0x20;
        }
        d[at + i] = c;
    }
    if (rng_below(r, 4) == 0) {
        d[at + rng_below(r, pp->len)] ^= 1;     /* A near miss. */
    }
}

static size_t
random_len(struct rng *r)
{
    switch (rng_below(r, 6)) {
    case 0: return 0;
    case 1: return 1 + rng_below(r, 8);
    case 2: return 16 + rng_below(r, 64);
    case 3: return 200 + rng_below(r, 400);
    case 4: return 1400 + rng_below(r, 100);
    default: return rng_below(r, 100);
    }
}

static void
random_case(uint64_t seed, size_t n_rules, size_t n_packets)
{
    struct rng r = { seed };
    size_t n_pool = 40;
    struct gen_pattern *pool = calloc(n_pool, sizeof *pool);
    char *text = malloc(n_rules * 1024 + 1);
    static const uint16_t portset[] = { 80, 443, 1000, 1001, 1005, 8080 };
    size_t used = 0;
    bool nocase_pat[40];

    for (size_t i = 0; i < n_pool; i++) {
        /* Mostly short (they occur by chance), some longer than the
         * automaton's depth. */
        pool[i].len = rng_below(&r, 5) ? 1 + rng_below(&r, 6)
                                       : 20 + rng_below(&r, 28);
        for (uint32_t k = 0; k < pool[i].len; k++) {
            pool[i].bytes[k] = alphabet[rng_below(&r, sizeof alphabet)];
        }
        nocase_pat[i] = false;
    }

    for (size_t i = 0; i < n_rules; i++) {
        static const char *protos[] = { "tcp", "udp", "ip", "icmp" };
        char ports[2][64];

        for (int k = 0; k < 2; k++) {
            uint16_t a = portset[rng_below(&r, 6)];
            uint16_t b = portset[rng_below(&r, 6)];

            switch (rng_below(&r, 7)) {
            case 0: snprintf(ports[k], 64, "%u", a); break;
            case 1: snprintf(ports[k], 64, "%u:%u", a < b ? a : b,
                             a < b ? b : a); break;
            case 2: snprintf(ports[k], 64, "[%u,%u]", a, b); break;
            case 3: snprintf(ports[k], 64, "!%u", a); break;
            default: snprintf(ports[k], 64, "any"); break;
            }
        }
        used += sprintf(text + used,
                        "alert %s any %s %s any %s (msg:\"r%zu\";",
                        protos[rng_below(&r, 4)], ports[0],
                        rng_below(&r, 4) ? "->" : "<>", ports[1], i);
        size_t nc = 1 + rng_below(&r, 4);
        for (size_t c = 0; c < nc; c++) {
            const struct gen_pattern *pp = &pool[rng_below(&r, n_pool)];
            char buf[512];

            write_content(buf, pp->bytes, pp->len);
            used += sprintf(text + used, " content:\"%s\";", buf);
            if (rng_below(&r, 3) == 0) {
                used += sprintf(text + used, " nocase;");
            }
            switch (rng_below(&r, 6)) {
            case 0:
                used += sprintf(text + used, " offset:%u;",
                                rng_below(&r, 20));
                if (rng_below(&r, 2)) {
                    used += sprintf(text + used, " depth:%u;",
                                    pp->len + rng_below(&r, 40));
                }
                break;
            case 1:
                used += sprintf(text + used, " depth:%u;",
                                pp->len + rng_below(&r, 60));
                break;
            case 2:
                used += sprintf(text + used, " distance:%d;",
                                (int) rng_below(&r, 12) - 3);
                if (rng_below(&r, 2)) {
                    used += sprintf(text + used, " within:%u;",
                                    pp->len + rng_below(&r, 30));
                }
                break;
            case 3:
                used += sprintf(text + used, " within:%u;",
                                pp->len + rng_below(&r, 30));
                break;
            default:
                break;
            }
            if (rng_below(&r, 8) == 0) {
                used += sprintf(text + used, " fast_pattern;");
            }
        }
        used += sprintf(text + used, " sid:%u; rev:1;)\n",
                        (unsigned) (n_rules * 3 - i * 2));
    }

    struct gpu_ids_ruleset *rs;
    char err[512];
    int error = gpu_ids_ruleset_load_string(text, "random", NULL, &rs, err,
                                            sizeof err);
    if (error) {
        fail_msg("seed 0x%016" PRIx64 ": %s", seed, err);
    }
    assert_int_equal(gpu_ids_ruleset_n_rules(rs), n_rules);

    /* Packets: random bytes over the same alphabet, with planted
     * patterns (some case-flipped, some near misses). */
    struct pkts p;
    pkts_init(&p, n_packets + 1, n_packets * 1500 + 1);
    for (size_t i = 0; i < n_packets; i++) {
        size_t len = random_len(&r);
        uint8_t *d = pkts_add(&p, len, (uint8_t[]) { 6, 17, 1 }
                              [rng_below(&r, 3)],
                              portset[rng_below(&r, 6)],
                              portset[rng_below(&r, 6)]);

        for (size_t k = 0; k < len; k++) {
            d[k] = alphabet[rng_below(&r, sizeof alphabet)];
        }
        for (size_t k = rng_below(&r, 4); k > 0; k--) {
            plant(&r, d, len, &pool[rng_below(&r, n_pool)],
                  rng_below(&r, 2));
        }
    }

    /* The automaton alone: exact pattern sets against a naive search. */
    uint32_t np = gpu_ids_ruleset_n_patterns(rs);
    uint32_t *ids = malloc((np + 1) * sizeof *ids);
    for (size_t i = 0; i < p.n; i++) {
        const uint8_t *d = p.data + p.offsets[i];
        size_t len = p.offsets[i + 1] - p.offsets[i];
        size_t n = gpu_ids_scan_patterns(rs, d, len, ids, np);
        size_t k = 0;

        for (uint32_t pid = 0; pid < np; pid++) {
            struct ref_content c;
            const uint8_t *bytes;
            bool found = false;

            gpu_ids_pattern_get(rs, pid, &bytes, &c.len, &c.nocase);
            memcpy(c.bytes, bytes, c.len);
            for (long s = 0; s + (long) c.len <= (long) len && !found; s++) {
                found = ref_at(&c, d, len, s);
            }
            if (found != (k < n && ids[k] == pid)) {
                fail_msg("seed 0x%016" PRIx64 " packet %zu pattern %u: "
                         "automaton %s, naive search %s", seed, i, pid,
                         found ? "missed it" : "reported it",
                         found ? "found it" : "did not");
            }
            k += found;
        }
        assert_int_equal(k, n);
    }
    free(ids);
    (void) nocase_pat;

    struct gpu_ids_verdict *expect = malloc((p.n + 1) * sizeof *expect);
    ref_verdicts(rs, &p, expect);
    size_t n_matched = 0;
    for (size_t i = 0; i < p.n; i++) {
        n_matched += expect[i].n_matches > 0;
    }
    print_message("  seed 0x%016" PRIx64 ": %zu rules, %zu packets, %zu "
                  "matched\n", seed, n_rules, p.n, n_matched);
    check_backends(rs, &p, expect, seed);

    free(expect);
    pkts_free(&p);
    gpu_ids_ruleset_destroy(rs);
    free(text);
    free(pool);
}

static void
test_random_small(void **state)
{
    for (int i = 0; i < 20; i++) {
        random_case(case_seed(1, i), 1 + i, 50);
    }
}

static void
test_random_large(void **state)
{
    for (int i = 0; i < 3; i++) {
        random_case(case_seed(2, i), 300, 400);
    }
}

/* Appends to 'p' a packet of protocol 'proto' (ports from a few a rule
 * header may name, none but for TCP and UDP) whose random payload, half
 * HTTP-like text, has up to five of 'rs''s patterns planted in it. */
static void
community_packet(const struct gpu_ids_ruleset *rs, struct rng *r,
                 struct pkts *p, uint8_t proto)
{
    static const uint16_t ports[] = { 80, 8080, 21, 25, 445, 1234, 3306 };
    bool ported = proto == 6 || proto == 17;
    size_t len = random_len(r);
    uint8_t *d = pkts_add(p, len, proto,
                          ported ? ports[rng_below(r, 7)] : 0,
                          ported ? ports[rng_below(r, 7)] : 0);
    uint32_t np = gpu_ids_ruleset_n_patterns(rs);

    for (size_t k = 0; k < len; k++) {
        d[k] = rng_below(r, 2) ? "GET / HTTP/1.1\r\n"[rng_below(r, 16)]
                               : rng_below(r, 256);
    }
    for (size_t k = rng_below(r, 6); k > 0; k--) {
        struct gen_pattern g;
        const uint8_t *bytes;
        bool nocase;

        gpu_ids_pattern_get(rs, rng_below(r, np), &bytes, &g.len, &nocase);
        if (g.len <= sizeof g.bytes) {
            memcpy(g.bytes, bytes, g.len);
            plant(r, d, len, &g, nocase);
        }
    }
}

/* Community rules, random payloads with planted community patterns, full
 * verdicts against the brute force over every rule. */
static void
test_community_random(void **state)
{
    struct gpu_ids_ruleset *rs = load_community(true, true);
    uint64_t seed = case_seed(3, 0);
    struct rng r = { seed };
    size_t n_packets = 120;

    assert_non_null(rs);
    struct pkts p;
    pkts_init(&p, n_packets + 1, n_packets * 1500 + 1);
    for (size_t i = 0; i < n_packets; i++) {
        community_packet(rs, &r, &p, rng_below(&r, 4) ? 6 : 17);
    }
    struct gpu_ids_verdict *expect = malloc((p.n + 1) * sizeof *expect);
    ref_verdicts(rs, &p, expect);
    size_t n_matched = 0;
    for (size_t i = 0; i < p.n; i++) {
        n_matched += expect[i].n_matches > 0;
    }
    print_message("  seed 0x%016" PRIx64 ": %zu packets, %zu matched\n",
                  seed, p.n, n_matched);
    assert_true(n_matched > 0);
    check_backends(rs, &p, expect, seed);
    free(expect);
    pkts_free(&p);
    gpu_ids_ruleset_destroy(rs);
}

/* ---- Packets given as frames (GPU_IDS_HDR_FRAME). ---- */

/* Headers a frame_wrap() frame may add to its payload, at most. */
#define FRAME_ROOM 320

static uint8_t *
put16(uint8_t *d, uint16_t v)
{
    d[0] = v >> 8;
    d[1] = v;
    return d + 2;
}

static uint8_t *
put_random(struct rng *r, uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        d[i] = rng_below(r, 256);
    }
    return d + n;
}

/* Writes to 'out' a random Ethernet frame carrying payload 'pl' of 'len'
 * bytes with header 'h' (TCP or UDP with its ports, else another IP
 * protocol whose IP payload is 'pl'), as a switch would receive it: 0 to
 * 2 VLAN tags, IPv4 with options or IPv6 with extension headers, TCP
 * options, Ethernet padding after the IP packet.  One in eight is a frame
 * the parse must not take for an IP packet (another ethertype, three
 * tags, a later fragment, a length past the frame), and '*is_ip' says so.
 * Returns the frame's length. */
static size_t
frame_wrap(struct rng *r, const uint8_t *pl, size_t len,
           const struct gpu_ids_pkt_hdr *h, uint8_t *out, bool *is_ip)
{
    int spoil = rng_below(r, 8) ? -1 : (int) rng_below(r, 4);
    bool v6 = rng_below(r, 3) == 0;
    size_t l4_len = h->proto == 6 ? 20 + 4 * rng_below(r, 11)
                    : h->proto == 17 ? 8 : 0;
    uint8_t *d = put_random(r, out, 12);
    uint8_t *ip, *l4;
    size_t n_tags = spoil == 1 ? 3 : rng_below(r, 3);

    for (size_t t = 0; t < n_tags; t++) {
        d = put16(d, rng_below(r, 2) ? 0x8100 : 0x88a8);
        d = put_random(r, d, 2);
    }
    d = put16(d, spoil == 0 ? 0x0806 : v6 ? 0x86dd : 0x0800);
    ip = d;
    if (!v6) {
        size_t ihl = 5 + rng_below(r, 11);
        size_t tot = ihl * 4 + l4_len + len;
        uint16_t frag = (uint16_t[]) { 0, 0x4000, 0x2000 }[rng_below(r, 3)];

        if (spoil == 2) {
            frag |= 1 + rng_below(r, 0x1fff);   /* A later fragment. */
        }
        put_random(r, ip, ihl * 4);
        ip[0] = 0x40 | ihl;
        put16(ip + 2, spoil == 3 ? tot + 1 + rng_below(r, 100) : tot);
        put16(ip + 6, frag);
        ip[9] = h->proto;
        l4 = ip + ihl * 4;
    } else {
        uint8_t *x = ip + 40;
        uint8_t *next = ip + 6;
        size_t n_ext = rng_below(r, 3);

        put_random(r, ip, 40);
        ip[0] = 0x60 | (ip[0] & 0xf);
        for (size_t e = 0; e < n_ext; e++) {
            /* Hop-by-hop only first; a fragment header of offset 0. */
            uint8_t types[] = { 60, 43, 44, 0 };
            uint8_t type = types[rng_below(r, e ? 3 : 4)];

            *next = type;
            next = x;
            if (type == 44) {
                put_random(r, x, 8);
                put16(x + 2, rng_below(r, 2));  /* M flag, offset 0. */
                x += 8;
            } else {
                size_t units = rng_below(r, 3);

                put_random(r, x, (units + 1) * 8);
                x[1] = units;
                x += (units + 1) * 8;
            }
        }
        if (spoil == 2) {
            /* A later fragment. */
            *next = 44;
            next = x;
            put_random(r, x, 8);
            put16(x + 2, (1 + rng_below(r, 0x1fff)) << 3);
            x += 8;
        }
        *next = h->proto;
        size_t plen = (x - ip - 40) + l4_len + len;
        put16(ip + 4, spoil == 3 ? plen + 1 + rng_below(r, 100) : plen);
        l4 = x;
    }
    if (h->proto == 6) {
        put_random(r, l4, l4_len);
        put16(l4, h->sport);
        put16(l4 + 2, h->dport);
        l4[12] = (l4_len / 4) << 4;
    } else if (h->proto == 17) {
        put_random(r, l4, 8);
        put16(l4, h->sport);
        put16(l4 + 2, h->dport);
    }
    d = l4 + l4_len;
    memcpy(d, pl, len);
    d += len;
    /* Ethernet padding, which is not the IP packet's (none where the
     * IP length is too long: it would cover it). */
    d = put_random(r, d, spoil == 3 || rng_below(r, 4)
                         ? 0 : 1 + rng_below(r, 40));
    assert_true((size_t) (d - out) <= len + FRAME_ROOM);
    *is_ip = spoil < 0;
    return d - out;
}

/* Frames against their payloads: the community rules' random packets
 * (with ICMP ones too), each given as a random frame (frame_wrap()) or,
 * one in four, as its payload, in one submission; every backend and path
 * (the CUDA graph parses them on the device, the other paths on the
 * host; read in place or copied) must give each frame its payload's
 * verdict, or none if it is not IP, and say what it scanned. */
static void
test_frames(void **state)
{
    struct gpu_ids_ruleset *rs = load_community(true, true);
    uint64_t seed = case_seed(7, 0);
    struct rng r = { seed };
    size_t n_packets = 400;
    struct pkts p, q;
    size_t n_ip = 0, n_not_ip = 0, n_payloads = 0, n_matched = 0;

    pkts_init(&p, n_packets + 1, n_packets * 1500 + 1);
    pkts_init(&q, n_packets + 1, n_packets * (1500 + FRAME_ROOM) + 1);
    for (size_t i = 0; i < n_packets; i++) {
        community_packet(rs, &r, &p,
                         (uint8_t[]) { 6, 6, 17, 1 }[rng_below(&r, 4)]);
    }

    struct gpu_ids_verdict *expect = malloc((p.n + 1) * sizeof *expect);
    ref_verdicts(rs, &p, expect);
    for (size_t i = 0; i < p.n; i++) {
        const uint8_t *pl = p.data + p.offsets[i];
        size_t len = p.offsets[i + 1] - p.offsets[i];
        bool is_ip = true;

        if (!rng_below(&r, 4)) {
            memcpy(pkts_add(&q, len, p.hdrs[i].proto, p.hdrs[i].sport,
                            p.hdrs[i].dport), pl, len);
            n_payloads++;
        } else {
            uint8_t frame[1500 + FRAME_ROOM];
            size_t flen = frame_wrap(&r, pl, len, &p.hdrs[i], frame,
                                     &is_ip);

            /* The rest of a frame's header is the matcher's to fill:
             * garbage here. */
            memcpy(pkts_add(&q, flen, rng_below(&r, 256),
                            rng_below(&r, 65536), rng_below(&r, 65536)),
                   frame, flen);
            q.hdrs[i].flags = GPU_IDS_HDR_FRAME;
            q.hdrs[i].payload_len = rng_below(&r, 65536);
            if (is_ip) {
                expect[i].flags = GPU_IDS_HDR_PARSED | GPU_IDS_HDR_IP;
                expect[i].payload_len = len;
                n_ip++;
            } else {
                memset(&expect[i], 0, sizeof expect[i]);
                expect[i].rule = GPU_IDS_NO_RULE;
                expect[i].flags = GPU_IDS_HDR_PARSED;
                n_not_ip++;
            }
        }
        n_matched += expect[i].n_matches > 0;
    }
    print_message("  seed 0x%016" PRIx64 ": %zu frames (%zu not IP), %zu "
                  "payloads, %zu matched\n", seed, n_ip + n_not_ip,
                  n_not_ip, n_payloads, n_matched);
    assert_true(n_matched > 0 && n_not_ip > 0 && n_payloads > 0);
    check_backends(rs, &q, expect, seed);
    free(expect);
    pkts_free(&p);
    pkts_free(&q);
    gpu_ids_ruleset_destroy(rs);
}

/* ---- Hyperscan as the oracle for the literal matches. ---- */

#ifdef HAVE_HYPERSCAN
struct hs_ctx {
    uint8_t *seen;
};

static int
hs_on_match(unsigned int id, unsigned long long from, unsigned long long to,
            unsigned int flags, void *ctx_)
{
    struct hs_ctx *ctx = ctx_;

    ctx->seen[id] = 1;
    return 0;
}
#endif

static void
test_hyperscan_oracle(void **state)
{
#ifndef HAVE_HYPERSCAN
    test_skip(TEST_SKIP_NO_ORACLE, "built without Hyperscan (apt-get "
              "install libhyperscan-dev and re-run configure)");
#else
    struct gpu_ids_ruleset *rs = load_community(true, true);
    uint64_t seed = case_seed(4, 0);
    struct rng r = { seed };

    assert_non_null(rs);
    uint32_t np = gpu_ids_ruleset_n_patterns(rs);
    const char **exprs = calloc(np, sizeof *exprs);
    size_t *lens = calloc(np, sizeof *lens);
    unsigned int *flags = calloc(np, sizeof *flags);
    unsigned int *hs_ids = calloc(np, sizeof *hs_ids);

    for (uint32_t i = 0; i < np; i++) {
        const uint8_t *bytes;
        uint32_t len;
        bool nocase;

        gpu_ids_pattern_get(rs, i, &bytes, &len, &nocase);
        exprs[i] = (const char *) bytes;
        lens[i] = len;
        flags[i] = HS_FLAG_SINGLEMATCH | (nocase ? HS_FLAG_CASELESS : 0);
        hs_ids[i] = i;
    }
    hs_database_t *db = NULL;
    hs_compile_error_t *cerr = NULL;
    if (hs_compile_lit_multi(exprs, flags, hs_ids, lens, np, HS_MODE_BLOCK,
                             NULL, &db, &cerr) != HS_SUCCESS) {
        fail_msg("hs_compile_lit_multi: %s", cerr ? cerr->message : "?");
    }
    hs_scratch_t *scratch = NULL;
    assert_int_equal(hs_alloc_scratch(db, &scratch), HS_SUCCESS);

    struct hs_ctx ctx = { calloc(np, 1) };
    uint32_t *ids = malloc(np * sizeof *ids);
    uint8_t *d = malloc(1600);
    size_t total_matches = 0;
    for (int i = 0; i < 2000; i++) {
        size_t len = random_len(&r);

        for (size_t k = 0; k < len; k++) {
            d[k] = rng_below(&r, 2) ? "GET / HTTP/1.1\r\n"[rng_below(&r, 16)]
                                    : rng_below(&r, 256);
        }
        for (size_t k = rng_below(&r, 6); k > 0; k--) {
            struct gen_pattern g;
            const uint8_t *bytes;
            bool nocase;

            gpu_ids_pattern_get(rs, rng_below(&r, np), &bytes, &g.len,
                                &nocase);
            if (g.len > sizeof g.bytes) {
                continue;
            }
            memcpy(g.bytes, bytes, g.len);
            plant(&r, d, len, &g, nocase);
        }
        memset(ctx.seen, 0, np);
        assert_int_equal(hs_scan(db, (const char *) d, len, 0, scratch,
                                 hs_on_match, &ctx), HS_SUCCESS);
        size_t n = gpu_ids_scan_patterns(rs, d, len, ids, np), k = 0;
        for (uint32_t pid = 0; pid < np; pid++) {
            bool ours = k < n && ids[k] == pid;

            if (ours != ctx.seen[pid]) {
                const uint8_t *bytes;
                uint32_t plen;
                bool nocase;

                gpu_ids_pattern_get(rs, pid, &bytes, &plen, &nocase);
                fail_msg("seed 0x%016" PRIx64 " payload %d pattern %u "
                         "(len %u, nocase %d): Hyperscan %s, ours %s", seed,
                         i, pid, plen, nocase,
                         ctx.seen[pid] ? "matched" : "did not",
                         ours ? "matched" : "did not");
            }
            k += ours;
        }
        total_matches += n;
    }
    print_message("  seed 0x%016" PRIx64 ": %u patterns, 2000 payloads, "
                  "%zu pattern matches, identical to Hyperscan %s\n", seed,
                  np, total_matches, hs_version());
    assert_true(total_matches > 0);
    free(d);
    free(ids);
    free(ctx.seen);
    hs_free_scratch(scratch);
    hs_free_database(db);
    free(exprs);
    free(lens);
    free(flags);
    free(hs_ids);
    gpu_ids_ruleset_destroy(rs);
#endif
}

/* ---- Batches: async API, bad arguments, counters. ---- */

static void
test_batches(void **state)
{
    const char *text =
        "alert tcp any any -> any any (content:\"evil\"; sid:7;)\n"
        "alert tcp any any -> any any (content:\"evil\"; nocase; "
        "sid:3;)\n";
    struct gpu_ids_ruleset *rs;
    char err[256];

    assert_int_equal(gpu_ids_ruleset_load_string(text, "b", NULL, &rs, err,
                                                 sizeof err), GPU_OK);
    for (int b = 0; b < n_backends; b++) {
        struct gpu_ids_matcher_config cfg;
        struct gpu_ids_matcher *m;
        struct gpu_ids_batch *batch;
        struct pkts p;
        struct gpu_ids_verdict *v = gpu_host_alloc(4 * sizeof *v);
        struct gpu_stream *stream;

        gpu_ids_matcher_config_init(&cfg);
        cfg.backend = backends[b];
        assert_int_equal(gpu_ids_matcher_create(rs, &cfg, &m), GPU_OK);
        assert_int_equal(gpu_ids_matcher_backend(m), backends[b]);
        assert_int_equal(gpu_ids_batch_create(m, 3, 100, &batch), GPU_OK);
        assert_int_equal(gpu_stream_create(&stream), GPU_OK);

        pkts_init(&p, 4, 200);
        memcpy(pkts_add(&p, 8, 6, 1, 2), "xxevilxx", 8);
        memcpy(pkts_add(&p, 4, 6, 1, 2), "EVIL", 4);
        memcpy(pkts_add(&p, 3, 6, 1, 2), "evi", 3);

        assert_int_equal(gpu_ids_submit(batch, stream, p.data, p.offsets,
                                        p.hdrs, 3, v), GPU_OK);
        assert_int_equal(gpu_ids_submit(batch, stream, p.data, p.offsets,
                                        p.hdrs, 3, v), GPU_ERR_BUSY);
        assert_int_equal(gpu_ids_wait(batch), GPU_OK);
        assert_int_equal(v[0].sid, 3);
        assert_int_equal(v[0].n_matches, 2);
        assert_int_equal(v[0].rule, 1);
        assert_int_equal(v[1].sid, 3);
        assert_int_equal(v[1].n_matches, 1);
        assert_int_equal(v[2].sid, 0);
        assert_int_equal(v[2].rule, GPU_IDS_NO_RULE);
        assert_int_equal(gpu_ids_poll(batch), GPU_OK);

        /* Kernel-only re-run, then counters. */
        assert_int_equal(gpu_ids_resubmit(batch, stream), GPU_OK);
        assert_int_equal(gpu_ids_wait(batch), GPU_OK);
        uint64_t counts[2];
        assert_int_equal(gpu_ids_matcher_rule_counts(m, counts, 2), GPU_OK);
        assert_int_equal(counts[0], 2);     /* sid 7, twice packet 0. */
        assert_int_equal(counts[1], 4);
        struct gpu_ids_matcher_stats ms;
        gpu_ids_matcher_get_stats(m, &ms);
        assert_int_equal(ms.n_packets, 6);
        /* A CUDA re-run's verdicts stay on the device, uncounted. */
        assert_true(ms.n_matched == 4 || ms.n_matched == 2);

        /* Bad arguments. */
        assert_int_equal(gpu_ids_submit(batch, stream, p.data, p.offsets,
                                        p.hdrs, 4, v), GPU_ERR_INVALID);
        uint32_t bad_ofs[3] = { 0, 5, 2 };
        assert_int_equal(gpu_ids_submit(batch, stream, p.data, bad_ofs,
                                        p.hdrs, 2, v), GPU_ERR_INVALID);
        uint32_t big_ofs[2] = { 0, 101 };
        assert_int_equal(gpu_ids_submit(batch, stream, p.data, big_ofs,
                                        p.hdrs, 1, v), GPU_ERR_INVALID);
        /* Empty batch. */
        assert_int_equal(gpu_ids_submit(batch, stream, p.data, p.offsets,
                                        p.hdrs, 0, v), GPU_OK);
        assert_int_equal(gpu_ids_wait(batch), GPU_OK);
        /* Offsets need not start at 0: packets 1..2 alone. */
        assert_int_equal(gpu_ids_submit(batch, stream, p.data,
                                        p.offsets + 1, p.hdrs + 1, 2, v),
                         GPU_OK);
        assert_int_equal(gpu_ids_wait(batch), GPU_OK);
        assert_int_equal(v[0].sid, 3);
        assert_int_equal(v[0].n_matches, 1);
        assert_int_equal(v[1].n_matches, 0);

        /* The batch's own buffers, three packets in a batch for 65536:
         * on CUDA, copying the offsets' and headers' unused tails (768
         * kB) would cost more than it saves, so the input takes its
         * three copies and a memset; the verdicts still come back in
         * one copy. */
        struct gpu_ids_batch *big;
        struct gpu_ids_batch_buffers own;
        struct gpu_ids_matcher_stats before, after;
        assert_int_equal(gpu_ids_batch_create(m, 65536, 100, &big), GPU_OK);
        assert_int_equal(gpu_ids_batch_buffers(big, &own), GPU_OK);
        memcpy(own.data, p.data, p.offsets[3]);
        memcpy(own.offsets, p.offsets, 4 * sizeof *own.offsets);
        memcpy(own.hdrs, p.hdrs, 3 * sizeof *own.hdrs);
        for (int round = 0; round < 2; round++) {
            memset(own.verdicts, 0xa5, 3 * sizeof *own.verdicts);
            gpu_ids_matcher_get_stats(m, &before);
            assert_int_equal(gpu_ids_submit(big, stream, own.data,
                                            own.offsets, own.hdrs, 3,
                                            own.verdicts), GPU_OK);
            assert_int_equal(gpu_ids_wait(big), GPU_OK);
            gpu_ids_matcher_get_stats(m, &after);
            assert_int_equal(own.verdicts[0].sid, 3);
            assert_int_equal(own.verdicts[0].n_matches, 2);
            assert_int_equal(own.verdicts[1].sid, 3);
            assert_int_equal(own.verdicts[1].n_matches, 1);
            assert_int_equal(own.verdicts[2].n_matches, 0);
            assert_int_equal(own.verdicts[2].rule, GPU_IDS_NO_RULE);
            if (backends[b] == GPU_IDS_BACKEND_CUDA && round) {
                /* 3 copies + memset, 4 kernels, 1 copy out, event, and
                 * a clear of the set if its hit lists grew. */
                assert_int_equal(after.n_runtime_calls
                                 - before.n_runtime_calls,
                                 10 + (after.n_set_clears
                                       - before.n_set_clears));
            }
        }
        gpu_ids_batch_destroy(big);

        gpu_stream_destroy(stream);
        gpu_ids_batch_destroy(batch);
        gpu_ids_matcher_destroy(m);
        pkts_free(&p);
        gpu_host_free(v);
    }
    struct gpu_ids_matcher_config cfg;
    struct gpu_ids_matcher *m;
    gpu_ids_matcher_config_init(&cfg);
    cfg.chunk_bytes = 3;
    assert_int_equal(gpu_ids_matcher_create(rs, &cfg, &m), GPU_ERR_INVALID);
    if (!gpu_ids_cuda_available()) {
        cfg.chunk_bytes = 0;
        cfg.backend = GPU_IDS_BACKEND_CUDA;
        assert_int_equal(gpu_ids_matcher_create(rs, &cfg, &m),
                         GPU_ERR_NO_DEVICE);
    }
    gpu_ids_ruleset_destroy(rs);
}

/* A rule set whose anchor is in almost every byte overflows the hit list
 * sized for ordinary traffic: the batch's verdicts stay right (the CPU
 * redoes it) and the next launch sizes the list by the hits it saw, so
 * that it stays on the GPU. */
static void
test_dense_hits(void **state)
{
    const char *text =
        "alert tcp any any -> any any (content:\"aa\"; content:\"zz\"; "
        "sid:1;)\n"
        "alert tcp any any -> any any (content:\"aa\"; sid:2;)\n";
    enum { N = 256, LEN = 1400 };
    struct gpu_ids_ruleset *rs;
    char err[256];

    (void) state;
    assert_int_equal(gpu_ids_ruleset_load_string(text, "d", NULL, &rs, err,
                                                 sizeof err), GPU_OK);
    for (int b = 0; b < n_backends; b++) {
        struct gpu_ids_matcher_config cfg;
        struct gpu_ids_matcher_stats ms;
        struct gpu_ids_matcher *m;
        struct gpu_ids_batch *batch;
        struct gpu_ids_verdict *v = gpu_host_alloc(N * sizeof *v);
        struct pkts p;

        gpu_ids_matcher_config_init(&cfg);
        cfg.backend = backends[b];
        assert_int_equal(gpu_ids_matcher_create(rs, &cfg, &m), GPU_OK);
        assert_int_equal(gpu_ids_batch_create(m, N, N * LEN, &batch),
                         GPU_OK);
        pkts_init(&p, N, N * LEN);
        for (int i = 0; i < N; i++) {
            uint8_t *d = pkts_add(&p, LEN, 6, 1, 2);

            memset(d, 'a', LEN);
            if (i % 3 == 0) {
                memcpy(d + LEN / 2, "zz", 2);
            }
        }
        for (int round = 0; round < 3; round++) {
            memset(v, 0x5a, N * sizeof *v);
            assert_int_equal(gpu_ids_submit(batch, NULL, p.data, p.offsets,
                                            p.hdrs, N, v), GPU_OK);
            assert_int_equal(gpu_ids_wait(batch), GPU_OK);
            for (int i = 0; i < N; i++) {
                bool both = i % 3 == 0;

                assert_int_equal(v[i].n_matches, both ? 2 : 1);
                assert_int_equal(v[i].sid, both ? 1 : 2);
            }
        }
        gpu_ids_matcher_get_stats(m, &ms);
        /* The CPU never falls back; CUDA at most for the first round. */
        assert_true(ms.n_fallbacks <= 1);
        printf("  %s: %"PRIu64" hits in 3 rounds, %"PRIu64" redone on the "
               "CPU\n", backends[b] == GPU_IDS_BACKEND_CUDA ? "cuda" : "cpu",
               ms.n_hits, ms.n_fallbacks);
        gpu_ids_batch_destroy(batch);
        gpu_ids_matcher_destroy(m);
        pkts_free(&p);
        gpu_host_free(v);
    }
    gpu_ids_ruleset_destroy(rs);
}

/* What test_sync_while_rung()'s ringing thread shares with it. */
struct ringer {
    struct gpu_ids_batch *batch;
    struct gpu_ids_batch_buffers own;
    volatile bool stop;
    uint64_t n_rounds;
    int error;                  /* First failed round's status... */
    uint32_t bad_sid;           /* ...or a wrong verdict's sid. */
};

static void *
ringer_main(void *r_)
{
    struct ringer *r = r_;

    while (!r->stop && !r->error && !r->bad_sid) {
        memset(r->own.verdicts, 0xa5, 3 * sizeof *r->own.verdicts);
        r->error = gpu_ids_submit(r->batch, NULL, r->own.data,
                                  r->own.offsets, r->own.hdrs, 3,
                                  r->own.verdicts);
        if (!r->error) {
            r->error = gpu_ids_wait(r->batch);
        }
        if (!r->error && (r->own.verdicts[0].sid != 3
                          || r->own.verdicts[2].sid != 0)) {
            r->bad_sid = r->own.verdicts[0].sid | 0x80000000;
        }
        r->n_rounds++;
    }
    return NULL;
}

/* Runtime calls that wait for the whole device (cudaDeviceSynchronize()
 * in gpu_ids_matcher_rule_counts(), cudaFree() in a batch's destroy)
 * return while another thread rings a batch's scheduler without pause:
 * the scheduler parks within GPU_GRAPH_LIFE_NS however often it is rung
 * (a scheduler that never ended would hang them for ever).  They still
 * wait: the ringing thread launches a parked scheduler again at once,
 * and the slowest of them took 31-94 ms on the H200 machine.  The bound
 * checked, 1 s, tells a hang from a slow machine, not a rate. */
static void
test_sync_while_rung(void **state)
{
    const char *text =
        "alert tcp any any -> any any (content:\"evil\"; sid:3;)\n";
    struct gpu_ids_ruleset *rs;
    char err[256];

    (void) state;
    assert_int_equal(gpu_ids_ruleset_load_string(text, "r", NULL, &rs, err,
                                                 sizeof err), GPU_OK);
    for (int b = 0; b < n_backends; b++) {
        struct gpu_ids_matcher_config cfg;
        struct gpu_ids_matcher_stats before, after;
        struct gpu_ids_matcher *m;
        struct ringer r;
        pthread_t thread;
        double worst_sync_ms = 0, worst_ms = 0;

        memset(&r, 0, sizeof r);
        gpu_ids_matcher_config_init(&cfg);
        cfg.backend = backends[b];
        cfg.device_launch = true;
        assert_int_equal(gpu_ids_matcher_create(rs, &cfg, &m), GPU_OK);
        assert_int_equal(gpu_ids_batch_create(m, 3, 64, &r.batch), GPU_OK);
        assert_int_equal(gpu_ids_batch_buffers(r.batch, &r.own), GPU_OK);
        memcpy(r.own.data, "xxevilxx" "abcdefgh" "ev", 18);
        r.own.offsets[0] = 0;
        r.own.offsets[1] = 8;
        r.own.offsets[2] = 16;
        r.own.offsets[3] = 18;
        for (int i = 0; i < 3; i++) {
            memset(&r.own.hdrs[i], 0, sizeof r.own.hdrs[i]);
            r.own.hdrs[i].proto = 6;
        }
        gpu_ids_matcher_get_stats(m, &before);
        assert_int_equal(pthread_create(&thread, NULL, ringer_main, &r), 0);
        for (int round = 0; round < 20; round++) {
            struct gpu_ids_batch *other;
            uint64_t counts[2];
            double t0 = test_monotonic_ms();

            assert_int_equal(gpu_ids_matcher_rule_counts(m, counts, 2),
                             GPU_OK);

            double t1 = test_monotonic_ms();

            assert_int_equal(gpu_ids_batch_create(m, 3, 64, &other),
                             GPU_OK);
            gpu_ids_batch_destroy(other);

            double t2 = test_monotonic_ms();

            if (t1 - t0 > worst_sync_ms) {
                worst_sync_ms = t1 - t0;
            }
            if (t2 - t1 > worst_ms) {
                worst_ms = t2 - t1;
            }
            struct timespec pause = { 0, 5 * 1000 * 1000 };
            nanosleep(&pause, NULL);
        }
        r.stop = true;
        pthread_join(thread, NULL);
        gpu_ids_matcher_get_stats(m, &after);
        printf("  %s: %"PRIu64" rounds rung meanwhile (%"PRIu64" launched "
               "by the device, scheduler woken %"PRIu64" times); slowest "
               "device sync %.2f ms, batch create and destroy %.2f ms\n",
               gpu_ids_backend_name(backends[b]), r.n_rounds,
               after.n_device_launches - before.n_device_launches,
               after.n_scheduler_launches - before.n_scheduler_launches,
               worst_sync_ms, worst_ms);
        assert_int_equal(r.error, GPU_OK);
        assert_int_equal(r.bad_sid, 0);
        assert_true(r.n_rounds > 0);
        assert_true(worst_sync_ms < 1000 && worst_ms < 1000);
        if (backends[b] == GPU_IDS_BACKEND_CUDA) {
            assert_true(after.n_device_launches > before.n_device_launches);
        }
        gpu_ids_batch_destroy(r.batch);
        gpu_ids_matcher_destroy(m);
    }
    gpu_ids_ruleset_destroy(rs);
}

int
main(void)
{
    bool cuda = gpu_ids_cuda_available();
    int chosen[2];

    master_seed = test_seed_init("test-ids");
    n_backends = test_backends_from_env("test-ids", "GPU_IDS_BACKEND", cuda,
                                        GPU_IDS_BACKEND_CPU,
                                        GPU_IDS_BACKEND_CUDA, chosen);
    if (!n_backends) {
        return 1;
    }
    for (int i = 0; i < n_backends; i++) {
        backends[i] = chosen[i];
    }
    printf("test-ids: backends:");
    for (int i = 0; i < n_backends; i++) {
        printf(" %s", gpu_ids_backend_name(backends[i]));
    }
    printf("%s\n", cuda ? "" : " (no CUDA device here)");

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_community_counts),
        cmocka_unit_test(test_community_known_rules),
        cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_headers),
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_sync_while_rung),
        cmocka_unit_test(test_dense_hits),
        cmocka_unit_test(test_random_small),
        cmocka_unit_test(test_random_large),
        cmocka_unit_test(test_community_random),
        cmocka_unit_test(test_frames),
        cmocka_unit_test(test_hyperscan_oracle),
    };
    const char *filter = getenv("GPU_TEST_FILTER");
    if (filter && *filter) {
        cmocka_set_test_filter(filter);
    }
    int rc = test_run_group("test-ids", tests);
    if (rc) {
        printf("test-ids: FAILED; rerun with GPU_TEST_SEED=0x%016" PRIx64
               "\n", master_seed);
    }
    return rc;
}
