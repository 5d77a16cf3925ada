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
    size_t n_packets, n_bytes;
    uint32_t min_len, max_len;  /* Over the packets, for the grouping. */
    bool busy;

    /* Results, by slot (pinned on CUDA). */
    uint16_t *ends;
    uint64_t *fps;
    struct gpu_re_hash *hashes;         /* By slot, as 'ends'. */
    struct gpu_re_hash *payload_hashes; /* By packet. */
};

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
