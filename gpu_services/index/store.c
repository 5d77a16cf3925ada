/*
 * The store: segments of a recording, each a pcap file written with
 * libpcap and an index file, and the recorder that fills it.
 *
 * Files in the store's folder, for segment number N (16 digits, rising):
 *
 *   seg-N.pcap     the packets, nanosecond pcap, snaplen bytes of each.
 *   seg-N.ports    while the segment is open: the input port of each
 *                  record, a u32 per record in pcap order (the one thing
 *                  the index needs that a pcap cannot hold).  Deleted
 *                  once the index is written.
 *   seg-N.idx      written only once the pcap is complete and on disk:
 *                  first to seg-N.idx.tmp, fsync'd, then renamed.  So a
 *                  crash leaves either no index or a whole one; and a
 *                  damaged one fails its CRC and is refused, never served.
 *   .lock          flock()'d by the recorder that owns the folder.
 *
 * Crash safety.  A crash (kill -9 included) while a segment is open
 * leaves its pcap and ports files without an index, possibly with a last
 * record cut short (stdio writes its buffer in pieces; the worker flushes
 * both files whenever it goes idle, so little is ever unwritten).  The
 * next recorder to open the folder recovers it before it records: it
 * keeps the records that are whole in both files, truncates the pcap
 * after the last of them, and indexes them; a pcap with no whole record
 * or no readable header is set aside (renamed seg-N.pcap.damaged), never
 * served.  Either way it says so in its recovery log and counters.
 * Segments closed before the crash are untouched.
 *
 * Index file layout (little-endian):
 *
 *   0   "OVSGIDX1"
 *   8   u32 version (1), u32 encoding, u32 n_rows, u32 n_attrs
 *   24  u64 first_ts_ns, u64 last_ts_ns, u64 file size
 *   48  16 bytes zero
 *   64  n_attrs x { u32 attr, u32 n_keys, u32 n_words, u32 value_bits }
 *       u64 pcap_offset[n_rows]          (row -> record in seg-N.pcap)
 *       per attr: u32 keys[n_keys], u32 offsets[n_keys + 1],
 *                 u32 words[n_words]
 *   end u32 CRC32 (IEEE) of every byte before it, "GIDXEND\0"
 *
 * The recorder's caller only copies a packet into a slot of a bounded
 * ring (a multi-producer queue with a sequence number per slot, after
 * Vyukov); a full ring is a counted drop, never a wait.  One worker
 * thread takes packets off, parses them, writes the pcap, and at the end
 * of a segment builds its indexes and writes them, then applies the
 * retention limits.
 */
#define _GNU_SOURCE             /* pthread_setname_np(). */
#include <config.h>

#include "gpu_services/index/index-private.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define IDX_MAGIC "OVSGIDX1"
#define IDX_END "GIDXEND"
#define IDX_VERSION 1
#define IDX_HEADER 64
#define IDX_TRAILER 12

static void
set_err(char *err, size_t size, const char *fmt, ...)
{
    va_list args;

    if (err && size) {
        va_start(args, fmt);
        vsnprintf(err, size, fmt, args);
        va_end(args);
    }
}

/* ---- CRC32 (IEEE 802.3, reflected), table-driven. ---- */

/* CRC-32 (IEEE 802.3, as zlib's crc32()) by slicing eight bytes at a
 * time: the index file of a million records is ~40 MB, and a table
 * lookup per byte took ~70 ms of the indexer's time per segment. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void
crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;

        for (int k = 0; k < 8; k++) {
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        }
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++) {
            uint32_t c = crc_table[t - 1][i];

            crc_table[t][i] = crc_table[0][c & 0xff] ^ (c >> 8);
        }
    }
}

/* Continues the CRC 'crc' (0 to start) over 'p[0 .. n)'. */
static uint32_t
crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t c = ~crc;

    pthread_once(&crc_once, crc_init);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t lo, hi;

        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff]
            ^ crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24]
            ^ crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff]
            ^ crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
    }
#endif
    while (n--) {
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    }
    return ~c;
}

static uint32_t
crc32_buf(const uint8_t *p, size_t n)
{
    return crc32_update(0, p, n);
}

/* ---- Index files. ---- */

static int write_all(int fd, const void *buf, size_t n, const char *what,
                     size_t *written);

/* Has the kernel start writing 'len' bytes of 'fd' from 'off' (0, 0: all
 * of it) to disk, so that a later fsync() waits only for what came
 * after. */
static void
start_writeback(int fd, uint64_t off, uint64_t len)
{
#ifdef SYNC_FILE_RANGE_WRITE
    sync_file_range(fd, off, len, SYNC_FILE_RANGE_WRITE);
#else
    (void) fd;
    (void) off;
    (void) len;
#endif
}

/* An index file being written: bytes go to 'fd' through a buffer (large
 * arrays straight from where they are), with their CRC kept as they
 * pass, so that a 40 MB index is never copied whole into memory. */
#define WBUF_SIZE (1u << 20)

struct wbuf {
    int fd;
    uint8_t *p;                 /* WBUF_SIZE bytes. */
    size_t n;                   /* Buffered. */
    uint64_t total;             /* Written or buffered. */
    uint32_t crc;               /* Of 'total' bytes. */
    int error;                  /* errno of the first failure, or 0. */
};

/* Writes 'p[0 .. n)' to the file, which the disk then writes while the
 * rest is checksummed: the fsync() at the end waits for the tail. */
static void
wbuf_write(struct wbuf *b, const uint8_t *p, size_t n)
{
    if (!b->error && n) {
        b->error = write_all(b->fd, p, n, "index", NULL);
        start_writeback(b->fd, 0, 0);
    }
}

static void
wbuf_flush(struct wbuf *b)
{
    wbuf_write(b, b->p, b->n);
    b->n = 0;
}

static void
put(struct wbuf *b, const void *data, size_t n)
{
    b->crc = crc32_update(b->crc, data, n);
    b->total += n;
    if (b->n + n > WBUF_SIZE) {
        wbuf_flush(b);
    }
    if (n >= WBUF_SIZE) {
        wbuf_write(b, data, n);
    } else {
        memcpy(b->p + b->n, data, n);
        b->n += n;
    }
}

static void
put32(struct wbuf *b, uint32_t v)
{
    put(b, &v, 4);
}

static void
put64(struct wbuf *b, uint64_t v)
{
    put(b, &v, 8);
}

static int
fsync_dir_of(const char *path)
{
    char dir[1024];
    char *slash;
    int fd, error = 0;

    snprintf(dir, sizeof dir, "%s", path);
    slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
    } else {
        snprintf(dir, sizeof dir, ".");
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        error = fsync(fd);
        close(fd);
    }
    return error;
}

int
gpu_index_file_write(const char *path,
                     const struct gpu_index_segment_index *seg,
                     const uint64_t *pcap_offsets, uint64_t first_ts_ns,
                     uint64_t last_ts_ns, char *err, size_t err_size)
{
    struct wbuf b = { .fd = -1 };
    char tmp[1024];
    uint64_t size = IDX_HEADER + IDX_TRAILER + 8ull * seg->n_rows;
    uint8_t zero[16] = { 0 };
    int a, error = GPU_OK;

    for (a = 0; a < GPU_INDEX_N_ATTRS; a++) {
        const struct gpu_index_bitmaps *bm = &seg->attrs[a];

        size += 16 + 4ull * (2 * bm->n_keys + 1 + bm->n_words);
    }
    b.p = malloc(WBUF_SIZE);
    if (!b.p) {
        set_err(err, err_size, "%s: out of memory", path);
        return GPU_ERR_NOMEM;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    b.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (b.fd < 0) {
        set_err(err, err_size, "%s: %s", tmp, strerror(errno));
        free(b.p);
        return GPU_ERR_INVALID;
    }

    put(&b, IDX_MAGIC, 8);
    put32(&b, IDX_VERSION);
    put32(&b, seg->encoding);
    put32(&b, seg->n_rows);
    put32(&b, GPU_INDEX_N_ATTRS);
    put64(&b, first_ts_ns);
    put64(&b, last_ts_ns);
    put64(&b, size);
    put(&b, zero, 16);
    for (a = 0; a < GPU_INDEX_N_ATTRS; a++) {
        put32(&b, a);
        put32(&b, seg->attrs[a].n_keys);
        put32(&b, seg->attrs[a].n_words);
        put32(&b, gpu_index_attr_bits(a));
    }
    put(&b, pcap_offsets, 8ull * seg->n_rows);
    for (a = 0; a < GPU_INDEX_N_ATTRS; a++) {
        const struct gpu_index_bitmaps *bm = &seg->attrs[a];
        static const uint32_t zero_offset = 0;

        put(&b, bm->keys, 4ull * bm->n_keys);
        put(&b, bm->offsets ? bm->offsets : &zero_offset,
            4ull * (bm->n_keys + 1));
        put(&b, bm->words, 4ull * bm->n_words);
    }
    put32(&b, b.crc);
    put(&b, IDX_END, 8);
    wbuf_flush(&b);
    if (b.error) {
        set_err(err, err_size, "%s: %s", tmp, strerror(b.error));
        error = GPU_ERR_INVALID;
    } else if (b.total != size) {
        set_err(err, err_size, "%s: wrote %"PRIu64" bytes of %"PRIu64, tmp,
                b.total, size);
        error = GPU_ERR_INVALID;
    }
    if (!error && fsync(b.fd)) {
        set_err(err, err_size, "%s: fsync: %s", tmp, strerror(errno));
        error = GPU_ERR_INVALID;
    }
    close(b.fd);
    free(b.p);
    if (!error && rename(tmp, path)) {
        set_err(err, err_size, "%s: %s", path, strerror(errno));
        error = GPU_ERR_INVALID;
    }
    if (error) {
        unlink(tmp);
    } else {
        fsync_dir_of(path);
    }
    return error;
}

static uint32_t
get32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, 4);
    return v;
}

static uint64_t
get64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, 8);
    return v;
}

int
gpu_index_file_read(const char *path, struct gpu_index_segment_index *seg,
                    uint64_t **pcap_offsets, uint64_t *first_ts_ns,
                    uint64_t *last_ts_ns, char *err, size_t err_size)
{
    uint8_t *buf = NULL;
    struct stat st;
    uint64_t size, need, n_rows;
    const uint8_t *p;
    FILE *f;
    int a, error = GPU_ERR_INVALID;

    *pcap_offsets = NULL;
    f = fopen(path, "rb");
    if (!f) {
        set_err(err, err_size, "%s: %s", path, strerror(errno));
        return GPU_ERR_NOT_FOUND;
    }
    if (fstat(fileno(f), &st) || st.st_size < IDX_HEADER + IDX_TRAILER) {
        set_err(err, err_size, "%s: truncated (%lld bytes)", path,
                (long long) st.st_size);
        goto out;
    }
    size = st.st_size;
    buf = malloc(size);
    if (!buf) {
        set_err(err, err_size, "%s: out of memory", path);
        error = GPU_ERR_NOMEM;
        goto out;
    }
    if (fread(buf, 1, size, f) != size) {
        set_err(err, err_size, "%s: short read", path);
        goto out;
    }
    if (memcmp(buf, IDX_MAGIC, 8) || get32(buf + 8) != IDX_VERSION) {
        set_err(err, err_size, "%s: not an index file of version %d", path,
                IDX_VERSION);
        goto out;
    }
    if (get64(buf + 40) != size) {
        set_err(err, err_size, "%s: truncated or extended: %"PRIu64
                " bytes, header says %"PRIu64, path, size,
                get64(buf + 40));
        goto out;
    }
    if (memcmp(buf + size - 8, IDX_END, 8)
        || crc32_buf(buf, size - IDX_TRAILER)
           != get32(buf + size - IDX_TRAILER)) {
        set_err(err, err_size, "%s: checksum mismatch (corrupted)", path);
        goto out;
    }
    n_rows = get32(buf + 16);
    if (get32(buf + 20) != GPU_INDEX_N_ATTRS || get32(buf + 12) > 1
        || n_rows > GPU_INDEX_MAX_ROWS) {
        set_err(err, err_size, "%s: unexpected attribute count, encoding "
                "or row count", path);
        goto out;
    }
    need = IDX_HEADER + IDX_TRAILER + 8 * n_rows;
    p = buf + IDX_HEADER;
    for (a = 0; a < GPU_INDEX_N_ATTRS; a++, p += 16) {
        if (get32(p) != (uint32_t) a || get32(p + 4) > n_rows
            || get32(p + 8) > 2 * n_rows) {
            set_err(err, err_size, "%s: bad directory entry %d", path, a);
            goto out;
        }
        need += 16 + 4ull * (2ull * get32(p + 4) + 1 + get32(p + 8));
    }
    if (need != size) {
        set_err(err, err_size, "%s: sections do not add up", path);
        goto out;
    }

    seg->n_rows = n_rows;
    seg->encoding = get32(buf + 12);
    *first_ts_ns = get64(buf + 24);
    *last_ts_ns = get64(buf + 32);
    *pcap_offsets = malloc((n_rows ? n_rows : 1) * 8);
    if (!*pcap_offsets) {
        error = GPU_ERR_NOMEM;
        goto out;
    }
    memcpy(*pcap_offsets, p, 8 * n_rows);
    const uint8_t *dir = buf + IDX_HEADER;
    p += 8 * n_rows;
    for (a = 0; a < GPU_INDEX_N_ATTRS; a++) {
        struct gpu_index_bitmaps *bm = &seg->attrs[a];
        uint32_t nk = get32(dir + 16 * a + 4), nw = get32(dir + 16 * a + 8);
        char why[200];

        if (gpu_index_bitmaps_reserve(bm, nk, nw)) {
            error = GPU_ERR_NOMEM;
            goto out;
        }
        bm->n_rows = n_rows;
        bm->encoding = seg->encoding;
        bm->n_keys = nk;
        bm->n_words = nw;
        memcpy(bm->keys, p, 4ull * nk);
        p += 4ull * nk;
        memcpy(bm->offsets, p, 4ull * (nk + 1));
        p += 4ull * (nk + 1);
        memcpy(bm->words, p, 4ull * nw);
        p += 4ull * nw;
        if (gpu_index_bitmaps_check(bm, why, sizeof why)) {
            set_err(err, err_size, "%s: attribute %s: %s", path,
                    gpu_index_attr_name(a), why);
            goto out;
        }
    }
    error = GPU_OK;

out:
    if (error) {
        free(*pcap_offsets);
        *pcap_offsets = NULL;
    }
    free(buf);
    fclose(f);
    return error;
}

/* ---- Segments in a folder. ---- */

struct seg_entry {
    uint64_t seq;
    bool has_pcap, has_idx;
    uint64_t pcap_bytes, idx_bytes;
    time_t mtime;
};

static int
cmp_seg(const void *a_, const void *b_)
{
    const struct seg_entry *a = a_, *b = b_;

    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Lists the segments in 'dir', oldest first.  Returns their count or -1
 * (errno set) if the folder cannot be read. */
static int
list_segments(const char *dir, struct seg_entry **segsp)
{
    struct seg_entry *segs = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    DIR *d = opendir(dir);

    *segsp = NULL;
    if (!d) {
        return -1;
    }
    while ((de = readdir(d))) {
        unsigned long long seq;
        char suffix[16], path[1024];
        struct stat st;
        size_t i;

        if (sscanf(de->d_name, "seg-%16llu.%15s", &seq, suffix) != 2
            || (strcmp(suffix, "pcap") && strcmp(suffix, "idx"))) {
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &st)) {
            continue;
        }
        for (i = 0; i < n && segs[i].seq != seq; i++) {
            continue;
        }
        if (i == n) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                struct seg_entry *ns = realloc(segs, cap * sizeof *ns);
                if (!ns) {
                    break;
                }
                segs = ns;
            }
            memset(&segs[n], 0, sizeof segs[n]);
            segs[n++].seq = seq;
        }
        if (!strcmp(suffix, "pcap")) {
            segs[i].has_pcap = true;
            segs[i].pcap_bytes = st.st_size;
            segs[i].mtime = st.st_mtime;
        } else {
            segs[i].has_idx = true;
            segs[i].idx_bytes = st.st_size;
        }
    }
    closedir(d);
    if (n) {
        qsort(segs, n, sizeof *segs, cmp_seg);
    }
    *segsp = segs;
    return n;
}

static void
seg_path(char *buf, size_t size, const char *dir, uint64_t seq,
         const char *suffix)
{
    snprintf(buf, size, "%s/seg-%016"PRIu64".%s", dir, seq, suffix);
}

/* ---- Queries over a store. ---- */

/* Reads the pcap record at 'off': its header and up to 'max' bytes.
 * '*pos' is where 'f' is (UINT64_MAX: unknown): matches come in file
 * order, mostly one after the other, and glibc's fseeko() makes an
 * lseek() and drops its buffer every time, even to where it is. */
static bool
read_packet(FILE *f, uint64_t *pos, uint64_t off, struct pcap_pkthdr *h,
            uint8_t *data, uint32_t max)
{
    uint32_t hdr[4];

    if (*pos != off && fseeko(f, off, SEEK_SET)) {
        *pos = UINT64_MAX;
        return false;
    }
    *pos = UINT64_MAX;
    if (fread(hdr, 4, 4, f) != 4 || hdr[2] > max || hdr[2] > hdr[3]) {
        return false;
    }
    h->ts.tv_sec = hdr[0];
    h->ts.tv_usec = hdr[1];     /* Nanoseconds: the file's precision. */
    h->caplen = hdr[2];
    h->len = hdr[3];
    if (fread(data, 1, hdr[2], f) != hdr[2]) {
        return false;
    }
    *pos = off + sizeof hdr + hdr[2];
    return true;
}

int64_t
gpu_index_store_query(const char *dir, const char *expr, FILE *out,
                      const char *pcap_path, uint64_t limit,
                      unsigned int *n_skipped, char *err, size_t err_size)
{
    struct gpu_index_query *q;
    struct seg_entry *segs;
    pcap_t *dead = NULL;
    pcap_dumper_t *dumper = NULL;
    uint8_t *data = NULL;
    unsigned int skipped = 0;
    int64_t matches = 0;
    uint64_t pos;
    int n, i, error;
    const uint32_t max_cap = 262144;

    if (n_skipped) {
        *n_skipped = 0;
    }
    error = gpu_index_query_parse(expr, &q, err, err_size);
    if (error) {
        return error;
    }
    n = list_segments(dir, &segs);
    if (n < 0) {
        set_err(err, err_size, "%s: %s", dir, strerror(errno));
        gpu_index_query_destroy(q);
        return GPU_ERR_NOT_FOUND;
    }
    data = malloc(max_cap);
    if (!data) {
        error = GPU_ERR_NOMEM;
        goto out;
    }
    if (pcap_path) {
        dead = pcap_open_dead_with_tstamp_precision(
            DLT_EN10MB, max_cap, PCAP_TSTAMP_PRECISION_NANO);
        dumper = dead ? pcap_dump_open(dead, pcap_path) : NULL;
        if (!dumper) {
            set_err(err, err_size, "%s: %s", pcap_path,
                    dead ? pcap_geterr(dead) : "pcap_open_dead failed");
            error = GPU_ERR_INVALID;
            goto out;
        }
    }
    for (i = 0; i < n && (!limit || (uint64_t) matches < limit); i++) {
        struct gpu_index_segment_index seg;
        uint64_t *offs, t0, t1;
        char path[1024], why[512];
        uint32_t *rows;
        size_t n_rows, r;
        FILE *pf;

        if (!segs[i].has_idx || !segs[i].has_pcap) {
            skipped++;
            if (out) {
                fprintf(out, "segment %"PRIu64": %s, skipped\n", segs[i].seq,
                        segs[i].has_pcap
                        ? "no index (being written, or left by a crash)"
                        : "no pcap");
            }
            continue;
        }
        gpu_index_segment_index_init(&seg);
        seg_path(path, sizeof path, dir, segs[i].seq, "idx");
        if (gpu_index_file_read(path, &seg, &offs, &t0, &t1, why,
                                sizeof why)) {
            skipped++;
            if (out) {
                fprintf(out, "segment %"PRIu64": index refused: %s\n",
                        segs[i].seq, why);
            }
            gpu_index_segment_index_free(&seg);
            continue;
        }
        error = gpu_index_query_eval(q, &seg, &rows, &n_rows);
        gpu_index_segment_index_free(&seg);
        if (error) {
            free(offs);
            goto out;
        }
        seg_path(path, sizeof path, dir, segs[i].seq, "pcap");
        pf = fopen(path, "rb");
        if (pf) {
            setvbuf(pf, NULL, _IOFBF, 1 << 20);
        }
        pos = UINT64_MAX;
        for (r = 0; pf && r < n_rows
             && (!limit || (uint64_t) matches < limit); r++) {
            struct pcap_pkthdr h;
            struct gpu_index_record rec;

            if (!read_packet(pf, &pos, offs[rows[r]], &h, data,
                             max_cap)) {
                if (out) {
                    fprintf(out, "segment %"PRIu64": row %"PRIu32
                            " unreadable in the pcap\n", segs[i].seq,
                            rows[r]);
                }
                continue;
            }
            if (out) {
                char line[256];

                gpu_index_record_from_frame(
                    &rec, data, h.caplen, h.len,
                    h.ts.tv_sec * 1000000000ull + h.ts.tv_usec, 0);
                gpu_index_record_format(&rec, line, sizeof line);
                fprintf(out, "%s\n", line);
            }
            if (dumper) {
                pcap_dump((u_char *) dumper, &h, data);
            }
            matches++;
        }
        if (!pf) {
            skipped++;
        } else {
            fclose(pf);
        }
        free(rows);
        free(offs);
    }
    error = GPU_OK;

out:
    if (dumper) {
        pcap_dump_close(dumper);
    }
    if (dead) {
        pcap_close(dead);
    }
    free(data);
    free(segs);
    gpu_index_query_destroy(q);
    if (n_skipped) {
        *n_skipped = skipped;
    }
    return error ? error : matches;
}

/* ---- The recorder. ---- */

struct slot {
    atomic_size_t seq;
    uint64_t ts_ns;
    uint32_t in_port, len, caplen;
};

/* One segment's records, from its first packet until its index is on
 * disk.  There are two: the writer fills one while the indexer fsyncs
 * the other's files and builds and writes its index, so that neither the
 * sync nor the build (about a second for a million records on the CPU)
 * stops the writer, whose ring holds only milliseconds of traffic. */
struct seg_recs {
    uint64_t seq;
    int pcap_fd, ports_fd;      /* -1: no segment. */
    struct gpu_index_record *recs;
    uint64_t *offs;
    uint32_t n_recs, recs_cap;
    uint64_t first_ts;
    uint64_t pcap_off;          /* Bytes of pcap, buffered ones included. */
    uint64_t pcap_flushed;      /* Bytes of pcap handed to the kernel. */
    int write_error;            /* errno of the first failed pcap write:
                                 * the file ends early, at 'pcap_flushed'
                                 * (I/O thread, then indexer). */
    bool busy;                  /* Closed, not yet indexed (under mutex). */
    time_t opened;
};

/* The writer's output buffers.  A write() per megabyte rather than stdio
 * calls per record: at 3 Mpps a record has ~330 ns, and a syscall (an
 * lseek() for every ftell() of the offset, as libpcap's dumper did) costs
 * more than the rest of its work.  A crash loses at most the buffers not
 * yet written, as it lost stdio's before, and recovery cuts off the torn
 * record.
 *
 * The writes themselves are the I/O thread's: a write() or the kernel's
 * writeback can hold its caller for milliseconds when the disk is busy
 * (5 ms at a time, ~0.1-0.6 s in 4 s at ~500 MB/s, on the H100
 * machine), and the writer must not stop for that long, since the
 * staging ring holds milliseconds of traffic.  IO_BUFS buffers, 64 MB,
 * absorb the disk's stalls instead. */
#define WRITER_PCAP_BUF (1u << 20)
#define WRITER_PORTS_BUF 16384
#define IO_BUFS 64

/* A buffer of a segment's bytes on its way to the disk. */
struct io_buf {
    struct seg_recs *seg;       /* Whose files. */
    uint8_t *pcap;              /* WRITER_PCAP_BUF bytes. */
    size_t pcap_len;
    uint32_t *ports;            /* WRITER_PORTS_BUF entries. */
    size_t ports_n;
    bool close;                 /* The segment's last: then index it. */
};

#define MAX_INDEX_THREADS 16

/* The writer hands slots back to the producers this many at a time (and
 * whatever it holds when the ring is empty).  Slot by slot, a producer
 * facing a full ring refills each slot as soon as it is freed, so the
 * cache line holding the writer's next slot moves to the producer's core
 * and back for every record; 32 slots are 16 lines the producer leaves
 * alone until the writer is done with all of them, and one batch of the
 * datapath's (which then takes them with one CAS). */
#define WRITER_RELEASE_RUN 32

#define CACHE_LINE 64
#define ROUND_UP(X, Y) (((X) + (Y) - 1) / (Y) * (Y))
/* Whole slots a line, so that a run of them is whole lines. */
_Static_assert(CACHE_LINE % sizeof(struct slot) == 0, "slot size");

struct gpu_index_recorder {
    struct gpu_index_recorder_config cfg;
    char *dir;
    struct gpu_index_builder *builder;      /* builders[0]. */
    struct gpu_index_builder *builders[MAX_INDEX_THREADS];
    int n_builders;
    struct gpu_index_segment_index seg;     /* Reused by every segment. */

    /* Staging ring.  What the producers write (the enqueue position and
     * their counters) and what the writer writes for every record (the
     * dequeue position) each have a cache line of their own, apart from
     * what both only read: one line for all, as before, moved between the
     * PMD's core and the writer's several times a record. */
    struct slot *slots;         /* Cache-line aligned. */
    uint8_t *data;              /* ring_slots x snaplen. */
    size_t mask;

    /* The producers' (atomic). */
    _Alignas(CACHE_LINE) atomic_size_t enq;
    uint64_t submitted, dropped, squeezed;

    /* The writer's. */
    _Alignas(CACHE_LINE) size_t deq;
    uint64_t recorded;          /* Atomic. */

    /* Worker. */
    _Alignas(CACHE_LINE) pthread_t thread;
    atomic_bool stop, paused;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    uint64_t flush_req, flush_done;
    int flush_error;

    /* The open segment and its unwritten bytes (worker only). */
    uint64_t seq;               /* The last segment number used. */
    struct seg_recs bufs[2];
    struct seg_recs *cur;       /* One of 'bufs'. */
    struct io_buf *wb;          /* The writer's buffer, being filled. */

    /* I/O thread and indexer, under 'mutex'.  Buffers go from the writer
     * to the I/O thread through 'io_queue' (positions io_head to
     * io_tail, the one at io_head being written), and back through
     * 'io_free'; a segment's last buffer hands it on to the indexer. */
    struct io_buf io_bufs[IO_BUFS];
    struct io_buf *io_queue[IO_BUFS];
    size_t io_head, io_tail;
    struct io_buf *io_free[IO_BUFS];
    size_t n_io_free;
    pthread_t io_thread;
    bool io_stop;
    pthread_t indexer;
    pthread_cond_t idx_cond;    /* Any change of the above or below. */
    struct seg_recs *closing;   /* The indexer's, until it is done. */
    int index_error;            /* The last segment's. */
    bool idx_stop;

    /* Counters (atomic); 'submitted', 'dropped' and 'recorded' are
     * above. */
    uint64_t writer_waits, writer_wait_ns;
    uint64_t disk_waits, disk_wait_ns;
    uint64_t sync_ns, index_write_ns;
    uint64_t records_unwritten;
    int last_write_error;
    _Atomic uint64_t disk_left;     /* Test only: UINT64_MAX normally. */
    _Atomic uint64_t disk_rate;     /* Test only: bytes/s, 0 normally. */
    double io_due_ms;               /* I/O thread's: when 'disk_rate' lets
                                     * it write next. */
    uint64_t segments_written,
             segments_deleted, pcap_bytes, index_bytes, build_ns,
             build_rows;

    /* Recovery, before the first record (by create, or by the worker when
     * it had to wait for the folder's lock). */
    int lock_fd;
    bool locked;                /* Holds the lock (worker only, after). */
    atomic_bool ready;          /* Recovered: the log below is final. */
    char *recovery_log;
    size_t recovery_log_len;
    uint64_t segments_recovered, records_recovered, bytes_cut,
             segments_set_aside;
};

void
gpu_index_recorder_config_init(struct gpu_index_recorder_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->backend = GPU_INDEX_BACKEND_AUTO;
    cfg->encoding = GPU_INDEX_PLWAH;
    cfg->snaplen = 256;
    cfg->segment_packets = 1u << 20;
    /* 16 MB of frames at the default snaplen: ~20 ms of traffic at 3
     * Mpps, for a writer whose core the host takes away for a while.  A
     * ring of 4096 slots (1 MB, which stays in the cores' caches) costs
     * the PMD ~0.4 us less a batch of 32 in the switch on the H100
     * machine, but lost records there whenever the writer stalled more
     * than ~1.5 ms (docs/INDEX-NOTES.md). */
    cfg->ring_slots = 65536;
}

static void
add(uint64_t *c, uint64_t n)
{
    __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static void fill_slot(struct gpu_index_recorder *, size_t pos,
                      const uint8_t *frame, uint32_t cap_len, uint32_t len,
                      uint64_t ts_ns, uint32_t in_port);

/* The bytes of a frame of 'len' bytes, 'cap_len' of which the caller
 * would keep, that a record takes when it may keep 'snaplen'; counts in
 * '*n_squeezed' a record kept shorter by an overload snaplen. */
static uint32_t
record_cap(const struct gpu_index_recorder *r, uint32_t snaplen,
           uint32_t cap_len, uint32_t len, size_t *n_squeezed)
{
    if (cap_len <= snaplen) {
        return cap_len;
    }
    *n_squeezed += snaplen < r->cfg.snaplen && len > snaplen;
    return snaplen;
}

/* The bytes a record may keep when the producers' next free position is
 * 'next': the store's snaplen, or its overload snaplen while fewer than
 * a quarter of the ring's slots are free from 'next' on (the writer
 * frees them in ring order, so one slot's sequence number tells). */
static uint32_t
slot_snaplen(struct gpu_index_recorder *r, size_t next)
{
    size_t quarter = (r->mask + 1) / 4, last;

    if (!r->cfg.overload_snaplen) {
        return r->cfg.snaplen;
    }
    last = next + (quarter ? quarter : 1) - 1;
    return (atomic_load_explicit(&r->slots[last & r->mask].seq,
                                 memory_order_relaxed) == last
            ? r->cfg.snaplen : r->cfg.overload_snaplen);
}

bool
gpu_index_recorder_submit(struct gpu_index_recorder *r,
                          const uint8_t *frame, uint32_t len,
                          uint64_t ts_ns, uint32_t in_port)
{
    return gpu_index_recorder_submit_capped(r, frame, len, len, ts_ns,
                                            in_port);
}

bool
gpu_index_recorder_submit_capped(struct gpu_index_recorder *r,
                                 const uint8_t *frame, uint32_t cap_len,
                                 uint32_t len, uint64_t ts_ns,
                                 uint32_t in_port)
{
    size_t pos = atomic_load_explicit(&r->enq, memory_order_relaxed);
    struct slot *s;

    add(&r->submitted, 1);
    for (;;) {
        size_t seq;
        intptr_t diff;

        s = &r->slots[pos & r->mask];
        seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        diff = (intptr_t) seq - (intptr_t) pos;
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(
                    &r->enq, &pos, pos + 1, memory_order_relaxed,
                    memory_order_relaxed)) {
                break;
            }
        } else if (diff < 0) {
            add(&r->dropped, 1);    /* Full: the worker is behind. */
            return false;
        } else {
            pos = atomic_load_explicit(&r->enq, memory_order_relaxed);
        }
    }
    size_t n_squeezed = 0;

    cap_len = record_cap(r, slot_snaplen(r, pos + 1), cap_len, len,
                         &n_squeezed);
    if (n_squeezed) {
        add(&r->squeezed, 1);
    }
    fill_slot(r, pos, frame, cap_len, len, ts_ns, in_port);
    return true;
}

/* Fills the slot of ring position 'pos', reserved by the caller. */
static void
fill_slot(struct gpu_index_recorder *r, size_t pos, const uint8_t *frame,
          uint32_t cap_len, uint32_t len, uint64_t ts_ns, uint32_t in_port)
{
    struct slot *s = &r->slots[pos & r->mask];

    s->ts_ns = ts_ns;
    s->in_port = in_port;
    s->len = len;
    s->caplen = cap_len < len ? cap_len : len;
    if (s->caplen > r->cfg.snaplen) {
        s->caplen = r->cfg.snaplen;
    }
    memcpy(r->data + (pos & r->mask) * r->cfg.snaplen, frame, s->caplen);
    atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
}

/* Returns how many slots from ring position 'pos' on, at most 'n', are
 * free for this lap, 'pos' itself being free. */
static size_t
free_run(struct gpu_index_recorder *r, size_t pos, size_t n)
{
    size_t k;

    n = n < r->mask + 1 ? n : r->mask + 1;
    /* The worker frees slots in ring order, so if the run's last slot is
     * free, so are all before it: one look, when the ring has room. */
    if (atomic_load_explicit(&r->slots[(pos + n - 1) & r->mask].seq,
                             memory_order_acquire) == pos + n - 1) {
        return n;
    }
    for (k = 1; k < n; k++) {
        if (atomic_load_explicit(&r->slots[(pos + k) & r->mask].seq,
                                 memory_order_acquire) != pos + k) {
            break;
        }
    }
    return k;
}

size_t
gpu_index_recorder_submit_batch(struct gpu_index_recorder *r,
                                const struct gpu_index_frame *f, size_t n,
                                uint64_t ts_ns)
{
    size_t pos = atomic_load_explicit(&r->enq, memory_order_relaxed);
    size_t room;

    if (!n) {
        return 0;
    }
    add(&r->submitted, n);
    /* One CAS takes as many slots as are free, up to the whole batch;
     * the rest of the batch is dropped and counted with one add.  The
     * PMD, which calls this, never waits: a full ring costs it a load, a
     * compare and that add (frame by frame, it was two atomic adds and
     * a load of the line the writer is working on, per frame). */
    for (;;) {
        size_t seq = atomic_load_explicit(&r->slots[pos & r->mask].seq,
                                          memory_order_acquire);
        intptr_t diff = (intptr_t) seq - (intptr_t) pos;

        if (diff < 0) {
            room = 0;           /* Full: the worker is behind. */
            break;
        } else if (diff > 0) {
            /* Another producer took 'pos'. */
            pos = atomic_load_explicit(&r->enq, memory_order_relaxed);
            continue;
        }
        room = free_run(r, pos, n);
        if (atomic_compare_exchange_weak_explicit(
                &r->enq, &pos, pos + room, memory_order_relaxed,
                memory_order_relaxed)) {
            break;
        }
    }
    /* One look a batch at how full the ring is. */
    uint32_t snaplen = room ? slot_snaplen(r, pos + room) : 0;
    size_t n_squeezed = 0;

    for (size_t i = 0; i < room; i++) {
        fill_slot(r, pos + i, f[i].data,
                  record_cap(r, snaplen, f[i].cap_len, f[i].len, &n_squeezed),
                  f[i].len, ts_ns, f[i].in_port);
    }
    if (n_squeezed) {
        add(&r->squeezed, n_squeezed);
    }
    if (room < n) {
        add(&r->dropped, n - room);
    }
    return room;
}

/* Deletes segments beyond the retention limits, oldest first, never one
 * newer than 'newest' (the writer's open segment, whose index does not
 * exist yet), and counts the bytes on disk.  Indexer (or create) only. */
static void
apply_retention(struct gpu_index_recorder *r, uint64_t newest)
{
    struct seg_entry *segs;
    uint64_t total = 0, pcap = 0, idx = 0;
    time_t now = time(NULL);
    int n = list_segments(r->dir, &segs), i;

    if (n < 0) {
        return;
    }
    for (i = 0; i < n; i++) {
        total += segs[i].pcap_bytes + segs[i].idx_bytes;
    }
    for (i = 0; i < n; i++) {
        bool old = (r->cfg.retention_seconds && segs[i].has_pcap
                    && now - segs[i].mtime
                       > (time_t) r->cfg.retention_seconds);
        bool big = r->cfg.retention_bytes && total > r->cfg.retention_bytes;
        char path[1024];

        if ((!old && !big) || segs[i].seq > newest) {
            pcap += segs[i].pcap_bytes;
            idx += segs[i].idx_bytes;
            continue;
        }
        /* The index first: a crash in between leaves a pcap without an
         * index, which queries report and skip. */
        seg_path(path, sizeof path, r->dir, segs[i].seq, "idx");
        unlink(path);
        seg_path(path, sizeof path, r->dir, segs[i].seq, "pcap");
        unlink(path);
        seg_path(path, sizeof path, r->dir, segs[i].seq, "ports");
        unlink(path);
        total -= segs[i].pcap_bytes + segs[i].idx_bytes;
        add(&r->segments_deleted, 1);
    }
    __atomic_store_n(&r->pcap_bytes, pcap, __ATOMIC_RELAXED);
    __atomic_store_n(&r->index_bytes, idx, __ATOMIC_RELAXED);
    free(segs);
}

/* Writes all of 'buf' to 'fd'.  Returns 0, or the errno of a write that
 * failed (a full disk), with '*written' (if nonnull) the bytes written
 * before it; the failure is said once on stderr. */
static int
write_all(int fd, const void *buf, size_t n, const char *what,
          size_t *written)
{
    const uint8_t *p = buf;
    int error = 0;

    while (n) {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            error = w < 0 ? errno : EIO;
            fprintf(stderr, "gpu-index: writing %s: %s\n", what,
                    strerror(error));
            break;
        }
        p += w;
        n -= w;
    }
    if (written) {
        *written = p - (const uint8_t *) buf;
    }
    return error;
}

/* Hands the writer's buffer, with the records of segment r->cur in it,
 * to the I/O thread ('close': the segment's last, after which the I/O
 * thread hands the segment to the indexer), and takes an empty one,
 * waiting if the disk is behind by all of them. */
static void
submit_io(struct gpu_index_recorder *r, bool close)
{
    struct io_buf *b = r->wb;

    b->seg = r->cur;
    b->close = close;
    pthread_mutex_lock(&r->mutex);
    if (close) {
        r->cur->busy = true;
    }
    r->io_queue[r->io_tail++ % IO_BUFS] = b;
    pthread_cond_broadcast(&r->idx_cond);
    if (!r->n_io_free) {
        double t0 = gpu_index_now_ms();

        while (!r->n_io_free) {
            pthread_cond_wait(&r->idx_cond, &r->mutex);
        }
        add(&r->disk_waits, 1);
        add(&r->disk_wait_ns, (uint64_t) ((gpu_index_now_ms() - t0) * 1e6));
    }
    r->wb = r->io_free[--r->n_io_free];
    pthread_mutex_unlock(&r->mutex);
    r->wb->pcap_len = 0;
    r->wb->ports_n = 0;
}

/* Hands the buffered records of the open segment to the kernel (through
 * the I/O thread). */
static void
write_out(struct gpu_index_recorder *r)
{
    if (r->wb->pcap_len || r->wb->ports_n) {
        submit_io(r, false);
    }
}

/* Test only: holds the I/O thread, which has just written 'n' bytes,
 * until a disk writing 'disk_rate' bytes a second would have written
 * them.  Time it did not use is not saved up: a slow disk does not write
 * faster after an idle second. */
static void
io_throttle(struct gpu_index_recorder *r, size_t n)
{
    uint64_t rate = atomic_load_explicit(&r->disk_rate,
                                         memory_order_relaxed);
    double now, wait_ms;

    if (!rate) {
        return;
    }
    now = gpu_index_now_ms();
    r->io_due_ms = (r->io_due_ms > now ? r->io_due_ms : now)
                   + n * 1e3 / rate;
    wait_ms = r->io_due_ms - now;
    if (wait_ms > 0) {
        uint64_t ns = wait_ms * 1e6;
        struct timespec ts = {
            .tv_sec = ns / 1000000000,
            .tv_nsec = ns % 1000000000,
        };

        nanosleep(&ts, NULL);
    }
}

/* Writes buffer 'b' to its segment's files, and has the kernel start
 * writing them to disk: at the segment's end the indexer's fsync() then
 * waits for the last few megabytes, not for the whole segment (~175 MB
 * for a million Internet-mix records). */
static void
io_write(struct gpu_index_recorder *r, struct io_buf *b)
{
    struct seg_recs *s = b->seg;

    /* After a failed write the file ends early: bytes written after it
     * would sit where the index says earlier records are, so none are
     * (the indexer keeps the records before the failure). */
    if (b->pcap_len && !s->write_error) {
        size_t len = b->pcap_len, written;
        uint64_t left = atomic_load_explicit(&r->disk_left,
                                             memory_order_relaxed);
        int error;

        if (left < len) {
            /* Test only: a disk that fills after 'left' more bytes. */
            error = write_all(s->pcap_fd, b->pcap, left, "pcap", &written);
            error = error ? error : ENOSPC;
        } else {
            error = write_all(s->pcap_fd, b->pcap, len, "pcap", &written);
        }
        if (left != UINT64_MAX) {
            atomic_store_explicit(&r->disk_left, left - written,
                                  memory_order_relaxed);
        }
        start_writeback(s->pcap_fd, s->pcap_flushed, written);
        s->pcap_flushed += written;
        if (error) {
            s->write_error = error;
            __atomic_store_n(&r->last_write_error, error, __ATOMIC_RELAXED);
        }
    }
    if (b->ports_n) {
        write_all(s->ports_fd, b->ports, b->ports_n * sizeof *b->ports,
                  "ports", NULL);
    }
    io_throttle(r, b->pcap_len + b->ports_n * sizeof *b->ports);
}

static void *
io_thread(void *r_)
{
    struct gpu_index_recorder *r = r_;

    pthread_setname_np(pthread_self(), "gidx-io");
    pthread_mutex_lock(&r->mutex);
    for (;;) {
        while (r->io_head == r->io_tail && !r->io_stop) {
            pthread_cond_wait(&r->idx_cond, &r->mutex);
        }
        if (r->io_head == r->io_tail) {
            break;
        }
        struct io_buf *b = r->io_queue[r->io_head % IO_BUFS];

        pthread_mutex_unlock(&r->mutex);
        io_write(r, b);
        pthread_mutex_lock(&r->mutex);
        if (b->close) {
            /* The segment's bytes are all written: the indexer's, once
             * it is done with the previous one. */
            while (r->closing) {
                pthread_cond_wait(&r->idx_cond, &r->mutex);
            }
            r->closing = b->seg;
        }
        r->io_head++;
        r->io_free[r->n_io_free++] = b;
        pthread_cond_broadcast(&r->idx_cond);
    }
    pthread_mutex_unlock(&r->mutex);
    return NULL;
}

/* Stops the I/O thread or the indexer ('*stop' being its flag), once it
 * has done what it was given. */
static void
stop_thread(struct gpu_index_recorder *r, bool *stop, pthread_t thread)
{
    pthread_mutex_lock(&r->mutex);
    *stop = true;
    pthread_cond_broadcast(&r->idx_cond);
    pthread_mutex_unlock(&r->mutex);
    pthread_join(thread, NULL);
}

/* For segment 's', whose pcap a failed write left short at
 * s->pcap_flushed bytes: keeps the records whole in the file (they are
 * the first ones: the file is written in order) and cuts the file after
 * the last of them, so that the index built next has only records that
 * are on the disk, each where it says.  The others are counted. */
static void
keep_written(struct gpu_index_recorder *r, struct seg_recs *s)
{
    uint32_t k = s->n_recs;
    uint64_t end;

    /* A record's bytes: its 16-byte pcap header and what was captured. */
    while (k > 0
           && s->offs[k - 1] + 16 + s->recs[k - 1].cap_len > s->pcap_flushed) {
        k--;
    }
    end = k ? s->offs[k - 1] + 16 + s->recs[k - 1].cap_len : 0;
    if (ftruncate(s->pcap_fd, end)) {
        /* The index names only the whole records before 'end' anyway. */
        fprintf(stderr, "gpu-index: segment %"PRIu64": cutting the pcap: "
                "%s\n", s->seq, strerror(errno));
    }
    add(&r->records_unwritten, s->n_recs - k);
    fprintf(stderr, "gpu-index: segment %"PRIu64": %"PRIu32" of %"PRIu32
            " records not written (%s)\n", s->seq, s->n_recs - k,
            s->n_recs, strerror(s->write_error));
    s->n_recs = k;
}

/* The indexer's part of closing segment 's': the pcap is complete and on
 * disk before its index exists. */
static int
index_segment(struct gpu_index_recorder *r, struct seg_recs *s)
{
    struct gpu_index_segment_index *seg = &r->seg;
    char path[1024], err[512];
    int error;
    double t0;

    if (s->write_error) {
        keep_written(r, s);
    }
    t0 = gpu_index_now_ms();
    fsync(s->pcap_fd);
    close(s->pcap_fd);
    fsync(s->ports_fd);
    close(s->ports_fd);
    s->pcap_fd = s->ports_fd = -1;
    add(&r->sync_ns, (uint64_t) ((gpu_index_now_ms() - t0) * 1e6));
    if (s->write_error && !s->n_recs) {
        /* Not even one record reached the disk: no segment. */
        seg_path(path, sizeof path, r->dir, s->seq, "pcap");
        unlink(path);
        seg_path(path, sizeof path, r->dir, s->seq, "ports");
        unlink(path);
        s->write_error = 0;
        apply_retention(r, s->seq);
        return GPU_OK;
    }
    s->write_error = 0;

    t0 = gpu_index_now_ms();
    error = gpu_index_segment_index_build_n(r->builders, r->n_builders,
                                            s->recs, s->n_recs,
                                            r->cfg.encoding, seg);
    add(&r->build_ns, (uint64_t) ((gpu_index_now_ms() - t0) * 1e6));
    add(&r->build_rows, s->n_recs);
    if (!error) {
        t0 = gpu_index_now_ms();
        seg_path(path, sizeof path, r->dir, s->seq, "idx");
        error = gpu_index_file_write(path, seg, s->offs, s->first_ts,
                                     s->n_recs
                                     ? s->recs[s->n_recs - 1].ts_ns : 0,
                                     err, sizeof err);
        if (error) {
            fprintf(stderr, "gpu-index: %s\n", err);
        }
        add(&r->index_write_ns,
            (uint64_t) ((gpu_index_now_ms() - t0) * 1e6));
    }
    if (!error) {
        /* The index holds the ports now; without it, recovery at the
         * next start still has them. */
        seg_path(path, sizeof path, r->dir, s->seq, "ports");
        unlink(path);
        add(&r->segments_written, 1);
    }
    s->n_recs = 0;
    apply_retention(r, s->seq);
    return error;
}

static void *
indexer(void *r_)
{
    struct gpu_index_recorder *r = r_;

    pthread_setname_np(pthread_self(), "gidx-indexer");
    pthread_mutex_lock(&r->mutex);
    for (;;) {
        while (!r->closing && !r->idx_stop) {
            pthread_cond_wait(&r->idx_cond, &r->mutex);
        }
        if (!r->closing) {
            break;
        }
        struct seg_recs *s = r->closing;
        pthread_mutex_unlock(&r->mutex);
        int error = index_segment(r, s);
        pthread_mutex_lock(&r->mutex);
        r->index_error = error;
        s->busy = false;
        r->closing = NULL;
        pthread_cond_broadcast(&r->idx_cond);
    }
    pthread_mutex_unlock(&r->mutex);
    return NULL;
}


/* Closes the open segment, if any: hands its last bytes to the I/O
 * thread, which hands the segment to the indexer once they are written,
 * and goes on with the other segment buffer, waiting only if that one is
 * still being indexed (then the indexer is the bound, and the ring fills
 * meanwhile).  Returns true if there was a segment. */
static bool
close_segment(struct gpu_index_recorder *r)
{
    struct seg_recs *s = r->cur;
    struct seg_recs *next = s == &r->bufs[0] ? &r->bufs[1] : &r->bufs[0];

    if (s->pcap_fd < 0) {
        return false;
    }
    submit_io(r, true);
    pthread_mutex_lock(&r->mutex);
    if (next->busy) {
        double t0 = gpu_index_now_ms();

        while (next->busy) {
            pthread_cond_wait(&r->idx_cond, &r->mutex);
        }
        add(&r->writer_waits, 1);
        add(&r->writer_wait_ns,
            (uint64_t) ((gpu_index_now_ms() - t0) * 1e6));
    }
    r->cur = next;
    pthread_mutex_unlock(&r->mutex);
    return true;
}

/* Waits until every segment closed so far is written and indexed. */
static int
wait_indexer(struct gpu_index_recorder *r)
{
    int error;

    pthread_mutex_lock(&r->mutex);
    while (r->io_head != r->io_tail || r->closing) {
        pthread_cond_wait(&r->idx_cond, &r->mutex);
    }
    error = r->index_error;
    pthread_mutex_unlock(&r->mutex);
    return error;
}

static int
open_file(const char *dir, uint64_t seq, const char *suffix)
{
    char path[1024];
    int fd;

    seg_path(path, sizeof path, dir, seq, suffix);
    /* 0666 less the umask, as the fopen() of libpcap and stdio gave. */
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        fprintf(stderr, "gpu-index: %s: %s\n", path, strerror(errno));
    }
    return fd;
}

static int
open_segment(struct gpu_index_recorder *r, uint64_t ts_ns)
{
    struct seg_recs *s = r->cur;
    /* libpcap's file header for nanosecond Ethernet captures, in this
     * host's byte order: magic, version 2.4, zone, sigfigs, snaplen,
     * link type. */
    uint32_t gh[6] = { 0xa1b23c4d, 2 | 4 << 16, 0, 0, r->cfg.snaplen, 1 };

    r->seq++;
    s->pcap_fd = open_file(r->dir, r->seq, "pcap");
    if (s->pcap_fd < 0) {
        return GPU_ERR_INVALID;
    }
    s->ports_fd = open_file(r->dir, r->seq, "ports");
    if (s->ports_fd < 0) {
        close(s->pcap_fd);
        s->pcap_fd = -1;
        return GPU_ERR_INVALID;
    }
    memcpy(r->wb->pcap + r->wb->pcap_len, gh, sizeof gh);
    r->wb->pcap_len += sizeof gh;
    s->seq = r->seq;
    s->pcap_off = sizeof gh;
    s->pcap_flushed = 0;
    s->n_recs = 0;
    s->first_ts = ts_ns;
    s->opened = time(NULL);
    return GPU_OK;
}

/* Makes room for record 'n' in 's'.  Returns true if there is none (no
 * memory). */
static bool
recs_make_room(struct seg_recs *s, uint32_t n)
{
    if (n == s->recs_cap) {
        uint32_t cap = s->recs_cap ? 2 * s->recs_cap : 1024;
        struct gpu_index_record *nr = realloc(s->recs, cap * sizeof *nr);
        uint64_t *no = realloc(s->offs, cap * sizeof *no);

        s->recs = nr ? nr : s->recs;
        s->offs = no ? no : s->offs;
        if (!nr || !no) {
            return true;
        }
        s->recs_cap = cap;
    }
    return false;
}

/* Records one packet.  Returns false if it was dropped (and counted). */
static bool
record_one(struct gpu_index_recorder *r, const struct slot *sl,
           const uint8_t *data)
{
    struct gpu_index_record *rec;
    struct seg_recs *s = r->cur;
    uint32_t h[4];

    if (s->pcap_fd >= 0 && r->cfg.segment_seconds
        && sl->ts_ns >= s->first_ts
                        + r->cfg.segment_seconds * 1000000000ull) {
        close_segment(r);
        s = r->cur;
    }
    if ((s->pcap_fd < 0 && open_segment(r, sl->ts_ns))
        || recs_make_room(s, s->n_recs)) {
        add(&r->dropped, 1);
        return false;
    }
    if (r->wb->pcap_len + sizeof h + sl->caplen > WRITER_PCAP_BUF
        || r->wb->ports_n == WRITER_PORTS_BUF) {
        submit_io(r, false);
    }
    rec = &s->recs[s->n_recs];
    gpu_index_record_from_frame(rec, data, sl->caplen, sl->len, sl->ts_ns,
                                sl->in_port);
    rec->pcap_offset = s->offs[s->n_recs] = s->pcap_off;
    s->n_recs++;

    /* pcap_dump()'s record: 32-bit seconds, nanoseconds (the file's
     * precision), captured and wire lengths. */
    h[0] = sl->ts_ns / 1000000000u;
    h[1] = sl->ts_ns % 1000000000u;
    h[2] = sl->caplen;
    h[3] = sl->len;
    memcpy(r->wb->pcap + r->wb->pcap_len, h, sizeof h);
    memcpy(r->wb->pcap + r->wb->pcap_len + sizeof h, data, sl->caplen);
    r->wb->pcap_len += sizeof h + sl->caplen;
    s->pcap_off += sizeof h + sl->caplen;

    r->wb->ports[r->wb->ports_n++] = sl->in_port;
    if (s->n_recs >= r->cfg.segment_packets) {
        close_segment(r);
    }
    return true;
}

static void recover_store(struct gpu_index_recorder *);

/* With the folder's lock held: recovers what a crash left, applies the
 * retention limits, and numbers new segments after the ones there. */
static void
recorder_open_store(struct gpu_index_recorder *r)
{
    struct seg_entry *segs;
    int n;

    recover_store(r);
    apply_retention(r, UINT64_MAX);     /* Counts what is on disk, too. */
    n = list_segments(r->dir, &segs);
    if (n > 0 && segs[n - 1].seq > r->seq) {
        r->seq = segs[n - 1].seq;
    }
    free(segs);
    atomic_store_explicit(&r->ready, true, memory_order_release);
}

/* Hands ring positions 'from' to 'to' (excluded), recorded, back to the
 * producers for their next lap. */
static void
release_slots(struct gpu_index_recorder *r, size_t from, size_t to)
{
    for (size_t pos = from; pos < to; pos++) {
        atomic_store_explicit(&r->slots[pos & r->mask].seq,
                              pos + r->mask + 1, memory_order_release);
    }
}

/* True if the ring's next record is there for the writer. */
static bool
slot_ready(struct gpu_index_recorder *r)
{
    return (atomic_load_explicit(&r->slots[r->deq & r->mask].seq,
                                 memory_order_acquire)
            == r->deq + 1);
}

static void *
worker(void *r_)
{
    struct gpu_index_recorder *r = r_;

    /* Named, so that top -H and perf tell it from the PMD and indexer. */
    pthread_setname_np(pthread_self(), "gidx-writer");
    /* The recorder this one replaces closes soon (its packets are
     * flushed first); until then, packets wait in the ring. */
    while (!r->locked) {
        if (atomic_load(&r->stop)) {
            return NULL;
        }
        if (!flock(r->lock_fd, LOCK_EX | LOCK_NB)) {
            r->locked = true;
            recorder_open_store(r);
        } else {
            usleep(1000);
        }
    }
    unsigned int idle_polls = 0;
    for (;;) {
        struct slot *slots = r->slots;
        const uint8_t *data = r->data;
        size_t mask = r->mask, snaplen = r->cfg.snaplen;
        size_t deq = r->deq, held = deq;
        int got = 0, kept = 0;

        while (!atomic_load_explicit(&r->paused, memory_order_relaxed)
               && got < 4096) {
            struct slot *s = &slots[deq & mask];
            size_t seq = atomic_load_explicit(&s->seq,
                                              memory_order_acquire);

            if (seq != deq + 1) {
                break;
            }
            kept += record_one(r, s, data + (deq & mask) * snaplen);
            deq++;
            got++;
            if (deq - held == WRITER_RELEASE_RUN) {
                release_slots(r, held, deq);
                held = deq;
            }
        }
        release_slots(r, held, deq);
        r->deq = deq;
        if (kept) {
            add(&r->recorded, kept);
        }
        if (got) {
            idle_polls = 0;
            continue;
        }
        if (r->cur->pcap_fd >= 0) {
            /* Idle: hand what is recorded to the kernel, so that a crash
             * of the process loses none of it (recovery keeps it). */
            write_out(r);
        }
        pthread_mutex_lock(&r->mutex);
        if (r->flush_req != r->flush_done || atomic_load(&r->stop)) {
            uint64_t req = r->flush_req;

            if (!atomic_load_explicit(&r->paused, memory_order_relaxed)
                && slot_ready(r)) {
                /* The drain above found the ring empty before the
                 * requester's last records were in it: a flush waits
                 * for everything submitted before it, so those go in
                 * this segment first. */
                pthread_mutex_unlock(&r->mutex);
                continue;
            }
            pthread_mutex_unlock(&r->mutex);
            bool closed = close_segment(r);
            int error = wait_indexer(r);
            pthread_mutex_lock(&r->mutex);
            r->flush_error = closed ? error : GPU_OK;
            r->flush_done = req;
            pthread_cond_broadcast(&r->cond);
            if (atomic_load(&r->stop)) {
                pthread_mutex_unlock(&r->mutex);
                return NULL;
            }
        }
        pthread_mutex_unlock(&r->mutex);
        if (r->cur->pcap_fd >= 0 && r->cfg.segment_seconds
            && time(NULL) - r->cur->opened
               > (time_t) r->cfg.segment_seconds) {
            close_segment(r);
        }
        /* While traffic flows, the ring (a millisecond of it) is looked
         * at again soon; once it has been idle for a while, less
         * often. */
        usleep(++idle_polls < 50 ? 20 : 200);
    }
}

/* ---- Recovery of segments a crash left open. ---- */

static void
recovery_log(struct gpu_index_recorder *r, const char *fmt, ...)
{
    char line[512];
    va_list args;
    int n;

    va_start(args, fmt);
    n = vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    if (n < 0) {
        return;
    }
    n = strlen(line);
    char *log = realloc(r->recovery_log, r->recovery_log_len + n + 2);
    if (log) {
        memcpy(log + r->recovery_log_len, line, n);
        log[r->recovery_log_len + n] = '\n';
        log[r->recovery_log_len + n + 1] = '\0';
        r->recovery_log = log;
        r->recovery_log_len += n + 1;
    }
}

/* Renames segment 'seq's files out of the store's view (list_segments()
 * ignores *.damaged), so that nothing in them is ever served, but an
 * operator can still look at them. */
static void
set_aside(struct gpu_index_recorder *r, uint64_t seq, const char *why)
{
    static const char *const suffixes[] = { "pcap", "ports" };
    char from[1024], to[1040];

    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        seg_path(from, sizeof from, r->dir, seq, suffixes[i]);
        snprintf(to, sizeof to, "%s.damaged", from);
        rename(from, to);
    }
    r->segments_set_aside++;
    recovery_log(r, "segment %"PRIu64" left by a crash: %s; set aside as "
                 "seg-%016"PRIu64".pcap.damaged", seq, why, seq);
}

/* Reads segment 'seq''s input-port journal: '*n' entries, malloc()'d. */
static uint32_t *
read_ports(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint32_t *ports = NULL;
    size_t cap = 0;

    *n = 0;
    if (!f) {
        return NULL;
    }
    for (;;) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 4096;
            uint32_t *np = realloc(ports, cap * sizeof *np);
            if (!np) {
                break;
            }
            ports = np;
        }
        size_t got = fread(ports + *n, sizeof *ports, cap - *n, f);
        *n += got;
        if (*n < cap) {
            break;              /* A torn last entry is not counted. */
        }
    }
    fclose(f);
    return ports;
}

/* Segment 'seq' has a pcap and no index: keeps its records that are whole
 * in both the pcap and the ports journal, cuts the pcap after the last of
 * them, and indexes them.  Uses the recorder's own buffers and builder:
 * runs before the worker starts. */
static void
recover_segment(struct gpu_index_recorder *r, uint64_t seq)
{
    const uint32_t max_rows = r->cfg.segment_packets;
    struct seg_recs *b = &r->bufs[0];
    char path[1024], why[512];
    uint8_t *data = NULL;
    uint32_t *ports;
    size_t n_ports, n = 0;
    uint32_t gh[6], snaplen;
    uint64_t end = 24, size;
    struct stat st;
    FILE *f;

    seg_path(path, sizeof path, r->dir, seq, "ports");
    ports = read_ports(path, &n_ports);
    seg_path(path, sizeof path, r->dir, seq, "pcap");
    f = fopen(path, "r+b");
    if (!f || fstat(fileno(f), &st)) {
        snprintf(why, sizeof why, "%s", strerror(errno));
        goto set_aside;
    }
    size = st.st_size;
    /* Nanosecond pcap in this host's byte order: what the recorder
     * writes, and nothing else. */
    if (fread(gh, 4, 6, f) != 6 || gh[0] != 0xa1b23c4d || gh[5] != 1) {
        snprintf(why, sizeof why, "no pcap header of ours");
        goto set_aside;
    }
    snaplen = gh[4];
    data = malloc(snaplen ? snaplen : 1);
    while (data && n < n_ports && n < max_rows) {
        uint32_t h[4];

        if (recs_make_room(b, n)) {
            break;
        }
        if (fread(h, 4, 4, f) != 4 || h[1] >= 1000000000u || h[2] > snaplen
            || h[2] > h[3] || fread(data, 1, h[2], f) != h[2]) {
            break;              /* Cut short, or never finished. */
        }
        gpu_index_record_from_frame(&b->recs[n], data, h[2], h[3],
                                    h[0] * 1000000000ull + h[1], ports[n]);
        b->offs[n] = end;
        b->recs[n].pcap_offset = end;
        end += 16 + h[2];
        n++;
    }
    free(data);
    if (!n) {
        snprintf(why, sizeof why, "no whole record (%"PRIu64" bytes of "
                 "pcap, %zu ports)", size, n_ports);
        goto set_aside;
    }
    if (end < size && ftruncate(fileno(f), end)) {
        snprintf(why, sizeof why, "cannot cut it short: %s",
                 strerror(errno));
        goto set_aside;
    }
    fsync(fileno(f));
    fclose(f);
    f = NULL;
    free(ports);
    ports = NULL;

    if (gpu_index_segment_index_build_n(r->builders, r->n_builders,
                                        b->recs, n, r->cfg.encoding,
                                        &r->seg)) {
        snprintf(why, sizeof why, "its index could not be built");
        goto set_aside;
    }
    seg_path(path, sizeof path, r->dir, seq, "idx");
    if (gpu_index_file_write(path, &r->seg, b->offs, b->recs[0].ts_ns,
                             b->recs[n - 1].ts_ns, why, sizeof why)) {
        goto set_aside;
    }
    seg_path(path, sizeof path, r->dir, seq, "ports");
    unlink(path);
    r->segments_recovered++;
    r->records_recovered += n;
    r->bytes_cut += size - end;
    recovery_log(r, "segment %"PRIu64" left by a crash: recovered %zu "
                 "records%s, %"PRIu64" bytes cut short", seq, n,
                 n == max_rows ? " (the segment's maximum)" : "",
                 size - end);
    return;

set_aside:
    if (f) {
        fclose(f);
    }
    free(ports);
    set_aside(r, seq, why);
}

/* Recovers every segment of the folder that has a pcap but no index, and
 * removes what a crash may have left beside whole segments: index files
 * never renamed into place, and port journals whose index exists. */
static void
recover_store(struct gpu_index_recorder *r)
{
    struct seg_entry *segs;
    struct dirent *de;
    DIR *d = opendir(r->dir);
    int n;

    while (d && (de = readdir(d))) {
        unsigned long long seq;
        char suffix[16], path[1024];
        struct stat st;

        if (sscanf(de->d_name, "seg-%16llu.%15s", &seq, suffix) != 2) {
            continue;
        }
        /* New segments come after every number used, set aside ones
         * included. */
        if (seq > r->seq) {
            r->seq = seq;
        }
        snprintf(path, sizeof path, "%s/%s", r->dir, de->d_name);
        if (!strcmp(suffix, "idx.tmp")) {
            unlink(path);
        } else if (!strcmp(suffix, "ports")) {
            char idx[1024];

            seg_path(idx, sizeof idx, r->dir, seq, "idx");
            if (!stat(idx, &st)) {
                unlink(path);
            }
        }
    }
    if (d) {
        closedir(d);
    }
    n = list_segments(r->dir, &segs);
    for (int i = 0; i < n; i++) {
        if (segs[i].has_pcap && !segs[i].has_idx) {
            recover_segment(r, segs[i].seq);
        }
    }
    free(segs);
    r->bufs[0].n_recs = 0;
}

/* Creates 'dir' and its parents. */
static int
mkdir_parents(const char *dir)
{
    char path[1024];
    size_t len = strlen(dir);

    if (len >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(path, dir, len + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(path, 0755) && errno != EEXIST) {
                return -1;
            }
            *p = '/';
        }
    }
    return mkdir(path, 0755) && errno != EEXIST ? -1 : 0;
}

static void
destroy_builders(struct gpu_index_recorder *r)
{
    for (int i = 0; i < r->n_builders; i++) {
        gpu_index_builder_destroy(r->builders[i]);
    }
    r->n_builders = 0;
}

int
gpu_index_recorder_create(const struct gpu_index_recorder_config *cfg,
                          struct gpu_index_recorder **rp, char *err,
                          size_t err_size)
{
    struct gpu_index_recorder *r;
    char why[256], path[1024];
    size_t slots = 1;
    int error;

    *rp = NULL;
    if (!cfg->dir || !*cfg->dir || cfg->snaplen < 64
        || cfg->snaplen > 262144 || cfg->segment_packets == 0
        || cfg->segment_packets > GPU_INDEX_MAX_ROWS
        || cfg->ring_slots == 0 || cfg->ring_slots > (1u << 24)
        || cfg->index_threads > MAX_INDEX_THREADS
        || (cfg->overload_snaplen
            && (cfg->overload_snaplen < 64
                || cfg->overload_snaplen > cfg->snaplen))) {
        set_err(err, err_size, "bad recorder configuration (folder, "
                "snaplen 64..262144, segment packets 1..2^30, ring slots "
                "1..2^24, index threads 0..16, overload snaplen 0 or "
                "64..snaplen)");
        return GPU_ERR_INVALID;
    }
    if (mkdir_parents(cfg->dir)) {
        set_err(err, err_size, "%s: %s", cfg->dir, strerror(errno));
        return GPU_ERR_INVALID;
    }
    /* Aligned, for the cache lines of its own that 'enq' and 'deq'
     * have. */
    r = aligned_alloc(CACHE_LINE, ROUND_UP(sizeof *r, CACHE_LINE));
    if (!r) {
        return GPU_ERR_NOMEM;
    }
    memset(r, 0, sizeof *r);
    /* One recorder a folder: another would take its open segment for one
     * left by a crash.  A successor ('wait_for_lock') waits, in its
     * worker, for the recorder it replaces to close. */
    snprintf(path, sizeof path, "%s/.lock", cfg->dir);
    r->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    r->locked = r->lock_fd >= 0 && !flock(r->lock_fd, LOCK_EX | LOCK_NB);
    if (!r->locked && (r->lock_fd < 0 || errno != EWOULDBLOCK
                       || !cfg->wait_for_lock)) {
        set_err(err, err_size, "%s: %s", cfg->dir,
                r->lock_fd >= 0 && errno == EWOULDBLOCK
                ? "in use by another recorder" : strerror(errno));
        if (r->lock_fd >= 0) {
            close(r->lock_fd);
        }
        free(r);
        return GPU_ERR_INVALID;
    }
    r->cfg = *cfg;
    r->dir = strdup(cfg->dir);
    while (slots < cfg->ring_slots) {
        slots *= 2;
    }
    r->mask = slots - 1;
    /* Line-aligned slots: the writer's runs of released slots are whole
     * lines, none shared with a slot it still reads. */
    r->slots = aligned_alloc(CACHE_LINE,
                             ROUND_UP(slots * sizeof *r->slots, CACHE_LINE));
    r->data = aligned_alloc(CACHE_LINE,
                            ROUND_UP(slots * cfg->snaplen, CACHE_LINE));
    bool io_bufs_ok = true;
    for (int i = 0; i < IO_BUFS; i++) {
        struct io_buf *b = &r->io_bufs[i];

        b->pcap = malloc(WRITER_PCAP_BUF);
        b->ports = malloc(WRITER_PORTS_BUF * sizeof *b->ports);
        io_bufs_ok = io_bufs_ok && b->pcap && b->ports;
        if (i) {
            r->io_free[r->n_io_free++] = b;
        }
    }
    r->wb = &r->io_bufs[0];
    atomic_init(&r->disk_left, UINT64_MAX);
    for (int i = 0; i < 2; i++) {
        r->bufs[i].pcap_fd = r->bufs[i].ports_fd = -1;
    }
    r->cur = &r->bufs[0];
    if (!r->dir || !r->slots || !r->data || !io_bufs_ok) {
        error = GPU_ERR_NOMEM;
        goto fail;
    }
    for (size_t i = 0; i < slots; i++) {
        atomic_init(&r->slots[i].seq, i);
    }
    error = gpu_index_builder_create(cfg->backend, cfg->segment_packets,
                                     &r->builder, why, sizeof why);
    if (error) {
        set_err(err, err_size, "index builder: %s (%s)",
                gpu_status_string(error), why);
        goto fail;
    }
    /* More CPU builders, each a thread with a share of the attributes:
     * one CPU core builds ~1.5-3 M records' 40 indexes a second, about
     * what one PMD forwards.  The CUDA builder does it alone. */
    r->builders[0] = r->builder;
    r->n_builders = 1;
    if (gpu_index_builder_backend(r->builder) == GPU_INDEX_BACKEND_CPU) {
        uint32_t want = cfg->index_threads ? cfg->index_threads : 2;

        while (r->n_builders < (int) want
               && !gpu_index_builder_create(GPU_INDEX_BACKEND_CPU,
                                            cfg->segment_packets,
                                            &r->builders[r->n_builders],
                                            NULL, 0)) {
            r->n_builders++;
        }
    }
    /* The indexes' arrays are reused segment after segment; pinned, the
     * CUDA builder copies them out at full PCIe rate. */
    gpu_index_segment_index_init(&r->seg);
    for (int a = 0; a < GPU_INDEX_N_ATTRS; a++) {
        r->seg.attrs[a].pinned = (gpu_index_builder_backend(r->builder)
                                  == GPU_INDEX_BACKEND_CUDA);
    }
    if (r->locked) {
        recorder_open_store(r);
    }
    pthread_mutex_init(&r->mutex, NULL);
    pthread_cond_init(&r->cond, NULL);
    pthread_cond_init(&r->idx_cond, NULL);
    if (pthread_create(&r->indexer, NULL, indexer, r)) {
        set_err(err, err_size, "cannot start the indexer thread");
        error = GPU_ERR_NOMEM;
        destroy_builders(r);
        gpu_index_segment_index_free(&r->seg);
        goto fail;
    }
    if (pthread_create(&r->io_thread, NULL, io_thread, r)) {
        set_err(err, err_size, "cannot start the I/O thread");
        error = GPU_ERR_NOMEM;
        stop_thread(r, &r->idx_stop, r->indexer);
        destroy_builders(r);
        gpu_index_segment_index_free(&r->seg);
        goto fail;
    }
    if (pthread_create(&r->thread, NULL, worker, r)) {
        set_err(err, err_size, "cannot start the worker thread");
        error = GPU_ERR_NOMEM;
        stop_thread(r, &r->io_stop, r->io_thread);
        stop_thread(r, &r->idx_stop, r->indexer);
        destroy_builders(r);
        gpu_index_segment_index_free(&r->seg);
        goto fail;
    }
    *rp = r;
    return GPU_OK;

fail:
    close(r->lock_fd);
    for (int i = 0; i < 2; i++) {
        free(r->bufs[i].recs);
        free(r->bufs[i].offs);
    }
    for (int i = 0; i < IO_BUFS; i++) {
        free(r->io_bufs[i].pcap);
        free(r->io_bufs[i].ports);
    }
    free(r->recovery_log);
    free(r->dir);
    free(r->slots);
    free(r->data);
    free(r);
    return error;
}

int
gpu_index_recorder_flush(struct gpu_index_recorder *r)
{
    int error;

    pthread_mutex_lock(&r->mutex);
    uint64_t want = ++r->flush_req;
    while (r->flush_done < want) {
        pthread_cond_wait(&r->cond, &r->mutex);
    }
    error = r->flush_error;
    pthread_mutex_unlock(&r->mutex);
    return error;
}

void
gpu_index_recorder_pause(struct gpu_index_recorder *r, bool pause)
{
    atomic_store(&r->paused, pause);
}

void
gpu_index_recorder_destroy(struct gpu_index_recorder *r)
{
    if (!r) {
        return;
    }
    atomic_store(&r->paused, false);
    gpu_index_recorder_flush(r);
    atomic_store(&r->stop, true);
    pthread_join(r->thread, NULL);
    stop_thread(r, &r->io_stop, r->io_thread);
    stop_thread(r, &r->idx_stop, r->indexer);
    destroy_builders(r);
    gpu_index_segment_index_free(&r->seg);
    pthread_mutex_destroy(&r->mutex);
    pthread_cond_destroy(&r->cond);
    pthread_cond_destroy(&r->idx_cond);
    for (int i = 0; i < 2; i++) {
        free(r->bufs[i].recs);
        free(r->bufs[i].offs);
    }
    for (int i = 0; i < IO_BUFS; i++) {
        free(r->io_bufs[i].pcap);
        free(r->io_bufs[i].ports);
    }
    free(r->slots);
    free(r->data);
    free(r->dir);
    free(r->recovery_log);
    close(r->lock_fd);
    free(r);
}

void
gpu_index_recorder_inject_fault(struct gpu_index_recorder *r, int error,
                                unsigned int n)
{
    gpu_index_builder_inject_fault(r->builder, error, n);
}

void
gpu_index_recorder_inject_disk_full(struct gpu_index_recorder *r,
                                    uint64_t bytes_left)
{
    atomic_store_explicit(&r->disk_left, bytes_left, memory_order_relaxed);
}

void
gpu_index_recorder_inject_disk_rate(struct gpu_index_recorder *r,
                                    uint64_t bytes_per_second)
{
    atomic_store_explicit(&r->disk_rate, bytes_per_second,
                          memory_order_relaxed);
}

const char *
gpu_index_recorder_recovery_log(struct gpu_index_recorder *r)
{
    if (!atomic_load_explicit(&r->ready, memory_order_acquire)) {
        return NULL;
    }
    return r->recovery_log ? r->recovery_log : "";
}

void
gpu_index_recorder_get_stats(struct gpu_index_recorder *r,
                             struct gpu_index_recorder_stats *s)
{
    memset(s, 0, sizeof *s);
    s->submitted = __atomic_load_n(&r->submitted, __ATOMIC_RELAXED);
    s->dropped = __atomic_load_n(&r->dropped, __ATOMIC_RELAXED);
    s->squeezed = __atomic_load_n(&r->squeezed, __ATOMIC_RELAXED);
    s->recorded = __atomic_load_n(&r->recorded, __ATOMIC_RELAXED);
    s->segments_written = __atomic_load_n(&r->segments_written,
                                          __ATOMIC_RELAXED);
    s->segments_deleted = __atomic_load_n(&r->segments_deleted,
                                          __ATOMIC_RELAXED);
    s->pcap_bytes = __atomic_load_n(&r->pcap_bytes, __ATOMIC_RELAXED);
    s->index_bytes = __atomic_load_n(&r->index_bytes, __ATOMIC_RELAXED);
    s->build_ns = __atomic_load_n(&r->build_ns, __ATOMIC_RELAXED);
    s->build_rows = __atomic_load_n(&r->build_rows, __ATOMIC_RELAXED);
    s->build_fallbacks = gpu_index_builder_fallbacks(r->builder);
    s->writer_waits = __atomic_load_n(&r->writer_waits, __ATOMIC_RELAXED);
    s->writer_wait_ns = __atomic_load_n(&r->writer_wait_ns,
                                        __ATOMIC_RELAXED);
    s->records_unwritten = __atomic_load_n(&r->records_unwritten,
                                           __ATOMIC_RELAXED);
    s->last_write_error = __atomic_load_n(&r->last_write_error,
                                          __ATOMIC_RELAXED);
    s->disk_waits = __atomic_load_n(&r->disk_waits, __ATOMIC_RELAXED);
    s->disk_wait_ns = __atomic_load_n(&r->disk_wait_ns, __ATOMIC_RELAXED);
    s->sync_ns = __atomic_load_n(&r->sync_ns, __ATOMIC_RELAXED);
    s->index_write_ns = __atomic_load_n(&r->index_write_ns,
                                        __ATOMIC_RELAXED);
    s->segments_recovered = r->segments_recovered;
    s->records_recovered = r->records_recovered;
    s->bytes_cut = r->bytes_cut;
    s->segments_set_aside = r->segments_set_aside;
    snprintf(s->backend, sizeof s->backend, "%s",
             gpu_index_builder_describe(r->builder));
}
