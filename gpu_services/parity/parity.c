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
 * Parity core: GF(2^w) arithmetic, the Cauchy coding matrix (the one
 * Jerasure's cauchy_good_general_coding_matrix() builds), its bitmatrix,
 * decoding plans, and the coder and batch API that dispatches to a
 * backend (parity-cpu.c, parity-cuda.cu).
 */
#include <config.h>

#include "gpu_services/parity/parity-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_ISAL
#include <isa-l.h>
#endif

const char *
gpu_parity_strerror(int status)
{
    switch (status) {
    case GPU_PARITY_ERR_CODE:
        return "bad code parameters (need k >= 1, m >= 1, 1 <= w <= 8, "
               "k + m <= 2^w)";
    case GPU_PARITY_ERR_SIZE:
        return "bad size (packetsize a multiple of 8, size a multiple of "
               "w * packetsize, within the batch)";
    case GPU_PARITY_ERR_TOO_MANY_ERASURES:
        return "more erasures than parity chunks: cannot rebuild";
    case GPU_PARITY_ERR_ERASURE_ID:
        return "erasure id out of range or repeated";
    case GPU_PARITY_ERR_PACKET:
        return "packet group cannot be coded (length or parity size)";
    default:
        return gpu_status_string(status);
    }
}

const char *
gpu_parity_backend_name(enum gpu_parity_backend b)
{
    switch (b) {
    case GPU_PARITY_BACKEND_AUTO: return "auto";
    case GPU_PARITY_BACKEND_CPU: return "cpu";
    case GPU_PARITY_BACKEND_CUDA: return "cuda";
    }
    return "unknown";
}

const char *
gpu_parity_code_name(enum gpu_parity_code code)
{
    switch (code) {
    case GPU_PARITY_CODE_BITMATRIX: return "bitmatrix";
    case GPU_PARITY_CODE_GF8: return "gf8";
    }
    return "unknown";
}

int
gpu_parity_code_parse(const char *s, enum gpu_parity_code *code)
{
    if (s && !strcmp(s, "bitmatrix")) {
        *code = GPU_PARITY_CODE_BITMATRIX;
    } else if (s && !strcmp(s, "gf8")) {
        *code = GPU_PARITY_CODE_GF8;
    } else {
        return GPU_ERR_INVALID;
    }
    return GPU_OK;
}

bool
gpu_parity_isal_built(void)
{
#ifdef HAVE_ISAL
    return true;
#else
    return false;
#endif
}

int
gpu_parity_backend_parse(const char *s, enum gpu_parity_backend *b)
{
    if (!s || !*s || !strcmp(s, "auto")) {
        *b = GPU_PARITY_BACKEND_AUTO;
    } else if (!strcmp(s, "cpu")) {
        *b = GPU_PARITY_BACKEND_CPU;
    } else if (!strcmp(s, "cuda")) {
        *b = GPU_PARITY_BACKEND_CUDA;
    } else {
        return GPU_ERR_INVALID;
    }
    return GPU_OK;
}

/* ---- GF(2^w). ----
 *
 * The primitive polynomials are gf-complete's defaults, which Jerasure 2
 * uses: the tests check every product against Jerasure's
 * galois_single_multiply().  The coding matrix is built once per coder, so
 * plain shift-and-add multiplication is fast enough and needs no tables. */
static const unsigned int gf_poly[GPU_PARITY_MAX_W + 1] = {
    0, 0x3, 0x7, 0xb, 0x13, 0x25, 0x43, 0x89, 0x11d,
};

unsigned int
gpu_parity_gf_mul(unsigned int a, unsigned int b, unsigned int w)
{
    unsigned int top = 1u << w, p = 0;

    while (b) {
        if (b & 1) {
            p ^= a;
        }
        b >>= 1;
        a <<= 1;
        if (a & top) {
            a ^= gf_poly[w];
        }
    }
    return p;
}

static unsigned int
gf_inverse(unsigned int a, unsigned int w)
{
    /* a^(2^w - 2): the multiplicative group has order 2^w - 1. */
    unsigned int r = 1, e = (1u << w) - 2;

    while (e) {
        if (e & 1) {
            r = gpu_parity_gf_mul(r, a, w);
        }
        a = gpu_parity_gf_mul(a, a, w);
        e >>= 1;
    }
    return r;
}

unsigned int
gpu_parity_gf_div(unsigned int a, unsigned int b, unsigned int w)
{
    return b ? gpu_parity_gf_mul(a, gf_inverse(b, w), w) : 0;
}

unsigned int
gpu_parity_n_ones(unsigned int e, unsigned int w)
{
    unsigned int n = 0, x;

    /* Column x of e's bitmatrix is e * 2^x. */
    for (x = 0; x < w; x++) {
        n += __builtin_popcount(e);
        e = gpu_parity_gf_mul(e, 2, w);
    }
    return n;
}

void
gpu_parity_gf8_table(uint8_t c, uint8_t *tbl)
{
    for (unsigned int n = 0; n < 16; n++) {
        tbl[n] = gpu_parity_gf_mul(c, n, 8);
        tbl[16 + n] = gpu_parity_gf_mul(c, n << 4, 8);
    }
}

/* ---- The Cauchy matrix. ---- */

int
gpu_parity_check_params(unsigned int k, unsigned int m, unsigned int w,
                        unsigned int packetsize, char *err, size_t err_size)
{
    char dummy[1];

    if (!err) {
        err = dummy;
        err_size = sizeof dummy;
    }
    if (w < 1 || w > GPU_PARITY_MAX_W) {
        snprintf(err, err_size, "w=%u: w must be 1 to %d", w,
                 GPU_PARITY_MAX_W);
        return GPU_PARITY_ERR_CODE;
    }
    if (!k || !m) {
        snprintf(err, err_size, "k=%u m=%u: need at least one data and "
                 "one parity chunk", k, m);
        return GPU_PARITY_ERR_CODE;
    }
    if (k + m > (1u << w)) {
        snprintf(err, err_size, "k=%u m=%u w=%u: k + m must be at most "
                 "2^w = %u", k, m, w, 1u << w);
        return GPU_PARITY_ERR_CODE;
    }
    if (!packetsize || packetsize % 8 || packetsize > (1u << 30)) {
        snprintf(err, err_size, "packetsize=%u: must be a nonzero "
                 "multiple of 8", packetsize);
        return GPU_PARITY_ERR_SIZE;
    }
    return GPU_OK;
}

/* Jerasure's cauchy_original_coding_matrix() then
 * cauchy_improve_coding_matrix(): X = {m .. m+k-1}, Y = {0 .. m-1},
 * element [i][j] = 1 / (i ^ (m + j)); then every column is divided by its
 * first element (so row 0 is all ones), and every later row is divided by
 * the element that leaves it with the fewest ones in its bitmatrix, if
 * that beats leaving it as it is (the first such element on ties). */
static void
cauchy_general(unsigned int k, unsigned int m, unsigned int w, int *mat)
{
    unsigned int i, j, x;

    for (i = 0; i < m; i++) {
        for (j = 0; j < k; j++) {
            mat[i * k + j] = gpu_parity_gf_div(1, i ^ (m + j), w);
        }
    }
    for (j = 0; j < k; j++) {
        if (mat[j] != 1) {
            unsigned int t = gpu_parity_gf_div(1, mat[j], w);

            for (i = 0; i < m; i++) {
                mat[i * k + j] = gpu_parity_gf_mul(mat[i * k + j], t, w);
            }
        }
    }
    for (i = 1; i < m; i++) {
        int *row = &mat[i * k];
        unsigned int best = 0;
        int best_j = -1;

        for (j = 0; j < k; j++) {
            best += gpu_parity_n_ones(row[j], w);
        }
        for (j = 0; j < k; j++) {
            if (row[j] != 1) {
                unsigned int t = gpu_parity_gf_div(1, row[j], w), n = 0;

                for (x = 0; x < k; x++) {
                    n += gpu_parity_n_ones(gpu_parity_gf_mul(row[x], t, w),
                                           w);
                }
                if (n < best) {
                    best = n;
                    best_j = j;
                }
            }
        }
        if (best_j >= 0) {
            unsigned int t = gpu_parity_gf_div(1, row[best_j], w);

            for (j = 0; j < k; j++) {
                row[j] = gpu_parity_gf_mul(row[j], t, w);
            }
        }
    }
}

/* For m = 2 (and w >= 2) Jerasure uses a table of the best second rows
 * (Plank's RAID-6 search).  That table is every nonzero element of
 * GF(2^w) sorted by the ones in its bitmatrix, ties by value: the tests
 * check this against Jerasure for every k.  Computing it keeps Jerasure a
 * test oracle and not a source. */
static int
cmp_ones(const void *a_, const void *b_)
{
    const unsigned int *a = a_, *b = b_;

    return a[0] != b[0] ? (a[0] < b[0] ? -1 : 1)
                        : (a[1] < b[1] ? -1 : a[1] > b[1]);
}

static void
cauchy_raid6(unsigned int k, unsigned int w, int *mat)
{
    unsigned int n = (1u << w) - 1, e, i;
    unsigned int (*v)[2] = malloc(n * sizeof *v);

    for (e = 1; e <= n; e++) {
        v[e - 1][0] = gpu_parity_n_ones(e, w);
        v[e - 1][1] = e;
    }
    qsort(v, n, sizeof *v, cmp_ones);
    for (i = 0; i < k; i++) {
        mat[i] = 1;
        mat[k + i] = v[i][1];
    }
    free(v);
}

static int *
cauchy_good_matrix(unsigned int k, unsigned int m, unsigned int w)
{
    int *mat = malloc((size_t) k * m * sizeof *mat);

    if (mat) {
        if (m == 2 && w >= 2 && k <= (1u << w) - 1) {
            cauchy_raid6(k, w, mat);
        } else {
            cauchy_general(k, m, w, mat);
        }
    }
    return mat;
}

/* Jerasure's jerasure_matrix_to_bitmatrix(): entry (i*w + l, j*w + x) is
 * bit l of element [i][j] times 2^x. */
static int *
matrix_to_bitmatrix(unsigned int k, unsigned int m, unsigned int w,
                    const int *mat)
{
    size_t cols = (size_t) k * w;
    int *bm = malloc((size_t) m * w * cols * sizeof *bm);
    unsigned int i, j, x, l;

    if (!bm) {
        return NULL;
    }
    for (i = 0; i < m; i++) {
        for (j = 0; j < k; j++) {
            unsigned int e = mat[i * k + j];

            for (x = 0; x < w; x++) {
                for (l = 0; l < w; l++) {
                    bm[(i * w + l) * cols + j * w + x] = (e >> l) & 1;
                }
                e = gpu_parity_gf_mul(e, 2, w);
            }
        }
    }
    return bm;
}

/* ---- Plans. ---- */

static void
plan_free(struct parity_plan *p)
{
    if (p) {
        free(p->bits);
        free(p->src_start);
        free(p->srcs);
        free(p->tables);
        free(p->isal_tables);
    }
}

static void
plan_destroy(struct parity_plan *p)
{
    plan_free(p);
    free(p);
}

/* Allocates 'p''s arrays for n_out x n_in chunks of w rows (GF8 code: w
 * is 1 and 'bits' holds coefficients). */
static int
plan_alloc(struct parity_plan *p, enum gpu_parity_code code, unsigned int w,
           unsigned int n_in, unsigned int n_out)
{
    size_t rows = (size_t) n_out * w, cols = (size_t) n_in * w;

    p->code = code;
    p->w = w;
    p->n_in = n_in;
    p->n_out = n_out;
    p->bits = calloc(rows * cols + 1, 1);
    p->src_start = calloc(rows + 1, sizeof *p->src_start);
    p->srcs = calloc(rows * cols + 1, sizeof *p->srcs);
    if (code == GPU_PARITY_CODE_GF8) {
        p->tables = calloc(rows * cols * 32 + 1, 1);
        p->isal_tables = calloc(rows * cols * 32 + 1, 1);
        if (!p->tables || !p->isal_tables) {
            return GPU_ERR_NOMEM;
        }
    }
    return p->bits && p->src_start && p->srcs ? GPU_OK : GPU_ERR_NOMEM;
}

/* GF8 code: the coefficients' tables, for the CUDA kernel, and ISA-L's
 * if it codes on the CPU. */
static void
plan_finish_gf8(struct parity_plan *p, bool isal)
{
    size_t n = (size_t) p->n_out * p->n_in;

    for (size_t i = 0; i < n; i++) {
        gpu_parity_gf8_table(p->bits[i], &p->tables[i * 32]);
    }
    p->isal = false;
#ifdef HAVE_ISAL
    if (isal && n) {
        ec_init_tables(p->n_in, p->n_out, p->bits, p->isal_tables);
        p->isal = true;
    }
#else
    (void) isal;
#endif
}

/* Fills the CPU's source lists from 'bits'. */
static void
plan_finish(struct parity_plan *p)
{
    size_t rows = (size_t) p->n_out * p->w, cols = (size_t) p->n_in * p->w;
    size_t o, c, n = 0;

    for (o = 0; o < rows; o++) {
        p->src_start[o] = n;
        for (c = 0; c < cols; c++) {
            if (p->bits[o * cols + c]) {
                p->srcs[n++] = c;
            }
        }
    }
    p->src_start[rows] = n;
}

/* Drops a reference to the decode plan 'p' (may be NULL). */
static void
plan_unref(struct parity_plan *p)
{
    if (p && !__atomic_sub_fetch(&p->refcnt, 1, __ATOMIC_ACQ_REL)) {
        plan_destroy(p);
    }
}

/* GF(2) matrices for decoding: 'n' rows of 'nw' 64-bit words. */
static inline void
row_xor(uint64_t *dst, const uint64_t *src, size_t nw)
{
    for (size_t i = 0; i < nw; i++) {
        dst[i] ^= src[i];
    }
}

static inline bool
row_bit(const uint64_t *row, size_t c)
{
    return (row[c / 64] >> (c % 64)) & 1;
}

/* Swaps rows 'r' and 'c' of both matrices 'a' and 'inv', whose rows are
 * 'row_bytes' long: the pivot step of either field's Gauss-Jordan
 * inversion. */
static void
swap_rows(void *a_, void *inv_, size_t row_bytes, size_t r, size_t c)
{
    uint8_t *mats[2] = { a_, inv_ };

    for (int m = 0; m < 2; m++) {
        uint8_t *x = mats[m] + r * row_bytes, *y = mats[m] + c * row_bytes;

        for (size_t i = 0; i < row_bytes; i++) {
            uint8_t t = x[i];

            x[i] = y[i];
            y[i] = t;
        }
    }
}

/* Inverts the n x n matrix 'a' (destroyed) into 'inv' by Gauss-Jordan.
 * Returns false if it is singular, which an MDS code's survivors never
 * are; the caller still refuses rather than decode garbage. */
static bool
gf2_invert(uint64_t *a, uint64_t *inv, size_t n, size_t nw)
{
    size_t i, r, c;

    memset(inv, 0, n * nw * sizeof *inv);
    for (i = 0; i < n; i++) {
        inv[i * nw + i / 64] |= 1ull << (i % 64);
    }
    for (c = 0; c < n; c++) {
        for (r = c; r < n && !row_bit(&a[r * nw], c); r++) {
            continue;
        }
        if (r == n) {
            return false;
        }
        if (r != c) {
            swap_rows(a, inv, nw * sizeof *a, r, c);
        }
        for (r = 0; r < n; r++) {
            if (r != c && row_bit(&a[r * nw], c)) {
                row_xor(&a[r * nw], &a[c * nw], nw);
                row_xor(&inv[r * nw], &inv[c * nw], nw);
            }
        }
    }
    return true;
}

/* Builds the plan that rebuilds the chunks 'want' (ids, ascending) from
 * the first k chunks not in 'erased' (a k+m flag array with at most m
 * set).  Every output row is written directly as an XOR of survivor rows:
 * data rows from the inverse of the survivors' generator rows, parity
 * rows from the generator row times that inverse (G-CRS's "fully
 * parallel" decoding), so one pass rebuilds data and parity alike. */
static int
plan_decode(const struct gpu_parity *pc, const uint8_t *erased,
            const int *want, unsigned int n_want, struct parity_plan **pp)
{
    unsigned int k = pc->cfg.k, m = pc->cfg.m, w = pc->cfg.w;
    size_t n = (size_t) k * w, nw = (n + 63) / 64;
    uint64_t *g = calloc(n * nw, sizeof *g);
    uint64_t *inv = calloc(n * nw, sizeof *inv);
    uint64_t *row = calloc(nw, sizeof *row);
    struct parity_plan *p = calloc(1, sizeof *p);
    unsigned int id, s = 0, o, r, t;
    int error = GPU_ERR_NOMEM;

    if (!g || !inv || !row || !p
        || plan_alloc(p, GPU_PARITY_CODE_BITMATRIX, w, k, n_want)) {
        goto out;
    }
    for (id = 0; id < k + m && s < k; id++) {
        if (erased[id]) {
            continue;
        }
        p->in_ids[s] = id;
        for (t = 0; t < w; t++) {
            uint64_t *gr = &g[((size_t) s * w + t) * nw];

            if (id < k) {
                size_t c = (size_t) id * w + t;

                gr[c / 64] |= 1ull << (c % 64);
            } else {
                const int *bm = &pc->bitmatrix[((size_t) (id - k) * w + t)
                                               * n];
                for (size_t c = 0; c < n; c++) {
                    if (bm[c]) {
                        gr[c / 64] |= 1ull << (c % 64);
                    }
                }
            }
        }
        s++;
    }
    if (s < k || !gf2_invert(g, inv, n, nw)) {
        error = GPU_PARITY_ERR_TOO_MANY_ERASURES;
        goto out;
    }
    for (o = 0; o < n_want; o++) {
        id = want[o];
        p->out_ids[o] = id;
        for (r = 0; r < w; r++) {
            uint8_t *bits = &p->bits[((size_t) o * w + r) * n];

            if (id < k) {
                memcpy(row, &inv[((size_t) id * w + r) * nw],
                       nw * sizeof *row);
            } else {
                const int *bm = &pc->bitmatrix[((size_t) (id - k) * w + r)
                                               * n];
                memset(row, 0, nw * sizeof *row);
                for (size_t c = 0; c < n; c++) {
                    if (bm[c]) {
                        row_xor(row, &inv[c * nw], nw);
                    }
                }
            }
            for (size_t c = 0; c < n; c++) {
                bits[c] = row_bit(row, c);
            }
        }
    }
    plan_finish(p);
    p->refcnt = 1;
    *pp = p;
    p = NULL;
    error = GPU_OK;
out:
    free(g);
    free(inv);
    free(row);
    if (p) {
        plan_destroy(p);
    }
    return error;
}

/* GF(2^8) by log and antilog tables, for inverting decoding matrices of
 * up to 255 x 255 (the shift-and-add product would take seconds). */
static uint8_t gf8_log[256], gf8_exp[512];
static pthread_once_t gf8_once = PTHREAD_ONCE_INIT;

static void
gf8_init(void)
{
    unsigned int x = 1;

    for (unsigned int i = 0; i < 255; i++) {
        gf8_exp[i] = gf8_exp[i + 255] = x;
        gf8_log[x] = i;
        x = gpu_parity_gf_mul(x, 2, 8);
    }
}

static inline uint8_t
gf8_mul(uint8_t a, uint8_t b)
{
    return a && b ? gf8_exp[gf8_log[a] + gf8_log[b]] : 0;
}

static inline uint8_t
gf8_inv(uint8_t a)
{
    return gf8_exp[255 - gf8_log[a]];
}

/* Inverts the n x n matrix 'a' (destroyed) over GF(2^8) into 'inv'. */
static bool
gf8_invert(uint8_t *a, uint8_t *inv, size_t n)
{
    size_t i, r, c;

    memset(inv, 0, n * n);
    for (i = 0; i < n; i++) {
        inv[i * n + i] = 1;
    }
    for (c = 0; c < n; c++) {
        uint8_t f;

        for (r = c; r < n && !a[r * n + c]; r++) {
            continue;
        }
        if (r == n) {
            return false;
        }
        if (r != c) {
            swap_rows(a, inv, n, r, c);
        }
        f = gf8_inv(a[c * n + c]);
        for (i = 0; i < n; i++) {
            a[c * n + i] = gf8_mul(a[c * n + i], f);
            inv[c * n + i] = gf8_mul(inv[c * n + i], f);
        }
        for (r = 0; r < n; r++) {
            uint8_t e = a[r * n + c];

            if (r != c && e) {
                for (i = 0; i < n; i++) {
                    a[r * n + i] ^= gf8_mul(e, a[c * n + i]);
                    inv[r * n + i] ^= gf8_mul(e, inv[c * n + i]);
                }
            }
        }
    }
    return true;
}

/* plan_decode() for the GF8 code: the survivors' k x k generator rows
 * (unit rows for data, coefficient rows for parity) are inverted; a data
 * chunk's output row is its row of the inverse, a parity chunk's its
 * coefficient row times the inverse. */
static int
plan_decode_gf8(const struct gpu_parity *pc, const uint8_t *erased,
                const int *want, unsigned int n_want,
                struct parity_plan **pp)
{
    unsigned int k = pc->cfg.k, m = pc->cfg.m, id, s = 0, o, i, j;
    uint8_t *g = calloc((size_t) k * k, 1);
    uint8_t *inv = calloc((size_t) k * k, 1);
    struct parity_plan *p = calloc(1, sizeof *p);
    int error = GPU_ERR_NOMEM;

    pthread_once(&gf8_once, gf8_init);
    if (!g || !inv || !p
        || plan_alloc(p, GPU_PARITY_CODE_GF8, 1, k, n_want)) {
        goto out;
    }
    for (id = 0; id < k + m && s < k; id++) {
        if (erased[id]) {
            continue;
        }
        p->in_ids[s] = id;
        for (i = 0; i < k; i++) {
            g[s * k + i] = (id < k ? id == i
                            : pc->matrix[(id - k) * k + i]);
        }
        s++;
    }
    if (s < k || !gf8_invert(g, inv, k)) {
        error = GPU_PARITY_ERR_TOO_MANY_ERASURES;
        goto out;
    }
    for (o = 0; o < n_want; o++) {
        uint8_t *row = &p->bits[(size_t) o * k];

        id = want[o];
        p->out_ids[o] = id;
        if (id < k) {
            memcpy(row, &inv[(size_t) id * k], k);
            continue;
        }
        for (j = 0; j < k; j++) {
            uint8_t c = pc->matrix[(id - k) * k + j];

            for (i = 0; c && i < k; i++) {
                row[i] ^= gf8_mul(c, inv[(size_t) j * k + i]);
            }
        }
    }
    plan_finish_gf8(p, pc->isal);
    p->refcnt = 1;
    *pp = p;
    p = NULL;
    error = GPU_OK;
out:
    free(g);
    free(inv);
    if (p) {
        plan_destroy(p);
    }
    return error;
}

/* Checks an erasure list and turns it into flags.  Refuses more than m
 * erasures before looking at anything else, so the caller gets the error
 * that matters. */
static int
erasures_to_flags(const struct gpu_parity *pc, const int *erasures,
                  size_t n_erasures, uint8_t *erased)
{
    unsigned int k = pc->cfg.k, m = pc->cfg.m;

    memset(erased, 0, GPU_PARITY_MAX_CHUNKS);
    if (n_erasures > m) {
        return GPU_PARITY_ERR_TOO_MANY_ERASURES;
    }
    if (n_erasures && !erasures) {
        return GPU_ERR_INVALID;
    }
    for (size_t i = 0; i < n_erasures; i++) {
        int id = erasures[i];

        if (id < 0 || (unsigned int) id >= k + m || erased[id]) {
            return GPU_PARITY_ERR_ERASURE_ID;
        }
        erased[id] = 1;
    }
    return GPU_OK;
}

/* A decode plan for 'erased', rebuilding the ids flagged in 'want', from
 * the cache when the pattern was seen lately: a reference, which the
 * caller drops with plan_unref(). */
static int
get_decode_plan(struct gpu_parity *pc, const uint8_t *erased,
                const uint8_t *want, struct parity_plan **pp)
{
    unsigned int n = pc->cfg.k + pc->cfg.m, n_want = 0, id, i;
    uint8_t key[GPU_PARITY_MAX_CHUNKS];
    int ids[GPU_PARITY_MAX_CHUNKS];
    struct parity_plan *old;
    int error;

    for (id = 0; id < n; id++) {
        key[id] = erased[id] | want[id] << 1;
        if (want[id]) {
            ids[n_want++] = id;
        }
    }
    pthread_mutex_lock(&pc->cache_mutex);
    for (i = 0; i < PARITY_PLAN_CACHE; i++) {
        if (pc->cache_plan[i] && !memcmp(pc->cache_key[i], key, n)) {
            *pp = pc->cache_plan[i];
            __atomic_add_fetch(&(*pp)->refcnt, 1, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&pc->cache_mutex);
            return GPU_OK;
        }
    }
    pthread_mutex_unlock(&pc->cache_mutex);

    error = (pc->cfg.code == GPU_PARITY_CODE_GF8
             ? plan_decode_gf8(pc, erased, ids, n_want, pp)
             : plan_decode(pc, erased, ids, n_want, pp));
    if (!error) {
        /* One reference for the cache, one for the caller. */
        __atomic_add_fetch(&(*pp)->refcnt, 1, __ATOMIC_RELAXED);
        pthread_mutex_lock(&pc->cache_mutex);
        i = pc->cache_next++ % PARITY_PLAN_CACHE;
        old = pc->cache_plan[i];
        pc->cache_plan[i] = *pp;
        memcpy(pc->cache_key[i], key, n);
        pthread_mutex_unlock(&pc->cache_mutex);
        plan_unref(old);
    }
    return error;
}

/* ---- Coders. ---- */

void
gpu_parity_config_init(struct gpu_parity_config *cfg, unsigned int k,
                       unsigned int m)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->k = k;
    cfg->m = m;
    cfg->w = 1;
    while (cfg->w < GPU_PARITY_MAX_W && (1u << cfg->w) < k + m) {
        cfg->w++;
    }
    cfg->packetsize = 2048;
    cfg->backend = GPU_PARITY_BACKEND_AUTO;
    cfg->device = 0;
}

bool
gpu_parity_cuda_available(void)
{
#ifdef HAVE_CUDA
    return gpu_parity_cuda_probe(0, NULL, 0);
#else
    return false;
#endif
}

int
gpu_parity_create(const struct gpu_parity_config *cfg,
                  struct gpu_parity **coderp, char *err, size_t err_size)
{
    char dummy[1];
    struct gpu_parity *pc;
    unsigned int k, m, w, o;
    int error;

    if (!err) {
        err = dummy;
        err_size = sizeof dummy;
    }
    if (!cfg || !coderp) {
        snprintf(err, err_size, "null argument");
        return GPU_ERR_INVALID;
    }
    if (cfg->code != GPU_PARITY_CODE_BITMATRIX
        && cfg->code != GPU_PARITY_CODE_GF8) {
        snprintf(err, err_size, "unknown code %d", (int) cfg->code);
        return GPU_ERR_INVALID;
    }
    /* The GF8 code's symbols are bytes: k + m <= 256. */
    w = cfg->code == GPU_PARITY_CODE_GF8 ? 8 : cfg->w;
    error = gpu_parity_check_params(cfg->k, cfg->m, w, cfg->packetsize,
                                    err, err_size);
    if (error) {
        return error;
    }
    k = cfg->k;
    m = cfg->m;

    pc = calloc(1, sizeof *pc);
    if (!pc) {
        return GPU_ERR_NOMEM;
    }
    pc->cfg = *cfg;
    pc->cfg.w = w;
    pc->isal = (cfg->code == GPU_PARITY_CODE_GF8 && !cfg->portable
                && gpu_parity_isal_built());
    pthread_mutex_init(&pc->cache_mutex, NULL);
    pthread_mutex_init(&pc->pool_mutex, NULL);

    switch (cfg->backend) {
    case GPU_PARITY_BACKEND_CPU:
        pc->prov = &gpu_parity_cpu_provider;
        snprintf(pc->why, sizeof pc->why, "cpu asked for");
        break;
    case GPU_PARITY_BACKEND_CUDA:
    case GPU_PARITY_BACKEND_AUTO:
#ifdef HAVE_CUDA
        if (gpu_parity_cuda_probe(cfg->device, pc->why, sizeof pc->why)) {
            pc->prov = &gpu_parity_cuda_provider;
            snprintf(pc->why, sizeof pc->why, "%s",
                     cfg->backend == GPU_PARITY_BACKEND_CUDA
                     ? "cuda asked for" : "auto: CUDA device usable");
            break;
        }
#else
        snprintf(pc->why, sizeof pc->why, "built without CUDA");
#endif
        if (cfg->backend == GPU_PARITY_BACKEND_CUDA) {
            snprintf(err, err_size, "CUDA backend unusable: %s", pc->why);
            gpu_parity_destroy(pc);
            return GPU_ERR_NO_DEVICE;
        } else {
            char why[sizeof pc->why];

            memcpy(why, pc->why, sizeof why);
            snprintf(pc->why, sizeof pc->why, "auto: %.*s",
                     (int) sizeof pc->why - 7, why);
            pc->prov = &gpu_parity_cpu_provider;
        }
        break;
    default:
        snprintf(err, err_size, "unknown backend %d", (int) cfg->backend);
        gpu_parity_destroy(pc);
        return GPU_ERR_INVALID;
    }
    pc->cfg.backend = pc->prov->type;

    if (cfg->code == GPU_PARITY_CODE_GF8) {
        /* ISA-L's gf_gen_cauchy1_matrix() rows k .. k+m-1. */
        pc->matrix = malloc((size_t) k * m * sizeof *pc->matrix);
        if (!pc->matrix
            || plan_alloc(&pc->encode, GPU_PARITY_CODE_GF8, 1, k, m)) {
            gpu_parity_destroy(pc);
            return GPU_ERR_NOMEM;
        }
        for (o = 0; o < m; o++) {
            for (unsigned int i = 0; i < k; i++) {
                pc->matrix[o * k + i] = gpu_parity_gf_div(1, (k + o) ^ i,
                                                          8);
                pc->encode.bits[o * k + i] = pc->matrix[o * k + i];
            }
        }
        plan_finish_gf8(&pc->encode, pc->isal);
    } else {
        pc->matrix = cauchy_good_matrix(k, m, w);
        pc->bitmatrix = (pc->matrix
                         ? matrix_to_bitmatrix(k, m, w, pc->matrix)
                         : NULL);
        if (!pc->bitmatrix
            || plan_alloc(&pc->encode, GPU_PARITY_CODE_BITMATRIX, w, k,
                          m)) {
            gpu_parity_destroy(pc);
            return GPU_ERR_NOMEM;
        }
        for (size_t i = 0; i < (size_t) m * w * k * w; i++) {
            pc->encode.bits[i] = pc->bitmatrix[i];
        }
        plan_finish(&pc->encode);
    }
    for (o = 0; o < k; o++) {
        pc->encode.in_ids[o] = o;
    }
    for (o = 0; o < m; o++) {
        pc->encode.out_ids[o] = k + o;
    }

    error = pc->prov->init ? pc->prov->init(pc) : GPU_OK;
    if (error) {
        snprintf(err, err_size, "%s backend: %s", pc->prov->name,
                 gpu_parity_strerror(error));
        pc->prov = NULL;
        gpu_parity_destroy(pc);
        return error;
    }
    *coderp = pc;
    return GPU_OK;
}

void
gpu_parity_destroy(struct gpu_parity *pc)
{
    if (!pc) {
        return;
    }
    while (pc->pool) {
        struct gpu_parity_batch *b = pc->pool;

        pc->pool = b->pool_next;
        gpu_parity_batch_destroy(b);
    }
    if (pc->prov && pc->prov->uninit) {
        pc->prov->uninit(pc);
    }
    for (int i = 0; i < PARITY_PLAN_CACHE; i++) {
        plan_unref(pc->cache_plan[i]);
    }
    plan_free(&pc->encode);
    free(pc->matrix);
    free(pc->bitmatrix);
    pthread_mutex_destroy(&pc->cache_mutex);
    pthread_mutex_destroy(&pc->pool_mutex);
    free(pc);
}

enum gpu_parity_backend
gpu_parity_backend(const struct gpu_parity *pc)
{
    return pc->prov->type;
}

const char *
gpu_parity_backend_why(const struct gpu_parity *pc)
{
    return pc->why;
}

const char *
gpu_parity_impl(const struct gpu_parity *pc)
{
    if (pc->prov->type == GPU_PARITY_BACKEND_CUDA) {
        return "CUDA";
    }
    return pc->isal ? "ISA-L" : "portable";
}

/* Bytes a chunk's size is a multiple of: a block of w packets, or for the
 * GF8 code (bytes coded alone) a packet. */
static size_t
coder_unit(const struct gpu_parity *pc)
{
    return (pc->cfg.code == GPU_PARITY_CODE_GF8 ? 1 : pc->cfg.w)
           * (size_t) pc->cfg.packetsize;
}

void
gpu_parity_get_config(const struct gpu_parity *pc,
                      struct gpu_parity_config *cfg)
{
    *cfg = pc->cfg;
}

const int *
gpu_parity_matrix(const struct gpu_parity *pc)
{
    return pc->matrix;
}

const int *
gpu_parity_bitmatrix(const struct gpu_parity *pc)
{
    return pc->bitmatrix;
}

void
gpu_parity_get_stats(struct gpu_parity *pc, struct gpu_parity_stats *s)
{
    memset(s, 0, sizeof *s);
    s->backend = pc->prov->type;
    s->n_encodes = __atomic_load_n(&pc->n_encodes, __ATOMIC_RELAXED);
    s->n_decodes = __atomic_load_n(&pc->n_decodes, __ATOMIC_RELAXED);
    s->n_bytes = __atomic_load_n(&pc->n_bytes, __ATOMIC_RELAXED);
    s->n_fallbacks = __atomic_load_n(&pc->n_fallbacks, __ATOMIC_RELAXED);
    s->n_refused = __atomic_load_n(&pc->n_refused, __ATOMIC_RELAXED);
    s->kernel_ns = __atomic_load_n(&pc->kernel_ns, __ATOMIC_RELAXED);
    s->n_runtime_calls = __atomic_load_n(&pc->n_runtime_calls,
                                         __ATOMIC_RELAXED);
    s->n_device_launches = __atomic_load_n(&pc->n_device_launches,
                                           __ATOMIC_RELAXED);
}

void
gpu_parity_count(struct gpu_parity_batch *b, bool fallback)
{
    struct gpu_parity *pc = b->coder;

    if (fallback) {
        __atomic_add_fetch(&pc->n_fallbacks, 1, __ATOMIC_RELAXED);
    }
    if (b->counted) {
        return;
    }
    b->counted = true;
    __atomic_add_fetch(b->decode ? &pc->n_decodes : &pc->n_encodes, 1,
                       __ATOMIC_RELAXED);
    __atomic_add_fetch(&pc->n_bytes, (uint64_t) pc->cfg.k * b->size,
                       __ATOMIC_RELAXED);
}

static int
refuse(struct gpu_parity *pc, int error)
{
    __atomic_add_fetch(&pc->n_refused, 1, __ATOMIC_RELAXED);
    return error;
}

/* ---- Batches. ---- */

/* Drops the plans of the batch's last submission. */
static void
batch_release_plans(struct gpu_parity_batch *b)
{
    plan_unref(b->dplan);
    b->dplan = NULL;
    for (size_t i = 0; i < b->n_segs; i++) {
        plan_unref(b->segs[i].plan);
    }
    b->n_segs = 0;
}

int
gpu_parity_batch_create(struct gpu_parity *pc, size_t max_size,
                        struct gpu_parity_batch **bp)
{
    size_t unit = coder_unit(pc);
    struct gpu_parity_batch *b;
    int error;

    if (!max_size || max_size % unit) {
        return GPU_PARITY_ERR_SIZE;
    }
    b = calloc(1, sizeof *b);
    if (!b) {
        return GPU_ERR_NOMEM;
    }
    b->coder = pc;
    b->max_size = max_size;
    error = pc->prov->batch_init ? pc->prov->batch_init(b) : GPU_OK;
    if (error) {
        free(b);
        return error;
    }
    *bp = b;
    return GPU_OK;
}

void
gpu_parity_batch_destroy(struct gpu_parity_batch *b)
{
    if (!b) {
        return;
    }
    if (b->busy) {
        gpu_parity_wait(b);
    }
    if (b->coder->prov->batch_uninit) {
        b->coder->prov->batch_uninit(b);
    }
    batch_release_plans(b);
    free(b->segs);
    free(b->group_sizes);
    free(b->dst);
    free(b);
}

static int
check_size(const struct gpu_parity_batch *b, size_t size)
{
    size_t unit = coder_unit(b->coder);

    return !size || size % unit || size > b->max_size ? GPU_PARITY_ERR_SIZE
                                                      : GPU_OK;
}

/* Hands the set-up submission (or, with 'again', a re-run of the last
 * one) to the backend; the batch is busy until waited for, unless the
 * backend refused it. */
static int
batch_start(struct gpu_parity_batch *b, struct gpu_stream *stream,
            bool again)
{
    int error;

    b->busy = true;
    error = b->coder->prov->submit(b, stream, again);
    if (error) {
        b->busy = false;
    }
    return error;
}

/* Sets up 'b' to encode 'size' bytes of every chunk of 'data' into
 * 'parity' (refused, and counted, if a buffer is missing or the size
 * unusable); the caller then starts it. */
static int
encode_setup(struct gpu_parity_batch *b, const uint8_t *const *data,
             uint8_t *const *parity, size_t size)
{
    struct gpu_parity *pc = b->coder;
    unsigned int i;
    int error;

    if (!data || !parity) {
        return refuse(pc, GPU_ERR_INVALID);
    }
    error = check_size(b, size);
    if (error) {
        return refuse(pc, error);
    }
    for (i = 0; i < pc->cfg.k; i++) {
        if (!data[i]) {
            return refuse(pc, GPU_ERR_INVALID);
        }
        b->in[i] = data[i];
    }
    for (i = 0; i < pc->cfg.m; i++) {
        if (!parity[i]) {
            return refuse(pc, GPU_ERR_INVALID);
        }
        b->out[i] = parity[i];
    }
    batch_release_plans(b);
    b->plan = &pc->encode;
    b->size = size;
    b->decode = false;
    b->pkt = false;
    b->counted = false;
    return GPU_OK;
}

int
gpu_parity_encode_submit(struct gpu_parity_batch *b,
                         struct gpu_stream *stream,
                         const uint8_t *const *data, uint8_t *const *parity,
                         size_t size)
{
    int error;

    if (b->busy) {
        return GPU_ERR_BUSY;
    }
    error = encode_setup(b, data, parity, size);
    return error ? error : batch_start(b, stream, false);
}

/* Sets up 'b' to rebuild the chunks flagged in 'want' given 'erased'. */
static int
decode_setup(struct gpu_parity_batch *b, uint8_t *const *data,
             uint8_t *const *parity, const uint8_t *erased,
             const uint8_t *want, size_t size)
{
    struct gpu_parity *pc = b->coder;
    unsigned int k = pc->cfg.k, i;
    struct parity_plan *plan;
    int error;

    error = check_size(b, size);
    if (error) {
        return error;
    }
    for (i = 0; i < k + pc->cfg.m; i++) {
        uint8_t *buf = i < k ? data[i] : parity[i - k];

        if (!buf && (!erased[i] || want[i])) {
            return GPU_ERR_INVALID;
        }
    }
    error = get_decode_plan(pc, erased, want, &plan);
    if (error) {
        return error;
    }
    for (i = 0; i < plan->n_in; i++) {
        int id = plan->in_ids[i];

        b->in[i] = id < (int) k ? data[id] : parity[id - k];
    }
    for (i = 0; i < plan->n_out; i++) {
        int id = plan->out_ids[i];

        b->out[i] = id < (int) k ? data[id] : parity[id - k];
    }
    batch_release_plans(b);
    b->dplan = b->plan = plan;
    b->size = size;
    b->decode = true;
    b->pkt = false;
    b->counted = false;
    return GPU_OK;
}

static int
decode_submit__(struct gpu_parity_batch *b, struct gpu_stream *stream,
                uint8_t *const *data, uint8_t *const *parity,
                const uint8_t *erased, const uint8_t *want, size_t size)
{
    struct gpu_parity *pc = b->coder;
    int error;

    if (b->busy) {
        return GPU_ERR_BUSY;
    }
    if (!data || !parity) {
        return refuse(pc, GPU_ERR_INVALID);
    }
    error = decode_setup(b, data, parity, erased, want, size);
    if (error) {
        return refuse(pc, error);
    }
    if (!b->plan->n_out) {
        /* Nothing erased: nothing to do, and nothing to launch. */
        gpu_parity_count(b, false);
        return GPU_OK;
    }
    return batch_start(b, stream, false);
}

int
gpu_parity_decode_submit(struct gpu_parity_batch *b,
                         struct gpu_stream *stream, uint8_t *const *data,
                         uint8_t *const *parity, const int *erasures,
                         size_t n_erasures, size_t size)
{
    uint8_t erased[GPU_PARITY_MAX_CHUNKS];
    int error;

    if (b->busy) {
        return GPU_ERR_BUSY;
    }
    error = erasures_to_flags(b->coder, erasures, n_erasures, erased);
    if (error) {
        return refuse(b->coder, error);
    }
    return decode_submit__(b, stream, data, parity, erased, erased, size);
}

/* Sets up 'b' to decode the segments 'segs': checks them all (a bad one
 * refuses the whole submission before anything is written) and takes a
 * plan for each, from the cache mostly. */
static int
segments_setup(struct gpu_parity_batch *b, uint8_t *const *data,
               uint8_t *const *parity,
               const struct gpu_parity_segment *segs, size_t n_segs)
{
    struct gpu_parity *pc = b->coder;
    unsigned int k = pc->cfg.k, m = pc->cfg.m, i;
    size_t unit = coder_unit(pc), end = 0;
    size_t total = 0;

    if (!data || !parity || (n_segs && !segs)) {
        return GPU_ERR_INVALID;
    }
    for (i = 0; i < k + m; i++) {
        uint8_t *buf = i < k ? data[i] : parity[i - k];

        if (!buf) {
            return GPU_ERR_INVALID;
        }
        b->in[i] = buf;
        b->out[i] = buf;
    }
    for (size_t s = 0; s < n_segs; s++) {
        uint8_t erased[GPU_PARITY_MAX_CHUNKS];
        const struct gpu_parity_segment *seg = &segs[s];
        int error;

        if (!seg->size || seg->size % unit || seg->offset % unit
            || seg->offset < end || seg->offset > b->max_size
            || seg->size > b->max_size - seg->offset) {
            return GPU_PARITY_ERR_SIZE;
        }
        end = seg->offset + seg->size;
        total += seg->size;
        error = erasures_to_flags(pc, seg->erasures, seg->n_erasures,
                                  erased);
        if (error) {
            return error;
        }
    }

    batch_release_plans(b);
    if (n_segs > b->segs_cap) {
        struct parity_seg *ns = realloc(b->segs, n_segs * sizeof *ns);

        if (!ns) {
            return GPU_ERR_NOMEM;
        }
        b->segs = ns;
        b->segs_cap = n_segs;
    }
    for (size_t s = 0; s < n_segs; s++) {
        const struct gpu_parity_segment *seg = &segs[s];
        uint8_t erased[GPU_PARITY_MAX_CHUNKS], want[GPU_PARITY_MAX_CHUNKS];
        struct parity_plan *plan = NULL;
        bool any = false;
        int error;

        erasures_to_flags(pc, seg->erasures, seg->n_erasures, erased);
        for (i = 0; i < k + m; i++) {
            want[i] = erased[i] && (i < k || !seg->data_only);
            any |= want[i];
        }
        if (any) {
            error = get_decode_plan(pc, erased, want, &plan);
            if (error) {
                return error;
            }
        }
        b->segs[b->n_segs].offset = seg->offset;
        b->segs[b->n_segs].size = seg->size;
        b->segs[b->n_segs].plan = plan;
        b->n_segs++;
    }
    b->plan = NULL;
    b->size = total;
    b->decode = true;
    b->pkt = false;
    b->counted = false;
    return GPU_OK;
}

/* Whether any segment of 'b' rebuilds something. */
static bool
segments_work(const struct gpu_parity_batch *b)
{
    for (size_t s = 0; s < b->n_segs; s++) {
        if (b->segs[s].plan) {
            return true;
        }
    }
    return false;
}

int
gpu_parity_decode_submit_segments(struct gpu_parity_batch *b,
                                  struct gpu_stream *stream,
                                  uint8_t *const *data,
                                  uint8_t *const *parity,
                                  const struct gpu_parity_segment *segs,
                                  size_t n_segs)
{
    struct gpu_parity *pc = b->coder;
    int error;

    if (b->busy) {
        return GPU_ERR_BUSY;
    }
    error = segments_setup(b, data, parity, segs, n_segs);
    if (error) {
        batch_release_plans(b);
        return refuse(pc, error);
    }
    if (!segments_work(b)) {
        gpu_parity_count(b, false);
        return GPU_OK;
    }
    return batch_start(b, stream, false);
}

int
gpu_parity_resubmit(struct gpu_parity_batch *b, struct gpu_stream *stream)
{
    if (b->busy) {
        return GPU_ERR_BUSY;
    }
    if (b->n_segs ? !segments_work(b) : !b->plan || !b->plan->n_out) {
        return GPU_OK;
    }
    b->counted = false;
    return batch_start(b, stream, true);
}

uint64_t
gpu_parity_batch_runtime_calls(const struct gpu_parity_batch *b)
{
    return b->n_runtime_calls;
}

int
gpu_parity_poll(struct gpu_parity_batch *b)
{
    int error;

    if (!b->busy) {
        return GPU_OK;
    }
    error = b->coder->prov->poll(b);
    if (error != GPU_ERR_BUSY) {
        b->busy = false;
        if (!error) {
            gpu_parity_count(b, false);
        }
    }
    return error;
}

int
gpu_parity_wait(struct gpu_parity_batch *b)
{
    int error;

    if (!b->busy) {
        return GPU_OK;
    }
    error = b->coder->prov->wait(b);
    b->busy = false;
    if (!error) {
        gpu_parity_count(b, false);
    }
    return error;
}

/* ---- Synchronous calls, through pooled batches. ---- */

static int
pool_get(struct gpu_parity *pc, size_t size, struct gpu_parity_batch **bp)
{
    struct gpu_parity_batch *b;

    pthread_mutex_lock(&pc->pool_mutex);
    b = pc->pool;
    if (b) {
        pc->pool = b->pool_next;
    }
    pthread_mutex_unlock(&pc->pool_mutex);
    if (b && b->max_size >= size) {
        *bp = b;
        return GPU_OK;
    }
    gpu_parity_batch_destroy(b);
    return gpu_parity_batch_create(pc, size, bp);
}

static void
pool_put(struct gpu_parity *pc, struct gpu_parity_batch *b)
{
    pthread_mutex_lock(&pc->pool_mutex);
    b->pool_next = pc->pool;
    pc->pool = b;
    pthread_mutex_unlock(&pc->pool_mutex);
}

static int
size_ok(const struct gpu_parity *pc, size_t size)
{
    size_t unit = coder_unit(pc);

    return size && !(size % unit) ? GPU_OK : GPU_PARITY_ERR_SIZE;
}

int
gpu_parity_encode(struct gpu_parity *pc, const uint8_t *const *data,
                  uint8_t *const *parity, size_t size)
{
    struct gpu_parity_batch *b;
    int error = size_ok(pc, size);

    if (error) {
        return refuse(pc, error);
    }
    error = pool_get(pc, size, &b);
    if (error) {
        return error;
    }
    error = gpu_parity_encode_submit(b, NULL, data, parity, size);
    if (!error) {
        error = gpu_parity_wait(b);
    }
    pool_put(pc, b);
    return error;
}

static int
decode_sync(struct gpu_parity *pc, uint8_t *const *data,
            uint8_t *const *parity, const uint8_t *erased,
            const uint8_t *want, size_t size)
{
    struct gpu_parity_batch *b;
    int error = size_ok(pc, size);

    if (error) {
        return refuse(pc, error);
    }
    error = pool_get(pc, size, &b);
    if (error) {
        return error;
    }
    error = decode_submit__(b, NULL, data, parity, erased, want, size);
    if (!error) {
        error = gpu_parity_wait(b);
    }
    pool_put(pc, b);
    return error;
}

int
gpu_parity_decode(struct gpu_parity *pc, uint8_t *const *data,
                  uint8_t *const *parity, const int *erasures,
                  size_t n_erasures, size_t size)
{
    uint8_t erased[GPU_PARITY_MAX_CHUNKS];
    int error = erasures_to_flags(pc, erasures, n_erasures, erased);

    if (error) {
        return refuse(pc, error);
    }
    return decode_sync(pc, data, parity, erased, erased, size);
}

int
gpu_parity_decode_segments(struct gpu_parity *pc, uint8_t *const *data,
                           uint8_t *const *parity,
                           const struct gpu_parity_segment *segs,
                           size_t n_segs)
{
    struct gpu_parity_batch *b;
    size_t end = 0;
    int error;

    /* The batch must hold the last segment; a size that overflows is
     * refused as the submission would refuse it. */
    for (size_t s = 0; segs && s < n_segs; s++) {
        if (segs[s].size > SIZE_MAX - segs[s].offset) {
            return refuse(pc, GPU_PARITY_ERR_SIZE);
        }
        if (segs[s].offset + segs[s].size > end) {
            end = segs[s].offset + segs[s].size;
        }
    }
    if (size_ok(pc, end)) {
        end = coder_unit(pc);
    }
    error = pool_get(pc, end, &b);
    if (error) {
        return error;
    }
    error = gpu_parity_decode_submit_segments(b, NULL, data, parity, segs,
                                              n_segs);
    if (!error) {
        error = gpu_parity_wait(b);
    }
    pool_put(pc, b);
    return error;
}

/* ---- Packet groups. ---- */

size_t
gpu_parity_pkt_chunk_size(const struct gpu_parity *pc, size_t max_len)
{
    size_t unit = coder_unit(pc);

    if (max_len > GPU_PARITY_PKT_MAX_LEN) {
        return 0;
    }
    return (max_len + 2 + unit - 1) / unit * unit;
}

void
gpu_parity_pkt_to_chunk(uint8_t *chunk, size_t chunk_size,
                        const uint8_t *pkt, size_t len)
{
    if (len) {
        memcpy(chunk + GPU_PARITY_PKT_HLEN, pkt, len);
    }
    gpu_parity_pkt_chunk_finish(chunk, chunk_size, len);
}

void
gpu_parity_pkt_chunk_finish(uint8_t *chunk, size_t chunk_size, size_t len)
{
    gpu_parity_pkt_chunk_head(chunk, len);
    memset(chunk + GPU_PARITY_PKT_HLEN + len, 0,
           chunk_size - GPU_PARITY_PKT_HLEN - len);
}

void
gpu_parity_pkt_chunk_head(uint8_t *chunk, size_t len)
{
    chunk[0] = len >> 8;
    chunk[1] = len;
}

void
gpu_parity_pkt_pad_host(const struct gpu_parity_batch *b)
{
    size_t ofs = 0;

    for (size_t g = 0; g < b->n_groups; g++) {
        size_t size = b->group_sizes[g];

        for (unsigned int i = 0; i < b->coder->cfg.k; i++) {
            uint8_t *chunk = (uint8_t *) b->in[i] + ofs;
            size_t used = gpu_parity_pkt_used(chunk);

            memset(chunk + used, 0, size - used);
        }
        ofs += size;
    }
}

void
gpu_parity_pkt_deliver_host(const struct gpu_parity_batch *b)
{
    unsigned int m = b->coder->cfg.m;
    size_t ofs = 0;

    if (!b->has_dst) {
        return;
    }
    for (size_t g = 0; g < b->n_groups; g++) {
        for (unsigned int j = 0; j < m; j++) {
            memcpy(b->dst[g * m + j], b->out[j] + ofs, b->group_sizes[g]);
        }
        ofs += b->group_sizes[g];
    }
}

/* Makes room in 'b' for 'n' groups' sizes and destinations. */
static int
pkt_groups_reserve(struct gpu_parity_batch *b, size_t n)
{
    unsigned int m = b->coder->cfg.m;
    size_t *sizes;
    uint8_t **dst;

    if (n <= b->groups_cap) {
        return GPU_OK;
    }
    sizes = realloc(b->group_sizes, n * sizeof *sizes);
    if (!sizes) {
        return GPU_ERR_NOMEM;
    }
    b->group_sizes = sizes;
    dst = realloc(b->dst, n * m * sizeof *dst);
    if (!dst) {
        return GPU_ERR_NOMEM;
    }
    b->dst = dst;
    b->groups_cap = n;
    return GPU_OK;
}

int
gpu_parity_pkt_encode_submit(struct gpu_parity_batch *b,
                             struct gpu_stream *stream,
                             uint8_t *const *data, uint8_t *const *parity,
                             const size_t *group_sizes, size_t n_groups,
                             uint8_t *const *parity_dst)
{
    struct gpu_parity *pc = b->coder;
    unsigned int k = pc->cfg.k, m = pc->cfg.m, i;
    size_t unit = coder_unit(pc), total = 0, ofs = 0;
    int error;

    if (b->busy) {
        return GPU_ERR_BUSY;
    }
    if (!group_sizes || !n_groups) {
        return refuse(pc, GPU_ERR_INVALID);
    }
    for (size_t g = 0; g < n_groups; g++) {
        size_t size = group_sizes[g];

        if (!size || size % unit || size > b->max_size - total) {
            return refuse(pc, GPU_PARITY_ERR_SIZE);
        }
        total += size;
    }
    error = encode_setup(b, (const uint8_t *const *) data, parity, total);
    if (error) {
        return error;
    }
    /* The lengths, so that no padding starts past its chunk. */
    for (size_t g = 0; g < n_groups; g++) {
        for (i = 0; i < k; i++) {
            if (gpu_parity_pkt_used(data[i] + ofs) > group_sizes[g]) {
                return refuse(pc, GPU_PARITY_ERR_PACKET);
            }
        }
        for (i = 0; parity_dst && i < m; i++) {
            if (!parity_dst[g * m + i]) {
                return refuse(pc, GPU_ERR_INVALID);
            }
        }
        ofs += group_sizes[g];
    }
    error = pkt_groups_reserve(b, n_groups);
    if (error) {
        return refuse(pc, error);
    }
    memcpy(b->group_sizes, group_sizes, n_groups * sizeof *group_sizes);
    if (parity_dst) {
        memcpy(b->dst, parity_dst, n_groups * m * sizeof *parity_dst);
    }
    b->pkt = true;
    b->n_groups = n_groups;
    b->has_dst = parity_dst != NULL;
    b->dst_in_place = false;
    return batch_start(b, stream, false);
}

int
gpu_parity_pkt_encode_groups(struct gpu_parity *pc, uint8_t *const *data,
                             uint8_t *const *parity,
                             const size_t *group_sizes, size_t n_groups,
                             uint8_t *const *parity_dst)
{
    struct gpu_parity_batch *b;
    size_t total = 0;
    int error;

    /* The batch must hold every group; a size that overflows is refused
     * as the submission would refuse it. */
    for (size_t g = 0; group_sizes && g < n_groups; g++) {
        if (group_sizes[g] > SIZE_MAX - total) {
            return refuse(pc, GPU_PARITY_ERR_SIZE);
        }
        total += group_sizes[g];
    }
    if (size_ok(pc, total)) {
        total = coder_unit(pc);
    }
    error = pool_get(pc, total, &b);
    if (error) {
        return error;
    }
    error = gpu_parity_pkt_encode_submit(b, NULL, data, parity, group_sizes,
                                         n_groups, parity_dst);
    if (!error) {
        error = gpu_parity_wait(b);
    }
    pool_put(pc, b);
    return error;
}

bool
gpu_parity_batch_wrote_in_place(const struct gpu_parity_batch *b)
{
    return b->pkt && b->dst_in_place;
}

int
gpu_parity_pkt_from_chunk(const uint8_t *chunk, size_t chunk_size)
{
    size_t len = (size_t) chunk[0] << 8 | chunk[1];

    return len + 2 <= chunk_size ? (int) len : GPU_PARITY_ERR_PACKET;
}

int
gpu_parity_pkt_encode(struct gpu_parity *pc, const uint8_t *const *pkts,
                      const size_t *lens, uint8_t *const *parity,
                      size_t parity_room, size_t *chunk_size)
{
    unsigned int k = pc->cfg.k, i;
    const uint8_t *data[GPU_PARITY_MAX_CHUNKS];
    size_t max_len = 0, cs;
    uint8_t *scratch;
    int error;

    if (!pkts || !lens || !parity || !chunk_size) {
        return refuse(pc, GPU_ERR_INVALID);
    }
    for (i = 0; i < k; i++) {
        if (!pkts[i] && lens[i]) {
            return refuse(pc, GPU_ERR_INVALID);
        }
        if (lens[i] > max_len) {
            max_len = lens[i];
        }
    }
    cs = gpu_parity_pkt_chunk_size(pc, max_len);
    if (!cs || cs > parity_room) {
        return refuse(pc, GPU_PARITY_ERR_PACKET);
    }
    scratch = malloc((size_t) k * cs);
    if (!scratch) {
        return GPU_ERR_NOMEM;
    }
    for (i = 0; i < k; i++) {
        gpu_parity_pkt_to_chunk(scratch + (size_t) i * cs, cs, pkts[i],
                                lens[i]);
        data[i] = scratch + (size_t) i * cs;
    }
    error = gpu_parity_encode(pc, data, parity, cs);
    free(scratch);
    if (!error) {
        *chunk_size = cs;
    }
    return error;
}

int
gpu_parity_pkt_decode(struct gpu_parity *pc, const uint8_t *const *pkts,
                      const size_t *lens, uint8_t *const *out,
                      size_t *out_lens)
{
    unsigned int k = pc->cfg.k, m = pc->cfg.m, i, n_present = 0;
    size_t unit = coder_unit(pc), cs = 0;
    uint8_t erased[GPU_PARITY_MAX_CHUNKS], want[GPU_PARITY_MAX_CHUNKS];
    uint8_t *data[GPU_PARITY_MAX_CHUNKS] = { NULL };
    uint8_t *parity[GPU_PARITY_MAX_CHUNKS] = { NULL };
    bool any_missing = false;
    uint8_t *scratch;
    int error;

    if (!pkts || !lens || !out || !out_lens) {
        return refuse(pc, GPU_ERR_INVALID);
    }
    memset(erased, 0, sizeof erased);
    memset(want, 0, sizeof want);
    for (i = 0; i < k + m; i++) {
        if (!pkts[i]) {
            erased[i] = 1;
            if (i < k) {
                want[i] = 1;
                any_missing = true;
            }
            continue;
        }
        n_present++;
        if (i >= k) {
            if (cs && lens[i] != cs) {
                return refuse(pc, GPU_PARITY_ERR_PACKET);
            }
            cs = lens[i];
        }
    }
    if (!any_missing) {
        return GPU_OK;
    }
    if (n_present < k) {
        return refuse(pc, GPU_PARITY_ERR_TOO_MANY_ERASURES);
    }
    if (!cs || cs % unit) {
        return refuse(pc, GPU_PARITY_ERR_PACKET);
    }
    for (i = 0; i < k; i++) {
        if (pkts[i] && lens[i] + 2 > cs) {
            return refuse(pc, GPU_PARITY_ERR_PACKET);
        }
    }

    /* Only the first k survivors are read, and only the missing data
     * chunks are written; the others need no buffer. */
    scratch = malloc((size_t) k * cs);
    if (!scratch) {
        return GPU_ERR_NOMEM;
    }
    for (i = 0; i < k; i++) {
        data[i] = scratch + (size_t) i * cs;
        if (pkts[i]) {
            gpu_parity_pkt_to_chunk(data[i], cs, pkts[i], lens[i]);
        }
    }
    for (i = 0; i < m; i++) {
        /* Survivors are only read. */
        parity[i] = (uint8_t *) pkts[k + i];
    }
    error = decode_sync(pc, data, parity, erased, want, cs);
    if (!error) {
        for (i = 0; i < k; i++) {
            if (want[i] && gpu_parity_pkt_from_chunk(data[i], cs) < 0) {
                error = refuse(pc, GPU_PARITY_ERR_PACKET);
                break;
            }
        }
    }
    if (!error) {
        for (i = 0; i < k; i++) {
            if (want[i]) {
                size_t len = gpu_parity_pkt_from_chunk(data[i], cs);

                memcpy(out[i], data[i] + 2, len);
                out_lens[i] = len;
            }
        }
    }
    free(scratch);
    return error;
}
