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
 * ovs-gpu parity: Cauchy Reed-Solomon erasure coding of byte buffers, on
 * the CPU or on a CUDA GPU (the seed "G-CRS").
 *
 * The library knows nothing of Open vSwitch.  A coder is created for one
 * code: k data chunks, m parity chunks, w bits per symbol (k + m <= 2^w,
 * 1 <= w <= 8) and a packet size.  Its coding matrix is the one Jerasure's
 * cauchy_good_general_coding_matrix(k, m, w) returns, expanded to an
 * (m*w) x (k*w) bitmatrix, so encoding and decoding are XORs of packets.
 *
 * Layout (the same as Jerasure's jerasure_bitmatrix_encode() with a packet
 * size, so our parity bytes equal Jerasure's): every chunk is 'size' bytes,
 * a multiple of w * packetsize.  It is a run of blocks of w packets each;
 * packet t of a block (packetsize bytes) holds the block's bit-row t.
 * Parity packet (block b, row r) of parity chunk j is the XOR of every data
 * packet (block b, row t) of data chunk i whose bitmatrix entry
 * (j*w + r, i*w + t) is 1.
 *
 * Chunk ids: 0 .. k-1 are the data chunks, k .. k+m-1 the parity chunks
 * (Jerasure's numbering).
 *
 * A second code, GPU_PARITY_CODE_GF8, is ISA-L's: byte symbols over
 * GF(2^8) (polynomial 0x11d), parity byte x of parity chunk j the sum over
 * the data chunks i of c[j][i] * data[i][x], with the Cauchy coefficients
 * of ISA-L's gf_gen_cauchy1_matrix(): c[j][i] = 1 / ((k + j) ^ i).  It
 * has no w and no blocks: every byte is coded alone, so a chunk is any
 * multiple of 'packetsize' bytes.  Its parity bytes equal ISA-L's
 * ec_encode_data() with that matrix.  The CPU backend codes it with ISA-L
 * where this library was built with it (ec_encode_data: split-nibble
 * tables in vector registers, about three times the bitmatrix code's
 * speed on one core), otherwise with portable C; the CUDA backend with a
 * kernel of its own.  The two codes' parity differs: encoder and decoder
 * must use the same code (the FEC services name it on the wire).
 *
 * Errors are the negative codes of gpu-runtime.h plus the GPU_PARITY_ERR_*
 * below; gpu_parity_strerror() names them all.  No call ever returns
 * success with wrong data: bad parameters, more than m erasures and
 * buffers of the wrong size are refused before anything is written.
 *
 * Concurrency: a coder is immutable once created and may be used by any
 * number of threads through the synchronous calls.  A batch is used by one
 * thread at a time.
 */
#ifndef GPU_PARITY_H
#define GPU_PARITY_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_runtime/gpu-runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parity-specific error codes, beside enum gpu_status. */
enum gpu_parity_status {
    /* k, m or w out of range: k = 0, m = 0, w not in 1..8, or
     * k + m > 2^w. */
    GPU_PARITY_ERR_CODE = -32,
    /* Buffer size or packet size unusable: packetsize 0 or not a
     * multiple of 8, or size not a multiple of w * packetsize, or larger
     * than the batch was made for. */
    GPU_PARITY_ERR_SIZE = -33,
    /* More erasures than parity chunks: the data cannot be rebuilt. */
    GPU_PARITY_ERR_TOO_MANY_ERASURES = -34,
    /* An erasure id out of range (not 0 .. k+m-1) or listed twice. */
    GPU_PARITY_ERR_ERASURE_ID = -35,
    /* A packet group the packet helpers cannot code: a packet longer
     * than GPU_PARITY_PKT_MAX_LEN, parity buffers too small, or a rebuilt
     * length that does not fit (corrupt or mismatched parity). */
    GPU_PARITY_ERR_PACKET = -36,
};

/* Names any status of this library, gpu-runtime's included. */
const char *gpu_parity_strerror(int status);

#define GPU_PARITY_MAX_W 8
/* With w = 8, k + m <= 256. */
#define GPU_PARITY_MAX_CHUNKS 256

enum gpu_parity_backend {
    GPU_PARITY_BACKEND_AUTO,    /* CUDA if a device is usable, else CPU. */
    GPU_PARITY_BACKEND_CPU,
    GPU_PARITY_BACKEND_CUDA,
};

const char *gpu_parity_backend_name(enum gpu_parity_backend);

enum gpu_parity_code {
    /* Jerasure's Cauchy bitmatrix code (w bits a symbol, XORs of
     * packets). */
    GPU_PARITY_CODE_BITMATRIX,
    /* ISA-L's Cauchy Reed-Solomon code over GF(2^8) (byte symbols). */
    GPU_PARITY_CODE_GF8,
};

/* "bitmatrix" or "gf8". */
const char *gpu_parity_code_name(enum gpu_parity_code);
/* Parses a code's name.  Returns GPU_OK or GPU_ERR_INVALID. */
int gpu_parity_code_parse(const char *, enum gpu_parity_code *);

/* True if this library was built with ISA-L (the CPU's GF(2^8) code). */
bool gpu_parity_isal_built(void);

/* Parses "auto", "cpu" or "cuda" (for environment variables and
 * settings).  Returns GPU_OK or GPU_ERR_INVALID. */
int gpu_parity_backend_parse(const char *, enum gpu_parity_backend *);

struct gpu_parity_config {
    unsigned int k;             /* Data chunks, >= 1. */
    unsigned int m;             /* Parity chunks, >= 1. */
    enum gpu_parity_code code;
    unsigned int w;             /* Bits per symbol, 1 .. 8 (GF8: set to
                                 * 8 by gpu_parity_create()). */
    unsigned int packetsize;    /* Bytes, a multiple of 8.  GF8: chunk
                                 * sizes are multiples of it. */
    enum gpu_parity_backend backend;
    int device;                 /* CUDA device index. */

    /* CUDA: time the kernels of kernel-only re-runs
     * (gpu_parity_resubmit()) with events on the stream, into
     * gpu_parity_stats.kernel_ns. */
    bool profile;

    /* GF8 code on the CPU (the CPU backend, or the CUDA backend's
     * fallback): portable C even where ISA-L is built in (tests,
     * benchmarks). */
    bool portable;

    /* CUDA: a packet-group encode that goes as its batch's graph
     * (gpu_parity_pkt_encode_submit() with everything in place) is
     * launched by the device: the batch's scheduler kernel, rung by a
     * store, launches it (gpu_runtime's "Device launch"; calls are
     * independent, so each batch may have one), where the host's launch
     * costs the calling thread microseconds.  Default false. */
    bool device_launch;
};

/* k and m as given; code BITMATRIX; w the smallest with k + m <= 2^w (it
 * does the least work: XORs grow with w); packetsize 2048 (Jerasure's
 * examples); backend AUTO; device 0; no profiling; ISA-L where built. */
void gpu_parity_config_init(struct gpu_parity_config *, unsigned int k,
                            unsigned int m);

/* Checks k, m, w and packetsize alone.  GPU_OK, GPU_PARITY_ERR_CODE or
 * GPU_PARITY_ERR_SIZE, with a sentence in 'err' (may be NULL). */
int gpu_parity_check_params(unsigned int k, unsigned int m, unsigned int w,
                            unsigned int packetsize, char *err,
                            size_t err_size);

struct gpu_parity;

/* Builds the coding matrix and puts the coder on a backend.  With
 * GPU_PARITY_BACKEND_AUTO the CUDA backend is used if this build has it
 * and a device works, otherwise the CPU backend; gpu_parity_backend_why()
 * then says why.  Returns GPU_OK and '*coderp', or an error with a
 * sentence in 'err' (may be NULL): GPU_PARITY_ERR_CODE,
 * GPU_PARITY_ERR_SIZE, GPU_ERR_NO_DEVICE (CUDA asked for but unusable),
 * GPU_ERR_NOMEM, GPU_ERR_DEVICE*. */
int gpu_parity_create(const struct gpu_parity_config *,
                      struct gpu_parity **coderp, char *err,
                      size_t err_size);
void gpu_parity_destroy(struct gpu_parity *);

/* The backend in use (CPU or CUDA, never AUTO), and a sentence saying why
 * it was chosen ("asked for", or why CUDA was not usable). */
enum gpu_parity_backend gpu_parity_backend(const struct gpu_parity *);
const char *gpu_parity_backend_why(const struct gpu_parity *);
/* What codes: "ISA-L" (GF8 code on the CPU with ISA-L), "portable" (C on
 * the CPU) or "CUDA". */
const char *gpu_parity_impl(const struct gpu_parity *);
void gpu_parity_get_config(const struct gpu_parity *,
                           struct gpu_parity_config *);

/* The m x k coding matrix over GF(2^w), row-major (element [j][i] at
 * j*k + i), and the (m*w) x (k*w) bitmatrix, row-major, one int (0 or 1)
 * per entry: the same arrays as Jerasure's.  The GF8 code has a matrix
 * over GF(2^8) (ISA-L's rows k .. k+m-1) and no bitmatrix (NULL). */
const int *gpu_parity_matrix(const struct gpu_parity *);
const int *gpu_parity_bitmatrix(const struct gpu_parity *);

/* ---- Synchronous coding. ---- */

/* Computes parity[0 .. m-1] from data[0 .. k-1], each 'size' bytes
 * ('size' a multiple of w * packetsize; GF8: of packetsize).  Safe from
 * several threads. */
int gpu_parity_encode(struct gpu_parity *, const uint8_t *const *data,
                      uint8_t *const *parity, size_t size);

/* Rebuilds the chunks listed in 'erasures[0 .. n_erasures)' (ids 0 ..
 * k+m-1, any order) from the others, in place: every chunk has a buffer
 * in 'data' or 'parity', the erased ones are overwritten and the others
 * only read.  Refused with GPU_PARITY_ERR_TOO_MANY_ERASURES if
 * n_erasures > m, GPU_PARITY_ERR_ERASURE_ID for a bad or repeated id.
 * No erasures is a no-op.  Safe from several threads. */
int gpu_parity_decode(struct gpu_parity *, uint8_t *const *data,
                      uint8_t *const *parity, const int *erasures,
                      size_t n_erasures, size_t size);

/* ---- Asynchronous batches. ---- */

struct gpu_parity_batch;

/* A batch: device buffers for chunks of up to 'max_size' bytes and the
 * state of one submission. */
int gpu_parity_batch_create(struct gpu_parity *, size_t max_size,
                            struct gpu_parity_batch **batchp);
void gpu_parity_batch_destroy(struct gpu_parity_batch *);

/* Submits an encode (or a decode, same arguments as the synchronous
 * calls).  On the CUDA backend the copies in, the kernel and the copies
 * out are queued, in slices that overlap, behind the work already on
 * 'stream' (NULL: the calling thread's per-thread stream), and this
 * returns at once; no buffer may be touched until gpu_parity_wait() or
 * gpu_parity_poll() returns GPU_OK.  Host buffers should come from
 * gpu_host_alloc() so the copies run asynchronously at full PCIe rate.
 * If the device fails, gpu_parity_wait() codes the submission on the CPU
 * instead (counted in n_fallbacks).  On the CPU backend the work is done
 * here.  Returns GPU_OK, GPU_ERR_BUSY (the previous submission was not
 * waited for), or the errors of the synchronous calls. */
int gpu_parity_encode_submit(struct gpu_parity_batch *, struct gpu_stream *,
                             const uint8_t *const *data,
                             uint8_t *const *parity, size_t size);
int gpu_parity_decode_submit(struct gpu_parity_batch *, struct gpu_stream *,
                             uint8_t *const *data, uint8_t *const *parity,
                             const int *erasures, size_t n_erasures,
                             size_t size);

/* Runs the last submission's coding again on the data already on the
 * device, without copying anything in or out: kernel-only timing.  Its
 * output stays on the device.  On the CPU backend it codes again from the
 * same host buffers. */
int gpu_parity_resubmit(struct gpu_parity_batch *, struct gpu_stream *);

/* GPU_OK if the last submission is complete (or there was none),
 * GPU_ERR_BUSY if it is still running, or the error it met. */
int gpu_parity_poll(struct gpu_parity_batch *);
/* CUDA runtime calls the last submission of the batch made from the
 * calling thread (0 on the CPU backend; see gpu_parity_stats). */
uint64_t gpu_parity_batch_runtime_calls(const struct gpu_parity_batch *);
/* Blocks until the last submission completes; returns its status. */
int gpu_parity_wait(struct gpu_parity_batch *);

struct gpu_parity_stats {
    enum gpu_parity_backend backend;    /* CPU or CUDA. */
    uint64_t n_encodes, n_decodes;      /* Submissions completed. */
    uint64_t n_bytes;                   /* Data bytes coded (k * size). */
    uint64_t n_fallbacks;               /* CUDA submissions redone on the
                                         * CPU. */
    uint64_t n_refused;                 /* Calls refused (bad arguments,
                                         * too many erasures). */
    uint64_t kernel_ns;                 /* CUDA device time of profiled
                                         * re-runs (config 'profile'). */
    uint64_t n_runtime_calls;           /* CUDA runtime calls the calling
                                         * threads made to submit (copies,
                                         * launches, event records and
                                         * waits, cudaSetDevice); divide
                                         * by n_encodes + n_decodes for
                                         * calls per submission.  0 on the
                                         * CPU backend. */
    uint64_t n_device_launches;         /* CUDA submissions launched by
                                         * the device ('device_launch'). */
};

void gpu_parity_get_stats(struct gpu_parity *, struct gpu_parity_stats *);

/* True if the CUDA backend was built in and a device is usable. */
bool gpu_parity_cuda_available(void);

/* ---- Groups of variable-length packets (for fec_encode/fec_decode). ----
 *
 * A group is k packets of up to GPU_PARITY_PKT_MAX_LEN bytes.  Each packet
 * is coded as a chunk made of its length (2 bytes, big-endian), its bytes
 * and zeros up to the group's chunk size: the longest packet plus 2,
 * rounded up to a multiple of w * packetsize.  The m parity chunks are the
 * parity packets; their common length is the chunk size, so a receiver
 * learns it from any parity packet.  Because the lengths are coded with
 * the bytes, a rebuilt packet comes back with its original length and
 * parity packets carry nothing else.  (GF8 code: rounded up to a multiple
 * of packetsize.)  Use a small packetsize (8 or 16) so
 * that the padding stays small. */

#define GPU_PARITY_PKT_MAX_LEN 65535

/* The chunk size (= parity packet length) of a group whose longest packet
 * is 'max_len' bytes, or 0 if 'max_len' is too long. */
size_t gpu_parity_pkt_chunk_size(const struct gpu_parity *, size_t max_len);

/* Encodes the group 'pkts[0 .. k)' (lengths 'lens') into 'parity[0 .. m)',
 * each with room for 'parity_room' bytes.  Sets '*chunk_size' to the
 * length of every parity packet.  GPU_PARITY_ERR_PACKET if a packet is
 * too long or the room too small. */
int gpu_parity_pkt_encode(struct gpu_parity *, const uint8_t *const *pkts,
                          const size_t *lens, uint8_t *const *parity,
                          size_t parity_room, size_t *chunk_size);

/* Rebuilds the missing data packets of a group.  'pkts[0 .. k+m)' are the
 * packets received, data packets first, then parity, NULL where lost;
 * 'lens' their lengths (parity packets: the chunk size, all equal).  For
 * every missing data packet i, 'out[i]' (room for chunk_size bytes) gets
 * its bytes and 'out_lens[i]' its length; 'out' entries of received
 * packets are not touched.  Needs at least k packets of the group:
 * otherwise GPU_PARITY_ERR_TOO_MANY_ERASURES.  GPU_PARITY_ERR_PACKET if
 * the parity lengths disagree or a rebuilt length is impossible. */
int gpu_parity_pkt_decode(struct gpu_parity *, const uint8_t *const *pkts,
                          const size_t *lens, uint8_t *const *out,
                          size_t *out_lens);

/* Writes packet 'pkt' ('len' bytes, 'len' + 2 <= 'chunk_size') as the
 * chunk the helpers above code: its length, its bytes, zeros. */
void gpu_parity_pkt_to_chunk(uint8_t *chunk, size_t chunk_size,
                             const uint8_t *pkt, size_t len);

/* The same chunk for a caller that wrote the packet's 'len' bytes in
 * place, at 'chunk' + 2 (GPU_PARITY_PKT_HLEN), saving a copy: adds its
 * length and the zeros. */
#define GPU_PARITY_PKT_HLEN 2
void gpu_parity_pkt_chunk_finish(uint8_t *chunk, size_t chunk_size,
                                 size_t len);

/* The length of the packet a (rebuilt) chunk of 'chunk_size' bytes holds,
 * its bytes at 'chunk' + 2; or GPU_PARITY_ERR_PACKET if the length cannot
 * be (corrupt or mismatched parity). */
int gpu_parity_pkt_from_chunk(const uint8_t *chunk, size_t chunk_size);

/* ---- Several groups in one call. ----
 *
 * Coding works on each block of w * packetsize bytes (GF8: packetsize) of
 * the chunks independently: block b of a parity chunk depends only on
 * block b of the data chunks.  So the chunks of several groups of one
 * code (k, m) can be coded (and rebuilt, if they lost the same chunks) in
 * one call by laying them side by side: chunk i of the call is chunk i
 * of the first group, then chunk i of the second, and so on, each group's
 * chunk size its own (a multiple of w * packetsize); every group's parity is then at the
 * same place in the call's parity chunks.  tests/test-parity.c checks
 * this against coding each group alone.
 *
 * Groups that lost different chunks are rebuilt in one call by segments:
 * each group is a segment of the call's chunks with its own erasure list
 * (so its own decoding matrix), and the call rebuilds every segment's
 * erased chunks.  Both codes, on every backend. */

/* A segment of a decode with segments: bytes [offset, offset + size) of
 * every chunk, which lost the chunks 'erasures[0 .. n_erasures)' (ids 0 ..
 * k+m-1, any order, at most m).  With 'data_only', only the erased data
 * chunks are rebuilt and the erased parity chunks' bytes are left as they
 * are (a packet decoder wants only its data back, and lists as erased the
 * survivors it did not copy). */
struct gpu_parity_segment {
    /* Multiples of w * packetsize (GF8: of packetsize); size nonzero. */
    size_t offset;
    size_t size;
    const int *erasures;
    size_t n_erasures;
    bool data_only;
};

/* Submits the rebuilding of 'n_segs' segments in one call (see
 * gpu_parity_decode_submit() for the asynchronous rules).  Every chunk,
 * data and parity, needs a buffer; segments are in ascending order of
 * offset, do not overlap and end within the batch's max_size; outside
 * them no byte is written.  Each segment is decoded as
 * gpu_parity_decode() decodes its bytes alone, with its erasures (no
 * erasures: nothing to do).  A bad segment (GPU_PARITY_ERR_SIZE,
 * GPU_PARITY_ERR_TOO_MANY_ERASURES, GPU_PARITY_ERR_ERASURE_ID) refuses the
 * whole submission before anything is written. */
int gpu_parity_decode_submit_segments(struct gpu_parity_batch *,
                                      struct gpu_stream *,
                                      uint8_t *const *data,
                                      uint8_t *const *parity,
                                      const struct gpu_parity_segment *segs,
                                      size_t n_segs);

/* The same, synchronously, through a pooled batch.  Safe from several
 * threads. */
int gpu_parity_decode_segments(struct gpu_parity *, uint8_t *const *data,
                               uint8_t *const *parity,
                               const struct gpu_parity_segment *segs,
                               size_t n_segs);

/* ---- Packet groups coded in one call, padded and delivered by the
 * coder. ----
 *
 * A packet encoder writes each packet's length and bytes into its chunk
 * (gpu_parity_pkt_chunk_head()) and nothing more: the zeros up to the
 * group's chunk size are the coder's to write, and on the CUDA backend
 * the device writes them while it takes the chunks in (reading only the
 * bytes the packets use), so the thread that gathers the packets never
 * touches the padding (half of what it would write for the Internet mix
 * in groups of 10).  The groups lie side by side from offset 0, group g's
 * chunks 'group_sizes[g]' bytes (gpu_parity_pkt_chunk_size()), so the
 * call codes sum(group_sizes) bytes of every chunk.
 *
 * 'parity_dst' (NULL, or n_groups * m pointers: group g's parity chunk j
 * at [g * m + j], each with room for group_sizes[g] bytes, any alignment)
 * names where each group's parity packets go (a switch's packet buffers).
 * Where every one lies in memory the device can write in place
 * (gpu_host_register()), the CUDA backend's device writes them there
 * itself and the parity chunks' host buffers are not written; otherwise
 * (and on the CPU backend, and in a fallback to the CPU) the parity is
 * coded into the host buffers and copied to the destinations when the
 * submission completes (gpu_parity_wait() or gpu_parity_poll()).  With
 * 'parity_dst' NULL the parity is in the host buffers, as with
 * gpu_parity_encode_submit().
 *
 * Refused before anything is written (and counted in n_refused):
 * GPU_PARITY_ERR_SIZE for a group size of 0 or not a multiple of the
 * coder's unit, or groups past the batch's max_size; GPU_PARITY_ERR_PACKET
 * for a chunk whose length does not fit its group's chunk size;
 * GPU_ERR_INVALID for a NULL buffer. */

/* Writes the length header of packet 'len' bytes long, whose bytes the
 * caller wrote (or writes) at 'chunk' + GPU_PARITY_PKT_HLEN. */
void gpu_parity_pkt_chunk_head(uint8_t *chunk, size_t len);

int gpu_parity_pkt_encode_submit(struct gpu_parity_batch *,
                                 struct gpu_stream *, uint8_t *const *data,
                                 uint8_t *const *parity,
                                 const size_t *group_sizes, size_t n_groups,
                                 uint8_t *const *parity_dst);

/* The same, synchronously, through a pooled batch (a packet encoder's
 * fallback to a CPU coder).  Safe from several threads. */
int gpu_parity_pkt_encode_groups(struct gpu_parity *, uint8_t *const *data,
                                 uint8_t *const *parity,
                                 const size_t *group_sizes, size_t n_groups,
                                 uint8_t *const *parity_dst);

/* Whether the last submission of the batch wrote its parity destinations
 * from the device (counted by fec_encode's show command). */
bool gpu_parity_batch_wrote_in_place(const struct gpu_parity_batch *);

#ifdef __cplusplus
}
#endif

#endif /* gpu-parity.h */
