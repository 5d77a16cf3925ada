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
 * ovs-gpu RE: redundancy elimination between two switches (a WAN
 * optimiser pair), with Rabin content-defined chunking on the CPU or on a
 * CUDA GPU.  The library knows nothing of Open vSwitch; docs/RE-NOTES.md
 * has the design and the wire format.
 *
 * Three layers:
 *
 *   1. Chunking.  A chunker (CPU or CUDA backend, picked at creation)
 *      cuts batches of payloads, packed back to back with an offsets
 *      index, into content-defined chunks: a Rabin fingerprint over a
 *      sliding window at every byte (LBFS polynomial), a cut where its low
 *      'bits' bits are zero, bounded by a minimum and maximum chunk size.
 *      Both backends give the same cuts and fingerprints.
 *
 *   2. Payload encoding.  An encoder keeps a FIFO byte cache of every
 *      payload it passed and a table from each cached chunk's 128-bit
 *      hash to its place in the cache.  A payload's chunks found there
 *      become references (distance back into the cache, length) in a
 *      shim; the decoder keeps the same cache from the same payloads and
 *      expands them.  A decoder that cannot resolve a shim (a packet lost
 *      or reordered, a cache out of step, a malformed shim) reports it
 *      undecodable and never returns wrong bytes: every expanded payload
 *      is checked against a hash the encoder put in the shim.  Shims carry
 *      the encoder's stream position, so a loss costs only the references
 *      into the bytes lost; an epoch (the encoder's restart, or
 *      gpu_re_encoder_resync()) empties both caches and starts afresh.
 *
 *   3. Packet helpers.  The same on Ethernet frames: TCP and UDP payloads
 *      over IPv4 and IPv6 (VLAN tags allowed), the shim marked by IP
 *      protocol 253 (RFC 3692 experimentation), lengths and the IPv4
 *      header checksum fixed up; the decoder restores the original frame
 *      byte for byte, L4 checksum included.
 *
 * Concurrency: a chunker may be shared by threads, each with its own
 * batch.  An encoder or a decoder is one ordered stream of packets and is
 * used by one thread at a time.
 */
#ifndef GPU_RE_H
#define GPU_RE_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_runtime/gpu-runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Chunking parameters. ---- */

/* LBFS's irreducible polynomial of degree 63 (x^63 + ... + 1). */
#define GPU_RE_POLY 0xbfe6b8a5bf378d83ULL

#define GPU_RE_MIN_WINDOW 4
#define GPU_RE_MAX_WINDOW 64
/* Payloads (and so chunks) are at most this long: IP's limit. */
#define GPU_RE_MAX_PAYLOAD 65535

struct gpu_re_params {
    uint32_t window;            /* Bytes in the sliding window (32). */
    uint32_t bits;              /* Cut where fp's low 'bits' are 0 (8). */
    uint32_t min_chunk;         /* Shortest chunk but a payload's last. */
    uint32_t max_chunk;         /* Longest chunk: a cut is forced. */
};

/* window 32, bits 8, min_chunk 32, max_chunk 2048. */
void gpu_re_params_init(struct gpu_re_params *);
/* GPU_OK, or GPU_ERR_INVALID with a reason in 'err': window out of
 * [GPU_RE_MIN_WINDOW, GPU_RE_MAX_WINDOW], bits out of [1, 32], min_chunk
 * 0 or above max_chunk, max_chunk above GPU_RE_MAX_PAYLOAD. */
int gpu_re_params_check(const struct gpu_re_params *, char *err,
                        size_t err_size);

/* ---- Chunkers and batches. ---- */

enum gpu_re_backend {
    GPU_RE_BACKEND_AUTO,        /* CUDA if a device is usable, else CPU. */
    GPU_RE_BACKEND_CPU,
    GPU_RE_BACKEND_CUDA,
};

const char *gpu_re_backend_name(enum gpu_re_backend);

struct gpu_re_chunker_config {
    struct gpu_re_params params;
    enum gpu_re_backend backend;
    int device;                 /* CUDA device index. */
    /* CUDA: group packets by length on the device before chunking, so
     * that a warp's threads run similar lengths (default true). */
    bool sort;
    /* CUDA: fingerprint fixed segments of the batch, one per thread,
     * whatever packets they fall in, then apply the cut rule per packet
     * from one bit per byte (docs/RE-NOTES.md); 'sort' does not apply.
     * Same cuts and fingerprints.  Default false. */
    bool remap;
    uint32_t segment;           /* Bytes per thread, multiple of 32
                                 * (0: 256). */
    /* CUDA: queue each submission kernel by kernel (some 14 runtime
     * calls) rather than as the batch's CUDA graph (1, or 2 where the
     * payloads must be copied first), for comparisons and tests. */
    bool kernel_by_kernel;
    /* CUDA: an encoder's batches (gpu_re_encoder_batch_create()) are
     * launched by the device: a submission writes its arguments and
     * rings a doorbell that one scheduler kernel a encoder polls, which
     * launches the batches' graphs in the order they were submitted (no
     * runtime call; gpu_runtime's "Device launch").  Default false. */
    bool device_launch;
};

void gpu_re_chunker_config_init(struct gpu_re_chunker_config *);

struct gpu_re_chunker;
struct gpu_re_batch;

/* Creates a chunker.  With GPU_RE_BACKEND_AUTO and no usable device it
 * picks the CPU; gpu_re_chunker_why() then says why.  Returns GPU_OK,
 * GPU_ERR_INVALID (bad parameters), GPU_ERR_NO_DEVICE (CUDA asked for
 * but not usable), GPU_ERR_NOMEM, GPU_ERR_DEVICE*. */
int gpu_re_chunker_create(const struct gpu_re_chunker_config *,
                          struct gpu_re_chunker **);
void gpu_re_chunker_destroy(struct gpu_re_chunker *);
enum gpu_re_backend gpu_re_chunker_backend(const struct gpu_re_chunker *);
/* Why this backend: "CUDA device 0 (NVIDIA H100 ...)", or why not CUDA. */
const char *gpu_re_chunker_why(const struct gpu_re_chunker *);
const struct gpu_re_params *gpu_re_chunker_params(
    const struct gpu_re_chunker *);

/* Cuts of packet i of a batch lie in slots
 *
 *   gpu_re_slot_base(offsets, i, min_chunk) ..
 *
 * one per chunk, in order: ends[] is the chunk's end (exclusive) within
 * the packet, fps[] the fingerprint of the window ending at its last
 * byte; the last chunk's end is the packet's length.  A packet has at
 * most len / min_chunk + 1 chunks, so the slots never overflow. */
static inline size_t
gpu_re_slot_base(const uint32_t *offsets, size_t i, uint32_t min_chunk)
{
    return (offsets[i] - offsets[0]) / min_chunk + i;
}

/* Slots a batch of 'n_bytes' in 'n_packets' needs. */
static inline size_t
gpu_re_n_slots(size_t n_bytes, size_t n_packets, uint32_t min_chunk)
{
    return n_bytes / min_chunk + n_packets + 1;
}

/* A batch: device and pinned host buffers for up to 'max_packets'
 * (at most 2^24) packets and 'max_bytes' (at most 1 GiB) payload bytes.
 * 'want_fps': also copy the fingerprints back (the encoder needs only the
 * cuts). */
int gpu_re_batch_create(struct gpu_re_chunker *, size_t max_packets,
                        size_t max_bytes, bool want_fps,
                        struct gpu_re_batch **);

/* Flags of gpu_re_batch_create_flags(). */
#define GPU_RE_BATCH_FPS 0x1    /* Copy the fingerprints back. */
/* Also hash every chunk and every payload (gpu_re_hash128()) where the
 * chunking runs, on the GPU for CUDA, and copy the hashes back: what the
 * encoder would otherwise compute on its own core, see
 * gpu_re_encode_chunks(). */
#define GPU_RE_BATCH_HASHES 0x2

/* gpu_re_batch_create() with GPU_RE_BATCH_* flags. */
int gpu_re_batch_create_flags(struct gpu_re_chunker *, size_t max_packets,
                              size_t max_bytes, unsigned int flags,
                              struct gpu_re_batch **);
void gpu_re_batch_destroy(struct gpu_re_batch *);

/* Submits 'n_packets' payloads: packet i is data[offsets[i] ..
 * offsets[i + 1]), at most GPU_RE_MAX_PAYLOAD bytes.  On CUDA the work
 * is queued on 'stream' (NULL: the thread's own) and this returns at
 * once; 'data' and 'offsets' must stay untouched until
 * gpu_re_batch_wait(), and come from gpu_host_alloc() for asynchronous
 * copies.  On the CPU the chunking runs here.  Returns GPU_OK,
 * GPU_ERR_INVALID, GPU_ERR_BUSY, GPU_ERR_DEVICE*. */
int gpu_re_batch_submit(struct gpu_re_batch *, struct gpu_stream *,
                        const uint8_t *data, const uint32_t *offsets,
                        size_t n_packets);
/* The same, but payload i is read where it is, offsets[i + 1] -
 * offsets[i] bytes at 'srcs[i]', where that is not NULL, and
 * data[offsets[i] .. offsets[i + 1]) is not read: the caller need not
 * copy it (the offsets are laid out as if it had).  On CUDA such a
 * payload must lie in memory registered with gpu_host_register()
 * (gpu_host_readable_in_place()), which a kernel reads over the bus,
 * else GPU_ERR_INVALID; on the CPU anywhere.  Neither the payloads nor
 * 'srcs' may change until the submission completes.  'srcs' NULL is
 * gpu_re_batch_submit().  The results are those of the same payloads
 * copied. */
int gpu_re_batch_submit_in_place(struct gpu_re_batch *,
                                 struct gpu_stream *, const uint8_t *data,
                                 const uint32_t *offsets,
                                 const uint8_t *const *srcs,
                                 size_t n_packets);
/* Runs the last submission's kernels again on the data already on the
 * device, with no copies: kernel-only timing.  CPU: chunks again. */
int gpu_re_batch_resubmit(struct gpu_re_batch *, struct gpu_stream *);
/* Blocks until the submission is done.  If the device failed, the batch
 * is chunked on the CPU instead (counted in the chunker's stats). */
int gpu_re_batch_wait(struct gpu_re_batch *);
/* gpu_re_batch_wait() without the blocking, for a caller that holds its
 * packets meanwhile and checks again later: GPU_ERR_BUSY if the device
 * is still at it, else what gpu_re_batch_wait() would return, with the
 * results then valid (a batch with nothing in flight is done).  The CPU
 * backend chunks at submit, so its batches are always done. */
int gpu_re_batch_poll(struct gpu_re_batch *);
/* The results of the last completed submission: 'ends' and (if asked
 * for) 'fps', indexed by slot as above; valid until the next submit. */
void gpu_re_batch_results(const struct gpu_re_batch *,
                          const uint16_t **ends, const uint64_t **fps);

/* Synchronous chunking of one payload on the CPU (any chunker's
 * parameters): writes up to 'max' chunk ends and fingerprints ('fps' may
 * be NULL) and returns the number of chunks. */
size_t gpu_re_chunk_cpu(const struct gpu_re_params *, const uint8_t *data,
                        size_t len, uint16_t *ends, uint64_t *fps,
                        size_t max);

struct gpu_re_chunker_stats {
    uint64_t n_batches, n_packets, n_bytes;
    uint64_t n_fallbacks;       /* CUDA batches redone on the CPU. */
    uint64_t n_graph_launches;  /* CUDA submissions made as one graph... */
    uint64_t n_device_launches; /* ...of those, launched by the device
                                 * (an encoder's queue, 'device_launch')... */
    uint64_t n_scheduler_launches;  /* ...whose scheduler, parked, this
                                     * host launched again. */
};

void gpu_re_chunker_get_stats(struct gpu_re_chunker *,
                              struct gpu_re_chunker_stats *);

/* True if the CUDA backend was built in and a device is usable. */
bool gpu_re_cuda_available(void);

/* ---- The 128-bit chunk hash. ---- */

struct gpu_re_hash {
    uint64_t hi, lo;
};

/* The chunk hash: 'lo' the XXH64 (seed 0) of 'data', 'hi' that mixed
 * once more (MurmurHash3's fmix64).  The encoders index their caches
 * with it and compare bytes, so it need not be wider. */
struct gpu_re_hash gpu_re_hash128(const void *data, size_t len);

/* A payload's check, as a version 2 shim carries it: the high 32 bits of
 * its XXH64 (seed 0). */
uint32_t gpu_re_check32(const void *data, size_t len);

/* A version 1 shim's check: the high 32 bits of the payload's
 * MurmurHash3 x64_128 (seed 0). */
uint32_t gpu_re_check32_v1(const void *data, size_t len);

/* The hashes of the last completed submission of a batch created with
 * GPU_RE_BATCH_HASHES (else NULL): 'chunk_hashes' by slot like the ends
 * (gpu_re_hash128() of each chunk), 'payload_checks' by packet
 * (gpu_re_check32() of the whole payload). */
void gpu_re_batch_hashes(const struct gpu_re_batch *,
                         const struct gpu_re_hash **chunk_hashes,
                         const uint32_t **payload_checks);

/* One payload's chunks as a batch gives them to the encoder. */
struct gpu_re_chunks {
    const uint16_t *ends;       /* 'n' chunk ends, the last the length. */
    size_t n;
    /* gpu_re_hash128() of each chunk and gpu_re_check32() of the
     * payload, or NULL: the encoder computes them. */
    const struct gpu_re_hash *hashes;
    const uint32_t *payload_check;
};

/* Fills 'chunks' with packet 'i' of the batch's last completed
 * submission (its hashes too, if the batch has them).  Valid until the
 * next submit, with the submitted offsets unchanged. */
void gpu_re_batch_chunks(const struct gpu_re_batch *, size_t i,
                         struct gpu_re_chunks *chunks);

/* ---- Shim wire format (docs/RE-NOTES.md). ----
 *
 * An encoded payload is a 16-byte header and a body, big-endian:
 *
 *   0  u8   version      GPU_RE_SHIM_VERSION
 *   1  u8   next_proto   original IP protocol (0 for payload-level)
 *   2  u8   l4_len       L4 header bytes between header and body
 *   3  u8   flags        GPU_RE_SHIM_F_*
 *   4  u16  epoch
 *   6  u16  orig_len     decoded payload length
 *   8  u32  pos          encoder stream position (low 32 bits) of the
 *                        payload's first byte
 *   12 u32  check        gpu_re_check32() of the decoded payload
 *                        (version 1: gpu_re_check32_v1(), the high 32
 *                        bits of its MurmurHash3; decoders take both)
 *
 * The body is items up to orig_len decoded bytes:
 *
 *   0x00 varint(n) n-bytes        literal
 *   0x01 varint(dist) varint(n)   n bytes from stream position pos - dist
 *                                 (1 <= n <= dist: only earlier payloads)
 *
 * with varint the LEB128 encoding of an unsigned integer (at most 5
 * bytes, no overlong forms).
 */
/* Version 2 differs from 1 only in its check (gpu_re_check32() instead
 * of MurmurHash3's high 32 bits, which cost decoders twice the time);
 * encoders write 2, decoders take both. */
#define GPU_RE_SHIM_VERSION 2
#define GPU_RE_SHIM_VERSION_MURMUR 1
#define GPU_RE_SHIM_HDR_LEN 16
#define GPU_RE_SHIM_F_START 0x01    /* First payload of an epoch. */
#define GPU_RE_IPPROTO 253          /* RFC 3692 experimental. */

/* ---- Encoder and decoder. ---- */

struct gpu_re_config {
    struct gpu_re_params params;
    uint64_t cache_size;        /* FIFO cache bytes (1 MB default);
                                 * at most 1 GiB. */
    uint32_t resync_packets;    /* Encoder: new epoch every N shims
                                 * (0: only on gpu_re_encoder_resync()):
                                 * bounds how long a loss is felt, at the
                                 * price of an empty cache each time. */
    uint32_t min_ref;           /* Shortest chunk worth a reference (16). */
    uint16_t epoch;             /* Encoder: first epoch (0: random). */
    /* Encoder: keep the cache and the chunk table on the chunker's
     * device and encode there, in the batch's graph ("encoder=device";
     * default false, "host").  A chunker that cannot (the CPU backend)
     * encodes on the host as always. */
    bool device_encode;
    /* An encoder on the device: its batches launched by the device, not
     * by the submitting thread ("launch=device", the chunker's
     * 'device_launch' for gpu_re_chunker_create(); default false,
     * "host"). */
    bool device_launch;
};

void gpu_re_config_init(struct gpu_re_config *);

/* Sets one option of 'cfg' from its text, for actions such as
 * re_encode(peer=NAME,cache=64M,...): "cache" (bytes, with an optional
 * K, M or G suffix, powers of 1024), "window", "bits", "min_chunk",
 * "max_chunk", "min_ref", "resync" (resync_packets), "epoch".  Returns
 * GPU_OK, or GPU_ERR_INVALID with a message in 'err' (an unknown key, a
 * malformed or out-of-range value); 'cfg' is unchanged on error.  Check
 * the whole set with gpu_re_config_check() afterwards. */
/* "encoder" takes "host" or "device" (device_encode), and so does
 * "launch" (device_launch). */
int gpu_re_config_set(struct gpu_re_config *cfg, const char *key,
                      const char *value, char *err, size_t err_size);
/* GPU_OK, or GPU_ERR_INVALID with the reason in 'err'. */
int gpu_re_config_check(const struct gpu_re_config *, char *err,
                        size_t err_size);

/* Counters of one encoder or decoder. */
struct gpu_re_stats {
    uint64_t packets;           /* Payloads (eligible packets) seen. */
    uint64_t bytes_in;          /* Encoder: original payload bytes;
                                 * decoder: bytes received. */
    uint64_t bytes_out;         /* Encoder: bytes sent; decoder: bytes
                                 * restored. */
    uint64_t shims;             /* Payloads sent or received as shims. */
    uint64_t hits;              /* References emitted or expanded. */
    uint64_t hit_bytes;         /* Bytes covered by references. */
    uint64_t cache_fill;        /* Bytes in the cache now. */
    uint64_t undecodable;       /* Decoder: shims refused. */
    uint64_t malformed;         /* ...of which malformed. */
    uint64_t shims_v1;          /* Decoder: shims of version 1 (an
                                 * older encoder's check) taken. */
    uint64_t epochs;            /* Epochs started (resyncs). */
    uint64_t passed;            /* Packet helpers: left alone (not IP,
                                 * fragment, not TCP/UDP, ...). */
};

struct gpu_re_encoder;
struct gpu_re_decoder;

/* 'chunker' (may be NULL: chunk on the CPU) cuts batches for
 * gpu_re_encode_packets(); its parameters must equal config->params. */
int gpu_re_encoder_create(const struct gpu_re_config *,
                          struct gpu_re_chunker *chunker,
                          struct gpu_re_encoder **);
void gpu_re_encoder_destroy(struct gpu_re_encoder *);
/* Starts a new epoch: empties the cache; the next shim carries
 * GPU_RE_SHIM_F_START and resyncs the decoder. */
void gpu_re_encoder_resync(struct gpu_re_encoder *);
void gpu_re_encoder_get_stats(const struct gpu_re_encoder *,
                              struct gpu_re_stats *);

int gpu_re_decoder_create(const struct gpu_re_config *,
                          struct gpu_re_decoder **);
void gpu_re_decoder_destroy(struct gpu_re_decoder *);
void gpu_re_decoder_get_stats(const struct gpu_re_decoder *,
                              struct gpu_re_stats *);

/* ---- Encoding on the device (config 'device_encode'). ----
 *
 * The encoder's cache and table live on the chunker's device; a batch
 * made by gpu_re_encoder_batch_create() chunks, hashes and encodes its
 * payloads in one graph launch, and the host writes each shim into its
 * frame.  Payloads are encoded in the order they are submitted, across
 * batches and threads' streams; their stream positions are given at
 * submission, so frames should go out in that order.  A batch the device
 * fails (or one submitted before a resync) goes raw, and the encoder
 * starts a new epoch.  With 'resync_packets' the new epoch starts at the
 * first submission after that many shims.  Payload-level calls
 * (gpu_re_encode(), gpu_re_encode_chunks()) are refused on such an
 * encoder (GPU_ERR_INVALID), and gpu_re_encode_packet() sends an
 * eligible frame raw and starts a new epoch: use the batch calls. */

/* True if 'e' encodes on the device. */
bool gpu_re_encoder_on_device(const struct gpu_re_encoder *);

/* A batch for gpu_re_encoder_submit() on 'e''s chunker (for an encoder
 * on the host, gpu_re_batch_create_flags() with GPU_RE_BATCH_HASHES). */
int gpu_re_encoder_batch_create(struct gpu_re_encoder *, size_t max_packets,
                                size_t max_bytes, struct gpu_re_batch **);

/* Submits payloads as gpu_re_batch_submit_in_place() does ('srcs' NULL:
 * all in 'data'), to be encoded in that order.  'rooms[i]' (NULL: no
 * limit) is how many bytes payload i's shim may take in its frame (the
 * payload's length plus the buffer's room past the frame): only the
 * epoch's first shim can be longer than its payload.  For an encoder on
 * the host this only chunks. */
int gpu_re_encoder_submit(struct gpu_re_encoder *, struct gpu_re_batch *,
                          const uint8_t *data, const uint32_t *offsets,
                          const uint8_t *const *srcs,
                          const uint32_t *rooms, size_t n_packets);

/* After gpu_re_batch_wait() or _poll(): encodes 'frame' ('*len' bytes
 * in a buffer of 'cap'), whose payload was payload 'i' of the batch, in
 * place: with the device's result, or for an encoder on the host with
 * the batch's cuts and hashes (gpu_re_encode_packet_chunks(), the table
 * probes prefetched ahead; call it for the payloads in order).  Returns
 * as gpu_re_encode_packet(); GPU_ERR_INVALID if the frame's payload is
 * not the one submitted (the frame left unchanged). */
int gpu_re_encode_packet_result(struct gpu_re_encoder *,
                                struct gpu_re_batch *, size_t i,
                                uint8_t *frame, size_t *len, size_t cap);

/* Where an eligible frame's headers and payload are (for
 * gpu_re_encode_frame_result(), filled by gpu_re_frame_parse()). */
struct gpu_re_frame {
    size_t l3;                  /* Offset of the IP header. */
    bool v6;
    size_t l4;                  /* Offset of the L4 (or shim) header. */
    uint8_t proto;
    size_t l4_len;              /* TCP/UDP header bytes. */
    size_t end;                 /* End of the IP datagram (== frame len). */
};

/* gpu_re_packet_payload() that keeps the whole parse: the payload's
 * length, or -1 if the frame is not eligible. */
int gpu_re_frame_parse(const uint8_t *frame, size_t len,
                       struct gpu_re_frame *);

/* gpu_re_encode_packet_result() with the frame parsed before
 * (gpu_re_frame_parse(), 'plen' its result; the frame unchanged since):
 * for an encoder on the device a second parse, with its IPv4 header
 * checksum, cost the PMD ~20 ns a packet.  (An encoder on the host
 * parses again.) */
int gpu_re_encode_frame_result(struct gpu_re_encoder *,
                               struct gpu_re_batch *, size_t i,
                               uint8_t *frame, size_t *len, size_t cap,
                               const struct gpu_re_frame *, int plen);

/* Results of the encode and decode calls. */
enum gpu_re_result {
    GPU_RE_RAW = 1,             /* Send (or deliver) the payload as it is. */
    GPU_RE_SHIM = 2,            /* Encoded: send the shim. */
    GPU_RE_DECODED = 3,         /* Decoded: deliver the restored bytes. */
    GPU_RE_PASS = 4,            /* Packet helpers: not ours, unchanged. */
    GPU_RE_UNDECODABLE = 5,     /* Drop it: cannot be decoded. */
};

/* Payload level.  Encodes 'len' bytes (at most GPU_RE_MAX_PAYLOAD) into
 * 'out' (room for 'out_size' bytes; no shim longer than that is made).
 * Returns GPU_RE_SHIM with '*out_len' bytes of shim, or GPU_RE_RAW: send
 * the payload itself (it would not shrink).  Either way the payload
 * enters the encoder's cache unless the epoch has not started yet.
 * 'ends' are the payload's 'n_chunks' chunk ends from a chunker with the
 * encoder's parameters (strictly increasing, the last one 'len'; else
 * GPU_ERR_INVALID), or NULL to chunk it here on the CPU. */
int gpu_re_encode(struct gpu_re_encoder *, const uint8_t *payload,
                  size_t len, const uint16_t *ends, size_t n_chunks,
                  uint8_t *out, size_t out_size, size_t *out_len);

/* gpu_re_encode() with the chunks (and, if given, their hashes) from a
 * batch: the same shim and counters, without the hashing.  The hashes
 * must be gpu_re_hash128()'s, as a batch's are (a wrong one costs a
 * miss, never a wrong reference: matches are checked byte for byte, but
 * a wrong payload hash makes the decoder refuse the shim). */
int gpu_re_encode_chunks(struct gpu_re_encoder *, const uint8_t *payload,
                         size_t len, const struct gpu_re_chunks *,
                         uint8_t *out, size_t out_size, size_t *out_len);

/* A hint that the payload with these chunk hashes comes soon: starts
 * loading the table buckets its chunks will probe, so that the cache
 * misses of several payloads overlap instead of one per chunk in
 * series.  Call it a few payloads ahead of gpu_re_encode_chunks() (4 to
 * 8 is about right for DRAM); it changes nothing the encoder does. */
void gpu_re_encoder_prefetch(const struct gpu_re_encoder *,
                             const struct gpu_re_chunks *);

/* Payloads a batch loop prefetches ahead of the one it encodes. */
#define GPU_RE_PREFETCH_AHEAD 6

/* For a loop that encodes packets 0 .. n - 1 of batch 'b' in order:
 * before encoding packet 'i', prefetches the table buckets of packets up
 * to i + GPU_RE_PREFETCH_AHEAD not prefetched yet, and, for the packet
 * half as far ahead (whose buckets are loaded by then), the byte cache
 * line of each chunk found in them.  'ahead' is the first
 * packet not prefetched yet (0 at the start); returns the new one:
 *
 *     size_t ahead = 0;
 *     for (i = 0; i < n; i++) {
 *         ahead = gpu_re_encoder_prefetch_batch(e, b, i, ahead, n);
 *         gpu_re_batch_chunks(b, i, &chunks);
 *         gpu_re_encode_chunks(e, payload_i, len_i, &chunks, ...);
 *     }
 */
size_t gpu_re_encoder_prefetch_batch(const struct gpu_re_encoder *,
                                     const struct gpu_re_batch *, size_t i,
                                     size_t ahead, size_t n);

/* Decodes a shim into 'out' (at least GPU_RE_MAX_PAYLOAD bytes, or the
 * shim's orig_len).  Returns GPU_RE_DECODED with '*out_len' bytes, or
 * GPU_RE_UNDECODABLE (drop the packet; nothing usable in 'out').  The
 * decoder's cache follows the shim either way. */
int gpu_re_decode(struct gpu_re_decoder *, const uint8_t *shim, size_t len,
                  uint8_t *out, size_t out_size, size_t *out_len);

/* A payload that came raw (GPU_RE_RAW on the encoder): the decoder
 * caches it too. */
void gpu_re_decoder_observe(struct gpu_re_decoder *, const uint8_t *payload,
                            size_t len);

/* Packet level: 'frame' holds an Ethernet frame of '*len' bytes in a
 * buffer of 'cap' bytes, changed in place.  The encoder never makes a
 * frame longer than 'cap', and only an epoch's first shim (at most 20
 * bytes more than its payload) is ever longer than the original: pass
 * as 'cap' no more than the largest frame the link carries.
 *
 * Encode: GPU_RE_SHIM (the frame now carries a shim, '*len' smaller),
 * GPU_RE_RAW (an eligible TCP/UDP payload left as it is, cached), or
 * GPU_RE_PASS (not eligible: non-IP, fragment, other protocol, IPv6
 * extension headers, inconsistent lengths, Ethernet padding).
 *
 * Decode: GPU_RE_DECODED (original frame restored, '*len' larger),
 * GPU_RE_RAW (an eligible frame without a shim: cached, unchanged),
 * GPU_RE_PASS, or GPU_RE_UNDECODABLE (drop it: '*len' is unchanged but
 * the bytes may not be, since a shim is expanded in place when 'cap'
 * leaves room for its body past the decoded frame's end). */
int gpu_re_encode_packet(struct gpu_re_encoder *, uint8_t *frame,
                         size_t *len, size_t cap);

/* For a caller that chunks frames' payloads in batches of its own (many
 * bursts in one device call, say) and encodes the frames later, in
 * order: returns the length of the payload that gpu_re_encode_packet()
 * would encode, with its offset in the frame in '*ofs', or -1 if the
 * frame is not eligible (it would pass). */
int gpu_re_packet_payload(const uint8_t *frame, size_t len, size_t *ofs);

/* gpu_re_encode_packet() with the payload's 'chunks' from a batch
 * (gpu_re_batch_chunks()), or NULL to chunk it here: the same frame and
 * counters.  GPU_ERR_INVALID, with nothing changed, if the chunks do not
 * cut this frame's payload (the frame changed since it was chunked). */
int gpu_re_encode_packet_chunks(struct gpu_re_encoder *, uint8_t *frame,
                                size_t *len, size_t cap,
                                const struct gpu_re_chunks *chunks);
int gpu_re_decode_packet(struct gpu_re_decoder *, uint8_t *frame,
                         size_t *len, size_t cap);

/* Encodes 'n' frames in order, chunking all their payloads as one batch
 * on the encoder's chunker (identical output to n calls of
 * gpu_re_encode_packet()).  'results[i]' gets each frame's result.
 * Returns GPU_OK or an error (then nothing was changed): after a device
 * error, gpu_re_encode_packets_cpu() does the same on the CPU. */
int gpu_re_encode_packets(struct gpu_re_encoder *, uint8_t **frames,
                          size_t *lens, const size_t *caps, size_t n,
                          int *results);
int gpu_re_encode_packets_cpu(struct gpu_re_encoder *, uint8_t **frames,
                              size_t *lens, const size_t *caps, size_t n,
                              int *results);

/* Decodes 'n' frames in order (gpu_re_decode_packet() on each), for
 * symmetry with the encoder's burst call.  Returns GPU_OK or
 * GPU_ERR_INVALID (nothing changed). */
int gpu_re_decode_packets(struct gpu_re_decoder *, uint8_t **frames,
                          size_t *lens, const size_t *caps, size_t n,
                          int *results);

#ifdef __cplusplus
}
#endif

#endif /* gpu-re.h */
