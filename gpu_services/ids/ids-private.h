/*
 * Internals shared by the IDS core (ids.c), its rule compiler
 * (ids-rules.c) and its backends (ids-cpu.c, ids-cuda.cu).  Not part of
 * the API.
 *
 * The ruleset owns the compiled tables in host memory (ids-inline.h gives
 * their layout).  A backend ("provider", like OVS's struct netdev_class)
 * owns whatever it puts beside them (device copies, device buffers of a
 * batch) and runs matches.
 */
#ifndef GPU_IDS_PRIVATE_H
#define GPU_IDS_PRIVATE_H 1

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpu_services/ids/gpu-ids.h"
#include "gpu_services/ids/ids-inline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the tables do not need but display and tests do. */
struct ids_rule_meta {
    uint32_t line;
    char *msg;
    const char *action;         /* Static string. */
    bool partial;
    uint32_t anchor;            /* Index among the rule's contents. */
};

struct ids_option_count {
    char *name;
    uint32_t count;
};

struct gpu_ids_ruleset {
    struct gpu_ids_ruleset_stats stats;

    uint8_t class_map[256];
    uint32_t *trans;
    struct gpu_ids_dout *out;
    uint32_t *out_ids;
    size_t n_out_ids;
    struct gpu_ids_dpattern *patterns;
    uint8_t *pbytes;
    size_t n_pbytes;
    uint32_t *anchored;
    struct gpu_ids_drule *rules;
    struct ids_rule_meta *meta;
    struct gpu_ids_dcontent *contents;
    size_t n_contents;
    struct gpu_ids_dport *ports;
    size_t n_ports;

    struct ids_option_count *options;   /* Sorted, highest count first. */
    size_t n_options;

    struct gpu_ids_tables view;         /* Pointers into the above. */
};

struct gpu_ids_provider {
    const char *name;
    enum gpu_ids_backend type;

    int (*init)(struct gpu_ids_matcher *);
    void (*uninit)(struct gpu_ids_matcher *);
    int (*batch_init)(struct gpu_ids_batch *);
    void (*batch_uninit)(struct gpu_ids_batch *);
    /* Starts matching the batch's current input (see struct
     * gpu_ids_batch); 'again' asks for a kernel-only re-run of the data
     * already on the device. */
    int (*submit)(struct gpu_ids_batch *, struct gpu_stream *, bool again);
    int (*poll)(struct gpu_ids_batch *);
    int (*wait)(struct gpu_ids_batch *);
    /* Adds the backend's per-rule match counts to 'counts'. */
    int (*rule_counts)(struct gpu_ids_matcher *, uint64_t *counts);
    /* Allocates the batch's own host buffers into its 'bufs', or frees
     * them ('bufs.data' nonnull).  NULL: plain malloc() by ids.c. */
    int (*buffers_alloc)(struct gpu_ids_batch *);
    void (*buffers_free)(struct gpu_ids_batch *);
};

struct gpu_ids_matcher {
    const struct gpu_ids_ruleset *rs;
    struct gpu_ids_matcher_config cfg;
    const struct gpu_ids_provider *prov;
    void *pdata;

    /* Updated atomically: batches run on many threads. */
    uint64_t n_packets, n_bytes, n_batches, n_matched, n_hits, n_fallbacks;
    uint64_t scan_ns, check_ns, confirm_ns;
    uint64_t n_runtime_calls, n_completion_checks, n_set_clears;
    uint64_t n_device_launches, n_scheduler_launches;
    uint64_t *rule_counts;      /* CPU matches (and CUDA fallbacks). */

    /* Batches for gpu_ids_match(), reused. */
    pthread_mutex_t pool_mutex;
    struct gpu_ids_batch *pool;
};

struct gpu_ids_batch {
    struct gpu_ids_matcher *m;
    size_t max_packets, max_bytes;
    struct gpu_ids_batch *pool_next;
    void *pdata;

    /* The current submission. */
    const uint8_t *data;        /* Caller's pointer + offsets[0]. */
    /* gpu_ids_submit_in_place(): packet i's payload is at srcs[i] where
     * that is not NULL ('n_in_place' of them), not in 'data'. */
    const uint8_t *const *srcs;
    size_t n_in_place;
    /* Packets given as frames (GPU_IDS_HDR_FRAME) in 'hdrs'. */
    size_t n_frames;
    const uint32_t *offsets;
    const struct gpu_ids_pkt_hdr *hdrs;
    size_t n_packets;
    size_t n_bytes;
    struct gpu_ids_verdict *verdicts;
    bool busy;                  /* Submitted, not yet waited for. */
    bool again;                 /* Current submission is a re-run. */

    /* gpu_ids_batch_buffers(), once asked for (else all null). */
    struct gpu_ids_batch_buffers bufs;

    /* gpu_ids_resolve_frames()'s copy of an input, allocated at its
     * first use. */
    struct gpu_ids_batch_buffers resolved;

    /* CPU matching: pattern i was confirmed in packet stamps[i] == gen. */
    uint32_t *stamps;
    uint32_t gen;
};

/* Matches the batch's current input on the CPU into its verdicts,
 * counting into the matcher.  Used by the CPU backend and by the CUDA
 * backend's fallback.  Returns GPU_OK or GPU_ERR_NOMEM. */
int gpu_ids_cpu_match(struct gpu_ids_batch *);

/* Where packet 'i' of the batch's current input is: in place (srcs[i]) or
 * in 'data'. */
static inline const uint8_t *
gpu_ids_payload(const struct gpu_ids_batch *b, size_t i)
{
    return (b->srcs && b->srcs[i] ? b->srcs[i]
            : b->data + (b->offsets[i] - b->offsets[0]));
}

/* Makes the batch's current input one without frames, for a backend path
 * that does not parse them itself: every packet given as a frame becomes
 * the payload found in it (gpu_ids_frame_resolve()), copied with the
 * other packets' into the batch's 'resolved' buffers, which become the
 * input.  Returns GPU_OK or GPU_ERR_NOMEM. */
int gpu_ids_resolve_frames(struct gpu_ids_batch *);

/* Adds a finished batch's numbers to the matcher's stats. */
void gpu_ids_count_batch(struct gpu_ids_batch *, uint64_t n_matched,
                         uint64_t n_hits);

extern const struct gpu_ids_provider gpu_ids_cpu_provider;
#ifdef HAVE_CUDA
extern const struct gpu_ids_provider gpu_ids_cuda_provider;
/* Nonzero if the CUDA backend has a usable device. */
int gpu_ids_cuda_probe(void);
#endif

/* Rule compiler (ids-rules.c). */
int gpu_ids_compile(const char *text, const char *name,
                    const struct gpu_ids_load_options *,
                    struct gpu_ids_ruleset **, char *err, size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* ids-private.h */
