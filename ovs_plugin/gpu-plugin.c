/*
 * ovs-gpu plugin for ovs-vswitchd: registration, other_config handling and
 * "ovs-appctl gpu/show".
 *
 * The plugin is linked into ovs-vswitchd and registers itself with the
 * ovs_plugin hooks (patches/0001) from a constructor.  Settings are read
 * from the Open_vSwitch table's other_config on each reconfiguration, like
 * OVS's own knobs: a bad value is refused with a warning that names the
 * key, the value and why, and the previous setting stays in effect.
 */
#include <config.h>

#include "ovs_plugin/gpu-plugin.h"

#include <inttypes.h>
#include <string.h>

#include "openvswitch/dynamic-string.h"
#include "openvswitch/vlog.h"
#include "ovs-plugin.h"
#include "smap.h"
#include "unixctl.h"
#include "util.h"

VLOG_DEFINE_THIS_MODULE(gpu_plugin);

#ifndef OVS_GPU_VERSION
#define OVS_GPU_VERSION "unknown"
#endif

static struct gpu_plugin_config config = {
    .offload = false,
    .device = { .use_cpu = false, .index = 0 },
};
static struct gpu_plugin_backend backend;

/* The raw values last seen, so that a bad value is reported once, when it
 * appears, and not on every reconfiguration while it stays. */
static char *seen_offload;
static char *seen_device;

const struct gpu_plugin_config *
gpu_plugin_get_config(void)
{
    return &config;
}

const struct gpu_plugin_backend *
gpu_plugin_get_backend(void)
{
    return &backend;
}

/* Chooses the backend for 'config': the selected CUDA device if there is
 * one, otherwise the CPU, with the reason.  A change is logged, except at
 * start-up ('quiet'), where "gpu/show" tells and where anything printed
 * before ovs-vswitchd detaches would reach its stderr. */
static void
gpu_plugin_choose_backend(bool quiet)
{
    struct gpu_plugin_backend new = { .cuda = false };
    const char *why = NULL;
    int n_devices = gpu_device_count(&why);

    if (config.device.use_cpu) {
        snprintf(new.why_cpu, sizeof new.why_cpu,
                 "other_config:gpu-device=cpu");
    } else if (!n_devices) {
        snprintf(new.why_cpu, sizeof new.why_cpu, "%s", why);
    } else if (gpu_device_query(config.device.index, &new.info)) {
        snprintf(new.why_cpu, sizeof new.why_cpu,
                 "CUDA device %d could not be queried", config.device.index);
    } else {
        new.cuda = true;
    }

    if (quiet) {
        VLOG_DBG("initial backend: %s", new.cuda ? new.info.name
                                                  : new.why_cpu);
    } else if (new.cuda != backend.cuda
               || (new.cuda && new.info.index != backend.info.index)) {
        if (new.cuda) {
            VLOG_INFO("using CUDA device %d (%s, compute capability %d.%d)",
                      new.info.index, new.info.name, new.info.cc_major,
                      new.info.cc_minor);
        } else {
            VLOG_INFO("using the CPU backend: %s", new.why_cpu);
        }
    }
    backend = new;
}

/* Returns true if 'value' differs from '*seenp', and remembers it. */
static bool
gpu_plugin_value_changed(char **seenp, const char *value)
{
    if (nullable_string_is_equal(*seenp, value)) {
        return false;
    }
    free(*seenp);
    *seenp = nullable_xstrdup(value);
    return true;
}

static void
gpu_plugin_set_config(const struct smap *other_config)
{
    const char *offload = smap_get(other_config, "gpu-offload");
    const char *device = smap_get(other_config, "gpu-device");
    char err[256];
    bool changed = false;

    if (gpu_plugin_value_changed(&seen_offload, offload)) {
        bool value;
        if (gpu_bool_parse(offload, false, &value, err, sizeof err)) {
            VLOG_WARN("other_config:gpu-offload: %s; keeping %s", err,
                      config.offload ? "true" : "false");
        } else if (value != config.offload) {
            config.offload = value;
            VLOG_INFO("GPU offload %s", value ? "enabled" : "disabled");
            changed = true;
        }
    }

    if (gpu_plugin_value_changed(&seen_device, device)) {
        struct gpu_device_choice choice;

        /* An unset key means device 0; if the machine has no device, the
         * backend chooser then says why the CPU is used.  A value the user
         * typed must name something that exists. */
        if (gpu_device_parse(device, &choice, err, sizeof err)
            || (device && gpu_device_check(&choice, err, sizeof err))) {
            char old[32];
            if (config.device.use_cpu) {
                snprintf(old, sizeof old, "cpu");
            } else {
                snprintf(old, sizeof old, "%d", config.device.index);
            }
            VLOG_WARN("other_config:gpu-device: %s; keeping %s", err, old);
        } else {
            config.device = choice;
            changed = true;
        }
    }

    if (changed) {
        gpu_plugin_choose_backend(false);
    }
}

static void
gpu_plugin_format_backend(struct ds *s)
{
    if (backend.cuda) {
        const struct gpu_device_info *info = &backend.info;
        ds_put_format(s, "  backend: cuda\n");
        ds_put_format(s, "  device: %d \"%s\"\n", info->index, info->name);
        ds_put_format(s, "  compute capability: %d.%d\n",
                      info->cc_major, info->cc_minor);
        ds_put_format(s, "  memory: %.1f GiB\n",
                      info->total_mem / (1024.0 * 1024 * 1024));
        ds_put_format(s, "  multiprocessors: %d\n", info->multiprocessors);
    } else {
        ds_put_format(s, "  backend: cpu (%s)\n", backend.why_cpu);
    }
}

static void
gpu_show_cmd(struct unixctl_conn *conn, int argc OVS_UNUSED,
             const char *argv[] OVS_UNUSED, void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    const char *why = NULL;
    int n_devices = gpu_device_count(&why);

    ds_put_format(&s, "ovs-gpu %s\n", OVS_GPU_VERSION);
    ds_put_format(&s, "  offload: %s\n",
                  config.offload ? "enabled" : "disabled");
    ds_put_format(&s, "  built with CUDA: %s\n",
                  gpu_runtime_has_cuda() ? "yes" : "no");
    ds_put_format(&s, "  CUDA devices: %d\n", n_devices);
    gpu_plugin_format_backend(&s);
    ds_put_cstr(&s, "config:\n");
    ds_put_format(&s, "  gpu-offload=%s\n",
                  config.offload ? "true" : "false");
    if (config.device.use_cpu) {
        ds_put_cstr(&s, "  gpu-device=cpu\n");
    } else {
        ds_put_format(&s, "  gpu-device=%d\n", config.device.index);
    }
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

static void
gpu_plugin_init(void)
{
    unixctl_command_register("gpu/show", "", 0, 0, gpu_show_cmd, NULL);
    gpu_plugin_choose_backend(true);
}

static void
gpu_plugin_exit(void)
{
    free(seen_offload);
    free(seen_device);
    seen_offload = seen_device = NULL;
}

static const struct ovs_plugin_class gpu_plugin_class = {
    .name = "ovs-gpu",
    .init = gpu_plugin_init,
    .set_config = gpu_plugin_set_config,
    .exit = gpu_plugin_exit,
};

OVS_CONSTRUCTOR(gpu_plugin_register) {
    ovs_plugin_register(&gpu_plugin_class);
}
