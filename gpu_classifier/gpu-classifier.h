/*
 * ovs-gpu classifier: tables of masked rules looked up in batches, on the
 * CPU or on a CUDA GPU, with linear, tuple space (cuckoo) or Bloom-filtered
 * tuple space search (after GSwitch, Varvello et al., CoNEXT'14).
 *
 * The library knows nothing of Open vSwitch.  A rule is (value, mask,
 * priority, handle) over keys of 'n_words' 64-bit words; the caller
 * flattens whatever it classifies (a miniflow, a 5-tuple) into that dense
 * vector.  Rules that share a mask form a class (OVS calls it a subtable).
 *
 * Lookup semantics, chosen per table:
 *
 *   GPU_CLS_FIRST_MATCH: any rule that matches the key is an answer.  For
 *     megaflows, which never overlap, this is the one match, and the search
 *     stops at the first hit.
 *
 *   GPU_CLS_HIGHEST_PRIORITY: the matching rule with the highest priority;
 *     among equal priorities, the lowest handle.  For OpenFlow-style rule
 *     sets (ClassBench).
 *
 * A result is the matching rule's handle, or GPU_CLS_NO_MATCH.
 *
 * Concurrency contract
 * --------------------
 *
 * - Lookups: any number of threads may look up in one table at once, each
 *   through its own struct gpu_cls_batch (a batch is used by one thread at
 *   a time) or through gpu_cls_lookup().
 *
 * - Updates: gpu_cls_insert(), gpu_cls_remove() and gpu_cls_set_algorithm()
 *   may be called at any time from any thread, also while lookups run on
 *   others.  Writers are serialized by the table's lock.  A lookup submitted
 *   after an update returned sees the update.  A lookup already in flight
 *   sees the table as it was either before or after the update, never a
 *   mix of the two within one class (no torn slot is ever read).
 *
 *   CPU backend: a lookup holds the table's read lock for its whole batch,
 *   so a writer waits for running batches (a 64K batch is milliseconds).
 *
 *   CUDA backend: a writer changes only the host mirror and notes which
 *   slots, filter words and class records it touched.  The next submit
 *   copies just those to the device, in stream order after every lookup
 *   already submitted on any stream has finished and before its own
 *   kernel, so lookups in flight never see a half-applied update and
 *   writers never wait for the GPU.
 *
 * - Handles: a result may name a rule that was removed after the lookup
 *   was submitted.  The caller must keep what a handle stands for alive
 *   until lookups submitted before its removal have completed (OVS does
 *   this with RCU) and, if it needs certainty, re-check the match.
 *
 * - gpu_cls_destroy() must not race with any other call on the table, and
 *   all of the table's batches must be destroyed first.
 */
#ifndef GPU_CLASSIFIER_H
#define GPU_CLASSIFIER_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_runtime/gpu-runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_CLS_NO_MATCH UINT32_MAX
#define GPU_CLS_MAX_WORDS 84    /* OVS 3.1's struct flow is 84 u64 words. */

/* The largest batch one struct gpu_cls_batch accepts.  gpu_cls_lookup()
 * takes any number of keys and splits them. */
#define GPU_CLS_MAX_BATCH (1u << 20)

enum gpu_cls_semantics {
    GPU_CLS_FIRST_MATCH,
    GPU_CLS_HIGHEST_PRIORITY,
};

enum gpu_cls_algorithm {
    GPU_CLS_AUTO,               /* Pick per lookup from a cost model. */
    GPU_CLS_LINEAR,             /* Compare with every rule. */
    GPU_CLS_TUPLE,              /* Per class: mask, hash, 3 cuckoo probes. */
    GPU_CLS_BLOOM,              /* Per class: Bloom filter, then probes. */
};

enum gpu_cls_backend {
    GPU_CLS_BACKEND_DEFAULT,    /* CUDA if a device is usable, else CPU. */
    GPU_CLS_BACKEND_CPU,
    GPU_CLS_BACKEND_CUDA,
};

struct gpu_cls_config {
    unsigned int n_words;       /* Key width in u64 words, 1..84. */
    enum gpu_cls_semantics semantics;
    enum gpu_cls_algorithm algorithm;
    enum gpu_cls_backend backend;
    int device;                 /* CUDA device index (CUDA backend). */

    /* If nonzero, the most bytes the table's rule storage may take: device
     * memory on the CUDA backend, host memory on the CPU backend.  An insert
     * that would exceed it fails with GPU_ERR_DEVICE_NOMEM (CUDA) or
     * GPU_ERR_NOMEM (CPU) and leaves the table as it was, so callers can
     * test and act on exhaustion without exhausting the machine. */
    size_t mem_limit;
};

/* Initializes 'cfg' to defaults: FIRST_MATCH, AUTO, default backend,
 * device 0, no memory limit, with the given key width. */
void gpu_cls_config_init(struct gpu_cls_config *cfg, unsigned int n_words);

struct gpu_cls_table;
struct gpu_cls_batch;

/* Creates an empty table.  Returns GPU_OK, GPU_ERR_INVALID (bad config),
 * GPU_ERR_NO_DEVICE (CUDA asked for but not usable), GPU_ERR_NOMEM,
 * GPU_ERR_DEVICE_NOMEM or GPU_ERR_DEVICE. */
int gpu_cls_create(const struct gpu_cls_config *, struct gpu_cls_table **);
void gpu_cls_destroy(struct gpu_cls_table *);

/* Adds a rule.  'value' and 'mask' are n_words long; 'value' is masked
 * here, so bits outside 'mask' do not matter.  'handle' must not be
 * GPU_CLS_NO_MATCH.  Returns GPU_OK, GPU_ERR_EXISTS (a rule with the same
 * masked value and mask is present: the table is unchanged),
 * GPU_ERR_INVALID, GPU_ERR_NOMEM or GPU_ERR_DEVICE_NOMEM (see mem_limit;
 * the table is unchanged). */
int gpu_cls_insert(struct gpu_cls_table *, const uint64_t *value,
                   const uint64_t *mask, uint32_t priority, uint32_t handle);

/* Removes the rule with this masked value and mask.  Stores its handle in
 * '*handlep' if nonnull.  Returns GPU_OK, GPU_ERR_NOT_FOUND or
 * GPU_ERR_INVALID. */
int gpu_cls_remove(struct gpu_cls_table *, const uint64_t *value,
                   const uint64_t *mask, uint32_t *handlep);

/* Changes the search algorithm for later lookups; rules are kept (every
 * algorithm reads the same class tables, and Bloom filters are always
 * maintained). */
int gpu_cls_set_algorithm(struct gpu_cls_table *, enum gpu_cls_algorithm);

/* A lookup context: device buffers for up to 'max_keys' keys and results,
 * and the state of one submission.  Create one per thread, or one per
 * batch you want in flight at once. */
int gpu_cls_batch_create(struct gpu_cls_table *, size_t max_keys,
                         struct gpu_cls_batch **);
void gpu_cls_batch_destroy(struct gpu_cls_batch *);

/* Submits 'n_keys' keys for lookup.  'keys' is dense: key i is words
 * [i * key_words, (i + 1) * key_words).  'key_words' must equal the
 * table's n_words (a wider or narrower key is GPU_ERR_INVALID).  Results
 * land in 'results[0 .. n_keys)' once gpu_cls_wait() or gpu_cls_poll()
 * returns GPU_OK; until then neither buffer may be touched.
 *
 * On the CUDA backend the work is queued on 'stream' (NULL: the calling
 * thread's default per-thread stream) and this returns at once; keys and
 * results should come from gpu_host_alloc() so the copies are asynchronous
 * and run at full PCIe rate.  On the CPU backend the lookup runs here.
 *
 * n_keys == 0 is a no-op that returns GPU_OK (the batch is then complete).
 * Returns GPU_ERR_INVALID for n_keys > the batch's max_keys, a null buffer
 * or a wrong key width, GPU_ERR_BUSY if the batch's previous submission has
 * not been waited for, GPU_ERR_DEVICE* on CUDA failures. */
int gpu_cls_submit(struct gpu_cls_batch *, struct gpu_stream *,
                   const uint64_t *keys, size_t n_keys, size_t key_words,
                   uint32_t *results);

/* Like gpu_cls_submit() but 'keys' and 'results' are device memory on the
 * CUDA backend (host memory on the CPU backend): no copies, for callers
 * that build keys on the GPU and for kernel-only measurements. */
int gpu_cls_submit_device(struct gpu_cls_batch *, struct gpu_stream *,
                          const uint64_t *keys, size_t n_keys,
                          size_t key_words, uint32_t *results);

/* GPU_OK if the last submission is complete (or there was none),
 * GPU_ERR_BUSY if it is still running, or the error it met. */
int gpu_cls_poll(struct gpu_cls_batch *);
/* Blocks until the last submission completes; returns its status. */
int gpu_cls_wait(struct gpu_cls_batch *);

/* Synchronous lookup of any number of keys (split into batches as
 * needed).  Safe to call from several threads at once. */
int gpu_cls_lookup(struct gpu_cls_table *, const uint64_t *keys,
                   size_t n_keys, size_t key_words, uint32_t *results);

struct gpu_cls_stats {
    enum gpu_cls_backend backend;   /* CPU or CUDA, never DEFAULT. */
    enum gpu_cls_algorithm algorithm;  /* As configured (may be AUTO). */
    enum gpu_cls_algorithm chosen;  /* What AUTO picks now. */
    unsigned int n_words;
    uint64_t n_rules;
    uint64_t n_classes;
    uint64_t mem_bytes;             /* Rule storage, as counted for
                                     * mem_limit. */
    uint64_t n_grows;               /* Class tables doubled. */
    uint64_t n_rebuilds;            /* Classes rehashed after a cuckoo
                                     * insert failed. */
    uint64_t n_lookups;             /* Keys looked up. */
    uint64_t n_batches;
    uint64_t n_upload_bytes;        /* Update bytes copied to the device. */
};

void gpu_cls_get_stats(struct gpu_cls_table *, struct gpu_cls_stats *);

/* Names as used in other_config:gpu-classifier. */
const char *gpu_cls_algorithm_name(enum gpu_cls_algorithm);
/* Parses "auto", "linear", "tuple" or "bloom".  Returns GPU_OK or
 * GPU_ERR_INVALID. */
int gpu_cls_algorithm_parse(const char *, enum gpu_cls_algorithm *);
const char *gpu_cls_backend_name(enum gpu_cls_backend);

/* True if the CUDA backend was built in and a device is usable. */
bool gpu_cls_cuda_available(void);

#ifdef __cplusplus
}
#endif

#endif /* gpu-classifier.h */
