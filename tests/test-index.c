/*
 * Tests of gpu_services/index/: the builders against a brute-force
 * picture of the bit columns (through the reference decoder), the CPU and
 * CUDA builders against each other byte for byte, hand-made words that
 * pin the encoding (and the seed's printed off-by-one), queries on the
 * compressed columns against a scan of the records, CRoaring as an
 * independent oracle, frame parsing on truncated frames, the query
 * syntax errors, and the store: rotation, retention, damaged and partial
 * segments, and drops when the worker falls behind.
 *
 * Environment:
 *   GPU_TEST_SEED       master seed (decimal or 0x hex); else time-based.
 *                       Always printed; a failure prints it again.
 *   GPU_INDEX_BACKEND   cpu | cuda | all (default: every backend usable
 *                       here).  "cuda" without a device fails; the CPU
 *                       versus CUDA comparison is skipped, saying so,
 *                       without one.
 *   GPU_TEST_FILTER     run only tests whose names match this pattern.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/test-common.h"
#include <pcap/pcap.h>

#ifdef HAVE_ROARING
#include <roaring/roaring.h>
#endif

#include "gpu_services/index/gpu-index.h"

static uint64_t master_seed;
static enum gpu_index_backend backends[2];
static int n_backends;
static bool have_cuda;

/* ---- Random numbers (the generator is in tests/test-common.h). ---- */

static struct rng
case_rng(uint64_t a, uint64_t b)
{
    struct rng r = rng_for_case(master_seed, a, b);

    rng_next(&r);
    return r;
}

/* ---- Values. ---- */

enum dist {
    D_UNIFORM,                  /* Uniform over the cardinality. */
    D_SKEWED,                   /* Zipf-like: a few values dominate. */
    D_RUNS,                     /* Long runs of one value. */
    D_SPARSE,                   /* One value, rarely another. */
    D_WIDE,                     /* Random 32-bit values (hash path). */
    N_DISTS
};

static const char *dist_names[] = {
    "uniform", "skewed", "runs", "sparse", "wide"
};

static void
gen_values(struct rng *r, uint32_t *v, uint32_t n, uint32_t card,
           enum dist d)
{
    uint32_t i, cur = 0, left = 0;

    for (i = 0; i < n; i++) {
        switch (d) {
        case D_UNIFORM:
            v[i] = rng_below(r, card);
            break;
        case D_SKEWED: {
            /* 1/(k+1)-ish: square a uniform fraction. */
            double u = (rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
            v[i] = (uint32_t) (u * u * u * card) % card;
            break;
        }
        case D_RUNS:
            if (!left) {
                cur = rng_below(r, card);
                left = 1 + rng_below(r, 200);
            }
            left--;
            v[i] = cur;
            break;
        case D_SPARSE:
            v[i] = rng_below(r, 500) ? 7 : rng_below(r, card);
            break;
        case D_WIDE:
            v[i] = rng_below(r, 8) ? (uint32_t) rng_next(r)
                                   : 0xffffffffu - rng_below(r, 3);
            break;
        default:
            v[i] = 0;
        }
    }
}

static unsigned int
bits_for(const uint32_t *v, uint32_t n)
{
    uint32_t max = 0, i;
    unsigned int b = 1;

    for (i = 0; i < n; i++) {
        max = v[i] > max ? v[i] : max;
    }
    while (b < 32 && (max >> b)) {
        b++;
    }
    return b;
}

static int
cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;

    return x < y ? -1 : x > y;
}

/* Checks 'bm' against the values it was built from: the keys are the
 * sorted distinct values, and column i decodes to exactly the rows whose
 * value is keys[i]. */
static void
check_against_values(const struct gpu_index_bitmaps *bm, const uint32_t *v,
                     uint32_t n, const char *what)
{
    uint32_t *sorted = malloc((n ? n : 1) * sizeof *sorted);
    uint32_t *rows = malloc((n ? n : 1) * sizeof *rows);
    uint32_t n_keys = 0, i, k;
    char err[200];

    assert_non_null(sorted);
    assert_non_null(rows);
    memcpy(sorted, v, n * sizeof *v);
    qsort(sorted, n, sizeof *sorted, cmp_u32);
    for (i = 0; i < n; i++) {
        if (!i || sorted[i] != sorted[i - 1]) {
            sorted[n_keys++] = sorted[i];
        }
    }
    if (gpu_index_bitmaps_check(bm, err, sizeof err)) {
        fail_msg("%s: check: %s", what, err);
    }
    assert_int_equal(bm->n_rows, n);
    assert_int_equal(bm->n_keys, n_keys);
    for (k = 0; k < n_keys; k++) {
        int64_t got;
        uint32_t m = 0;

        assert_int_equal(bm->keys[k], sorted[k]);
        got = gpu_index_decode_column(bm, k, rows, n);
        assert_true(got >= 0);
        for (i = 0; i < n; i++) {
            if (v[i] == sorted[k]) {
                if (m >= got || rows[m] != i) {
                    fail_msg("%s: column %"PRIu32" (value %"PRIu32"): row "
                             "%"PRIu32" missing", what, k, sorted[k], i);
                }
                m++;
            }
        }
        assert_int_equal(m, got);
    }
    free(sorted);
    free(rows);
}

static struct gpu_index_builder *
make_builder(enum gpu_index_backend be, uint32_t max_rows)
{
    struct gpu_index_builder *b;
    char why[200];
    int error = gpu_index_builder_create(be, max_rows, &b, why, sizeof why);

    if (error) {
        fail_msg("builder %s: %s (%s)", gpu_index_backend_name(be),
                 gpu_status_string(error), why);
    }
    return b;
}

/* ---- Hand-made words. ---- */

static void
test_encoding_words(void **state)
{
    /* Value 5 at rows 0, 40 and 99; value 9 only at row 93 (chunk 3,
     * bit 0: its column starts with a fill of 3 chunks, where the seed's
     * printed Algorithm 4 gives 2); value 1 everywhere else. */
    uint32_t v[100];
    static const uint32_t wah5[] = { 0x80000001, 0x80000200, 1, 0x80000040 };
    static const uint32_t wah9[] = { 3, 0x80000001 };
    static const uint32_t pl5[] = { 0x80000001, 0x80000200,
                                    1 | (7u << 25) };
    static const uint32_t pl9[] = { 3 | (1u << 25) };

    for (int i = 0; i < 100; i++) {
        v[i] = 1;
    }
    v[0] = v[40] = v[99] = 5;
    v[93] = 9;
    for (int bi = 0; bi < n_backends; bi++) {
        struct gpu_index_builder *b = make_builder(backends[bi], 1000);

        for (int e = 0; e < 2; e++) {
            struct gpu_index_bitmaps bm;
            const uint32_t *w5 = e ? pl5 : wah5, *w9 = e ? pl9 : wah9;
            size_t n5 = e ? 3 : 4, n9 = e ? 1 : 2;

            gpu_index_bitmaps_init(&bm);
            assert_int_equal(gpu_index_build(b, v, 100, 4, e, 0, &bm, NULL),
                             GPU_OK);
            assert_int_equal(bm.n_keys, 3);
            assert_int_equal(bm.keys[0], 1);
            assert_int_equal(bm.keys[1], 5);
            assert_int_equal(bm.keys[2], 9);
            assert_int_equal(bm.offsets[2] - bm.offsets[1], n5);
            assert_memory_equal(bm.words + bm.offsets[1], w5,
                                n5 * sizeof *w5);
            assert_int_equal(bm.offsets[3] - bm.offsets[2], n9);
            assert_memory_equal(bm.words + bm.offsets[2], w9,
                                n9 * sizeof *w9);
            check_against_values(&bm, v, 100, "hand");
            gpu_index_bitmaps_free(&bm);
        }
        /* A value too wide for value_bits is refused. */
        struct gpu_index_bitmaps bm;
        gpu_index_bitmaps_init(&bm);
        if (backends[bi] == GPU_INDEX_BACKEND_CUDA) {
            /* A resident re-run (the benchmark's kernel-only mode) finds
             * the same sizes without copying anything. */
            struct gpu_index_build_times t;
            uint32_t nk, nw;

            assert_int_equal(gpu_index_build(b, v, 100, 4, 1, 0, &bm, &t),
                             GPU_OK);
            nk = bm.n_keys;
            nw = bm.n_words;
            bm.n_keys = bm.n_words = 0;
            assert_int_equal(gpu_index_build(b, NULL, 100, 4, 1,
                                             GPU_INDEX_BUILD_RESIDENT, &bm,
                                             &t), GPU_OK);
            assert_int_equal(bm.n_keys, nk);
            assert_int_equal(bm.n_words, nw);
            assert_true(t.kernel_ms > 0);
        }
        assert_int_equal(gpu_index_build(b, v, 100, 3, 0, 0, &bm, NULL),
                         GPU_ERR_INVALID);
        assert_int_equal(gpu_index_build(b, v, 1001, 4, 0, 0, &bm, NULL),
                         GPU_ERR_INVALID);
        gpu_index_bitmaps_free(&bm);
        gpu_index_builder_destroy(b);
    }
}

/* The checker refuses damaged columns. */
static void
test_check_refuses(void **state)
{
    uint32_t v[70];
    struct gpu_index_bitmaps bm;
    struct gpu_index_builder *b = make_builder(GPU_INDEX_BACKEND_CPU, 100);
    char err[200];

    for (int i = 0; i < 70; i++) {
        v[i] = i % 3;
    }
    gpu_index_bitmaps_init(&bm);
    assert_int_equal(gpu_index_build(b, v, 70, 2, GPU_INDEX_WAH, 0, &bm,
                                     NULL), GPU_OK);
    assert_int_equal(gpu_index_bitmaps_check(&bm, err, sizeof err), GPU_OK);
    bm.words[0] ^= 1;           /* Moves a row to another column. */
    assert_int_equal(gpu_index_bitmaps_check(&bm, err, sizeof err),
                     GPU_ERR_INVALID);
    bm.words[0] ^= 1;
    bm.words[1] = 5;            /* A fill past the end. */
    assert_int_equal(gpu_index_bitmaps_check(&bm, err, sizeof err),
                     GPU_ERR_INVALID);
    gpu_index_bitmaps_free(&bm);
    gpu_index_builder_destroy(b);
}

/* ---- Builders on random data. ---- */

static void
test_build_random(void **state)
{
    static const uint32_t sizes[] = { 0, 1, 30, 31, 32, 62, 63, 1000,
                                      4097, 100003 };
    static const uint32_t cards[] = { 1, 2, 31, 256, 4096, 65536 };
    uint32_t max_n = 100003;
    uint32_t *v = malloc(max_n * sizeof *v);
    struct gpu_index_builder *bs[2];
    int n_cases = 0, n_compared = 0;

    assert_non_null(v);
    for (int bi = 0; bi < n_backends; bi++) {
        bs[bi] = make_builder(backends[bi], max_n);
    }
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (size_t ci = 0; ci < sizeof cards / sizeof cards[0]; ci++) {
            for (int d = 0; d < N_DISTS; d++) {
                struct rng r = case_rng(si * 100 + ci, d);
                uint32_t n = sizes[si];
                unsigned int bits;

                if (d == D_WIDE && ci) {
                    continue;
                }
                gen_values(&r, v, n, cards[ci], d);
                bits = bits_for(v, n);
                for (int e = 0; e < 2; e++) {
                    struct gpu_index_bitmaps bm[2];
                    char what[160];

                    snprintf(what, sizeof what, "n=%"PRIu32" card=%"PRIu32
                             " %s %s", n, cards[ci], dist_names[d],
                             gpu_index_encoding_name(e));
                    for (int bi = 0; bi < n_backends; bi++) {
                        gpu_index_bitmaps_init(&bm[bi]);
                        if (gpu_index_build(bs[bi], v, n, bits, e, 0,
                                            &bm[bi], NULL)) {
                            fail_msg("%s: build failed on %s", what,
                                     gpu_index_backend_name(backends[bi]));
                        }
                        check_against_values(&bm[bi], v, n, what);
                    }
                    if (n_backends == 2) {
                        if (!gpu_index_bitmaps_equal(&bm[0], &bm[1])) {
                            fail_msg("%s: CPU and CUDA indexes differ",
                                     what);
                        }
                        n_compared++;
                    }
                    for (int bi = 0; bi < n_backends; bi++) {
                        gpu_index_bitmaps_free(&bm[bi]);
                    }
                    n_cases++;
                }
            }
        }
    }
    printf("test-index: %d build cases, %d compared CPU against CUDA%s\n",
           n_cases, n_compared,
           n_backends == 2 ? "" : " (skipped: one backend here)");
    for (int bi = 0; bi < n_backends; bi++) {
        assert_int_equal(gpu_index_builder_fallbacks(bs[bi]), 0);
        gpu_index_builder_destroy(bs[bi]);
    }
    free(v);
}

/* A pinned bitmaps object reused across growing batches gives what a
 * fresh one does. */
static void
test_pinned_reuse(void **state)
{
    uint32_t *v = malloc(60000 * sizeof *v);
    struct gpu_index_bitmaps p, f;

    gpu_index_bitmaps_init_pinned(&p);
    for (int bi = 0; bi < n_backends; bi++) {
        struct gpu_index_builder *b = make_builder(backends[bi], 60000);

        for (uint32_t n = 10; n <= 60000; n *= 3) {
            struct rng r = case_rng(31337, n);

            gen_values(&r, v, n, 3000, D_SKEWED);
            gpu_index_bitmaps_init(&f);
            assert_int_equal(gpu_index_build(b, v, n, 12, 1, 0, &p, NULL),
                             GPU_OK);
            assert_int_equal(gpu_index_build(b, v, n, 12, 1, 0, &f, NULL),
                             GPU_OK);
            assert_true(gpu_index_bitmaps_equal(&p, &f));
            gpu_index_bitmaps_free(&f);
        }
        gpu_index_builder_destroy(b);
    }
    gpu_index_bitmaps_free(&p);
    free(v);
}

/* The CPU and CUDA builders give the same bytes on a large skewed and a
 * large uniform batch (test_build_random compares many small ones too).
 * Skipped without a device. */
static void
test_cpu_vs_cuda(void **state)
{
    if (!have_cuda) {
        test_skip(TEST_SKIP_NO_GPU, "no CUDA device: CPU versus CUDA not "
                  "compared");
    }
    uint32_t n = 3000017, *v = malloc(n * sizeof *v);
    struct gpu_index_builder *c = make_builder(GPU_INDEX_BACKEND_CPU, n);
    struct gpu_index_builder *g = make_builder(GPU_INDEX_BACKEND_CUDA, n);

    for (int d = 0; d < 2; d++) {
        struct rng r = case_rng(2024, d);

        gen_values(&r, v, n, 65536, d ? D_SKEWED : D_UNIFORM);
        for (int e = 0; e < 2; e++) {
            struct gpu_index_bitmaps a, b;

            gpu_index_bitmaps_init(&a);
            gpu_index_bitmaps_init_pinned(&b);
            assert_int_equal(gpu_index_build(c, v, n, 16, e, 0, &a, NULL),
                             GPU_OK);
            assert_int_equal(gpu_index_build(g, v, n, 16, e, 0, &b, NULL),
                             GPU_OK);
            if (!gpu_index_bitmaps_equal(&a, &b)) {
                fail_msg("%s %s: CPU and CUDA differ", dist_names[d],
                         gpu_index_encoding_name(e));
            }
            gpu_index_bitmaps_free(&a);
            gpu_index_bitmaps_free(&b);
        }
    }
    assert_int_equal(gpu_index_builder_fallbacks(g), 0);
    gpu_index_builder_destroy(c);
    gpu_index_builder_destroy(g);
    free(v);
}

/* PLWAH is never larger than WAH, and is smaller on sparse columns. */
static void
test_plwah_smaller(void **state)
{
    struct rng r = case_rng(77, 1);
    uint32_t n = 50000, *v = malloc(n * sizeof *v);
    struct gpu_index_builder *b = make_builder(GPU_INDEX_BACKEND_CPU, n);
    struct gpu_index_bitmaps w, p;

    gen_values(&r, v, n, 65536, D_UNIFORM);
    gpu_index_bitmaps_init(&w);
    gpu_index_bitmaps_init(&p);
    assert_int_equal(gpu_index_build(b, v, n, 16, GPU_INDEX_WAH, 0, &w,
                                     NULL), GPU_OK);
    assert_int_equal(gpu_index_build(b, v, n, 16, GPU_INDEX_PLWAH, 0, &p,
                                     NULL), GPU_OK);
    printf("test-index: 50000 uniform 16-bit values: WAH %"PRIu32" words, "
           "PLWAH %"PRIu32"\n", w.n_words, p.n_words);
    assert_true(p.n_words * 10 < w.n_words * 6);
    gpu_index_bitmaps_free(&w);
    gpu_index_bitmaps_free(&p);
    gpu_index_builder_destroy(b);
    free(v);
}

/* ---- Records. ---- */

static size_t
make_frame(uint8_t *f, const struct gpu_index_record *r)
{
    size_t o = 0, ip, l4 = 0;

    memset(f, 0, 128);
    memcpy(f, "\x00\x11\x22\x33\x44\x55\x00\x66\x77\x88\x99\xaa", 12);
    o = 12;
    if (r->vlan != GPU_INDEX_NO_VLAN) {
        f[o++] = 0x81, f[o++] = 0x00;
        f[o++] = r->vlan >> 8, f[o++] = r->vlan & 0xff;
    }
    ip = o + 2;
    if (r->ip_version == 4) {
        f[o++] = 0x08, f[o++] = 0x00;
        f[ip] = 0x45;
        f[ip + 9] = r->proto;
        memcpy(f + ip + 12, r->src, 4);
        memcpy(f + ip + 16, r->dst, 4);
        l4 = ip + 20;
    } else if (r->ip_version == 6) {
        f[o++] = 0x86, f[o++] = 0xdd;
        f[ip] = 0x60;
        f[ip + 6] = r->proto;
        memcpy(f + ip + 8, r->src, 16);
        memcpy(f + ip + 24, r->dst, 16);
        l4 = ip + 40;
    } else {
        f[o++] = 0x08, f[o++] = 0x06;
        return 60;
    }
    f[l4] = r->sport >> 8, f[l4 + 1] = r->sport & 0xff;
    f[l4 + 2] = r->dport >> 8, f[l4 + 3] = r->dport & 0xff;
    f[l4 + 13] = r->tcp_flags;
    return l4 + 20;
}

/* A random record from small pools, so that queries hit. */
static void
gen_record(struct rng *g, struct gpu_index_record *r, uint64_t ts)
{
    static const uint8_t protos[] = { 6, 6, 6, 17, 17, 1, 58, 47 };
    static const uint16_t ports[] = { 80, 443, 53, 22, 8080, 1234 };
    uint8_t frame[128];
    struct gpu_index_record want;
    uint32_t k = rng_below(g, 10);

    memset(&want, 0, sizeof want);
    want.vlan = rng_below(g, 3) ? GPU_INDEX_NO_VLAN : 10 * rng_below(g, 3);
    want.ip_version = k < 7 ? 4 : k < 9 ? 6 : 0;
    want.proto = protos[rng_below(g, sizeof protos)];
    for (int i = 0; i < 16; i++) {
        want.src[i] = i < 2 ? 10 + rng_below(g, 2) : rng_below(g, 4) * 60;
        want.dst[i] = i == 0 ? 192 : rng_below(g, 3) * 100;
    }
    want.sport = rng_below(g, 2) ? ports[rng_below(g, 6)]
                                 : rng_below(g, 65536);
    want.dport = rng_below(g, 3) ? ports[rng_below(g, 6)]
                                 : 1000 + rng_below(g, 2000);
    want.tcp_flags = rng_below(g, 256);
    size_t len = make_frame(frame, &want);
    /* Now and then a truncated frame. */
    uint32_t cap = rng_below(g, 20) ? len : rng_below(g, len + 1);
    gpu_index_record_from_frame(r, frame, cap, len + 4, ts,
                                1 + rng_below(g, 4));
}

static void
test_record_parse(void **state)
{
    struct gpu_index_record want, got;
    uint8_t frame[128];
    size_t len;

    memset(&want, 0, sizeof want);
    want.vlan = 42;
    want.ip_version = 4;
    want.proto = 6;
    memcpy(want.src, "\x0a\x01\x02\x03", 4);
    memcpy(want.dst, "\xc0\xa8\x00\x01", 4);
    want.sport = 12345;
    want.dport = 443;
    want.tcp_flags = 0x12;
    len = make_frame(frame, &want);
    gpu_index_record_from_frame(&got, frame, len, 1500, 7000000001ull, 3);
    assert_int_equal(got.vlan, 42);
    assert_int_equal(got.ip_version, 4);
    assert_int_equal(got.proto, 6);
    assert_memory_equal(got.src, want.src, 4);
    assert_memory_equal(got.dst, want.dst, 4);
    assert_int_equal(got.sport, 12345);
    assert_int_equal(got.dport, 443);
    assert_int_equal(got.tcp_flags, 0x12);
    assert_int_equal(got.in_port, 3);
    assert_int_equal(got.wire_len, 1500);
    assert_int_equal(gpu_index_attr_value(&got, GPU_INDEX_ATTR_TIME), 7);
    assert_int_equal(gpu_index_attr_value(&got, GPU_INDEX_ATTR_SRC0 + 4),
                     256);

    /* Every truncation parses what fits and never reads beyond. */
    for (size_t cut = 0; cut <= len; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);

        memcpy(copy, frame, cut);
        gpu_index_record_from_frame(&got, copy, cut, len, 0, 0);
        assert_int_equal(!!(got.parsed & GPU_INDEX_PARSED_L4),
                         cut >= len - 6);
        assert_int_equal(got.ip_version, cut >= 18 + 20 ? 4 : 0);
        free(copy);
    }

    /* IPv6 with a hop-by-hop header before UDP. */
    memset(frame, 0, sizeof frame);
    memcpy(frame + 12, "\x86\xdd", 2);
    frame[14] = 0x60;
    frame[14 + 6] = 0;          /* Hop-by-hop. */
    frame[14 + 8] = 0x20, frame[14 + 9] = 0x01;
    frame[54] = 17;             /* Next: UDP; length 0 = 8 bytes. */
    frame[62] = 0x00, frame[63] = 53, frame[64] = 0x04, frame[65] = 0x00;
    gpu_index_record_from_frame(&got, frame, 70, 70, 0, 0);
    assert_int_equal(got.ip_version, 6);
    assert_int_equal(got.proto, 17);
    assert_int_equal(got.src[0], 0x20);
    assert_int_equal(got.sport, 53);
    assert_int_equal(got.dport, 1024);
}

/* ---- Queries. ---- */

static void
gen_query(struct rng *g, char *buf, size_t size, int depth)
{
    static const char *terms[] = {
        "tcp", "udp", "ip6", "ip4", "proto=icmp", "proto=47",
        "dport=443", "dport=80,53", "dport=1000-2000", "sport=1024-65535",
        "port=22", "src=10.1.0.0/16", "src=11.0.0.0/8", "dst=192.0.0.0/9",
        "dst=192.100.0.60/30", "src=10.0.120.0/20", "host=192.200.0.0/16",
        "src=a00::/8", "dst=c000::/6", "tcp_flags&syn", "tcp_flags&syn|ack",
        "tcp_flags=0x12", "vlan=10", "vlan=none", "in_port=2",
        "in_port=1-2", "time=1700000000-1700000002", "dport!=443",
        "ipver=6", "src=10.0.0.0/8", "src=0.0.0.0/0",
    };
    size_t n = strlen(buf);
    uint32_t k = rng_below(g, depth > 3 ? 2 : 6);

    if (k < 2) {
        snprintf(buf + n, size - n, "%s",
                 terms[rng_below(g, sizeof terms / sizeof terms[0])]);
    } else if (k == 2) {
        snprintf(buf + n, size - n, "not ");
        gen_query(g, buf, size, depth + 1);
    } else {
        snprintf(buf + n, size - n, "(");
        gen_query(g, buf, size, depth + 1);
        n = strlen(buf);
        snprintf(buf + n, size - n, k == 3 ? " or " : k == 4 ? " and "
                                                             : " && ");
        gen_query(g, buf, size, depth + 1);
        n = strlen(buf);
        snprintf(buf + n, size - n, ")");
    }
}

static void
check_query(const char *text, const struct gpu_index_segment_index *seg,
            const struct gpu_index_record *recs, uint32_t n, uint64_t *hits)
{
    struct gpu_index_query *q;
    char err[256];
    uint32_t *rows;
    size_t n_rows, m = 0;

    if (gpu_index_query_parse(text, &q, err, sizeof err)) {
        fail_msg("query \"%s\": %s", text, err);
    }
    assert_int_equal(gpu_index_query_eval(q, seg, &rows, &n_rows), GPU_OK);
    for (uint32_t i = 0; i < n; i++) {
        if (gpu_index_query_match(q, &recs[i])) {
            if (m >= n_rows || rows[m] != i) {
                fail_msg("query \"%s\" (%"PRIu32" rows): row %"PRIu32
                         " matches but the index %s", text, n, i,
                         m < n_rows ? "gives another" : "stops");
            }
            m++;
        }
    }
    if (m != n_rows) {
        fail_msg("query \"%s\": index gives %zu rows, scan %zu", text,
                 n_rows, m);
    }
    *hits += m;
    free(rows);
    gpu_index_query_destroy(q);
}

static void
test_queries_random(void **state)
{
    static const uint32_t sizes[] = { 1, 31, 62, 95, 1000, 20011 };

    for (int bi = 0; bi < n_backends; bi++) {
        struct gpu_index_builder *b = make_builder(backends[bi], 20011);

        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            for (int e = 0; e < 2; e++) {
                struct rng g = case_rng(1000 + si, e);
                uint32_t n = sizes[si];
                struct gpu_index_record *recs = calloc(n, sizeof *recs);
                struct gpu_index_segment_index seg;
                uint64_t hits = 0;
                uint64_t ts = 1700000000ull * 1000000000ull;

                for (uint32_t i = 0; i < n; i++) {
                    /* Skewed in time: bursts within a few seconds. */
                    gen_record(&g, &recs[i], ts);
                    ts += rng_below(&g, 8) ? 1000 : 400000000;
                }
                gpu_index_segment_index_init(&seg);
                assert_int_equal(gpu_index_segment_index_build(b, recs, n, e,
                                                               &seg),
                                 GPU_OK);
                for (int qi = 0; qi < 150; qi++) {
                    char text[1024] = "";

                    gen_query(&g, text, sizeof text, 0);
                    check_query(text, &seg, recs, n, &hits);
                }
                check_query("not (tcp or not tcp)", &seg, recs, n, &hits);
                check_query("not proto=255", &seg, recs, n, &hits);
                gpu_index_segment_index_free(&seg);
                free(recs);
                if (si == 5) {
                    printf("test-index: %s %s: 152 queries on %"PRIu32
                           " records, %"PRIu64" hits\n",
                           gpu_index_backend_name(backends[bi]),
                           gpu_index_encoding_name(e), n, hits);
                }
            }
        }
        gpu_index_builder_destroy(b);
    }
}

static void
test_query_syntax(void **state)
{
    static const struct {
        const char *text;
        const char *msg;
    } bad[] = {
        { "", "column 1: expected a term" },
        { "dport=", "column 7: missing value" },
        { "dport=70000", "column 7: bad value" },
        { "dport=20-10", "column 7: empty range" },
        { "src=10.1.0.0/33", "column 14: bad prefix length" },
        { "src=10.1.0", "column 5: bad IPv4 address" },
        { "tcp and (udp", "column 13: expected ')'" },
        { "tcp udp", "column 5: expected 'and', 'or' or the end" },
        { "colour=red", "column 1: unknown field \"colour\"" },
        { "dport&80", "column 6: '&' applies to tcp_flags only" },
        { "tcp_flags&syn|foo", "column 15: unknown TCP flag \"foo\"" },
        { "proto=tcpx", "column 7: bad value" },
        { "tcp and", "column 8: expected a term" },
        { "dport 80", "column 7: expected '=' or '!='" },
        { "tcp $", "column 5: expected 'and', 'or' or the end, not a "
          "stray" },
        { "dport=80,,443", "column 10: empty value in list" },
    };
    static const char *good[] = {
        "src=10.1.0.0/16 and dport=443 and proto=tcp",
        "dport=1000-2000", "not (udp or icmp) && !vlan=none",
        "host=2001:db8::/32 || port=53", "tcp_flags&syn|ack and tcp",
        "time=0-4294967295", "ipver=4 and in_port=0x10",
        "  ( ( tcp ) )  ", "SRC=10.0.0.1 AND Dport=22",
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gpu_index_query *q = NULL;
        char err[256] = "";

        assert_int_equal(gpu_index_query_parse(bad[i].text, &q, err,
                                               sizeof err),
                         GPU_ERR_INVALID);
        assert_null(q);
        if (strncmp(err, bad[i].msg, strlen(bad[i].msg))) {
            fail_msg("\"%s\": got \"%s\", want \"%s...\"", bad[i].text,
                     err, bad[i].msg);
        }
    }
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct gpu_index_query *q;
        char err[256];

        if (gpu_index_query_parse(good[i], &q, err, sizeof err)) {
            fail_msg("\"%s\": %s", good[i], err);
        }
        gpu_index_query_destroy(q);
    }
}

/* ---- CRoaring as an independent oracle. ---- */

static void
test_roaring_oracle(void **state)
{
#ifdef HAVE_ROARING
    struct rng g = case_rng(4242, 0);
    uint32_t n = 200000, card = 1024;
    uint32_t *v = malloc(n * sizeof *v), *rows = malloc(n * sizeof *rows);
    roaring_bitmap_t **rb = calloc(card, sizeof *rb);
    struct gpu_index_builder *b = make_builder(backends[n_backends - 1], n);
    struct gpu_index_bitmaps bm;

    gen_values(&g, v, n, card, D_SKEWED);
    for (uint32_t c = 0; c < card; c++) {
        rb[c] = roaring_bitmap_create();
    }
    for (uint32_t i = 0; i < n; i++) {
        roaring_bitmap_add(rb[v[i]], i);
    }
    for (int e = 0; e < 2; e++) {
        gpu_index_bitmaps_init(&bm);
        assert_int_equal(gpu_index_build(b, v, n, 10, e, 0, &bm, NULL),
                         GPU_OK);
        for (uint32_t k = 0; k < bm.n_keys; k++) {
            roaring_bitmap_t *mine;
            int64_t m = gpu_index_decode_column(&bm, k, rows, n);

            assert_true(m > 0);
            mine = roaring_bitmap_of_ptr(m, rows);
            assert_true(roaring_bitmap_equals(mine, rb[bm.keys[k]]));
            roaring_bitmap_free(mine);
        }
        uint64_t total = 0;
        for (uint32_t c = 0; c < card; c++) {
            total += roaring_bitmap_get_cardinality(rb[c]) ? 1 : 0;
        }
        assert_int_equal(total, bm.n_keys);
        gpu_index_bitmaps_free(&bm);
    }
    printf("test-index: CRoaring agrees on %"PRIu32" skewed values\n", n);
    for (uint32_t c = 0; c < card; c++) {
        roaring_bitmap_free(rb[c]);
    }
    free(rb);
    free(v);
    free(rows);
    gpu_index_builder_destroy(b);
#else
    test_skip(TEST_SKIP_NO_ORACLE, "built without CRoaring (apt-get "
              "install libroaring-dev and re-run configure)");
#endif
}

/* ---- Store and recorder. ---- */

static char tmpdir[256];

static void
rm_rf(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[512];

    if (!d) {
        return;
    }
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
    }
    closedir(d);
    rmdir(dir);
}

static int
count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;

    if (!d) {
        return -1;
    }
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name), s = strlen(suffix);

        n += l > s && !strcmp(de->d_name + l - s, suffix);
    }
    closedir(d);
    return n;
}

static struct gpu_index_recorder *
make_recorder(const char *dir, uint32_t seg_packets, uint64_t ret_bytes,
              uint32_t slots, enum gpu_index_backend be,
              enum gpu_index_encoding enc)
{
    struct gpu_index_recorder_config cfg;
    struct gpu_index_recorder *r;
    char err[256];

    gpu_index_recorder_config_init(&cfg);
    cfg.dir = dir;
    cfg.backend = be;
    cfg.encoding = enc;
    cfg.segment_packets = seg_packets;
    cfg.retention_bytes = ret_bytes;
    if (slots) {
        cfg.ring_slots = slots;
    }
    if (gpu_index_recorder_create(&cfg, &r, err, sizeof err)) {
        fail_msg("recorder: %s", err);
    }
    return r;
}

/* Submits 'n' random packets; keeps their records in 'recs'. */
static void
feed(struct gpu_index_recorder *r, struct rng *g,
     struct gpu_index_record *recs, uint32_t n, uint64_t ts0)
{
    for (uint32_t i = 0; i < n; i++) {
        struct gpu_index_record want;
        uint8_t frame[128];
        size_t len;

        gen_record(g, &want, 0);
        /* gen_record parsed a frame; make a full one from its fields. */
        if (!want.ip_version) {
            want.vlan = GPU_INDEX_NO_VLAN;
        }
        len = make_frame(frame, &want);
        gpu_index_record_from_frame(&recs[i], frame, len, len,
                                    ts0 + i * 1000ull, 7);
        while (!gpu_index_recorder_submit(r, frame, len, ts0 + i * 1000ull,
                                          7)) {
            usleep(100);        /* The test wants every packet. */
        }
    }
}

static int64_t
store_query(const char *dir, const char *expr, unsigned int *skipped,
            const char *pcap_path)
{
    char err[256];
    int64_t n = gpu_index_store_query(dir, expr, NULL, pcap_path, 0,
                                      skipped, err, sizeof err);
    if (n < 0 && n != GPU_ERR_INVALID) {
        fail_msg("store query \"%s\": %s", expr, err);
    }
    return n;
}

static void
test_store_rotation(void **state)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-index-%d", (int) getpid());
    rm_rf(tmpdir);
    for (int bi = 0; bi < n_backends; bi++) {
        struct rng g = case_rng(555, bi);
        uint32_t n = 2500;
        struct gpu_index_record *recs = calloc(n, sizeof *recs);
        struct gpu_index_recorder *r = make_recorder(tmpdir, 1000, 0, 0,
                                                     backends[bi],
                                                     bi % 2);
        struct gpu_index_recorder_stats st;
        static const char *qs[] = {
            "tcp and dport=443", "src=10.1.0.0/16 or udp", "not ip4",
            "dport=1000-2000 and not tcp_flags&syn",
        };
        char pcap_path[512];
        unsigned int skipped;

        feed(r, &g, recs, n, 1700000000ull * 1000000000ull);
        assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
        gpu_index_recorder_get_stats(r, &st);
        assert_int_equal(st.recorded, n);
        assert_int_equal(st.dropped, 0);
        assert_int_equal(st.segments_written, 3);
        assert_int_equal(count_files(tmpdir, ".idx"), 3);
        assert_int_equal(count_files(tmpdir, ".pcap"), 3);
        for (size_t qi = 0; qi < sizeof qs / sizeof qs[0]; qi++) {
            struct gpu_index_query *q;
            char err[200];
            int64_t want = 0;

            assert_int_equal(gpu_index_query_parse(qs[qi], &q, err,
                                                   sizeof err), GPU_OK);
            for (uint32_t i = 0; i < n; i++) {
                want += gpu_index_query_match(q, &recs[i]);
            }
            gpu_index_query_destroy(q);
            assert_int_equal(store_query(tmpdir, qs[qi], &skipped, NULL),
                             want);
            assert_int_equal(skipped, 0);
        }
        /* The pcap output holds the matches. */
        snprintf(pcap_path, sizeof pcap_path, "%s.out.pcap", tmpdir);
        int64_t m = store_query(tmpdir, "udp", NULL, pcap_path);
        char errbuf[PCAP_ERRBUF_SIZE];
        pcap_t *pc = pcap_open_offline(pcap_path, errbuf);
        struct pcap_pkthdr *h;
        const u_char *data;
        int64_t k = 0;

        assert_non_null(pc);
        while (pcap_next_ex(pc, &h, &data) == 1) {
            struct gpu_index_record rec;

            gpu_index_record_from_frame(&rec, data, h->caplen, h->len, 0, 0);
            assert_int_equal(rec.proto, 17);
            k++;
        }
        pcap_close(pc);
        unlink(pcap_path);
        assert_int_equal(k, m);
        /* One line per match, with the 5-tuple and length. */
        char *text = NULL;
        size_t text_len = 0;
        FILE *mf = open_memstream(&text, &text_len);
        char qerr[200];
        assert_int_equal(gpu_index_store_query(tmpdir, "tcp and dport=443",
                                               mf, NULL, 3, NULL, qerr,
                                               sizeof qerr), 3);
        fclose(mf);
        printf("test-index: first lines of a store query:\n%s", text);
        assert_non_null(strstr(text, " tcp "));
        assert_non_null(strstr(text, ":443 len "));
        assert_non_null(strstr(text, "2023-11-14T22:13:20."));
        free(text);
        /* Bad syntax is an error, not zero matches. */
        assert_int_equal(store_query(tmpdir, "dport=", NULL, NULL),
                         GPU_ERR_INVALID);

        /* Retention: three segments of ~1000 packets; keep under the
         * size of two. */
        gpu_index_recorder_destroy(r);
        free(recs);
        rm_rf(tmpdir);
    }
}

/* A disk slower than the traffic (test only, for benchmarks and the
 * switch's autotests): the recorder's files take at least their bytes
 * over the rate to be written, and every record is kept (the writer
 * waits; the ring is large enough here). */
static void
test_store_disk_rate(void **state)
{
    struct rng g = case_rng(559, 0);
    const uint32_t n = 2000;
    const uint64_t rate = 500 * 1000;   /* Bytes a second. */
    struct gpu_index_record *recs = calloc(n, sizeof *recs);
    struct gpu_index_recorder_stats st;
    struct gpu_index_recorder *r;
    double t0, ms, floor_ms;

    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-index-%d", (int) getpid());
    rm_rf(tmpdir);
    r = make_recorder(tmpdir, n, 0, 4096, GPU_INDEX_BACKEND_CPU,
                      GPU_INDEX_PLWAH);
    gpu_index_recorder_inject_disk_rate(r, rate);
    t0 = test_monotonic_ms();
    feed(r, &g, recs, n, 1700000000ull * 1000000000ull);
    assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
    ms = test_monotonic_ms() - t0;
    gpu_index_recorder_get_stats(r, &st);
    floor_ms = st.pcap_bytes * 1e3 / rate;
    printf("test-index: %"PRIu64" pcap bytes at %"PRIu64" bytes/s written "
           "in %.0f ms (at least %.0f)\n", st.pcap_bytes, rate, ms,
           floor_ms);
    assert_int_equal(st.recorded, n);
    assert_int_equal(st.dropped, 0);
    assert_true(ms >= 0.95 * floor_ms);
    gpu_index_recorder_inject_disk_rate(r, 0);
    gpu_index_recorder_destroy(r);
    rm_rf(tmpdir);
    free(recs);
    (void) state;
}

/* A disk that fills in the middle of a segment: the segment keeps the
 * records whole on the disk before the failed write, its pcap is cut
 * after them, the others are counted as not written, a segment of which
 * nothing was written leaves no files, and once there is room again the
 * next segments are whole.  Every query answers exactly what the kept
 * records say: none returns a record that is not on the disk, nor
 * another record's bytes. */
static void
test_store_disk_full(void **state)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-index-%d", (int) getpid());
    for (int bi = 0; bi < n_backends; bi++) {
        struct rng g = case_rng(558, bi);
        const uint32_t seg = 1000, n = 3 * seg + 400;
        struct gpu_index_record *recs = calloc(n, sizeof *recs);
        bool *kept = calloc(n, sizeof *kept);
        uint64_t ts0 = 1700000000ull * 1000000000ull;
        struct gpu_index_recorder_stats st;
        struct gpu_index_recorder *r;
        /* Where the disk fills in segment 2: inside record 'cut', after
         * 'into' of its bytes (0: at its start). */
        uint32_t cut = rng_below(&g, seg), into = rng_below(&g, 20);
        uint64_t room = 24;
        static const char *qs[] = {
            "tcp and dport=443", "src=10.1.0.0/16 or udp", "not ip4",
            "ip4 or ip6 or not ip4",
        };

        rm_rf(tmpdir);
        r = make_recorder(tmpdir, seg, 0, 0, backends[bi], GPU_INDEX_PLWAH);
        /* Segment 1, whole. */
        feed(r, &g, recs, seg, ts0);
        assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
        /* Segment 2: the disk fills inside record 'cut'.  The writer is
         * paused while the segment waits in the ring, so that none of it
         * is written before the disk's room is set from its records. */
        gpu_index_recorder_pause(r, true);
        feed(r, &g, recs + seg, seg, ts0 + seg * 1000ull);
        for (uint32_t i = 0; i < cut; i++) {
            room += 16 + recs[seg + i].cap_len;
        }
        gpu_index_recorder_inject_disk_full(r, room + into);
        gpu_index_recorder_pause(r, false);
        assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
        /* Segment 3: nothing at all fits. */
        gpu_index_recorder_inject_disk_full(r, 0);
        feed(r, &g, recs + 2 * seg, seg, ts0 + 2 * seg * 1000ull);
        assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
        /* Room again: segment 4 is whole. */
        gpu_index_recorder_inject_disk_full(r, UINT64_MAX);
        feed(r, &g, recs + 3 * seg, n - 3 * seg, ts0 + 3 * seg * 1000ull);
        assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);

        gpu_index_recorder_get_stats(r, &st);
        printf("test-index: %s builder: disk full in record %u of segment "
               "2: %"PRIu64" records not written, %"PRIu64" segments\n",
               gpu_index_backend_name(backends[bi]), cut,
               st.records_unwritten, st.segments_written);
        assert_int_equal(st.recorded, n);
        assert_int_equal(st.records_unwritten, (seg - cut) + seg);
        assert_int_equal(st.last_write_error, ENOSPC);
        assert_int_equal(st.segments_written, cut ? 3 : 2);
        assert_int_equal(count_files(tmpdir, ".pcap"), cut ? 3 : 2);
        for (uint32_t i = 0; i < n; i++) {
            kept[i] = i < seg + cut || i >= 3 * seg;
        }
        for (size_t qi = 0; qi < sizeof qs / sizeof qs[0]; qi++) {
            struct gpu_index_query *q;
            char err[200];
            unsigned int skipped;
            int64_t want = 0;

            assert_int_equal(gpu_index_query_parse(qs[qi], &q, err,
                                                   sizeof err), GPU_OK);
            for (uint32_t i = 0; i < n; i++) {
                want += kept[i] && gpu_index_query_match(q, &recs[i]);
            }
            gpu_index_query_destroy(q);
            assert_int_equal(store_query(tmpdir, qs[qi], &skipped, NULL),
                             want);
            assert_int_equal(skipped, 0);
        }
        /* Every record served is one kept, byte for byte: the whole
         * store's matches, in order, are the kept records' frames. */
        char pcap_path[512], errbuf[PCAP_ERRBUF_SIZE];
        struct pcap_pkthdr *h;
        const u_char *data;
        uint32_t next = 0;

        snprintf(pcap_path, sizeof pcap_path, "%s.out.pcap", tmpdir);
        store_query(tmpdir, "ip4 or ip6 or not ip4", NULL, pcap_path);
        pcap_t *pc = pcap_open_offline_with_tstamp_precision(
            pcap_path, PCAP_TSTAMP_PRECISION_NANO, errbuf);
        assert_non_null(pc);
        while (pcap_next_ex(pc, &h, &data) == 1) {
            struct gpu_index_record rec;
            uint64_t ts = h->ts.tv_sec * 1000000000ull + h->ts.tv_usec;

            while (next < n && !kept[next]) {
                next++;
            }
            assert_true(next < n);
            gpu_index_record_from_frame(&rec, data, h->caplen, h->len, ts,
                                        7);
            rec.pcap_offset = recs[next].pcap_offset;
            if (memcmp(&rec, &recs[next], sizeof rec)) {
                fail_msg("%s builder: match %u is not kept record %u",
                         gpu_index_backend_name(backends[bi]), next, next);
            }
            next++;
        }
        pcap_close(pc);
        unlink(pcap_path);
        while (next < n && !kept[next]) {
            next++;
        }
        assert_int_equal(next, n);
        gpu_index_recorder_destroy(r);
        free(recs);
        free(kept);
        rm_rf(tmpdir);
    }
    (void) state;
}

/* A segment's indexes built by several CPU builders at once (each with a
 * share of the attributes, as the recorder's indexer does) are the
 * indexes one builder makes. */
static void
test_segment_build_threads(void **state)
{
    struct rng g = case_rng(557, 0);
    const uint32_t n = 70001;
    struct gpu_index_record *recs = calloc(n, sizeof *recs);
    struct gpu_index_builder *b[3];
    struct gpu_index_segment_index one, three;
    char why[128];

    for (uint32_t i = 0; i < n; i++) {
        gen_record(&g, &recs[i], (1700000000ull + i / 5000) * 1000000000ull);
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gpu_index_builder_create(GPU_INDEX_BACKEND_CPU, n,
                                                  &b[i], why, sizeof why),
                         GPU_OK);
    }
    gpu_index_segment_index_init(&one);
    gpu_index_segment_index_init(&three);
    assert_int_equal(gpu_index_segment_index_build(b[0], recs, n,
                                                   GPU_INDEX_PLWAH, &one),
                     GPU_OK);
    assert_int_equal(gpu_index_segment_index_build_n(b, 3, recs, n,
                                                     GPU_INDEX_PLWAH,
                                                     &three), GPU_OK);
    for (int a = 0; a < GPU_INDEX_N_ATTRS; a++) {
        if (!gpu_index_bitmaps_equal(&one.attrs[a], &three.attrs[a])) {
            fail_msg("attribute %s differs with 3 builders",
                     gpu_index_attr_name(a));
        }
    }
    gpu_index_segment_index_free(&one);
    gpu_index_segment_index_free(&three);
    for (int i = 0; i < 3; i++) {
        gpu_index_builder_destroy(b[i]);
    }
    free(recs);
    (void) state;
}

/* A segment's indexes as each backend builds them from the records (the
 * CUDA builder computes the columns on the device) are the indexes of
 * the columns computed on the host and built one by one; with device
 * faults injected, the failed columns are built on the CPU, counted, and
 * give the same bytes. */
static void
test_segment_build_records(void **state)
{
    const uint32_t sizes[] = { 1, 31, 4097, 250013 };
    uint32_t max_n = 250013;
    struct gpu_index_record *recs = calloc(max_n, sizeof *recs);
    uint32_t *v = malloc(max_n * sizeof *v);
    struct gpu_index_builder *ref = make_builder(GPU_INDEX_BACKEND_CPU,
                                                 max_n);
    int n_cases = 0;

    for (int bi = 0; bi < n_backends; bi++) {
        struct gpu_index_builder *b = make_builder(backends[bi], max_n);
        uint64_t fallbacks = 0;

        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            uint32_t n = sizes[si];
            struct rng g = case_rng(811, si);
            /* Faults in the second half of the cases: 3 columns of the
             * 40 fail, then the rest build on the device again. */
            unsigned int faults = si % 2 ? 3 : 0;
            struct gpu_index_segment_index seg;

            for (uint32_t i = 0; i < n; i++) {
                gen_record(&g, &recs[i],
                           (1700000000ull + i / 3000) * 1000000000ull);
            }
            gpu_index_segment_index_init(&seg);
            gpu_index_builder_inject_fault(b, GPU_ERR_DEVICE, faults);
            for (int e = 0; e < 2; e++) {
                assert_int_equal(gpu_index_segment_index_build(b, recs, n, e,
                                                               &seg),
                                 GPU_OK);
                fallbacks += e ? 0 : faults;
                assert_int_equal(gpu_index_builder_fallbacks(b), fallbacks);
                assert_int_equal(seg.n_rows, n);
                for (int a = 0; a < GPU_INDEX_N_ATTRS; a++) {
                    struct gpu_index_bitmaps want;

                    for (uint32_t i = 0; i < n; i++) {
                        v[i] = gpu_index_attr_value(&recs[i], a);
                    }
                    gpu_index_bitmaps_init(&want);
                    assert_int_equal(gpu_index_build(ref, v, n,
                                                     gpu_index_attr_bits(a),
                                                     e, 0, &want, NULL),
                                     GPU_OK);
                    if (!gpu_index_bitmaps_equal(&want, &seg.attrs[a])) {
                        fail_msg("%s builder, n=%"PRIu32" %s, faults %u: "
                                 "attribute %s differs from the host's "
                                 "columns", gpu_index_backend_name(
                                     backends[bi]), n,
                                 gpu_index_encoding_name(e), faults,
                                 gpu_index_attr_name(a));
                    }
                    gpu_index_bitmaps_free(&want);
                }
                n_cases++;
            }
            gpu_index_segment_index_free(&seg);
        }
        gpu_index_builder_destroy(b);
    }
    printf("test-index: %d segment builds from records compared with the "
           "host's columns\n", n_cases);
    gpu_index_builder_destroy(ref);
    free(recs);
    free(v);
    (void) state;
}

/* The recorder writes its segments' pcap itself, in large writes: the
 * bytes must be what libpcap's dumper writes for the same packets (file
 * header, nanosecond record headers, frames cut at the snaplen), since
 * other tools read the segments. */
static void
test_store_pcap_bytes(void **state)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-index-%d", (int) getpid());
    rm_rf(tmpdir);
    struct rng g = case_rng(556, 0);
    const uint32_t n = 1500, seg = 1000;
    uint64_t ts0 = 1700000000ull * 1000000000ull + 999999000ull;
    struct gpu_index_recorder *r = make_recorder(tmpdir, seg, 0, 0,
                                                 GPU_INDEX_BACKEND_CPU,
                                                 GPU_INDEX_PLWAH);
    static uint8_t frames[1500][600];
    uint32_t lens[1500];
    char path[512], ref[512];

    for (uint32_t i = 0; i < n; i++) {
        lens[i] = 14 + rng_below(&g, 586);
        for (uint32_t j = 0; j < lens[i]; j++) {
            frames[i][j] = rng_below(&g, 256);
        }
        while (!gpu_index_recorder_submit(r, frames[i], lens[i],
                                          ts0 + i * 1000ull, 3)) {
            usleep(100);
        }
    }
    assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
    gpu_index_recorder_destroy(r);

    for (uint32_t s = 0; s < 2; s++) {
        pcap_t *dead = pcap_open_dead_with_tstamp_precision(
            DLT_EN10MB, 256, PCAP_TSTAMP_PRECISION_NANO);
        pcap_dumper_t *d;

        snprintf(ref, sizeof ref, "%s.ref.pcap", tmpdir);
        d = pcap_dump_open(dead, ref);
        assert_non_null(d);
        for (uint32_t i = s * seg; i < (s + 1) * seg && i < n; i++) {
            uint64_t ts = ts0 + i * 1000ull;
            struct pcap_pkthdr h;

            h.ts.tv_sec = ts / 1000000000u;
            h.ts.tv_usec = ts % 1000000000u;
            h.caplen = lens[i] < 256 ? lens[i] : 256;
            h.len = lens[i];
            pcap_dump((u_char *) d, &h, frames[i]);
        }
        pcap_dump_close(d);
        pcap_close(dead);

        snprintf(path, sizeof path, "%s/seg-%016d.pcap", tmpdir, s + 1);
        FILE *a = fopen(path, "rb"), *b = fopen(ref, "rb");
        assert_non_null(a);
        assert_non_null(b);
        long pos = 0;
        int ca, cb;
        do {
            ca = fgetc(a);
            cb = fgetc(b);
            if (ca != cb) {
                fail_msg("segment %u differs from libpcap's at byte %ld",
                         s + 1, pos);
            }
            pos++;
        } while (ca != EOF);
        fclose(a);
        fclose(b);
        unlink(ref);
    }
    rm_rf(tmpdir);
    (void) state;
}

static uint64_t
dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    uint64_t n = 0;
    char path[512];
    struct stat st;

    while (d && (de = readdir(d))) {
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (de->d_name[0] != '.' && !stat(path, &st)) {
            n += st.st_size;
        }
    }
    if (d) {
        closedir(d);
    }
    return n;
}

static void
test_store_retention(void **state)
{
    struct rng g = case_rng(556, 0);
    uint32_t n = 5000;
    struct gpu_index_record *recs = calloc(n, sizeof *recs);
    struct gpu_index_recorder *r;
    struct gpu_index_recorder_stats st;
    uint64_t one;

    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-index-%d", (int) getpid());
    rm_rf(tmpdir);
    /* Measure one segment, then keep at most about two. */
    r = make_recorder(tmpdir, 1000, 0, 0, GPU_INDEX_BACKEND_CPU, 1);
    feed(r, &g, recs, 1000, 1700000000ull * 1000000000ull);
    gpu_index_recorder_flush(r);
    gpu_index_recorder_destroy(r);
    one = dir_bytes(tmpdir);
    rm_rf(tmpdir);

    r = make_recorder(tmpdir, 1000, one * 5 / 2, 0, backends[0], 1);
    feed(r, &g, recs, n, 1700000000ull * 1000000000ull);
    assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
    gpu_index_recorder_get_stats(r, &st);
    assert_int_equal(st.segments_written, 5);
    assert_int_equal(st.segments_deleted, 3);
    assert_int_equal(count_files(tmpdir, ".idx"), 2);
    assert_true(dir_bytes(tmpdir) <= one * 5 / 2);
    /* Only the newest two segments answer: rows 3000..4999. */
    struct gpu_index_query *q;
    char err[100];
    int64_t want = 0;
    assert_int_equal(gpu_index_query_parse("tcp", &q, err, sizeof err), 0);
    for (uint32_t i = 3000; i < n; i++) {
        want += gpu_index_query_match(q, &recs[i]);
    }
    gpu_index_query_destroy(q);
    assert_int_equal(store_query(tmpdir, "tcp", NULL, NULL), want);
    gpu_index_recorder_destroy(r);

    /* Retention by age: the oldest remaining segment is made two hours
     * old; the next segment closed deletes it and keeps the other. */
    char path[512];
    struct timeval tv[2];
    gettimeofday(&tv[0], NULL);
    tv[0].tv_sec -= 7200;
    tv[1] = tv[0];
    snprintf(path, sizeof path, "%s/seg-%016d.pcap", tmpdir, 4);
    assert_int_equal(utimes(path, tv), 0);
    struct gpu_index_recorder_config cfg;
    char err2[200];
    gpu_index_recorder_config_init(&cfg);
    cfg.dir = tmpdir;
    cfg.backend = GPU_INDEX_BACKEND_CPU;
    cfg.segment_packets = 1000;
    cfg.retention_seconds = 3600;
    assert_int_equal(gpu_index_recorder_create(&cfg, &r, err2, sizeof err2),
                     GPU_OK);
    feed(r, &g, recs, 1000, 1700000200ull * 1000000000ull);
    gpu_index_recorder_flush(r);
    gpu_index_recorder_get_stats(r, &st);
    assert_int_equal(st.segments_deleted, 1);
    assert_int_equal(count_files(tmpdir, ".idx"), 2);
    assert_int_equal(access(path, F_OK), -1);
    gpu_index_recorder_destroy(r);
    rm_rf(tmpdir);
    free(recs);
}

static void
damage(const char *path, long off, bool truncate_it)
{
    FILE *f = fopen(path, "r+b");
    struct stat st;

    assert_non_null(f);
    assert_int_equal(stat(path, &st), 0);
    if (truncate_it) {
        fclose(f);
        assert_int_equal(truncate(path, off), 0);
        return;
    }
    fseek(f, off < 0 ? st.st_size + off : off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off < 0 ? st.st_size + off : off, SEEK_SET);
    fputc(c ^ 0x20, f);
    fclose(f);
}

static void
test_store_damage(void **state)
{
    struct rng g = case_rng(557, 0);
    uint32_t n = 3000;
    struct gpu_index_record *recs = calloc(n, sizeof *recs);
    struct gpu_index_recorder *r;
    struct gpu_index_segment_index seg;
    char idx[3][512], err[256];
    unsigned int skipped;
    int64_t all;
    uint64_t *offs, t0, t1;

    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-index-%d", (int) getpid());
    rm_rf(tmpdir);
    r = make_recorder(tmpdir, 1000, 0, 0, backends[0], 0);
    feed(r, &g, recs, n, 1700000000ull * 1000000000ull);
    gpu_index_recorder_flush(r);
    gpu_index_recorder_destroy(r);
    all = store_query(tmpdir, "ip4 or not ip4", &skipped, NULL);
    assert_int_equal(all, n);
    for (int i = 0; i < 3; i++) {
        snprintf(idx[i], sizeof idx[i], "%s/seg-%016d.idx", tmpdir, i + 1);
        gpu_index_segment_index_init(&seg);
        if (gpu_index_file_read(idx[i], &seg, &offs, &t0, &t1, err,
                                sizeof err)) {
            fail_msg("%s: %s", idx[i], err);
        }
        assert_int_equal(seg.n_rows, 1000);
        free(offs);
        gpu_index_segment_index_free(&seg);
    }

    /* A flipped bit in the middle, a truncated file, a flipped header
     * byte: each refused with a reason, and the store skips it. */
    damage(idx[0], 300, false);
    damage(idx[1], 100, true);
    gpu_index_segment_index_init(&seg);
    assert_int_equal(gpu_index_file_read(idx[0], &seg, &offs, &t0, &t1, err,
                                         sizeof err), GPU_ERR_INVALID);
    printf("test-index: corrupted index refused: %s\n", err);
    assert_int_equal(gpu_index_file_read(idx[1], &seg, &offs, &t0, &t1, err,
                                         sizeof err), GPU_ERR_INVALID);
    printf("test-index: truncated index refused: %s\n", err);
    gpu_index_segment_index_free(&seg);
    assert_int_equal(store_query(tmpdir, "ip4 or not ip4", &skipped, NULL),
                     1000);
    assert_int_equal(skipped, 2);

    /* A crash mid-segment: a pcap with no index, and a torn temporary
     * index file.  The complete segment still answers. */
    char path[512];
    snprintf(path, sizeof path, "%s/seg-%016d.pcap", tmpdir, 9);
    FILE *f = fopen(path, "wb");
    fwrite("\xd4\xc3\xb2\xa1garbage", 1, 11, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/seg-%016d.idx.tmp", tmpdir, 9);
    f = fopen(path, "wb");
    fwrite("OVSGIDX1", 1, 8, f);
    fclose(f);
    assert_int_equal(store_query(tmpdir, "ip4 or not ip4", &skipped, NULL),
                     1000);
    assert_int_equal(skipped, 3);

    /* A new recorder on the same folder goes on after the last segment
     * and leaves the damaged ones alone. */
    r = make_recorder(tmpdir, 1000, 0, 0, backends[0], 0);
    feed(r, &g, recs, 500, 1700000100ull * 1000000000ull);
    gpu_index_recorder_flush(r);
    gpu_index_recorder_destroy(r);
    assert_int_equal(store_query(tmpdir, "ip4 or not ip4", &skipped, NULL),
                     1500);
    rm_rf(tmpdir);
    free(recs);
}

/* Records 'n' packets in a child process, waits until the recorder has
 * them (and has gone idle, flushing them), and kills the child with
 * SIGKILL: what a crash of ovs-vswitchd leaves. */
static void
crash_while_recording(const char *dir, struct gpu_index_record *recs,
                      uint32_t n, uint64_t seed)
{
    pid_t pid = fork();
    int status;

    assert_true(pid >= 0);
    if (!pid) {
        struct rng g = case_rng(seed, 0);
        struct gpu_index_recorder *r = make_recorder(dir, 1000, 0, 0,
                                                     GPU_INDEX_BACKEND_CPU,
                                                     0);
        struct gpu_index_recorder_stats st;

        feed(r, &g, recs, n, 1700000000ull * 1000000000ull);
        do {
            usleep(1000);
            gpu_index_recorder_get_stats(r, &st);
        } while (st.recorded < n);
        usleep(50000);
        raise(SIGKILL);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* The child's records, made again from the same seed. */
    struct rng g = case_rng(seed, 0);
    for (uint32_t i = 0; i < n; i++) {
        struct gpu_index_record want;
        uint8_t frame[128];
        size_t len;

        gen_record(&g, &want, 0);
        if (!want.ip_version) {
            want.vlan = GPU_INDEX_NO_VLAN;
        }
        len = make_frame(frame, &want);
        gpu_index_record_from_frame(&recs[i], frame, len, len,
                                    1700000000ull * 1000000000ull
                                    + i * 1000ull, 7);
    }
}

/* Every query of 'qs' answers over the store exactly what the first 'n'
 * of 'recs' say: nothing lost, nothing that was not recorded. */
static void
check_store_holds(const char *dir, const struct gpu_index_record *recs,
                  uint32_t n)
{
    static const char *qs[] = {
        "ip4 or not ip4", "tcp and dport=443", "src=10.1.0.0/16 or udp",
        "in_port=7", "not in_port=7", "dport=1000-2000 and not tcp_flags&syn",
    };

    for (size_t qi = 0; qi < sizeof qs / sizeof qs[0]; qi++) {
        struct gpu_index_query *q;
        unsigned int skipped;
        char err[200];
        int64_t want = 0;

        assert_int_equal(gpu_index_query_parse(qs[qi], &q, err, sizeof err),
                         GPU_OK);
        for (uint32_t i = 0; i < n; i++) {
            want += gpu_index_query_match(q, &recs[i]);
        }
        gpu_index_query_destroy(q);
        if (store_query(dir, qs[qi], &skipped, NULL) != want || skipped) {
            fail_msg("\"%s\": store answers %"PRId64" (%u segments "
                     "skipped), the records say %"PRId64, qs[qi],
                     store_query(dir, qs[qi], NULL, NULL), skipped, want);
        }
    }
}

static off_t
file_size(const char *path)
{
    struct stat st;

    return stat(path, &st) ? -1 : st.st_size;
}

/* kill -9 while a segment is open: the closed segments stay whole, the
 * open one's whole records are recovered and indexed at the next start,
 * a record cut short is cut off, an unreadable segment is set aside, and
 * the store records again. */
static void
test_store_crash(void **state)
{
    const uint32_t n = 2500;    /* Two closed segments, 500 open. */
    struct gpu_index_record *recs = calloc(n + 300, sizeof *recs);
    struct gpu_index_recorder_stats st;
    struct gpu_index_recorder *r;
    char pcap[512], ports[512];
    off_t size;

    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-index-%d", (int) getpid());
    snprintf(pcap, sizeof pcap, "%s/seg-%016d.pcap", tmpdir, 3);
    snprintf(ports, sizeof ports, "%s/seg-%016d.ports", tmpdir, 3);

    /* 1. Killed: every record was handed to the kernel. */
    rm_rf(tmpdir);
    crash_while_recording(tmpdir, recs, n, 560);
    assert_int_equal(count_files(tmpdir, ".idx"), 2);
    assert_int_equal(file_size(ports), 4 * 500);
    r = make_recorder(tmpdir, 1000, 0, 0, backends[n_backends - 1], 1);
    gpu_index_recorder_get_stats(r, &st);
    printf("test-index: after kill -9: %s",
           gpu_index_recorder_recovery_log(r));
    assert_int_equal(st.segments_recovered, 1);
    assert_int_equal(st.records_recovered, 500);
    assert_int_equal(st.bytes_cut, 0);
    assert_int_equal(access(ports, F_OK), -1);
    check_store_holds(tmpdir, recs, n);
    /* It records again, after the recovered segment. */
    struct rng g = case_rng(561, 0);
    feed(r, &g, recs + n, 300, 1700000100ull * 1000000000ull);
    assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
    gpu_index_recorder_destroy(r);
    assert_int_equal(count_files(tmpdir, ".idx"), 4);
    check_store_holds(tmpdir, recs, n + 300);

    /* 2. The last record cut short in the pcap: cut off, 499 kept. */
    rm_rf(tmpdir);
    crash_while_recording(tmpdir, recs, n, 562);
    size = file_size(pcap);
    assert_int_equal(truncate(pcap, size - 5), 0);
    r = make_recorder(tmpdir, 1000, 0, 0, backends[0], 0);
    gpu_index_recorder_get_stats(r, &st);
    printf("test-index: last record torn: %s",
           gpu_index_recorder_recovery_log(r));
    assert_int_equal(st.records_recovered, 499);
    assert_true(st.bytes_cut > 0 && st.bytes_cut < 200);
    assert_int_equal(file_size(pcap), size - 5 - (off_t) st.bytes_cut);
    gpu_index_recorder_destroy(r);
    check_store_holds(tmpdir, recs, n - 1);

    /* 3. The ports journal ten records short: those ten are cut. */
    rm_rf(tmpdir);
    crash_while_recording(tmpdir, recs, n, 563);
    assert_int_equal(truncate(ports, 4 * 490 + 2), 0);
    r = make_recorder(tmpdir, 1000, 0, 0, backends[0], 0);
    gpu_index_recorder_get_stats(r, &st);
    assert_int_equal(st.records_recovered, 490);
    gpu_index_recorder_destroy(r);
    check_store_holds(tmpdir, recs, n - 10);

    /* 4. No pcap header of ours: set aside, never served, and the next
     * segment is numbered after it. */
    rm_rf(tmpdir);
    crash_while_recording(tmpdir, recs, n, 564);
    FILE *f = fopen(pcap, "r+b");
    fputc(0, f);
    fclose(f);
    r = make_recorder(tmpdir, 1000, 0, 0, backends[0], 0);
    gpu_index_recorder_get_stats(r, &st);
    printf("test-index: bad header: %s", gpu_index_recorder_recovery_log(r));
    assert_int_equal(st.segments_set_aside, 1);
    assert_int_equal(st.segments_recovered, 0);
    assert_non_null(strstr(gpu_index_recorder_recovery_log(r),
                           "set aside as seg-0000000000000003.pcap.damaged"));
    assert_int_equal(count_files(tmpdir, ".damaged"), 2);
    check_store_holds(tmpdir, recs, 2000);
    feed(r, &g, recs + n, 10, 1700000100ull * 1000000000ull);
    assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
    gpu_index_recorder_destroy(r);
    snprintf(pcap, sizeof pcap, "%s/seg-%016d.idx", tmpdir, 4);
    assert_int_equal(access(pcap, F_OK), 0);

    /* 5. One recorder a folder. */
    struct gpu_index_recorder_config cfg;
    struct gpu_index_recorder *r2;
    char err[256];

    r = make_recorder(tmpdir, 1000, 0, 0, backends[0], 0);
    gpu_index_recorder_config_init(&cfg);
    cfg.dir = tmpdir;
    assert_int_equal(gpu_index_recorder_create(&cfg, &r2, err, sizeof err),
                     GPU_ERR_INVALID);
    assert_non_null(strstr(err, "in use by another recorder"));
    /* ...unless it replaces the one there: it records once that one has
     * closed (its open segment closed, not taken for a crashed one). */
    cfg.wait_for_lock = true;
    cfg.segment_packets = 1000;
    feed(r, &g, recs + n + 10, 100, 1700000200ull * 1000000000ull);
    assert_int_equal(gpu_index_recorder_create(&cfg, &r2, err, sizeof err),
                     GPU_OK);
    assert_null(gpu_index_recorder_recovery_log(r2));
    feed(r2, &g, recs + n + 110, 100, 1700000300ull * 1000000000ull);
    gpu_index_recorder_destroy(r);
    assert_int_equal(gpu_index_recorder_flush(r2), GPU_OK);
    assert_string_equal(gpu_index_recorder_recovery_log(r2), "");
    gpu_index_recorder_get_stats(r2, &st);
    assert_int_equal(st.recorded, 100);
    assert_int_equal(st.segments_recovered + st.segments_set_aside, 0);
    gpu_index_recorder_destroy(r2);
    /* Segments 1, 2 (the crashed run's), 4 (ten), 5 (r's hundred), 6
     * (r2's hundred). */
    memmove(recs + 2000, recs + n, 210 * sizeof *recs);
    check_store_holds(tmpdir, recs, 2210);
    rm_rf(tmpdir);
    free(recs);
}

/* A recorder of a fresh store in 'tmpdir' with 'slots' ring slots, its
 * worker paused so that the ring fills. */
static struct gpu_index_recorder *
paused_recorder(uint32_t slots)
{
    struct gpu_index_recorder *r;

    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-index-%d", (int) getpid());
    rm_rf(tmpdir);
    r = make_recorder(tmpdir, 1000, 0, slots, backends[0], 0);
    gpu_index_recorder_pause(r, true);
    return r;
}

/* Checks what a paused recorder counted, then lets it write the ring out
 * and waits for it. */
static void
check_drops_and_resume(struct gpu_index_recorder *r, uint64_t submitted,
                       uint64_t dropped)
{
    struct gpu_index_recorder_stats st;

    gpu_index_recorder_get_stats(r, &st);
    assert_int_equal(st.submitted, submitted);
    assert_int_equal(st.dropped, dropped);
    gpu_index_recorder_pause(r, false);
    assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
}

static void
test_recorder_drops(void **state)
{
    struct gpu_index_recorder *r;
    struct gpu_index_recorder_stats st;
    uint8_t frame[60] = { 0 };
    int accepted = 0;

    r = paused_recorder(64);
    for (int i = 0; i < 200; i++) {
        accepted += gpu_index_recorder_submit(r, frame, sizeof frame,
                                              i * 1000ull, 1);
    }
    assert_int_equal(accepted, 64);
    check_drops_and_resume(r, 200, 136);
    gpu_index_recorder_get_stats(r, &st);
    assert_int_equal(st.recorded, 64);
    gpu_index_recorder_destroy(r);
    assert_int_equal(store_query(tmpdir, "not ip4", NULL, NULL), 64);
    rm_rf(tmpdir);
}

/* With an overload snaplen, records keep only that many bytes while the
 * ring is more than three quarters full (here: a paused writer, 64
 * slots): 40 packets one by one are kept whole, a batch of 20 that leaves
 * fewer than 16 slots free and the 4 packets after it are kept short, 6
 * that find the ring full are dropped; every record kept is in the
 * indexes and in the pcap at the length it was given. */
static void
test_recorder_overload(void **state)
{
    struct gpu_index_recorder_config cfg;
    struct gpu_index_recorder_stats st;
    struct gpu_index_recorder *r;
    struct gpu_index_frame f[20];
    uint8_t frame[200];
    char err[256], path[512], perr[PCAP_ERRBUF_SIZE];
    size_t taken = 0;

    (void) state;
    for (size_t i = 0; i < sizeof frame; i++) {
        frame[i] = i;
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-index-%d", (int) getpid());
    rm_rf(tmpdir);
    gpu_index_recorder_config_init(&cfg);
    cfg.dir = tmpdir;
    cfg.backend = backends[0];
    cfg.segment_packets = 1000;
    cfg.ring_slots = 64;
    /* Below what the indexes need, or above the snaplen: refused. */
    cfg.overload_snaplen = 32;
    assert_int_not_equal(gpu_index_recorder_create(&cfg, &r, err,
                                                   sizeof err), GPU_OK);
    cfg.overload_snaplen = cfg.snaplen + 1;
    assert_int_not_equal(gpu_index_recorder_create(&cfg, &r, err,
                                                   sizeof err), GPU_OK);
    cfg.overload_snaplen = 64;
    assert_int_equal(gpu_index_recorder_create(&cfg, &r, err, sizeof err),
                     GPU_OK);
    gpu_index_recorder_pause(r, true);

    for (int i = 0; i < 40; i++) {
        taken += gpu_index_recorder_submit(r, frame, sizeof frame,
                                           i * 1000ull, 1);
    }
    for (int i = 0; i < 20; i++) {
        f[i] = (struct gpu_index_frame) {
            .data = frame, .cap_len = sizeof frame, .len = sizeof frame,
            .in_port = 2,
        };
    }
    taken += gpu_index_recorder_submit_batch(r, f, 20, 40000ull);
    for (int i = 0; i < 10; i++) {
        taken += gpu_index_recorder_submit(r, frame, sizeof frame,
                                           (60 + i) * 1000ull, 3);
    }
    assert_int_equal(taken, 64);
    gpu_index_recorder_get_stats(r, &st);
    assert_int_equal(st.squeezed, 24);
    check_drops_and_resume(r, 70, 6);
    gpu_index_recorder_destroy(r);

    assert_int_equal(store_query(tmpdir, "in_port=1", NULL, NULL), 40);
    assert_int_equal(store_query(tmpdir, "in_port=2", NULL, NULL), 20);
    assert_int_equal(store_query(tmpdir, "in_port=3", NULL, NULL), 4);
    snprintf(path, sizeof path, "%s/seg-%016d.pcap", tmpdir, 1);
    pcap_t *p = pcap_open_offline(path, perr);
    struct pcap_pkthdr *h;
    const u_char *data;
    int n = 0;

    assert_non_null(p);
    while (pcap_next_ex(p, &h, &data) == 1) {
        uint32_t want = n < 40 ? sizeof frame : 64;

        if (h->caplen != want || h->len != sizeof frame
            || memcmp(data, frame, h->caplen)) {
            fail_msg("record %d: %u of %u bytes kept, %u expected", n,
                     h->caplen, h->len, want);
        }
        n++;
    }
    pcap_close(p);
    assert_int_equal(n, 64);
    rm_rf(tmpdir);
}

/* Batches take their slots at once while the ring has room for all of
 * a batch, and one by one (the rest dropped and counted) when it has
 * not; every frame taken is recorded, in order, with its own port. */
static void
test_recorder_batches(void **state)
{
    struct gpu_index_frame f[40];
    struct gpu_index_recorder_stats st;
    struct gpu_index_recorder *r;
    uint8_t frame[40][60];
    size_t taken = 0;

    r = paused_recorder(100);
    for (int b = 0; b < 4; b++) {
        size_t n = b < 3 ? 32 : 40;     /* 96 fit, then 32 of 40. */

        for (size_t i = 0; i < n; i++) {
            memset(frame[i], 0, sizeof frame[i]);
            f[i] = (struct gpu_index_frame) {
                .data = frame[i], .cap_len = 60, .len = 60,
                .in_port = b + 1,
            };
        }
        taken += gpu_index_recorder_submit_batch(r, f, n, b * 1000000ull);
    }
    assert_int_equal(taken, 128);
    check_drops_and_resume(r, 136, 8);
    /* The ring went round: a batch now fits again. */
    assert_int_equal(gpu_index_recorder_submit_batch(r, f, 32, 5000000ull),
                     32);
    assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
    gpu_index_recorder_get_stats(r, &st);
    assert_int_equal(st.recorded, 160);
    gpu_index_recorder_destroy(r);
    assert_int_equal(store_query(tmpdir, "in_port=1", NULL, NULL), 32);
    assert_int_equal(store_query(tmpdir, "in_port=3", NULL, NULL), 32);
    assert_int_equal(store_query(tmpdir, "in_port=4", NULL, NULL), 64);
    rm_rf(tmpdir);
    (void) state;
}

struct producer {
    struct gpu_index_recorder *r;
    int id;
    int accepted;
};

static void *
producer_thread(void *p_)
{
    struct producer *p = p_;
    uint8_t frame[64] = { 0 };

    frame[20] = p->id;
    if (p->id % 2) {
        for (int i = 0; i < 5000; i++) {
            p->accepted += gpu_index_recorder_submit(p->r, frame,
                                                     sizeof frame,
                                                     i * 1000ull, p->id);
        }
    } else {
        /* The others as a datapath does, a batch at a time. */
        struct gpu_index_frame f[25];

        for (int i = 0; i < 25; i++) {
            f[i] = (struct gpu_index_frame) {
                .data = frame, .cap_len = sizeof frame,
                .len = sizeof frame, .in_port = p->id,
            };
        }
        for (int i = 0; i < 5000; i += 25) {
            p->accepted += gpu_index_recorder_submit_batch(p->r, f, 25,
                                                           i * 1000ull);
        }
    }
    return NULL;
}

/* Four threads submit at once, two packet by packet and two in batches:
 * every packet is either recorded or counted as dropped, and the store
 * holds exactly the recorded ones, each thread's under its port. */
static void
test_recorder_concurrent(void **state)
{
    struct gpu_index_recorder *r;
    struct gpu_index_recorder_stats st;
    struct producer p[4];
    pthread_t th[4];
    int accepted = 0;

    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-index-%d", (int) getpid());
    rm_rf(tmpdir);
    r = make_recorder(tmpdir, 7000, 0, 1024, backends[n_backends - 1], 1);
    for (int i = 0; i < 4; i++) {
        p[i] = (struct producer) { r, i + 1, 0 };
        pthread_create(&th[i], NULL, producer_thread, &p[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        accepted += p[i].accepted;
    }
    assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
    gpu_index_recorder_get_stats(r, &st);
    printf("test-index: 4 producers, 20000 packets: %"PRIu64" recorded, "
           "%"PRIu64" dropped\n", st.recorded, st.dropped);
    assert_int_equal(st.submitted, 20000);
    assert_int_equal(st.recorded, accepted);
    assert_int_equal(st.recorded + st.dropped, 20000);
    gpu_index_recorder_destroy(r);
    assert_int_equal(store_query(tmpdir, "not ip4", NULL, NULL), accepted);
    /* in_port is not in the pcap, only in the index: each producer's
     * packets are found under its own. */
    for (int i = 0; i < 4; i++) {
        char q[32];

        snprintf(q, sizeof q, "in_port=%d", i + 1);
        assert_int_equal(store_query(tmpdir, q, NULL, NULL),
                         p[i].accepted);
    }
    rm_rf(tmpdir);
}

/* ---- Ring order under concurrency. ---- */

#define ORDER_PRODUCERS 4
#define ORDER_FRAMES 100000

struct order_producer {
    struct gpu_index_recorder *r;
    int id;
    struct rng g;
    uint8_t *accepted;          /* [ORDER_FRAMES]: taken by the recorder. */
};

/* Frame 'num' of producer 'id': not IPv4 (EtherType 0), its producer and
 * number in the payload. */
static void
order_frame(uint8_t f[64], int id, uint32_t num)
{
    memset(f, 0, 64);
    f[20] = id;
    memcpy(f + 24, &num, sizeof num);
}

/* Submits numbered frames, one by one or in batches of random sizes (1
 * to 40, above and below the writer's runs of 32), with random pauses so
 * that the ring is sometimes full and sometimes empty. */
static void *
order_producer_thread(void *p_)
{
    struct order_producer *p = p_;
    static uint8_t frames[ORDER_PRODUCERS][40][64];
    uint8_t (*mine)[64] = frames[p->id - 1];
    uint32_t num = 0;

    while (num < ORDER_FRAMES) {
        uint32_t n = rng_below(&p->g, 3) ? 1 + rng_below(&p->g, 40) : 0;

        if (!n) {
            order_frame(mine[0], p->id, num);
            p->accepted[num] = gpu_index_recorder_submit(p->r, mine[0], 64,
                                                         num, p->id);
            num++;
        } else {
            struct gpu_index_frame f[40];
            size_t taken;

            n = n < ORDER_FRAMES - num ? n : ORDER_FRAMES - num;
            for (uint32_t i = 0; i < n; i++) {
                order_frame(mine[i], p->id, num + i);
                f[i] = (struct gpu_index_frame) {
                    .data = mine[i], .cap_len = 64, .len = 64,
                    .in_port = p->id,
                };
            }
            /* A batch takes its first 'taken' frames. */
            taken = gpu_index_recorder_submit_batch(p->r, f, n, num);
            for (uint32_t i = 0; i < n; i++) {
                p->accepted[num + i] = i < taken;
            }
            num += n;
        }
        if (!rng_below(&p->g, 8)) {
            usleep(rng_below(&p->g, 200));
        }
    }
    return NULL;
}

/* Several producers submit numbered frames against the running writer,
 * through a small ring that wraps thousands of times and segments that
 * rotate: every frame a submit took is in the store exactly once, none
 * that it refused is, and each producer's frames are in the order it
 * submitted them. */
static void
test_recorder_ring_order(void **state)
{
    struct order_producer p[ORDER_PRODUCERS];
    pthread_t th[ORDER_PRODUCERS];
    struct gpu_index_recorder_stats st;
    struct gpu_index_recorder *r;
    char pcap_path[1100], errbuf[PCAP_ERRBUF_SIZE];
    uint32_t next[ORDER_PRODUCERS] = { 0 };
    uint64_t accepted = 0, seen = 0;
    struct pcap_pkthdr *h;
    const u_char *data;
    pcap_t *pc;

    snprintf(tmpdir, sizeof tmpdir, "/tmp/test-index-%d", (int) getpid());
    rm_rf(tmpdir);
    r = make_recorder(tmpdir, 10000, 0, 256, backends[n_backends - 1], 1);
    for (int i = 0; i < ORDER_PRODUCERS; i++) {
        p[i] = (struct order_producer) {
            .r = r, .id = i + 1, .g = case_rng(18, i),
            .accepted = calloc(ORDER_FRAMES, 1),
        };
        pthread_create(&th[i], NULL, order_producer_thread, &p[i]);
    }
    for (int i = 0; i < ORDER_PRODUCERS; i++) {
        pthread_join(th[i], NULL);
        for (uint32_t k = 0; k < ORDER_FRAMES; k++) {
            accepted += p[i].accepted[k];
        }
    }
    assert_int_equal(gpu_index_recorder_flush(r), GPU_OK);
    gpu_index_recorder_get_stats(r, &st);
    printf("test-index: ring order, %d producers, %d frames: %"PRIu64
           " recorded, %"PRIu64" dropped, %"PRIu64" segments\n",
           ORDER_PRODUCERS, ORDER_PRODUCERS * ORDER_FRAMES, st.recorded,
           st.dropped, st.segments_written);
    assert_int_equal(st.submitted, ORDER_PRODUCERS * ORDER_FRAMES);
    assert_int_equal(st.recorded, accepted);
    assert_int_equal(st.recorded + st.dropped, st.submitted);
    gpu_index_recorder_destroy(r);

    /* The store's frames, segment after segment: each producer's numbers
     * must be exactly its accepted ones, rising. */
    snprintf(pcap_path, sizeof pcap_path, "%s.order.pcap", tmpdir);
    assert_int_equal(store_query(tmpdir, "not ip4", NULL, pcap_path),
                     accepted);
    pc = pcap_open_offline(pcap_path, errbuf);
    assert_non_null(pc);
    while (pcap_next_ex(pc, &h, &data) == 1) {
        uint32_t num;
        int id;

        assert_int_equal(h->caplen, 64);
        id = data[20];
        assert_true(id >= 1 && id <= ORDER_PRODUCERS);
        memcpy(&num, data + 24, sizeof num);
        /* Skip the refused ones: the next accepted must be this one. */
        while (next[id - 1] < ORDER_FRAMES
               && !p[id - 1].accepted[next[id - 1]]) {
            next[id - 1]++;
        }
        if (num != next[id - 1]) {
            fail_msg("producer %d: frame %"PRIu32" where %"PRIu32" was "
                     "due (lost, repeated or out of order)", id, num,
                     next[id - 1]);
        }
        next[id - 1]++;
        seen++;
    }
    pcap_close(pc);
    assert_int_equal(seen, accepted);
    for (int i = 0; i < ORDER_PRODUCERS; i++) {
        while (next[i] < ORDER_FRAMES && !p[i].accepted[next[i]]) {
            next[i]++;
        }
        assert_int_equal(next[i], ORDER_FRAMES);
        free(p[i].accepted);
    }
    unlink(pcap_path);
    rm_rf(tmpdir);
    (void) state;
}

int
main(void)
{
    have_cuda = gpu_index_cuda_available();
    int chosen[2];

    master_seed = test_seed_init("test-index");
    n_backends = test_backends_from_env("test-index", "GPU_INDEX_BACKEND",
                                        have_cuda, GPU_INDEX_BACKEND_CPU,
                                        GPU_INDEX_BACKEND_CUDA, chosen);
    if (!n_backends) {
        return 1;
    }
    for (int i = 0; i < n_backends; i++) {
        backends[i] = chosen[i];
    }
    printf("test-index: backends:");
    for (int i = 0; i < n_backends; i++) {
        printf(" %s", gpu_index_backend_name(backends[i]));
    }
    printf("%s\n", have_cuda ? "" : " (no CUDA device here: the CPU versus "
           "CUDA comparison is skipped)");

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encoding_words),
        cmocka_unit_test(test_check_refuses),
        cmocka_unit_test(test_build_random),
        cmocka_unit_test(test_pinned_reuse),
        cmocka_unit_test(test_cpu_vs_cuda),
        cmocka_unit_test(test_plwah_smaller),
        cmocka_unit_test(test_record_parse),
        cmocka_unit_test(test_queries_random),
        cmocka_unit_test(test_query_syntax),
        cmocka_unit_test(test_roaring_oracle),
        cmocka_unit_test(test_store_rotation),
        cmocka_unit_test(test_store_pcap_bytes),
        cmocka_unit_test(test_store_disk_full),
        cmocka_unit_test(test_store_disk_rate),
        cmocka_unit_test(test_segment_build_threads),
        cmocka_unit_test(test_segment_build_records),
        cmocka_unit_test(test_store_retention),
        cmocka_unit_test(test_store_damage),
        cmocka_unit_test(test_store_crash),
        cmocka_unit_test(test_recorder_drops),
        cmocka_unit_test(test_recorder_overload),
        cmocka_unit_test(test_recorder_batches),
        cmocka_unit_test(test_recorder_concurrent),
        cmocka_unit_test(test_recorder_ring_order),
    };
    const char *filter = getenv("GPU_TEST_FILTER");
    if (filter && *filter) {
        cmocka_set_test_filter(filter);
    }
    int rc = test_run_group("test-index", tests);
    if (rc) {
        printf("test-index: FAILED; rerun with GPU_TEST_SEED=0x%016" PRIx64
               "\n", master_seed);
    }
    return rc;
}
