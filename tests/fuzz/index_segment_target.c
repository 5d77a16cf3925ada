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

/* Fuzzes the recorder's readers of its own files (gpu_services/index/
 * store.c): a segment's index file (gpu_index_file_read) and, through a
 * store query (gpu_index_store_query), the pcap the index points into.
 * The recorder wrote them itself, but a crash, a full disk or an operator
 * copying folders can leave them truncated or damaged, and a query must
 * then refuse them, not crash.
 *
 * Input: one byte of flags, then records of a 16-bit big-endian length
 * and that many bytes (fuzzer.h): the index file, then the pcap.  Flag
 * bit 0: set the index file's size field and rewrite its trailer (end
 * mark and CRC32) so that the reader gets past its checksum, which a
 * mutation rarely keeps right; bit 1: also run a store query over the
 * two files; bits 2-3 pick the query.
 *
 * With FUZZ_GEN_CORPUS=DIR in the environment, the target instead records
 * real traffic with the real recorder and writes its files as seeds in
 * DIR, then exits ("make fuzz-corpus"). */

#include <config.h>

#include "tests/fuzz/fuzzer.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/fuzz/index-records.h"

#define IDX_HEADER 64           /* As store.c writes them. */
#define IDX_TRAILER 12

static char dir[256];
static char idx_path[300], pcap_path[300];
static FILE *devnull;

static uint32_t
crc32_ieee(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;

    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++) {
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        }
    }
    return c ^ 0xffffffffu;
}

static bool
write_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(p, 1, n, f) == n;

    if (f) {
        ok = !fclose(f) && ok;
    }
    return ok;
}

static uint8_t *
read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *p;
    struct stat st;

    if (!f || fstat(fileno(f), &st)) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        exit(1);
    }
    p = malloc(st.st_size + 1);
    *n = fread(p, 1, st.st_size, f);
    fclose(f);
    return p;
}

static void
put_record(FILE *f, const uint8_t *p, size_t n)
{
    if (n > 0xffff) {
        n = 0xffff;
    }
    fputc(n >> 8, f);
    fputc(n & 0xff, f);
    fwrite(p, 1, n, f);
}

/* Records frames 'first' .. 'first' + 'n' - 1 of the mix with the real
 * recorder, and writes seed 'name' in 'out': 'flags', the index file and
 * the pcap it wrote. */
static void
generate_one(const char *out, const char *name, unsigned int first,
             unsigned int n, enum gpu_index_encoding enc, uint8_t flags)
{
    struct gpu_index_recorder_config cfg;
    struct gpu_index_recorder *rec;
    char rec_dir[300], path[600], err[256];
    uint8_t *idx, *pcap;
    size_t idx_len, pcap_len;
    FILE *f;

    snprintf(rec_dir, sizeof rec_dir, "%s/rec", dir);
    gpu_index_recorder_config_init(&cfg);
    cfg.dir = rec_dir;
    cfg.backend = GPU_INDEX_BACKEND_CPU;
    cfg.encoding = enc;
    cfg.snaplen = 96;
    if (gpu_index_recorder_create(&cfg, &rec, err, sizeof err)) {
        fprintf(stderr, "recorder: %s\n", err);
        exit(1);
    }
    for (unsigned int i = first; i < first + n; i++) {
        uint8_t frame[128];
        size_t len = index_frame_make(i, frame);

        while (!gpu_index_recorder_submit(rec, frame, len,
                                          index_frame_ts(i), i % 4)) {
            usleep(1000);
        }
    }
    gpu_index_recorder_flush(rec);
    gpu_index_recorder_destroy(rec);

    snprintf(path, sizeof path, "%s/seg-%016d.idx", rec_dir, 1);
    idx = read_file(path, &idx_len);
    snprintf(path, sizeof path, "%s/seg-%016d.pcap", rec_dir, 1);
    pcap = read_file(path, &pcap_len);
    snprintf(path, sizeof path, "%s/%s", out, name);
    f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        exit(1);
    }
    fputc(flags, f);
    put_record(f, idx, idx_len);
    put_record(f, pcap, pcap_len);
    fclose(f);
    free(idx);
    free(pcap);
    snprintf(path, sizeof path, "rm -rf '%s'", rec_dir);
    if (system(path)) {
        exit(1);
    }
}

static void
generate(const char *out)
{
    static const struct { unsigned int first, n; } sets[] = {
        { 0, 1 }, { 0, 8 }, { 3, 20 }, { 0, 96 }, { 40, 33 },
    };
    char name[64];

    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        for (int e = 0; e < 2; e++) {
            for (uint8_t flags = 0; flags < 16; flags += 2 + 4 * (e + s)) {
                snprintf(name, sizeof name, "rec-%u-%u-%s-%u",
                         sets[s].first, sets[s].n, e ? "plwah" : "wah",
                         flags);
                generate_one(out, name, sets[s].first, sets[s].n,
                             e ? GPU_INDEX_PLWAH : GPU_INDEX_WAH, flags);
            }
        }
    }
}

/* The folder of the files, gone when the fuzzer exits. */
static void
remove_dir(void)
{
    unlink(idx_path);
    unlink(pcap_path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *tmp = getenv("TMPDIR");
    const char *gen = getenv("FUZZ_GEN_CORPUS");

    snprintf(dir, sizeof dir, "%s/index-segment-fuzz.XXXXXX",
             tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror(dir);
        exit(1);
    }
    snprintf(idx_path, sizeof idx_path, "%s/seg-%016d.idx", dir, 1);
    snprintf(pcap_path, sizeof pcap_path, "%s/seg-%016d.pcap", dir, 1);
    devnull = fopen("/dev/null", "w");
    atexit(remove_dir);
    if (gen) {
        generate(gen);
        exit(0);
    }
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const queries[] = {
        "tcp or udp or not (tcp or udp)",
        "src=10.0.0.0/8 and dport=80,443",
        "tcp_flags&syn|ack or vlan=none",
        "time=0-4000000000 and not host=192.168.0.0/16",
    };
    struct gpu_index_segment_index seg;
    uint64_t *offsets, t0, t1;
    struct fuzz_reader r;
    const uint8_t *idx = (const uint8_t *) "", *pcap = idx;
    size_t idx_len = 0, pcap_len = 0;
    uint8_t flags, *copy;
    char err[256];

    if (!size) {
        return 0;
    }
    flags = data[0];
    r = (struct fuzz_reader) { data + 1, size - 1 };
    fuzz_next_record(&r, &idx, &idx_len);
    fuzz_next_record(&r, &pcap, &pcap_len);

    copy = malloc(idx_len + 1);
    memcpy(copy, idx, idx_len);
    if ((flags & 1) && idx_len >= IDX_HEADER + IDX_TRAILER) {
        uint64_t n = idx_len;
        uint32_t crc;

        memcpy(copy + 40, &n, 8);
        memcpy(copy + idx_len - 8, "GIDXEND", 8);
        crc = crc32_ieee(copy, idx_len - IDX_TRAILER);
        memcpy(copy + idx_len - IDX_TRAILER, &crc, 4);
    }
    if (!write_file(idx_path, copy, idx_len)
        || !write_file(pcap_path, pcap, pcap_len)) {
        abort();
    }
    free(copy);

    gpu_index_segment_index_init(&seg);
    err[0] = '\0';
    if (!gpu_index_file_read(idx_path, &seg, &offsets, &t0, &t1, err,
                             sizeof err)) {
        struct gpu_index_query *q;

        /* A file the reader took is one a query may use. */
        if (!gpu_index_query_parse(queries[(flags >> 2) & 3], &q, err,
                                   sizeof err)) {
            uint32_t *rows;
            size_t n;

            if (!gpu_index_query_eval(q, &seg, &rows, &n)) {
                for (size_t i = 0; i < n; i++) {
                    if (rows[i] >= seg.n_rows) {
                        abort();
                    }
                }
                free(rows);
            }
            gpu_index_query_destroy(q);
        }
        free(offsets);
    } else if (!err[0]) {
        abort();                /* A refused file must say why. */
    }
    gpu_index_segment_index_free(&seg);

    if (flags & 2) {
        unsigned int skipped;

        gpu_index_store_query(dir, queries[(flags >> 2) & 3], devnull,
                              NULL, 0, &skipped, err, sizeof err);
    }
    return 0;
}
