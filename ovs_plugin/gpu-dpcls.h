/*
 * The megaflow offload: ovs-gpu's dpcls provider (patches/0003).
 */
#ifndef OVS_GPU_DPCLS_H
#define OVS_GPU_DPCLS_H 1

#include <stdbool.h>
#include <stdint.h>

#include "gpu_classifier/gpu-classifier.h"

/* The policy the PMD threads read on every lookup.  Set from the main
 * thread on each reconfiguration. */
struct gpu_dpcls_policy {
    bool offload;               /* other_config:gpu-offload. */
    unsigned int min_subtables; /* other_config:gpu-dpcls-min-subtables. */
    enum gpu_cls_algorithm algorithm;   /* other_config:gpu-classifier. */
    bool validate;              /* other_config:gpu-validate. */
    bool cuda;                  /* Use the CUDA backend (else the CPU). */
    int device;                 /* CUDA device, if 'cuda'. */
    bool by_cost;               /* other_config:gpu-dpcls-policy=cost. */
    unsigned int inflight;      /* other_config:gpu-dpcls-inflight. */
    unsigned int max_hold_us;   /* other_config:gpu-max-hold-us. */
};

/* Below this many subtables a dpcls is never offloaded: OVS's own lookup
 * probes one hash table per subtable, about 26 ns each on a PMD core
 * (docs/PERFORMANCE.md), and with one or two that beats any offload.
 * Above it the "cost" policy measures both paths and picks the cheaper. */
#define GPU_DPCLS_MIN_SUBTABLES_DEFAULT 2

/* Classifier calls in flight per dpcls while bursts are held; 0 looks up
 * each burst synchronously, as before bursts were held. */
#define GPU_DPCLS_INFLIGHT_DEFAULT 2
#define GPU_DPCLS_INFLIGHT_MAX 8

/* The longest a burst's keys wait to be gathered with later bursts' into
 * one classifier call, beyond the calls already in flight; 0 sends every
 * burst in a call of its own. */
#define GPU_DPCLS_MAX_HOLD_US_DEFAULT 100
#define GPU_DPCLS_MAX_HOLD_US_MAX 10000

void gpu_dpcls_init(void);
void gpu_dpcls_set_policy(const struct gpu_dpcls_policy *);

/* Keys answered through the offload and validation mismatches, since
 * start-up, over all dpcls past and present. */
void gpu_dpcls_totals(uint64_t *gpu_lookups, uint64_t *mismatches);

#endif /* gpu-dpcls.h */
