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
};

/* Below this many subtables OVS's own lookup is cheaper than a round trip
 * to the GPU: about 26 ns per subtable probe per packet on a PMD core
 * (docs/PERFORMANCE.md) against a 14 to 18 us synchronous round trip for a
 * 32-packet burst, i.e. about 0.5 us per packet. */
#define GPU_DPCLS_MIN_SUBTABLES_DEFAULT 20

void gpu_dpcls_init(void);
void gpu_dpcls_set_policy(const struct gpu_dpcls_policy *);

/* Keys answered through the offload and validation mismatches, since
 * start-up, over all dpcls past and present. */
void gpu_dpcls_totals(uint64_t *gpu_lookups, uint64_t *mismatches);

#endif /* gpu-dpcls.h */
