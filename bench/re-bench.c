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
 * re-bench: gpu_services/re chunking Gbit/s and bandwidth saving, with
 * the peers measured in the same run.
 *
 * 1. Chunking, per payload size (64 .. 1500 bytes, and an Internet-like
 *    mix), random payload bytes packed back to back:
 *      - CPU Rabin (the CPU backend) on one core and on every core;
 *      - CUDA kernel-only (payloads resident on the device: the grouping
 *        and chunk kernels, re-run), with and without grouping by length;
 *      - CUDA end-to-end: offsets and payloads copied in from pinned
 *        memory, cuts copied out, several streams in flight.
 *    CUDA cuts are checked against the CPU's.
 * 2. Bandwidth saving: a trace of real files under /usr/share/doc, each
 *    sent several times with small edits, cut into 1460-byte payloads,
 *    through the encoder and decoder (every payload checked byte for
 *    byte), against an ideal dedup of the whole trace: every distinct
 *    content-defined chunk counted once, with an unbounded cache.
 *
 *    The decoder's rate is timed beside the encoder's.
 *
 *    Then the same payloads chunked ahead in batches (CPU, CUDA) and
 *    encoded two ways: with the encoder hashing (old) and with the
 *    batch's hashes and prefetched probes (new), both checked against
 *    the inline run's shims.  And the packet helpers the switch calls,
 *    on the payloads in Ethernet/IPv4/TCP frames chunked ahead:
 *    gpu_re_encode_packet_chunks() and gpu_re_decode_packets() in
 *    bursts of 32, ns a frame in thread CPU time, every frame checked.
 *
 * 3. With --latency N[,N...]: only the round trip of one call as
 *    re_encode's gathers make it in the switch (N payloads of the
 *    Internet mix's sizes, cut from the trace, read in place from
 *    registered memory), with the device's encoding and with chunking and
 *    hashing alone: the mean of --latency-rounds calls, one out at a
 *    time, for each chunker mode of --latency-modes ("packet": a thread a
 *    packet; a number: segment mode with that many bytes a thread;
 *    default "packet,256"), the encoding calls launched as each of
 *    --latency-launch says ("host": by the submitting thread, the
 *    default; "device": by the encoder's scheduler on the device, as
 *    re_encode's are).
 *
 * Usage: re-bench [--mb N] [--iters N] [--streams N] [--threads N]
 *                 [--trace-mb N] [--cache-mb N] [--packet-passes N]
 *                 [--seed S] [--latency N[,N...]] [--latency-rounds N]
 *                 [--latency-modes packet|SEGMENT[,...]]
 *                 [--latency-launch host|device[,...]]
 * (--mb 0: no chunking table, the trace alone; --packet-passes: the
 * packet helpers' run that many times, each with a fresh encoder and
 * decoder, for steadier figures or a profile.)
 */
#include <config.h>

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpu_services/re/gpu-re.h"

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static double
now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread: the packet helpers' figures, steadier
 * than wall time on a machine shared with other work (time the thread
 * waits for its core is not counted; caches shared with others still
 * are). */
static double
cpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 1;

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

/* 0: the mix (half 64 B, a sixth in between, a third 1400-1500 B). */
static uint32_t
pkt_size(uint32_t size)
{
    uint32_t r;

    if (size) {
        return size;
    }
    r = below(100);
    return r < 50 ? 64 : r < 67 ? 65 + below(1336) : 1400 + below(101);
}

/* --latency: the gathers' sizes to time, and how many calls each. */
static char *latency_sizes;
static int latency_rounds = 500;
/* The generator's state when the latency runs began: each run of a size
 * draws the same payloads from it, whoever launches. */
static uint64_t latency_seed;
/* --latency-modes: the chunker's modes to time, "packet" (a thread a
 * packet, grouped by length) or a segment mode's bytes a thread. */
static char *latency_modes;
/* --latency-launch: who launches the encoding calls. */
static bool latency_launch_host = true, latency_launch_device;

struct workload {
    uint8_t *data;              /* Pinned. */
    uint32_t *offsets;          /* Pinned. */
    size_t n, bytes;
};

static void
workload_make(struct workload *w, uint32_t size, size_t bytes)
{
    size_t cap = bytes / (size ? size : 64) + 2;

    w->offsets = gpu_host_alloc((cap + 1) * sizeof *w->offsets);
    w->data = gpu_host_alloc(bytes + 1600);
    w->offsets[0] = 0;
    w->n = 0;
    while (w->n < cap && w->offsets[w->n] < bytes) {
        w->offsets[w->n + 1] = w->offsets[w->n] + pkt_size(size);
        w->n++;
    }
    w->bytes = w->offsets[w->n];
    for (size_t i = 0; i + 8 <= w->bytes; i += 8) {
        uint64_t v = rnd();

        memcpy(w->data + i, &v, 8);
    }
}

static void
workload_free(struct workload *w)
{
    gpu_host_free(w->data);
    gpu_host_free(w->offsets);
}

/* ---- CPU peers. ---- */

struct cpu_job {
    struct gpu_re_chunker *c;
    const struct workload *w;
    size_t from, to;            /* Packets. */
    int iters;
    double secs;
};

static void *
cpu_job_run(void *arg)
{
    struct cpu_job *j = arg;
    struct gpu_re_batch *b;
    size_t nb = j->w->offsets[j->to] - j->w->offsets[j->from];
    double t0;

    if (gpu_re_batch_create(j->c, j->to - j->from + 1, nb + 1, false, &b)) {
        return NULL;
    }
    t0 = now();
    for (int i = 0; i < j->iters; i++) {
        gpu_re_batch_submit(b, NULL, j->w->data, j->w->offsets + j->from,
                            j->to - j->from);
        gpu_re_batch_wait(b);
    }
    j->secs = now() - t0;
    gpu_re_batch_destroy(b);
    return NULL;
}

/* Gbit/s of the CPU chunker over 'w' on 'threads' threads, 'iters'
 * passes. */
static double
cpu_gbps_n(struct gpu_re_chunker *c, const struct workload *w, int threads,
           int iters)
{
    struct cpu_job *jobs = calloc(threads, sizeof *jobs);
    pthread_t *tids = calloc(threads, sizeof *tids);
    double t0 = now(), secs;

    for (int t = 0; t < threads; t++) {
        jobs[t].c = c;
        jobs[t].w = w;
        jobs[t].from = w->n * t / threads;
        jobs[t].to = w->n * (t + 1) / threads;
        jobs[t].iters = iters;
        pthread_create(&tids[t], NULL, cpu_job_run, &jobs[t]);
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(tids[t], NULL);
    }
    secs = now() - t0;
    free(jobs);
    free(tids);
    return w->bytes * 8.0 * iters / secs / 1e9;
}

/* The same, with enough passes for at least a quarter second. */
static double
cpu_gbps(struct gpu_re_chunker *c, const struct workload *w, int threads)
{
    double g = cpu_gbps_n(c, w, threads, 1);
    double secs = w->bytes * 8.0 / (g * 1e9);
    int iters = secs >= 0.25 ? 1 : (int) (0.25 / secs) + 1;

    return iters > 1 ? cpu_gbps_n(c, w, threads, iters) : g;
}

/* ---- CUDA. ---- */

struct gpu_result {
    double kern, kern_nosort, kern_seg, e2e;
    bool ok;
};

static double
kernel_only(struct gpu_re_chunker *c, const struct workload *w, int iters)
{
    struct gpu_re_batch *b;
    double t0, secs;

    if (gpu_re_batch_create(c, w->n, w->bytes, false, &b)) {
        return 0;
    }
    gpu_re_batch_submit(b, NULL, w->data, w->offsets, w->n);
    gpu_re_batch_wait(b);
    for (int i = 0; i < 2; i++) {       /* Warm up. */
        gpu_re_batch_resubmit(b, NULL);
        gpu_re_batch_wait(b);
    }
    t0 = now();
    for (int i = 0; i < iters; i++) {
        gpu_re_batch_resubmit(b, NULL);
        gpu_re_batch_wait(b);
    }
    secs = now() - t0;
    gpu_re_batch_destroy(b);
    return w->bytes * 8.0 * iters / secs / 1e9;
}

static bool
same_cuts(struct gpu_re_batch *b, const struct workload *w,
          uint32_t min_chunk, const struct gpu_re_params *p)
{
    const uint16_t *ends;
    uint16_t e[65536];

    gpu_re_batch_results(b, &ends, NULL);
    for (size_t i = 0; i < w->n; i++) {
        size_t len = w->offsets[i + 1] - w->offsets[i];
        size_t k = gpu_re_chunk_cpu(p, w->data + w->offsets[i], len, e, NULL,
                                    65536);

        if (memcmp(e, ends + gpu_re_slot_base(w->offsets, i, min_chunk),
                   k * sizeof *e)) {
            return false;
        }
    }
    return true;
}

static void
gpu_run(const struct gpu_re_params *p, const struct workload *w,
        int iters, int n_streams, struct gpu_result *res)
{
    struct gpu_re_chunker_config cfg;
    struct gpu_re_chunker *c, *cn, *cs;
    struct gpu_re_batch *b[16];
    struct gpu_stream *s[16];
    double t0, secs;

    memset(res, 0, sizeof *res);
    gpu_re_chunker_config_init(&cfg);
    cfg.params = *p;
    cfg.backend = GPU_RE_BACKEND_CUDA;
    if (gpu_re_chunker_create(&cfg, &c)) {
        return;
    }
    cfg.sort = false;
    if (gpu_re_chunker_create(&cfg, &cn)) {
        gpu_re_chunker_destroy(c);
        return;
    }
    cfg.remap = true;
    if (gpu_re_chunker_create(&cfg, &cs)) {
        gpu_re_chunker_destroy(c);
        gpu_re_chunker_destroy(cn);
        return;
    }
    res->kern = kernel_only(c, w, iters * 4);
    res->kern_nosort = kernel_only(cn, w, iters * 4);
    res->kern_seg = kernel_only(cs, w, iters * 4);

    /* The segment mode's cuts too. */
    struct gpu_re_batch *bs;
    if (!gpu_re_batch_create(cs, w->n, w->bytes, false, &bs)) {
        gpu_re_batch_submit(bs, NULL, w->data, w->offsets, w->n);
        gpu_re_batch_wait(bs);
        res->ok = same_cuts(bs, w, p->min_chunk, p);
        gpu_re_batch_destroy(bs);
    }
    gpu_re_chunker_destroy(cs);

    /* End-to-end: each stream has its own batch over the same host
     * buffers (the copies are what is measured). */
    for (int i = 0; i < n_streams; i++) {
        gpu_stream_create(&s[i]);
        gpu_re_batch_create(c, w->n, w->bytes, false, &b[i]);
    }
    for (int i = 0; i < n_streams; i++) {
        gpu_re_batch_submit(b[i], s[i], w->data, w->offsets, w->n);
    }
    for (int i = 0; i < n_streams; i++) {
        gpu_re_batch_wait(b[i]);
        res->ok = res->ok && same_cuts(b[i], w, p->min_chunk, p);
    }
    t0 = now();
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n_streams; i++) {
            gpu_re_batch_wait(b[i]);
            gpu_re_batch_submit(b[i], s[i], w->data, w->offsets, w->n);
        }
    }
    for (int i = 0; i < n_streams; i++) {
        gpu_re_batch_wait(b[i]);
    }
    secs = now() - t0;
    res->e2e = w->bytes * 8.0 * iters * n_streams / secs / 1e9;

    struct gpu_re_chunker_stats st;
    gpu_re_chunker_get_stats(c, &st);
    res->ok = res->ok && !st.n_fallbacks;
    for (int i = 0; i < n_streams; i++) {
        gpu_re_batch_destroy(b[i]);
        gpu_stream_destroy(s[i]);
    }
    gpu_re_chunker_destroy(cn);
    gpu_re_chunker_destroy(c);
}

/* The two ceilings METHOD.md asks to measure rather than quote: device
 * memory bandwidth (a 1 GiB device-to-device copy, bytes read plus
 * written) and PCIe host-to-device from pinned memory. */
static void
ceilings(void)
{
#ifdef HAVE_CUDA
    size_t n = 1ull << 30;
    void *a = NULL, *b = NULL, *h = gpu_host_alloc(256 << 20);
    cudaEvent_t e0, e1;
    float ms_d2d = 0, ms_h2d = 0;

    if (cudaMalloc(&a, n) || cudaMalloc(&b, n) || !h
        || cudaEventCreate(&e0) || cudaEventCreate(&e1)) {
        printf("ceilings: cannot allocate\n");
        cudaFree(a);
        cudaFree(b);
        gpu_host_free(h);
        cudaGetLastError();
        return;
    }
    memset(h, 1, 256 << 20);
    cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e0, 0);
    for (int i = 0; i < 5; i++) {
        cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
    }
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    cudaEventElapsedTime(&ms_d2d, e0, e1);
    cudaMemcpy(a, h, 256 << 20, cudaMemcpyHostToDevice);
    cudaEventRecord(e0, 0);
    for (int i = 0; i < 5; i++) {
        cudaMemcpy(a, h, 256 << 20, cudaMemcpyHostToDevice);
    }
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    cudaEventElapsedTime(&ms_h2d, e0, e1);
    printf("ceilings: device memory %.0f GB/s (D2D copy, read+write), "
           "PCIe H2D %.1f GB/s = %.0f Gbit/s (pinned)\n",
           2.0 * 5 * n / (ms_d2d * 1e-3) / 1e9,
           5.0 * (256 << 20) / (ms_h2d * 1e-3) / 1e9,
           8 * 5.0 * (256 << 20) / (ms_h2d * 1e-3) / 1e9);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    gpu_host_free(h);
#endif
}

/* ---- The redundant trace. ---- */

struct files {
    uint8_t *data;
    size_t len;
    size_t *starts;             /* File i is data[starts[i] .. starts[i+1]). */
    size_t n;
};

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Regular files of 1 KB .. 64 KB found under 'root' (sorted walk), up to
 * 'max' bytes. */
static void
collect(const char *root, struct files *f, size_t max, int depth)
{
    DIR *d = opendir(root);
    char **names = NULL;
    size_t nn = 0, cap = 0;
    struct dirent *de;

    if (!d || depth > 4) {
        if (d) {
            closedir(d);
        }
        return;
    }
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') {
            continue;
        }
        if (nn == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
        }
        names[nn++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp_str);
    for (size_t i = 0; i < nn; i++) {
        char path[4096];
        struct stat st;

        snprintf(path, sizeof path, "%s/%s", root, names[i]);
        if (f->len < max && !lstat(path, &st)) {
            if (S_ISDIR(st.st_mode)) {
                collect(path, f, max, depth + 1);
            } else if (S_ISREG(st.st_mode) && st.st_size >= 1024
                       && st.st_size <= 65536
                       && f->len + st.st_size <= max) {
                FILE *fp = fopen(path, "rb");

                if (fp) {
                    size_t k = fread(f->data + f->len, 1, st.st_size, fp);

                    fclose(fp);
                    f->starts = realloc(f->starts,
                                        (f->n + 2) * sizeof *f->starts);
                    f->starts[f->n] = f->len;
                    f->len += k;
                    f->starts[++f->n] = f->len;
                }
            }
        }
        free(names[i]);
    }
    free(names);
}

/* A hash set of 128-bit chunk hashes, for the ideal dedup. */
struct hset {
    struct gpu_re_hash *v;
    size_t mask, n;
};

static bool
hset_add(struct hset *s, struct gpu_re_hash h)
{
    if (!h.hi && !h.lo) {
        h.lo = 1;
    }
    if (2 * (s->n + 1) > s->mask + 1) {
        struct hset t = { calloc(2 * (s->mask + 1), sizeof *t.v),
                          2 * (s->mask + 1) - 1, 0 };

        for (size_t i = 0; i <= s->mask; i++) {
            if (s->v[i].hi || s->v[i].lo) {
                hset_add(&t, s->v[i]);
            }
        }
        free(s->v);
        *s = t;
    }
    for (size_t i = h.lo & s->mask;; i = (i + 1) & s->mask) {
        if (!s->v[i].hi && !s->v[i].lo) {
            s->v[i] = h;
            s->n++;
            return true;
        }
        if (s->v[i].hi == h.hi && s->v[i].lo == h.lo) {
            return false;
        }
    }
}

/* Folds one encode result and its output bytes into 'digest', to check
 * that two encoding paths gave exactly the same shims. */
static void
digest_add(uint64_t *digest, int result, const uint8_t *out, size_t len)
{
    struct gpu_re_hash h = gpu_re_hash128(out, len);

    *digest = (*digest ^ h.lo ^ (uint64_t) result << 56)
              * 0x100000001b3ULL;
}

/* Builds an Ethernet/IPv4/TCP frame around payload 'p' of 'len' bytes at
 * 'f' and returns its length (the IPv4 checksum canonical, as the packet
 * helpers want it). */
static size_t
frame_build(uint8_t *f, const uint8_t *p, size_t len, uint32_t seq)
{
    static const uint8_t eth[14] = {
        0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00,
    };
    uint8_t *ip = f + 14, *tcp = ip + 20;
    size_t tot = 20 + 20 + len;
    uint32_t sum = 0;

    memcpy(f, eth, sizeof eth);
    memset(ip, 0, 40);
    ip[0] = 0x45;
    ip[2] = tot >> 8;
    ip[3] = tot;
    ip[6] = 0x40;               /* DF. */
    ip[8] = 64;
    ip[9] = 6;
    memcpy(ip + 12, "\x0a\x00\x00\x01\x0a\x00\x00\x02", 8);
    for (int i = 0; i < 20; i += 2) {
        sum += ip[i] << 8 | ip[i + 1];
    }
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum = ~sum & 0xffff;
    ip[10] = sum >> 8;
    ip[11] = sum;
    tcp[0] = 0x9c;
    tcp[1] = 0x40;
    tcp[3] = 80;
    memcpy(tcp + 4, &seq, 4);
    tcp[12] = 5 << 4;
    tcp[13] = 0x18;
    tcp[14] = 0xff;
    memcpy(tcp + 20, p, len);
    return 14 + tot;
}

/* The packet helpers the switch's actions call, on the trace's payloads
 * in Ethernet/IPv4/TCP frames chunked ahead in batches (as re_encode's
 * gathers are): gpu_re_encode_packet_chunks() on each frame, then
 * gpu_re_decode_packet() on what it made, each timed on its own, every
 * decoded frame checked against the original byte for byte.  'chunker'
 * chunks (its time not counted); 'e' and 'd' are fresh. */
static void
packet_bench(struct gpu_re_chunker *chunker, const struct gpu_re_config *cfg,
             const uint8_t *tdata, const uint32_t *toffs, size_t np,
             bool on_device, size_t B)
{
    const size_t stride = 2048, cap = 1522;
    uint8_t *frames = malloc(B * stride), *orig = malloc(2048);
    size_t *lens = malloc(B * sizeof *lens);
    uint32_t *rooms = malloc(B * sizeof *rooms);
    struct gpu_re_config ecfg = *cfg;
    struct gpu_re_encoder *e;
    struct gpu_re_decoder *d;
    struct gpu_re_batch *b;
    double enc_secs = 0, dec_secs = 0, call_secs = 0, t0;
    uint64_t frame_bytes = 0, bad = 0, shims = 0, calls = 0;
    struct gpu_re_stats es, ds;

    ecfg.device_encode = on_device;
    if (gpu_re_encoder_create(&ecfg, on_device ? chunker : NULL, &e)) {
        printf("  packets: no encoder%s\n", on_device ? " on the device"
                                                       : "");
        return;
    }
    if (on_device ? gpu_re_encoder_batch_create(e, B, B * 1460, &b)
        : gpu_re_batch_create_flags(chunker, B, B * 1460,
                                    GPU_RE_BATCH_HASHES, &b)) {
        gpu_re_encoder_destroy(e);
        return;
    }
    gpu_re_decoder_create(cfg, &d);
    for (size_t i = 0; i < np; i += B) {
        size_t n = np - i < B ? np - i : B, ahead = 0;

        for (size_t j = 0; j < n; j++) {
            lens[j] = frame_build(frames + j * stride, tdata + toffs[i + j],
                                  toffs[i + j + 1] - toffs[i + j], i + j);
            rooms[j] = toffs[i + j + 1] - toffs[i + j] + cap - lens[j];
            frame_bytes += lens[j];
        }
        t0 = now();
        if (on_device) {
            /* Chunking, hashing and encoding: one graph launch. */
            gpu_re_encoder_submit(e, b, tdata, toffs + i, NULL, rooms, n);
        } else {
            gpu_re_batch_submit(b, NULL, tdata, toffs + i, n);
        }
        gpu_re_batch_wait(b);
        call_secs += now() - t0;
        calls++;

        t0 = cpu_now();
        for (size_t j = 0; j < n; j++) {
            struct gpu_re_chunks chunks;

            if (on_device) {
                shims += gpu_re_encode_packet_result(e, b, j,
                                                     frames + j * stride,
                                                     &lens[j], cap)
                         == GPU_RE_SHIM;
                continue;
            }
            ahead = gpu_re_encoder_prefetch_batch(e, b, j, ahead, n);
            gpu_re_batch_chunks(b, j, &chunks);
            shims += gpu_re_encode_packet_chunks(e, frames + j * stride,
                                                 &lens[j], cap, &chunks)
                     == GPU_RE_SHIM;
        }
        enc_secs += cpu_now() - t0;

        /* In the switch's bursts of 32, through the burst call. */
        t0 = cpu_now();
        for (size_t j = 0; j < n; j += 32) {
            size_t nb = n - j < 32 ? n - j : 32, caps[32];
            uint8_t *ptrs[32];
            int results[32];

            for (size_t k = 0; k < nb; k++) {
                ptrs[k] = frames + (j + k) * stride;
                caps[k] = stride;
            }
            gpu_re_decode_packets(d, ptrs, &lens[j], caps, nb, results);
        }
        dec_secs += cpu_now() - t0;

        for (size_t j = 0; j < n; j++) {
            size_t ol = frame_build(orig, tdata + toffs[i + j],
                                    toffs[i + j + 1] - toffs[i + j], i + j);

            bad += ol != lens[j] || memcmp(orig, frames + j * stride, ol);
        }
    }
    gpu_re_encoder_get_stats(e, &es);
    gpu_re_decoder_get_stats(d, &ds);
    printf("  packets (Ethernet/IPv4/TCP, %zu frames, chunked ahead on %s "
           "in batches of %zu, chunking not counted; thread CPU time)%s:\n",
           np, gpu_re_backend_name(gpu_re_chunker_backend(chunker)), B,
           on_device ? ", ENCODED ON THE DEVICE (encoder=device): the host "
           "writes each shim into its frame" : ", encoded on the host");
    printf("    %s (submit to results, wall clock) %.1f us a batch of "
           "%zu, %.2f Gbit/s of frames\n",
           on_device ? "chunking, hashing and encoding call" : "chunking "
           "and hashing call", call_secs * 1e6 / calls, B,
           frame_bytes * 8.0 / call_secs / 1e9);
    printf("    encode %.0f ns/packet (%.2f Mpps, %.2f Gbit/s of frames); "
           "decode %.0f ns/packet (%.2f Mpps, %.2f Gbit/s); %" PRIu64
           " shims, saving %.1f%%; %" PRIu64 " undecodable, %" PRIu64
           " frames not restored byte for byte\n",
           enc_secs * 1e9 / np, np / enc_secs / 1e6,
           frame_bytes * 8.0 / enc_secs / 1e9, dec_secs * 1e9 / np,
           np / dec_secs / 1e6, frame_bytes * 8.0 / dec_secs / 1e9, shims,
           100.0 * (1 - (double) es.bytes_out / es.bytes_in),
           ds.undecodable, bad);
    gpu_re_batch_destroy(b);
    gpu_re_encoder_destroy(e);
    gpu_re_decoder_destroy(d);
    free(frames);
    free(orig);
    free(lens);
    free(rooms);
}

/* The round trip of one gather as re_encode makes it in the switch: 'n'
 * payloads of the Internet mix's sizes less their 54 bytes of headers
 * (at least one byte), cut one after another from the trace's bytes
 * 'tdata' (so the encoder finds the references the switch's redundant
 * traffic gives it), all read in place from 'tdata' (registered memory,
 * as DPDK's is in the switch); submitted and waited for 'rounds' times
 * after a warm-up, one call out at a time.  'on_device': the device's
 * encoding (encoder=device); else chunking and hashing alone
 * (encoder=host, the CPU backend's cuts on the GPU). */
static void
latency_one(struct gpu_re_chunker *ch, const struct gpu_re_config *cfg,
            const uint8_t *tdata, size_t tbytes, size_t n, bool on_device,
            int rounds)
{
    uint32_t *offs = gpu_host_alloc((n + 1) * sizeof *offs);
    uint32_t *rooms = malloc(n * sizeof *rooms);
    const uint8_t **srcs = malloc(n * sizeof *srcs);
    struct gpu_re_config ecfg = *cfg;
    struct gpu_re_encoder *e = NULL;
    struct gpu_re_batch *b = NULL;
    double submit_secs = 0, total_secs = 0, t0, t1;
    struct gpu_re_chunker_stats before, after;
    size_t cursor = 0;

    ecfg.device_encode = on_device;
    rng_state = latency_seed + n;
    offs[0] = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t size = pkt_size(0);
        uint32_t len = size > 54 ? size - 54 : 1;

        if (cursor + len > tbytes) {
            cursor = 0;
        }
        srcs[i] = tdata + cursor;
        cursor += len;
        offs[i + 1] = offs[i] + len;
        rooms[i] = len + 64;
    }
    if (on_device
        ? gpu_re_encoder_create(&ecfg, ch, &e)
          || gpu_re_encoder_batch_create(e, n, n * 1460, &b)
        : gpu_re_batch_create_flags(ch, n, n * 1460, GPU_RE_BATCH_HASHES,
                                    &b)) {
        printf("  %zu payloads: no %s batch\n", n,
               on_device ? "encoding" : "chunking");
        goto out;
    }
    gpu_re_chunker_get_stats(ch, &before);
    for (int r = -20; r < rounds; r++) {
        int error;

        t0 = now();
        error = (on_device
                 ? gpu_re_encoder_submit(e, b, tdata, offs,
                                         (const uint8_t *const *) srcs,
                                         rooms, n)
                 : gpu_re_batch_submit_in_place(
                       b, NULL, tdata, offs,
                       (const uint8_t *const *) srcs, n));
        t1 = now();
        if (!error) {
            error = gpu_re_batch_wait(b);
        }
        if (error) {
            printf("  %zu payloads: call failed (%d)\n", n, error);
            goto out;
        }
        if (r >= 0) {
            submit_secs += t1 - t0;
            total_secs += now() - t0;
        }
    }
    gpu_re_chunker_get_stats(ch, &after);
    printf("  %-6s %5zu payloads (%6.1f kB): submit %6.1f us, round trip "
           "%7.1f us, %6.1f Gbit/s of payload; %" PRIu64 " graph "
           "launches (%" PRIu64 " by the device), %" PRIu64 " redone on "
           "the CPU\n",
           !on_device ? "chunk"
           : after.n_device_launches > before.n_device_launches ? "enc-d"
           : "encode", n, offs[n] / 1e3,
           submit_secs * 1e6 / rounds, total_secs * 1e6 / rounds,
           offs[n] * 8.0 * rounds / total_secs / 1e9,
           after.n_graph_launches - before.n_graph_launches,
           after.n_device_launches - before.n_device_launches,
           after.n_fallbacks - before.n_fallbacks);
out:
    gpu_re_batch_destroy(b);
    gpu_re_encoder_destroy(e);
    gpu_host_free(offs);
    free(rooms);
    free(srcs);
}

/* --latency: each size's round trip, with and without the device's
 * encoding, on a CUDA chunker in each of its modes (a thread a packet,
 * grouped by length; segment mode). */
static void
latency_bench(const struct gpu_re_config *cfg, const uint8_t *tdata,
              size_t tbytes)
{
    size_t size = (tbytes + 4095) & ~(size_t) 4095;
    uint8_t *registered = NULL;

    if (!gpu_re_cuda_available() || !size) {
        printf("latency: no CUDA device\n");
        return;
    }
    /* The switch's payloads are read in place from DPDK's memory, which
     * the plugin registers: the same here, a copy of the trace in
     * ordinary pages, registered. */
    if (posix_memalign((void **) &registered, 4096, size)
        || gpu_host_register(registered, size, 0)) {
        printf("latency: cannot register host memory\n");
        free(registered);
        return;
    }
    memcpy(registered, tdata, tbytes);
    latency_seed = rng_state;

    char *modes = strdup(latency_modes ? latency_modes : "packet,256");
    char *msave = NULL;

    for (char *mode = strtok_r(modes, ",", &msave); mode;
         mode = strtok_r(NULL, ",", &msave)) {
        struct gpu_re_chunker_config ccfg;
        struct gpu_re_chunker *ch, *ch_dev = NULL;
        char *sizes = strdup(latency_sizes), *save = NULL;

        gpu_re_chunker_config_init(&ccfg);
        ccfg.params = cfg->params;
        ccfg.backend = GPU_RE_BACKEND_CUDA;
        ccfg.remap = strcmp(mode, "packet") != 0;
        ccfg.segment = ccfg.remap ? atoi(mode) : 0;
        if ((ccfg.remap && !ccfg.segment)
            || gpu_re_chunker_create(&ccfg, &ch)) {
            printf("latency: no CUDA chunker for mode %s\n", mode);
            free(sizes);
            continue;
        }
        ccfg.device_launch = true;
        if (latency_launch_device && gpu_re_chunker_create(&ccfg, &ch_dev)) {
            printf("latency: no CUDA chunker launched by the device for "
                   "mode %s\n", mode);
            ch_dev = NULL;
        }
        if (ccfg.remap) {
            printf("\nround trip of one gather (CUDA, segment mode, %u "
                   "bytes a thread, ", ccfg.segment);
        } else {
            printf("\nround trip of one gather (CUDA, a thread a packet, ");
        }
        printf("payloads of the Internet mix read in place, mean of %d "
               "calls, one out at a time):\n", latency_rounds);
        for (char *tok = strtok_r(sizes, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            size_t n = strtoull(tok, NULL, 0);

            if (n) {
                if (latency_launch_host) {
                    latency_one(ch, cfg, registered, tbytes, n, true,
                                latency_rounds);
                }
                if (latency_launch_device && ch_dev) {
                    latency_one(ch_dev, cfg, registered, tbytes, n, true,
                                latency_rounds);
                }
                latency_one(ch, cfg, registered, tbytes, n, false,
                            latency_rounds);
            }
        }
        gpu_re_chunker_destroy(ch);
        gpu_re_chunker_destroy(ch_dev);
        free(sizes);
    }
    free(modes);
    gpu_host_unregister(registered);
    free(registered);
}

static void
trace_bench(const struct gpu_re_params *p, size_t trace_mb, size_t cache_mb,
            int sends, int packet_passes)
{
    struct files f = { malloc(trace_mb << 20), 0, NULL, 0 };
    struct gpu_re_config cfg;
    struct gpu_re_encoder *e;
    struct gpu_re_decoder *d;
    struct gpu_re_stats es, ds;
    struct hset hs = { calloc(1024, sizeof *hs.v), 1023, 0 };
    uint8_t *doc = malloc(70000), *shim = malloc(4096), *out = malloc(65536);
    uint16_t *ends = malloc(65536 * sizeof *ends);
    uint64_t total = 0, unique = 0, bad = 0;
    double enc_secs = 0, dec_secs = 0, t0;
    uint64_t inline_digest = 0;
    /* The trace's payloads, packed, for the batch-chunked run. */
    size_t tcap = (size_t) sends * (trace_mb << 20) + 65536;
    size_t pcap = tcap / 1000 + 1024, np = 0;
    uint8_t *tdata = gpu_host_alloc(tcap);
    uint32_t *toffs = gpu_host_alloc((pcap + 1) * sizeof *toffs);

    /* Documents where a Debian system has them; a bare container may
     * have only the other trees. */
    static const char *roots[] = { "/usr/share/doc", "/usr/share",
                                   "/usr/include", "/usr/lib" };
    const char *root = NULL;
    for (size_t i = 0; i < sizeof roots / sizeof roots[0] && f.n < 100;
         i++) {
        f.len = f.n = 0;
        root = roots[i];
        collect(root, &f, trace_mb << 20, 0);
    }
    if (f.n < 10) {
        printf("trace: too few files under /usr; skipped\n");
        return;
    }
    gpu_re_config_init(&cfg);
    cfg.params = *p;
    cfg.cache_size = cache_mb << 20;
    cfg.epoch = 1;
    gpu_re_encoder_create(&cfg, NULL, &e);
    gpu_re_decoder_create(&cfg, &d);

    /* Each file 'sends' times, in rounds (so repeats are a trace apart),
     * a few bytes edited, inserted or deleted each time. */
    for (int s = 0; s < sends; s++) {
        for (size_t i = 0; i < f.n; i++) {
            size_t len = f.starts[i + 1] - f.starts[i];

            memcpy(doc, f.data + f.starts[i], len);
            for (int k = s ? below(4) : 0; k > 0; k--) {
                size_t at = below(len);

                switch (below(3)) {
                case 0:
                    doc[at] ^= 1 + below(255);
                    break;
                case 1:
                    if (len < 65536) {
                        memmove(doc + at + 1, doc + at, len - at);
                        doc[at] = 'x';
                        len++;
                    }
                    break;
                case 2:
                    memmove(doc + at, doc + at + 1, len - at - 1);
                    len--;
                    break;
                }
            }
            /* Ideal: the whole document's chunks (it fits in one
             * payload-sized call: files are at most 64 KB). */
            size_t nc = gpu_re_chunk_cpu(p, doc, len < 65535 ? len : 65535,
                                         ends, NULL, 65536);
            for (size_t c = 0, st = 0; c < nc; st = ends[c++]) {
                if (hset_add(&hs, gpu_re_hash128(doc + st, ends[c] - st))) {
                    unique += ends[c] - st;
                }
            }
            unique += len > 65535 ? len - 65535 : 0;
            total += len;

            /* RE: 1460-byte payloads through the encoder and decoder. */
            for (size_t o = 0; o < len; o += 1460) {
                size_t pl = len - o < 1460 ? len - o : 1460, sl, ol;
                int r;

                if (!np) {
                    toffs[0] = 0;
                }
                if (np < pcap && toffs[np] + pl <= tcap) {
                    memcpy(tdata + toffs[np], doc + o, pl);
                    toffs[np + 1] = toffs[np] + pl;
                    np++;
                }

                t0 = now();
                r = gpu_re_encode(e, doc + o, pl, NULL, 0, shim, 4096, &sl);
                enc_secs += now() - t0;
                digest_add(&inline_digest, r,
                           r == GPU_RE_SHIM ? shim : doc + o, sl);
                t0 = now();
                if (r == GPU_RE_SHIM) {
                    r = gpu_re_decode(d, shim, sl, out, 65536, &ol);
                    dec_secs += now() - t0;
                    bad += r != GPU_RE_DECODED || ol != pl
                           || memcmp(out, doc + o, pl);
                } else {
                    gpu_re_decoder_observe(d, doc + o, pl);
                    dec_secs += now() - t0;
                }
            }
        }
    }
    gpu_re_encoder_get_stats(e, &es);
    gpu_re_decoder_get_stats(d, &ds);
    printf("\ntrace: %zu files (%.1f MB) under %s, each sent %d times "
           "with up to 3 one-byte edits/insertions/deletions per send; "
           "1460-byte payloads\n", f.n, f.len / 1048576.0, root, sends);
    printf("%-44s %12s %12s %9s\n", "", "bytes in", "bytes out", "saving");
    printf("%-44s %12" PRIu64 " %12" PRIu64 " %8.1f%%\n",
           "ideal whole-trace chunk dedup (unbounded)", total, unique,
           100.0 * (1 - (double) unique / total));
    char name[64];
    snprintf(name, sizeof name, "RE encoder, cache %zu MB", cache_mb);
    printf("%-44s %12" PRIu64 " %12" PRIu64 " %8.1f%%\n", name,
           es.bytes_in, es.bytes_out,
           100.0 * (1 - (double) es.bytes_out / es.bytes_in));
    printf("  %" PRIu64 " payloads, %" PRIu64 " shims, %" PRIu64 " references"
           " covering %" PRIu64 " bytes; decoder: %" PRIu64 " undecodable, %"
           PRIu64 " wrong; encoder %.2f Gbit/s on one core (CPU chunking, "
           "hashing, lookups); decoder %.2f Gbit/s (original bytes)\n",
           es.packets, es.shims, es.hits, es.hit_bytes, ds.undecodable, bad,
           es.bytes_in * 8.0 / enc_secs / 1e9,
           ds.bytes_out * 8.0 / dec_secs / 1e9);
    gpu_re_encoder_destroy(e);
    gpu_re_decoder_destroy(d);

    if (latency_sizes) {
        latency_bench(&cfg, tdata, np ? toffs[np] : 0);
        goto out;               /* Only the latency. */
    }

    /* The same payloads, chunked ahead in batches (as the action's
     * burst path does), then encoded with those cuts: the CPU's share of
     * RE once the chunking is off it.  Two paths on the same batches:
     * "old", gpu_re_encode() with the cuts (the encoder hashes each
     * chunk and probes the table chunk by chunk), and "new", the batch
     * also hashing the chunks and payloads where it chunks them and
     * gpu_re_encode_chunks() with the table buckets prefetched a few
     * payloads ahead.  Same cuts, so both must give the inline run's
     * output exactly: every shim is folded into a digest. */
    for (int be = 0; be < 2; be++) {
        struct path {
            const char *name, *how;
            unsigned int flags;
            struct gpu_re_batch *b;
            struct gpu_re_encoder *e;
            double chunk_secs, encode_secs;
            uint64_t digest;
        } paths[2] = {
            { "old", "cuts; gpu_re_encode() hashing, probes in series",
              0, NULL, NULL, 0, 0, 0 },
            { "new", "cuts and hashes; gpu_re_encode_chunks(), buckets "
              "prefetched ahead", GPU_RE_BATCH_HASHES, NULL, NULL, 0, 0, 0 },
        };
        struct gpu_re_chunker_config ccfg;
        struct gpu_re_chunker *ch;
        const size_t B = 16384;
        bool made = true;

        if (be == 1 && !gpu_re_cuda_available()) {
            break;
        }
        gpu_re_chunker_config_init(&ccfg);
        ccfg.params = *p;
        ccfg.backend = be ? GPU_RE_BACKEND_CUDA : GPU_RE_BACKEND_CPU;
        if (gpu_re_chunker_create(&ccfg, &ch)) {
            break;
        }
        for (int k = 0; k < 2; k++) {
            made = made && !gpu_re_batch_create_flags(ch, B, B * 1460,
                                                      paths[k].flags,
                                                      &paths[k].b)
                   && !gpu_re_encoder_create(&cfg, NULL, &paths[k].e);
        }
        for (size_t i = 0; made && i < np; i += B) {
            size_t n = np - i < B ? np - i : B;

            for (int k = 0; k < 2; k++) {
                struct path *pa = &paths[k];
                size_t ahead = 0;

                t0 = now();
                gpu_re_batch_submit(pa->b, NULL, tdata, toffs + i, n);
                gpu_re_batch_wait(pa->b);
                pa->chunk_secs += now() - t0;
                t0 = now();
                for (size_t j = 0; j < n; j++) {
                    size_t pl = toffs[i + j + 1] - toffs[i + j], sl;
                    const uint8_t *pay = tdata + toffs[i + j];
                    struct gpu_re_chunks chunks;
                    int r;

                    gpu_re_batch_chunks(pa->b, j, &chunks);
                    if (k == 0) {
                        r = gpu_re_encode(pa->e, pay, pl, chunks.ends,
                                          chunks.n, shim, 4096, &sl);
                    } else {
                        ahead = gpu_re_encoder_prefetch_batch(pa->e, pa->b,
                                                              j, ahead, n);
                        r = gpu_re_encode_chunks(pa->e, pay, pl, &chunks,
                                                 shim, 4096, &sl);
                    }
                    digest_add(&pa->digest, r, r == GPU_RE_SHIM ? shim : pay,
                               sl);
                }
                pa->encode_secs += now() - t0;
            }
        }
        printf("  chunked ahead on %s in batches of %zu:\n",
               be ? "CUDA" : "the CPU (1 core)", B);
        for (int k = 0; made && k < 2; k++) {
            struct path *pa = &paths[k];
            struct gpu_re_stats s2;

            gpu_re_encoder_get_stats(pa->e, &s2);
            printf("    %s: chunking %.2f Gbit/s, encoding %.2f Gbit/s, "
                   "together %.2f Gbit/s (%s); output %s\n", pa->name,
                   s2.bytes_in * 8.0 / pa->chunk_secs / 1e9,
                   s2.bytes_in * 8.0 / pa->encode_secs / 1e9,
                   s2.bytes_in * 8.0 / (pa->chunk_secs + pa->encode_secs)
                   / 1e9, pa->how,
                   pa->digest == inline_digest && s2.bytes_out == es.bytes_out
                   && s2.hits == es.hits && s2.hit_bytes == es.hit_bytes
                   ? "identical" : "DIFFERENT");
        }
        for (int k = 0; k < 2; k++) {
            gpu_re_encoder_destroy(paths[k].e);
            gpu_re_batch_destroy(paths[k].b);
        }
        for (int pass = 0; made && pass < packet_passes; pass++) {
            /* The switch's gathers are up to 256 payloads; 2048 shows
             * the encoder's own rate. */
            static const size_t sizes[] = { 2048, 256 };

            for (size_t k = 0; k < 2; k++) {
                packet_bench(ch, &cfg, tdata, toffs, np, false, sizes[k]);
                if (be) {
                    packet_bench(ch, &cfg, tdata, toffs, np, true,
                                 sizes[k]);
                }
            }
        }
        gpu_re_chunker_destroy(ch);
    }
out:
    gpu_host_free(tdata);
    gpu_host_free(toffs);
    free(hs.v);
    free(f.data);
    free(f.starts);
    free(doc);
    free(shim);
    free(out);
    free(ends);
}

int
main(int argc, char **argv)
{
    size_t mb = 64, trace_mb = 16, cache_mb = 64;
    int iters = 5, n_streams = 4, sends = 3, packet_passes = 1;
    int threads = sysconf(_SC_NPROCESSORS_ONLN);
    struct gpu_re_params p;
    struct gpu_device_info info;
    bool cuda = gpu_re_cuda_available();

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!v) {
            goto usage;
        } else if (!strcmp(a, "--mb")) {
            mb = atoi(v);
        } else if (!strcmp(a, "--iters")) {
            iters = atoi(v);
        } else if (!strcmp(a, "--streams")) {
            n_streams = atoi(v);
        } else if (!strcmp(a, "--threads")) {
            threads = atoi(v);
        } else if (!strcmp(a, "--trace-mb")) {
            trace_mb = atoi(v);
        } else if (!strcmp(a, "--cache-mb")) {
            cache_mb = atoi(v);
        } else if (!strcmp(a, "--packet-passes")) {
            packet_passes = atoi(v);
        } else if (!strcmp(a, "--seed")) {
            rng_state = strtoull(v, NULL, 0);
        } else if (!strcmp(a, "--latency")) {
            latency_sizes = strdup(v);
        } else if (!strcmp(a, "--latency-rounds")) {
            latency_rounds = atoi(v);
        } else if (!strcmp(a, "--latency-modes")) {
            latency_modes = strdup(v);
        } else if (!strcmp(a, "--latency-launch")) {
            latency_launch_host = strstr(v, "host") != NULL;
            latency_launch_device = strstr(v, "device") != NULL;
            if (!latency_launch_host && !latency_launch_device) {
                fprintf(stderr, "--latency-launch: host, device or both\n");
                return 1;
            }
        } else {
            goto usage;
        }
        i++;
    }
    if (iters < 1 || n_streams < 1 || n_streams > 16 || threads < 1
        || !cache_mb || packet_passes < 0 || latency_rounds < 1) {
        goto usage;
    }

    printf("command:");
    for (int i = 0; i < argc; i++) {
        printf(" %s", argv[i]);
    }
    printf("\n");
    if (cuda && !gpu_device_query(0, &info)) {
        printf("device: %s (cc %d.%d, %d SMs)\n", info.name, info.cc_major,
               info.cc_minor, info.multiprocessors);
    } else {
        printf("device: none (CPU backend only)\n");
    }
    printf("cpu cores online: %ld; CPU peer: the CPU backend (table-driven"
           " LBFS Rabin, re-inline.h)\n", sysconf(_SC_NPROCESSORS_ONLN));
    if (cuda) {
        ceilings();
    }
    gpu_re_params_init(&p);
    printf("params: window %u, bits %u, min_chunk %u, max_chunk %u; "
           "payload bytes random\n", p.window, p.bits, p.min_chunk,
           p.max_chunk);

    struct gpu_re_chunker_config ccfg;
    struct gpu_re_chunker *cpu;
    gpu_re_chunker_config_init(&ccfg);
    ccfg.backend = GPU_RE_BACKEND_CPU;
    gpu_re_chunker_create(&ccfg, &cpu);

    static const uint32_t sizes[] = { 64, 128, 256, 512, 1024, 1500, 0 };
    printf("\nchunking Gbit/s (payload bytes; batches of %zu MB; %d CUDA "
           "streams end-to-end)\n", mb, n_streams);
    printf("%5s %7s %6s %7s %8s %8s %8s %8s %7s %5s\n", "size",
           "packets", "cpu 1c", "cpu all", "kern", "kern-uns", "kern-seg",
           "end2end", "e2e/1c", "check");
    /* --mb 0: no chunking table, only the trace (to profile the
     * encoder alone). */
    for (size_t k = 0; mb && k < sizeof sizes / sizeof sizes[0]; k++) {
        struct workload w, wc;
        struct gpu_result g = { 0 };
        char sz[16];

        workload_make(&w, sizes[k], mb << 20);
        /* The CPU peers get a slice, so they finish in reasonable
         * time; Gbit/s does not depend on the amount. */
        wc = w;
        wc.n = w.n / 8 ? w.n / 8 : w.n;
        wc.bytes = w.offsets[wc.n];
        double c1 = cpu_gbps(cpu, &wc, 1);
        double cn = cpu_gbps(cpu, &wc, threads);
        if (cuda) {
            gpu_run(&p, &w, iters, n_streams, &g);
        }
        snprintf(sz, sizeof sz, sizes[k] ? "%u" : "mix", sizes[k]);
        printf("%5s %7zu %6.2f %7.2f %8.1f %8.1f %8.1f %8.1f %7.1f %5s\n",
               sz, w.n, c1, cn, g.kern, g.kern_nosort, g.kern_seg, g.e2e,
               c1 > 0 ? g.e2e / c1 : 0, cuda ? (g.ok ? "ok" : "DIFF") : "-");
        workload_free(&w);
    }
    if (!cuda) {
        printf("(CUDA: no device or no CUDA build)\n");
    }
    printf("cpu all = %d threads; kern = grouping and chunk kernels on "
           "resident data (uns: ungrouped; seg: segment mode, 256-byte "
           "segments); end2end = copies in, grouped kernels, cuts out, "
           "several streams; check = CUDA cuts (grouped, segment mode, "
           "every stream) equal the CPU's\n", threads);
    gpu_re_chunker_destroy(cpu);

    trace_bench(&p, trace_mb, cache_mb, sends, packet_passes);
    return 0;

usage:
    fprintf(stderr, "usage: re-bench [--mb N] [--iters N] [--streams N] "
            "[--threads N] [--trace-mb N] [--cache-mb N]\n"
            "                [--packet-passes N] [--seed S]\n"
            "                [--latency N[,N...]] [--latency-rounds N]\n"
            "                [--latency-modes packet|SEGMENT[,...]]\n"
            "                [--latency-launch host|device[,...]]\n");
    return 2;
}
