/*
 * recorder-bench: how many packets per second gpu_index's recorder keeps
 * when one producer thread (standing in for a PMD) submits the Internet
 * mix (50% 64, 20% 576, 30% 1500-byte frames) at a given rate, without
 * the switch: the writer thread's bound, measured alone.
 *
 * The producer submits batches of 32 frames (a datapath batch) with
 * gpu_index_recorder_submit_batch(), as gpu_index() does, paced to
 * --rate packets per second (0: as fast as it can, so that the ring is
 * always full and "recorded" is the writer's ceiling).  At the end the
 * recorder is flushed (the last segment closed and indexed), and the
 * program prints submitted, recorded, dropped, records per second kept
 * over the run, and the flush time.  The frames are IPv4 TCP and UDP
 * with random addresses and ports, so the indexes have real work to do.
 *
 * --drain N measures the writer alone instead: with the writer paused,
 * N frames fill a ring of N slots, then the writer is let go and timed
 * until it has written them all (no producer competing for a core, and
 * no segment closing if --segment is above N); the flush that follows
 * times the indexer on that one segment (fsync, 40 index builds, index
 * file).
 *
 * --query EXPR then times a store query over what was recorded, its
 * lines written to memory and its matches to a pcap file, as
 * gpu-index/query does.
 *
 * --cpus P,W pins the producer to CPU P and the recorder's threads
 * (writer, indexer, index builders) to CPU W, as a PMD and the
 * recorder's threads are pinned in the switch: without it the scheduler
 * may move them, and the cache lines they share, between cores.
 *
 * Usage: recorder-bench [--dir DIR] [--seconds S] [--rate PPS]
 *                       [--segment N] [--ring N] [--snaplen N]
 *                       [--backend cpu|cuda|auto] [--drain N]
 *                       [--index-threads N] [--query EXPR]
 *                       [--cpus P,W] [--keep]
 */
#define _GNU_SOURCE             /* pthread_setaffinity_np(). */
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
#include <dirent.h>

#include "gpu_services/index/gpu-index.h"

#define N_FRAMES 4096
#define BATCH 32
#define MIN(A, B) ((A) < (B) ? (A) : (B))

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t
rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng >> 16;
}

/* Fills 'f' with an Ethernet + IPv4 + TCP or UDP frame of 'len' bytes
 * (without FCS), random addresses and ports. */
static void
make_frame(uint8_t *f, uint32_t len)
{
    bool tcp = rnd() % 4 != 0;
    uint32_t ip_len = len - 14;

    for (uint32_t i = 0; i < len; i++) {
        f[i] = rnd();
    }
    memcpy(f, "\x50\x54\x00\x00\x00\x02\x50\x54\x00\x00\x00\x01\x08\x00",
           14);
    f[14] = 0x45;
    f[15] = 0;
    f[16] = ip_len >> 8;
    f[17] = ip_len;
    f[20] = f[21] = 0;          /* Not a fragment. */
    f[22] = 64;
    f[23] = tcp ? 6 : 17;
    f[26] = 10;                 /* 10.x.y.z -> 192.168.y.z */
    f[30] = 192;
    f[31] = 168;
    if (tcp) {
        f[46] = 0x50;           /* Data offset 5. */
        f[47] = 1 << (rnd() % 5);
    }
}

struct producer {
    struct gpu_index_recorder *r;
    double seconds, rate;
    uint8_t *frames;
    uint32_t lens[N_FRAMES];
    uint64_t submitted;
    double elapsed;
    int cpu;                    /* -1: not pinned. */
};

/* Returns the nanoseconds the recorder's writer thread ("gidx-writer")
 * has run so far, from the scheduler's statistics, or 0 if not found.
 * Records per second of the writer's own time tell its cost apart from
 * the time it waited for a core (steal and wait on a shared machine). */
static uint64_t
writer_run_ns(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    uint64_t ns = 0;

    while (d && (e = readdir(d))) {
        char path[300], comm[32] = "";
        FILE *f;

        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        f = fopen(path, "r");
        if (!f) {
            continue;
        }
        if (!fgets(comm, sizeof comm, f)) {
            comm[0] = 0;
        }
        fclose(f);
        if (strncmp(comm, "gidx-writer", 11)) {
            continue;
        }
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat",
                 e->d_name);
        f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%"SCNu64, &ns) != 1) {
                ns = 0;
            }
            fclose(f);
        }
    }
    if (d) {
        closedir(d);
    }
    return ns;
}

/* Pins the calling thread to 'cpu', if it is not negative. */
static void
pin_self(int cpu)
{
    cpu_set_t set;

    if (cpu < 0) {
        return;
    }
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set)) {
        fprintf(stderr, "cannot pin to CPU %d\n", cpu);
    }
}

static void *
produce(void *p_)
{
    struct producer *p = p_;
    double t0, now;
    uint64_t n = 0;
    size_t k = 0;

    pin_self(p->cpu);
    t0 = now = now_s();

    while (now - t0 < p->seconds) {
        uint64_t ts = (uint64_t) (now * 1e9) + 1700000000ull * 1000000000ull;

        struct gpu_index_frame f[BATCH];

        /* One call a batch, as gpu_index() in the switch submits. */
        for (int i = 0; i < BATCH; i++) {
            f[i] = (struct gpu_index_frame) {
                .data = p->frames + k * 1514,
                .cap_len = p->lens[k],
                .len = p->lens[k],
                .in_port = 1 + k % 4,
            };
            k = (k + 1) % N_FRAMES;
        }
        gpu_index_recorder_submit_batch(p->r, f, BATCH, ts);
        n += BATCH;
        now = now_s();
        if (p->rate > 0) {
            /* Paced: wait (spinning, as a PMD would be busy) until this
             * batch's time has come. */
            while (n > (now - t0) * p->rate && now - t0 < p->seconds) {
                now = now_s();
            }
        }
    }
    p->submitted = n;
    p->elapsed = now - t0;
    return NULL;
}

/* Times 'expr' over the store in 'dir', if nonnull. */
static void
time_query(const char *dir, const char *expr)
{
    char pcap[1100], err[256];
    unsigned int skipped = 0;
    char *text = NULL;
    size_t size = 0;
    FILE *out;
    double t0;
    int64_t n;

    if (!expr) {
        return;
    }
    snprintf(pcap, sizeof pcap, "%s.query.pcap", dir);
    out = open_memstream(&text, &size);
    t0 = now_s();
    n = gpu_index_store_query(dir, expr, out, pcap, 0, &skipped, err,
                              sizeof err);
    fclose(out);
    t0 = now_s() - t0;
    printf("  query \"%s\": %"PRId64" matches in %.3f s (%.2f us each, "
           "%zu bytes of text)%s%s\n", expr, n, t0, n > 0 ? t0 * 1e6 / n
           : 0.0, size, n < 0 ? ": " : "", n < 0 ? err : "");
    printf("RESULT query_s=%.3f matches=%"PRId64"\n", t0, n);
    free(text);
    unlink(pcap);
}

int
main(int argc, char *argv[])
{
    struct gpu_index_recorder_config cfg;
    struct gpu_index_recorder_stats rs;
    struct gpu_index_recorder *r;
    struct producer p;
    const char *dir = "/tmp/recorder-bench";
    bool keep = false;
    uint32_t drain = 0;
    const char *query = NULL;
    pthread_t t;
    char err[256], cmd[1100];
    double mean = 0, t0;
    int error, writer_cpu = -1;

    gpu_index_recorder_config_init(&cfg);
    cfg.backend = GPU_INDEX_BACKEND_CPU;
    memset(&p, 0, sizeof p);
    p.seconds = 5;
    p.rate = 0;
    p.cpu = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!strcmp(a, "--keep")) {
            keep = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "%s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--dir")) {
            dir = v;
        } else if (!strcmp(a, "--seconds")) {
            p.seconds = atof(v);
        } else if (!strcmp(a, "--rate")) {
            p.rate = atof(v);
        } else if (!strcmp(a, "--segment")) {
            cfg.segment_packets = atoi(v);
        } else if (!strcmp(a, "--index-threads")) {
            cfg.index_threads = atoi(v);
        } else if (!strcmp(a, "--query")) {
            query = v;
        } else if (!strcmp(a, "--drain")) {
            drain = atoi(v);
            cfg.ring_slots = drain;
        } else if (!strcmp(a, "--ring")) {
            cfg.ring_slots = atoi(v);
        } else if (!strcmp(a, "--cpus")) {
            if (sscanf(v, "%d,%d", &p.cpu, &writer_cpu) != 2) {
                fprintf(stderr, "--cpus needs P,W\n");
                return 2;
            }
        } else if (!strcmp(a, "--snaplen")) {
            cfg.snaplen = atoi(v);
        } else if (!strcmp(a, "--backend")) {
            cfg.backend = (!strcmp(v, "cuda") ? GPU_INDEX_BACKEND_CUDA
                           : !strcmp(v, "auto") ? GPU_INDEX_BACKEND_AUTO
                           : GPU_INDEX_BACKEND_CPU);
        } else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
    }

    p.frames = malloc(N_FRAMES * 1514);
    for (int i = 0; i < N_FRAMES; i++) {
        uint32_t x = rnd() % 10;

        /* 64, 576, 1500 bytes on the wire, less the FCS. */
        p.lens[i] = x < 5 ? 60 : x < 7 ? 572 : 1496;
        make_frame(p.frames + i * 1514, p.lens[i]);
        mean += MIN(p.lens[i], cfg.snaplen);
    }
    mean /= N_FRAMES;

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {
        return 1;
    }
    cfg.dir = dir;
    pin_self(writer_cpu);       /* The recorder's threads inherit it. */
    error = gpu_index_recorder_create(&cfg, &r, err, sizeof err);
    if (error) {
        fprintf(stderr, "recorder: %s\n", err);
        return 1;
    }
    gpu_index_recorder_get_stats(r, &rs);
    printf("recorder-bench: %s, %.0f s, rate %s, snaplen %u (mean %.0f "
           "bytes kept), segment %u, ring %u, builder %s\n", dir,
           p.seconds, p.rate > 0 ? "paced" : "max", cfg.snaplen, mean,
           cfg.segment_packets, cfg.ring_slots, rs.backend);
    if (p.rate > 0) {
        printf("  target rate %.3f Mpps\n", p.rate / 1e6);
    }

    if (drain) {
        uint64_t ts = 1700000000ull * 1000000000ull;
        double t1;

        gpu_index_recorder_pause(r, true);
        for (uint32_t i = 0; i < drain; i++) {
            size_t k = i % N_FRAMES;

            gpu_index_recorder_submit(r, p.frames + k * 1514, p.lens[k],
                                      ts + i * 300ull, 1 + k % 4);
        }
        t0 = now_s();
        gpu_index_recorder_pause(r, false);
        do {
            usleep(1000);
            gpu_index_recorder_get_stats(r, &rs);
        } while (rs.recorded + rs.dropped < rs.submitted);
        t1 = now_s();
        gpu_index_recorder_flush(r);
        double flush_s = now_s() - t1;
        gpu_index_recorder_get_stats(r, &rs);
        printf("  writer alone: %"PRIu64" records in %.3f s: %.3f M "
               "records/s (%.0f MB/s of pcap), %"PRIu64" dropped\n",
               rs.recorded, t1 - t0, rs.recorded / (t1 - t0) / 1e6,
               rs.recorded * (mean + 16) / (t1 - t0) / 1e6, rs.dropped);
        printf("  indexer: the segment's flush %.3f s (%.3f M records/s): "
               "fsync %.3f s, index build %.3f s, index file %.3f s\n",
               flush_s, rs.recorded / flush_s / 1e6, rs.sync_ns / 1e9,
               rs.build_ns / 1e9, rs.index_write_ns / 1e9);
        printf("RESULT writer_mrps=%.3f indexer_mrps=%.3f\n",
               rs.recorded / (t1 - t0) / 1e6, rs.recorded / flush_s / 1e6);
        gpu_index_recorder_destroy(r);
        time_query(dir, query);
        if (!keep && system(cmd)) {
            return 1;
        }
        return 0;
    }

    p.r = r;
    uint64_t writer_ns = writer_run_ns();
    pthread_create(&t, NULL, produce, &p);
    pthread_join(t, NULL);
    gpu_index_recorder_get_stats(r, &rs);
    uint64_t recorded_at_end = rs.recorded;
    uint64_t waited_ns = rs.writer_wait_ns, waits = rs.writer_waits;
    writer_ns = writer_run_ns() - writer_ns;
    t0 = now_s();
    gpu_index_recorder_flush(r);
    double flush_s = now_s() - t0;
    gpu_index_recorder_get_stats(r, &rs);

    printf("  submitted %"PRIu64" (%.3f Mpps), recorded %"PRIu64", "
           "dropped %"PRIu64" (%.1f%% kept)\n", rs.submitted,
           rs.submitted / p.elapsed / 1e6, rs.recorded, rs.dropped,
           rs.submitted ? 100.0 * rs.recorded / rs.submitted : 0.0);
    printf("  kept %.3f M records/s during the run (%.0f MB/s of pcap), "
           "flush %.2f s\n", recorded_at_end / p.elapsed / 1e6,
           recorded_at_end * (mean + 16) / p.elapsed / 1e6, flush_s);
    printf("  segments %"PRIu64", index build %.1f M rows/s, pcap %"PRIu64
           " bytes, index %"PRIu64" bytes\n", rs.segments_written,
           rs.build_ns ? rs.build_rows * 1e3 / rs.build_ns : 0.0,
           rs.pcap_bytes, rs.index_bytes);
    printf("  indexer: fsync %.3f s, index build %.3f s, index file "
           "%.3f s\n", rs.sync_ns / 1e9, rs.build_ns / 1e9,
           rs.index_write_ns / 1e9);
    printf("  writer ran %.3f s of %.3f s: %.0f ns a record kept; it "
           "waited %.3f s for the indexer (%"PRIu64" times)\n",
           writer_ns / 1e9, p.elapsed,
           recorded_at_end ? (double) writer_ns / recorded_at_end : 0.0,
           waited_ns / 1e9, waits);
    printf("  writer waited %.3f s for the disk (%"PRIu64" times)\n",
           rs.disk_wait_ns / 1e9, rs.disk_waits);
    printf("RESULT kept_mrps=%.3f submitted_mpps=%.3f kept_pct=%.1f "
           "writer_ns_per_rec=%.0f writer_busy=%.2f "
           "writer_wait_s=%.3f\n",
           recorded_at_end / p.elapsed / 1e6,
           rs.submitted / p.elapsed / 1e6,
           rs.submitted ? 100.0 * rs.recorded / rs.submitted : 0.0,
           recorded_at_end ? (double) writer_ns / recorded_at_end : 0.0,
           writer_ns / 1e9 / p.elapsed, waited_ns / 1e9);
    gpu_index_recorder_destroy(r);
    time_query(dir, query);
    if (!keep && system(cmd)) {
        return 1;
    }
    free(p.frames);
    return 0;
}
