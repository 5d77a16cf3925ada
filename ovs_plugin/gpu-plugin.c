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

#include <stdio.h>
#include <stdlib.h>

#include <inttypes.h>
#include <string.h>

#include "openvswitch/dynamic-string.h"
#include "openvswitch/vlog.h"
#include "ovs_plugin/gpu-actions.h"
#include "ovs_plugin/gpu-dpcls.h"
#include "ovs_plugin/gpu-fec-service.h"
#include "ovs_plugin/gpu-ids-service.h"
#include "ovs_plugin/gpu-re-service.h"
#include "ovs_plugin/gpu-index-service.h"
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
    .dpcls_min_subtables = GPU_DPCLS_MIN_SUBTABLES_DEFAULT,
    .classifier = GPU_CLS_AUTO,
    .validate = false,
    .dpcls_by_cost = true,
    .dpcls_inflight = GPU_DPCLS_INFLIGHT_DEFAULT,
    .max_hold_us = GPU_DPCLS_MAX_HOLD_US_DEFAULT,
};
static struct gpu_plugin_backend backend;

/* Defaults forced by GPU_PLUGIN_TEST_ENV, for OVS's testsuite. */
static struct smap forced = SMAP_INITIALIZER(&forced);

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
        if (!backend.cuda || backend.info.index != new.info.index) {
            gpu_device_warm_up(new.info.index);
        }
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

/* One other_config key.  'parse' checks a value (NULL: the key is unset)
 * and, if it is good, stores it in 'config'; it returns false and writes
 * the reason in 'err' if not.  'format' writes the value in effect. */
struct gpu_plugin_key {
    const char *name;
    bool (*parse)(const char *value, char *err, size_t err_size);
    void (*format)(struct ds *);
    char *seen;                 /* The raw value last seen. */
};

static bool
parse_offload(const char *value, char *err, size_t err_size)
{
    return !gpu_bool_parse(value, false, &config.offload, err, err_size);
}

static void
format_offload(struct ds *s)
{
    ds_put_cstr(s, config.offload ? "true" : "false");
}

static bool
parse_device(const char *value, char *err, size_t err_size)
{
    struct gpu_device_choice choice;

    /* An unset key means device 0; if the machine has none, the backend
     * chooser says why the CPU is used.  A value the user typed must name
     * something that exists. */
    if (gpu_device_parse(value, &choice, err, err_size)
        || (value && gpu_device_check(&choice, err, err_size))) {
        return false;
    }
    config.device = choice;
    return true;
}

static void
format_device(struct ds *s)
{
    if (config.device.use_cpu) {
        ds_put_cstr(s, "cpu");
    } else {
        ds_put_format(s, "%d", config.device.index);
    }
}

static bool
parse_min_subtables(const char *value, char *err, size_t err_size)
{
    return !gpu_uint_parse(value, GPU_DPCLS_MIN_SUBTABLES_DEFAULT, 1000000,
                           &config.dpcls_min_subtables, err, err_size);
}

static void
format_min_subtables(struct ds *s)
{
    ds_put_format(s, "%u", config.dpcls_min_subtables);
}

static bool
parse_classifier(const char *value, char *err, size_t err_size)
{
    enum gpu_cls_algorithm algorithm = GPU_CLS_AUTO;

    if (value && value[0] && gpu_cls_algorithm_parse(value, &algorithm)) {
        snprintf(err, err_size, "\"%s\" is not one of auto, linear, tuple "
                 "or bloom", value);
        return false;
    }
    config.classifier = algorithm;
    return true;
}

static void
format_classifier(struct ds *s)
{
    ds_put_cstr(s, gpu_cls_algorithm_name(config.classifier));
}

static bool
parse_validate(const char *value, char *err, size_t err_size)
{
    return !gpu_bool_parse(value, false, &config.validate, err, err_size);
}

static void
format_validate(struct ds *s)
{
    ds_put_cstr(s, config.validate ? "true" : "false");
}

static bool
parse_dpcls_policy(const char *value, char *err, size_t err_size)
{
    if (!value || !value[0] || !strcmp(value, "cost")) {
        config.dpcls_by_cost = true;
    } else if (!strcmp(value, "always")) {
        config.dpcls_by_cost = false;
    } else {
        snprintf(err, err_size, "\"%s\" is not \"cost\" or \"always\"",
                 value);
        return false;
    }
    return true;
}

static void
format_dpcls_policy(struct ds *s)
{
    ds_put_cstr(s, config.dpcls_by_cost ? "cost" : "always");
}

static bool
parse_dpcls_inflight(const char *value, char *err, size_t err_size)
{
    return !gpu_uint_parse(value, GPU_DPCLS_INFLIGHT_DEFAULT,
                           GPU_DPCLS_INFLIGHT_MAX, &config.dpcls_inflight,
                           err, err_size);
}

static void
format_dpcls_inflight(struct ds *s)
{
    ds_put_format(s, "%u", config.dpcls_inflight);
}

static bool
parse_max_hold_us(const char *value, char *err, size_t err_size)
{
    return !gpu_uint_parse(value, GPU_DPCLS_MAX_HOLD_US_DEFAULT,
                           GPU_DPCLS_MAX_HOLD_US_MAX, &config.max_hold_us,
                           err, err_size);
}

static void
format_max_hold_us(struct ds *s)
{
    ds_put_format(s, "%u", config.max_hold_us);
}

static struct gpu_plugin_key keys[] = {
    { "gpu-offload", parse_offload, format_offload, NULL },
    { "gpu-device", parse_device, format_device, NULL },
    { "gpu-dpcls-min-subtables", parse_min_subtables, format_min_subtables,
      NULL },
    { "gpu-classifier", parse_classifier, format_classifier, NULL },
    { "gpu-validate", parse_validate, format_validate, NULL },
    { "gpu-dpcls-policy", parse_dpcls_policy, format_dpcls_policy, NULL },
    { "gpu-dpcls-inflight", parse_dpcls_inflight, format_dpcls_inflight,
      NULL },
    { "gpu-max-hold-us", parse_max_hold_us, format_max_hold_us, NULL },
};

/* Hands the settings in effect to the parts of the plugin that use them. */
static void
gpu_plugin_publish(void)
{
    struct gpu_dpcls_policy policy = {
        .offload = config.offload,
        .min_subtables = config.dpcls_min_subtables,
        .algorithm = config.classifier,
        .validate = config.validate,
        .by_cost = config.dpcls_by_cost,
        .inflight = config.dpcls_inflight,
        .max_hold_us = config.max_hold_us,
        .cuda = backend.cuda,
        .device = backend.cuda ? backend.info.index : -1,
    };
    gpu_dpcls_set_policy(&policy);
    gpu_services_set_backend(backend.cuda,
                             backend.cuda ? backend.info.index : -1);
    gpu_services_set_max_hold_us(config.max_hold_us);
}

/* Applies 'other_config' (NULL at start-up, when only the forced defaults
 * apply).  For each key whose raw value changed: a good value takes
 * effect, a bad one is refused with one warning and the previous setting
 * stays.  Nothing is logged when 'quiet'. */
static void
gpu_plugin_apply(const struct smap *other_config, bool quiet)
{
    bool changed = false;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(keys); i++) {
        struct gpu_plugin_key *key = &keys[i];
        const char *value = other_config ? smap_get(other_config, key->name)
                                         : NULL;
        if (!value) {
            value = smap_get(&forced, key->name);
        }
        if (nullable_string_is_equal(key->seen, value)) {
            continue;
        }
        free(key->seen);
        key->seen = nullable_xstrdup(value);

        struct ds old = DS_EMPTY_INITIALIZER;
        char err[256];
        key->format(&old);
        if (!key->parse(value, err, sizeof err)) {
            VLOG_WARN("other_config:%s: %s; keeping %s", key->name, err,
                      ds_cstr(&old));
        } else {
            struct ds new = DS_EMPTY_INITIALIZER;
            key->format(&new);
            if (strcmp(ds_cstr(&old), ds_cstr(&new))) {
                changed = true;
                if (!quiet) {
                    VLOG_INFO("other_config:%s changed from %s to %s",
                              key->name, ds_cstr(&old), ds_cstr(&new));
                }
            }
            ds_destroy(&new);
        }
        ds_destroy(&old);
    }

    if (changed || quiet) {
        gpu_plugin_choose_backend(quiet);
        gpu_plugin_publish();
    }
}

static void
gpu_plugin_set_config(const struct smap *other_config)
{
    gpu_plugin_apply(other_config, false);
    gpu_ids_service_set_config(other_config);
    gpu_index_service_set_config(other_config);
}

static void
gpu_plugin_format_backend(struct ds *s)
{
    if (backend.cuda) {
        const struct gpu_device_info *info = &backend.info;
        ds_put_format(s, "  backend: cuda\n");
        ds_put_format(s, "  device: %d \"%s\"\n", info->index, info->name);
        if (!gpu_device_is_warm()) {
            ds_put_cstr(s, "  device state: starting (creating its context; "
                        "OVS's own lookup answers until then)\n");
        }
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
    struct gpu_service_totals totals;
    gpu_service_get_totals(&totals);
    ds_put_format(&s, "  service actions: %"PRIu64" batches, %"PRIu64
                  " packets, %"PRIu64" dropped\n", totals.n_batches,
                  totals.n_packets, totals.n_dropped);
    ds_put_format(&s, "  service call latency: %.2f us per batch\n",
                  totals.n_timed
                  ? totals.run_ns / 1e3 / totals.n_timed : 0.0);
    gpu_service_packets_format(&s);
    ds_put_cstr(&s, "config:\n");
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        ds_put_format(&s, "  %s=", keys[i].name);
        keys[i].format(&s);
        ds_put_char(&s, '\n');
    }
    if (!smap_is_empty(&forced)) {
        ds_put_format(&s, "  (defaults forced by %s)\n",
                      GPU_PLUGIN_TEST_ENV);
    }
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

/* Reads GPU_PLUGIN_TEST_ENV ("key=value,key=value") into 'forced'. */
static void
gpu_plugin_read_forced(void)
{
    const char *env = getenv(GPU_PLUGIN_TEST_ENV);
    char *copy, *save_ptr = NULL, *item;

    if (!env || !env[0]) {
        return;
    }
    copy = xstrdup(env);
    for (item = strtok_r(copy, ", ", &save_ptr); item;
         item = strtok_r(NULL, ", ", &save_ptr)) {
        char *eq = strchr(item, '=');
        if (eq) {
            *eq = '\0';
            smap_replace(&forced, item, eq + 1);
        }
    }
    free(copy);
}

static void
gpu_plugin_init(void)
{
    unixctl_command_register("gpu/show", "", 0, 0, gpu_show_cmd, NULL);
    gpu_dpcls_init();
    gpu_ids_service_init();
    gpu_re_service_init();
    gpu_index_service_init();
    gpu_fec_service_init();
    gpu_plugin_read_forced();
    gpu_plugin_apply(NULL, true);
}

static void
gpu_plugin_exit(void)
{
    const char *stats_file = getenv(GPU_PLUGIN_STATS_ENV);
    if (stats_file && stats_file[0]) {
        FILE *stream = fopen(stats_file, "a");
        if (stream) {
            uint64_t lookups, mismatches;
            gpu_dpcls_totals(&lookups, &mismatches);
            fprintf(stream, "offloaded %"PRIu64" mismatches %"PRIu64"\n",
                    lookups, mismatches);
            fclose(stream);
        }
    }

    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        free(keys[i].seen);
        keys[i].seen = NULL;
    }
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
