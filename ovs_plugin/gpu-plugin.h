/*
 * ovs-gpu plugin state shared by the parts of the plugin inside
 * ovs-vswitchd (config, appctl commands, and later the dpcls hook and
 * the service actions).
 */
#ifndef OVS_GPU_PLUGIN_H
#define OVS_GPU_PLUGIN_H 1

#include <stdbool.h>

#include "gpu_classifier/gpu-classifier.h"
#include "gpu_runtime/gpu-runtime.h"

/* The settings in effect, from the Open_vSwitch table's other_config. */
struct gpu_plugin_config {
    bool offload;                       /* gpu-offload. */
    struct gpu_device_choice device;    /* gpu-device. */
    unsigned int dpcls_min_subtables;   /* gpu-dpcls-min-subtables. */
    enum gpu_cls_algorithm classifier;  /* gpu-classifier. */
    bool validate;                      /* gpu-validate. */
    bool dpcls_by_cost;                 /* gpu-dpcls-policy=cost. */
    unsigned int dpcls_inflight;        /* gpu-dpcls-inflight. */
    unsigned int max_hold_us;           /* gpu-max-hold-us. */
};

/* The environment variable that makes OVS's testsuite run with settings
 * forced on, e.g. "gpu-offload=true,gpu-dpcls-min-subtables=0".  Its
 * values act as the defaults of the keys it names. */
#define GPU_PLUGIN_TEST_ENV "OVS_GPU_TEST_CONFIG"

/* If set, the file to which ovs-vswitchd appends, when it exits, how many
 * lookups the offload answered and how many validation mismatches it saw:
 * evidence that a test run with the offload forced on used it (autotest
 * deletes the logs of tests that pass). */
#define GPU_PLUGIN_STATS_ENV "OVS_GPU_TEST_STATS"

/* The backend chosen from the settings and what the machine has. */
struct gpu_plugin_backend {
    bool cuda;                          /* False: the CPU backend. */
    struct gpu_device_info info;        /* Valid if 'cuda'. */
    char why_cpu[256];                  /* Valid if !'cuda'. */
};

/* Snapshot of the settings and the backend, for the other plugin parts.
 * Only the main thread writes them. */
const struct gpu_plugin_config *gpu_plugin_get_config(void);
const struct gpu_plugin_backend *gpu_plugin_get_backend(void);

#endif /* gpu-plugin.h */
