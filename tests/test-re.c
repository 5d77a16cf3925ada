/*
 * Copyright (c) 2026 The ovs-gpu authors.
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at:
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

/*
 * Tests of gpu_services/re/: chunking against a plain bit-serial Rabin
 * reference written here (not re-inline.h) on random data and on real
 * text (the repository's Snort community rules); the CPU and CUDA
 * chunkers against each other;
 * encode then decode byte-exact over many packets with cache wrap-around
 * and epochs; loss, reordering and duplication never give wrong bytes;
 * malformed shims refused; the packet helpers on IPv4/IPv6 TCP/UDP frames
 * with checksums verified here independently.
 *
 * Environment:
 *   GPU_TEST_SEED     master seed (decimal or 0x hex); else time-based.
 *                     Always printed; failures print the case's seed.
 *   GPU_RE_BACKEND    cpu | cuda | all (default: every backend usable
 *                     here).  "cuda" without a device fails.
 *   OVSGPU_DATA       folder holding snort-community/community.rules
 *                     (default: the build tree's data/); a missing file
 *                     fails, naming it.
 *   GPU_TEST_FILTER   run only tests whose names match this pattern.
 */
#include <config.h>

#include <inttypes.h>
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

#include "gpu_services/re/gpu-re.h"

/* libxxhash (Debian's libxxhash-dev), header only: the oracle of the
 * shim's payload check. */
#define XXH_INLINE_ALL
#include <xxhash.h>

static uint64_t master_seed;
static enum gpu_re_backend backends[2];
static int n_backends;

/* ---- Random numbers (the generator is in tests/test-common.h). ---- */

static uint64_t
case_seed(uint64_t a, uint64_t b)
{
    struct rng r = rng_for_case(master_seed, a, b);

    return rng_next(&r);
}

static void
fill_random(struct rng *r, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = rng_next(r);
    }
}

/* ---- Real data: text from the repository. ----
 *
 * The Snort community rules (test data the build unpacks from the
 * repository's data/): real text, as a web page or a mail would carry,
 * from the repository so that every machine tests the same bytes. */

#define REAL_TEXT "snort-community/community.rules"

/* Reads up to 'max' bytes of REAL_TEXT into a malloc'd buffer; '*n' gets
 * the size.  Fails the test, naming the file, if it cannot be read. */
static uint8_t *
read_real_text(size_t max, size_t *n)
{
    const char *path = test_data_path(REAL_TEXT);
    uint8_t *buf = malloc(max);
    FILE *f;

    test_data_require(path);
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_non_null(buf);
    *n = fread(buf, 1, max, f);
    fclose(f);
    if (*n < max && *n < 4096) {
        fail_msg("%s: only %zu bytes", path, *n);
    }
    return buf;
}

/* ---- Independent reference Rabin. ----
 *
 * The fingerprint of the window is the window's bytes, most significant
 * bit first, as a polynomial over GF(2), reduced modulo P one bit at a
 * time: no tables, no rolling. */
static uint64_t
ref_fp(const uint8_t *p, size_t from, size_t to)
{
    uint64_t r = 0;

    for (size_t i = from; i < to; i++) {
        for (int b = 7; b >= 0; b--) {
            r = (r << 1) | ((p[i] >> b) & 1);
            if (r >> 63) {
                r ^= GPU_RE_POLY;
            }
        }
    }
    return r;
}

/* Cuts of 'p' by the documented rule, every fingerprint from scratch. */
static size_t
ref_chunk(const struct gpu_re_params *pr, const uint8_t *p, size_t len,
          uint16_t *ends, uint64_t *fps)
{
    uint64_t mask = (1ULL << pr->bits) - 1;
    size_t n = 0, s = 0;

    for (size_t i = 0; i < len; i++) {
        size_t from = i + 1 > pr->window ? i + 1 - pr->window : 0;
        uint64_t fp = ref_fp(p, from, i + 1);
        size_t c = i - s + 1;

        if ((c >= pr->min_chunk && !(fp & mask)) || c >= pr->max_chunk
            || i == len - 1) {
            ends[n] = i + 1;
            fps[n] = fp;
            n++;
            s = i + 1;
        }
    }
    return n;
}

static void
check_against_ref(const struct gpu_re_params *pr, const uint8_t *p,
                  size_t len, const char *what)
{
    uint16_t *e1 = malloc((len + 1) * 2), *e2 = malloc((len + 1) * 2);
    uint64_t *f1 = malloc((len + 1) * 8), *f2 = malloc((len + 1) * 8);
    size_t n1 = ref_chunk(pr, p, len, e1, f1);
    size_t n2 = gpu_re_chunk_cpu(pr, p, len, e2, f2, len + 1);

    if (n1 != n2) {
        fail_msg("%s: w %u bits %u min %u max %u: %zu chunks, ref %zu",
                 what, pr->window, pr->bits, pr->min_chunk, pr->max_chunk,
                 n2, n1);
    }
    for (size_t i = 0; i < n1; i++) {
        if (e1[i] != e2[i] || f1[i] != f2[i]) {
            fail_msg("%s: w %u bits %u min %u max %u: chunk %zu ends %u fp "
                     "%016" PRIx64 ", ref ends %u fp %016" PRIx64, what,
                     pr->window, pr->bits, pr->min_chunk, pr->max_chunk, i,
                     e2[i], f2[i], e1[i], f1[i]);
        }
    }
    free(e1);
    free(e2);
    free(f1);
    free(f2);
}

static void
test_params(void **state)
{
    struct gpu_re_chunker_config cfg;
    struct gpu_re_chunker *c;
    char err[128];

    gpu_re_chunker_config_init(&cfg);
    assert_int_equal(cfg.params.window, 32);
    assert_int_equal(cfg.params.bits, 8);
    assert_int_equal(gpu_re_params_check(&cfg.params, err, sizeof err), 0);
    cfg.params.window = 65;
    assert_int_equal(gpu_re_params_check(&cfg.params, err, sizeof err),
                     GPU_ERR_INVALID);
    assert_int_equal(gpu_re_chunker_create(&cfg, &c), GPU_ERR_INVALID);
    cfg.params.window = 32;
    cfg.params.min_chunk = 4096;
    assert_int_equal(gpu_re_params_check(&cfg.params, NULL, 0),
                     GPU_ERR_INVALID);
    cfg.params.min_chunk = 32;
    cfg.params.bits = 0;
    assert_int_equal(gpu_re_params_check(&cfg.params, NULL, 0),
                     GPU_ERR_INVALID);
    cfg.params.bits = 8;

    assert_int_equal(gpu_re_chunker_create(&cfg, &c), GPU_OK);
    print_message("  auto backend: %s (%s)\n",
                  gpu_re_backend_name(gpu_re_chunker_backend(c)),
                  gpu_re_chunker_why(c));
    assert_true(gpu_re_chunker_why(c)[0]);
    gpu_re_chunker_destroy(c);
    if (!gpu_re_cuda_available()) {
        cfg.backend = GPU_RE_BACKEND_CUDA;
        assert_int_equal(gpu_re_chunker_create(&cfg, &c),
                         GPU_ERR_NO_DEVICE);
    }

    /* Options as an action gives them. */
    struct gpu_re_config rc;
    gpu_re_config_init(&rc);
    assert_int_equal(gpu_re_config_set(&rc, "cache", "64M", err, sizeof err),
                     GPU_OK);
    assert_true(rc.cache_size == 64ULL << 20);
    assert_int_equal(gpu_re_config_set(&rc, "cache", "512k", err,
                                       sizeof err), GPU_OK);
    assert_true(rc.cache_size == 512 * 1024);
    assert_int_equal(gpu_re_config_set(&rc, "window", "48", err, sizeof err),
                     GPU_OK);
    assert_int_equal(rc.params.window, 48);
    assert_int_equal(gpu_re_config_set(&rc, "cache", "2G", err, sizeof err),
                     GPU_ERR_INVALID);
    assert_int_equal(gpu_re_config_set(&rc, "cache", "64Q", err, sizeof err),
                     GPU_ERR_INVALID);
    assert_int_equal(gpu_re_config_set(&rc, "bits", "-1", err, sizeof err),
                     GPU_ERR_INVALID);
    assert_int_equal(gpu_re_config_set(&rc, "epoch", "70000", err,
                                       sizeof err), GPU_ERR_INVALID);
    assert_int_equal(gpu_re_config_set(&rc, "colour", "1", err, sizeof err),
                     GPU_ERR_INVALID);
    assert_true(rc.cache_size == 512 * 1024);
    assert_int_equal(gpu_re_config_check(&rc, err, sizeof err), GPU_OK);
    assert_int_equal(gpu_re_config_set(&rc, "min_chunk", "4000", err,
                                       sizeof err), GPU_OK);
    assert_int_equal(gpu_re_config_check(&rc, err, sizeof err),
                     GPU_ERR_INVALID);
    print_message("  refused as it should: %s\n", err);

    /* The reference on hand-checkable cases: one byte is its own value;
     * x^63 reduces to P without its top bit. */
    uint8_t one[9] = { 0x80, 0, 0, 0, 0, 0, 0, 0, 0 };
    uint8_t b = 0xab;
    assert_true(ref_fp(&b, 0, 1) == 0xab);
    /* 0x80 followed by 7 zero bytes is x^63. */
    assert_true(ref_fp(one, 0, 8) == (GPU_RE_POLY ^ (1ULL << 63)));
}

static const struct gpu_re_params ref_params[] = {
    { 32, 8, 32, 2048 },
    { 32, 8, 1, 1 },            /* Every byte a chunk: every fp checked. */
    { 48, 6, 16, 512 },
    { 17, 4, 8, 100 },
    { 64, 8, 64, 65535 },
    { 4, 2, 1, 64 },
    { 16, 12, 1, 65535 },
};

static void
test_reference_random(void **state)
{
    uint64_t seed = case_seed(1, 0);
    struct rng r = { seed };
    uint8_t *p = malloc(65536);

    print_message("  seed 0x%016" PRIx64 "\n", seed);
    for (size_t k = 0; k < sizeof ref_params / sizeof ref_params[0]; k++) {
        for (int t = 0; t < 6; t++) {
            size_t len = t == 0 ? 0 : t == 1 ? 1 : 1 + rng_below(&r, 9000);

            fill_random(&r, p, len);
            if (t == 5) {
                /* Long runs: zero windows cut at every allowed byte. */
                memset(p + len / 4, 0, len / 2);
            }
            check_against_ref(&ref_params[k], p, len, "random");
        }
    }
    free(p);
}

static void
test_reference_real(void **state)
{
    size_t n;
    uint8_t *p = read_real_text(256 * 1024, &n);

    print_message("  %zu bytes of %s\n", n, REAL_TEXT);
    for (size_t k = 0; k < sizeof ref_params / sizeof ref_params[0]; k++) {
        /* Text in payload-sized pieces, and one long stretch. */
        size_t lim = k == 1 ? 16384 : n;

        for (size_t o = 0; o + 1460 <= lim; o += 1460 * 7) {
            check_against_ref(&ref_params[k], p + o, 1460, "real text");
        }
        check_against_ref(&ref_params[k], p, lim < 65535 ? lim : 65535,
                          "real text (long)");
    }
    free(p);
}

/* ---- Chunkers: every backend against the CPU single-payload path. ---- */

/* The chunk hashes of packet 'i' of batch 'b' (cut as gpu_re_chunk_cpu()
 * cuts it, 'k' chunks) are gpu_re_hash128()'s, its payload check
 * gpu_re_check32()'s. */
static void
check_batch_hashes(const struct gpu_re_batch *b, const uint8_t *data,
                   const uint32_t *offsets, size_t i, size_t k,
                   const char *what, uint64_t seed)
{
    size_t len = offsets[i + 1] - offsets[i];
    const uint8_t *p = data + offsets[i];
    struct gpu_re_chunks chunks;
    struct gpu_re_hash h;

    gpu_re_batch_chunks(b, i, &chunks);
    if (chunks.n != k || !chunks.hashes || !chunks.payload_check) {
        fail_msg("seed 0x%016" PRIx64 " %s: packet %zu: %zu chunks "
                 "(hashes %p), CPU %zu", seed, what, i, chunks.n,
                 (void *) chunks.hashes, k);
    }
    for (size_t j = 0, st = 0; j < k; st = chunks.ends[j++]) {
        h = gpu_re_hash128(p + st, chunks.ends[j] - st);
        if (h.hi != chunks.hashes[j].hi || h.lo != chunks.hashes[j].lo) {
            fail_msg("seed 0x%016" PRIx64 " %s: packet %zu (len %zu) "
                     "chunk %zu [%zu, %u): hash %016" PRIx64 "%016" PRIx64
                     ", gpu_re_hash128 %016" PRIx64 "%016" PRIx64, seed,
                     what, i, len, j, st, chunks.ends[j],
                     chunks.hashes[j].hi, chunks.hashes[j].lo, h.hi, h.lo);
        }
    }
    if (gpu_re_check32(p, len) != *chunks.payload_check) {
        fail_msg("seed 0x%016" PRIx64 " %s: packet %zu (len %zu): payload "
                 "check %08" PRIx32 ", gpu_re_check32 %08" PRIx32, seed,
                 what, i, len, *chunks.payload_check,
                 gpu_re_check32(p, len));
    }
}

/* On CUDA, 'kernel_by_kernel' chooses the submission path (the batch's
 * graph by default); the results must be the CPU's either way. */
static void
check_chunker(enum gpu_re_backend be, const struct gpu_re_params *pr,
              bool sort, uint32_t segment, bool kernel_by_kernel,
              const uint8_t *data, const uint32_t *offsets, size_t n,
              uint64_t seed)
{
    bool hashes = sort || segment;
    struct gpu_re_chunker_config cfg;
    struct gpu_re_chunker *c;
    struct gpu_re_batch *b;
    const uint16_t *ends;
    const uint64_t *fps;
    size_t nb = offsets[n] - offsets[0];
    uint16_t *e = malloc(65536 * 2);
    uint64_t *f = malloc(65536 * 8);

    gpu_re_chunker_config_init(&cfg);
    cfg.params = *pr;
    cfg.backend = be;
    cfg.sort = sort;
    cfg.remap = segment != 0;
    cfg.segment = segment;
    cfg.kernel_by_kernel = kernel_by_kernel;
    assert_int_equal(gpu_re_chunker_create(&cfg, &c), GPU_OK);
    /* Hashes with grouping and in segment mode (both kernel orders),
     * not without: batches without them must still work. */
    assert_int_equal(gpu_re_batch_create_flags(c, n, nb, GPU_RE_BATCH_FPS
                                               | (hashes
                                                  ? GPU_RE_BATCH_HASHES
                                                  : 0), &b), GPU_OK);
    for (int again = 0; again < 2; again++) {
        if (!again) {
            int status;

            /* The first submission is polled for, as a caller that holds
             * its packets meanwhile does; the results must be the same. */
            assert_int_equal(gpu_re_batch_submit(b, NULL, data, offsets, n),
                             GPU_OK);
            while ((status = gpu_re_batch_poll(b)) == GPU_ERR_BUSY) {
                continue;
            }
            assert_int_equal(status, GPU_OK);
            /* Done means done: not busy, nothing more to poll for. */
            assert_int_equal(gpu_re_batch_poll(b), GPU_OK);
        } else {
            assert_int_equal(gpu_re_batch_resubmit(b, NULL), GPU_OK);
            assert_int_equal(gpu_re_batch_wait(b), GPU_OK);
        }
    }
    gpu_re_batch_results(b, &ends, &fps);
    for (size_t i = 0; i < n; i++) {
        size_t len = offsets[i + 1] - offsets[i];
        size_t k = gpu_re_chunk_cpu(pr, data + offsets[i], len, e, f, 65536);
        size_t slot = gpu_re_slot_base(offsets, i, pr->min_chunk);

        for (size_t j = 0; j < k; j++) {
            if (ends[slot + j] != e[j] || fps[slot + j] != f[j]) {
                fail_msg("seed 0x%016" PRIx64 " backend %s w %u sort %d "
                         "segment %u kernel by kernel %d: packet %zu (len "
                         "%zu) chunk %zu: end %u fp %016" PRIx64 ", CPU %u "
                         "%016" PRIx64, seed, gpu_re_backend_name(be),
                         pr->window, sort, segment, kernel_by_kernel, i, len,
                         j, ends[slot + j], fps[slot + j], e[j], f[j]);
            }
        }
        if (hashes) {
            char what[64];

            snprintf(what, sizeof what, "backend %s w %u sort %d seg %u",
                     gpu_re_backend_name(be), pr->window, sort, segment);
            check_batch_hashes(b, data, offsets, i, k, what, seed);
        }
    }
    struct gpu_re_chunker_stats st;
    gpu_re_chunker_get_stats(c, &st);
    assert_int_equal(st.n_fallbacks, 0);
    /* Each submission counted once, polled or waited for. */
    assert_int_equal(st.n_batches, 2);
    /* On CUDA both went as the batch's graph, unless asked not to. */
    assert_int_equal(st.n_graph_launches,
                     be == GPU_RE_BACKEND_CUDA && !kernel_by_kernel ? 2 : 0);
    gpu_re_batch_destroy(b);
    gpu_re_chunker_destroy(c);
    free(e);
    free(f);
}

static void
test_backends_identical(void **state)
{
    static const struct gpu_re_params ps[] = {
        { 32, 8, 32, 2048 }, { 16, 8, 16, 1024 }, { 48, 6, 1, 300 },
        { 64, 8, 64, 4096 }, { 20, 5, 8, 200 }, { 32, 8, 1, 1 },
    };
    size_t lic_n;
    uint8_t *lic = read_real_text(1 << 20, &lic_n);

    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        uint64_t seed = case_seed(2, k);
        struct rng r = { seed };
        size_t n = 3000, total = 0;
        uint32_t *offsets = gpu_host_alloc((n + 1) * sizeof *offsets);
        uint8_t *data;

        /* Sizes 0..1500 with some jumbo payloads, an odd first offset
         * (packets start anywhere), and a few empty ones. */
        offsets[0] = rng_below(&r, 16);
        for (size_t i = 0; i < n; i++) {
            uint32_t len = rng_below(&r, 50) ? rng_below(&r, 1501)
                                             : rng_below(&r, 9001);

            if (i == 7) {
                len = GPU_RE_MAX_PAYLOAD;
            }

            offsets[i + 1] = offsets[i] + len;
        }
        total = offsets[n];
        data = gpu_host_alloc(total + 1);
        for (size_t i = 0; i < n; i++) {
            size_t len = offsets[i + 1] - offsets[i];
            uint8_t *p = data + offsets[i];
            uint32_t kind = rng_below(&r, 4);

            if (kind == 0 && lic_n > len) {
                memcpy(p, lic + rng_below(&r, lic_n - len), len);
            } else if (kind == 1) {
                memset(p, 0, len);
            } else {
                fill_random(&r, p, len);
            }
        }
        print_message("  seed 0x%016" PRIx64 ": w %u bits %u min %u max %u,"
                      " %zu packets, %zu bytes\n", seed, ps[k].window,
                      ps[k].bits, ps[k].min_chunk, ps[k].max_chunk, n,
                      total - offsets[0]);
        for (int bi = 0; bi < n_backends; bi++) {
            /* On CUDA, each mode as a graph and kernel by kernel. */
            int n_paths = backends[bi] == GPU_RE_BACKEND_CUDA ? 2 : 1;

            for (int kbk = 0; kbk < n_paths; kbk++) {
                for (int sort = 0; sort < 2; sort++) {
                    check_chunker(backends[bi], &ps[k], sort, 0, kbk, data,
                                  offsets, n, seed);
                }
                /* Segment mode, with segments shorter and longer than
                 * the window. */
                check_chunker(backends[bi], &ps[k], false, 32 << (k % 4),
                              kbk, data, offsets, n, seed);
            }
        }
        gpu_host_free(data);
        gpu_host_free(offsets);
    }
    free(lic);
}

/* ---- Traffic with repeated content. ---- */

/* A stream of payloads: documents (real text or random bytes) sent
 * several times with small edits, cut into payloads of random sizes. */
struct trace {
    uint8_t *data;
    uint32_t *offsets;
    size_t n, cap_n, cap_bytes;
};

static void
trace_add(struct trace *t, const uint8_t *p, size_t len)
{
    if (t->n + 1 >= t->cap_n) {
        t->cap_n = t->cap_n ? 2 * t->cap_n : 1024;
        t->offsets = realloc(t->offsets, t->cap_n * sizeof *t->offsets);
    }
    if (!t->n) {
        t->offsets[0] = 0;
    }
    if (t->offsets[t->n] + len > t->cap_bytes) {
        t->cap_bytes = 2 * (t->offsets[t->n] + len);
        t->data = realloc(t->data, t->cap_bytes);
    }
    if (len) {
        /* An empty payload comes as NULL: memcpy() must not see it. */
        memcpy(t->data + t->offsets[t->n], p, len);
    }
    t->offsets[t->n + 1] = t->offsets[t->n] + len;
    t->n++;
}

static size_t
trace_bytes(const struct trace *t)
{
    return t->n ? t->offsets[t->n] : 0;
}

static void
make_trace(struct trace *t, struct rng *r, size_t n_docs, size_t max_pay,
           size_t min_bytes)
{
    size_t lic_n;
    uint8_t *lic = read_real_text(1 << 20, &lic_n);
    uint8_t *doc = malloc(70000);

    memset(t, 0, sizeof *t);
    /* 'min_bytes' too, so that a test that needs the cache to wrap does
     * not depend on the seed's document lengths. */
    for (size_t d = 0; d < n_docs || trace_bytes(t) < min_bytes; d++) {
        size_t len = 2000 + rng_below(r, 60000);
        int sends = 1 + rng_below(r, 4);

        if (lic_n > len && rng_below(r, 3)) {
            memcpy(doc, lic + rng_below(r, lic_n - len), len);
        } else {
            fill_random(r, doc, len);
        }
        for (int s = 0; s < sends; s++) {
            size_t o = 0;

            /* A few edits between sends. */
            for (int e = rng_below(r, 4); e > 0; e--) {
                doc[rng_below(r, len)] = rng_next(r);
            }
            while (o < len) {
                size_t pl = 1 + rng_below(r, max_pay);

                if (pl > len - o) {
                    pl = len - o;
                }
                trace_add(t, doc + o, pl);
                o += pl;
            }
        }
    }
    free(doc);
    free(lic);
}

static void
trace_free(struct trace *t)
{
    free(t->data);
    free(t->offsets);
}

static void
test_roundtrip(void **state)
{
    for (int k = 0; k < 4; k++) {
        uint64_t seed = case_seed(3, k);
        struct rng r = { seed };
        struct gpu_re_config cfg;
        struct gpu_re_encoder *e;
        struct gpu_re_decoder *d;
        struct gpu_re_stats es, ds;
        struct trace t;
        uint8_t *shim = malloc(70000), *out = malloc(65536);

        gpu_re_config_init(&cfg);
        cfg.cache_size = k == 0 ? 64 * 1024 : k == 1 ? 512 * 1024 : 200000;
        cfg.resync_packets = k == 2 ? 300 : 0;
        if (k == 3) {
            cfg.params.window = 48;
            cfg.params.bits = 6;
            cfg.params.min_chunk = 16;
        }
        make_trace(&t, &r, 40, 1460, 5 * cfg.cache_size);
        assert_int_equal(gpu_re_encoder_create(&cfg, NULL, &e), GPU_OK);
        assert_int_equal(gpu_re_decoder_create(&cfg, &d), GPU_OK);
        for (size_t i = 0; i < t.n; i++) {
            const uint8_t *p = t.data + t.offsets[i];
            size_t len = t.offsets[i + 1] - t.offsets[i], sl, ol;
            int res = gpu_re_encode(e, p, len, NULL, 0, shim, 70000, &sl);

            if (res == GPU_RE_SHIM) {
                assert_true(sl < len || i == 0 || k == 2);
                res = gpu_re_decode(d, shim, sl, out, 65536, &ol);
                if (res != GPU_RE_DECODED || ol != len
                    || memcmp(out, p, len)) {
                    fail_msg("seed 0x%016" PRIx64 " packet %zu: decode %d, "
                             "%zu bytes of %zu", seed, i, res, ol, len);
                }
            } else {
                assert_int_equal(res, GPU_RE_RAW);
                assert_int_equal(sl, len);
                gpu_re_decoder_observe(d, p, len);
            }
        }
        gpu_re_encoder_get_stats(e, &es);
        gpu_re_decoder_get_stats(d, &ds);
        print_message("  seed 0x%016" PRIx64 ": cache %" PRIu64 ", %zu "
                      "payloads, %" PRIu64 " -> %" PRIu64 " bytes, %"
                      PRIu64 " hits, %" PRIu64 " epochs\n", seed,
                      cfg.cache_size, t.n, es.bytes_in, es.bytes_out,
                      es.hits, es.epochs);
        assert_int_equal(ds.undecodable, 0);
        assert_true(es.hits > 0);
        assert_int_equal(es.hits, ds.hits);
        assert_true(es.bytes_out < es.bytes_in);
        /* The cache wrapped many times. */
        assert_true(es.bytes_in > 4 * cfg.cache_size);
        if (es.epochs == ds.epochs + 1) {
            /* The trace's last payload was the shim after which the
             * encoder starts a new epoch (resync_packets): its cache is
             * empty, and the decoder learns of the epoch from the next
             * shim, which never comes (1 run in ~300). */
            assert_true(cfg.resync_packets
                        && es.shims % cfg.resync_packets == 0);
            assert_int_equal(es.cache_fill, 0);
        } else {
            assert_int_equal(es.epochs, ds.epochs);
            assert_int_equal(es.cache_fill, ds.cache_fill);
        }
        trace_free(&t);
        gpu_re_encoder_destroy(e);
        gpu_re_decoder_destroy(d);
        free(shim);
        free(out);
    }
}

/* The shim's payload check is XXH64's high 32 bits: gpu_re_check32()
 * (our XXH64, written once for the host and the device) against
 * libxxhash's on random bytes of every length up to 2 kB, at every
 * alignment, and on a few long runs; so is the chunk hash's low half
 * (gpu_re_hash128()'s 'lo'), and its high half is not the low one. */
static void
test_check32_oracle(void **state)
{
    uint64_t seed = case_seed(30, 0);
    struct rng r = { seed };
    size_t size = 70000, n = 0;
    uint8_t *buf = malloc(size + 8);

    (void) state;
    for (size_t i = 0; i < size + 8; i++) {
        buf[i] = rng_next(&r);
    }
    for (size_t len = 0; len <= 2048; len++) {
        for (size_t align = 0; align < 8; align++, n++) {
            const uint8_t *p = buf + align + rng_below(&r, 256) * 8;
            uint32_t want = XXH64(p, len, 0) >> 32;

            struct gpu_re_hash h = gpu_re_hash128(p, len);

            if (h.lo != XXH64(p, len, 0) || h.hi == h.lo) {
                fail_msg("seed 0x%016" PRIx64 ": length %zu at offset %td:"
                         " chunk hash %016" PRIx64 "%016" PRIx64 ", "
                         "libxxhash %016" PRIx64, seed, len, p - buf, h.hi,
                         h.lo, (uint64_t) XXH64(p, len, 0));
            }
            if (gpu_re_check32(p, len) != want) {
                fail_msg("seed 0x%016" PRIx64 ": length %zu at offset %td:"
                         " %08" PRIx32 ", libxxhash %08" PRIx32, seed, len,
                         p - buf, gpu_re_check32(p, len), want);
            }
        }
    }
    for (size_t k = 0; k < 16; k++, n++) {
        size_t len = rng_below(&r, size);

        assert_int_equal(gpu_re_check32(buf + 3, len),
                         (uint32_t) (XXH64(buf + 3, len, 0) >> 32));
    }
    print_message("  seed 0x%016" PRIx64 ": %zu inputs equal to "
                  "libxxhash's XXH64 (checks and chunk hashes)\n", seed, n);
    free(buf);
}

static uint32_t
get_be32(const uint8_t *p)
{
    return (uint32_t) p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
}

static void
put_be32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24;
    p[1] = v >> 16;
    p[2] = v >> 8;
    p[3] = v;
}

/* A version 1 shim (MurmurHash3's check) still decodes: every shim of a
 * random trace rewritten as version 1 decodes to its payload on one
 * decoder.  On a second decoder, fed the version 2 shims, the first shim
 * past the trace's middle is given version 1's check (refused) and then
 * version 3 (malformed). */
static void
test_shim_version1(void **state)
{
    uint64_t seed = case_seed(31, 0);
    struct rng r = { seed };
    struct gpu_re_config cfg;
    struct gpu_re_encoder *e;
    struct gpu_re_decoder *d, *dv2;
    struct gpu_re_stats st;
    struct trace t;
    uint8_t *shim = malloc(70000), *out = malloc(65536);
    size_t n_v1 = 0;
    bool dv2_tested = false;

    (void) state;
    gpu_re_config_init(&cfg);
    cfg.cache_size = 256 * 1024;
    make_trace(&t, &r, 40, 1460, 3 * cfg.cache_size);
    assert_int_equal(gpu_re_encoder_create(&cfg, NULL, &e), GPU_OK);
    assert_int_equal(gpu_re_decoder_create(&cfg, &d), GPU_OK);
    assert_int_equal(gpu_re_decoder_create(&cfg, &dv2), GPU_OK);
    for (size_t i = 0; i < t.n; i++) {
        const uint8_t *p = t.data + t.offsets[i];
        size_t len = t.offsets[i + 1] - t.offsets[i], sl, ol;
        int res = gpu_re_encode(e, p, len, NULL, 0, shim, 70000, &sl);
        uint32_t v1_check = gpu_re_check32_v1(p, len);

        if (res != GPU_RE_SHIM) {
            gpu_re_decoder_observe(d, p, len);
            gpu_re_decoder_observe(dv2, p, len);
            continue;
        }
        assert_int_equal(shim[0], GPU_RE_SHIM_VERSION);
        assert_int_equal(get_be32(shim + 12), gpu_re_check32(p, len));

        if (dv2_tested) {
            /* Out of step after the refusal: not fed any more. */
        } else if (i < t.n / 2 || v1_check == gpu_re_check32(p, len)) {
            res = gpu_re_decode(dv2, shim, sl, out, 65536, &ol);
            if (res != GPU_RE_DECODED || ol != len || memcmp(out, p, len)) {
                fail_msg("seed 0x%016" PRIx64 " payload %zu: decode %d, "
                         "%zu bytes of %zu", seed, i, res, ol, len);
            }
        } else {
            uint8_t good[4];

            memcpy(good, shim + 12, 4);
            put_be32(shim + 12, v1_check);
            assert_int_equal(gpu_re_decode(dv2, shim, sl, out, 65536, &ol),
                             GPU_RE_UNDECODABLE);
            memcpy(shim + 12, good, 4);
            shim[0] = 3;
            gpu_re_decoder_get_stats(dv2, &st);
            uint64_t malformed = st.malformed;
            assert_int_equal(gpu_re_decode(dv2, shim, sl, out, 65536, &ol),
                             GPU_RE_UNDECODABLE);
            gpu_re_decoder_get_stats(dv2, &st);
            assert_int_equal(st.malformed, malformed + 1);
            dv2_tested = true;
        }

        shim[0] = GPU_RE_SHIM_VERSION_MURMUR;
        put_be32(shim + 12, v1_check);
        res = gpu_re_decode(d, shim, sl, out, 65536, &ol);
        if (res != GPU_RE_DECODED || ol != len || memcmp(out, p, len)) {
            fail_msg("seed 0x%016" PRIx64 " payload %zu as version 1: "
                     "decode %d, %zu bytes of %zu", seed, i, res, ol, len);
        }
        n_v1++;
    }
    print_message("  seed 0x%016" PRIx64 ": %zu version 1 shims decoded\n",
                  seed, n_v1);
    assert_true(n_v1 > 100);
    gpu_re_decoder_get_stats(d, &st);
    assert_int_equal(st.shims_v1, n_v1);
    gpu_re_decoder_get_stats(dv2, &st);
    assert_int_equal(st.shims_v1, 0);
    assert_true(dv2_tested);
    trace_free(&t);
    gpu_re_encoder_destroy(e);
    gpu_re_decoder_destroy(d);
    gpu_re_decoder_destroy(dv2);
    free(shim);
    free(out);
}

/* 't' with edge cases mixed in: empty payloads, payloads shorter than
 * min_ref (one chunk, never referenced), repeats of an earlier payload
 * (one chunk if short), and payloads of GPU_RE_MAX_PAYLOAD bytes of
 * earlier traffic (so they hold references). */
static void
add_edge_cases(struct trace *out, const struct trace *t, struct rng *r)
{
    uint8_t *big = malloc(GPU_RE_MAX_PAYLOAD);

    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < t->n; i++) {
        size_t len = t->offsets[i + 1] - t->offsets[i];
        size_t prev = rng_below(r, i + 1);
        const uint8_t *pp = t->data + t->offsets[prev];

        switch (rng_below(r, 40)) {
        case 0:
            trace_add(out, NULL, 0);
            break;
        case 1:
            trace_add(out, pp, rng_below(r, 16));
            break;
        case 2:
            trace_add(out, pp, t->offsets[prev + 1] - t->offsets[prev]);
            break;
        case 3:
            if (t->offsets[t->n] - t->offsets[prev] >= GPU_RE_MAX_PAYLOAD) {
                memcpy(big, pp, GPU_RE_MAX_PAYLOAD);
                trace_add(out, big, GPU_RE_MAX_PAYLOAD);
            }
            break;
        }
        trace_add(out, t->data + t->offsets[i], len);
    }
    free(big);
}

/* gpu_re_encode_chunks() with the hashes from a batch (every backend),
 * with the buckets prefetched ahead, and with the cuts alone, gives
 * exactly the shims, results and counters of gpu_re_encode() chunking
 * on its own, over a long stream with repeats and edge cases. */
static void
test_encode_chunks(void **state)
{
    enum { PLAIN, NO_HASHES, HASHES, PREFETCH, N_WAYS };
    static const char *const names[N_WAYS] = {
        "gpu_re_encode", "cuts only", "batch hashes", "prefetched",
    };

    for (int k = 0; k < 3; k++) {
        for (int bi = 0; bi < n_backends; bi++) {
            uint64_t seed = case_seed(9, k);
            struct rng r = { seed };
            struct gpu_re_chunker_config ccfg;
            struct gpu_re_chunker *c;
            struct gpu_re_batch *b;
            struct gpu_re_config cfg;
            struct gpu_re_encoder *e[N_WAYS];
            struct gpu_re_stats st[N_WAYS];
            struct trace t0, t;
            uint8_t *out[N_WAYS];
            size_t out_len[N_WAYS], i, batch = 500 + rng_below(&r, 500);
            uint8_t *data;
            uint32_t *offsets;
            int w, res[N_WAYS];

            gpu_re_config_init(&cfg);
            cfg.cache_size = k == 1 ? 64 * 1024 : 512 * 1024;
            cfg.resync_packets = k == 1 ? 200 : 0;
            if (k == 2) {
                /* Many chunks shorter than min_ref. */
                cfg.params.window = 16;
                cfg.params.bits = 5;
                cfg.params.min_chunk = 4;
                cfg.params.max_chunk = 100;
                cfg.min_ref = 24;
            }
            make_trace(&t0, &r, 30, k == 2 ? 3000 : 1460,
                       3 * cfg.cache_size);
            add_edge_cases(&t, &t0, &r);
            trace_free(&t0);
            print_message("  seed 0x%016" PRIx64 ": %s, cache %" PRIu64
                          ", %zu payloads, %zu bytes, batches of %zu\n",
                          seed, gpu_re_backend_name(backends[bi]),
                          cfg.cache_size, t.n, trace_bytes(&t), batch);

            gpu_re_chunker_config_init(&ccfg);
            ccfg.params = cfg.params;
            ccfg.backend = backends[bi];
            assert_int_equal(gpu_re_chunker_create(&ccfg, &c), GPU_OK);
            assert_int_equal(gpu_re_batch_create_flags(
                                 c, batch, batch * GPU_RE_MAX_PAYLOAD,
                                 GPU_RE_BATCH_HASHES, &b), GPU_OK);
            data = gpu_host_alloc(trace_bytes(&t) + 1);
            offsets = gpu_host_alloc((t.n + 1) * sizeof *offsets);
            memcpy(data, t.data, trace_bytes(&t));
            memcpy(offsets, t.offsets, (t.n + 1) * sizeof *offsets);
            for (w = 0; w < N_WAYS; w++) {
                cfg.epoch = 7;
                assert_int_equal(gpu_re_encoder_create(&cfg, NULL, &e[w]),
                                 GPU_OK);
                out[w] = malloc(2 * GPU_RE_MAX_PAYLOAD + 64);
            }
            for (size_t i0 = 0; i0 < t.n; i0 += batch) {
                size_t n = t.n - i0 < batch ? t.n - i0 : batch, ahead = 0;

                assert_int_equal(gpu_re_batch_submit(b, NULL, data,
                                                     offsets + i0, n),
                                 GPU_OK);
                assert_int_equal(gpu_re_batch_wait(b), GPU_OK);
                for (size_t j = 0; j < n; j++) {
                    const uint8_t *p = data + offsets[i0 + j];
                    size_t len = offsets[i0 + j + 1] - offsets[i0 + j];
                    /* Now and then a shim must fit in less than the
                     * payload, so some go raw. */
                    size_t room = rng_below(&r, 8) ? 2 * GPU_RE_MAX_PAYLOAD
                                                   : len / 2;
                    struct gpu_re_chunks chunks, cuts;

                    i = i0 + j;
                    gpu_re_batch_chunks(b, j, &chunks);
                    cuts = chunks;
                    cuts.hashes = NULL;
                    cuts.payload_check = NULL;
                    res[PLAIN] = gpu_re_encode(e[PLAIN], p, len, NULL, 0,
                                               out[PLAIN], room,
                                               &out_len[PLAIN]);
                    res[NO_HASHES] = gpu_re_encode_chunks(
                        e[NO_HASHES], p, len, &cuts, out[NO_HASHES], room,
                        &out_len[NO_HASHES]);
                    res[HASHES] = gpu_re_encode_chunks(
                        e[HASHES], p, len, &chunks, out[HASHES], room,
                        &out_len[HASHES]);
                    ahead = gpu_re_encoder_prefetch_batch(e[PREFETCH], b, j,
                                                          ahead, n);
                    res[PREFETCH] = gpu_re_encode_chunks(
                        e[PREFETCH], p, len, &chunks, out[PREFETCH], room,
                        &out_len[PREFETCH]);
                    for (w = 1; w < N_WAYS; w++) {
                        if (res[w] != res[PLAIN]
                            || out_len[w] != out_len[PLAIN]
                            || (res[w] == GPU_RE_SHIM
                                && memcmp(out[w], out[PLAIN],
                                          out_len[w]))) {
                            fail_msg("seed 0x%016" PRIx64 " %s: payload "
                                     "%zu (len %zu, %zu chunks): %s gives "
                                     "%d, %zu bytes; gpu_re_encode %d, "
                                     "%zu bytes", seed,
                                     gpu_re_backend_name(backends[bi]), i,
                                     len, chunks.n, names[w], res[w],
                                     out_len[w], res[PLAIN],
                                     out_len[PLAIN]);
                        }
                    }
                }
            }
            for (w = 0; w < N_WAYS; w++) {
                gpu_re_encoder_get_stats(e[w], &st[w]);
                if (memcmp(&st[w], &st[PLAIN], sizeof st[w])) {
                    fail_msg("seed 0x%016" PRIx64 ": %s: counters differ",
                             seed, names[w]);
                }
            }
            print_message("    %" PRIu64 " -> %" PRIu64 " bytes, %" PRIu64
                          " shims, %" PRIu64 " hits, %" PRIu64
                          " epochs: same four ways\n", st[PLAIN].bytes_in,
                          st[PLAIN].bytes_out, st[PLAIN].shims,
                          st[PLAIN].hits, st[PLAIN].epochs);
            /* The stream must have exercised references and raw
             * payloads, or the comparison proves little. */
            assert_true(st[PLAIN].hits > 100);
            assert_true(st[PLAIN].shims < st[PLAIN].packets);
            for (w = 0; w < N_WAYS; w++) {
                gpu_re_encoder_destroy(e[w]);
                free(out[w]);
            }
            gpu_re_batch_destroy(b);
            gpu_re_chunker_destroy(c);
            gpu_host_free(data);
            gpu_host_free(offsets);
            trace_free(&t);
        }
    }
}

/* Loss, reordering and duplication between encoder and decoder: every
 * delivered payload is exactly one the encoder sent, decoding recovers
 * after each new epoch. */
static void
test_loss_reorder(void **state)
{
    for (int k = 0; k < 3; k++) {
        uint64_t seed = case_seed(4, k);
        struct rng r = { seed };
        struct gpu_re_config cfg;
        struct gpu_re_encoder *e;
        struct gpu_re_decoder *d;
        struct gpu_re_stats ds;
        struct trace t;
        struct msg {
            uint8_t *bytes;
            size_t len;
            size_t idx;
            bool shim;
        } *q;
        size_t nq = 0, decoded = 0, late_ok = 0;
        uint8_t *out = malloc(65536);

        gpu_re_config_init(&cfg);
        cfg.cache_size = 256 * 1024;
        cfg.resync_packets = k == 0 ? 100 : 0;
        make_trace(&t, &r, 40, 1460, 0);
        q = calloc(t.n * 2, sizeof *q);
        assert_int_equal(gpu_re_encoder_create(&cfg, NULL, &e), GPU_OK);
        assert_int_equal(gpu_re_decoder_create(&cfg, &d), GPU_OK);
        for (size_t i = 0; i < t.n; i++) {
            const uint8_t *p = t.data + t.offsets[i];
            size_t len = t.offsets[i + 1] - t.offsets[i], sl;
            uint8_t *buf = malloc(70000);
            int res = gpu_re_encode(e, p, len, NULL, 0, buf, 70000, &sl);

            if (res == GPU_RE_RAW) {
                memcpy(buf, p, len);
            }
            q[nq++] = (struct msg) { buf, sl, i, res == GPU_RE_SHIM };
            /* Sometimes duplicate. */
            if (rng_below(&r, 100) < 1) {
                uint8_t *dup = malloc(sl);
                memcpy(dup, buf, sl);
                q[nq++] = (struct msg) { dup, sl, i, res == GPU_RE_SHIM };
            }
        }
        /* Loss and local reordering on the link. */
        for (size_t i = 0; i + 1 < nq; i++) {
            if (rng_below(&r, 100) < 2) {
                struct msg m = q[i];
                size_t j = i + 1 + rng_below(&r, 5);

                if (j >= nq) {
                    j = nq - 1;
                }
                q[i] = q[j];
                q[j] = m;
            }
        }
        for (size_t i = 0; i < nq; i++) {
            const uint8_t *p = t.data + t.offsets[q[i].idx];
            size_t len = t.offsets[q[i].idx + 1] - t.offsets[q[i].idx], ol;

            if (rng_below(&r, 100) < 1) {
                continue;       /* Lost. */
            }
            if (!q[i].shim) {
                gpu_re_decoder_observe(d, q[i].bytes, q[i].len);
                continue;
            }
            int res = gpu_re_decode(d, q[i].bytes, q[i].len, out, 65536, &ol);
            if (res == GPU_RE_DECODED) {
                if (ol != len || memcmp(out, p, len)) {
                    fail_msg("seed 0x%016" PRIx64 ": message %zu (payload "
                             "%zu) decoded to wrong bytes", seed, i,
                             q[i].idx);
                }
                decoded++;
                late_ok += i > nq / 2;
            } else {
                assert_int_equal(res, GPU_RE_UNDECODABLE);
            }
        }
        gpu_re_decoder_get_stats(d, &ds);
        print_message("  seed 0x%016" PRIx64 ": %zu messages, %zu decoded, "
                      "%" PRIu64 " undecodable, %" PRIu64 " epochs seen\n",
                      seed, nq, decoded, ds.undecodable, ds.epochs);
        assert_true(ds.undecodable > 0);
        /* Resync works: shims decode in the second half too. */
        assert_true(late_ok > 0);
        for (size_t i = 0; i < nq; i++) {
            free(q[i].bytes);
        }
        free(q);
        trace_free(&t);
        gpu_re_encoder_destroy(e);
        gpu_re_decoder_destroy(d);
        free(out);
    }
}

/* ---- Malformed shims. ---- */

/* A decoder that has decoded 'first' (a START shim). */
static struct gpu_re_decoder *
primed_decoder(const struct gpu_re_config *cfg, const uint8_t *first,
               size_t len)
{
    struct gpu_re_decoder *d;
    uint8_t out[65536];
    size_t ol;

    assert_int_equal(gpu_re_decoder_create(cfg, &d), GPU_OK);
    assert_int_equal(gpu_re_decode(d, first, len, out, sizeof out, &ol),
                     GPU_RE_DECODED);
    return d;
}

static void
put_hdr(uint8_t *p, uint8_t flags, uint16_t epoch, uint16_t olen,
        uint32_t pos, uint32_t check)
{
    p[0] = GPU_RE_SHIM_VERSION;
    p[1] = p[2] = 0;
    p[3] = flags;
    p[4] = epoch >> 8; p[5] = epoch;
    p[6] = olen >> 8; p[7] = olen;
    put_be32(p + 8, pos);
    put_be32(p + 12, check);
}

static void
test_malformed(void **state)
{
    uint64_t seed = case_seed(5, 0);
    struct rng r = { seed };
    struct gpu_re_config cfg;
    struct gpu_re_encoder *e;
    static uint8_t p1[1400], p2[1400], s1[2000], s2[2000], m[2100];
    static uint8_t out[65536];
    size_t l1, l2, ol;

    print_message("  seed 0x%016" PRIx64 "\n", seed);
    gpu_re_config_init(&cfg);
    cfg.epoch = 7;
    fill_random(&r, p1, sizeof p1);
    /* p2 is p1 with one byte changed: a shim with references. */
    memcpy(p2, p1, sizeof p1);
    p2[1300] ^= 0x55;
    /* Fixed cuts, not content-defined ones: with random bytes, about one
     * seed in 40 has no chunk boundary before byte 1300, and p2 would
     * then go raw, which is right but not what this test is about. */
    enum { N_CUTS = 14 };
    uint16_t cuts[N_CUTS];
    for (size_t i = 0; i < N_CUTS; i++) {
        cuts[i] = 100 * (i + 1);
    }
    assert_int_equal(gpu_re_encoder_create(&cfg, NULL, &e), GPU_OK);
    assert_int_equal(gpu_re_encode(e, p1, sizeof p1, cuts, N_CUTS,
                                   s1, sizeof s1, &l1), GPU_RE_SHIM);
    assert_true(s1[3] & GPU_RE_SHIM_F_START);
    assert_int_equal(gpu_re_encode(e, p2, sizeof p2, cuts, N_CUTS,
                                   s2, sizeof s2, &l2), GPU_RE_SHIM);
    assert_true(l2 < 300);
    gpu_re_encoder_destroy(e);

    /* Cuts from outside must tile the payload. */
    {
        uint16_t bad1[] = { 100, 50, 1400 }, bad2[] = { 100, 1300 };
        struct gpu_re_encoder *e3;

        assert_int_equal(gpu_re_encoder_create(&cfg, NULL, &e3), GPU_OK);
        assert_int_equal(gpu_re_encode(e3, p1, sizeof p1, bad1, 3, s1,
                                       sizeof s1, &l1), GPU_ERR_INVALID);
        assert_int_equal(gpu_re_encode(e3, p1, sizeof p1, bad2, 2, s1,
                                       sizeof s1, &l1), GPU_ERR_INVALID);
        gpu_re_encoder_destroy(e3);
    }

    /* The unmodified pair decodes. */
    struct gpu_re_decoder *d = primed_decoder(&cfg, s1, l1);
    assert_int_equal(gpu_re_decode(d, s2, l2, out, sizeof out, &ol),
                     GPU_RE_DECODED);
    assert_memory_equal(out, p2, sizeof p2);
    gpu_re_decoder_destroy(d);

    /* Without the first one, the second cannot be decoded. */
    assert_int_equal(gpu_re_decoder_create(&cfg, &d), GPU_OK);
    assert_int_equal(gpu_re_decode(d, s2, l2, out, sizeof out, &ol),
                     GPU_RE_UNDECODABLE);
    gpu_re_decoder_destroy(d);

    /* Hand-made bodies after the primed p1 (pos 1400, epoch 7). */
    struct {
        const char *what;
        uint8_t body[16];
        size_t blen;
        uint16_t olen;
        bool malformed;
    } cases[] = {
        { "unknown tag", { 2, 1, 0 }, 3, 1, true },
        { "empty literal", { 0, 0 }, 2, 0, true },
        { "literal past body", { 0, 5, 1, 2 }, 4, 5, true },
        { "literal past orig_len", { 0, 3, 1, 2, 3 }, 5, 2, true },
        { "overlong varint", { 0, 0x81, 0x00, 9 }, 4, 1, true },
        { "varint too long", { 1, 0xff, 0xff, 0xff, 0xff, 0x7f, 1 }, 7, 1,
          true },
        { "ref dist 0", { 1, 0, 1 }, 3, 1, true },
        { "ref n > dist", { 1, 2, 3 }, 3, 3, true },
        { "ref n 0", { 1, 5, 0 }, 3, 0, true },
        { "ref beyond cache", { 1, 0x80, 0x20, 4 }, 4, 4, false },
        { "truncated ref", { 1, 5 }, 2, 5, true },
        { "short of orig_len", { 1, 100, 10 }, 3, 11, true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gpu_re_stats st;

        d = primed_decoder(&cfg, s1, l1);
        put_hdr(m, 0, 7, cases[i].olen, 1400, 0);
        memcpy(m + 16, cases[i].body, cases[i].blen);
        if (gpu_re_decode(d, m, 16 + cases[i].blen, out, sizeof out, &ol)
            != GPU_RE_UNDECODABLE) {
            fail_msg("%s: accepted", cases[i].what);
        }
        gpu_re_decoder_get_stats(d, &st);
        if (st.malformed != cases[i].malformed) {
            fail_msg("%s: malformed count %" PRIu64, cases[i].what,
                     st.malformed);
        }
        gpu_re_decoder_destroy(d);
    }

    /* Header faults on the real second shim. */
    for (int f = 0; f < 8; f++) {
        d = primed_decoder(&cfg, s1, l1);
        memcpy(m, s2, l2);
        size_t ml = l2;
        switch (f) {
        case 0: m[0] = 3; break;                /* Version. */
        case 1: m[3] = 0x80; break;             /* Unknown flag. */
        case 2: m[5] ^= 1; break;               /* Epoch. */
        case 3: m[11] ^= 1; break;              /* Position. */
        case 4: m[15] ^= 1; break;              /* Check. */
        case 5: ml = 15; break;                 /* Truncated header. */
        case 6: m[1] = 6; break;                /* Packet shim here. */
        case 7:                                 /* Version 1's check. */
            m[0] = GPU_RE_SHIM_VERSION_MURMUR;
            break;
        }
        if (gpu_re_decode(d, m, ml, out, sizeof out, &ol)
            != GPU_RE_UNDECODABLE) {
            fail_msg("header fault %d accepted", f);
        }
        /* The good shim after it: right, or refused. */
        int res = gpu_re_decode(d, s2, l2, out, sizeof out, &ol);
        if (res == GPU_RE_DECODED) {
            assert_int_equal(ol, sizeof p2);
            assert_memory_equal(out, p2, ol);
        } else {
            assert_int_equal(res, GPU_RE_UNDECODABLE);
        }
        gpu_re_decoder_destroy(d);
    }

    /* Random corruption: refused, or (if it changes nothing that
     * matters) exactly p2. */
    int refused = 0;
    for (int t = 0; t < 2000; t++) {
        d = primed_decoder(&cfg, s1, l1);
        memcpy(m, s2, l2);
        size_t ml = l2;
        for (int k = 1 + rng_below(&r, 3); k > 0; k--) {
            m[rng_below(&r, l2)] ^= 1 + rng_below(&r, 255);
        }
        if (rng_below(&r, 4) == 0) {
            ml = rng_below(&r, l2 + 1);
        }
        int res = gpu_re_decode(d, m, ml, out, sizeof out, &ol);
        if (res == GPU_RE_DECODED) {
            if (ol != sizeof p2 || memcmp(out, p2, ol)) {
                fail_msg("seed 0x%016" PRIx64 ": corrupted shim %d decoded "
                         "to wrong bytes", seed, t);
            }
        } else {
            refused++;
        }
        gpu_re_decoder_destroy(d);
    }
    assert_true(refused > 1900);
}

/* ---- Packets. ---- */

static uint32_t
sum16(const uint8_t *p, size_t n, uint32_t sum)
{
    for (size_t i = 0; i + 1 < n; i += 2) {
        sum += (uint32_t) p[i] << 8 | p[i + 1];
    }
    if (n & 1) {
        sum += (uint32_t) p[n - 1] << 8;
    }
    return sum;
}

static uint16_t
fold(uint32_t sum)
{
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    return sum;
}

/* Independent checksums: the IPv4 header's, and the L4 one with its
 * pseudo-header.  Each returns true if the stored value is valid. */
static bool
ipv4_hdr_ok(const uint8_t *ip)
{
    return fold(sum16(ip, (ip[0] & 15) * 4, 0)) == 0xffff;
}

static uint32_t
pseudo_sum(const uint8_t *ip, bool v6, uint8_t proto, size_t l4len)
{
    uint32_t s = 0;

    if (v6) {
        s = sum16(ip + 8, 32, 0);
    } else {
        s = sum16(ip + 12, 8, 0);
    }
    return s + proto + (uint32_t) (l4len >> 16) + (uint32_t) (l4len & 0xffff);
}

static bool
l4_ok(const uint8_t *ip, bool v6, uint8_t proto, const uint8_t *l4,
      size_t l4len)
{
    return fold(sum16(l4, l4len, pseudo_sum(ip, v6, proto, l4len)))
           == 0xffff;
}

struct frame {
    uint8_t buf[2048];
    size_t len;
};

/* Builds a valid frame with 'pay' as payload: IPv4 or IPv6, TCP (with
 * 'opt' option bytes) or UDP, maybe a VLAN tag.  Returns the L3 offset. */
static size_t
build_frame(struct frame *f, struct rng *r, bool v6, bool tcp, bool vlan,
            const uint8_t *pay, size_t plen)
{
    uint8_t *b = f->buf;
    size_t l3, l4, hl = tcp ? 20 + 4 * rng_below(r, 3) : 8, iphl;
    uint8_t proto = tcp ? 6 : 17;

    fill_random(r, b, 12);
    l3 = 14;
    if (vlan) {
        b[12] = 0x81; b[13] = 0x00;
        b[14] = 0; b[15] = 5;
        l3 = 18;
    }
    b[l3 - 2] = v6 ? 0x86 : 0x08;
    b[l3 - 1] = v6 ? 0xdd : 0x00;
    uint8_t *ip = b + l3;
    iphl = v6 ? 40 : 20;
    l4 = l3 + iphl;
    size_t l4len = hl + plen;
    if (v6) {
        fill_random(r, ip, 40);
        ip[0] = 0x60;
        ip[4] = l4len >> 8; ip[5] = l4len;
        ip[6] = proto;
    } else {
        fill_random(r, ip, 20);
        ip[0] = 0x45;
        ip[2] = (20 + l4len) >> 8; ip[3] = 20 + l4len;
        ip[6] = 0x40; ip[7] = 0;     /* DF, not a fragment. */
        ip[9] = proto;
        ip[10] = ip[11] = 0;
        uint16_t c = ~fold(sum16(ip, 20, 0));
        ip[10] = c >> 8; ip[11] = c;
    }
    uint8_t *t = b + l4;
    fill_random(r, t, hl);
    if (tcp) {
        t[12] = (hl / 4) << 4;
        t[16] = t[17] = 0;
    } else {
        t[4] = l4len >> 8; t[5] = l4len;
        t[6] = t[7] = 0;
    }
    memcpy(t + hl, pay, plen);
    uint16_t c = ~fold(sum16(t, l4len, pseudo_sum(ip, v6, proto, l4len)));
    t[tcp ? 16 : 6] = c >> 8;
    t[tcp ? 17 : 7] = c;
    f->len = l4 + l4len;
    return l3;
}

/* A frame for each payload of 't' (malloc()'d): IPv4 or IPv6, TCP or
 * UDP, some with a VLAN tag, one in ten not IP (it passes). */
static struct frame *
trace_frames(const struct trace *t, struct rng *r)
{
    struct frame *frames = malloc(t->n * sizeof *frames);

    for (size_t i = 0; i < t->n; i++) {
        size_t l3 = build_frame(&frames[i], r, rng_below(r, 2),
                                rng_below(r, 2), rng_below(r, 4) == 0,
                                t->data + t->offsets[i],
                                t->offsets[i + 1] - t->offsets[i]);

        if (!rng_below(r, 10)) {
            frames[i].buf[l3 - 1] = 0x06;
        }
    }
    return frames;
}

static void
test_packets(void **state)
{
    uint64_t seed = case_seed(6, 0);
    struct rng r = { seed };
    struct gpu_re_config cfg;
    struct gpu_re_encoder *e, *eb[2];
    struct gpu_re_chunker *ch[2];
    struct gpu_re_decoder *d;
    struct trace t;
    size_t n_shim = 0, n_raw = 0, n_pass = 0, bytes_in = 0, bytes_out = 0;

    print_message("  seed 0x%016" PRIx64 "\n", seed);
    gpu_re_config_init(&cfg);
    cfg.cache_size = 512 * 1024;
    cfg.epoch = 1234;
    make_trace(&t, &r, 30, 1400, 0);
    assert_int_equal(gpu_re_encoder_create(&cfg, NULL, &e), GPU_OK);
    assert_int_equal(gpu_re_decoder_create(&cfg, &d), GPU_OK);
    /* Batch encoders on each backend must produce the same frames. */
    for (int b = 0; b < n_backends; b++) {
        struct gpu_re_chunker_config cc;

        gpu_re_chunker_config_init(&cc);
        cc.backend = backends[b];
        assert_int_equal(gpu_re_chunker_create(&cc, &ch[b]), GPU_OK);
        assert_int_equal(gpu_re_encoder_create(&cfg, ch[b], &eb[b]),
                         GPU_OK);
    }

    const size_t B = 32;
    struct frame *orig = malloc(B * sizeof *orig);
    struct frame *enc = malloc(B * sizeof *enc);
    struct frame *benc = malloc(B * sizeof *benc);
    for (size_t i0 = 0; i0 < t.n; i0 += B) {
        size_t nb = t.n - i0 < B ? t.n - i0 : B;
        uint8_t *frames[32];
        size_t lens[32], caps[32];
        int results[32];
        bool v6s[32];

        for (size_t j = 0; j < nb; j++) {
            size_t i = i0 + j;
            const uint8_t *p = t.data + t.offsets[i];
            size_t plen = t.offsets[i + 1] - t.offsets[i];
            bool v6 = rng_below(&r, 2), tcp = rng_below(&r, 2);
            uint32_t odd = rng_below(&r, 20);

            v6s[j] = v6;
            size_t l3 = build_frame(&orig[j], &r, v6, tcp, rng_below(&r, 4)
                                    == 0, p, plen);
            if (odd == 0) {
                /* Not ours: ARP-like, a fragment, ICMP, padding, or a
                 * bad IPv4 checksum.  All pass untouched. */
                uint8_t *ip = orig[j].buf + l3;
                switch (rng_below(&r, 5)) {
                case 0: orig[j].buf[l3 - 2] = 0x08;
                        orig[j].buf[l3 - 1] = 0x06; break;
                case 1: if (!v6) { ip[6] = 0x20; } else { ip[6] = 44; }
                        break;
                case 2: ip[v6 ? 6 : 9] = 1; break;
                case 3: orig[j].len += 4; break;
                case 4: if (!v6) { ip[10] ^= 0x40; } else { ip[6] = 0; }
                        break;
                }
            }
            enc[j] = orig[j];
            caps[j] = sizeof enc[j].buf;
        }
        for (int b = 0; b < n_backends; b++) {
            for (size_t j = 0; j < nb; j++) {
                benc[j] = orig[j];
                frames[j] = benc[j].buf;
                lens[j] = benc[j].len;
            }
            assert_int_equal(gpu_re_encode_packets(eb[b], frames, lens, caps,
                                                   nb, results), GPU_OK);
            for (size_t j = 0; j < nb; j++) {
                benc[j].len = lens[j];
            }
            if (b == 0) {
                for (size_t j = 0; j < nb; j++) {
                    int res = gpu_re_encode_packet(e, enc[j].buf, &enc[j].len,
                                                   sizeof enc[j].buf);
                    assert_int_equal(res, results[j]);
                }
            }
            for (size_t j = 0; j < nb; j++) {
                if (benc[j].len != enc[j].len
                    || memcmp(benc[j].buf, enc[j].buf, enc[j].len)) {
                    fail_msg("seed 0x%016" PRIx64 ": batch encode on %s "
                             "differs at packet %zu", seed,
                             gpu_re_backend_name(backends[b]), i0 + j);
                }
            }
        }
        /* Every other burst through the decoder's burst call. */
        int dres_burst[32];
        bool burst = (i0 / B) & 1;
        if (burst) {
            for (size_t j = 0; j < nb; j++) {
                frames[j] = enc[j].buf;
                lens[j] = enc[j].len;
            }
            assert_int_equal(gpu_re_decode_packets(d, frames, lens, caps, nb,
                                                   dres_burst), GPU_OK);
        }
        for (size_t j = 0; j < nb; j++) {
            struct frame *x = &enc[j];
            /* The encoded frame as it went on the link (identical in
             * benc[], which a burst decode has not touched). */
            struct frame *y = burst ? &benc[j] : x;
            size_t l3 = x->buf[12] == 0x81 ? 18 : 14;
            uint8_t *ip = x->buf + l3, *yip = y->buf + l3;
            int res = results[j];

            bytes_in += orig[j].len;
            bytes_out += y->len;
            if (res == GPU_RE_SHIM) {
                n_shim++;
                /* Only an epoch's first shim may grow. */
                assert_true(y->len < orig[j].len || n_shim == 1);
                /* The encoded frame: protocol 253, lengths and the IPv4
                 * checksum right. */
                if (v6s[j]) {
                    assert_int_equal(yip[6], GPU_RE_IPPROTO);
                    assert_int_equal(yip[4] << 8 | yip[5], y->len - l3 - 40);
                } else {
                    assert_int_equal(yip[9], GPU_RE_IPPROTO);
                    assert_int_equal(yip[2] << 8 | yip[3], y->len - l3);
                    assert_true(ipv4_hdr_ok(yip));
                }
            } else {
                assert_int_equal(y->len, orig[j].len);
                assert_memory_equal(y->buf, orig[j].buf, y->len);
                if (res == GPU_RE_RAW) {
                    n_raw++;
                } else {
                    assert_int_equal(res, GPU_RE_PASS);
                    n_pass++;
                }
            }
            int dres;
            if (burst) {
                dres = dres_burst[j];
                x->len = lens[j];
            } else {
                dres = gpu_re_decode_packet(d, x->buf, &x->len,
                                            sizeof x->buf);
            }
            assert_int_equal(dres, res == GPU_RE_SHIM ? GPU_RE_DECODED
                                                      : res);
            if (x->len != orig[j].len
                || memcmp(x->buf, orig[j].buf, x->len)) {
                fail_msg("seed 0x%016" PRIx64 ": packet %zu not restored",
                         seed, i0 + j);
            }
            if (res != GPU_RE_PASS) {
                /* Restored frames carry valid checksums. */
                size_t iphl = v6s[j] ? 40 : 20;
                uint8_t proto = ip[v6s[j] ? 6 : 9];
                assert_true(v6s[j] || ipv4_hdr_ok(ip));
                assert_true(l4_ok(ip, v6s[j], proto, ip + iphl,
                                  x->len - l3 - iphl));
            }
        }
    }
    struct gpu_re_stats es, ds;
    gpu_re_encoder_get_stats(e, &es);
    gpu_re_decoder_get_stats(d, &ds);
    print_message("  %zu frames: %zu shims, %zu raw, %zu passed; %zu -> %zu "
                  "bytes on the link; %" PRIu64 " hits\n", t.n, n_shim,
                  n_raw, n_pass, bytes_in, bytes_out, es.hits);
    /* With the repository's rule text as the documents, 22-33% of the
     * frames repeat a chunk and the link carries 64-75% of the bytes
     * (12 seeds); a quarter was the bound for /usr/share's texts and
     * failed one seed in twelve.  An encoder that stops finding repeats
     * still fails these. */
    assert_true(n_shim > t.n / 8);
    assert_true(n_pass > 0);
    assert_int_equal(ds.undecodable, 0);
    assert_int_equal(es.passed, ds.passed);
    assert_true(bytes_out < bytes_in * 9 / 10);

    /* A corrupted shim frame is refused, never delivered wrong. */
    gpu_re_encoder_resync(e);
    struct frame a, b2;
    uint8_t pay[1000];
    fill_random(&r, pay, sizeof pay);
    build_frame(&a, &r, false, true, false, pay, sizeof pay);
    b2 = a;
    assert_int_equal(gpu_re_encode_packet(e, a.buf, &a.len, sizeof a.buf),
                     GPU_RE_SHIM);
    assert_int_equal(gpu_re_encode_packet(e, b2.buf, &b2.len, sizeof b2.buf),
                     GPU_RE_SHIM);
    b2.buf[b2.len - 1] ^= 1;
    assert_int_equal(gpu_re_decode_packet(d, a.buf, &a.len, sizeof a.buf),
                     GPU_RE_DECODED);
    assert_int_equal(gpu_re_decode_packet(d, b2.buf, &b2.len,
                                          sizeof b2.buf),
                     GPU_RE_UNDECODABLE);

    /* Corrupted and truncated shim frames, in buffers of exactly their
     * length (so a sanitizer sees any read past them): refused or passed,
     * or decoded to exactly the original, never anything else.  The
     * corruption hits the shim (header and body) and the IP header's
     * protocol and length; the L2-L4 headers carried verbatim are the
     * L4 checksum's business, as without RE. */
    int decoded_ok = 0;
    for (int trial = 0; trial < 400; trial++) {
        struct gpu_re_encoder *e2;
        struct gpu_re_decoder *d2;
        struct frame f1, f2, o2;
        uint8_t pay2[1200];
        bool v6 = trial & 1, tcp = trial & 2;

        fill_random(&r, pay2, sizeof pay2);
        build_frame(&f1, &r, v6, tcp, trial & 4, pay2, sizeof pay2);
        pay2[600] ^= 0x5a;
        build_frame(&f2, &r, v6, tcp, trial & 4, pay2, sizeof pay2);
        o2 = f2;
        assert_int_equal(gpu_re_encoder_create(&cfg, NULL, &e2), GPU_OK);
        assert_int_equal(gpu_re_decoder_create(&cfg, &d2), GPU_OK);
        assert_int_equal(gpu_re_encode_packet(e2, f1.buf, &f1.len,
                                              sizeof f1.buf), GPU_RE_SHIM);
        if (gpu_re_encode_packet(e2, f2.buf, &f2.len, sizeof f2.buf)
            != GPU_RE_SHIM) {
            /* No cut in the first 600 bytes: nothing to reference. */
            gpu_re_encoder_destroy(e2);
            gpu_re_decoder_destroy(d2);
            continue;
        }
        assert_int_equal(gpu_re_decode_packet(d2, f1.buf, &f1.len,
                                              sizeof f1.buf),
                         GPU_RE_DECODED);
        size_t ml = f2.len;
        size_t l3 = (trial & 4) ? 18 : 14;
        size_t l4 = l3 + (v6 ? 40 : 20), hl = f2.buf[l4 + 2];
        for (int k = rng_below(&r, 3); k > 0; k--) {
            size_t at;

            switch (rng_below(&r, 4)) {
            case 0:             /* IP protocol or length. */
                at = l3 + (v6 ? (rng_below(&r, 2) ? 6 : 5)
                              : (rng_below(&r, 2) ? 9 : 3));
                break;
            case 1:             /* Shim header. */
                at = l4 + rng_below(&r, GPU_RE_SHIM_HDR_LEN);
                break;
            default:            /* Body. */
                at = l4 + GPU_RE_SHIM_HDR_LEN + hl
                     + rng_below(&r, f2.len - l4 - GPU_RE_SHIM_HDR_LEN - hl);
                break;
            }
            f2.buf[at] ^= 1 + rng_below(&r, 255);
        }
        if (rng_below(&r, 3) == 0) {
            ml = rng_below(&r, f2.len + 1);
        }
        /* First in a buffer of exactly the frame's length (no room to
         * expand: every check before that runs against real bounds),
         * then with room. */
        uint8_t *m = malloc(ml ? ml : 1);
        size_t mlen = ml;
        memcpy(m, f2.buf, ml);
        int res = gpu_re_decode_packet(d2, m, &mlen, ml);
        if (res == GPU_RE_DECODED
            && (mlen != o2.len || memcmp(m, o2.buf, mlen))) {
            fail_msg("seed 0x%016" PRIx64 ": corrupted frame %d decoded "
                     "to wrong bytes", seed, trial);
        }
        free(m);
        m = malloc(sizeof o2.buf);
        memcpy(m, f2.buf, ml);
        mlen = ml;
        res = gpu_re_decode_packet(d2, m, &mlen, sizeof o2.buf);
        if (res == GPU_RE_DECODED) {
            if (mlen != o2.len || memcmp(m, o2.buf, mlen)) {
                fail_msg("seed 0x%016" PRIx64 ": corrupted frame %d decoded "
                         "to wrong bytes", seed, trial);
            }
            decoded_ok++;
        }
        free(m);
        gpu_re_encoder_destroy(e2);
        gpu_re_decoder_destroy(d2);
    }
    print_message("  400 corrupted shim frames: %d decoded (to the original)"
                  ", the rest refused or passed\n", decoded_ok);

    /* A shim that claims a UDP header it does not carry, at the very end
     * of its buffer: refused without reading past it. */
    {
        struct gpu_re_decoder *d3;
        struct frame x;
        uint8_t none[1];
        size_t l3 = build_frame(&x, &r, false, false, false, none, 0);
        uint8_t *ip = x.buf + l3;
        size_t xl = l3 + 20 + GPU_RE_SHIM_HDR_LEN;

        put_hdr(ip + 20, 0, 1, 100, 0, 0);
        ip[20 + 1] = 17;        /* next_proto UDP, l4_len 0. */
        ip[2] = 0;
        ip[3] = 20 + GPU_RE_SHIM_HDR_LEN;
        ip[9] = GPU_RE_IPPROTO;
        ip[10] = ip[11] = 0;
        uint16_t c = ~fold(sum16(ip, 20, 0));
        ip[10] = c >> 8;
        ip[11] = c;
        uint8_t *m = malloc(xl);
        memcpy(m, x.buf, xl);
        assert_int_equal(gpu_re_decoder_create(&cfg, &d3), GPU_OK);
        assert_int_equal(gpu_re_decode_packet(d3, m, &xl, xl),
                         GPU_RE_UNDECODABLE);
        gpu_re_decoder_destroy(d3);
        free(m);
    }

    free(orig);
    free(enc);
    free(benc);
    for (int b = 0; b < n_backends; b++) {
        gpu_re_encoder_destroy(eb[b]);
        gpu_re_chunker_destroy(ch[b]);
    }
    gpu_re_encoder_destroy(e);
    gpu_re_decoder_destroy(d);
    trace_free(&t);
}

/* The IPv4 header checksum through an encoder and a decoder, for every
 * value of the header's identification field (so every residue of the
 * header's sum, the ones' complement zero among them, both in the
 * original and in the shim's header): each shim's checksum is verified
 * here independently, and each frame must come out of the decoder byte
 * for byte, its checksum included. */
static void
test_ipv4_checksum_sweep(void **state)
{
    uint64_t seed = case_seed(13, 0);
    struct rng r = { seed };
    struct gpu_re_config cfg;
    struct gpu_re_encoder *e;
    struct gpu_re_decoder *d;
    struct frame orig, x;
    uint8_t pay[400];
    size_t l3, n_shims = 0, zero_orig = 0, zero_shim = 0;

    (void) state;
    print_message("  seed 0x%016" PRIx64 "\n", seed);
    fill_random(&r, pay, sizeof pay);
    l3 = build_frame(&orig, &r, false, false, false, pay, sizeof pay);
    gpu_re_config_init(&cfg);
    assert_int_equal(gpu_re_encoder_create(&cfg, NULL, &e), GPU_OK);
    assert_int_equal(gpu_re_decoder_create(&cfg, &d), GPU_OK);
    for (uint32_t id = 0; id <= UINT16_MAX; id++) {
        uint8_t *ip = orig.buf + l3;
        uint16_t c;
        int res, want;

        ip[4] = id >> 8;
        ip[5] = id;
        ip[10] = ip[11] = 0;
        c = ~fold(sum16(ip, 20, 0));
        ip[10] = c >> 8;
        ip[11] = c;
        zero_orig += !c;

        x = orig;
        res = gpu_re_encode_packet(e, x.buf, &x.len, sizeof x.buf);
        assert_true(res == GPU_RE_SHIM || res == GPU_RE_RAW);
        want = res == GPU_RE_SHIM ? GPU_RE_DECODED : GPU_RE_RAW;
        if (res == GPU_RE_SHIM) {
            n_shims++;
            zero_shim += !x.buf[l3 + 10] && !x.buf[l3 + 11];
            if (!ipv4_hdr_ok(x.buf + l3)) {
                fail_msg("seed 0x%016" PRIx64 ": id %" PRIu32 ": the "
                         "shim's IPv4 checksum is wrong", seed, id);
            }
        }
        res = gpu_re_decode_packet(d, x.buf, &x.len, sizeof x.buf);
        assert_int_equal(res, want);
        if (x.len != orig.len || memcmp(x.buf, orig.buf, x.len)) {
            fail_msg("seed 0x%016" PRIx64 ": id %" PRIu32 ": the frame "
                     "does not come back (result %d)", seed, id, res);
        }
    }
    print_message("  %zu shims; checksum 0 in %zu originals and %zu "
                  "shims\n", n_shims, zero_orig, zero_shim);
    assert_true(n_shims > 60000);
    assert_true(zero_orig > 0 && zero_shim > 0);
    gpu_re_encoder_destroy(e);
    gpu_re_decoder_destroy(d);
}

/* The encoder's gathered path, as re_encode holds datapath bursts: the
 * payloads of several bursts chunked in one batch (polled for), then the
 * frames encoded in order with gpu_re_encode_packet_chunks(), must give
 * the frames gpu_re_encode_packet() gives one by one. */
static void
test_packets_gathered(void **state)
{
    uint64_t seed = case_seed(7, 0);
    struct rng r = { seed };
    struct gpu_re_config cfg;
    struct trace t;

    print_message("  seed 0x%016" PRIx64 "\n", seed);
    gpu_re_config_init(&cfg);
    cfg.cache_size = 256 * 1024;
    cfg.epoch = 99;
    make_trace(&t, &r, 20, 1400, 0);

    size_t n = t.n;
    struct frame *orig = trace_frames(&t, &r);
    struct frame *ref = malloc(n * sizeof *ref);
    struct frame *got = malloc(n * sizeof *got);
    for (int bi = 0; bi < n_backends; bi++) {
        struct gpu_re_chunker_config cc;
        struct gpu_re_chunker *ch;
        struct gpu_re_encoder *e, *eg;
        struct gpu_re_batch *b;
        struct gpu_re_stats es, egs;
        const size_t max_gather = 200;
        uint32_t *offsets = gpu_host_alloc((max_gather + 1)
                                           * sizeof *offsets);
        uint8_t *data = gpu_host_alloc(max_gather * 2048);

        gpu_re_chunker_config_init(&cc);
        cc.backend = backends[bi];
        assert_int_equal(gpu_re_chunker_create(&cc, &ch), GPU_OK);
        assert_int_equal(gpu_re_encoder_create(&cfg, NULL, &e), GPU_OK);
        assert_int_equal(gpu_re_encoder_create(&cfg, ch, &eg), GPU_OK);
        assert_int_equal(gpu_re_batch_create_flags(ch, max_gather,
                                                   max_gather * 2048,
                                                   GPU_RE_BATCH_HASHES, &b),
                         GPU_OK);
        for (size_t i0 = 0; i0 < n;) {
            /* A gather of 1 to 6 bursts of up to 32 frames. */
            size_t ng = 1 + rng_below(&r, 6 * 32);
            size_t np = 0;
            int idx[6 * 32];
            int status;

            ng = ng < n - i0 ? ng : n - i0;
            offsets[0] = 0;
            for (size_t j = 0; j < ng; j++) {
                size_t ofs;
                int plen;

                got[i0 + j] = orig[i0 + j];
                plen = gpu_re_packet_payload(got[i0 + j].buf,
                                             got[i0 + j].len, &ofs);
                idx[j] = -1;
                if (plen >= 0) {
                    memcpy(data + offsets[np], got[i0 + j].buf + ofs, plen);
                    offsets[np + 1] = offsets[np] + plen;
                    idx[j] = np++;
                }
            }
            assert_int_equal(gpu_re_batch_submit(b, NULL, data, offsets, np),
                             GPU_OK);
            while ((status = gpu_re_batch_poll(b)) == GPU_ERR_BUSY) {
                continue;
            }
            assert_int_equal(status, GPU_OK);
            for (size_t j = 0; j < ng; j++) {
                struct frame *x = &got[i0 + j], *y = &ref[i0 + j];
                struct gpu_re_chunks chunks;
                int res, want;

                *y = orig[i0 + j];
                want = gpu_re_encode_packet(e, y->buf, &y->len,
                                            sizeof y->buf);
                if (idx[j] >= 0) {
                    gpu_re_batch_chunks(b, idx[j], &chunks);
                    if (chunks.n > 1 && !rng_below(&r, 8)) {
                        /* Chunks of another length are refused, and the
                         * frame and the encoder are left alone. */
                        struct gpu_re_chunks bad = chunks;

                        bad.n--;
                        assert_int_equal(gpu_re_encode_packet_chunks(
                                             eg, x->buf, &x->len,
                                             sizeof x->buf, &bad),
                                         GPU_ERR_INVALID);
                        assert_memory_equal(x->buf, orig[i0 + j].buf,
                                            x->len);
                    }
                    res = gpu_re_encode_packet_chunks(eg, x->buf, &x->len,
                                                      sizeof x->buf,
                                                      &chunks);
                } else {
                    res = gpu_re_encode_packet_chunks(eg, x->buf, &x->len,
                                                      sizeof x->buf, NULL);
                }
                assert_int_equal(res, want);
                if (x->len != y->len || memcmp(x->buf, y->buf, y->len)) {
                    fail_msg("seed 0x%016" PRIx64 ": gathered encode on %s "
                             "differs at packet %zu", seed,
                             gpu_re_backend_name(backends[bi]), i0 + j);
                }
            }
            i0 += ng;
        }
        gpu_re_encoder_get_stats(e, &es);
        gpu_re_encoder_get_stats(eg, &egs);
        assert_int_equal(es.packets, egs.packets);
        assert_int_equal(es.passed, egs.passed);
        assert_int_equal(es.shims, egs.shims);
        assert_int_equal(es.bytes_out, egs.bytes_out);
        assert_true(es.shims > 0 && es.passed > 0);
        gpu_re_batch_destroy(b);
        gpu_re_encoder_destroy(e);
        gpu_re_encoder_destroy(eg);
        gpu_re_chunker_destroy(ch);
        gpu_host_free(offsets);
        gpu_host_free(data);
    }
    free(orig);
    free(ref);
    free(got);
    trace_free(&t);
}

/* gpu_re_decode_packet() expands a shim straight into the frame when the
 * buffer has room for the shim's body past the decoded frame's end, and
 * through its scratch buffer otherwise.  Differential: the same encoded
 * stream (from a batch encoder on each backend), with corrupted and lost
 * frames mixed into its second half, through two decoders, one with room
 * (in the frame) and one with a buffer of the original frame's length
 * (scratch): the same results, lengths and bytes for every frame but the
 * refused ones (whose bytes the API leaves unspecified), and the same
 * counters;
 * and every frame neither corrupted nor after a loss restored to the
 * original byte for byte. */
static void
test_decode_in_place(void **state)
{
    uint64_t seed = case_seed(8, 0);
    struct rng r = { seed };
    struct gpu_re_config cfg;
    struct trace t;

    print_message("  seed 0x%016" PRIx64 "\n", seed);
    gpu_re_config_init(&cfg);
    cfg.cache_size = 256 * 1024;
    cfg.epoch = 77;
    /* Epochs often, so that many shims are an epoch's first, which may
     * be longer than its payload: with payloads shorter than the shim
     * header among them (an in-place bug the switch benchmark found). */
    cfg.resync_packets = 40;
    make_trace(&t, &r, 25, 1400, 300 * 1024);

    for (int b = 0; b < n_backends; b++) {
        struct gpu_re_chunker_config cc;
        struct gpu_re_chunker *ch;
        struct gpu_re_encoder *e;
        struct gpu_re_decoder *din, *dsc;
        struct gpu_re_stats sin, ssc;
        struct frame *orig = malloc(32 * sizeof *orig);
        struct frame *fin = malloc(sizeof *fin), *fsc = malloc(sizeof *fsc);
        size_t n_in_place = 0, n_restored = 0, n_refused = 0;
        bool lost = false;

        gpu_re_chunker_config_init(&cc);
        cc.backend = backends[b];
        assert_int_equal(gpu_re_chunker_create(&cc, &ch), GPU_OK);
        assert_int_equal(gpu_re_encoder_create(&cfg, ch, &e), GPU_OK);
        assert_int_equal(gpu_re_decoder_create(&cfg, &din), GPU_OK);
        assert_int_equal(gpu_re_decoder_create(&cfg, &dsc), GPU_OK);
        for (size_t i0 = 0; i0 < t.n; i0 += 32) {
            size_t nb = t.n - i0 < 32 ? t.n - i0 : 32;
            uint8_t *frames[32];
            size_t lens[32], caps[32];
            int results[32];

            for (size_t j = 0; j < nb; j++) {
                size_t i = i0 + j;
                size_t plen = t.offsets[i + 1] - t.offsets[i];

                if (!rng_below(&r, 8)) {
                    plen = 1 + rng_below(&r, plen < 20 ? plen : 20);
                }
                build_frame(&orig[j], &r, rng_below(&r, 2),
                            rng_below(&r, 2), rng_below(&r, 4) == 0,
                            t.data + t.offsets[i], plen);
            }
            struct frame *enc = malloc(32 * sizeof *enc);
            for (size_t j = 0; j < nb; j++) {
                enc[j] = orig[j];
                frames[j] = enc[j].buf;
                lens[j] = enc[j].len;
                caps[j] = 1522;
            }
            assert_int_equal(gpu_re_encode_packets(e, frames, lens, caps, nb,
                                                   results), GPU_OK);
            for (size_t j = 0; j < nb; j++) {
                size_t lin, lsc;
                int rin, rsc;

                /* The first half of the stream intact, the second with
                 * losses and corruption. */
                bool harm = i0 + j >= t.n / 2;

                enc[j].len = lens[j];
                if (harm && !rng_below(&r, 100)) {
                    lost = true;            /* Lost on the link. */
                    continue;
                }
                *fin = enc[j];
                if (harm && results[j] == GPU_RE_SHIM
                    && !rng_below(&r, 20)) {
                    /* A byte near the end changed: mostly the shim's
                     * body or header, at times the headers before it.
                     * A refused shim is as good as lost for the frames
                     * after it. */
                    size_t at = enc[j].len - 1 - rng_below(&r, 24);

                    fin->buf[at] ^= 1 + rng_below(&r, 255);
                    lost = true;
                }
                *fsc = *fin;
                lin = lsc = fin->len;
                rin = gpu_re_decode_packet(din, fin->buf, &lin,
                                           sizeof fin->buf);
                /* An epoch's first shim may be longer than the
                 * original: the buffer is the longer of the two (such a
                 * frame, of a payload shorter than the shim header, then
                 * decodes in place in both: the check against the
                 * original below is what covers it). */
                rsc = gpu_re_decode_packet(dsc, fsc->buf, &lsc,
                                           orig[j].len > fsc->len ? orig[j].len
                                           : fsc->len);
                if (rin != rsc || lin != lsc
                    || (rin != GPU_RE_UNDECODABLE
                        && memcmp(fin->buf, fsc->buf, lin))) {
                    fail_msg("seed 0x%016" PRIx64 ": %s: frame %zu decoded "
                             "in place (%d, %zu bytes) differs from "
                             "through scratch (%d, %zu bytes)", seed,
                             gpu_re_backend_name(backends[b]), i0 + j, rin,
                             lin, rsc, lsc);
                }
                n_in_place += rin == GPU_RE_DECODED;
                n_refused += rin == GPU_RE_UNDECODABLE;
                if (!lost) {
                    if (rin == GPU_RE_UNDECODABLE || lin != orig[j].len
                        || memcmp(fin->buf, orig[j].buf, lin)) {
                        fail_msg("seed 0x%016" PRIx64 ": %s: frame %zu not "
                                 "restored (%d)", seed,
                                 gpu_re_backend_name(backends[b]), i0 + j,
                                 rin);
                    }
                    n_restored++;
                }
            }
            free(enc);
        }
        gpu_re_decoder_get_stats(din, &sin);
        gpu_re_decoder_get_stats(dsc, &ssc);
        assert_memory_equal(&sin, &ssc, sizeof sin);
        print_message("  %s: %zu frames, %zu decoded, %zu restored before "
                      "the first loss, %zu refused\n",
                      gpu_re_backend_name(backends[b]), t.n, n_in_place,
                      n_restored, n_refused);
        assert_true(n_restored >= t.n / 2);
        /* Enough shims that decoding in place was exercised: how many
         * frames the encoder shims depends on the random traffic
         * (GPU_TEST_SEED=0x6b08a8a3 gives 9.7%, most seeds 12-15%), so
         * the bound is well under the usual share. */
        assert_true(n_in_place > t.n / 20);
        assert_true(n_refused > 0);
        gpu_re_decoder_destroy(din);
        gpu_re_decoder_destroy(dsc);
        gpu_re_encoder_destroy(e);
        gpu_re_chunker_destroy(ch);
        free(orig);
        free(fin);
        free(fsc);
    }
    trace_free(&t);
}

/* A gather of frames [first, first + n) for test_device_encode(): frame
 * j's payload is the batch's payload idx[j] (-1: not eligible). */
struct dev_gather {
    size_t first, n;
    int idx[6 * 32];
    const uint8_t *srcs[6 * 32];    /* The payloads read in place. */
};

/* Gathers frames [i0, i0 + ng) of 'got' (copies of 'orig') and submits
 * their payloads, about half of them (at random, from 'r') read in place
 * in their frames, which 'got' keeps unchanged until the gather is
 * encoded: their bytes in 'data' are garbage, which a read of the wrong
 * place would show.  Returns the payloads submitted (0: no call made). */
static size_t
dev_gather_submit(struct gpu_re_encoder *e, struct dev_gather *g,
                  struct gpu_re_batch *b, uint8_t *data, uint32_t *offsets,
                  uint32_t *rooms, const struct frame *orig,
                  struct frame *got, const size_t *caps, size_t i0,
                  size_t ng, struct rng *r)
{
    size_t np = 0;

    offsets[0] = 0;
    for (size_t j = 0; j < ng; j++) {
        struct frame *x = &got[i0 + j];
        size_t ofs;
        int plen;

        *x = orig[i0 + j];
        plen = gpu_re_packet_payload(x->buf, x->len, &ofs);
        g->idx[j] = -1;
        if (plen >= 0) {
            if (rng_below(r, 2)) {
                g->srcs[np] = x->buf + ofs;
                memset(data + offsets[np], 0xa5, plen);
            } else {
                g->srcs[np] = NULL;
                memcpy(data + offsets[np], x->buf + ofs, plen);
            }
            offsets[np + 1] = offsets[np] + plen;
            rooms[np] = plen + caps[i0 + j] - x->len;
            g->idx[j] = np++;
        }
    }
    assert_int_equal(gpu_re_encoder_submit(e, b, data, offsets, g->srcs,
                                           rooms, np),
                     GPU_OK);
    g->first = i0;
    g->n = ng;
    return np;
}

static void
dev_gather_finish(struct gpu_re_encoder *e, struct dev_gather *g,
                  struct gpu_re_batch *b, struct frame *got,
                  const size_t *caps, int *res)
{
    int status;

    if (!g->n) {
        return;
    }
    while ((status = gpu_re_batch_poll(b)) == GPU_ERR_BUSY) {
        continue;
    }
    assert_int_equal(status, GPU_OK);
    for (size_t j = 0; j < g->n; j++) {
        size_t i = g->first + j;
        struct frame *x = &got[i];

        if (g->idx[j] < 0) {
            res[i] = gpu_re_encode_packet(e, x->buf, &x->len, caps[i]);
        } else if (i % 2) {
            /* With the parse the caller kept (the switch's way). */
            struct gpu_re_frame fr;
            int plen = gpu_re_frame_parse(x->buf, x->len, &fr);

            res[i] = gpu_re_encode_frame_result(e, b, g->idx[j], x->buf,
                                                &x->len, caps[i], &fr,
                                                plen);
        } else {
            res[i] = gpu_re_encode_packet_result(e, b, g->idx[j], x->buf,
                                                 &x->len, caps[i]);
        }
        assert_true(res[i] > 0);
    }
    g->n = 0;
}

/* Frames [i0, i0 + ng) through gpu_re_encode_packets(). */
static void
dev_burst(struct gpu_re_encoder *e, const struct frame *orig,
          struct frame *got, const size_t *caps, int *res, size_t i0,
          size_t ng)
{
    uint8_t **frames = malloc(ng * sizeof *frames);
    size_t *lens = malloc(ng * sizeof *lens);

    for (size_t j = 0; j < ng; j++) {
        got[i0 + j] = orig[i0 + j];
        frames[j] = got[i0 + j].buf;
        lens[j] = got[i0 + j].len;
    }
    assert_int_equal(gpu_re_encode_packets(e, frames, lens, caps + i0, ng,
                                           res + i0),
                     GPU_OK);
    for (size_t j = 0; j < ng; j++) {
        got[i0 + j].len = lens[j];
    }
    free(frames);
    free(lens);
}

/* An encoder on the device (config device_encode) against the host's
 * encoder and a decoder, on frames of a trace with repeats, gathered
 * 1 to 192 at a time with two gathers in flight (the second submitted
 * before the first is encoded), some through gpu_re_encode_packets(),
 * about half the gathered payloads read in place in their frames:
 *
 *   - on the CPU backend the encoder stays on the host, so every frame
 *     must be byte for byte the plain host encoder's;
 *   - on CUDA every frame must decode to its original (a CPU decoder, in
 *     order), the shims must save at least 80% of what the host encoder
 *     saves on the same frames, and the counters must add up.
 *
 * Cases: a 64 KB cache (gathers longer than the cache: the ring keeps
 * only their tail), 1 MB, a new epoch every 300 shims, gpu_re_encoder_
 * resync() between gathers, and frames with no room for the epoch's
 * first shim (they go raw, outside any epoch, until one has room).
 *
 * On CUDA each case runs a second time: with the chunker's 'device_launch'
 * (re_encode's default, with its segment mode of 64 bytes), where the
 * encoder's one scheduler on the device launches the gathers' graphs in
 * order, two of them queued at a time; every gather's call must have
 * been launched so, and the same checks hold (a gather run before the
 * one submitted ahead of it would reference bytes not yet in the ring:
 * frames that do not decode). */
static void
test_device_encode(void **state)
{
    static const struct {
        uint64_t cache;
        uint32_t resync;
        bool resync_calls;
        bool tight;
    } cases[] = {
        { 64 * 1024, 0, false, true },
        { 1024 * 1024, 0, false, false },
        { 256 * 1024, 300, false, false },
        { 1024 * 1024, 0, true, true },
    };

    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        uint64_t seed = case_seed(12, ci);
        struct rng r = { seed };
        struct gpu_re_config cfg;
        struct trace t;

        print_message("  case %zu seed 0x%016" PRIx64 "\n", ci, seed);
        gpu_re_config_init(&cfg);
        cfg.cache_size = cases[ci].cache;
        cfg.resync_packets = cases[ci].resync;
        cfg.epoch = 7;
        make_trace(&t, &r, 30, 1460, 2 * cases[ci].cache);

        size_t n = t.n;
        struct frame *orig = trace_frames(&t, &r);
        size_t *caps = malloc(n * sizeof *caps);

        for (size_t i = 0; i < n; i++) {
            /* The first frames have no room for a START shim. */
            caps[i] = (cases[ci].tight && i < 50 ? orig[i].len
                       : sizeof orig[i].buf);
        }
        for (int run = 0; run < 2 * n_backends; run++) {
            const size_t max_gather = 6 * 32;
            int bi = run / 2;
            bool device_launch = run % 2;

            if (device_launch && backends[bi] != GPU_RE_BACKEND_CUDA) {
                continue;
            }

            struct gpu_re_chunker_config cc;
            struct gpu_re_chunker_stats cs;
            uint64_t n_submits = 0;
            struct gpu_re_chunker *ch;
            struct gpu_re_encoder *ed, *eh;
            struct gpu_re_decoder *d;
            struct gpu_re_batch *b[2];
            struct gpu_re_stats ds, hs, dec;
            uint32_t *offsets[2], *rooms[2];
            uint8_t *data[2];
            struct frame *got = malloc(n * sizeof *got);
            struct frame *ref = malloc(n * sizeof *ref);
            int *res = malloc(n * sizeof *res);
            bool cuda = backends[bi] == GPU_RE_BACKEND_CUDA;
            size_t n_raw = 0, n_shim = 0;

            gpu_re_chunker_config_init(&cc);
            cc.backend = backends[bi];
            cc.device_launch = device_launch;
            if (device_launch) {
                cc.remap = true;
                cc.segment = 64;
            }
            assert_int_equal(gpu_re_chunker_create(&cc, &ch), GPU_OK);
            if (cuda) {
                /* Where the payloads read in place are, as DPDK's mbufs
                 * are in the switch. */
                assert_int_equal(gpu_host_register(got, n * sizeof *got,
                                                   cc.device),
                                 GPU_OK);
            }
            cfg.device_encode = true;
            assert_int_equal(gpu_re_encoder_create(&cfg, ch, &ed), GPU_OK);
            assert_int_equal(gpu_re_encoder_on_device(ed), cuda);
            cfg.device_encode = false;
            assert_int_equal(gpu_re_encoder_create(&cfg, NULL, &eh),
                             GPU_OK);
            assert_int_equal(gpu_re_decoder_create(&cfg, &d), GPU_OK);
            for (int k = 0; k < 2; k++) {
                assert_int_equal(gpu_re_encoder_batch_create(
                                     ed, max_gather, max_gather * 2048,
                                     &b[k]),
                                 GPU_OK);
                offsets[k] = gpu_host_alloc((max_gather + 1)
                                            * sizeof *offsets[k]);
                rooms[k] = malloc(max_gather * sizeof *rooms[k]);
                data[k] = gpu_host_alloc(max_gather * 2048);
            }
            if (cuda) {
                /* Payload-level encoding is refused on the device. */
                size_t out_len;
                uint8_t out[64];

                assert_int_equal(gpu_re_encode(ed, t.data, 8, NULL, 0, out,
                                               sizeof out, &out_len),
                                 GPU_ERR_INVALID);
            }

            /* Slot 'cur' is filled next; the other may be in flight. */
            struct dev_gather g[2] = { { 0 } };
            int cur = 0;

            for (size_t i0 = 0; i0 < n || g[cur ^ 1].n;) {
                size_t ng = i0 < n ? 1 + rng_below(&r, max_gather) : 0;
                bool burst = ng && !rng_below(&r, 4);

                ng = ng < n - i0 ? ng : n - i0;
                if (ng && !burst) {
                    if (cases[ci].resync_calls && !rng_below(&r, 8)) {
                        /* A gather in flight goes raw. */
                        gpu_re_encoder_resync(ed);
                    }
                    n_submits += dev_gather_submit(ed, &g[cur], b[cur],
                                                   data[cur], offsets[cur],
                                                   rooms[cur], orig, got,
                                                   caps, i0, ng, &r) > 0;
                }
                /* The older gather is encoded once the next one is on
                 * its way. */
                dev_gather_finish(ed, &g[cur ^ 1], b[cur ^ 1], got, caps,
                                  res);
                if (burst) {
                    dev_burst(ed, orig, got, caps, res, i0, ng);
                } else if (ng) {
                    cur ^= 1;
                }
                i0 += ng;
            }

            /* The host encoder on the same frames, and the decoder on
             * the device encoder's. */
            for (size_t i = 0; i < n; i++) {
                struct frame y = orig[i];
                int want = gpu_re_encode_packet(eh, y.buf, &y.len, caps[i]);

                ref[i] = y;
                if (!cuda && !cases[ci].resync_calls) {
                    assert_int_equal(res[i], want);
                    if (got[i].len != y.len
                        || memcmp(got[i].buf, y.buf, y.len)) {
                        fail_msg("seed 0x%016" PRIx64 ": frame %zu differs "
                                 "from the host encoder's", seed, i);
                    }
                }
                n_raw += res[i] == GPU_RE_RAW;
                n_shim += res[i] == GPU_RE_SHIM;

                struct frame z = got[i];
                int dr = gpu_re_decode_packet(d, z.buf, &z.len,
                                              sizeof z.buf);

                if (dr == GPU_RE_UNDECODABLE || z.len != orig[i].len
                    || memcmp(z.buf, orig[i].buf, z.len)) {
                    fail_msg("seed 0x%016" PRIx64 ": %s frame %zu (result "
                             "%d) decodes to %d, not the original",
                             seed, gpu_re_backend_name(backends[bi]), i,
                             res[i], dr);
                }
            }
            gpu_re_encoder_get_stats(ed, &ds);
            gpu_re_encoder_get_stats(eh, &hs);
            gpu_re_decoder_get_stats(d, &dec);
            assert_int_equal(ds.packets, hs.packets);
            assert_int_equal(ds.passed, hs.passed);
            assert_int_equal(ds.shims, n_shim);
            assert_int_equal(ds.packets, n_shim + n_raw);
            assert_int_equal(ds.bytes_in, hs.bytes_in);
            assert_int_equal(dec.undecodable, 0);
            assert_true(ds.shims > 0 && ds.hits > 0);

            double saved_d = 1.0 - (double) ds.bytes_out / ds.bytes_in;
            double saved_h = 1.0 - (double) hs.bytes_out / hs.bytes_in;

            gpu_re_chunker_get_stats(ch, &cs);
            print_message("  %s: device encoder %s, saved %.1f%% (host "
                          "encoder %.1f%%), %" PRIu64 " shims, %" PRIu64
                          " references, %" PRIu64 " epochs; %" PRIu64
                          " gathers, %" PRIu64 " calls launched by the "
                          "device of %" PRIu64 " (scheduler woken %" PRIu64
                          " times)\n",
                          gpu_re_backend_name(backends[bi]),
                          cuda ? "on the device" : "on the host",
                          100 * saved_d, 100 * saved_h, ds.shims, ds.hits,
                          ds.epochs, n_submits, cs.n_device_launches,
                          cs.n_graph_launches, cs.n_scheduler_launches);
            /* No call failed: a device fault's batch goes raw, which the
             * checks above would pass. */
            assert_int_equal(cs.n_fallbacks, 0);
            if (device_launch) {
                /* Every call, the bursts' too (their blocks pinned). */
                assert_true(cs.n_device_launches >= n_submits);
                assert_int_equal(cs.n_device_launches, cs.n_graph_launches);
            } else {
                assert_int_equal(cs.n_device_launches, 0);
            }
            if (!cases[ci].resync_calls) {
                assert_true(saved_d >= 0.8 * saved_h);
            }
            for (int k = 0; k < 2; k++) {
                gpu_re_batch_destroy(b[k]);
                gpu_host_free(offsets[k]);
                gpu_host_free(data[k]);
                free(rooms[k]);
            }
            gpu_re_encoder_destroy(ed);
            gpu_re_encoder_destroy(eh);
            gpu_re_decoder_destroy(d);
            gpu_re_chunker_destroy(ch);
            if (cuda) {
                assert_int_equal(gpu_host_unregister(got), GPU_OK);
            }
            free(got);
            free(ref);
            free(res);
        }
        free(orig);
        free(caps);
        trace_free(&t);
    }
    (void) state;
}

/* The device's launch with many calls queued at once: an encoder on CUDA
 * with 'device_launch', DLQ_GATHERS batches of a few frames each.  A
 * first round submits and finishes each in turn (a batch builds its graph
 * at its first submission, which waits for the device); the second
 * submits them all before any is finished, more than the queue's
 * GPU_GRAPH_QUEUE_LEN, so a submission waits for the oldest to be taken;
 * two of them, late in the round, from blocks that are not pinned, which
 * the queue cannot take: those drain it and go on the encoder's stream,
 * and the next queued one waits for that.  Every frame must decode to its
 * original in order, no call may have failed (its batch would go raw and
 * still decode), and the calls add up: the second round's, launched by
 * the device, plus the two from the host.  CUDA only. */
#define DLQ_GATHERS (GPU_GRAPH_QUEUE_LEN + 16)
#define DLQ_FRAMES 4

static void
test_device_launch_queue(void **state)
{
    uint64_t seed = case_seed(13, 0);
    struct rng r = { seed };
    int bi;

    for (bi = 0; bi < n_backends; bi++) {
        if (backends[bi] == GPU_RE_BACKEND_CUDA) {
            break;
        }
    }
    if (bi == n_backends) {
        print_message("  no CUDA backend here: nothing to queue\n");
        skip();
    }
    print_message("  seed 0x%016" PRIx64 "\n", seed);

    struct gpu_re_config cfg;
    struct trace t;

    gpu_re_config_init(&cfg);
    cfg.epoch = 9;
    make_trace(&t, &r, 30, 1460, 2 * DLQ_GATHERS * DLQ_FRAMES * 1460);

    size_t n = 2 * DLQ_GATHERS * DLQ_FRAMES;
    struct frame *orig = trace_frames(&t, &r);
    struct frame *got = malloc(n * sizeof *got);
    size_t *caps = malloc(n * sizeof *caps);
    int *res = malloc(n * sizeof *res);
    struct gpu_re_chunker_config cc;
    struct gpu_re_chunker_stats cs0, cs;
    struct gpu_re_chunker *ch;
    struct gpu_re_encoder *e;
    struct gpu_re_decoder *d;
    struct gpu_re_batch *b[DLQ_GATHERS];
    struct dev_gather *g = calloc(DLQ_GATHERS, sizeof *g);
    uint8_t *data[DLQ_GATHERS], *heap_data[2];
    uint32_t *offsets[DLQ_GATHERS], *rooms[DLQ_GATHERS];
    size_t heap_at[2] = { GPU_GRAPH_QUEUE_LEN + 4, DLQ_GATHERS - 3 };
    size_t n_heap = 0, n_calls = 0, i0 = 0;

    assert_true(t.n >= n);
    for (size_t i = 0; i < n; i++) {
        caps[i] = sizeof orig[i].buf;
    }
    gpu_re_chunker_config_init(&cc);
    cc.backend = GPU_RE_BACKEND_CUDA;
    cc.device_launch = true;
    cc.remap = true;
    cc.segment = 64;
    assert_int_equal(gpu_re_chunker_create(&cc, &ch), GPU_OK);
    assert_int_equal(gpu_host_register(got, n * sizeof *got, cc.device),
                     GPU_OK);
    cfg.device_encode = true;
    assert_int_equal(gpu_re_encoder_create(&cfg, ch, &e), GPU_OK);
    assert_true(gpu_re_encoder_on_device(e));
    assert_int_equal(gpu_re_decoder_create(&cfg, &d), GPU_OK);
    for (size_t k = 0; k < DLQ_GATHERS; k++) {
        assert_int_equal(gpu_re_encoder_batch_create(
                             e, DLQ_FRAMES, DLQ_FRAMES * 2048, &b[k]),
                         GPU_OK);
        offsets[k] = gpu_host_alloc((DLQ_FRAMES + 1) * sizeof *offsets[k]);
        rooms[k] = malloc(DLQ_FRAMES * sizeof *rooms[k]);
        data[k] = gpu_host_alloc(DLQ_FRAMES * 2048);
    }
    for (int h = 0; h < 2; h++) {
        heap_data[h] = malloc(DLQ_FRAMES * 2048);
    }

    /* First round: each batch's graph built, one call at a time. */
    for (size_t k = 0; k < DLQ_GATHERS; k++, i0 += DLQ_FRAMES) {
        dev_gather_submit(e, &g[k], b[k], data[k], offsets[k], rooms[k],
                          orig, got, caps, i0, DLQ_FRAMES, &r);
        dev_gather_finish(e, &g[k], b[k], got, caps, res);
    }
    gpu_re_chunker_get_stats(ch, &cs0);

    /* Second round: all out at once. */
    for (size_t k = 0; k < DLQ_GATHERS; k++, i0 += DLQ_FRAMES) {
        bool heap = k == heap_at[0] || k == heap_at[1];
        uint8_t *block = heap ? heap_data[k == heap_at[1]] : data[k];

        if (dev_gather_submit(e, &g[k], b[k], block, offsets[k], rooms[k],
                              orig, got, caps, i0, DLQ_FRAMES, &r)) {
            n_calls++;
            n_heap += heap;
        }
    }
    for (size_t k = 0; k < DLQ_GATHERS; k++) {
        dev_gather_finish(e, &g[k], b[k], got, caps, res);
    }
    for (size_t i = 0; i < n; i++) {
        struct frame z = got[i];
        int dr = gpu_re_decode_packet(d, z.buf, &z.len, sizeof z.buf);

        if (dr == GPU_RE_UNDECODABLE || z.len != orig[i].len
            || memcmp(z.buf, orig[i].buf, z.len)) {
            fail_msg("seed 0x%016" PRIx64 ": frame %zu (result %d) "
                     "decodes to %d, not the original", seed, i, res[i], dr);
        }
    }

    struct gpu_re_stats st;

    gpu_re_encoder_get_stats(e, &st);
    gpu_re_chunker_get_stats(ch, &cs);
    print_message("  %zu calls queued at once, %zu of them from ordinary "
                  "memory: %" PRIu64 " launched by the device, %" PRIu64
                  " redone on the CPU; %" PRIu64 " shims, %" PRIu64
                  " references\n", n_calls, n_heap,
                  cs.n_device_launches - cs0.n_device_launches,
                  cs.n_fallbacks, st.shims, st.hits);
    assert_int_equal(cs.n_fallbacks, 0);
    assert_int_equal(cs.n_graph_launches - cs0.n_graph_launches, n_calls);
    assert_int_equal(cs.n_device_launches - cs0.n_device_launches + n_heap,
                     n_calls);
    assert_int_equal(n_heap, 2);
    assert_true(n_calls > GPU_GRAPH_QUEUE_LEN);
    assert_true(st.shims > 0 && st.hits > 0);

    for (size_t k = 0; k < DLQ_GATHERS; k++) {
        gpu_re_batch_destroy(b[k]);
        gpu_host_free(offsets[k]);
        gpu_host_free(data[k]);
        free(rooms[k]);
    }
    for (int h = 0; h < 2; h++) {
        free(heap_data[h]);
    }
    gpu_re_encoder_destroy(e);
    gpu_re_decoder_destroy(d);
    gpu_re_chunker_destroy(ch);
    assert_int_equal(gpu_host_unregister(got), GPU_OK);
    free(g);
    free(got);
    free(caps);
    free(res);
    free(orig);
    trace_free(&t);
    (void) state;
}

int
main(void)
{
    bool cuda = gpu_re_cuda_available();
    int chosen[2];

    master_seed = test_seed_init("test-re");
    n_backends = test_backends_from_env("test-re", "GPU_RE_BACKEND", cuda,
                                        GPU_RE_BACKEND_CPU,
                                        GPU_RE_BACKEND_CUDA, chosen);
    if (!n_backends) {
        return 1;
    }
    for (int i = 0; i < n_backends; i++) {
        backends[i] = chosen[i];
    }
    printf("test-re: backends:");
    for (int i = 0; i < n_backends; i++) {
        printf(" %s", gpu_re_backend_name(backends[i]));
    }
    printf("%s\n", cuda ? "" : " (no CUDA device here: CUDA cases skipped)");

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_reference_random),
        cmocka_unit_test(test_reference_real),
        cmocka_unit_test(test_backends_identical),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_check32_oracle),
        cmocka_unit_test(test_shim_version1),
        cmocka_unit_test(test_encode_chunks),
        cmocka_unit_test(test_loss_reorder),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_packets),
        cmocka_unit_test(test_ipv4_checksum_sweep),
        cmocka_unit_test(test_packets_gathered),
        cmocka_unit_test(test_decode_in_place),
        cmocka_unit_test(test_device_encode),
        cmocka_unit_test(test_device_launch_queue),
    };
    const char *filter = getenv("GPU_TEST_FILTER");
    if (filter && *filter) {
        cmocka_set_test_filter(filter);
    }
    int rc = test_run_group("test-re", tests);
    if (rc) {
        printf("test-re: FAILED; rerun with GPU_TEST_SEED=0x%016" PRIx64
               "\n", master_seed);
    }
    return rc;
}
