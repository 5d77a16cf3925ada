/*
 * ovs-gpu plugin state shared by the parts of the plugin inside
 * ovs-vswitchd (config, appctl commands, and later the dpcls hook and
 * the service actions).
 */
#ifndef OVS_GPU_PLUGIN_H
#define OVS_GPU_PLUGIN_H 1

#include <stdbool.h>

#include "gpu_runtime/gpu-runtime.h"

/* The settings in effect, from the Open_vSwitch table's other_config. */
struct gpu_plugin_config {
    bool offload;                       /* other_config:gpu-offload. */
    struct gpu_device_choice device;    /* other_config:gpu-device. */
};

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
