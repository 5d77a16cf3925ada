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
 * Internals shared by the RE core (re.c, re-codec.c) and its chunking
 * backends (re-cpu.c, re-cuda.cu).  Not part of the API.
 *
 * A backend ("provider", like OVS's struct netdev_class) owns whatever it
 * keeps beside the chunker (device tables, a batch's device buffers and
 * streams) and runs the chunking of a batch.
 */
#ifndef GPU_RE_PRIVATE_H
#define GPU_RE_PRIVATE_H 1

#include <stdbool.h>
#include <stdint.h>

#include "gpu_services/re/gpu-re.h"
#include "gpu_services/re/re-inline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The encoder on the device (gpu_re_encoder_batch_create()). ----
 *
 * The encoder's byte cache (a ring of 'size' bytes, addressed by stream
 * position) and its chunk table live in device memory; a batch's graph
 * chunks and hashes its payloads, inserts their chunks in the table,
 * encodes every payload at once (a warp each: its chunks looked up in
 * the table as it stands after the batch's insertions, verified byte for
 * byte against the ring or the batch's earlier payloads, extended both
 * ways, written as the shim's body), then appends the payloads to the
 * ring.  The host keeps the stream position and the epoch and writes
 * each shim's header.
 *
 * A table entry is one 64-bit word, the chunk hash's top 24 bits over a
 * 40-bit stream position (0: empty), GPU_RE_ENC_WAYS to a bucket (one
 * 64-byte line) picked by the hash's low bits.  Same-tag entries keep the
 * oldest position (atomicMin of the whole word: the tag is equal), as
 * the host's table keeps the oldest copy still cached; an entry older
 * than the ring's oldest byte is free.  A tag collision costs a miss,
 * never a wrong reference: every reference is compared byte for byte. */
#define GPU_RE_ENC_WAYS 8
#define GPU_RE_ENC_POS_BITS 40
#define GPU_RE_ENC_POS_MASK ((UINT64_C(1) << GPU_RE_ENC_POS_BITS) - 1)

/* What the kernels need of an encoder's device state (by value). */
struct gpu_re_enc_dev {
    uint8_t *ring;
    uint64_t size;              /* Ring bytes: the cache size. */
    unsigned long long *table;  /* (mask + 1) * GPU_RE_ENC_WAYS words. */
    uint64_t mask;
    uint32_t min_ref;
    uint32_t min_chunk;
};

/* One submission's encoding arguments. */
struct gpu_re_enc_args {
    uint64_t base;              /* Stream position of payload 'first'. */
    uint64_t low;               /* The ring's oldest byte before the
                                 * batch: older table entries are free. */
    uint32_t first;             /* Payloads before it go raw, uncached
                                 * (no START shim fitted them). */
    uint32_t start;             /* 1: payload 'first' starts the epoch
                                 * (all literal, the START flag). */
    uint32_t start_room;        /* Room for that START shim's body. */
    uint32_t clear;             /* 1: the table emptied first (a new
                                 * epoch), by the submission's graph. */
};

/* One payload's result: a shim's body at
 * bodies[(offsets[i] - offsets[0]) + GPU_RE_ENC_SLACK * i], or raw. */
struct gpu_re_enc_result {
    uint32_t body_len;
    uint16_t shim;              /* 1: a shim, else the payload goes raw. */
    uint16_t hits;              /* References in it. */
    uint32_t hit_bytes;
    uint32_t pad;
};

/* A body is at most the payload plus a literal's tag and length. */
#define GPU_RE_ENC_SLACK 8

GPU_RE_HD size_t
gpu_re_enc_body_slot(const uint32_t *offsets, size_t i)
{
    return (offsets[i] - offsets[0]) + GPU_RE_ENC_SLACK * i;
}

struct gpu_re_provider {
    const char *name;
    enum gpu_re_backend type;

    int (*init)(struct gpu_re_chunker *);
    void (*uninit)(struct gpu_re_chunker *);
    int (*batch_init)(struct gpu_re_batch *);
    void (*batch_uninit)(struct gpu_re_batch *);
    /* Starts chunking the batch's current input; 'again' re-runs the
     * kernels on the data already on the device. */
    int (*submit)(struct gpu_re_batch *, struct gpu_stream *, bool again);
    int (*wait)(struct gpu_re_batch *);
    /* 'wait' if the submission is done, else GPU_ERR_BUSY at once. */
    int (*poll)(struct gpu_re_batch *);

    /* The encoder's device state ('*devp', opaque), or NULL if this
     * backend cannot encode (the CPU's: the host encoder does). */
    int (*enc_init)(struct gpu_re_chunker *, uint64_t cache_size,
                    uint64_t n_buckets, uint32_t min_ref, void **devp);
    void (*enc_uninit)(struct gpu_re_chunker *, void *dev);
};

struct gpu_re_chunker {
    struct gpu_re_chunker_config cfg;
    struct gpu_re_kparams kp;
    struct gpu_re_tables tables;
    const struct gpu_re_provider *prov;
    void *pdata;
    char why[320];

    /* Updated atomically: batches run on many threads. */
    uint64_t n_batches, n_packets, n_bytes, n_fallbacks;
    uint64_t n_graph_launches;
    uint64_t n_device_launches, n_scheduler_launches;
};

struct gpu_re_batch {
    struct gpu_re_chunker *c;
    size_t max_packets, max_bytes, max_slots;
    bool want_fps;
    bool want_hashes;           /* GPU_RE_BATCH_HASHES. */
    void *pdata;

    /* The current submission. */
    const uint8_t *data;        /* Caller's pointer + offsets[0]. */
    const uint32_t *offsets;
    /* Payloads read where they are (gpu_re_batch_submit_in_place()):
     * payload i is at srcs[i] if that is not NULL, else in 'data'.  NULL
     * if none is. */
    const uint8_t *const *srcs;
    size_t n_packets, n_bytes;
    uint32_t min_len, max_len;  /* Over the packets, for the grouping. */
    bool busy;

    /* Results, by slot (pinned on CUDA). */
    uint16_t *ends;
    uint64_t *fps;
    struct gpu_re_hash *hashes;         /* By slot, as 'ends'. */
    uint32_t *payload_checks;           /* By packet. */

    /* A batch of an encoder on the device: its device state, the
     * submission's arguments, and its results (pinned). */
    void *enc_dev;
    struct gpu_re_enc_args enc_args;
    bool enc_failed;            /* The device did not encode it. */
    uint16_t enc_epoch;         /* The encoder's epoch at submission. */
    struct gpu_re_enc_result *enc_results;
    uint8_t *enc_bodies;
    /* An encoder on the host: gpu_re_encoder_prefetch_batch()'s 'ahead'
     * for gpu_re_encode_packet_result(). */
    size_t enc_ahead;
};

/* Where the current submission's payload 'i' is for the host to read. */
static inline const uint8_t *
gpu_re_batch_payload(const struct gpu_re_batch *b, size_t i)
{
    return (b->srcs && b->srcs[i] ? b->srcs[i]
            : b->data + (b->offsets[i] - b->offsets[0]));
}

/* gpu_re_batch_create_flags() for an encoder on the device ('enc_dev',
 * from the provider's enc_init). */
int gpu_re_batch_create_enc(struct gpu_re_chunker *, size_t max_packets,
                            size_t max_bytes, unsigned int flags,
                            void *enc_dev, struct gpu_re_batch **);

/* Chunks the batch's current input on the CPU into its results.  The
 * CPU backend, and the CUDA backend's fallback. */
void gpu_re_cpu_chunk_batch(struct gpu_re_batch *);

extern const struct gpu_re_provider gpu_re_cpu_provider;
#ifdef HAVE_CUDA
extern const struct gpu_re_provider gpu_re_cuda_provider;
#endif

#ifdef __cplusplus
}
#endif

#endif /* re-private.h */
