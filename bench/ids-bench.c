/*
 * ids-bench: Gbit/s of gpu_services/ids against Hyperscan, in one run.
 *
 * Traffic: packets whose payload sizes follow an Internet-like mix (half
 * 64 B, a third ~1400-1500 B, the rest in between; mean ~600 B), bytes
 * half random and half HTTP-like text, and a small fraction of packets
 * with a rule's contents planted (and ports chosen so the header
 * passes).  Rules: the Snort community rules, commented ones included,
 * loaded on their contents (partial), as in docs/PERFORMANCE.md.
 *
 * Measured, each on the same packets:
 *   - the CPU backend on one core;
 *   - Hyperscan (literal patterns of the same rules, block mode, one
 *     hs_scan per packet) on one core and on every core;
 *   - the CUDA backend, with and without thread-data remapping:
 *     kernel-only (data resident on the device) and end-to-end (pinned
 *     host buffers in, verdicts out, three streams overlapping), with the
 *     scan loop's control-flow efficiency.
 * The CUDA verdicts are checked against the CPU backend's.
 *
 * Usage: ids-bench [--rules FILE] [--packets N] [--batch N] [--match F]
 *                  [--seed S] [--iters N] [--threads N] [--chunk N]
 *                  [--min-anchor N] [--strict]
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_HYPERSCAN
#include <hs.h>
#endif

#include "gpu_services/ids/gpu-ids.h"

/* Batches in flight end to end: one copying in, one in its kernels, one
 * copying its verdicts out. */
#define N_SLOTS 3

static double
now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_state;

static uint64_t
rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t
below(uint32_t n)
{
    return n ? rnd() % n : 0;
}

static size_t
packet_size(void)
{
    uint32_t r = below(100);

    if (r < 50) {
        return 64;
    } else if (r < 67) {
        return 65 + below(1336);
    } else {
        return 1400 + below(101);
    }
}

/* Benign text: ordinary words, not the protocol keywords the rules'
 * contents are full of, so that matches stay rare as in real traffic
 * (where the http_* buffers keep those contents off the raw payload). */
static const char *words[] = {
    "the ", "quick ", "brown ", "fox ", "jumps ", "over ", "lazy ", "dog ",
    "lorem ", "ipsum ", "dolor ", "sit ", "amet ", "data ", "value ",
    "report ", "weather ", "today ", "12 ", "3.5 ", "\n", ", ", ". ",
};

static void
fill_payload(uint8_t *d, size_t len)
{
    size_t i = 0;

    if (below(2)) {
        for (; i < len; i++) {
            d[i] = rnd();
        }
        return;
    }
    while (i < len) {
        const char *w = words[below(sizeof words / sizeof words[0])];
        size_t n = strlen(w);

        if (n > len - i) {
            n = len - i;
        }
        memcpy(d + i, w, n);
        i += n;
    }
}

/* Plants rule 'idx''s contents one after the other (absolute ones at
 * their offset) and picks ports its header accepts.  Returns false if
 * they do not fit. */
static bool
plant_rule(const struct gpu_ids_ruleset *rs, uint32_t idx, uint8_t *d,
           size_t len, struct gpu_ids_pkt_hdr *h)
{
    static const uint16_t ports[] = { 80, 8080, 21, 25, 110, 139, 445,
                                      1433, 3306, 1024, 5060, 6666, 12345,
                                      2000, 443, 53, 0 };
    struct gpu_ids_rule_info ri;
    size_t pos = 0;

    gpu_ids_rule_get(rs, idx, &ri);
    for (uint32_t c = 0; c < ri.n_contents; c++) {
        struct gpu_ids_content_info ci;

        gpu_ids_rule_content(rs, idx, c, &ci);
        if (!ci.relative && ci.offset > 0 && (size_t) ci.offset > pos) {
            pos = ci.offset;
        } else if (ci.relative && ci.distance > 0) {
            pos += ci.distance;
        }
        if (pos + ci.len > len) {
            return false;
        }
        memcpy(d + pos, ci.bytes, ci.len);
        pos += ci.len;
    }
    h->proto = ri.proto ? ri.proto : 6;
    for (int tries = 0; tries < 400; tries++) {
        uint16_t sp = tries < 289 ? ports[tries / 17] : below(65536);
        uint16_t dp = tries < 289 ? ports[tries % 17] : below(65536);

        if (gpu_ids_rule_header_matches(rs, idx, h->proto, sp, dp)) {
            h->sport = sp;
            h->dport = dp;
            return true;
        }
    }
    return false;
}

struct traffic {
    uint8_t *data;
    uint32_t *offsets;
    struct gpu_ids_pkt_hdr *hdrs;
    size_t n, bytes;
};

#ifdef HAVE_HYPERSCAN
struct hs_job {
    hs_database_t *db;
    const struct traffic *t;
    size_t first, last;
    int iters;
    uint64_t matches;
    int error;
};

static int
hs_count(unsigned int id, unsigned long long from, unsigned long long to,
         unsigned int flags, void *ctx)
{
    ++*(uint64_t *) ctx;
    return 0;
}

static void *
hs_worker(void *job_)
{
    struct hs_job *job = job_;
    hs_scratch_t *scratch = NULL;

    if (hs_alloc_scratch(job->db, &scratch) != HS_SUCCESS) {
        job->error = 1;
        return NULL;
    }
    for (int it = 0; it < job->iters; it++) {
        for (size_t i = job->first; i < job->last; i++) {
            const struct traffic *t = job->t;

            if (hs_scan(job->db, (const char *) t->data + t->offsets[i],
                        t->offsets[i + 1] - t->offsets[i], 0, scratch,
                        hs_count, &job->matches) != HS_SUCCESS) {
                job->error = 1;
            }
        }
    }
    hs_free_scratch(scratch);
    return NULL;
}

/* Gbit/s of Hyperscan over the traffic with 'threads' threads. */
static double
run_hyperscan(hs_database_t *db, const struct traffic *t, int threads,
              int iters, uint64_t *matches)
{
    struct hs_job *jobs = calloc(threads, sizeof *jobs);
    pthread_t *tids = calloc(threads, sizeof *tids);
    double t0, t1;

    for (int i = 0; i < threads; i++) {
        jobs[i].db = db;
        jobs[i].t = t;
        jobs[i].first = t->n * i / threads;
        jobs[i].last = t->n * (i + 1) / threads;
        jobs[i].iters = iters;
    }
    t0 = now();
    for (int i = 0; i < threads; i++) {
        pthread_create(&tids[i], NULL, hs_worker, &jobs[i]);
    }
    *matches = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tids[i], NULL);
        *matches += jobs[i].matches;
        if (jobs[i].error) {
            fprintf(stderr, "ids-bench: hs_scan failed\n");
        }
    }
    t1 = now();
    free(jobs);
    free(tids);
    return t->bytes * 8.0 * iters / (t1 - t0) / 1e9;
}
#endif

/* Longest content of a rule line, decoded length (|hex| pairs count one
 * byte each); 0 if none. */
static size_t
longest_content(const char *line)
{
    size_t best = 0;
    const char *s = line;

    while ((s = strstr(s, "content:")) != NULL) {
        size_t n = 0;
        bool hex = false;
        int digits = 0;

        s += 8;
        while (*s == ' ' || *s == '!') {
            s++;
        }
        if (*s != '"') {
            continue;
        }
        for (s++; *s && *s != '"'; s++) {
            if (*s == '\\' && s[1]) {
                s++;
                n++;
            } else if (*s == '|') {
                hex = !hex;
            } else if (hex) {
                if (*s != ' ' && ++digits % 2 == 0) {
                    n++;
                }
            } else {
                n++;
            }
        }
        if (n > best) {
            best = n;
        }
    }
    return best;
}

/* The rule file without rules whose longest content is shorter than
 * 'min': loaded on contents alone, a rule anchored on "s" or "|00|"
 * matches most packets, which no deployment would keep. */
static char *
filter_rules(const char *path, size_t min, size_t *dropped)
{
    FILE *f = fopen(path, "r");
    char *out = NULL, line[65536];
    size_t len = 0, cap = 0;

    *dropped = 0;
    if (!f) {
        return NULL;
    }
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);

        if (strstr(line, "sid:") && longest_content(line) < min) {
            ++*dropped;
            continue;
        }
        if (len + n + 1 > cap) {
            cap = (cap + n + 1) * 2;
            out = realloc(out, cap);
            if (!out) {
                fclose(f);
                return NULL;
            }
        }
        memcpy(out + len, line, n + 1);
        len += n;
    }
    fclose(f);
    return out ? out : strdup("");
}

static int
usage(void)
{
    fprintf(stderr, "usage: ids-bench [--rules FILE] [--packets N] "
            "[--batch N] [--match F] [--seed S] [--iters N] [--threads N] "
            "[--chunk N] [--min-anchor N] [--strict] "
            "[--latency N[,N...] [--overlap]] [--device-launch]\n");
    return 2;
}

/* Matches 't' 'passes' times end to end, in batches of 'batch' packets
 * rotating over the N_SLOTS batches and streams, back to back, and waits
 * for the last.  Returns false if a submission failed. */
static bool
e2e_passes(const struct traffic *t, size_t batch, int passes,
           struct gpu_ids_batch *b[N_SLOTS], struct gpu_stream *s[N_SLOTS],
           struct gpu_ids_verdict *v)
{
    size_t k = 0;

    for (int pass = 0; pass < passes; pass++) {
        for (size_t i = 0; i < t->n; i += batch, k++) {
            size_t n = t->n - i < batch ? t->n - i : batch;

            gpu_ids_wait(b[k % N_SLOTS]);
            if (gpu_ids_submit(b[k % N_SLOTS], s[k % N_SLOTS], t->data,
                               t->offsets + i, t->hdrs + i, n, v + i)) {
                fprintf(stderr, "ids-bench: submit failed\n");
                return false;
            }
        }
    }
    for (int j = 0; j < N_SLOTS; j++) {
        gpu_ids_wait(b[j]);
    }
    return true;
}

/* A matcher with 'cfg' and a batch of the first 'n' packets of 't' (at
 * most t->n: '*n' is set to what was taken), its own buffers filled with
 * them, for the submission tables below.  Returns false on failure. */
static bool
small_batch_create(const struct gpu_ids_ruleset *rs,
                   const struct traffic *t, size_t *n,
                   const struct gpu_ids_matcher_config *cfg,
                   struct gpu_ids_matcher **m, struct gpu_ids_batch **b,
                   struct gpu_ids_batch_buffers *bufs)
{
    size_t bytes;

    *n = *n < t->n ? *n : t->n;
    bytes = t->offsets[*n] - t->offsets[0];
    if (gpu_ids_matcher_create(rs, cfg, m)) {
        return false;
    }
    if (gpu_ids_batch_create(*m, *n, bytes, b)
        || gpu_ids_batch_buffers(*b, bufs)) {
        gpu_ids_matcher_destroy(*m);
        return false;
    }
    memcpy(bufs->data, t->data + t->offsets[0], bytes);
    for (size_t i = 0; i <= *n; i++) {
        bufs->offsets[i] = t->offsets[i] - t->offsets[0];
    }
    memcpy(bufs->hdrs, t->hdrs, *n * sizeof *bufs->hdrs);
    return true;
}

/* --device-launch: submit_cost()'s graphs launched by the device. */
static bool device_launch;

/* What one submission of 'n' packets (the first of 't') costs the
 * submitting thread, as a switch's PMD thread pays it for each gather:
 * runtime calls (each microseconds on the H100 machine,
 * bench/cuda-call-cost.cu) and the wall time of gpu_ids_submit() and of
 * the round trip, with the batch's own buffers (one copy each way) or
 * the caller's.  Returns false if a submission failed. */
static bool
submit_cost(const struct gpu_ids_ruleset *rs, const struct traffic *t,
            size_t n, bool own, bool kernel_by_kernel)
{
    struct gpu_ids_matcher_config cfg;
    struct gpu_ids_matcher_stats before, after;
    struct gpu_ids_batch_buffers bufs;
    struct gpu_ids_matcher *m;
    struct gpu_ids_batch *b;
    struct gpu_ids_verdict *v;
    const int rounds = 2000, warm = 20;
    double submit_s = 0, start = 0;

    gpu_ids_matcher_config_init(&cfg);
    cfg.backend = GPU_IDS_BACKEND_CUDA;
    cfg.kernel_by_kernel = kernel_by_kernel;
    cfg.device_launch = device_launch;
    if (!small_batch_create(rs, t, &n, &cfg, &m, &b, &bufs)) {
        return false;
    }
    v = gpu_host_alloc(n * sizeof *v);
    if (!v) {
        gpu_ids_batch_destroy(b);
        gpu_ids_matcher_destroy(m);
        return false;
    }
    for (int r = 0; r < warm + rounds; r++) {
        double t0;

        if (r == warm) {
            gpu_ids_matcher_get_stats(m, &before);
            start = now();
            submit_s = 0;
        }
        t0 = now();
        if (own ? gpu_ids_submit(b, NULL, bufs.data, bufs.offsets,
                                 bufs.hdrs, n, bufs.verdicts)
            : gpu_ids_submit(b, NULL, t->data, t->offsets, t->hdrs, n, v)) {
            fprintf(stderr, "ids-bench: submit failed\n");
            return false;
        }
        submit_s += now() - t0;
        gpu_ids_wait(b);
    }
    double wall = now() - start;
    gpu_ids_matcher_get_stats(m, &after);
    printf("%5zu packets (%7zu B), %-22s %11.2f %8.1f us %8.1f us\n",
           n, (size_t) (t->offsets[n] - t->offsets[0]),
           !own ? "caller's buffers"
           : kernel_by_kernel ? "own, kernel by kernel" : "own, graph",
           (double) (after.n_runtime_calls - before.n_runtime_calls)
           / (after.n_batches - before.n_batches),
           submit_s * 1e6 / rounds, wall * 1e6 / rounds);
    gpu_ids_batch_destroy(b);
    gpu_ids_matcher_destroy(m);
    gpu_host_free(v);
    return true;
}

/* Whether the device overlaps small scans: 'k' batches of 'n' packets
 * (each its own graph, and with the device's launch its own scheduler,
 * whose launches are fire-and-forget) submitted back to back, then all
 * waited for; the mean time of a round against one batch's round trip.
 * A switch could keep that many gathers in flight, each submitted sooner
 * and so holding its packets for less time, only if the device runs them
 * side by side.  Returns false if a submission failed. */
static bool
submit_overlap(const struct gpu_ids_ruleset *rs, const struct traffic *t,
               size_t n, size_t k)
{
    enum { MAX_K = 8 };
    struct gpu_ids_matcher_config cfg;
    struct gpu_ids_batch_buffers bufs[MAX_K];
    struct gpu_ids_batch *b[MAX_K] = { NULL };
    struct gpu_ids_matcher *m;
    const int rounds = 1000, warm = 20;
    double start = 0;
    bool ok = true;

    if (k < 1 || k > MAX_K) {
        return false;
    }
    gpu_ids_matcher_config_init(&cfg);
    cfg.backend = GPU_IDS_BACKEND_CUDA;
    cfg.device_launch = device_launch;
    if (!small_batch_create(rs, t, &n, &cfg, &m, &b[0], &bufs[0])) {
        return false;
    }
    for (size_t j = 1; ok && j < k; j++) {
        ok = (!gpu_ids_batch_create(m, n, t->offsets[n] - t->offsets[0],
                                    &b[j])
              && !gpu_ids_batch_buffers(b[j], &bufs[j]));
        if (ok) {
            memcpy(bufs[j].data, bufs[0].data, t->offsets[n] - t->offsets[0]);
            memcpy(bufs[j].offsets, bufs[0].offsets,
                   (n + 1) * sizeof *bufs[j].offsets);
            memcpy(bufs[j].hdrs, bufs[0].hdrs, n * sizeof *bufs[j].hdrs);
        }
    }
    for (int r = 0; ok && r < warm + rounds; r++) {
        if (r == warm) {
            start = now();
        }
        for (size_t j = 0; ok && j < k; j++) {
            ok = !gpu_ids_submit(b[j], NULL, bufs[j].data, bufs[j].offsets,
                                 bufs[j].hdrs, n, bufs[j].verdicts);
        }
        for (size_t j = 0; j < k; j++) {
            gpu_ids_wait(b[j]);
        }
    }
    if (ok) {
        printf("%5zu packets x %zu in flight, %-13s round %8.1f us\n", n,
               k, device_launch ? "device launch" : "host launch",
               (now() - start) * 1e6 / rounds);
    } else {
        fprintf(stderr, "ids-bench: overlap: a batch or submission "
                "failed\n");
    }
    for (size_t j = 0; j < k; j++) {
        gpu_ids_batch_destroy(b[j]);
    }
    gpu_ids_matcher_destroy(m);
    return ok;
}

/* Where the round trip of one submission of 'n' packets goes, kernel by
 * kernel with profiling events: the scan (from the first event, after
 * the input is on the device), the confirm kernel, the rules kernel, and
 * the rest of the wall time (copies, memsets, the verdict kernel, launch
 * and synchronisation gaps).  Returns false if a submission failed. */
static bool
submit_split(const struct gpu_ids_ruleset *rs, const struct traffic *t,
             size_t n)
{
    struct gpu_ids_matcher_config cfg;
    struct gpu_ids_matcher_stats before, after;
    struct gpu_ids_batch_buffers bufs;
    struct gpu_ids_matcher *m;
    struct gpu_ids_batch *b;
    const int rounds = 500, warm = 20;
    double start = 0;

    gpu_ids_matcher_config_init(&cfg);
    cfg.backend = GPU_IDS_BACKEND_CUDA;
    cfg.kernel_by_kernel = true;
    cfg.profile = true;
    if (!small_batch_create(rs, t, &n, &cfg, &m, &b, &bufs)) {
        return false;
    }
    for (int r = 0; r < warm + rounds; r++) {
        if (r == warm) {
            gpu_ids_matcher_get_stats(m, &before);
            start = now();
        }
        if (gpu_ids_submit(b, NULL, bufs.data, bufs.offsets, bufs.hdrs, n,
                           bufs.verdicts)) {
            fprintf(stderr, "ids-bench: submit failed\n");
            gpu_ids_batch_destroy(b);
            gpu_ids_matcher_destroy(m);
            return false;
        }
        gpu_ids_wait(b);
    }
    double wall_us = (now() - start) * 1e6 / rounds;
    gpu_ids_matcher_get_stats(m, &after);
    double scan_us = (after.scan_ns - before.scan_ns) * 1e-3 / rounds;
    double confirm_us = (after.confirm_ns - before.confirm_ns) * 1e-3
                        / rounds;
    double check_us = (after.check_ns - before.check_ns) * 1e-3 / rounds;
    printf("%5zu packets (%7zu B), kernel by kernel: round trip %7.1f us; "
           "scan %6.1f, confirm %6.1f, rules %6.1f, rest %6.1f us; "
           "%.1f hits a packet\n", n,
           (size_t) (t->offsets[n] - t->offsets[0]), wall_us, scan_us,
           confirm_us, check_us - confirm_us, wall_us - scan_us - check_us,
           (double) (after.n_hits - before.n_hits)
           / (after.n_packets - before.n_packets));
    gpu_ids_batch_destroy(b);
    gpu_ids_matcher_destroy(m);
    return true;
}

int
main(int argc, char **argv)
{
    char default_rules[1024];
    const char *data_dir = getenv("OVSGPU_DATA");
    const char *rules = NULL;
    size_t n_packets = 262144, batch = 65536;
    double match_frac = 0.01;
    uint64_t seed = 1;
    int iters = 5, threads = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t chunk = 64;          /* The library's default. */
    size_t min_anchor = 4;
    bool strict = false;
    char *latency = NULL;
    bool overlap = false;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!strcmp(a, "--strict")) {
            strict = true;
            continue;
        }
        if (!strcmp(a, "--device-launch")) {
            device_launch = true;
            continue;
        }
        if (!strcmp(a, "--overlap")) {
            /* With --latency: 1, 2 and 4 batches in flight, with the
             * host's and the device's launch. */
            overlap = true;
            continue;
        }
        if (!v) {
            return usage();
        }
        i++;
        if (!strcmp(a, "--rules")) {
            rules = v;
        } else if (!strcmp(a, "--packets")) {
            n_packets = strtoull(v, NULL, 0);
        } else if (!strcmp(a, "--batch")) {
            batch = strtoull(v, NULL, 0);
        } else if (!strcmp(a, "--match")) {
            match_frac = atof(v);
        } else if (!strcmp(a, "--seed")) {
            seed = strtoull(v, NULL, 0);
        } else if (!strcmp(a, "--iters")) {
            iters = atoi(v);
        } else if (!strcmp(a, "--threads")) {
            threads = atoi(v);
        } else if (!strcmp(a, "--chunk")) {
            chunk = atoi(v);
        } else if (!strcmp(a, "--min-anchor")) {
            min_anchor = atoi(v);
        } else if (!strcmp(a, "--latency")) {
            latency = strdup(v);

        } else {
            return usage();
        }
    }
    if (!rules) {
        snprintf(default_rules, sizeof default_rules,
                 "%s/snort-community/community.rules",
                 data_dir && *data_dir ? data_dir : OVSGPU_DEFAULT_DATA);
        rules = default_rules;
    }
    if (!n_packets || !batch || iters < 1 || threads < 1) {
        return usage();
    }
    rng_state = seed;

    printf("command:");
    for (int i = 0; i < argc; i++) {
        printf(" %s", argv[i]);
    }
    printf("\n");
    struct gpu_device_info info;
    bool cuda = gpu_ids_cuda_available();
    if (cuda && !gpu_device_query(0, &info)) {
        printf("device: %s (cc %d.%d, %d SMs)\n", info.name, info.cc_major,
               info.cc_minor, info.multiprocessors);
    } else {
        printf("device: none (CPU backend only)\n");
    }
    printf("cpu cores online: %ld\n", sysconf(_SC_NPROCESSORS_ONLN));

    /* Rules. */
    struct gpu_ids_load_options o = { .partial = !strict,
                                      .commented = !strict };
    struct gpu_ids_ruleset *rs;
    struct gpu_ids_ruleset_stats st;
    char err[512];
    size_t dropped;
    char *text = filter_rules(rules, min_anchor, &dropped);
    if (!text) {
        fprintf(stderr, "ids-bench: cannot read %s\n", rules);
        return 1;
    }
    printf("rules: dropped %zu rules whose longest content is under %zu "
           "bytes (--min-anchor)\n", dropped, min_anchor);
    double t0 = now();
    if (gpu_ids_ruleset_load_string(text, rules, &o, &rs, err,
                                    sizeof err)) {
        fprintf(stderr, "ids-bench: %s\n", err);
        return 1;
    }
    free(text);
    gpu_ids_ruleset_get_stats(rs, &st);
    printf("rules: %s: %u rules, %u loaded (%u partial), %u patterns, "
           "%u states x %u classes, %.1f MB tables, compiled in %.2f s\n",
           rules, st.n_rules, st.n_loaded, st.n_partial, st.n_patterns,
           st.n_states, st.n_classes, st.table_bytes / 1e6, now() - t0);
    if (!st.n_loaded) {
        fprintf(stderr, "ids-bench: no rules loaded\n");
        return 1;
    }

    /* Traffic. */
    struct traffic t;
    size_t cap = n_packets * 1500 + 8;
    t.data = gpu_host_alloc(cap);
    t.offsets = gpu_host_alloc((n_packets + 1) * sizeof *t.offsets);
    t.hdrs = gpu_host_alloc(n_packets * sizeof *t.hdrs);
    if (!t.data || !t.offsets || !t.hdrs) {
        fprintf(stderr, "ids-bench: out of memory\n");
        return 1;
    }
    t.n = n_packets;
    t.offsets[0] = 0;
    size_t n_planted = 0, n64 = 0, nbig = 0;
    for (size_t i = 0; i < n_packets; i++) {
        size_t len = packet_size();
        uint8_t *d = t.data + t.offsets[i];

        n64 += len == 64;
        nbig += len >= 1400;
        fill_payload(d, len);
        t.hdrs[i].proto = below(10) ? 6 : 17;
        t.hdrs[i].flags = 0;
        t.hdrs[i].payload_len = 0;
        t.hdrs[i].sport = 1024 + below(60000);
        t.hdrs[i].dport = below(2) ? 80 : 1024 + below(60000);
        if (below(1000000) < match_frac * 1e6) {
            n_planted += plant_rule(rs, below(st.n_loaded), d, len,
                                    &t.hdrs[i]);
        }
        t.offsets[i + 1] = t.offsets[i] + len;
    }
    t.bytes = t.offsets[n_packets];
    printf("traffic: %zu packets, %.1f MB payload, mean %.0f B, %.0f%% "
           "64 B, %.0f%% >= 1400 B, %zu with a rule planted (seed %"
           PRIu64 ")\n", t.n, t.bytes / 1e6, (double) t.bytes / t.n,
           100.0 * n64 / t.n, 100.0 * nbig / t.n, n_planted, seed);

    if (latency) {
        /* Only the small submissions a switch makes: each size's round
         * trip as one graph, then split kernel by kernel. */
        char *save = NULL;

        if (!cuda) {
            printf("(CUDA: no device or no CUDA build)\n");
            return 0;
        }
        printf("\nround trip of one submission (CUDA, remap, mean of "
               "rounds):\n%-48s %11s %11s %11s\n", "batch", "calls",
               "submit", "round trip");
        for (char *tok = strtok_r(latency, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            size_t n = strtoull(tok, NULL, 0);

            if (!n || !submit_cost(rs, &t, n, true, false)
                || !submit_split(rs, &t, n)) {
                return 1;
            }
            bool asked = device_launch;

            for (size_t k = 1; overlap && k <= 4; k *= 2) {
                for (int launch = 0; launch < 2; launch++) {
                    device_launch = launch;
                    if (!submit_overlap(rs, &t, n, k)) {
                        return 1;
                    }
                }
            }
            device_launch = asked;
        }
        free(latency);
        return 0;
    }

    /* CPU backend, one core: the reference verdicts too. */
    struct gpu_ids_matcher_config cfg;
    struct gpu_ids_matcher *m;
    struct gpu_ids_verdict *ref = gpu_host_alloc(t.n * sizeof *ref);
    gpu_ids_matcher_config_init(&cfg);
    cfg.backend = GPU_IDS_BACKEND_CPU;
    if (gpu_ids_matcher_create(rs, &cfg, &m)) {
        fprintf(stderr, "ids-bench: cannot create the CPU matcher\n");
        return 1;
    }
    int cpu_iters = iters > 2 ? 2 : iters;
    t0 = now();
    for (int it = 0; it < cpu_iters; it++) {
        gpu_ids_match(m, t.data, t.offsets, t.hdrs, t.n, ref);
    }
    double cpu_gbps = t.bytes * 8.0 * cpu_iters / (now() - t0) / 1e9;
    size_t n_matched = 0;
    for (size_t i = 0; i < t.n; i++) {
        n_matched += ref[i].n_matches > 0;
    }
    struct gpu_ids_matcher_stats ms;
    gpu_ids_matcher_get_stats(m, &ms);
    gpu_ids_matcher_destroy(m);
    printf("verdicts: %zu packets (%.2f%%) match a rule; %.2f automaton "
           "hits per packet\n", n_matched, 100.0 * n_matched / t.n,
           (double) ms.n_hits / ms.n_packets);

    printf("\n%-44s %10s %10s %8s\n", "matcher", "Gbit/s", "vs HS 1c",
           "CFE");
    double hs1 = 0;
#ifdef HAVE_HYPERSCAN
    {
        uint32_t np = gpu_ids_ruleset_n_patterns(rs);
        const char **exprs = calloc(np, sizeof *exprs);
        size_t *lens = calloc(np, sizeof *lens);
        unsigned int *flags = calloc(np, sizeof *flags);
        unsigned int *ids = calloc(np, sizeof *ids);
        hs_database_t *db = NULL;
        hs_compile_error_t *cerr = NULL;
        uint64_t matches;

        for (uint32_t i = 0; i < np; i++) {
            const uint8_t *b;
            uint32_t len;
            bool nocase;

            gpu_ids_pattern_get(rs, i, &b, &len, &nocase);
            exprs[i] = (const char *) b;
            lens[i] = len;
            flags[i] = HS_FLAG_SINGLEMATCH | (nocase ? HS_FLAG_CASELESS : 0);
            ids[i] = i;
        }
        if (hs_compile_lit_multi(exprs, flags, ids, lens, np, HS_MODE_BLOCK,
                                 NULL, &db, &cerr) != HS_SUCCESS) {
            fprintf(stderr, "ids-bench: hs_compile_lit_multi: %s\n",
                    cerr ? cerr->message : "?");
            return 1;
        }
        hs1 = run_hyperscan(db, &t, 1, cpu_iters, &matches);
        printf("%-44s %10.2f %10.2f %8s\n", "Hyperscan 5 literals, 1 core",
               hs1, 1.0, "-");
        if (threads > 1) {
            char name[64];
            double hsn = run_hyperscan(db, &t, threads, iters, &matches);

            snprintf(name, sizeof name, "Hyperscan 5 literals, %d threads",
                     threads);
            printf("%-44s %10.2f %10.2f %8s\n", name, hsn, hsn / hs1, "-");
        }
        hs_free_database(db);
        free(exprs);
        free(lens);
        free(flags);
        free(ids);
    }
#else
    printf("(Hyperscan: not built in; install libhyperscan-dev and "
           "re-run configure)\n");
#endif
    printf("%-44s %10.2f %10.2f %8s\n", "ovs-gpu CPU backend, 1 core",
           cpu_gbps, hs1 ? cpu_gbps / hs1 : 0, "-");

    if (!cuda) {
        printf("(CUDA: no device or no CUDA build)\n");
        return 0;
    }

    /* CUDA, with and without remapping. */
    for (int remap = 1; remap >= 0; remap--) {
        struct gpu_ids_batch *b[N_SLOTS];
        struct gpu_stream *s[N_SLOTS];
        struct gpu_ids_verdict *v = gpu_host_alloc(t.n * sizeof *v);
        double cfe = gpu_ids_scan_cfe(t.offsets, t.n, remap, chunk,
                                      st.max_depth);
        char name[96];

        gpu_ids_matcher_config_init(&cfg);
        cfg.backend = GPU_IDS_BACKEND_CUDA;
        cfg.remap = remap;
        cfg.chunk_bytes = chunk;
        cfg.profile = true;
        if (gpu_ids_matcher_create(rs, &cfg, &m)) {
            fprintf(stderr, "ids-bench: cannot create the CUDA matcher\n");
            return 1;
        }
        for (int k = 0; k < N_SLOTS; k++) {
            if (gpu_ids_batch_create(m, batch, batch * 1500, &b[k])
                || gpu_stream_create(&s[k])) {
                fprintf(stderr, "ids-bench: cannot create batches\n");
                return 1;
            }
        }

        /* End-to-end: batches rotate over N_SLOTS streams so that one's
         * copy in, another's kernels and a third's copy out overlap.  The
         * first pass warms up and is checked against the CPU; the timed
         * passes follow one another without draining in between, as
         * traffic would. */
        if (!e2e_passes(&t, batch, 1, b, s, v)) {
            return 1;
        }
        size_t bad = 0;
        for (size_t i = 0; i < t.n; i++) {
            bad += (v[i].sid != ref[i].sid
                    || v[i].n_matches != ref[i].n_matches);
        }
        printf("check remap=%d: %zu of %zu verdicts differ from the "
               "CPU backend\n", remap, bad, t.n);

        double e2e = now();
        if (!e2e_passes(&t, batch, iters, b, s, v)) {
            return 1;
        }
        e2e = now() - e2e;
        double e2e_gbps = t.bytes * 8.0 * iters / e2e / 1e9;

        /* Kernel-only: the last batch's data stays on the device; use a
         * batch of all packets instead when it fits. */
        struct gpu_ids_batch *all;
        double kern_gbps = 0;
        if (!gpu_ids_batch_create(m, t.n, t.bytes, &all)
            && !gpu_ids_submit(all, s[0], t.data, t.offsets, t.hdrs, t.n,
                               v)
            && !gpu_ids_wait(all)) {
            gpu_ids_resubmit(all, s[0]);
            gpu_ids_wait(all);
            struct gpu_ids_matcher_stats before;
            gpu_ids_matcher_get_stats(m, &before);
            double start = now();
            for (int it = 0; it < iters * 4; it++) {
                gpu_ids_resubmit(all, s[0]);
                gpu_ids_wait(all);
            }
            double wall = now() - start;
            int passes = iters * 4;
            kern_gbps = t.bytes * 8.0 * passes / wall / 1e9;
            gpu_ids_matcher_get_stats(m, &ms);
            double scan_s = (ms.scan_ns - before.scan_ns) * 1e-9;
            double check_s = (ms.check_ns - before.check_ns) * 1e-9;
            double confirm_s = (ms.confirm_ns - before.confirm_ns) * 1e-9;
            /* "other": what the wall clock of a pass holds beyond the
             * timed kernels (memsets, the verdict kernel, launch and
             * synchronisation gaps). */
            printf("remap=%d kernel split per pass of %.1f MB: scan %.3f ms "
                   "(%.1f Gbit/s), check %.3f ms (confirm %.3f + rules "
                   "%.3f), other %.3f ms, total %.3f ms\n", remap,
                   t.bytes / 1e6, scan_s * 1e3 / passes,
                   t.bytes * 8.0 * passes / scan_s / 1e9,
                   check_s * 1e3 / passes, confirm_s * 1e3 / passes,
                   (check_s - confirm_s) * 1e3 / passes,
                   (wall - scan_s - check_s) * 1e3 / passes,
                   wall * 1e3 / passes);
            gpu_ids_batch_destroy(all);
        }
        gpu_ids_matcher_get_stats(m, &ms);

        snprintf(name, sizeof name, "CUDA %s, kernel-only",
                 remap ? "remap (chunks)" : "1 packet/thread");
        printf("%-44s %10.2f %10.2f %7.1f%%\n", name, kern_gbps,
               hs1 ? kern_gbps / hs1 : 0, 100 * cfe);
        snprintf(name, sizeof name, "CUDA %s, end-to-end",
                 remap ? "remap (chunks)" : "1 packet/thread");
        printf("%-44s %10.2f %10.2f %7.1f%%\n", name, e2e_gbps,
               hs1 ? e2e_gbps / hs1 : 0, 100 * cfe);
        printf("  (%" PRIu64 " batches, %" PRIu64 " CPU fallbacks, "
               "%.2f runtime calls per batch with profiling events)\n",
               ms.n_batches, ms.n_fallbacks,
               ms.n_batches ? (double) ms.n_runtime_calls / ms.n_batches
                            : 0.0);
        for (int j = 0; j < N_SLOTS; j++) {
            gpu_ids_batch_destroy(b[j]);
            gpu_stream_destroy(s[j]);
        }
        gpu_ids_matcher_destroy(m);
        gpu_host_free(v);
    }
    printf("\nGbit/s count payload bytes only; CFE is the scan loop's "
           "control-flow efficiency for this layout (warps of 32).\n");

    /* The switch's submissions: drop mode sends small gathers every
     * gpu-max-hold-us, alert mode gathers of up to 4096 packets. */
    printf("\nsubmission cost to the calling thread (CUDA, remap, no "
           "profiling; mean of 2000 submit+wait rounds; calls: runtime "
           "calls that queue a submission, its wait's sync apart):\n"
           "%-48s %11s %11s %11s\n", "batch", "calls", "submit",
           "round trip");
    static const size_t sizes[] = { 32, 256, 1024, 4096 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        /* Own buffers as the batch's graph, then kernel by kernel; the
         * caller's. */
        for (int mode = 0; mode < 3; mode++) {
            if (!submit_cost(rs, &t, sizes[k], mode < 2, mode == 1)) {
                return 1;
            }
        }
    }
    return 0;
}
