/*
 * ovs-gpu index: a packet recorder with compressed bitmap indexes (WAH or
 * PLWAH) of header fields, built on a CUDA GPU or on the CPU, and queries
 * over them.
 *
 * The library knows nothing of Open vSwitch.  Its layers, bottom up:
 *
 *   bitmaps   one attribute's index over a batch of rows: a sorted list of
 *             distinct values ('keys'), and per key a compressed column of
 *             32-bit words ('offsets' into 'words').  A builder makes it
 *             from an array of values on a backend (CPU or CUDA); both
 *             backends produce the same bytes.
 *   records   a fixed-size summary of one packet's headers, filled from an
 *             Ethernet frame, and the attributes indexed from it.
 *   queries   a small expression language over the attributes, evaluated
 *             on the compressed columns (AND/OR/NOT on WAH), giving row ids.
 *   store     a folder of segments: a pcap file written with libpcap plus
 *             an index file per segment, rotated by packets or seconds,
 *             with retention by bytes or age.
 *   recorder  a staging ring the datapath copies packets into without ever
 *             blocking, and a worker thread that parses, writes the pcap,
 *             builds the indexes and rotates segments.
 *
 * Encoding (docs/INDEX-NOTES.md has the whole story): rows are cut into
 * chunks of 31.  A column is, for each chunk where it has a 1 bit, an
 * optional 0-fill word followed by a literal word:
 *
 *   literal  bit 31 = 1, bits 0..30 = rows chunk*31 + 0..30.
 *   0-fill   bits 31..30 = 00, the count of all-zero chunks before the
 *            next literal in bits 0..29 (WAH) or 0..24 (PLWAH).
 *   PLWAH    a 0-fill may carry in bits 25..29 the position + 1 of the
 *            only set bit of the literal that follows it; that literal is
 *            then left out.
 *
 * Columns end after their last literal (the rest is zeros).  1-fills are
 * never built (runs of identical values over 31+ rows are rare in packet
 * traffic); query results, which do have them, use bit 30 as the fill bit.
 *
 * Concurrency: a builder is used by one thread at a time; bitmaps, parsed
 * queries and loaded segments are read-only and may be shared.  A recorder
 * may be fed by any number of threads at once.
 */
#ifndef GPU_INDEX_H
#define GPU_INDEX_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu_runtime/gpu-runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Bitmaps and builders. ---- */

enum gpu_index_encoding {
    GPU_INDEX_WAH = 0,
    GPU_INDEX_PLWAH = 1,
};

const char *gpu_index_encoding_name(enum gpu_index_encoding);

/* Rows in one batch.  It keeps every chunk id below 2^27, so a fill count
 * always fits in PLWAH's 25 bits: no fill is ever split. */
#define GPU_INDEX_MAX_ROWS (1u << 30)

/* One attribute's index over 'n_rows' rows.  Column i holds the rows whose
 * value is keys[i], in words[offsets[i] .. offsets[i + 1]). */
struct gpu_index_bitmaps {
    uint32_t n_rows;
    enum gpu_index_encoding encoding;
    uint32_t n_keys;
    uint32_t n_words;
    uint32_t *keys;             /* n_keys, strictly ascending. */
    uint32_t *offsets;          /* n_keys + 1; offsets[n_keys] == n_words. */
    uint32_t *words;            /* n_words. */

    /* Allocated sizes (elements), so a bitmaps object can be reused. */
    size_t keys_cap, words_cap;
    bool pinned;                /* Arrays from gpu_host_alloc(). */
};

void gpu_index_bitmaps_init(struct gpu_index_bitmaps *);
/* As gpu_index_bitmaps_init(), but the arrays will be pinned host memory
 * (gpu_host_alloc()), so that the CUDA builder's copies out run at full
 * PCIe rate.  Worth it for a bitmaps object reused across batches. */
void gpu_index_bitmaps_init_pinned(struct gpu_index_bitmaps *);
void gpu_index_bitmaps_free(struct gpu_index_bitmaps *);
/* Makes room for 'n_keys' keys and 'n_words' words (contents kept). */
int gpu_index_bitmaps_reserve(struct gpu_index_bitmaps *, size_t n_keys,
                              size_t n_words);
bool gpu_index_bitmaps_equal(const struct gpu_index_bitmaps *,
                             const struct gpu_index_bitmaps *);

/* Checks that 'bm' is well formed: keys ascending, offsets consistent,
 * every column a valid word sequence whose rows lie below n_rows, no
 * zero fill and no all-zero literal.  Returns GPU_OK or GPU_ERR_INVALID
 * with the reason in 'err'. */
int gpu_index_bitmaps_check(const struct gpu_index_bitmaps *bm,
                            char *err, size_t err_size);

/* The column of 'value', or -1. */
int64_t gpu_index_bitmaps_find(const struct gpu_index_bitmaps *,
                               uint32_t value);

/* Decodes column 'col' into ascending row ids.  Writes at most 'max' of
 * them to 'rows' and returns how many there are, or GPU_ERR_INVALID for a
 * malformed column.  It is the reference for everything else here, and
 * knows nothing of how the column was built. */
int64_t gpu_index_decode_column(const struct gpu_index_bitmaps *,
                                uint32_t col, uint32_t *rows, size_t max);

enum gpu_index_backend {
    GPU_INDEX_BACKEND_AUTO,     /* CUDA if a device works, else CPU. */
    GPU_INDEX_BACKEND_CPU,
    GPU_INDEX_BACKEND_CUDA,
};

const char *gpu_index_backend_name(enum gpu_index_backend);
/* True if the CUDA backend has a usable device here. */
bool gpu_index_cuda_available(void);

struct gpu_index_builder;

/* Creates a builder for batches of up to 'max_rows' rows (the CUDA backend
 * allocates its device buffers for that many).  GPU_INDEX_BACKEND_AUTO
 * picks CUDA when a device works and otherwise the CPU, writing why into
 * 'why' (may be NULL).  Returns GPU_OK, GPU_ERR_NO_DEVICE (CUDA asked for,
 * none usable), GPU_ERR_DEVICE_NOMEM, GPU_ERR_NOMEM or GPU_ERR_INVALID. */
int gpu_index_builder_create(enum gpu_index_backend, uint32_t max_rows,
                             struct gpu_index_builder **,
                             char *why, size_t why_size);
void gpu_index_builder_destroy(struct gpu_index_builder *);
enum gpu_index_backend gpu_index_builder_backend(
    const struct gpu_index_builder *);
/* "cpu", or "cuda: <device name>". */
const char *gpu_index_builder_describe(const struct gpu_index_builder *);

/* Where a build spent its time (milliseconds; device events on CUDA). */
struct gpu_index_build_times {
    double h2d_ms;              /* Values to the device. */
    double kernel_ms;           /* Everything on the device. */
    double d2h_ms;              /* Keys, offsets and words back. */
    double total_ms;            /* Wall clock of the whole call. */
};

/* Flags for gpu_index_build(). */
enum {
    /* Benchmarks only: rebuild from the values already on the device from
     * the previous call (values are not copied in) and leave the result on
     * the device (only n_keys and n_words of 'out' are set).  The CPU
     * backend ignores it. */
    GPU_INDEX_BUILD_RESIDENT = 1 << 0,
};

/* Builds the index of 'values[0 .. n)' (row i has value values[i]) into
 * 'out', reusing its memory.  'value_bits' (1..32) bounds the values:
 * every value is below 2^value_bits, so the radix sort looks only at that
 * many bits; a larger value is GPU_ERR_INVALID.  'times' may be NULL.
 * On the CUDA backend a device failure falls back to the CPU for this
 * call (counted in gpu_index_builder_fallbacks()). */
int gpu_index_build(struct gpu_index_builder *, const uint32_t *values,
                    uint32_t n, unsigned int value_bits,
                    enum gpu_index_encoding, unsigned int flags,
                    struct gpu_index_bitmaps *out,
                    struct gpu_index_build_times *times);
uint64_t gpu_index_builder_fallbacks(const struct gpu_index_builder *);

/* Test only: the next 'n' builds fail as a device would, with 'error'
 * (GPU_ERR_DEVICE or GPU_ERR_DEVICE_NOMEM), before they reach the backend,
 * and are finished on the CPU (and counted) as real device failures are.
 * Any thread. */
void gpu_index_builder_inject_fault(struct gpu_index_builder *, int error,
                                    unsigned int n);

/* ---- Records and attributes. ---- */

#define GPU_INDEX_NO_VLAN 0xffff

/* What the recorder keeps of one packet.  Fixed size; IPv4 addresses sit
 * in the first 4 bytes of src/dst.  Fields that did not parse are zero
 * (vlan: GPU_INDEX_NO_VLAN) and their 'parsed' bit is clear. */
struct gpu_index_record {
    uint64_t ts_ns;             /* Capture time, ns since the epoch. */
    uint64_t pcap_offset;       /* Of the packet's record in its pcap. */
    uint32_t in_port;
    uint32_t wire_len;          /* Length on the wire. */
    uint32_t cap_len;           /* Bytes of it that were available. */
    uint16_t vlan;              /* Outer VID, or GPU_INDEX_NO_VLAN. */
    uint16_t eth_type;          /* After VLAN tags. */
    uint8_t src[16], dst[16];
    uint16_t sport, dport;      /* TCP, UDP, SCTP. */
    uint8_t ip_version;         /* 0, 4 or 6. */
    uint8_t proto;              /* IP protocol (IPv6: after ext. headers). */
    uint8_t tcp_flags;          /* The low 8 flag bits. */
    uint8_t parsed;             /* GPU_INDEX_PARSED_*. */
};

enum {
    GPU_INDEX_PARSED_ETH = 1 << 0,
    GPU_INDEX_PARSED_IP = 1 << 1,
    GPU_INDEX_PARSED_L4 = 1 << 2,  /* Ports (and TCP flags) valid. */
};

/* Fills 'rec' from the Ethernet frame 'frame' of which 'cap_len' bytes
 * were captured ('wire_len' on the wire).  Never reads past cap_len: a
 * truncated or malformed frame gives a record with what parsed. */
void gpu_index_record_from_frame(struct gpu_index_record *rec,
                                 const uint8_t *frame, uint32_t cap_len,
                                 uint32_t wire_len, uint64_t ts_ns,
                                 uint32_t in_port);

/* The indexed attributes.  Addresses are indexed one byte per attribute
 * (IPv4 in bytes 0..3), so a prefix is an AND of whole bytes and at most
 * one byte range.  A value that a record lacks is the attribute's "none"
 * value, one above its largest real value. */
enum gpu_index_attr {
    GPU_INDEX_ATTR_TIME,        /* Seconds since the epoch. */
    GPU_INDEX_ATTR_IN_PORT,
    GPU_INDEX_ATTR_VLAN,        /* VID; 4096 untagged. */
    GPU_INDEX_ATTR_IPVER,       /* 0, 4, 6. */
    GPU_INDEX_ATTR_PROTO,       /* 256: not IP. */
    GPU_INDEX_ATTR_SPORT,       /* 65536: no ports. */
    GPU_INDEX_ATTR_DPORT,
    GPU_INDEX_ATTR_TCP_FLAGS,   /* 256: not TCP. */
    GPU_INDEX_ATTR_SRC0,        /* ... SRC15: 256 where absent. */
    GPU_INDEX_ATTR_DST0 = GPU_INDEX_ATTR_SRC0 + 16,
    GPU_INDEX_N_ATTRS = GPU_INDEX_ATTR_DST0 + 16
};

const char *gpu_index_attr_name(enum gpu_index_attr);
/* Every value of the attribute is below 2^bits. */
unsigned int gpu_index_attr_bits(enum gpu_index_attr);
uint32_t gpu_index_attr_value(const struct gpu_index_record *,
                              enum gpu_index_attr);

/* Every attribute's index over one batch of records. */
struct gpu_index_segment_index {
    uint32_t n_rows;
    enum gpu_index_encoding encoding;
    struct gpu_index_bitmaps attrs[GPU_INDEX_N_ATTRS];

    /* The build's attribute values, kept between builds (internal). */
    uint32_t *values;
    size_t values_cap;
};

void gpu_index_segment_index_init(struct gpu_index_segment_index *);
void gpu_index_segment_index_free(struct gpu_index_segment_index *);
int gpu_index_segment_index_build(struct gpu_index_builder *,
                                  const struct gpu_index_record *,
                                  uint32_t n, enum gpu_index_encoding,
                                  struct gpu_index_segment_index *);
/* The same with 'n_builders' builders at once, each in a thread of its
 * own with a share of the attributes (the CPU builder is one core's
 * work per attribute). */
int gpu_index_segment_index_build_n(struct gpu_index_builder **,
                                    int n_builders,
                                    const struct gpu_index_record *,
                                    uint32_t n, enum gpu_index_encoding,
                                    struct gpu_index_segment_index *);

/* ---- Queries. ----
 *
 *   expr   := or
 *   or     := and { ("or" | "||") and }
 *   and    := not { ("and" | "&&") not }
 *   not    := ("not" | "!") not | "(" expr ")" | term
 *   term   := FIELD ("=" | "!=") VALUES | "tcp_flags" "&" FLAGS | KEYWORD
 *   VALUES := VALUE { "," VALUE },  VALUE := N | N-M | name
 *
 * Fields: src, dst, host (either address; value ADDR[/LEN], IPv4 dotted
 * or IPv6), proto (number or tcp, udp, icmp, icmp6, sctp, gre, esp),
 * sport, dport, port (either), tcp_flags (number; with "&": every flag of
 * the mask set, as a number or names joined by '|': fin syn rst psh ack
 * urg ece cwr), vlan (VID or "none"), in_port, time (seconds since the
 * epoch, ranges allowed), ipver (4 or 6).  Keywords: tcp, udp, icmp,
 * icmp6, sctp (proto=...), ip4, ip6 (ipver=...).  Numbers are decimal or
 * 0x hex. */
struct gpu_index_query;

/* Parses 'text'.  On a syntax error returns GPU_ERR_INVALID with a message
 * that gives the 1-based column in 'err'. */
int gpu_index_query_parse(const char *text, struct gpu_index_query **,
                          char *err, size_t err_size);
void gpu_index_query_destroy(struct gpu_index_query *);

/* Evaluates the query on the compressed columns of 'seg'.  Sets '*rows'
 * (malloc'd, ascending; free() it) and '*n'. */
int gpu_index_query_eval(const struct gpu_index_query *,
                         const struct gpu_index_segment_index *seg,
                         uint32_t **rows, size_t *n);

/* Whether one record matches: the brute-force reference. */
bool gpu_index_query_match(const struct gpu_index_query *,
                           const struct gpu_index_record *);

/* ---- Segment index files. ---- */

/* Writes 'seg' and the row -> pcap offset table 'pcap_offsets' (n_rows
 * entries) to 'path' atomically (a temporary file, fsync, rename), with a
 * header, the per-column directory and a CRC32 over everything. */
int gpu_index_file_write(const char *path,
                         const struct gpu_index_segment_index *seg,
                         const uint64_t *pcap_offsets,
                         uint64_t first_ts_ns, uint64_t last_ts_ns,
                         char *err, size_t err_size);

/* Reads and checks an index file: size, magic, version, CRC32, and every
 * column (gpu_index_bitmaps_check()).  A truncated or corrupted file is
 * refused with GPU_ERR_INVALID and the reason. '*pcap_offsets' is
 * malloc'd. */
int gpu_index_file_read(const char *path,
                        struct gpu_index_segment_index *seg,
                        uint64_t **pcap_offsets,
                        uint64_t *first_ts_ns, uint64_t *last_ts_ns,
                        char *err, size_t err_size);

/* ---- Store and recorder. ---- */

struct gpu_index_recorder_config {
    const char *dir;            /* Created if missing. */
    enum gpu_index_backend backend;
    enum gpu_index_encoding encoding;
    uint32_t snaplen;           /* Bytes kept per packet (default 256). */
    uint32_t segment_packets;   /* Rotate after this many (default 1M). */
    uint32_t segment_seconds;   /* ...or this many seconds (0: never). */
    uint64_t retention_bytes;   /* Delete oldest beyond this (0: keep). */
    uint32_t retention_seconds; /* ...or older than this (0: keep). */
    uint32_t ring_slots;        /* Staging ring (default 65536). */
    /* Bytes kept per packet while the staging ring is more than three
     * quarters full (64..snaplen; 0, the default: keep 'snaplen' and
     * drop what does not fit).  Where the disk, not the switch, is
     * behind, shorter records keep every packet in the indexes. */
    uint32_t overload_snaplen;
    /* Threads building a segment's indexes (0: 2 on the CPU backend, 1
     * on CUDA, whose one builder owns the device buffers). */
    uint32_t index_threads;
    /* The folder's recorder is being replaced by this one and closes
     * soon: rather than refusing the folder while it is held, wait for it
     * in the worker thread (packets wait in the ring meanwhile). */
    bool wait_for_lock;
};

void gpu_index_recorder_config_init(struct gpu_index_recorder_config *);

struct gpu_index_recorder;

int gpu_index_recorder_create(const struct gpu_index_recorder_config *,
                              struct gpu_index_recorder **,
                              char *err, size_t err_size);
/* Flushes what is staged, closes the open segment and stops. */
void gpu_index_recorder_destroy(struct gpu_index_recorder *);

/* Copies one frame (its first snaplen bytes) into the staging ring.
 * Never blocks: returns false, and counts a drop, when the ring is full.
 * Safe from any number of threads at once. */
bool gpu_index_recorder_submit(struct gpu_index_recorder *,
                               const uint8_t *frame, uint32_t len,
                               uint64_t ts_ns, uint32_t in_port);

/* The same, keeping at most 'cap_len' bytes of a frame of 'len' bytes on
 * the wire (for a snaplen shorter than the store's). */
bool gpu_index_recorder_submit_capped(struct gpu_index_recorder *,
                                      const uint8_t *frame, uint32_t cap_len,
                                      uint32_t len, uint64_t ts_ns,
                                      uint32_t in_port);

/* One frame of gpu_index_recorder_submit_batch(). */
struct gpu_index_frame {
    const uint8_t *data;
    uint32_t cap_len;           /* Bytes of 'data' to keep (at most). */
    uint32_t len;               /* On the wire. */
    uint32_t in_port;
};

/* Submits 'n' frames captured at 'ts_ns' as gpu_index_recorder_submit_
 * capped() would, reserving with one atomic operation as many slots as
 * the ring has free, up to 'n'; the frames that do not fit, the last
 * ones, are dropped and counted.  Returns how many were taken: the first
 * that many of 'f'. */
size_t gpu_index_recorder_submit_batch(struct gpu_index_recorder *,
                                       const struct gpu_index_frame *,
                                       size_t n, uint64_t ts_ns);

/* Waits until everything submitted so far is written, and closes the open
 * segment (with its index) so that queries see it. */
int gpu_index_recorder_flush(struct gpu_index_recorder *);

/* Tests only: stops the worker from taking packets off the ring (so that
 * the ring fills) or lets it go again.  A flush waits for the worker, so
 * unpause before flushing (destroy unpauses by itself). */
void gpu_index_recorder_pause(struct gpu_index_recorder *, bool pause);

struct gpu_index_recorder_stats {
    uint64_t submitted, dropped, recorded;
    uint64_t squeezed;          /* Kept at overload_snaplen bytes. */
    uint64_t segments_written, segments_deleted;
    /* At create, from segments a crash left without an index: */
    uint64_t segments_recovered;        /* Indexed anew, records kept. */
    uint64_t records_recovered;
    uint64_t bytes_cut;         /* Of records cut short, truncated off. */
    uint64_t segments_set_aside;        /* Unreadable: renamed *.damaged. */
    uint64_t pcap_bytes, index_bytes;  /* Of segments on disk now. */
    uint64_t build_ns;          /* Spent building indexes. */
    uint64_t build_rows;        /* Rows indexed (per attribute). */
    uint64_t build_fallbacks;   /* Builds the device failed: on the CPU. */
    /* Times, and nanoseconds in all, the writer waited at the end of a
     * segment for the indexer to finish the previous one: the ring
     * fills meanwhile (it holds milliseconds), so drops then come from
     * the indexer's pace, not the writer's. */
    uint64_t writer_waits, writer_wait_ns;
    /* The indexer's other work on closed segments, besides 'build_ns':
     * making the pcap and ports files durable (fsync), and writing the
     * index file (CRC, write, fsync, rename). */
    uint64_t sync_ns, index_write_ns;
    /* Times, and nanoseconds in all, the writer waited for the I/O
     * thread to give back a buffer (the disk behind by ~64 MB). */
    uint64_t disk_waits, disk_wait_ns;
    /* Records lost because their pcap could not be written (a full
     * disk): a segment keeps the records before the failed write; its
     * later ones are counted here.  'last_write_error' is the errno of
     * the last failed write (0: none). */
    uint64_t records_unwritten;
    int last_write_error;
    char backend[96];
};

void gpu_index_recorder_get_stats(struct gpu_index_recorder *,
                                  struct gpu_index_recorder_stats *);

/* Test only: gpu_index_builder_inject_fault() on the recorder's builder. */
void gpu_index_recorder_inject_fault(struct gpu_index_recorder *, int error,
                                     unsigned int n);

/* Test only: the recorder's pcap writes fail (ENOSPC, as on a full disk)
 * once 'bytes_left' more bytes have been written (UINT64_MAX: never
 * again). */
void gpu_index_recorder_inject_disk_full(struct gpu_index_recorder *,
                                         uint64_t bytes_left);

/* Test only: the recorder's I/O thread writes no more than
 * 'bytes_per_second' to its files, as a disk slower than the traffic
 * would (0: as fast as the disk takes them), so that a benchmark or a
 * test sees the staging ring fill the way it does on a slow disk. */
void gpu_index_recorder_inject_disk_rate(struct gpu_index_recorder *,
                                         uint64_t bytes_per_second);

/* What the recorder found and did about segments left by a crash, one
 * line per segment ("" if nothing), for the caller's log.  NULL while a
 * recorder created with 'wait_for_lock' still waits for the folder (then
 * it has not looked yet). */
const char *gpu_index_recorder_recovery_log(struct gpu_index_recorder *);

/* Runs 'expr' over every complete segment in 'dir'.  Each match is
 * written to 'out' as one line (time, protocol, source:port ->
 * destination:port, length) unless 'out' is NULL, and to the pcap file
 * 'pcap_path' if nonnull.  Stops after 'limit' matches (0: no limit).
 * Segments whose index is missing (being written, or left by a crash) or
 * damaged are skipped and counted in '*n_skipped' (may be NULL) with a
 * line on 'out' saying why.  Returns the number of matches or an error
 * (GPU_ERR_INVALID for bad syntax, with the message in 'err'). */
int64_t gpu_index_store_query(const char *dir, const char *expr,
                              FILE *out, const char *pcap_path,
                              uint64_t limit, unsigned int *n_skipped,
                              char *err, size_t err_size);

/* Formats one record as a query line (no newline). */
void gpu_index_record_format(const struct gpu_index_record *,
                             char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* gpu-index.h */
