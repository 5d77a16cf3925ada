/*
 * index-bench: records per second of gpu_services/index's builders, and
 * query latency, against their peers in one run on one machine.
 *
 * Build throughput, one attribute at a time (a record = one value of one
 * attribute, as in the seed), for WAH and PLWAH:
 *   - uniform random values of cardinality 2^8 .. 2^16 (the seed's sweep);
 *   - real header fields (address bytes, ports, protocol, TCP flags) drawn
 *     from the ClassBench traces in data/classbench.
 * Each on the same values:
 *   - the CUDA builder kernel-only (values resident on the device, result
 *     left there: GPU_INDEX_BUILD_RESIDENT), and end-to-end (pinned values
 *     in, keys/offsets/words out to pinned host memory, reused between
 *     batches as the recorder does);
 *   - the CPU builder (the seed's baseline, Lemire's online WAH) on one
 *     core, and on every core (each thread indexing its own slice, as one
 *     segment per core would);
 *   - CRoaring building one bitmap per value from the same values, one
 *     core (rows grouped by value with a counting sort, then
 *     roaring_bitmap_of_ptr and run_optimize per value).
 * The CUDA output is compared byte for byte with the CPU builder's.
 *
 * Query latency: a segment index of ClassBench records, a few queries
 * evaluated on the compressed columns, against a brute-force scan of the
 * records (same answers checked).
 *
 * Usage: index-bench [--rows N] [--iters N] [--threads N] [--seed S]
 *                    [--query-rows N] [--quick]
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

#ifdef HAVE_ROARING
#include <roaring/roaring.h>
#endif

#include "gpu_services/index/gpu-index.h"

static double
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
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

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint32_t n_rows = 1u << 24;
static int iters = 10;
static int n_threads;
static uint32_t query_rows = 1u << 20;
static struct gpu_index_builder *gpu;   /* NULL without a device. */
static struct gpu_index_builder *cpu;
static uint32_t *values;                /* Pinned when a device exists. */
static int n_mismatches;

/* ---- CPU on every core. ---- */

struct cpu_job {
    const uint32_t *v;
    uint32_t n;
    unsigned int bits;
    enum gpu_index_encoding enc;
    int error;
};

/* One builder and one output per thread, kept between runs as the CPU
 * builder's own state is, so that no run pays for first-touch faults. */
static struct gpu_index_builder *tbuilders[256];
static struct gpu_index_bitmaps toutputs[256];

struct cpu_slot {
    struct cpu_job job;
    int t;
};

static void *
cpu_slot_thread(void *slot_)
{
    struct cpu_slot *s = slot_;
    struct cpu_job *job = &s->job;

    if (!tbuilders[s->t]) {
        job->error = gpu_index_builder_create(GPU_INDEX_BACKEND_CPU,
                                              n_rows, &tbuilders[s->t],
                                              NULL, 0);
        gpu_index_bitmaps_init(&toutputs[s->t]);
        if (job->error) {
            return NULL;
        }
    }
    job->error = gpu_index_build(tbuilders[s->t], job->v, job->n, job->bits,
                                 job->enc, 0, &toutputs[s->t], NULL);
    return NULL;
}

static double
cpu_all_cores_ms(const uint32_t *v, uint32_t n, unsigned int bits,
                 enum gpu_index_encoding enc)
{
    pthread_t th[256];
    struct cpu_slot jobs[256];
    double t0 = now_ms();
    int t;

    for (t = 0; t < n_threads; t++) {
        uint32_t lo = (uint64_t) n * t / n_threads;
        uint32_t hi = (uint64_t) n * (t + 1) / n_threads;

        jobs[t].job = (struct cpu_job) { v + lo, hi - lo, bits, enc, 0 };
        jobs[t].t = t;
        pthread_create(&th[t], NULL, cpu_slot_thread, &jobs[t]);
    }
    for (t = 0; t < n_threads; t++) {
        pthread_join(th[t], NULL);
    }
    return now_ms() - t0;
}

/* ---- CRoaring. ---- */

static double
roaring_ms(const uint32_t *v, uint32_t n, unsigned int bits,
           uint64_t *bytes)
{
#ifdef HAVE_ROARING
    uint32_t card = 1u << bits, i;
    roaring_bitmap_t **bm = calloc(card, sizeof *bm);
    uint32_t *start = calloc(card + 1, sizeof *start);
    uint32_t *rows_by_value = malloc((size_t) n * sizeof *rows_by_value);
    double t0 = now_ms(), t;

    /* The strong way to use CRoaring here: group the rows by value (a
     * counting sort), then build each value's bitmap from its sorted rows
     * in one call.  Adding rows one by one in row order is several times
     * slower at high cardinality (a container per 2^16 rows per value). */
    for (i = 0; i < n; i++) {
        start[v[i] + 1]++;
    }
    for (i = 0; i < card; i++) {
        start[i + 1] += start[i];
    }
    for (i = 0; i < n; i++) {
        rows_by_value[start[v[i]]++] = i;
    }
    for (i = card; i > 0; i--) {
        start[i] = start[i - 1];
    }
    start[0] = 0;
    for (i = 0; i < card; i++) {
        if (start[i + 1] > start[i]) {
            bm[i] = roaring_bitmap_of_ptr(start[i + 1] - start[i],
                                          rows_by_value + start[i]);
            roaring_bitmap_run_optimize(bm[i]);
        }
    }
    t = now_ms() - t0;
    *bytes = 0;
    for (i = 0; i < card; i++) {
        if (bm[i]) {
            *bytes += roaring_bitmap_portable_size_in_bytes(bm[i]);
            roaring_bitmap_free(bm[i]);
        }
    }
    free(bm);
    free(start);
    free(rows_by_value);
    return t;
#else
    *bytes = 0;
    return 0;
#endif
}

/* ---- One configuration. ---- */

struct row {
    char name[40];
    const char *enc;
    double gpu_kernel, gpu_e2e, h2d, kern, d2h;   /* ms. */
    double cpu1, cpuN, roar;                       /* ms. */
    uint64_t bytes, roar_bytes;
    bool same;
};

static struct row rows[64];
static int n_rowsout;

static double
mrps(double ms)
{
    return ms > 0 ? n_rows / ms / 1e3 : 0;
}

static void
run_config(const char *name, unsigned int bits, enum gpu_index_encoding enc,
           bool quick, bool with_roaring)
{
    struct row *r = &rows[n_rowsout++];
    struct gpu_index_bitmaps cb, gb;
    double t[64];
    int i, cpu_iters = quick ? 1 : 3;

    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->enc = gpu_index_encoding_name(enc);
    gpu_index_bitmaps_init(&cb);
    gpu_index_bitmaps_init_pinned(&gb);     /* As the recorder keeps it. */

    /* Untimed first runs: the builders' memory gets touched once. */
    gpu_index_build(cpu, values, n_rows, bits, enc, 0, &cb, NULL);
    cpu_all_cores_ms(values, n_rows, bits, enc);
    for (i = 0; i < cpu_iters; i++) {
        double t0 = now_ms();

        if (gpu_index_build(cpu, values, n_rows, bits, enc, 0, &cb, NULL)) {
            fprintf(stderr, "CPU build failed\n");
            exit(1);
        }
        t[i] = now_ms() - t0;
    }
    r->cpu1 = median(t, cpu_iters);
    r->bytes = 4ull * cb.n_words;
    for (i = 0; i < cpu_iters; i++) {
        t[i] = cpu_all_cores_ms(values, n_rows, bits, enc);
    }
    r->cpuN = median(t, cpu_iters);
    if (with_roaring) {
        r->roar = roaring_ms(values, n_rows, bits, &r->roar_bytes);
    }

    if (gpu) {
        struct gpu_index_build_times bt;
        double h[64], k[64], d[64];
        int warm;

        for (warm = 0; warm < 2; warm++) {
            gpu_index_build(gpu, values, n_rows, bits, enc, 0, &gb, NULL);
        }
        r->same = gpu_index_bitmaps_equal(&cb, &gb);
        if (!r->same) {
            n_mismatches++;
        }
        for (i = 0; i < iters; i++) {
            gpu_index_build(gpu, values, n_rows, bits, enc, 0, &gb, &bt);
            t[i] = bt.total_ms;
            h[i] = bt.h2d_ms;
            k[i] = bt.kernel_ms;
            d[i] = bt.d2h_ms;
        }
        r->gpu_e2e = median(t, iters);
        r->h2d = median(h, iters);
        r->kern = median(k, iters);
        r->d2h = median(d, iters);
        for (i = 0; i < iters; i++) {
            gpu_index_build(gpu, NULL, n_rows, bits, enc,
                            GPU_INDEX_BUILD_RESIDENT, &gb, &bt);
            t[i] = bt.kernel_ms;
        }
        r->gpu_kernel = median(t, iters);
    }
    printf("%-14s %-5s  gpu kernel %8.1f  e2e %8.1f (h2d %.2f kern %.2f "
           "d2h %.2f ms)  cpu1 %7.1f  cpu%d %7.1f  roaring %7.1f Mrec/s  "
           "index %.2f B/rec%s%s\n", r->name, r->enc, mrps(r->gpu_kernel),
           mrps(r->gpu_e2e), r->h2d, r->kern, r->d2h, mrps(r->cpu1),
           n_threads, mrps(r->cpuN), mrps(r->roar),
           (double) r->bytes / n_rows,
           gpu ? (r->same ? "  gpu==cpu" : "  GPU != CPU!") : "",
           r->roar_bytes ? "" : "");
    fflush(stdout);
    gpu_index_bitmaps_free(&cb);
    gpu_index_bitmaps_free(&gb);
}

/* ---- ClassBench. ---- */

struct cb_hdr {
    uint32_t src, dst;
    uint16_t sport, dport;
    uint8_t proto, flags;
};

static struct cb_hdr *traces;
static size_t n_traces;

static void
load_classbench(void)
{
    static const char *names[] = { "acl1", "fw1", "ipc1" };
    const char *d = getenv("OVSGPU_DATA");
    size_t cap = 0;

    d = d && *d ? d : OVSGPU_DEFAULT_DATA;
    for (size_t i = 0; i < 3; i++) {
        char cmd[1200], path[1024], line[256];
        FILE *f;

        /* The traces are in the repository: a missing one is an error, by
         * name, not a benchmark quietly run on fewer headers. */
        snprintf(path, sizeof path, "%s/classbench/%s_10000_trace.gz", d,
                 names[i]);
        if (access(path, R_OK)) {
            fprintf(stderr, "index-bench: missing data file %s (OVSGPU_DATA "
                    "names another folder)\n", path);
            exit(1);
        }
        snprintf(cmd, sizeof cmd, "gzip -dc '%s'", path);
        f = popen(cmd, "r");
        while (f && fgets(line, sizeof line, f)) {
            unsigned long long s, t, sp, dp, pr, fl;

            if (sscanf(line, "%llu %llu %llu %llu %llu %llu", &s, &t, &sp,
                       &dp, &pr, &fl) != 6) {
                continue;
            }
            if (n_traces == cap) {
                cap = cap ? 2 * cap : 65536;
                traces = realloc(traces, cap * sizeof *traces);
            }
            traces[n_traces++] = (struct cb_hdr) {
                s, t, sp, dp, pr,
                /* ClassBench flags are 16-bit masks; keep TCP's 8. */
                (uint8_t) (fl >> 8)
            };
        }
        if (f) {
            pclose(f);
        }
    }
    printf("ClassBench: %zu trace headers from %s/classbench "
           "(acl1, fw1, ipc1)\n", n_traces, d);
}

static void
field_values(int field)
{
    for (uint32_t i = 0; i < n_rows; i++) {
        const struct cb_hdr *h = &traces[rnd() % n_traces];

        switch (field) {
        case 0: values[i] = h->src >> 24; break;
        case 1: values[i] = (h->src >> 16) & 0xff; break;
        case 2: values[i] = (h->src >> 8) & 0xff; break;
        case 3: values[i] = h->src & 0xff; break;
        case 4: values[i] = h->dst >> 24; break;
        case 5: values[i] = h->dst & 0xff; break;
        case 6: values[i] = h->sport; break;
        case 7: values[i] = h->dport; break;
        case 8: values[i] = h->proto; break;
        case 9: values[i] = h->flags; break;
        }
    }
}

static void
make_record(struct gpu_index_record *r, const struct cb_hdr *h, uint64_t ts)
{
    memset(r, 0, sizeof *r);
    r->ts_ns = ts;
    r->in_port = 1 + (h->src & 3);
    r->wire_len = 64 + (h->dst & 1023);
    r->vlan = GPU_INDEX_NO_VLAN;
    r->eth_type = 0x0800;
    r->ip_version = 4;
    r->proto = h->proto;
    r->src[0] = h->src >> 24, r->src[1] = h->src >> 16;
    r->src[2] = h->src >> 8, r->src[3] = h->src;
    r->dst[0] = h->dst >> 24, r->dst[1] = h->dst >> 16;
    r->dst[2] = h->dst >> 8, r->dst[3] = h->dst;
    r->parsed = GPU_INDEX_PARSED_ETH | GPU_INDEX_PARSED_IP;
    if (h->proto == 6 || h->proto == 17) {
        r->sport = h->sport;
        r->dport = h->dport;
        r->tcp_flags = h->proto == 6 ? h->flags : 0;
        r->parsed |= GPU_INDEX_PARSED_L4;
    }
}

static void
bench_queries(void)
{
    struct gpu_index_record *recs = malloc(query_rows * sizeof *recs);
    struct gpu_index_segment_index seg;
    struct gpu_index_builder *b = gpu ? gpu : cpu;
    char qbuf[4][128];
    const char *qs[6];
    double t0, build_ms;
    uint32_t i;

    for (i = 0; i < query_rows; i++) {
        make_record(&recs[i], &traces[rnd() % n_traces],
                    1700000000ull * 1000000000ull + i * 100000ull);
    }
    /* Queries that hit: values taken from the trace. */
    const struct cb_hdr *h = &traces[n_traces / 3];
    snprintf(qbuf[0], sizeof qbuf[0], "src=%u.%u.0.0/16 and dport=%u",
             h->src >> 24, (h->src >> 16) & 255, h->dport);
    snprintf(qbuf[1], sizeof qbuf[1], "dst=%u.0.0.0/8 and tcp",
             h->dst >> 24);
    snprintf(qbuf[2], sizeof qbuf[2], "host=%u.%u.%u.%u",
             h->src >> 24, (h->src >> 16) & 255, (h->src >> 8) & 255,
             h->src & 255);
    qs[0] = qbuf[0];
    qs[1] = qbuf[1];
    qs[2] = qbuf[2];
    qs[3] = "tcp and dport=1000-2000";
    qs[4] = "udp and not (dport=53 or sport=53)";
    qs[5] = "proto=tcp and tcp_flags&syn";

    gpu_index_segment_index_init(&seg);
    t0 = now_ms();
    if (gpu_index_segment_index_build(b, recs, query_rows, GPU_INDEX_PLWAH,
                                      &seg)) {
        fprintf(stderr, "segment build failed\n");
        exit(1);
    }
    build_ms = now_ms() - t0;
    printf("\nQueries on %"PRIu32" ClassBench records (PLWAH, all %d "
           "attributes built in %.1f ms by %s: %.1f M records/s)\n",
           query_rows, GPU_INDEX_N_ATTRS, build_ms,
           gpu_index_builder_describe(b), query_rows / build_ms / 1e3);
    printf("%-48s %9s %11s %11s %8s\n", "query", "matches", "index ms",
           "scan ms", "speedup");
    for (size_t qi = 0; qi < sizeof qs / sizeof qs[0]; qi++) {
        struct gpu_index_query *q;
        char err[200];
        double ti[16], ts[16];
        size_t n = 0, m = 0;
        int k, reps = 7;

        if (gpu_index_query_parse(qs[qi], &q, err, sizeof err)) {
            printf("%s: %s\n", qs[qi], err);
            continue;
        }
        for (k = 0; k < reps; k++) {
            uint32_t *rows_out;

            t0 = now_ms();
            gpu_index_query_eval(q, &seg, &rows_out, &n);
            ti[k] = now_ms() - t0;
            free(rows_out);
            t0 = now_ms();
            m = 0;
            for (i = 0; i < query_rows; i++) {
                m += gpu_index_query_match(q, &recs[i]);
            }
            ts[k] = now_ms() - t0;
        }
        double mi = median(ti, reps), ms = median(ts, reps);
        printf("%-48s %9zu %11.3f %11.3f %7.1fx%s\n", qs[qi], n, mi, ms,
               ms / mi, n == m ? "" : "  MISMATCH");
        if (n != m) {
            n_mismatches++;
        }
        gpu_index_query_destroy(q);
    }
    gpu_index_segment_index_free(&seg);
    free(recs);
}

int
main(int argc, char **argv)
{
    char why[256], cmd[1024] = "";
    bool quick = false;
    int i;

    n_threads = sysconf(_SC_NPROCESSORS_ONLN);
    rng_state = 12345;
    for (i = 0; i < argc; i++) {
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s%s",
                 i ? " " : "", argv[i]);
    }
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!strcmp(a, "--quick")) {
            quick = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "%s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--rows")) {
            n_rows = strtoul(v, NULL, 0);
        } else if (!strcmp(a, "--iters")) {
            iters = atoi(v);
        } else if (!strcmp(a, "--threads")) {
            n_threads = atoi(v);
        } else if (!strcmp(a, "--seed")) {
            rng_state = strtoull(v, NULL, 0);
        } else if (!strcmp(a, "--query-rows")) {
            query_rows = strtoul(v, NULL, 0);
        } else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    iters = iters < 1 ? 1 : iters > 64 ? 64 : iters;
    n_threads = n_threads < 1 ? 1 : n_threads > 256 ? 256 : n_threads;

    if (gpu_index_builder_create(GPU_INDEX_BACKEND_CPU, n_rows, &cpu, why,
                                 sizeof why)) {
        fprintf(stderr, "CPU builder: %s\n", why);
        return 1;
    }
    if (gpu_index_builder_create(GPU_INDEX_BACKEND_CUDA, n_rows, &gpu, why,
                                 sizeof why)) {
        gpu = NULL;
    }
    printf("index-bench: %s\n", cmd);
    printf("device: %s\n", gpu ? gpu_index_builder_describe(gpu)
                               : "none (CUDA builder skipped)");
    printf("peers: CPU builder (online WAH/PLWAH, Lemire et al.) on 1 core "
           "and on %d threads; CRoaring %s, 1 core\n", n_threads,
#ifdef HAVE_ROARING
           "0.2.66"
#else
           "(not built in: skipped)"
#endif
           );
    printf("rows per batch: %"PRIu32", GPU medians of %d runs, CPU of %d; "
           "Mrec/s = million values of one attribute indexed per second\n\n",
           n_rows, iters, quick ? 1 : 3);

    values = gpu_host_alloc((size_t) n_rows * sizeof *values);
    if (!values) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (unsigned int bits = 8; bits <= 16; bits += quick ? 8 : 2) {
        char name[40];

        for (uint32_t r = 0; r < n_rows; r++) {
            values[r] = rnd() & ((1u << bits) - 1);
        }
        snprintf(name, sizeof name, "uniform 2^%u", bits);
        run_config(name, bits, GPU_INDEX_WAH, quick, true);
        run_config(name, bits, GPU_INDEX_PLWAH, quick, false);
    }

    load_classbench();
    if (n_traces) {
        static const char *fname[] = {
            "cb src byte0", "cb src byte1", "cb src byte2", "cb src byte3",
            "cb dst byte0", "cb dst byte3", "cb sport", "cb dport",
            "cb proto", "cb tcp flags"
        };
        static const unsigned int fbits[] = { 8, 8, 8, 8, 8, 8, 16, 16, 8,
                                              8 };

        for (int f = 0; f < 10; f += quick ? 3 : 1) {
            field_values(f);
            run_config(fname[f], fbits[f], GPU_INDEX_PLWAH, quick, true);
        }
        bench_queries();
    }

    printf("\nSummary (Mrec/s; %s)\n", cmd);
    printf("%-14s %-5s %10s %10s %10s %10s %10s %8s %8s\n", "values", "enc",
           "gpu-kern", "gpu-e2e", "cpu-1core", "cpu-all", "roaring",
           "B/rec", "roarB/r");
    for (i = 0; i < n_rowsout; i++) {
        const struct row *r = &rows[i];

        printf("%-14s %-5s %10.1f %10.1f %10.1f %10.1f %10.1f %8.2f %8.2f"
               "%s\n", r->name, r->enc, mrps(r->gpu_kernel),
               mrps(r->gpu_e2e), mrps(r->cpu1), mrps(r->cpuN),
               mrps(r->roar), (double) r->bytes / n_rows,
               (double) r->roar_bytes / n_rows,
               gpu && !r->same ? "  GPU != CPU" : "");
    }
    printf("%s\n", n_mismatches ? "MISMATCHES: see above"
                                : gpu ? "all GPU indexes equal the CPU's"
                                      : "no GPU: CPU and CRoaring only");
    gpu_host_free(values);
    gpu_index_builder_destroy(cpu);
    gpu_index_builder_destroy(gpu);
    return n_mismatches ? 1 : 0;
}
