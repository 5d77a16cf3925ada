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
 * parity-bench: encode and decode GB/s of gpu_services/parity against
 * Jerasure and ISA-L, in one run, on the same machine.
 *
 * For each code (default RS(10,4), RS(6,3), RS(16,4), RS(8,8) at the
 * smallest w, and RS(10,4) at w = 8):
 *   - CUDA kernel-only: chunks resident on the device, re-runs timed with
 *     CUDA events; and end-to-end: pinned host buffers in, parity (or
 *     rebuilt chunks) out, sliced over streams so copies overlap;
 *   - our CPU backend, Jerasure (bitmatrix, and its "smart" XOR schedule,
 *     the same CRS code and packet layout) and ISA-L (ec_encode_data,
 *     Reed-Solomon over GF(2^8) with table lookups, SIMD), each on one
 *     core and on every core;
 *   - our GF8 code (ISA-L's code, gpu-parity.h) on the CPU backend, as
 *     the library codes it with ISA-L built in ("ours cpu gf8 isa-l":
 *     ISA-L's own rows above are its ceiling) and with the portable code,
 *     and on CUDA (kernel-only and end-to-end).
 * Decoding erases min(m, k) data chunks, the costly case.  Throughput is
 * data bytes (k * chunk size) per second, for encode and decode alike.
 * Every implementation's output is checked before it is timed: parity
 * against our CPU backend's (Jerasure, CUDA: equal bytes; ISA-L: a
 * different code, checked by decoding), rebuilt chunks against the
 * originals.
 *
 * Usage: parity-bench [--gpu-mb N] [--cpu-mb N] [--iters N] [--threads N]
 *                     [--packetsize N] [--codes K,M[,W]:K,M[,W]...]
 *                     [--hbm-gbs N] [--no-cpu]
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

#ifdef HAVE_JERASURE
#include <jerasure.h>
#include <cauchy.h>
#endif
#ifdef HAVE_ISAL
#include <isa-l/erasure_code.h>
#endif
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "gpu_services/parity/gpu-parity.h"

struct code {
    unsigned int k, m, w;
};

static struct code codes[16];
static int n_codes;
static size_t gpu_bytes = 1024u << 20;     /* Data bytes per GPU run. */
static size_t cpu_bytes = 128u << 20;      /* Data bytes per CPU run. */
static int iters = 10;
static int n_threads;
static unsigned int packetsize = 2048;
static double hbm_gbs = 3350;              /* H100 SXM HBM3. */
static double copy_gbs, h2d_gbs, d2h_gbs;  /* Measured ceilings. */
static bool do_cpu = true;

static double
now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed | 1;

    for (size_t i = 0; i + 8 <= n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
}

static void
die(const char *what, int error)
{
    fprintf(stderr, "parity-bench: %s: %s\n", what,
            gpu_parity_strerror(error));
    exit(1);
}

/* One stripe: k + m chunks of 'size' bytes in one block of memory. */
struct stripe {
    size_t size;
    uint8_t *data[GPU_PARITY_MAX_CHUNKS];
    uint8_t *parity[GPU_PARITY_MAX_CHUNKS];
};

static void
stripe_carve(struct stripe *s, uint8_t *mem, const struct code *c,
             size_t size)
{
    s->size = size;
    for (unsigned int i = 0; i < c->k + c->m; i++) {
        uint8_t *p = mem + (size_t) i * size;

        if (i < c->k) {
            s->data[i] = p;
        } else {
            s->parity[i - c->k] = p;
        }
    }
}

static void
print_row(const struct code *c, const char *op, const char *impl,
          int cores, double data_bytes, double secs, double ref_gbs,
          const char *note)
{
    double gbs = data_bytes / secs / 1e9;
    char codename[32], cores_s[16];

    snprintf(codename, sizeof codename, "RS(%u,%u) w=%u", c->k, c->m, c->w);
    snprintf(cores_s, sizeof cores_s, cores ? "%d" : "-", cores);
    printf("%-16s %-6s %-26s %5s %10.2f", codename, op, impl, cores_s, gbs);
    if (ref_gbs > 0) {
        printf(" %8.2fx", gbs / ref_gbs);
    } else {
        printf(" %9s", "");
    }
    printf("  %s\n", note ? note : "");
    fflush(stdout);
}

/* ---- CPU peers, on one core or on every core. ---- */

enum impl {
    IMPL_OURS,
    IMPL_JERASURE,
    IMPL_JERASURE_SCHED,
    IMPL_ISAL,
    IMPL_OURS_GF8,              /* The GF8 code through our API. */
};

struct cpu_ctx {
    enum impl impl;
    bool decode;
    const struct code *c;
    struct stripe *s;
    struct gpu_parity *pc;
    struct gpu_parity *pc_gf8;  /* IMPL_OURS_GF8's coder. */
    int *bitmatrix;             /* Jerasure. */
    int **schedule;
    uint8_t *isal_tbls;         /* Encode tables. */
    uint8_t *isal_dtbls;        /* Decode tables. */
    int erasures[GPU_PARITY_MAX_CHUNKS + 1];
    unsigned int n_erasures;
    int n_threads;
    int reps;
    pthread_barrier_t barrier;
};

struct cpu_thread {
    struct cpu_ctx *ctx;
    int index;
    pthread_t thread;
};

/* Thread 'index''s share of the chunks: whole blocks of w * packetsize. */
static void
thread_range(const struct cpu_ctx *x, int index, size_t *off, size_t *len)
{
    size_t unit = (size_t) x->c->w * packetsize;
    size_t blocks = x->s->size / unit;
    size_t per = (blocks + x->n_threads - 1) / x->n_threads;
    size_t b0 = per * index < blocks ? per * index : blocks;
    size_t b1 = b0 + per < blocks ? b0 + per : blocks;

    *off = b0 * unit;
    *len = (b1 - b0) * unit;
}

static void
run_cpu_once(struct cpu_ctx *x, int index)
{
    const struct code *c = x->c;
    uint8_t *d[GPU_PARITY_MAX_CHUNKS], *p[GPU_PARITY_MAX_CHUNKS];
    size_t off, len;
    int error = 0;

    thread_range(x, index, &off, &len);
    if (!len) {
        return;
    }
    for (unsigned int i = 0; i < c->k; i++) {
        d[i] = x->s->data[i] + off;
    }
    for (unsigned int i = 0; i < c->m; i++) {
        p[i] = x->s->parity[i] + off;
    }
    switch (x->impl) {
    case IMPL_OURS:
    case IMPL_OURS_GF8: {
        struct gpu_parity *pc = x->impl == IMPL_OURS ? x->pc : x->pc_gf8;

        error = x->decode
                ? gpu_parity_decode(pc, d, p, x->erasures, x->n_erasures,
                                    len)
                : gpu_parity_encode(pc, (const uint8_t *const *) d, p, len);
        break;
    }
#ifdef HAVE_JERASURE
    case IMPL_JERASURE:
        if (x->decode) {
            error = jerasure_bitmatrix_decode(c->k, c->m, c->w, x->bitmatrix,
                                              1, x->erasures, (char **) d,
                                              (char **) p, len, packetsize);
        } else {
            jerasure_bitmatrix_encode(c->k, c->m, c->w, x->bitmatrix,
                                      (char **) d, (char **) p, len,
                                      packetsize);
        }
        break;
    case IMPL_JERASURE_SCHED:
        if (x->decode) {
            error = jerasure_schedule_decode_lazy(c->k, c->m, c->w,
                                                  x->bitmatrix, x->erasures,
                                                  (char **) d, (char **) p,
                                                  len, packetsize, 1);
        } else {
            jerasure_schedule_encode(c->k, c->m, c->w, x->schedule,
                                     (char **) d, (char **) p, len,
                                     packetsize);
        }
        break;
#endif
#ifdef HAVE_ISAL
    case IMPL_ISAL:
        if (x->decode) {
            /* Sources: the first k surviving chunks; outputs: the erased
             * data chunks (erasures are data chunks here). */
            uint8_t *src[GPU_PARITY_MAX_CHUNKS], *dst[GPU_PARITY_MAX_CHUNKS];
            unsigned int ns = 0, nd = 0;

            for (unsigned int id = 0; id < c->k + c->m && ns < c->k; id++) {
                bool erased = false;

                for (unsigned int e = 0; e < x->n_erasures; e++) {
                    erased |= x->erasures[e] == (int) id;
                }
                if (!erased) {
                    src[ns++] = id < c->k ? d[id] : p[id - c->k];
                }
            }
            for (unsigned int e = 0; e < x->n_erasures; e++) {
                dst[nd++] = d[x->erasures[e]];
            }
            ec_encode_data(len, c->k, nd, x->isal_dtbls, src, dst);
        } else {
            ec_encode_data(len, c->k, c->m, x->isal_tbls, d, p);
        }
        break;
#endif
    default:
        break;
    }
    if (error) {
        fprintf(stderr, "parity-bench: CPU peer %d failed (%d)\n", x->impl,
                error);
        exit(1);
    }
}

static void *
cpu_thread_main(void *t_)
{
    struct cpu_thread *t = t_;

    pthread_barrier_wait(&t->ctx->barrier);
    for (int r = 0; r < t->ctx->reps; r++) {
        run_cpu_once(t->ctx, t->index);
    }
    pthread_barrier_wait(&t->ctx->barrier);
    return NULL;
}

/* Seconds per pass of 'x' on 'threads' threads (reps chosen so that a
 * measurement lasts about half a second). */
static double
time_cpu(struct cpu_ctx *x, int threads)
{
    struct cpu_thread *t = calloc(threads, sizeof *t);
    double t0, secs;

    x->n_threads = threads;
    /* One untimed pass (warms caches, page tables, Jerasure's tables). */
    for (int i = 0; i < threads; i++) {
        run_cpu_once(x, i);
    }
    x->reps = 1;
    for (;;) {
        pthread_barrier_init(&x->barrier, NULL, threads + 1);
        for (int i = 0; i < threads; i++) {
            t[i].ctx = x;
            t[i].index = i;
            pthread_create(&t[i].thread, NULL, cpu_thread_main, &t[i]);
        }
        pthread_barrier_wait(&x->barrier);
        t0 = now();
        pthread_barrier_wait(&x->barrier);
        secs = now() - t0;
        for (int i = 0; i < threads; i++) {
            pthread_join(t[i].thread, NULL);
        }
        pthread_barrier_destroy(&x->barrier);
        if (secs > 0.25 || x->reps >= 64) {
            break;
        }
        x->reps *= 4;
    }
    free(t);
    return secs / x->reps;
}

#ifdef HAVE_ISAL
/* ISA-L tables for encoding (Cauchy rows) and for rebuilding the data
 * chunks in x->erasures. */
static void
isal_setup(struct cpu_ctx *x, uint8_t *enc_matrix)
{
    const struct code *c = x->c;
    unsigned int k = c->k, m = c->m, n = k + m;
    uint8_t *b = malloc(k * k), *inv = malloc(k * k), *dm = malloc(k * m);
    unsigned int r = 0;

    gf_gen_cauchy1_matrix(enc_matrix, n, k);
    x->isal_tbls = malloc(32 * k * m);
    ec_init_tables(k, m, enc_matrix + k * k, x->isal_tbls);
    for (unsigned int id = 0; id < n && r < k; id++) {
        bool erased = false;

        for (unsigned int e = 0; e < x->n_erasures; e++) {
            erased |= x->erasures[e] == (int) id;
        }
        if (!erased) {
            memcpy(b + r * k, enc_matrix + id * k, k);
            r++;
        }
    }
    if (gf_invert_matrix(b, inv, k)) {
        fprintf(stderr, "parity-bench: ISA-L matrix not invertible\n");
        exit(1);
    }
    for (unsigned int e = 0; e < x->n_erasures; e++) {
        memcpy(dm + e * k, inv + x->erasures[e] * k, k);
    }
    x->isal_dtbls = malloc(32 * k * m);
    ec_init_tables(k, x->n_erasures, dm, x->isal_dtbls);
    free(b);
    free(inv);
    free(dm);
}
#endif

/* Erases x->erasures in 's' (scribbles), so a decode has work to show. */
static void
scribble(const struct cpu_ctx *x, struct stripe *s)
{
    for (unsigned int e = 0; e < x->n_erasures; e++) {
        memset(s->data[x->erasures[e]], 0x5a, s->size);
    }
}

static void
check_data(const struct code *c, const struct stripe *s, const uint8_t *ref,
           const char *who)
{
    for (unsigned int i = 0; i < c->k; i++) {
        if (memcmp(s->data[i], ref + (size_t) i * s->size, s->size)) {
            fprintf(stderr, "parity-bench: %s: RS(%u,%u) w=%u decode "
                    "rebuilt data chunk %u wrong\n", who, c->k, c->m, c->w,
                    i);
            exit(1);
        }
    }
}

static void
bench_cpu(const struct code *c, double isal1[2])
{
    unsigned int k = c->k, m = c->m;
    size_t unit = (size_t) c->w * packetsize;
    size_t size = (cpu_bytes / k + unit - 1) / unit * unit;
    uint8_t *mem = malloc((size_t) (k + m) * size);
    uint8_t *ref = malloc((size_t) (k + m) * size);
    /* The data with the GF8 code's parity (ISA-L's code). */
    uint8_t *ref8 = malloc((size_t) (k + m) * size);
    struct gpu_parity *gf8[2];
    struct gpu_parity_config cfg;
    struct cpu_ctx x;
    struct stripe s;
    int error;
    static const struct {
        enum impl impl;
        const char *name;
        int gf8;                /* 1: ISA-L inside, 2: portable. */
    } impls[] = {
        { IMPL_ISAL, "isa-l ec_encode_data", 0 },
        { IMPL_OURS_GF8, "ours cpu gf8 isa-l", 1 },
        { IMPL_OURS_GF8, "ours cpu gf8 portable", 2 },
        { IMPL_OURS, "ours cpu", 0 },
        { IMPL_JERASURE, "jerasure bitmatrix", 0 },
        { IMPL_JERASURE_SCHED, "jerasure smart schedule", 0 },
    };

    memset(&x, 0, sizeof x);
    x.c = c;
    x.s = &s;
    stripe_carve(&s, mem, c, size);
    fill(mem, (size_t) k * size, 42);
    gpu_parity_config_init(&cfg, k, m);
    cfg.w = c->w;
    cfg.packetsize = packetsize;
    cfg.backend = GPU_PARITY_BACKEND_CPU;
    error = gpu_parity_create(&cfg, &x.pc, NULL, 0);
    if (error) {
        die("create (cpu)", error);
    }
    /* Reference parity from our CPU backend. */
    error = gpu_parity_encode(x.pc, (const uint8_t *const *) s.data,
                              s.parity, size);
    if (error) {
        die("encode (cpu)", error);
    }
    memcpy(ref, mem, (size_t) (k + m) * size);

    /* The GF8 code, with ISA-L inside (where built in) and portable; the
     * portable coder's parity is the reference for ISA-L's and ours. */
    for (int i = 0; i < 2; i++) {
        cfg.code = GPU_PARITY_CODE_GF8;
        cfg.portable = i;
        error = gpu_parity_create(&cfg, &gf8[i], NULL, 0);
        if (error) {
            die("create (cpu gf8)", error);
        }
    }
    error = gpu_parity_encode(gf8[1], (const uint8_t *const *) s.data,
                              s.parity, size);
    if (error) {
        die("encode (cpu gf8)", error);
    }
    memcpy(ref8, mem, (size_t) (k + m) * size);
    x.n_erasures = m < k ? m : k;
    for (unsigned int e = 0; e < x.n_erasures; e++) {
        x.erasures[e] = e;
    }
    x.erasures[x.n_erasures] = -1;

#ifdef HAVE_JERASURE
    int *jm = cauchy_good_general_coding_matrix(k, m, c->w);
    x.bitmatrix = jerasure_matrix_to_bitmatrix(k, m, c->w, jm);
    x.schedule = jerasure_smart_bitmatrix_to_schedule(k, m, c->w,
                                                      x.bitmatrix);
    free(jm);
#endif
#ifdef HAVE_ISAL
    uint8_t *enc_matrix = malloc((k + m) * k);
    isal_setup(&x, enc_matrix);
#endif

    for (size_t i = 0; i < sizeof impls / sizeof *impls; i++) {
        x.impl = impls[i].impl;
#ifndef HAVE_JERASURE
        if (x.impl == IMPL_JERASURE || x.impl == IMPL_JERASURE_SCHED) {
            continue;
        }
#endif
#ifndef HAVE_ISAL
        if (x.impl == IMPL_ISAL || impls[i].gf8 == 1) {
            continue;
        }
#endif
        /* ISA-L and the GF8 code share their parity, not the bitmatrix
         * code's. */
        const uint8_t *base = (x.impl == IMPL_ISAL || impls[i].gf8
                               ? ref8 : ref);

        x.pc_gf8 = impls[i].gf8 ? gf8[impls[i].gf8 - 1] : NULL;
        if (x.pc_gf8 && strcmp(gpu_parity_impl(x.pc_gf8),
                               impls[i].gf8 == 1 ? "ISA-L" : "portable")) {
            fprintf(stderr, "parity-bench: %s codes with %s\n",
                    impls[i].name, gpu_parity_impl(x.pc_gf8));
            exit(1);
        }
        for (int dec = 0; dec < 2; dec++) {
            x.decode = dec;
            /* Check once, on one core, before timing. */
            memcpy(mem, base, (size_t) (k + m) * size);
            if (dec) {
                scribble(&x, &s);
            } else {
                memset(s.parity[0], 0, size);
            }
            x.n_threads = 1;
            run_cpu_once(&x, 0);
            if (dec) {
                check_data(c, &s, ref, impls[i].name);
            } else if (memcmp(mem + (size_t) k * size,
                              base + (size_t) k * size,
                              (size_t) m * size)) {
                fprintf(stderr, "parity-bench: %s parity differs from "
                        "ours\n", impls[i].name);
                exit(1);
            }
            double t1 = time_cpu(&x, 1);
            double tn = time_cpu(&x, n_threads);
            double data = (double) k * size;
            if (x.impl == IMPL_ISAL) {
                isal1[dec] = data / t1 / 1e9;
            }
            print_row(c, dec ? "decode" : "encode", impls[i].name, 1, data,
                      t1, isal1[dec], NULL);
            print_row(c, dec ? "decode" : "encode", impls[i].name,
                      n_threads, data, tn, isal1[dec], NULL);
        }
    }
#ifdef HAVE_JERASURE
    jerasure_free_schedule(x.schedule);
    free(x.bitmatrix);
#endif
#ifdef HAVE_ISAL
    free(enc_matrix);
    free(x.isal_tbls);
    free(x.isal_dtbls);
#endif
    gpu_parity_destroy(x.pc);
    gpu_parity_destroy(gf8[0]);
    gpu_parity_destroy(gf8[1]);
    free(mem);
    free(ref);
    free(ref8);
}

/* ---- CUDA. ---- */

static int
cmp_double(const void *a_, const void *b_)
{
    double a = *(const double *) a_, b = *(const double *) b_;

    return a < b ? -1 : a > b;
}

static double
median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#ifdef HAVE_CUDA
/* Median seconds of 'n' copies of 'bytes' from 'src' to 'dst'. */
static double
time_copies(void *dst, const void *src, size_t bytes, int n)
{
    cudaEvent_t e0, e1;
    double *v = calloc(n, sizeof *v), t;

    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    for (int i = 0; i < n; i++) {
        float ms = 0;

        cudaEventRecord(e0, 0);
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, 0);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        v[i] = ms * 1e-3;
    }
    t = median(v, n);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    free(v);
    return t;
}

/* The two ceilings the coder runs against, measured here (METHOD.md):
 * a device-to-device copy (bytes read plus written) and pinned copies
 * each way over PCIe. */
static void
measure_ceilings(void)
{
    size_t big = 1u << 30, pcie = 256u << 20;
    void *d0 = NULL, *d1 = NULL;
    uint8_t *h = gpu_host_alloc(pcie);

    if (cudaMalloc(&d0, big) != cudaSuccess
        || cudaMalloc(&d1, big) != cudaSuccess || !h) {
        cudaGetLastError();
        printf("ceilings: could not allocate buffers\n");
    } else {
        cudaMemset(d0, 1, big);
        memset(h, 1, pcie);
        copy_gbs = 2.0 * big / time_copies(d1, d0, big, 9) / 1e9;
        h2d_gbs = pcie / time_copies(d0, h, pcie, 7) / 1e9;
        d2h_gbs = pcie / time_copies(h, d0, pcie, 7) / 1e9;
        printf("ceilings: device copy %.0f GB/s (read + write), PCIe "
               "pinned H2D %.1f GB/s, D2H %.1f GB/s\n", copy_gbs, h2d_gbs,
               d2h_gbs);
    }
    cudaFree(d0);
    cudaFree(d1);
    gpu_host_free(h);
}
#endif

/* Median seconds of 'n' runs of a submission already made once: as
 * re-runs timed by CUDA events if 'kernel_only', else as whole encode or
 * decode submissions timed by the host clock. */
static double
time_gpu(struct gpu_parity *pc, struct gpu_parity_batch *batch,
         bool kernel_only, const struct stripe *s, const int *erasures,
         unsigned int ne, bool decode, int n)
{
    double *v = calloc(n, sizeof *v), t;
    struct gpu_parity_stats st0, st1;
    int error;

    for (int i = 0; i < n; i++) {
        double t0 = now();

        gpu_parity_get_stats(pc, &st0);
        if (kernel_only) {
            error = gpu_parity_resubmit(batch, NULL);
        } else if (decode) {
            error = gpu_parity_decode_submit(batch, NULL,
                                             (uint8_t *const *) s->data,
                                             (uint8_t *const *) s->parity,
                                             erasures, ne, s->size);
        } else {
            error = gpu_parity_encode_submit(batch, NULL,
                                             (const uint8_t *const *)
                                             s->data,
                                             (uint8_t *const *) s->parity,
                                             s->size);
        }
        if (!error) {
            error = gpu_parity_wait(batch);
        }
        if (error) {
            die("cuda run", error);
        }
        gpu_parity_get_stats(pc, &st1);
        v[i] = kernel_only ? (st1.kernel_ns - st0.kernel_ns) * 1e-9
                           : now() - t0;
    }
    t = median(v, n);
    free(v);
    return t;
}

static void
gpu_notes(char *note, size_t size, const struct code *c, double data,
          double secs, bool kernel_only)
{
    unsigned int k = c->k, m = c->m;

    if (kernel_only) {
        /* Bytes through HBM: k chunks read, m written (decode: k
         * survivors read, min(m, k) rebuilt). */
        double moved = data * (k + m) / k;

        snprintf(note, size, "%.0f%% of datasheet HBM floor (%.0f GB/s "
                 "data), %.0f%% of measured copy ceiling",
                 100 * moved / secs / 1e9 / hbm_gbs, hbm_gbs * k / (k + m),
                 copy_gbs > 0 ? 100 * moved / secs / 1e9 / copy_gbs : 0.0);
    } else {
        /* Copies in and out overlap on the two copy engines: the floor is
         * the busier direction. */
        double in = data / (h2d_gbs > 0 ? h2d_gbs : 1);
        double out = data * m / k / (d2h_gbs > 0 ? d2h_gbs : 1);
        double floor_s = (in > out ? in : out) / 1e9;

        snprintf(note, size, "pinned buffers; %.0f%% of the PCIe floor "
                 "(%.1f GB/s data)", 100 * floor_s / secs,
                 data / floor_s / 1e9);
    }
}

/* Our CUDA backend on the code 'c' names (GPU_PARITY_CODE_BITMATRIX) or
 * on the GF8 code (ISA-L's). */
static void
bench_gpu(const struct code *c, const double isal1[2],
          enum gpu_parity_code code)
{
    bool gf8 = code == GPU_PARITY_CODE_GF8;
    unsigned int k = c->k, m = c->m;
    size_t unit = (size_t) c->w * packetsize;
    size_t size = (gpu_bytes / k + unit - 1) / unit * unit;
    double data = (double) k * size;
    struct gpu_parity_config cfg;
    struct gpu_parity *pc, *cpu;
    struct gpu_parity_batch *batch;
    struct gpu_parity_stats st1;
    uint8_t *mem, *ref;
    struct stripe s;
    int erasures[GPU_PARITY_MAX_CHUNKS];
    unsigned int ne = m < k ? m : k;
    double t;
    int error;
    char note[200];

    gpu_parity_config_init(&cfg, k, m);
    cfg.w = c->w;
    cfg.code = code;
    cfg.packetsize = packetsize;
    cfg.backend = GPU_PARITY_BACKEND_CUDA;
    cfg.profile = true;
    error = gpu_parity_create(&cfg, &pc, NULL, 0);
    if (error) {
        die("create (cuda)", error);
    }
    cfg.backend = GPU_PARITY_BACKEND_CPU;
    cfg.profile = false;
    if ((error = gpu_parity_create(&cfg, &cpu, NULL, 0))) {
        die("create (cpu)", error);
    }
    mem = gpu_host_alloc((size_t) (k + m) * size);
    ref = malloc((size_t) (k + m) * size);
    if (!mem || !ref) {
        die("host buffers", GPU_ERR_NOMEM);
    }
    stripe_carve(&s, mem, c, size);
    fill(mem, (size_t) k * size, 7);
    error = gpu_parity_batch_create(pc, size, &batch);
    if (error) {
        die("batch", error);
    }

    /* End-to-end encode once, checked against the CPU backend on the
     * first 8 blocks of every chunk (all of it would take the CPU
     * seconds). */
    memset(mem + (size_t) k * size, 0, (size_t) m * size);
    if ((error = gpu_parity_encode_submit(batch, NULL,
                                          (const uint8_t *const *) s.data,
                                          s.parity, size))
        || (error = gpu_parity_wait(batch))) {
        die("encode (cuda)", error);
    }
    {
        size_t part = 8 * unit < size ? 8 * unit : size;
        uint8_t *d[GPU_PARITY_MAX_CHUNKS], *p[GPU_PARITY_MAX_CHUNKS];

        for (unsigned int i = 0; i < k; i++) {
            d[i] = s.data[i];
        }
        for (unsigned int j = 0; j < m; j++) {
            p[j] = ref + (size_t) j * part;
        }
        gpu_parity_encode(cpu, (const uint8_t *const *) d, p, part);
        for (unsigned int j = 0; j < m; j++) {
            if (memcmp(p[j], s.parity[j], part)) {
                fprintf(stderr, "parity-bench: CUDA parity %u differs from "
                        "the CPU backend's\n", j);
                exit(1);
            }
        }
    }
    t = time_gpu(pc, batch, true, &s, NULL, 0, false, iters);
    gpu_notes(note, sizeof note, c, data, t, true);
    print_row(c, "encode", gf8 ? "cuda gf8 kernel-only" : "cuda kernel-only",
              0, data, t, isal1[0], note);
    t = time_gpu(pc, batch, false, &s, NULL, 0, false, iters / 2);
    gpu_notes(note, sizeof note, c, data, t, false);
    print_row(c, "encode", gf8 ? "cuda gf8 end-to-end" : "cuda end-to-end",
              0, data, t, isal1[0], note);

    /* Decode: erase the first min(m, k) data chunks, rebuild once and
     * check, then time. */
    memcpy(ref, mem, (size_t) ne * size);
    for (unsigned int e = 0; e < ne; e++) {
        erasures[e] = e;
        memset(s.data[e], 0x5a, size);
    }
    if ((error = gpu_parity_decode_submit(batch, NULL, s.data, s.parity,
                                          erasures, ne, size))
        || (error = gpu_parity_wait(batch))) {
        die("decode (cuda)", error);
    }
    for (unsigned int e = 0; e < ne; e++) {
        if (memcmp(s.data[e], ref + (size_t) e * size, size)) {
            fprintf(stderr, "parity-bench: CUDA decode rebuilt chunk %u "
                    "wrong\n", e);
            exit(1);
        }
    }
    t = time_gpu(pc, batch, true, &s, erasures, ne, true, iters);
    gpu_notes(note, sizeof note, c, data, t, true);
    print_row(c, "decode", gf8 ? "cuda gf8 kernel-only" : "cuda kernel-only",
              0, data, t, isal1[1], note);
    t = time_gpu(pc, batch, false, &s, erasures, ne, true, iters / 2);
    gpu_notes(note, sizeof note, c, data, t, false);
    print_row(c, "decode", gf8 ? "cuda gf8 end-to-end" : "cuda end-to-end",
              0, data, t, isal1[1], note);

    gpu_parity_get_stats(pc, &st1);
    /* The last submission was an end-to-end decode. */
    printf("# k=%u m=%u: CUDA runtime calls of one end-to-end decode: %"
           PRIu64"\n", k, m, gpu_parity_batch_runtime_calls(batch));
    if (st1.n_fallbacks) {
        printf("WARNING: %" PRIu64 " CUDA submissions fell back to the "
               "CPU\n", st1.n_fallbacks);
    }
    gpu_parity_batch_destroy(batch);
    gpu_parity_destroy(pc);
    gpu_parity_destroy(cpu);
    gpu_host_free(mem);
    free(ref);
}

static void
parse_codes(const char *s)
{
    n_codes = 0;
    while (*s && n_codes < 16) {
        struct code c = { 0, 0, 0 };
        int used = 0;

        if (sscanf(s, "%u,%u,%u%n", &c.k, &c.m, &c.w, &used) < 3) {
            c.w = 0;
            if (sscanf(s, "%u,%u%n", &c.k, &c.m, &used) < 2) {
                fprintf(stderr, "parity-bench: bad --codes at \"%s\"\n", s);
                exit(1);
            }
        }
        codes[n_codes++] = c;
        s += used;
        if (*s == ':') {
            s++;
        }
    }
}

int
main(int argc, char *argv[])
{
    struct gpu_device_info info;
    const char *why = NULL;
    bool cuda;

    n_threads = sysconf(_SC_NPROCESSORS_ONLN);
    parse_codes("10,4:6,3:16,4:8,8:10,4,8");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!strcmp(a, "--no-cpu")) {
            do_cpu = false;
            continue;
        }
        if (!v) {
            fprintf(stderr, "parity-bench: %s needs a value\n", a);
            return 1;
        }
        i++;
        if (!strcmp(a, "--gpu-mb")) {
            gpu_bytes = strtoull(v, NULL, 0) << 20;
        } else if (!strcmp(a, "--cpu-mb")) {
            cpu_bytes = strtoull(v, NULL, 0) << 20;
        } else if (!strcmp(a, "--iters")) {
            iters = atoi(v) < 2 ? 2 : atoi(v);
        } else if (!strcmp(a, "--threads")) {
            n_threads = atoi(v) < 1 ? 1 : atoi(v);
        } else if (!strcmp(a, "--packetsize")) {
            packetsize = atoi(v);
        } else if (!strcmp(a, "--codes")) {
            parse_codes(v);
        } else if (!strcmp(a, "--hbm-gbs")) {
            hbm_gbs = atof(v);
        } else {
            fprintf(stderr, "parity-bench: unknown option %s\n", a);
            return 1;
        }
    }
    for (int i = 0; i < n_codes; i++) {
        struct code *c = &codes[i];
        int error;
        char err[160];

        if (!c->w) {
            c->w = 1;
            while (c->w < 8 && (1u << c->w) < c->k + c->m) {
                c->w++;
            }
        }
        error = gpu_parity_check_params(c->k, c->m, c->w, packetsize, err,
                                        sizeof err);
        if (error) {
            fprintf(stderr, "parity-bench: %s\n", err);
            return 1;
        }
    }

    printf("parity-bench:");
    for (int i = 0; i < argc; i++) {
        printf(" %s", argv[i]);
    }
    printf("\n");
    cuda = gpu_parity_cuda_available();
    if (cuda && !gpu_device_query(0, &info)) {
        printf("device: %s (sm_%d%d, %d SMs, %.0f GiB)\n", info.name,
               info.cc_major, info.cc_minor, info.multiprocessors,
               info.total_mem / 1073741824.0);
    } else {
        gpu_device_count(&why);
        printf("device: none (%s); CPU rows only\n",
               why ? why : "no CUDA device");
    }
#ifdef HAVE_CUDA
    if (cuda) {
        measure_ceilings();
    }
#endif
    printf("cpu: %ld cores online, %d threads for the all-cores rows\n",
           sysconf(_SC_NPROCESSORS_ONLN), n_threads);
    printf("peers: %s; %s\n",
#ifdef HAVE_JERASURE
           "Jerasure 2 (same Cauchy code and packet layout: "
           "bitmatrix and smart-schedule encode/decode)",
#else
           "Jerasure: not built in",
#endif
#ifdef HAVE_ISAL
           "ISA-L ec_encode_data (RS over GF(2^8), Cauchy matrix)"
#else
           "ISA-L: not built in"
#endif
           );
    printf("packetsize %u; GPU runs %zu MiB of data, CPU runs %zu MiB; "
           "HBM floor at %.0f GB/s\n", packetsize, gpu_bytes >> 20,
           cpu_bytes >> 20, hbm_gbs);
    printf("GB/s are data bytes (k * chunk) per second; ratios are to "
           "ISA-L on one core.\n\n");
    printf("%-16s %-6s %-26s %5s %10s %9s  %s\n", "code", "op", "impl",
           "cores", "GB/s", "vs isa-l1", "note");

    for (int i = 0; i < n_codes; i++) {
        double isal1[2] = { 0, 0 };

        if (do_cpu) {
            bench_cpu(&codes[i], isal1);
        }
        if (cuda) {
            bench_gpu(&codes[i], isal1, GPU_PARITY_CODE_BITMATRIX);
            bench_gpu(&codes[i], isal1, GPU_PARITY_CODE_GF8);
        }
    }
    return 0;
}
