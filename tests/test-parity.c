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
 * Tests of gpu_services/parity/: GF(2^w) and the coding matrix against
 * Jerasure, parity bytes against Jerasure's bitmatrix encode on random
 * data for many (k, m, w, packetsize), decoding of every erasure pattern
 * of small codes and random patterns of large ones, refusal of too many
 * erasures and of bad parameters, the packet-group helpers, the batch API,
 * and the CPU and CUDA backends against each other.
 *
 * Environment:
 *   GPU_TEST_SEED        master seed (decimal or 0x hex); else time-based.
 *                        Always printed; rerun with it to repeat a failure.
 *   GPU_PARITY_BACKEND   cpu | cuda | all (default: every backend usable
 *                        here).  "cuda" without a device fails.
 *   GPU_TEST_FILTER      run only tests whose names match this pattern.
 *
 * Without Jerasure (configure's HAVE_JERASURE) the oracle cases are
 * skipped and say so; everything else still runs.  The GF8 code is checked
 * against a plain GF(2^8) matrix product written here and, where built
 * with ISA-L, against ISA-L's own encoder too; on the CPU both with ISA-L
 * and with the portable code (forced).
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

#ifdef HAVE_JERASURE
#include <jerasure.h>
#include <cauchy.h>
#endif

#ifdef HAVE_ISAL
#include <isa-l.h>
#endif

#include "gpu_services/parity/gpu-parity.h"

/* Internals checked against Jerasure (parity-private.h). */
unsigned int gpu_parity_gf_mul(unsigned int a, unsigned int b,
                               unsigned int w);
unsigned int gpu_parity_gf_div(unsigned int a, unsigned int b,
                               unsigned int w);
unsigned int gpu_parity_n_ones(unsigned int e, unsigned int w);

static uint64_t master_seed;
static enum gpu_parity_backend backends[2];
static int n_backends;
static bool cuda_here;

/* ---- Random numbers (the generator is in tests/test-common.h). ---- */

static struct rng
rng_for(uint64_t a, uint64_t b)
{
    struct rng r = rng_for_case(master_seed, a, b);

    rng_next(&r);
    return r;
}

static void
fill_random(struct rng *r, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = rng_next(r);
    }
}

/* ---- Stripes: k + m chunks of one size. ---- */

struct stripe {
    unsigned int k, m;
    size_t size;
    uint8_t *mem;               /* (k + m) * size. */
    uint8_t *data[GPU_PARITY_MAX_CHUNKS];
    uint8_t *parity[GPU_PARITY_MAX_CHUNKS];
};

static void
stripe_init(struct stripe *s, unsigned int k, unsigned int m, size_t size)
{
    s->k = k;
    s->m = m;
    s->size = size;
    s->mem = gpu_host_alloc((k + m) * size);
    assert_non_null(s->mem);
    for (unsigned int i = 0; i < k + m; i++) {
        uint8_t *c = s->mem + (size_t) i * size;

        if (i < k) {
            s->data[i] = c;
        } else {
            s->parity[i - k] = c;
        }
    }
}

static void
stripe_destroy(struct stripe *s)
{
    gpu_host_free(s->mem);
}

static uint8_t *
chunk(struct stripe *s, unsigned int id)
{
    return id < s->k ? s->data[id] : s->parity[id - s->k];
}

/* Creates a coder from 'cfg' on its backend, or fails the test. */
static struct gpu_parity *
make_coder_cfg(const struct gpu_parity_config *cfg)
{
    struct gpu_parity *pc = NULL;
    char err[256];
    int error;

    error = gpu_parity_create(cfg, &pc, err, sizeof err);
    if (error) {
        fail_msg("create %s k=%u m=%u w=%u ps=%u on %s: %s (%s)",
                 cfg->code == GPU_PARITY_CODE_GF8 ? "gf8" : "bitmatrix",
                 cfg->k, cfg->m, cfg->w, cfg->packetsize,
                 gpu_parity_backend_name(cfg->backend),
                 gpu_parity_strerror(error), err);
    }
    assert_int_equal(gpu_parity_backend(pc), cfg->backend);
    return pc;
}

static struct gpu_parity *
make_coder(unsigned int k, unsigned int m, unsigned int w, unsigned int ps,
           enum gpu_parity_backend be)
{
    struct gpu_parity_config cfg;

    gpu_parity_config_init(&cfg, k, m);
    cfg.w = w;
    cfg.packetsize = ps;
    cfg.backend = be;
    return make_coder_cfg(&cfg);
}

/* A GF8-code coder; 'portable' forces the portable CPU code. */
static struct gpu_parity *
make_coder_gf8(unsigned int k, unsigned int m, unsigned int ps,
               enum gpu_parity_backend be, bool portable)
{
    struct gpu_parity_config cfg;

    gpu_parity_config_init(&cfg, k, m);
    cfg.code = GPU_PARITY_CODE_GF8;
    cfg.packetsize = ps;
    cfg.backend = be;
    cfg.portable = portable;
    return make_coder_cfg(&cfg);
}

/* The smallest w for k + m chunks. */
static unsigned int
min_w(unsigned int n)
{
    unsigned int w = 1;

    while ((1u << w) < n) {
        w++;
    }
    return w;
}

/* A random valid code with w >= wmin, k + m <= max_n. */
static void
random_code(struct rng *r, unsigned int max_n, unsigned int wmin,
            unsigned int *k, unsigned int *m, unsigned int *w)
{
    *w = wmin + rng_below(r, GPU_PARITY_MAX_W - wmin + 1);
    unsigned int lim = (1u << *w) < max_n ? (1u << *w) : max_n;

    *m = 1 + rng_below(r, lim - 1 < 8 ? lim - 1 : 8);
    *k = 1 + rng_below(r, lim - *m);
}

static unsigned int
random_packetsize(struct rng *r)
{
    static const unsigned int sizes[] = { 8, 16, 24, 32, 40, 64, 128, 256,
                                          512, 2048 };

    return sizes[rng_below(r, sizeof sizes / sizeof *sizes)];
}

/* ---- GF(2^w) and the matrix against Jerasure. ---- */

static void
test_gf_field(void **state)
{
    (void) state;
    for (unsigned int w = 1; w <= GPU_PARITY_MAX_W; w++) {
        for (unsigned int a = 1; a < (1u << w); a++) {
            unsigned int inv = gpu_parity_gf_div(1, a, w);

            assert_int_equal(gpu_parity_gf_mul(a, inv, w), 1);
            assert_int_equal(gpu_parity_gf_mul(a, 1, w), a);
        }
    }
#ifdef HAVE_JERASURE
    for (unsigned int w = 2; w <= GPU_PARITY_MAX_W; w++) {
        for (unsigned int a = 0; a < (1u << w); a++) {
            for (unsigned int b = 0; b < (1u << w); b++) {
                unsigned int ours = gpu_parity_gf_mul(a, b, w);
                unsigned int theirs = galois_single_multiply(a, b, w);

                if (ours != theirs) {
                    fail_msg("w=%u: %u * %u = %u, Jerasure says %u", w, a, b,
                             ours, theirs);
                }
            }
            assert_int_equal(gpu_parity_n_ones(a, w),
                             cauchy_n_ones(a, w));
        }
    }
#else
    print_message("  SKIP oracle: built without Jerasure (HAVE_JERASURE)\n");
#endif
}

#ifdef HAVE_JERASURE
static void
check_matrix(unsigned int k, unsigned int m, unsigned int w)
{
    struct gpu_parity *pc = make_coder(k, m, w, 8, GPU_PARITY_BACKEND_CPU);
    int *jm = cauchy_good_general_coding_matrix(k, m, w);
    int *jb;

    assert_non_null(jm);
    jb = jerasure_matrix_to_bitmatrix(k, m, w, jm);
    assert_non_null(jb);
    if (memcmp(gpu_parity_matrix(pc), jm, (size_t) k * m * sizeof *jm)) {
        fail_msg("matrix k=%u m=%u w=%u differs from Jerasure's", k, m, w);
    }
    if (memcmp(gpu_parity_bitmatrix(pc), jb,
               (size_t) k * m * w * w * sizeof *jb)) {
        fail_msg("bitmatrix k=%u m=%u w=%u differs from Jerasure's", k, m,
                 w);
    }
    free(jm);
    free(jb);
    gpu_parity_destroy(pc);
}
#endif

static void
test_matrix_oracle(void **state)
{
    (void) state;
#ifdef HAVE_JERASURE
    unsigned int n = 0;

    /* Every m = 2 code (Jerasure's table of best RAID-6 rows), and every
     * code with k + m <= 32; then larger ones at random. */
    for (unsigned int w = 2; w <= GPU_PARITY_MAX_W; w++) {
        for (unsigned int k = 1; k + 2 <= (1u << w); k++) {
            check_matrix(k, 2, w);
            n++;
        }
    }
    for (unsigned int w = 2; w <= 5; w++) {
        for (unsigned int k = 1; k < (1u << w); k++) {
            for (unsigned int m = 1; k + m <= (1u << w); m++) {
                check_matrix(k, m, w);
                n++;
            }
        }
    }
    struct rng r = rng_for(1, 0);
    for (int i = 0; i < 200; i++) {
        unsigned int k, m, w;

        random_code(&r, 256, 6, &k, &m, &w);
        m = 1 + rng_below(&r, (1u << w) - k);
        check_matrix(k, m, w);
        n++;
    }
    print_message("  %u coding matrices equal Jerasure's\n", n);
#else
    test_skip(TEST_SKIP_NO_ORACLE, "built without Jerasure (apt-get "
              "install libjerasure-dev and re-run configure)");
#endif
}

/* ---- Encoding against Jerasure. ---- */

static void
test_encode_oracle(void **state)
{
    (void) state;
#ifdef HAVE_JERASURE
    unsigned int n = 0;

    for (int b = 0; b < n_backends; b++) {
        struct rng r = rng_for(2, b);

        for (int i = 0; i < 150; i++) {
            unsigned int k, m, w, ps;

            random_code(&r, i < 100 ? 24 : 256, 2, &k, &m, &w);
            ps = random_packetsize(&r);

            size_t blocks = 1 + rng_below(&r, ps >= 512 ? 3 : 12);
            size_t size = blocks * w * ps;
            struct gpu_parity *pc = make_coder(k, m, w, ps, backends[b]);
            struct stripe s;
            uint8_t **jpar = calloc(m, sizeof *jpar);
            int *jm, *jb;
            int error;

            stripe_init(&s, k, m, size);
            fill_random(&r, s.mem, (size_t) k * size);
            memset(s.mem + (size_t) k * size, 0xa5, (size_t) m * size);
            for (unsigned int j = 0; j < m; j++) {
                jpar[j] = malloc(size);
            }
            jm = cauchy_good_general_coding_matrix(k, m, w);
            jb = jerasure_matrix_to_bitmatrix(k, m, w, jm);
            jerasure_bitmatrix_encode(k, m, w, jb, (char **) s.data,
                                      (char **) jpar, size, ps);
            error = gpu_parity_encode(pc, (const uint8_t *const *) s.data,
                                      s.parity, size);
            assert_int_equal(error, GPU_OK);
            for (unsigned int j = 0; j < m; j++) {
                if (memcmp(jpar[j], s.parity[j], size)) {
                    fail_msg("%s: k=%u m=%u w=%u ps=%u size=%zu: parity "
                             "%u differs from Jerasure's (GPU_TEST_SEED="
                             "0x%016" PRIx64 ")",
                             gpu_parity_backend_name(backends[b]), k, m, w,
                             ps, size, j, master_seed);
                }
                free(jpar[j]);
            }
            free(jpar);
            free(jm);
            free(jb);
            stripe_destroy(&s);
            gpu_parity_destroy(pc);
            n++;
        }
    }
    print_message("  %u random codes encode as Jerasure does\n", n);
#else
    test_skip(TEST_SKIP_NO_ORACLE, "built without Jerasure (apt-get "
              "install libjerasure-dev and re-run configure)");
#endif
}

/* ---- Decoding. ---- */

/* Erases 'ids' in 's' (scribbles over them), decodes, and checks every
 * chunk against 'ref' (a copy of the whole stripe). */
static void
erase_and_decode(struct gpu_parity *pc, struct stripe *s, const uint8_t *ref,
                 const int *ids, unsigned int n, struct rng *r)
{
    int error;

    for (unsigned int i = 0; i < n; i++) {
        fill_random(r, chunk(s, ids[i]), s->size);
    }
    error = gpu_parity_decode(pc, s->data, s->parity, ids, n, s->size);
    if (error) {
        fail_msg("decode of %u erasures: %s", n, gpu_parity_strerror(error));
    }
    for (unsigned int id = 0; id < s->k + s->m; id++) {
        if (memcmp(chunk(s, id), ref + (size_t) id * s->size, s->size)) {
            char list[512] = "";

            for (unsigned int i = 0; i < n; i++) {
                snprintf(list + strlen(list), sizeof list - strlen(list),
                         " %d", ids[i]);
            }
            fail_msg("k=%u m=%u: chunk %u wrong after decoding erasures%s "
                     "(GPU_TEST_SEED=0x%016" PRIx64 ")", s->k, s->m, id,
                     list, master_seed);
        }
    }
}

static void
test_decode_all_patterns(void **state)
{
    static const unsigned int codes[][4] = {
        /* k, m, w, packetsize */
        { 1, 1, 1, 8 }, { 2, 2, 2, 8 }, { 3, 2, 3, 16 }, { 4, 3, 3, 8 },
        { 5, 3, 4, 32 }, { 6, 3, 4, 16 }, { 4, 4, 4, 24 }, { 8, 4, 4, 8 },
        { 10, 4, 4, 16 }, { 6, 6, 5, 8 }, { 4, 2, 8, 8 },
    };
    unsigned int n_patterns = 0;

    (void) state;
    for (int b = 0; b < n_backends; b++) {
        for (size_t c = 0; c < sizeof codes / sizeof *codes; c++) {
            unsigned int k = codes[c][0], m = codes[c][1], w = codes[c][2];
            unsigned int ps = codes[c][3], n = k + m;
            struct rng r = rng_for(3, c * 2 + b);
            struct gpu_parity *pc = make_coder(k, m, w, ps, backends[b]);
            size_t size = 3 * w * ps;
            struct stripe s;
            uint8_t *ref;

            stripe_init(&s, k, m, size);
            fill_random(&r, s.mem, (size_t) k * size);
            assert_int_equal(gpu_parity_encode(pc,
                                               (const uint8_t *const *)
                                               s.data, s.parity, size),
                             GPU_OK);
            ref = malloc((size_t) n * size);
            memcpy(ref, s.mem, (size_t) n * size);

            /* Every subset of at most m chunks. */
            for (uint32_t set = 0; set < (1u << n); set++) {
                int ids[32];
                unsigned int ne = 0;

                if ((unsigned int) __builtin_popcount(set) > m) {
                    continue;
                }
                for (unsigned int id = 0; id < n; id++) {
                    if (set & (1u << id)) {
                        ids[ne++] = id;
                    }
                }
                /* Reverse order sometimes: order must not matter. */
                if (ne > 1 && (set & 1)) {
                    int t = ids[0];

                    ids[0] = ids[ne - 1];
                    ids[ne - 1] = t;
                }
                erase_and_decode(pc, &s, ref, ids, ne, &r);
                n_patterns++;
            }
            free(ref);
            stripe_destroy(&s);
            gpu_parity_destroy(pc);
        }
    }
    print_message("  %u erasure patterns decoded\n", n_patterns);
}

static void
test_decode_random_large(void **state)
{
    static const unsigned int codes[][4] = {
        /* k, m, w, packetsize.  The last ones need several kernel
         * launches on CUDA: k*w > 256 input rows, m*w > 64 output rows. */
        { 10, 4, 4, 2048 }, { 16, 4, 5, 1024 }, { 8, 8, 4, 512 },
        { 10, 4, 8, 64 }, { 12, 20, 5, 40 }, { 40, 20, 6, 32 },
        { 100, 27, 7, 16 }, { 200, 40, 8, 8 }, { 128, 128, 8, 8 },
    };
    unsigned int n_patterns = 0;

    (void) state;
    for (int b = 0; b < n_backends; b++) {
        for (size_t c = 0; c < sizeof codes / sizeof *codes; c++) {
            unsigned int k = codes[c][0], m = codes[c][1], w = codes[c][2];
            unsigned int ps = codes[c][3], n = k + m;
            struct rng r = rng_for(4, c * 2 + b);
            struct gpu_parity *pc = make_coder(k, m, w, ps, backends[b]);
            size_t size = (k > 50 ? 2 : 5) * w * ps;
            struct stripe s;
            uint8_t *ref;

            stripe_init(&s, k, m, size);
            fill_random(&r, s.mem, (size_t) k * size);
            assert_int_equal(gpu_parity_encode(pc,
                                               (const uint8_t *const *)
                                               s.data, s.parity, size),
                             GPU_OK);
            ref = malloc((size_t) n * size);
            memcpy(ref, s.mem, (size_t) n * size);
            for (int t = 0; t < 12; t++) {
                int ids[GPU_PARITY_MAX_CHUNKS];
                uint8_t used[GPU_PARITY_MAX_CHUNKS] = { 0 };
                /* Mostly m erasures (the hardest), some fewer; some only
                 * data, some only parity. */
                unsigned int ne = t % 3 ? m : 1 + rng_below(&r, m);

                for (unsigned int i = 0; i < ne; i++) {
                    unsigned int id;

                    do {
                        id = t == 4 ? rng_below(&r, k)
                             : t == 5 ? k + rng_below(&r, m)
                             : rng_below(&r, n);
                    } while (used[id]);
                    used[id] = 1;
                    ids[i] = id;
                    if ((t == 4 && i + 1 >= k) || (t == 5 && i + 1 >= m)) {
                        ne = i + 1;
                        break;
                    }
                }
                erase_and_decode(pc, &s, ref, ids, ne, &r);
                n_patterns++;
            }
            free(ref);
            stripe_destroy(&s);
            gpu_parity_destroy(pc);
        }
    }
    print_message("  %u random erasure patterns decoded\n", n_patterns);
}

static void
test_too_many_erasures(void **state)
{
    (void) state;
    for (int b = 0; b < n_backends; b++) {
        unsigned int k = 6, m = 3, w = 4, ps = 16;
        struct rng r = rng_for(5, b);
        struct gpu_parity *pc = make_coder(k, m, w, ps, backends[b]);
        size_t size = 2 * w * ps;
        struct stripe s;
        uint8_t *before;
        int ids[] = { 0, 2, 7, 5 };
        int dup[] = { 1, 1 };
        int bad[] = { 3, 9 };
        int neg[] = { -1 };

        stripe_init(&s, k, m, size);
        fill_random(&r, s.mem, (size_t) k * size);
        gpu_parity_encode(pc, (const uint8_t *const *) s.data, s.parity,
                          size);
        before = malloc((size_t) (k + m) * size);
        memcpy(before, s.mem, (size_t) (k + m) * size);

        /* m + 1 erasures: refused, nothing written. */
        assert_int_equal(gpu_parity_decode(pc, s.data, s.parity, ids, 4,
                                           size),
                         GPU_PARITY_ERR_TOO_MANY_ERASURES);
        assert_memory_equal(before, s.mem, (size_t) (k + m) * size);
        assert_int_equal(gpu_parity_decode(pc, s.data, s.parity, dup, 2,
                                           size),
                         GPU_PARITY_ERR_ERASURE_ID);
        assert_int_equal(gpu_parity_decode(pc, s.data, s.parity, bad, 2,
                                           size),
                         GPU_PARITY_ERR_ERASURE_ID);
        assert_int_equal(gpu_parity_decode(pc, s.data, s.parity, neg, 1,
                                           size),
                         GPU_PARITY_ERR_ERASURE_ID);
        assert_memory_equal(before, s.mem, (size_t) (k + m) * size);

        /* Packets: fewer than k of the group. */
        const uint8_t *pkts[9] = { 0 };
        size_t lens[9] = { 0 };
        uint8_t *out[6];
        size_t out_lens[6];
        for (unsigned int i = 0; i < 5; i++) {
            pkts[i + 2] = s.data[0];
            lens[i + 2] = i + 2 < k ? 10 : size;
        }
        for (unsigned int i = 0; i < k; i++) {
            out[i] = s.data[i];
        }
        assert_int_equal(gpu_parity_pkt_decode(pc, pkts, lens, out,
                                               out_lens),
                         GPU_PARITY_ERR_TOO_MANY_ERASURES);

        struct gpu_parity_stats st;
        gpu_parity_get_stats(pc, &st);
        assert_true(st.n_refused >= 5);
        free(before);
        stripe_destroy(&s);
        gpu_parity_destroy(pc);
    }
}

static void
test_bad_params(void **state)
{
    static const unsigned int bad[][5] = {
        /* k, m, w, packetsize, expected error (negated) */
        { 0, 2, 4, 8, -GPU_PARITY_ERR_CODE },
        { 4, 0, 4, 8, -GPU_PARITY_ERR_CODE },
        { 4, 2, 0, 8, -GPU_PARITY_ERR_CODE },
        { 4, 2, 9, 8, -GPU_PARITY_ERR_CODE },
        { 14, 3, 4, 8, -GPU_PARITY_ERR_CODE },
        { 2, 1, 1, 8, -GPU_PARITY_ERR_CODE },
        { 250, 7, 8, 8, -GPU_PARITY_ERR_CODE },
        { 4, 2, 4, 0, -GPU_PARITY_ERR_SIZE },
        { 4, 2, 4, 12, -GPU_PARITY_ERR_SIZE },
        { 4, 2, 4, 4, -GPU_PARITY_ERR_SIZE },
    };
    struct gpu_parity_config cfg;
    struct gpu_parity *pc = NULL;
    char err[256];

    (void) state;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        gpu_parity_config_init(&cfg, bad[i][0], bad[i][1]);
        cfg.w = bad[i][2];
        cfg.packetsize = bad[i][3];
        cfg.backend = GPU_PARITY_BACKEND_CPU;
        err[0] = '\0';
        assert_int_equal(gpu_parity_create(&cfg, &pc, err, sizeof err),
                         -(int) bad[i][4]);
        assert_true(err[0] != '\0');
        assert_true(strlen(gpu_parity_strerror(-(int) bad[i][4])) > 10);
    }
    assert_null(pc);

    /* k + m = 2^w exactly is fine. */
    gpu_parity_config_init(&cfg, 12, 4);
    cfg.w = 4;
    assert_int_equal(cfg.w, 4);
    cfg.backend = GPU_PARITY_BACKEND_CPU;
    assert_int_equal(gpu_parity_create(&cfg, &pc, err, sizeof err), GPU_OK);
    gpu_parity_destroy(pc);

    /* Without a device, asking for CUDA is refused with a reason. */
    if (!cuda_here) {
        gpu_parity_config_init(&cfg, 4, 2);
        cfg.backend = GPU_PARITY_BACKEND_CUDA;
        assert_int_equal(gpu_parity_create(&cfg, &pc, err, sizeof err),
                         GPU_ERR_NO_DEVICE);
        print_message("  cuda refused here: %s\n", err);
    }

    /* Sizes: not a multiple of w * packetsize, zero, beyond the batch. */
    for (int b = 0; b < n_backends; b++) {
        unsigned int k = 4, m = 2, w = 3, ps = 16;
        struct gpu_parity *c = make_coder(k, m, w, ps, backends[b]);
        struct gpu_parity_batch *batch;
        struct stripe s;
        int ids[] = { 1 };

        stripe_init(&s, k, m, 4 * w * ps);
        assert_int_equal(gpu_parity_encode(c, (const uint8_t *const *)
                                           s.data, s.parity, w * ps + 8),
                         GPU_PARITY_ERR_SIZE);
        assert_int_equal(gpu_parity_encode(c, (const uint8_t *const *)
                                           s.data, s.parity, 0),
                         GPU_PARITY_ERR_SIZE);
        assert_int_equal(gpu_parity_decode(c, s.data, s.parity, ids, 1,
                                           ps),
                         GPU_PARITY_ERR_SIZE);
        assert_int_equal(gpu_parity_batch_create(c, w * ps + 1, &batch),
                         GPU_PARITY_ERR_SIZE);
        assert_int_equal(gpu_parity_batch_create(c, w * ps, &batch),
                         GPU_OK);
        assert_int_equal(gpu_parity_encode_submit(batch, NULL,
                                                  (const uint8_t *const *)
                                                  s.data, s.parity,
                                                  2 * w * ps),
                         GPU_PARITY_ERR_SIZE);
        gpu_parity_batch_destroy(batch);

        /* A missing buffer. */
        uint8_t *saved = s.data[2];
        s.data[2] = NULL;
        assert_int_equal(gpu_parity_encode(c, (const uint8_t *const *)
                                           s.data, s.parity, w * ps),
                         GPU_ERR_INVALID);
        s.data[2] = saved;
        stripe_destroy(&s);
        gpu_parity_destroy(c);
    }
}

/* ---- CPU and CUDA agree. ---- */

static void
test_backends_identical(void **state)
{
    (void) state;
    if (!cuda_here || n_backends < 2) {
        test_skip(TEST_SKIP_NO_GPU, "needs the CPU and CUDA backends (%s)",
                  cuda_here ? "GPU_PARITY_BACKEND names one"
                            : "no usable CUDA device here");
    }
    struct rng r = rng_for(6, 0);
    for (int i = 0; i < 40; i++) {
        unsigned int k, m, w, ps;

        random_code(&r, 256, 2, &k, &m, &w);
        ps = random_packetsize(&r);
        /* A few large enough to be sliced over the CUDA streams. */
        size_t blocks = i < 4 ? (8u << 20) / (w * ps * k) + 1
                              : 1 + rng_below(&r, 40);
        size_t size = blocks * w * ps;
        struct gpu_parity *cpu = make_coder(k, m, w, ps,
                                            GPU_PARITY_BACKEND_CPU);
        struct gpu_parity *gpu = make_coder(k, m, w, ps,
                                            GPU_PARITY_BACKEND_CUDA);
        struct stripe a, b;
        int ids[GPU_PARITY_MAX_CHUNKS];
        unsigned int ne = 1 + rng_below(&r, m);

        stripe_init(&a, k, m, size);
        stripe_init(&b, k, m, size);
        fill_random(&r, a.mem, (size_t) k * size);
        memcpy(b.mem, a.mem, (size_t) k * size);
        assert_int_equal(gpu_parity_encode(cpu, (const uint8_t *const *)
                                           a.data, a.parity, size), GPU_OK);
        assert_int_equal(gpu_parity_encode(gpu, (const uint8_t *const *)
                                           b.data, b.parity, size), GPU_OK);
        if (memcmp(a.mem, b.mem, (size_t) (k + m) * size)) {
            fail_msg("k=%u m=%u w=%u ps=%u size=%zu: CPU and CUDA parity "
                     "differ (GPU_TEST_SEED=0x%016" PRIx64 ")", k, m, w,
                     ps, size, master_seed);
        }
        for (unsigned int j = 0; j < ne; j++) {
            unsigned int id;
            bool again;

            do {
                id = rng_below(&r, k + m);
                again = false;
                for (unsigned int x = 0; x < j; x++) {
                    again |= ids[x] == (int) id;
                }
            } while (again);
            ids[j] = id;
            memset(chunk(&a, id), 0x11, size);
            memset(chunk(&b, id), 0x22, size);
        }
        assert_int_equal(gpu_parity_decode(cpu, a.data, a.parity, ids, ne,
                                           size), GPU_OK);
        assert_int_equal(gpu_parity_decode(gpu, b.data, b.parity, ids, ne,
                                           size), GPU_OK);
        if (memcmp(a.mem, b.mem, (size_t) (k + m) * size)) {
            fail_msg("k=%u m=%u w=%u ps=%u: CPU and CUDA decode differ "
                     "(GPU_TEST_SEED=0x%016" PRIx64 ")", k, m, w, ps,
                     master_seed);
        }
        struct gpu_parity_stats st;
        gpu_parity_get_stats(gpu, &st);
        assert_int_equal(st.n_fallbacks, 0);
        stripe_destroy(&a);
        stripe_destroy(&b);
        gpu_parity_destroy(cpu);
        gpu_parity_destroy(gpu);
    }
}

/* ---- Batches. ---- */

static void
test_batches(void **state)
{
    (void) state;
    for (int b = 0; b < n_backends; b++) {
        unsigned int k = 10, m = 4, w = 4, ps = 2048;
        struct rng r = rng_for(7, b);
        struct gpu_parity *pc = make_coder(k, m, w, ps, backends[b]);
        size_t size = 64 * w * ps;
        struct gpu_parity_batch *batch;
        struct gpu_stream *stream;
        struct stripe s, ref;
        int ids[] = { 3, 11, 0, 7 };
        int error;

        assert_int_equal(gpu_stream_create(&stream), GPU_OK);
        stripe_init(&s, k, m, size);
        stripe_init(&ref, k, m, size);
        fill_random(&r, s.mem, (size_t) k * size);
        memcpy(ref.mem, s.mem, (size_t) k * size);
        assert_int_equal(gpu_parity_encode(pc, (const uint8_t *const *)
                                           ref.data, ref.parity, size),
                         GPU_OK);
        assert_int_equal(gpu_parity_batch_create(pc, size, &batch), GPU_OK);

        assert_int_equal(gpu_parity_encode_submit(batch, stream,
                                                  (const uint8_t *const *)
                                                  s.data, s.parity, size),
                         GPU_OK);
        if (backends[b] == GPU_PARITY_BACKEND_CUDA) {
            assert_int_equal(gpu_parity_encode_submit(
                                 batch, stream,
                                 (const uint8_t *const *) s.data, s.parity,
                                 size), GPU_ERR_BUSY);
        }
        do {
            error = gpu_parity_poll(batch);
        } while (error == GPU_ERR_BUSY);
        assert_int_equal(error, GPU_OK);
        assert_memory_equal(s.mem, ref.mem, (size_t) (k + m) * size);

        /* A kernel-only re-run changes nothing on the host. */
        memset(s.parity[0], 0, size);
        assert_int_equal(gpu_parity_resubmit(batch, stream), GPU_OK);
        assert_int_equal(gpu_parity_wait(batch), GPU_OK);
        if (backends[b] == GPU_PARITY_BACKEND_CUDA) {
            assert_int_equal(s.parity[0][0] | s.parity[0][size - 1], 0);
        }
        memcpy(s.parity[0], ref.parity[0], size);

        for (int i = 0; i < 4; i++) {
            memset(chunk(&s, ids[i]), 0xee, size);
        }
        assert_int_equal(gpu_parity_decode_submit(batch, NULL, s.data,
                                                  s.parity, ids, 4, size),
                         GPU_OK);
        assert_int_equal(gpu_parity_wait(batch), GPU_OK);
        assert_memory_equal(s.mem, ref.mem, (size_t) (k + m) * size);
        assert_int_equal(gpu_parity_wait(batch), GPU_OK);

        struct gpu_parity_stats st;
        gpu_parity_get_stats(pc, &st);
        assert_int_equal(st.backend, backends[b]);
        assert_true(st.n_encodes >= 2);
        assert_true(st.n_decodes >= 1);
        assert_int_equal(st.n_fallbacks, 0);

        gpu_parity_batch_destroy(batch);
        gpu_stream_destroy(stream);
        stripe_destroy(&s);
        stripe_destroy(&ref);
        gpu_parity_destroy(pc);
    }
}

static void
test_auto_backend(void **state)
{
    struct gpu_parity_config cfg;
    struct gpu_parity *pc;

    (void) state;
    gpu_parity_config_init(&cfg, 10, 4);
    assert_int_equal(cfg.w, 4);
    assert_int_equal(gpu_parity_create(&cfg, &pc, NULL, 0), GPU_OK);
    print_message("  auto: %s (%s)\n",
                  gpu_parity_backend_name(gpu_parity_backend(pc)),
                  gpu_parity_backend_why(pc));
    assert_int_equal(gpu_parity_backend(pc),
                     cuda_here ? GPU_PARITY_BACKEND_CUDA
                               : GPU_PARITY_BACKEND_CPU);
    assert_true(strlen(gpu_parity_backend_why(pc)) > 0);
    gpu_parity_destroy(pc);

    enum gpu_parity_backend be;
    assert_int_equal(gpu_parity_backend_parse("cuda", &be), GPU_OK);
    assert_int_equal(be, GPU_PARITY_BACKEND_CUDA);
    assert_int_equal(gpu_parity_backend_parse("gpu", &be), GPU_ERR_INVALID);
}

/* ---- Packet groups. ---- */

static void
test_packets(void **state)
{
    unsigned int groups = 0, rebuilt = 0;

    (void) state;
    for (int b = 0; b < 2 * n_backends; b++) {
        struct rng r = rng_for(8, b);
        /* Both codes, the GF8 code on the CPU with and without ISA-L. */
        bool gf8 = b >= n_backends;

        for (int g = 0; g < 60; g++) {
            unsigned int k = 1 + rng_below(&r, 12), m = 1 + rng_below(&r, 4);
            unsigned int w = min_w(k + m) + rng_below(&r, 2);
            unsigned int ps = 8 << rng_below(&r, 2), n = k + m;
            unsigned int unit;
            struct gpu_parity *pc;
            uint8_t *pkts[GPU_PARITY_MAX_CHUNKS], *par[GPU_PARITY_MAX_CHUNKS];
            uint8_t *out[GPU_PARITY_MAX_CHUNKS];
            const uint8_t *rx[GPU_PARITY_MAX_CHUNKS];
            size_t lens[GPU_PARITY_MAX_CHUNKS], rx_lens[GPU_PARITY_MAX_CHUNKS];
            size_t out_lens[GPU_PARITY_MAX_CHUNKS], cs, max_len = 0, room;
            unsigned int lost = 0;
            int error;

            if (w > GPU_PARITY_MAX_W) {
                w = GPU_PARITY_MAX_W;
            }
            pc = (gf8 ? make_coder_gf8(k, m, ps, backends[b % n_backends],
                                       g % 2)
                  : make_coder(k, m, w, ps, backends[b]));
            unit = gf8 ? ps : w * ps;
            for (unsigned int i = 0; i < k; i++) {
                /* Empty, tiny, and up to jumbo-ish. */
                lens[i] = rng_below(&r, 4) ? rng_below(&r, 1600)
                                           : rng_below(&r, 3) * 4500;
                pkts[i] = malloc(lens[i] + 1);
                fill_random(&r, pkts[i], lens[i]);
                max_len = lens[i] > max_len ? lens[i] : max_len;
            }
            room = gpu_parity_pkt_chunk_size(pc, max_len);
            assert_true(room >= max_len + 2);
            assert_int_equal(room % unit, 0);
            assert_true(room < max_len + 2 + unit);
            for (unsigned int j = 0; j < m; j++) {
                par[j] = malloc(room);
            }
            assert_int_equal(gpu_parity_pkt_encode(pc,
                                                   (const uint8_t *const *)
                                                   pkts, lens, par,
                                                   room - 1, &cs),
                             GPU_PARITY_ERR_PACKET);
            assert_int_equal(gpu_parity_pkt_encode(pc,
                                                   (const uint8_t *const *)
                                                   pkts, lens, par, room,
                                                   &cs), GPU_OK);
            assert_int_equal(cs, room);

            /* Lose up to m + 1 packets of the group. */
            unsigned int n_lose = rng_below(&r, m + 2);
            for (unsigned int i = 0; i < n; i++) {
                rx[i] = i < k ? pkts[i] : par[i - k];
                rx_lens[i] = i < k ? lens[i] : cs;
            }
            for (unsigned int x = 0; x < n_lose; x++) {
                unsigned int id = rng_below(&r, n);

                if (rx[id]) {
                    rx[id] = NULL;
                    lost++;
                }
            }
            for (unsigned int i = 0; i < k; i++) {
                out[i] = malloc(cs);
                out_lens[i] = 99999;
            }
            error = gpu_parity_pkt_decode(pc, rx, rx_lens, out, out_lens);
            if (lost > m) {
                assert_int_equal(error, GPU_PARITY_ERR_TOO_MANY_ERASURES);
            } else {
                assert_int_equal(error, GPU_OK);
                for (unsigned int i = 0; i < k; i++) {
                    if (rx[i]) {
                        assert_int_equal(out_lens[i], 99999);
                        continue;
                    }
                    assert_int_equal(out_lens[i], lens[i]);
                    assert_memory_equal(out[i], pkts[i], lens[i]);
                    rebuilt++;
                }
            }

            /* Parity packets of different lengths are refused. */
            if (lost <= m && m >= 2 && lost == 0) {
                rx[0] = NULL;
                rx_lens[k + 1] = cs - unit;
                assert_int_equal(gpu_parity_pkt_decode(pc, rx, rx_lens, out,
                                                       out_lens),
                                 GPU_PARITY_ERR_PACKET);
            }
            for (unsigned int i = 0; i < k; i++) {
                free(pkts[i]);
                free(out[i]);
            }
            for (unsigned int j = 0; j < m; j++) {
                free(par[j]);
            }
            gpu_parity_destroy(pc);
            groups++;
        }
    }
    print_message("  %u packet groups, %u packets rebuilt\n", groups,
                  rebuilt);
}

/* Several groups of one code laid side by side (gpu-parity.h) and coded
 * in one asynchronous call give every group the parity it gets alone, and
 * one rebuild call gives back every group's lost packets: what
 * fec_encode and fec_decode gather their groups into.  Every other group
 * is written in place over stale bytes (gpu_parity_pkt_chunk_finish()),
 * as fec_encode writes them. */
/* Fills 'G' groups of the coder's k random packets (up to 1,500 bytes,
 * each group its own lengths, so its own chunk size; one in five empty
 * where 'empties', as a short group's missing ones), laid side by side
 * at 'off' with chunk sizes 'cs', and codes each alone into 'alone' (the
 * oracle).  Returns the call's chunk size, the sum of 'cs'. */
static size_t
random_groups(struct rng *r, struct gpu_parity *pc, unsigned int G,
              bool empties, uint8_t *pkts[][GPU_PARITY_MAX_CHUNKS],
              size_t lens[][GPU_PARITY_MAX_CHUNKS], size_t *cs, size_t *off,
              uint8_t *alone[][GPU_PARITY_MAX_CHUNKS])
{
    struct gpu_parity_config cfg;
    size_t total = 0, got;

    gpu_parity_get_config(pc, &cfg);
    for (unsigned int g = 0; g < G; g++) {
        size_t max_len = 0;

        for (unsigned int i = 0; i < cfg.k; i++) {
            lens[g][i] = (!empties || rng_below(r, 5)
                          ? rng_below(r, 1 + rng_below(r, 1500)) : 0);
            pkts[g][i] = malloc(lens[g][i] + 1);
            fill_random(r, pkts[g][i], lens[g][i]);
            max_len = lens[g][i] > max_len ? lens[g][i] : max_len;
        }
        cs[g] = gpu_parity_pkt_chunk_size(pc, max_len);
        off[g] = total;
        total += cs[g];
        for (unsigned int j = 0; j < cfg.m; j++) {
            alone[g][j] = malloc(cs[g]);
        }
        assert_int_equal(gpu_parity_pkt_encode(
                             pc, (const uint8_t *const *) pkts[g], lens[g],
                             alone[g], cs[g], &got), GPU_OK);
        assert_int_equal(got, cs[g]);
    }
    return total;
}

/* A call's 'n' chunks of 'total' bytes in one pinned block (returned,
 * for gpu_host_free()), at 'chunks', full of stale bytes. */
static uint8_t *
stale_chunks(unsigned int n, size_t total, uint8_t **chunks)
{
    uint8_t *mem = gpu_host_alloc(n * total);

    assert_non_null(mem);
    for (unsigned int i = 0; i < n; i++) {
        chunks[i] = mem + (size_t) i * total;
    }
    memset(mem, 0x5a, n * total);
    return mem;
}

static void
test_groups_side_by_side(void **state)
{
    unsigned int calls = 0, n_groups = 0;

    (void) state;
    for (int b = 0; b < n_backends; b++) {
        struct rng r = rng_for(9, b);

        for (int c = 0; c < 40; c++) {
            unsigned int k = 1 + rng_below(&r, 12), m = 1 + rng_below(&r, 4);
            unsigned int w = min_w(k + m), ps = 8, n = k + m;
            unsigned int G = 1 + rng_below(&r, 9);
            struct gpu_parity *pc = make_coder(k, m, w, ps, backends[b]);
            uint8_t *pkts[16][GPU_PARITY_MAX_CHUNKS];
            size_t lens[16][GPU_PARITY_MAX_CHUNKS], cs[16], off[16];
            uint8_t *alone[16][GPU_PARITY_MAX_CHUNKS];
            uint8_t *chunks[GPU_PARITY_MAX_CHUNKS];
            struct gpu_parity_batch *batch;
            size_t total = 0;
            int erasures[GPU_PARITY_MAX_CHUNKS];
            unsigned int n_erased = 0;
            uint8_t *mem;

            total = random_groups(&r, pc, G, false, pkts, lens, cs, off,
                                  alone);
            /* Stale bytes where the chunks go, as in a reused call:
             * every group's padding must still code as zeros. */
            mem = stale_chunks(n, total, chunks);
            for (unsigned int g = 0; g < G; g++) {
                for (unsigned int i = 0; i < k; i++) {
                    uint8_t *chunk = chunks[i] + off[g];

                    if (g % 2) {
                        /* Written in place, as fec_encode does. */
                        memcpy(chunk + GPU_PARITY_PKT_HLEN, pkts[g][i],
                               lens[g][i]);
                        gpu_parity_pkt_chunk_finish(chunk, cs[g],
                                                    lens[g][i]);
                    } else {
                        gpu_parity_pkt_to_chunk(chunk, cs[g], pkts[g][i],
                                                lens[g][i]);
                    }
                }
            }
            assert_int_equal(gpu_parity_batch_create(pc, total, &batch),
                             GPU_OK);
            assert_int_equal(gpu_parity_encode_submit(
                                 batch, NULL,
                                 (const uint8_t *const *) chunks,
                                 chunks + k, total), GPU_OK);
            assert_int_equal(gpu_parity_wait(batch), GPU_OK);
            for (unsigned int g = 0; g < G; g++) {
                for (unsigned int j = 0; j < m; j++) {
                    assert_memory_equal(chunks[k + j] + off[g], alone[g][j],
                                        cs[g]);
                }
            }

            /* Every group loses the same chunks, up to m, data or parity:
             * one call rebuilds them all. */
            for (unsigned int i = 0; i < n && n_erased < m; i++) {
                if (!rng_below(&r, 3)) {
                    erasures[n_erased++] = i;
                    memset(chunks[i], 0xa5, total);
                }
            }
            assert_int_equal(gpu_parity_decode_submit(batch, NULL, chunks,
                                                      chunks + k, erasures,
                                                      n_erased, total),
                             GPU_OK);
            assert_int_equal(gpu_parity_wait(batch), GPU_OK);
            for (unsigned int g = 0; g < G; g++) {
                for (unsigned int i = 0; i < k; i++) {
                    const uint8_t *chunk = chunks[i] + off[g];
                    int len = gpu_parity_pkt_from_chunk(chunk, cs[g]);

                    assert_int_equal(len, lens[g][i]);
                    assert_memory_equal(chunk + 2, pkts[g][i], len);
                    free(pkts[g][i]);
                }
                for (unsigned int j = 0; j < m; j++) {
                    assert_memory_equal(chunks[k + j] + off[g], alone[g][j],
                                        cs[g]);
                    free(alone[g][j]);
                }
            }
            gpu_parity_batch_destroy(batch);
            gpu_host_free(mem);
            gpu_parity_destroy(pc);
            calls++;
            n_groups += G;
        }
    }
    print_message("  %u calls of %u groups side by side\n", calls,
                  n_groups);
}

/* ---- Packet groups padded and delivered by the coder. ---- */

/* Where parity packets go in test_pkt_groups: an arena of guard bytes
 * with the destinations at odd offsets, registered with the device where
 * there is one, so that its kernel writes them in place. */
#define PKT_ARENA_BYTES (4u << 20)
#define PKT_GUARD 0xee

static void
test_pkt_groups(void **state)
{
    uint8_t *arena = aligned_alloc(4096, PKT_ARENA_BYTES);
    bool device_here = gpu_device_count(NULL) > 0;
    bool registered = false;
    unsigned int calls = 0, in_place = 0, refused = 0, by_device = 0;

    (void) state;
    assert_non_null(arena);
    if (cuda_here && gpu_host_register(arena, PKT_ARENA_BYTES, 0)
                     == GPU_OK) {
        registered = true;
    }
    for (int b = 0; b < n_backends; b++) {
        struct rng r = rng_for(21, b);

        for (int c = 0; c < 60; c++) {
            bool gf8 = c % 2;
            unsigned int k = 1 + rng_below(&r, 12), m = 1 + rng_below(&r, 4);
            unsigned int n = k + m, G = 1 + rng_below(&r, 9);
            int mode = c % 3;   /* 0: no destinations; 1: heap; 2: arena. */
            struct gpu_parity_config pcfg;

            gpu_parity_config_init(&pcfg, k, m);
            pcfg.packetsize = 8;
            pcfg.backend = backends[b];
            if (gf8) {
                pcfg.code = GPU_PARITY_CODE_GF8;
            } else {
                pcfg.w = min_w(n);
            }
            /* Half the coders' calls launched by the device where they
             * go as the batch's graph (fec_encode's launch=device). */
            pcfg.device_launch = (c / 3) % 2;

            struct gpu_parity *pc = make_coder_cfg(&pcfg);
            uint8_t *pkts[9][GPU_PARITY_MAX_CHUNKS];
            size_t lens[9][GPU_PARITY_MAX_CHUNKS], cs[9], off[9];
            uint8_t *alone[9][GPU_PARITY_MAX_CHUNKS];
            uint8_t *chunks[GPU_PARITY_MAX_CHUNKS];
            uint8_t *dst[9 * 4], *heap = NULL, *dst_mem;
            struct gpu_parity_batch *batch;
            struct gpu_parity_stats st0, st1;
            size_t total = 0, dst_used = 0;
            uint8_t *mem;

            /* Empty packets too: a short group's missing ones. */
            total = random_groups(&r, pc, G, true, pkts, lens, cs, off,
                                  alone);
            /* Only the packets and their lengths are written: the coder
             * must pad with zeros. */
            mem = stale_chunks(n, total, chunks);
            for (unsigned int g = 0; g < G; g++) {
                for (unsigned int i = 0; i < k; i++) {
                    uint8_t *chunk = chunks[i] + off[g];

                    memcpy(chunk + GPU_PARITY_PKT_HLEN, pkts[g][i],
                           lens[g][i]);
                    gpu_parity_pkt_chunk_head(chunk, lens[g][i]);
                }
            }
            if (mode == 1) {
                heap = malloc(total * m + G * m * 16);
                assert_non_null(heap);
            }
            dst_mem = mode == 1 ? heap : arena;
            if (mode) {
                memset(dst_mem, PKT_GUARD,
                       mode == 1 ? total * m + G * m * 16 : PKT_ARENA_BYTES);
                for (unsigned int g = 0; g < G; g++) {
                    for (unsigned int j = 0; j < m; j++) {
                        /* Any alignment, with guard bytes between. */
                        dst_used += 1 + rng_below(&r, 15);
                        dst[g * m + j] = dst_mem + dst_used;
                        dst_used += cs[g];
                    }
                }
            }
            assert_int_equal(gpu_parity_batch_create(pc, total, &batch),
                             GPU_OK);

            /* A length past its chunk is refused, nothing written. */
            if (c % 5 == 4) {
                unsigned int g = rng_below(&r, G), i = rng_below(&r, k);
                uint8_t *chunk = chunks[i] + off[g];

                gpu_parity_get_stats(pc, &st0);
                gpu_parity_pkt_chunk_head(chunk, cs[g] - 1);
                assert_int_equal(gpu_parity_pkt_encode_submit(
                                     batch, NULL, chunks, chunks + k, cs, G,
                                     mode ? dst : NULL),
                                 GPU_PARITY_ERR_PACKET);
                gpu_parity_get_stats(pc, &st1);
                assert_int_equal(st1.n_refused, st0.n_refused + 1);
                for (size_t x = 0; mode && x < dst_used + 1; x++) {
                    assert_int_equal(dst_mem[x], PKT_GUARD);
                }
                gpu_parity_pkt_chunk_head(chunk, lens[g][i]);
                refused++;
            }

            bool sync = c % 4 == 3;

            if (sync) {
                /* The synchronous call (a fallback's). */
                assert_int_equal(gpu_parity_pkt_encode_groups(
                                     pc, chunks, chunks + k, cs, G,
                                     mode ? dst : NULL), GPU_OK);
            } else {
                assert_int_equal(gpu_parity_pkt_encode_submit(
                                     batch, NULL, chunks, chunks + k, cs, G,
                                     mode ? dst : NULL), GPU_OK);
                assert_int_equal(gpu_parity_wait(batch), GPU_OK);
            }
            for (unsigned int g = 0; g < G; g++) {
                for (unsigned int j = 0; j < m; j++) {
                    const uint8_t *got_parity = (mode ? dst[g * m + j]
                                                 : chunks[k + j] + off[g]);

                    assert_memory_equal(got_parity, alone[g][j], cs[g]);
                }
            }
            if (mode) {
                /* Nothing written outside the destinations. */
                size_t x = 0;

                for (unsigned int d = 0; d < G * m; d++) {
                    for (; dst_mem + x < dst[d]; x++) {
                        assert_int_equal(dst_mem[x], PKT_GUARD);
                    }
                    x += cs[d / m];
                }
                assert_int_equal(dst_mem[x], PKT_GUARD);
            }
            /* The device writes the destinations itself exactly where it
             * can: registered memory on a device, any in the emulator. */
            bool expect = (backends[b] == GPU_PARITY_BACKEND_CUDA && mode
                           && (!device_here || (mode == 2 && registered)));

            if (!sync) {
                assert_int_equal(gpu_parity_batch_wrote_in_place(batch),
                                 expect);
                in_place += expect;
            }

            /* A call in place on a device goes as its batch's graph
             * (the synchronous call's too, from the coder's pool): the
             * device launches it if the coder says so (a scheduler for
             * the batch is always to be had here, one batch at a time),
             * else none does. */
            struct gpu_parity_stats stl;
            bool launched = expect && device_here && pcfg.device_launch;

            gpu_parity_get_stats(pc, &stl);
            assert_int_equal(stl.n_device_launches, launched);
            by_device += launched;
            for (unsigned int g = 0; g < G; g++) {
                for (unsigned int i = 0; i < k; i++) {
                    free(pkts[g][i]);
                }
                for (unsigned int j = 0; j < m; j++) {
                    free(alone[g][j]);
                }
            }
            gpu_parity_batch_destroy(batch);
            gpu_host_free(mem);
            free(heap);
            gpu_parity_destroy(pc);
            calls++;
        }
    }
    if (registered) {
        assert_int_equal(gpu_host_unregister(arena), GPU_OK);
    }
    free(arena);
    print_message("  %u calls, %u written in place by the device%s, %u "
                  "launched by it, %u refused\n", calls, in_place,
                  registered || !cuda_here ? ""
                  : device_here ? " (arena not registered)" : " (emulated)",
                  by_device, refused);
}

/* ---- The GF8 code against a plain GF(2^8) product, and ISA-L. ---- */

/* GF(2^8) with ISA-L's polynomial 0x11d, bit by bit. */
static uint8_t
ref_gf8_mul(uint8_t a, uint8_t b)
{
    unsigned int p = 0, x = a;

    for (int bit = 0; bit < 8; bit++) {
        if (b & (1u << bit)) {
            p ^= x;
        }
        x <<= 1;
        if (x & 0x100) {
            x ^= 0x11d;
        }
    }
    return p;
}

static uint8_t
ref_gf8_inv(uint8_t a)
{
    for (unsigned int x = 1; x < 256; x++) {
        if (ref_gf8_mul(a, x) == 1) {
            return x;
        }
    }
    fail_msg("%u has no inverse", a);
    return 0;
}

/* The parity by definition: ISA-L's gf_gen_cauchy1_matrix() rows
 * c[j][i] = 1 / ((k + j) ^ i), then a matrix product byte by byte. */
static void
ref_gf8_encode(unsigned int k, unsigned int m, uint8_t *const *data,
               uint8_t *const *parity, size_t size)
{
    for (unsigned int j = 0; j < m; j++) {
        memset(parity[j], 0, size);
        for (unsigned int i = 0; i < k; i++) {
            uint8_t c = ref_gf8_inv((k + j) ^ i);

            for (size_t x = 0; x < size; x++) {
                parity[j][x] ^= ref_gf8_mul(c, data[i][x]);
            }
        }
    }
}

static void
check_gf8_code(struct rng *r, enum gpu_parity_backend be, bool portable,
               bool large)
{
    unsigned int m = rng_below(r, 4) ? 1 + rng_below(r, 6)
                                     : 1 + rng_below(r, 40);
    unsigned int k = rng_below(r, 4) ? 1 + rng_below(r, 24)
                                     : 1 + rng_below(r, 256 - m);
    unsigned int ps = random_packetsize(r);
    size_t size = large ? ((1u << 20) / k / ps + 1) * ps
                        : ps * (1 + rng_below(r, 40));
    struct gpu_parity *pc = make_coder_gf8(k, m, ps, be, portable);
    const char *impl = (be == GPU_PARITY_BACKEND_CUDA ? "CUDA"
                        : portable || !gpu_parity_isal_built() ? "portable"
                        : "ISA-L");
    const int *mat = gpu_parity_matrix(pc);
    struct stripe s, ref;
    uint8_t *saved;
    int ids[GPU_PARITY_MAX_CHUNKS];
    unsigned int ne = rng_below(r, 3) ? 1 + rng_below(r, m) : m;

    assert_string_equal(gpu_parity_impl(pc), impl);
    assert_null(gpu_parity_bitmatrix(pc));
    for (unsigned int j = 0; j < m; j++) {
        for (unsigned int i = 0; i < k; i++) {
            assert_int_equal(mat[j * k + i], ref_gf8_inv((k + j) ^ i));
        }
    }

    stripe_init(&s, k, m, size);
    stripe_init(&ref, k, m, size);
    fill_random(r, s.mem, (size_t) (k + m) * size);
    memcpy(ref.mem, s.mem, (size_t) k * size);
    assert_int_equal(gpu_parity_encode(pc, (const uint8_t *const *) s.data,
                                       s.parity, size), GPU_OK);
    ref_gf8_encode(k, m, ref.data, ref.parity, size);
    if (memcmp(s.mem, ref.mem, (size_t) (k + m) * size)) {
        fail_msg("gf8 k=%u m=%u ps=%u size=%zu on %s (%s): parity differs "
                 "from the reference (GPU_TEST_SEED=0x%016" PRIx64 ")", k, m,
                 ps, size, gpu_parity_backend_name(be), impl, master_seed);
    }
#ifdef HAVE_ISAL
    {
        /* ISA-L's own matrix and encoder. */
        uint8_t *a = malloc((size_t) (k + m) * k);
        uint8_t *tbls = malloc((size_t) 32 * k * m);

        gf_gen_cauchy1_matrix(a, k + m, k);
        ec_init_tables(k, m, &a[(size_t) k * k], tbls);
        ec_encode_data(size, k, m, tbls, ref.data, ref.parity);
        if (memcmp(s.mem, ref.mem, (size_t) (k + m) * size)) {
            fail_msg("gf8 k=%u m=%u ps=%u size=%zu on %s (%s): parity "
                     "differs from ISA-L's (GPU_TEST_SEED=0x%016" PRIx64
                     ")", k, m, ps, size, gpu_parity_backend_name(be), impl,
                     master_seed);
        }
        free(a);
        free(tbls);
    }
#endif

    saved = malloc((size_t) (k + m) * size);
    memcpy(saved, s.mem, (size_t) (k + m) * size);
    for (unsigned int j = 0; j < ne; j++) {
        unsigned int id;
        bool again;

        do {
            id = rng_below(r, k + m);
            again = false;
            for (unsigned int x = 0; x < j; x++) {
                again |= ids[x] == (int) id;
            }
        } while (again);
        ids[j] = id;
        memset(chunk(&s, id), 0x5a, size);
    }
    assert_int_equal(gpu_parity_decode(pc, s.data, s.parity, ids, ne, size),
                     GPU_OK);
    if (memcmp(s.mem, saved, (size_t) (k + m) * size)) {
        fail_msg("gf8 k=%u m=%u ps=%u size=%zu on %s (%s): %u erasures not "
                 "rebuilt (GPU_TEST_SEED=0x%016" PRIx64 ")", k, m, ps, size,
                 gpu_parity_backend_name(be), impl, ne, master_seed);
    }

    /* Refusals: a size not a multiple of packetsize, too many erasures. */
    if (size > ps) {
        assert_int_equal(gpu_parity_encode(pc, (const uint8_t *const *)
                                           s.data, s.parity, size - 8),
                         ps == 8 ? GPU_OK : GPU_PARITY_ERR_SIZE);
    }
    if (k + m > m + 1) {
        for (unsigned int j = 0; j <= m; j++) {
            ids[j] = j;
        }
        assert_int_equal(gpu_parity_decode(pc, s.data, s.parity, ids, m + 1,
                                           size),
                         GPU_PARITY_ERR_TOO_MANY_ERASURES);
    }
    struct gpu_parity_stats st;
    gpu_parity_get_stats(pc, &st);
    assert_int_equal(st.n_fallbacks, 0);
    free(saved);
    stripe_destroy(&s);
    stripe_destroy(&ref);
    gpu_parity_destroy(pc);
}

static void
test_gf8_oracle(void **state)
{
    unsigned int n = 0;

    (void) state;
    printf("  GF8 oracle: the reference product%s\n",
           gpu_parity_isal_built() ? " and ISA-L" : " (no ISA-L here)");
    for (int b = 0; b < n_backends; b++) {
        /* The CPU with ISA-L (where built in) and with the portable
         * code; CUDA once. */
        for (int portable = 0; portable < 2; portable++) {
            struct rng r = rng_for(20 + b, portable);

            if (portable && backends[b] == GPU_PARITY_BACKEND_CUDA) {
                continue;
            }
            for (int i = 0; i < 30; i++) {
                check_gf8_code(&r, backends[b], portable, i < 2);
                n++;
            }
        }
    }

    /* Parameters: k + m up to 256 whatever w says; unknown codes. */
    struct gpu_parity_config cfg;
    struct gpu_parity *pc = NULL;
    char err[256];

    gpu_parity_config_init(&cfg, 200, 57);
    cfg.code = GPU_PARITY_CODE_GF8;
    cfg.backend = GPU_PARITY_BACKEND_CPU;
    assert_int_equal(gpu_parity_create(&cfg, &pc, err, sizeof err),
                     GPU_PARITY_ERR_CODE);
    gpu_parity_config_init(&cfg, 200, 56);
    cfg.code = GPU_PARITY_CODE_GF8;
    cfg.w = 3;
    cfg.backend = GPU_PARITY_BACKEND_CPU;
    assert_int_equal(gpu_parity_create(&cfg, &pc, err, sizeof err), GPU_OK);
    gpu_parity_destroy(pc);
    cfg.code = (enum gpu_parity_code) 7;
    assert_int_equal(gpu_parity_create(&cfg, &pc, err, sizeof err),
                     GPU_ERR_INVALID);

    enum gpu_parity_code code;
    assert_int_equal(gpu_parity_code_parse("gf8", &code), GPU_OK);
    assert_int_equal(code, GPU_PARITY_CODE_GF8);
    assert_int_equal(gpu_parity_code_parse("bitmatrix", &code), GPU_OK);
    assert_int_equal(code, GPU_PARITY_CODE_BITMATRIX);
    assert_int_equal(gpu_parity_code_parse("isal", &code), GPU_ERR_INVALID);
    assert_string_equal(gpu_parity_code_name(GPU_PARITY_CODE_GF8), "gf8");
    print_message("  %u GF8 codes encoded and decoded\n", n);
}

/* A random erasure list of up to m ids, distinct, in random order. */
static size_t
random_erasures(struct rng *r, unsigned int k, unsigned int m,
                int *erasures)
{
    uint8_t taken[GPU_PARITY_MAX_CHUNKS] = { 0 };
    size_t n = rng_below(r, m + 1);

    for (size_t e = 0; e < n; e++) {
        unsigned int id;

        do {
            id = rng_below(r, k + m);
        } while (taken[id]);
        taken[id] = 1;
        erasures[e] = id;
    }
    return n;
}

/* A decode with segments, each group its own erasures (and so its own
 * decoding matrix), rebuilds every segment as the synchronous
 * gpu_parity_decode() rebuilds it alone: the oracle is a copy of each
 * segment decoded by itself.  With data_only the erased parity is left as
 * it was; bytes between and after the segments are never written; a bad
 * segment refuses the whole call before anything is written.  Random
 * codes, packetsizes, gaps, and erasures of up to m chunks, with the
 * asynchronous and the synchronous entry points; the bitmatrix code
 * first, then the GF8 code (ISA-L or portable on the CPU), whose
 * gpu_parity_decode() test_gf8_oracle checks against a reference. */
static void
test_decode_segments(void **state)
{
    unsigned int calls = 0, n_segs_total = 0, n_refused = 0;

    (void) state;
    for (int b = 0; b < n_backends; b++) {
        struct rng r = rng_for(10, b);

        for (int c = 0; c < 90; c++) {
            bool gf8 = c >= 60;
            unsigned int k, m, w;

            random_code(&r, 20, 1, &k, &m, &w);
            unsigned int ps = rng_below(&r, 2) ? 8 : random_packetsize(&r);
            unsigned int n = k + m, S = 1 + rng_below(&r, 24);
            bool portable = (gf8 && backends[b] != GPU_PARITY_BACKEND_CUDA
                             && rng_below(&r, 2));
            size_t unit = (size_t) (gf8 ? 1 : w) * ps, total = 0;
            struct gpu_parity *pc = (gf8 ? make_coder_gf8(k, m, ps,
                                                          backends[b],
                                                          portable)
                                     : make_coder(k, m, w, ps, backends[b]));
            struct gpu_parity_segment segs[24];
            int erasures[24][GPU_PARITY_MAX_CHUNKS];
            uint8_t *chunks[GPU_PARITY_MAX_CHUNKS];
            uint8_t *orig, *got, *want;
            bool sync = rng_below(&r, 4) == 0;
            struct gpu_parity_batch *batch;

            for (unsigned int g = 0; g < S; g++) {
                /* A gap of untouched bytes before some segments. */
                total += unit * rng_below(&r, 2);
                segs[g].offset = total;
                segs[g].size = unit * (1 + rng_below(&r, 6));
                segs[g].erasures = erasures[g];
                segs[g].n_erasures = random_erasures(&r, k, m, erasures[g]);
                segs[g].data_only = rng_below(&r, 2);
                total += segs[g].size;
            }
            total += unit * rng_below(&r, 2);

            /* A valid stripe: random data, its parity. */
            orig = malloc(n * total);
            got = gpu_host_alloc(n * total);
            want = malloc(n * total);
            assert_non_null(orig);
            assert_non_null(got);
            assert_non_null(want);
            for (unsigned int i = 0; i < n; i++) {
                chunks[i] = orig + (size_t) i * total;
            }
            fill_random(&r, orig, k * total);
            assert_int_equal(gpu_parity_encode(pc,
                                               (const uint8_t *const *)
                                               chunks, chunks + k, total),
                             GPU_OK);

            /* The oracle: each segment alone through gpu_parity_decode(),
             * its erased chunks garbage first; with data_only its erased
             * parity is then put back as the garbage it was. */
            memcpy(got, orig, n * total);
            for (unsigned int g = 0; g < S; g++) {
                for (size_t e = 0; e < segs[g].n_erasures; e++) {
                    fill_random(&r, got + (size_t) erasures[g][e] * total
                                    + segs[g].offset, segs[g].size);
                }
            }
            memcpy(want, got, n * total);
            for (unsigned int g = 0; g < S; g++) {
                uint8_t *seg[GPU_PARITY_MAX_CHUNKS];
                uint8_t *keep = malloc(n * segs[g].size);

                for (unsigned int i = 0; i < n; i++) {
                    seg[i] = want + (size_t) i * total + segs[g].offset;
                    memcpy(keep + (size_t) i * segs[g].size, seg[i],
                           segs[g].size);
                }
                assert_int_equal(gpu_parity_decode(pc, seg, seg + k,
                                                   erasures[g],
                                                   segs[g].n_erasures,
                                                   segs[g].size), GPU_OK);
                for (unsigned int i = k; i < n && segs[g].data_only; i++) {
                    memcpy(seg[i], keep + (size_t) i * segs[g].size,
                           segs[g].size);
                }
                free(keep);
            }

            for (unsigned int i = 0; i < n; i++) {
                chunks[i] = got + (size_t) i * total;
            }
            if (sync) {
                assert_int_equal(gpu_parity_decode_segments(pc, chunks,
                                                            chunks + k,
                                                            segs, S),
                                 GPU_OK);
            } else {
                assert_int_equal(gpu_parity_batch_create(pc, total,
                                                         &batch), GPU_OK);
                /* A segment with too many erasures, or out of order,
                 * refuses the call and writes nothing. */
                if (S > 1 && rng_below(&r, 2)) {
                    struct gpu_parity_segment bad[24];
                    int many[GPU_PARITY_MAX_CHUNKS];
                    unsigned int x = rng_below(&r, S);

                    memcpy(bad, segs, S * sizeof *segs);
                    if (rng_below(&r, 2)) {
                        for (unsigned int i = 0; i <= m; i++) {
                            many[i] = i;
                        }
                        bad[x].erasures = many;
                        bad[x].n_erasures = m + 1;
                    } else {
                        bad[x].offset = bad[x ? x - 1 : 1].offset;
                    }
                    assert_int_not_equal(
                        gpu_parity_decode_submit_segments(
                            batch, NULL, chunks, chunks + k, bad, S),
                        GPU_OK);
                    n_refused++;
                }
                assert_int_equal(gpu_parity_decode_submit_segments(
                                     batch, NULL, chunks, chunks + k,
                                     segs, S), GPU_OK);
                assert_int_equal(gpu_parity_wait(batch), GPU_OK);
                gpu_parity_batch_destroy(batch);
            }
            for (unsigned int i = 0; i < n; i++) {
                if (memcmp(got + (size_t) i * total,
                           want + (size_t) i * total, total)) {
                    fail_msg("%s %s k=%u m=%u w=%u ps=%u %u segments: "
                             "chunk %u differs from each segment decoded "
                             "alone (GPU_TEST_SEED=0x%016" PRIx64 ")",
                             gpu_parity_backend_name(backends[b]),
                             gf8 ? gpu_parity_impl(pc) : "bitmatrix", k, m,
                             w, ps, S, i, master_seed);
                }
            }
            /* Coded where asked, not by a fallback that would hide a
             * broken device path. */
            struct gpu_parity_stats st;
            gpu_parity_get_stats(pc, &st);
            assert_int_equal(st.n_fallbacks, 0);
            free(orig);
            gpu_host_free(got);
            free(want);
            gpu_parity_destroy(pc);
            calls++;
            n_segs_total += S;
        }
    }
    print_message("  %u calls, %u segments, %u bad calls refused\n", calls,
                  n_segs_total, n_refused);
}

/* ---- Host layouts of a submission's chunks. ---- */

enum layout {
    LAYOUT_PACKED,              /* Chunk i at i * size: one pitch. */
    LAYOUT_PADDED,              /* Chunk i at i * (size + pad). */
    LAYOUT_REVERSED,            /* Chunk i at (n - 1 - i) * size: none. */
    LAYOUT_SPLIT,               /* Inputs packed, outputs reversed. */
    N_LAYOUTS
};

static const char *const layout_names[N_LAYOUTS] = {
    "packed", "padded", "reversed", "split"
};

/* Points chunks[0 .. n) into 'mem' (n * pitch bytes) as 'layout' places
 * them; the outputs of an encode begin at chunk 'first_out'. */
static void
layout_chunks(enum layout layout, uint8_t *mem, size_t pitch,
              unsigned int n, unsigned int first_out, uint8_t **chunks)
{
    for (unsigned int i = 0; i < n; i++) {
        unsigned int slot = i;

        if (layout == LAYOUT_REVERSED) {
            slot = n - 1 - i;
        } else if (layout == LAYOUT_SPLIT && i >= first_out) {
            slot = first_out + (n - 1 - i);
        }
        chunks[i] = mem + (size_t) slot * pitch;
    }
}

/* Whether 'layout' puts an encode's inputs (else its outputs) at one
 * pitch. */
static bool
layout_strided(enum layout layout, bool inputs)
{
    return layout == LAYOUT_PACKED || layout == LAYOUT_PADDED
           || (layout == LAYOUT_SPLIT && inputs);
}

/* Runtime calls of an encode on CUDA below SLICE_BYTES a chunk with one
 * launch: cudaSetDevice, the inputs' copies (one 2D copy when they lie at
 * one pitch), the launch, the outputs' copies, the done event. */
static uint64_t
encode_calls(enum layout layout, unsigned int k, unsigned int m)
{
    uint64_t in = k < 2 || !layout_strided(layout, true) ? k : 1;
    uint64_t out = m < 2 || !layout_strided(layout, false) ? m : 1;

    return 1 + in + 1 + out + 1;
}

static uint64_t
runtime_calls(struct gpu_parity *pc)
{
    struct gpu_parity_stats st;

    gpu_parity_get_stats(pc, &st);
    return st.n_runtime_calls;
}

/* Encodes and decodes (with segments) of chunks in several host layouts,
 * packed, padded, reversed and mixed, with the asynchronous API, give what
 * the synchronous calls on the CPU backend give for the same chunks
 * packed: whatever way the CUDA backend copies them (one 2D copy at a
 * pitch or one copy per chunk).  On CUDA an encode's runtime calls are
 * counted exactly: one copy each way when the chunks lie at a pitch. */
static void
test_copy_layouts(void **state)
{
    unsigned int calls = 0;
    uint64_t seg_calls[N_LAYOUTS] = { 0 }, seg_subs[N_LAYOUTS] = { 0 };

    (void) state;
    for (int b = 0; b < n_backends; b++) {
        struct rng r = rng_for(11, b);
        bool cuda = backends[b] == GPU_PARITY_BACKEND_CUDA;

        for (int c = 0; c < 80; c++) {
            unsigned int k, m, w;

            random_code(&r, 24, 1, &k, &m, &w);
            unsigned int ps = random_packetsize(&r), n = k + m;
            enum layout layout = rng_below(&r, N_LAYOUTS);
            size_t unit = (size_t) w * ps;
            /* Now and then above two slices' worth a chunk (2 MB), so
             * that the sliced path copies at a pitch too. */
            size_t size = c % 20 == 19 && k + m <= 6
                          ? unit * ((2u << 20) / unit + 1)
                          : unit * (1 + rng_below(&r, 8));
            size_t pitch = size + (layout == LAYOUT_PADDED
                                   ? 16 * (1 + rng_below(&r, 4)) : 0);
            struct gpu_parity *pc = make_coder(k, m, w, ps, backends[b]);
            struct gpu_parity *ref = make_coder(k, m, w, ps,
                                                GPU_PARITY_BACKEND_CPU);
            uint8_t *mem = gpu_host_alloc(n * pitch);
            uint8_t *want = malloc(n * size);
            uint8_t *chunks[GPU_PARITY_MAX_CHUNKS];
            uint8_t *packed[GPU_PARITY_MAX_CHUNKS];
            struct gpu_parity_segment segs[4];
            int erasures[4][GPU_PARITY_MAX_CHUNKS];
            unsigned int S = 1 + rng_below(&r, 4);
            struct gpu_parity_batch *batch;
            uint64_t before;

            assert_non_null(mem);
            assert_non_null(want);
            layout_chunks(layout, mem, pitch, n, k, chunks);
            for (unsigned int i = 0; i < n; i++) {
                packed[i] = want + (size_t) i * size;
            }

            /* Encode. */
            fill_random(&r, want, k * size);
            for (unsigned int i = 0; i < n; i++) {
                memcpy(chunks[i], packed[i], size);
            }
            assert_int_equal(gpu_parity_encode(ref,
                                               (const uint8_t *const *)
                                               packed, packed + k, size),
                             GPU_OK);
            assert_int_equal(gpu_parity_batch_create(pc, size, &batch),
                             GPU_OK);
            before = runtime_calls(pc);
            assert_int_equal(gpu_parity_encode_submit(
                                 batch, NULL,
                                 (const uint8_t *const *) chunks,
                                 chunks + k, size), GPU_OK);
            assert_int_equal(gpu_parity_wait(batch), GPU_OK);
            if (cuda && size < (2u << 20) && k * w <= 256 && m * w <= 32
                && runtime_calls(pc) - before
                   != encode_calls(layout, k, m)) {
                fail_msg("encode k=%u m=%u w=%u ps=%u size=%zu %s: %"PRIu64
                         " runtime calls, want %"PRIu64" (seed %"PRIu64")",
                         k, m, w, ps, size, layout_names[layout],
                         runtime_calls(pc) - before,
                         encode_calls(layout, k, m), master_seed);
            }
            for (unsigned int i = 0; i < n; i++) {
                if (memcmp(chunks[i], packed[i], size)) {
                    fail_msg("encode k=%u m=%u w=%u ps=%u size=%zu %s on "
                             "%s: chunk %u differs (seed %"PRIu64")",
                             k, m, w, ps, size, layout_names[layout],
                             gpu_parity_backend_name(backends[b]), i,
                             master_seed);
                }
            }

            /* Decode with segments over the whole chunk, each its own
             * erasures (garbage in the erased bytes first). */
            for (unsigned int g = 0, off = 0; g < S; g++) {
                size_t units = size / unit;
                size_t left = units - off;

                if (!left) {
                    S = g;
                    break;
                }
                segs[g].offset = off * unit;
                segs[g].size = unit * (g == S - 1
                                       ? left : 1 + rng_below(&r, left));
                off += segs[g].size / unit;
                segs[g].erasures = erasures[g];
                segs[g].n_erasures = random_erasures(&r, k, m,
                                                     erasures[g]);
                segs[g].data_only = rng_below(&r, 2);
                for (size_t e = 0; e < segs[g].n_erasures; e++) {
                    fill_random(&r, packed[erasures[g][e]]
                                    + segs[g].offset, segs[g].size);
                }
            }
            for (unsigned int i = 0; i < n; i++) {
                memcpy(chunks[i], packed[i], size);
            }
            assert_int_equal(gpu_parity_decode_segments(ref, packed,
                                                        packed + k, segs,
                                                        S), GPU_OK);
            before = runtime_calls(pc);
            assert_int_equal(gpu_parity_decode_submit_segments(
                                 batch, NULL, chunks, chunks + k, segs, S),
                             GPU_OK);
            assert_int_equal(gpu_parity_wait(batch), GPU_OK);
            if (cuda) {
                seg_calls[layout] += runtime_calls(pc) - before;
                seg_subs[layout]++;
            }
            for (unsigned int i = 0; i < n; i++) {
                if (memcmp(chunks[i], packed[i], size)) {
                    fail_msg("decode k=%u m=%u w=%u ps=%u size=%zu %u "
                             "segments %s on %s: chunk %u differs (seed %"
                             PRIu64")", k, m, w, ps, size, S,
                             layout_names[layout],
                             gpu_parity_backend_name(backends[b]), i,
                             master_seed);
                }
            }
            gpu_parity_batch_destroy(batch);
            gpu_host_free(mem);
            free(want);
            gpu_parity_destroy(pc);
            gpu_parity_destroy(ref);
            calls++;
        }
    }
    print_message("  %u calls; CUDA runtime calls a decode with segments "
                  "(none on CPU):", calls);
    for (int l = 0; l < N_LAYOUTS; l++) {
        print_message(" %s %.1f", layout_names[l],
                      seg_subs[l] ? (double) seg_calls[l] / seg_subs[l]
                                  : 0.0);
    }
    print_message("\n");
}

int
main(void)
{
    cuda_here = gpu_parity_cuda_available();
    int chosen[2];

    master_seed = test_seed_init("test-parity");
    n_backends = test_backends_from_env("test-parity", "GPU_PARITY_BACKEND", cuda_here, GPU_PARITY_BACKEND_CPU, GPU_PARITY_BACKEND_CUDA, chosen);
    if (!n_backends) {
        return 1;
    }
    for (int i = 0; i < n_backends; i++) {
        backends[i] = chosen[i];
    }
    printf("test-parity: backends:");
    for (int i = 0; i < n_backends; i++) {
        printf(" %s", gpu_parity_backend_name(backends[i]));
    }
    printf("%s\n", cuda_here ? "" : " (no CUDA device here)");
#ifdef HAVE_JERASURE
    printf("test-parity: Jerasure oracle: yes\n");
#else
    printf("test-parity: Jerasure oracle: no (built without Jerasure; "
           "the oracle cases are skipped)\n");
#endif

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gf_field),
        cmocka_unit_test(test_matrix_oracle),
        cmocka_unit_test(test_encode_oracle),
        cmocka_unit_test(test_decode_all_patterns),
        cmocka_unit_test(test_decode_random_large),
        cmocka_unit_test(test_too_many_erasures),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_backends_identical),
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_auto_backend),
        cmocka_unit_test(test_packets),
        cmocka_unit_test(test_groups_side_by_side),
        cmocka_unit_test(test_pkt_groups),
        cmocka_unit_test(test_gf8_oracle),
        cmocka_unit_test(test_decode_segments),
        cmocka_unit_test(test_copy_layouts),
    };
    const char *filter = getenv("GPU_TEST_FILTER");
    if (filter && *filter) {
        cmocka_set_test_filter(filter);
    }
    int rc = test_run_group("test-parity", tests);
    if (rc) {
        printf("test-parity: FAILED; rerun with GPU_TEST_SEED=0x%016" PRIx64
               "\n", master_seed);
    }
    return rc;
}
