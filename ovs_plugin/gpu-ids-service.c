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

/* The gpu_ids service: gpu_ids(ruleset=NAME[,alert]).
 *
 * Rulesets come from OVSDB, other_config:gpu-ids-ruleset-NAME=PATH[,partial]
 * [,commented], so they survive restarts.  Each is loaded into a
 * gpu_ids_ruleset and a matcher on the plugin's backend (CUDA or CPU).  A
 * ruleset that fails to load is reported and the previous one, if any,
 * stays in service.
 *
 * The PMD threads find a ruleset by name in an RCU cmap; a reload replaces
 * the entry and frees the old one after a grace period, so the fast path
 * takes no lock of ours (the matcher's batch pool has a short one). */

#include <config.h>

#include "ovs_plugin/gpu-ids-service.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "cmap.h"
#include "hash.h"
#include "dp-packet.h"
#include "flow.h"
#include "openvswitch/list.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/poll-loop.h"
#include "openvswitch/shash.h"
#include "openvswitch/vlog.h"
#include "ovs-atomic.h"
#include "ovs-rcu.h"
#include "ovs-thread.h"
#include "smap.h"
#include "timeval.h"
#include "unixctl.h"
#include "util.h"

#include "gpu_runtime/gpu-runtime.h"
#include "gpu_services/ids/gpu-ids.h"
#include "ovs_plugin/gpu-actions.h"
#include "ovs_plugin/gpu-dpcls.h"

VLOG_DEFINE_THIS_MODULE(gpu_ids_service);

#define RULESET_KEY_PREFIX "gpu-ids-ruleset-"

/* Drop mode's defaults, measured in the switch on the H200 (docs/
 * PERFORMANCE.md, twenty-seventh and twenty-eighth sessions): three scans
 * in flight with held packets gathered 25 us, against one scan gathered
 * 100 us, cost one PMD thread 95-138 ns a packet against 139-176
 * (medians of pairs of runs), two about the same (56, 68 against 78,
 * 58), four 36-43 against 31-39 with the latency drop mode adds down
 * from 236-241 us to 201-223.  Four threads gained nothing from three
 * scans each (twelve out: 50 ns against 33-35), so the extra scans are
 * shared by the threads (struct gpu_service_calls_out). */
#define IDS_IN_FLIGHT_DEFAULT 3
#define IDS_HOLD_US_DEFAULT 25

/* A gather's buffer of frames or payloads (see struct ids_gather), and the
 * least of its bytes ",gather-kb=N" may have alert mode scan. */
#define IDS_GATHER_BYTES (4u << 20)
#define IDS_GATHER_KB_MIN 16

/* Alert mode's default gather-kb.  Its copies into gathers bounded only
 * by IDS_GATHER_PACKETS or IDS_GATHER_MAX_MS (~2 MB), four in turn,
 * streamed megabytes through one core's caches.  Scanned at 512 kB (the
 * four within its 2 MB of L2) the PMD's side of alert mode (nothing
 * scanned) cost 33-35 ns a packet locally against 45-51; on the H200 one
 * PMD thread paid 123 ns a packet against 139 (medians of eight and nine
 * runs, within their spread), with ~1,000 frames a scan rather than
 * ~3,700 (docs/PERFORMANCE.md, thirty-fourth session). */
#define IDS_GATHER_KB_DEFAULT 512

/* A loaded ruleset, as the PMD threads see it. */
struct ids_ruleset {
    struct cmap_node node;      /* In 'rulesets', by hash of 'name'. */
    char *name;
    char *config;               /* other_config value it was loaded from. */
    char *path;
    bool partial, commented;
    unsigned int in_flight;     /* ",in-flight=N": scans out at once, the
                                 * threads together, each thread one at
                                 * least (1 to GPU_SERVICE_GATHERS_MAX -
                                 * 1, a thread's most; see
                                 * gpu_service_gathers_room()). */
    unsigned int hold_us;       /* ",hold-us=N": how long drop mode
                                 * gathers held packets before their scan
                                 * starts, at most (0 to
                                 * GPU_SERVICE_HOLD_US_MAX;
                                 * IDS_HOLD_US_DEFAULT), and at most
                                 * gpu-max-hold-us. */
    unsigned int gather_kb;     /* ",gather-kb=N": alert mode's gathers
                                 * are scanned once they hold N kB of
                                 * frames, if a scan's room is free
                                 * (IDS_GATHER_KB_MIN to the buffer's
                                 * IDS_GATHER_BYTES;
                                 * IDS_GATHER_KB_DEFAULT). */
    bool device_launch;         /* ",launch=device", the default: on
                                 * CUDA a scheduler kernel launches each
                                 * scan, the PMD rings a doorbell. */
    long long int loaded_ms;    /* Wall clock. */

    struct gpu_ids_ruleset *rs;
    struct gpu_ids_matcher *matcher;
    /* Scans what a failed device call could not (NULL if 'matcher' is on
     * the CPU already, or the CPU one could not be made). */
    struct gpu_ids_matcher *cpu_matcher;

    atomic_uint64_t n_packets;  /* Packets scanned. */
    atomic_uint64_t n_bytes;    /* Payload bytes scanned. */
    atomic_uint64_t n_matched;  /* Packets that matched a rule. */
    atomic_uint64_t n_dropped;  /* ...and were dropped. */
    atomic_uint64_t n_alerts;   /* ...and only recorded ('alert'). */
    atomic_uint64_t n_errors;   /* Batches that failed: packets passed. */
    atomic_uint64_t n_faults;   /* Device calls failed: scanned on CPU. */
    atomic_uint64_t n_not_ip;   /* Packets with nothing to scan. */
    atomic_uint64_t n_gathered; /* In scans under way. */
    atomic_uint64_t n_held;     /* Drop mode: batches held for verdicts. */
    atomic_uint64_t held_us;    /* Drop mode: what each scan's oldest held
                                 * packet waited for its verdicts... */
    atomic_uint64_t n_held_scans;   /* ...summed over these scans. */
    atomic_uint64_t n_not_held; /* Drop mode: batches that could not be
                                 * held, scanned at once. */
    atomic_uint64_t n_in_place; /* Drop mode: packets the device read
                                 * where they were, not copied. */
    atomic_uint64_t n_frames;   /* Packets given whole to the matcher,
                                 * which parsed them... */
    atomic_uint64_t n_parsed;   /* ...and parsed by the thread. */
    struct gpu_service_calls_out scans_out;     /* All threads'. */

    /* One for 'rulesets', one per thread gathering alert-mode packets for
     * it (below), which may outlive its place in 'rulesets'. */
    struct ovs_refcount ref_cnt;
};

/* Loaded rulesets, for the PMD threads. */
static struct cmap rulesets = CMAP_INITIALIZER;

/* Guards changes to 'rulesets' and the main thread's state below. */
static struct ovs_mutex ids_mutex = OVS_MUTEX_INITIALIZER;

/* The other_config values seen, by ruleset name, loaded or not, so that a
 * file that failed to load is not retried on every database change. */
static struct shash seen_config OVS_GUARDED_BY(ids_mutex)
    = SHASH_INITIALIZER(&seen_config);

/* Packets that met a gpu_ids action whose ruleset is not loaded. */
static atomic_uint64_t n_unscanned = 0;

static struct ids_ruleset *
ids_ruleset_find(const char *name)
{
    struct ids_ruleset *r;

    CMAP_FOR_EACH_WITH_HASH (r, node, hash_string(name, 0), &rulesets) {
        if (!strcmp(r->name, name)) {
            return r;
        }
    }
    return NULL;
}

static void
ids_ruleset_destroy(struct ids_ruleset *r)
{
    /* (A ruleset in service is released with ids_ruleset_unref().) */
    if (r) {
        gpu_ids_matcher_destroy(r->matcher);
        gpu_ids_matcher_destroy(r->cpu_matcher);
        gpu_ids_ruleset_destroy(r->rs);
        free(r->name);
        free(r->config);
        free(r->path);
        free(r);
    }
}

static void
ids_ruleset_unref(struct ids_ruleset *r)
{
    if (r && ovs_refcount_unref(&r->ref_cnt) == 1) {
        ids_ruleset_destroy(r);
    }
}

/* Parses "PATH[,partial][,commented][,launch=host|device][,in-flight=N]
 * [,hold-us=N][,gather-kb=N]" into 'r'. */
static char *
ids_parse_config(const char *value, struct ids_ruleset *r)
{
    char *copy = xstrdup(value);
    char *save_ptr = NULL;
    char *item = strtok_r(copy, ",", &save_ptr);
    char *error = NULL;

    if (!item || item[0] != '/') {
        error = xasprintf("\"%s\": expected an absolute path to a rule "
                          "file, then optionally \",partial\", "
                          "\",commented\", \",launch=host|device\", "
                          "\",in-flight=N\", \",hold-us=N\" and "
                          "\",gather-kb=N\"",
                          value);
        goto out;
    }
    r->path = xstrdup(item);
    while ((item = strtok_r(NULL, ",", &save_ptr))) {
        if (!strncmp(item, "launch=", 7)) {
            if (strcmp(item + 7, "host") && strcmp(item + 7, "device")) {
                error = xasprintf("\"%s\": launch must be \"host\" or "
                                  "\"device\", not \"%s\"", value,
                                  item + 7);
                goto out;
            }
            r->device_launch = !strcmp(item + 7, "device");
            continue;
        }
        char *eq = strchr(item, '=');

        if (!strncmp(item, "gather-kb=", 10)) {
            unsigned int kb;

            if (!str_to_uint(eq + 1, 10, &kb) || kb < IDS_GATHER_KB_MIN
                || kb > IDS_GATHER_BYTES / 1024) {
                error = xasprintf("\"%s\": gather-kb must be %u to %u, "
                                  "not \"%s\"", value, IDS_GATHER_KB_MIN,
                                  IDS_GATHER_BYTES / 1024, eq + 1);
                goto out;
            }
            r->gather_kb = kb;
            continue;
        }
        if (eq) {
            char *key = xmemdup0(item, eq - item);
            char *option_error;
            bool is_hold = gpu_service_parse_hold_option(key, eq + 1,
                                                         &r->in_flight,
                                                         &r->hold_us,
                                                         &option_error);

            free(key);
            if (option_error) {
                error = xasprintf("\"%s\": %s", value, option_error);
                free(option_error);
                goto out;
            }
            if (is_hold) {
                continue;
            }
        }

        bool *flag = (!strncmp(item, "partial", 7) ? &r->partial
                      : !strncmp(item, "commented", 9) ? &r->commented
                      : NULL);
        const char *rest = flag ? item + strcspn(item, "=") : NULL;

        if (!flag || (*rest && strcmp(rest, "=true") && strcmp(rest, "=false"))
            || (!*rest && strcmp(item, "partial")
                && strcmp(item, "commented"))) {
            error = xasprintf("\"%s\": unknown option \"%s\" (known: "
                              "partial, commented, launch, in-flight, "
                              "hold-us, gather-kb)",
                              value, item);
            goto out;
        }
        *flag = strcmp(rest, "=false") != 0;
    }
out:
    free(copy);
    return error;
}

/* Loads ruleset 'name' from other_config 'value'.  Returns it, or NULL
 * with a message in '*errorp'. */
static struct ids_ruleset *
ids_ruleset_load(const char *name, const char *value, char **errorp)
    OVS_REQUIRES(ids_mutex)
{
    struct ids_ruleset *r = xzalloc(sizeof *r);
    struct gpu_ids_load_options opts;
    struct gpu_ids_matcher_config mcfg;
    char err[256];
    int cuda_device;
    bool use_cuda = gpu_services_get_backend(&cuda_device);
    int error;

    r->name = xstrdup(name);
    r->config = xstrdup(value);
    /* Measured in the switch (docs/PERFORMANCE.md, twenty-fourth
     * session): a host launch of the scan's graph costs drop mode's PMD
     * ~30-70 ns a packet more than the doorbell. */
    r->device_launch = true;
    r->in_flight = IDS_IN_FLIGHT_DEFAULT;
    r->hold_us = IDS_HOLD_US_DEFAULT;
    r->gather_kb = IDS_GATHER_KB_DEFAULT;
    *errorp = ids_parse_config(value, r);
    if (*errorp) {
        ids_ruleset_destroy(r);
        return NULL;
    }

    memset(&opts, 0, sizeof opts);
    opts.partial = r->partial;
    opts.commented = r->commented;
    error = gpu_ids_ruleset_load_file(r->path, &opts, &r->rs, err,
                                      sizeof err);
    if (error) {
        *errorp = xstrdup(err);     /* It names the file. */
        ids_ruleset_destroy(r);
        return NULL;
    }

    gpu_ids_matcher_config_init(&mcfg);
    mcfg.backend = use_cuda ? GPU_IDS_BACKEND_CUDA : GPU_IDS_BACKEND_CPU;
    mcfg.device = cuda_device;
    mcfg.remap = true;
    mcfg.device_launch = r->device_launch;
    error = gpu_ids_matcher_create(r->rs, &mcfg, &r->matcher);
    if (error && use_cuda) {
        /* The device refused (memory, say): the CPU still does the job. */
        VLOG_WARN("ruleset %s: CUDA matcher failed (%s); using the CPU",
                  name, gpu_status_string(error));
        mcfg.backend = GPU_IDS_BACKEND_CPU;
        error = gpu_ids_matcher_create(r->rs, &mcfg, &r->matcher);
    }
    if (error) {
        *errorp = xasprintf("%s: matcher: %s", r->path,
                            gpu_status_string(error));
        ids_ruleset_destroy(r);
        return NULL;
    }
    if (gpu_ids_matcher_backend(r->matcher) != GPU_IDS_BACKEND_CPU) {
        /* So that drop mode's held packets go to the device in place. */
        gpu_service_register_packet_memory(cuda_device);
        mcfg.backend = GPU_IDS_BACKEND_CPU;
        error = gpu_ids_matcher_create(r->rs, &mcfg, &r->cpu_matcher);
        if (error) {
            VLOG_WARN("ruleset %s: no CPU matcher for device faults (%s): "
                      "a batch the device fails passes unscanned", name,
                      gpu_status_string(error));
        }
    }
    r->loaded_ms = time_wall_msec();
    ovs_refcount_init(&r->ref_cnt);
    return r;
}

/* Puts 'r' in service in place of any ruleset of the same name. */
static void
ids_ruleset_install(struct ids_ruleset *r)
    OVS_REQUIRES(ids_mutex)
{
    struct ids_ruleset *old = ids_ruleset_find(r->name);
    uint32_t hash = hash_string(r->name, 0);

    if (old) {
        cmap_replace(&rulesets, &old->node, &r->node, hash);
        ovsrcu_postpone(ids_ruleset_unref, old);
    } else {
        cmap_insert(&rulesets, &r->node, hash);
    }
}

static void
ids_ruleset_log_loaded(const struct ids_ruleset *r, const char *verb)
{
    struct gpu_ids_ruleset_stats st;

    gpu_ids_ruleset_get_stats(r->rs, &st);
    VLOG_INFO("ruleset %s %s from %s: %"PRIu32" rules loaded (%"PRIu32
              " on contents alone), %"PRIu32" skipped; %s backend",
              r->name, verb, r->path, st.n_loaded, st.n_partial,
              st.n_skipped,
              gpu_ids_backend_name(gpu_ids_matcher_backend(r->matcher)));
}

void
gpu_ids_service_set_config(const struct smap *other_config)
{
    struct smap_node *node;
    struct shash_node *snode;

    ovs_mutex_lock(&ids_mutex);
    /* New and changed rulesets. */
    SMAP_FOR_EACH (node, other_config) {
        const char *name;
        char *error;

        if (strncmp(node->key, RULESET_KEY_PREFIX,
                    strlen(RULESET_KEY_PREFIX))) {
            continue;
        }
        name = node->key + strlen(RULESET_KEY_PREFIX);
        const char *seen = shash_find_data(&seen_config, name);
        if (seen && !strcmp(seen, node->value)) {
            continue;
        }
        free(shash_replace(&seen_config, name, xstrdup(node->value)));

        if (!name[0]) {
            VLOG_WARN("other_config:%s: the ruleset needs a name after "
                      "\"%s\"", node->key, RULESET_KEY_PREFIX);
            continue;
        }
        struct ids_ruleset *r = ids_ruleset_load(name, node->value, &error);
        if (!r) {
            struct ids_ruleset *old = ids_ruleset_find(name);
            VLOG_WARN("other_config:%s: %s; %s", node->key, error,
                      old ? "keeping the previous ruleset"
                          : "the ruleset is not loaded");
            free(error);
            continue;
        }
        ids_ruleset_log_loaded(r, seen ? "reloaded" : "loaded");
        ids_ruleset_install(r);
    }
    /* Removed rulesets. */
    SHASH_FOR_EACH_SAFE (snode, &seen_config) {
        char *key = xasprintf(RULESET_KEY_PREFIX "%s", snode->name);
        if (!smap_get(other_config, key)) {
            struct ids_ruleset *r = ids_ruleset_find(snode->name);
            if (r) {
                cmap_remove(&rulesets, &r->node, hash_string(r->name, 0));
                ovsrcu_postpone(ids_ruleset_unref, r);
                VLOG_INFO("ruleset %s removed", snode->name);
            }
            free(snode->data);
            shash_delete(&seen_config, snode);
        }
        free(key);
    }
    ovs_mutex_unlock(&ids_mutex);
}

/* ------------------------------------------------------------ The action. */

static const char *const ids_keys[] = { "ruleset=", "alert", NULL };
enum { IDS_KEY_RULESET, IDS_KEY_ALERT };

static char *
ids_check(const char *args)
{
    const char *values[ARRAY_SIZE(ids_keys)];
    char buf[GPU_SERVICE_ARGS_MAX + 1];
    char *error = gpu_service_args_split(args, ids_keys, values, buf,
                                         sizeof buf);
    if (!error && !values[IDS_KEY_RULESET]) {
        error = xstrdup("gpu_ids needs ruleset=NAME");
    }
    if (!error) {
        ovs_mutex_lock(&ids_mutex);
        if (!ids_ruleset_find(values[IDS_KEY_RULESET])) {
            /* Allowed: the ruleset may be configured after the flow. */
            VLOG_WARN("gpu_ids: ruleset %s is not loaded yet (set "
                      "other_config:" RULESET_KEY_PREFIX "%s); until it is, "
                      "packets pass unscanned", values[IDS_KEY_RULESET],
                      values[IDS_KEY_RULESET]);
        }
        ovs_mutex_unlock(&ids_mutex);
    }
    return error;
}

/* What an alert line says of a packet, copied out of it so that alerts of
 * gathered packets (below) can be logged after the packet has gone. */
struct ids_alert_info {
    bool is_ip;
    int family;                 /* AF_INET or AF_INET6. */
    uint8_t ip_proto;
    uint16_t sport, dport;
    uint8_t src[16], dst[16];
};

/* Whether the packet of 'info' and verdict 'v' is IP: the matcher says
 * for a packet it parsed (and then 'info' is left alone unless it
 * matched: ids_gather_frames_info()), 'info' for one parsed here. */
static bool
ids_is_ip(const struct ids_alert_info *info, const struct gpu_ids_verdict *v)
{
    return (v->flags & GPU_IDS_HDR_PARSED ? (v->flags & GPU_IDS_HDR_IP) != 0
            : info->is_ip);
}

/* Fills 'info' from a packet's 'frame' and its parse 'p'. */
static void
ids_alert_info_init(struct ids_alert_info *info, const uint8_t *frame,
                    const struct gpu_frame_l4 *p)
{
    const uint8_t *l3 = frame + p->l3_ofs;

    memset(info, 0, sizeof *info);
    info->is_ip = p->is_ip;
    info->ip_proto = p->ip_proto;
    info->sport = p->sport;
    info->dport = p->dport;
    if (!p->is_ip) {
        return;
    }
    if (p->is_ipv6) {
        info->family = AF_INET6;
        memcpy(info->src, l3 + 8, 16);
        memcpy(info->dst, l3 + 24, 16);
    } else {
        info->family = AF_INET;
        memcpy(info->src, l3 + 12, 4);
        memcpy(info->dst, l3 + 16, 4);
    }
}

/* The same, for 'packet' as it is now. */
static void
ids_alert_info_of_packet(struct ids_alert_info *info,
                         const struct dp_packet *packet)
{
    struct gpu_frame_l4 l4;

    gpu_service_parse_frame(packet, &l4);
    ids_alert_info_init(info, dp_packet_data(packet), &l4);
}

/* Logs an alert, rate-limited.  Returns false if the rate limit dropped
 * it. */
static bool
ids_log_alert(const struct ids_ruleset *r, const struct ids_alert_info *a,
              const struct gpu_ids_verdict *v, bool dropped)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(10, 50);
    struct gpu_ids_rule_info info;
    char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];

    if (VLOG_DROP_WARN(&rl)) {
        return false;
    }
    if (!gpu_ids_rule_get(r->rs, v->rule, &info)) {
        info.msg = "";
    }
    inet_ntop(a->family, a->src, src, sizeof src);
    inet_ntop(a->family, a->dst, dst, sizeof dst);
    VLOG_WARN("gpu_ids %s: sid %"PRIu32" \"%s\": proto %u %s.%u > %s.%u "
              "(%s)", r->name, v->sid, info.msg, a->ip_proto, src, a->sport,
              dst, a->dport, dropped ? "dropped" : "alert");
    return true;
}

/* Counts one scanned run of packets and logs its alerts.  A matching
 * packet is dropped if 'out' is nonnull (where its verdict is set) or if
 * 'dropping' says so (held packets, whose verdicts are applied later). */
static void
ids_account(struct ids_ruleset *r, size_t n,
            const struct ids_alert_info *info,
            const struct gpu_ids_verdict *verdicts, uint64_t n_bytes,
            const bool *dropping, enum gpu_service_verdict *out)
{
    uint64_t n_not_ip = 0, n_matched = 0, n_dropped = 0;
    /* Once the rate limit drops an alert of this run, the rest are not
     * offered to it: its check takes a mutex that every PMD thread
     * shares, per matching packet, and a run may hold thousands.  The
     * counters below count every alert. */
    bool logging = true;

    for (size_t i = 0; i < n; i++) {
        if (!ids_is_ip(&info[i], &verdicts[i])) {
            n_not_ip++;
            continue;
        }
        if (!verdicts[i].n_matches) {
            continue;
        }
        n_matched++;
        bool drop = out || (dropping && dropping[i]);
        if (out) {
            out[i] = GPU_SERVICE_DROP;
        }
        n_dropped += drop;
        if (logging) {
            logging = ids_log_alert(r, &info[i], &verdicts[i], drop);
        }
    }
    gpu_counter_add(&r->n_packets, n - n_not_ip);
    gpu_counter_add(&r->n_bytes, n_bytes);
    gpu_counter_add(&r->n_not_ip, n_not_ip);
    gpu_counter_add(&r->n_matched, n_matched);
    gpu_counter_add(&r->n_dropped, n_dropped);
    gpu_counter_add(&r->n_alerts, n_matched - n_dropped);
}

/* Each thread gathers the payloads of many datapath batches and scans
 * them in one call while the next ones gather.  The GPU needs hundreds
 * of packets per call to pay for its round trip (70-110 us for 32 to
 * 1,024 packets on the H200); the CPU backend loses nothing by it.
 *
 * Alert mode does not need a packet's verdict before the packet goes on:
 * alerts are logged and counted when the scan completes, at most about
 * IDS_GATHER_MAX_MS after the packet went on (the PMD loop's timer hook
 * submits what is gathered when it is that old, also when traffic
 * stops).  A gather holding the ruleset's gather-kb of frames is
 * submitted once fewer than its in-flight scans are out, so that the
 * buffers the copies write stay in the thread's caches; one that cannot
 * be yet goes on gathering.
 *
 * Drop mode does: it holds each datapath batch (struct ids_held, in the
 * thread's FIFO, with a copy of the actions that follow gpu_ids and of
 * the flow) until the scan of the gather its payloads went to is done,
 * then, from the PMD loop's per-iteration 'poll' hook, deletes the
 * matching packets and sends the rest on along the saved actions, oldest
 * batch first, so packets keep their order.  A gather with held packets
 * is submitted as soon as fewer than the ruleset's in-flight scans
 * (IDS_IN_FLIGHT_DEFAULT) are out and its oldest packet waited the
 * ruleset's hold-us (IDS_HOLD_US_DEFAULT, at most gpu-max-hold-us), or
 * the thread received nothing (no more packets to gather with), or it
 * is nearly full; so with one scan in flight a held packet waits at most
 * about hold-us plus two scans, and with more, about hold-us plus one if
 * the device runs them side by side (its launch does).  The PMD thread
 * waits for the device only when every gather is full, or when it
 * reloads or exits.  A batch that cannot be held (the caller keeps its
 * packets, or gpu_ids is nested in clone or sample, where the datapath
 * does not say what follows) first sends on everything the thread holds,
 * waiting for it, then is scanned at once, and is counted. */
#define IDS_GATHER_PACKETS 4096
#define IDS_GATHER_MAX_MS 2

/* A datapath batch held in drop mode until its verdicts are in. */
struct ids_held {
    struct gpu_service_held held;   /* The packets and where they go. */
    uint64_t gen;                   /* The gather its payloads are in... */
    size_t first;                   /* ...from this packet on. */
    uint32_t drop;                  /* Bit i: packet i matched a rule (valid
                                     * once 'held.ready'). */
    bool drop_matched;              /* Drop mode; else alert mode held
                                     * (GPU_KNOB_IDS_ALERT_HOLD). */
};
/* As struct gpu_service_holder_class's 'held_size' requires. */
BUILD_ASSERT_DECL(offsetof(struct ids_held, held) == 0);
BUILD_ASSERT_DECL(NETDEV_MAX_BURST <= 32);

struct ids_gather {
    struct ids_ruleset *r;          /* Referenced, or NULL. */
    struct gpu_ids_batch *batch;    /* On r's matcher. */

    /* The batch's own buffers (gpu_ids_batch_buffers()), while 'batch'
     * is: on CUDA, pinned (a copy to or from pageable memory would make
     * the submit wait for the scan) and laid out so that one copy moves
     * the gather in and one its verdicts out, each runtime call costing
     * the thread microseconds. */
    uint8_t *data;                  /* IDS_GATHER_BYTES. */
    uint32_t *offsets;              /* IDS_GATHER_PACKETS + 1. */
    struct gpu_ids_pkt_hdr *hdrs;   /* IDS_GATHER_PACKETS. */
    struct gpu_ids_verdict *verdicts;   /* IDS_GATHER_PACKETS. */

    struct ids_alert_info info[IDS_GATHER_PACKETS];
    bool dropping[IDS_GATHER_PACKETS];  /* Matched means dropped. */
    /* Held packets' payloads the device reads where they are (else NULL:
     * copied into 'data'), 'n_in_place' of them: their packets wait for
     * the scan, so their mbufs cannot be reused before it. */
    const uint8_t *srcs[IDS_GATHER_PACKETS];
    size_t n_in_place;
    /* Counted into the ruleset's counters when the scan completes, not a
     * batch at a time: each locked add to a line that every PMD thread
     * using the ruleset writes costs the thread a wait (see 'totals' in
     * gpu-actions.c). */
    size_t n_frames;                /* Packets given whole (n_frames). */
    size_t n_held;                  /* Held batches (n_held). */
    size_t n_submitted;             /* Added to n_gathered when the scan
                                     * started. */
    bool null_scan;             /* Started with "ids-null-scan": no device
                                 * call to poll or wait for. */
    size_t n;
    size_t prefetched;              /* Bytes of 'data' asked for so far
                                     * (ids_gather_prefetch()). */
    uint64_t n_payload_bytes;       /* Of the packets parsed here. */
    size_t n_dropping;              /* Packets of held batches (drop
                                     * mode's, or alert mode's held). */
    /* When its first packet, and its first held packet, came
     * (gpu_service_now_us(): one clock read serves both limits, and a
     * read costs the PMD tens of nanoseconds). */
    long long int first_us;
    long long int first_held_us;
    uint64_t gen;                   /* Of its current filling. */
    struct ids_gatherer *gt;        /* Its owner. */
};

/* A thread's gathers: one filling while the others are scanned (as
 * many as the ruleset's in-flight). */
struct ids_gatherer {
    struct ids_gather slots[GPU_SERVICE_GATHERS_MAX];
    struct gpu_service_gathers gathers;     /* Over 'slots'. */
    uint64_t gen;                   /* The last gather's 'gen'. */

    /* Drop mode's held batches, oldest first.  Their gathers are scanned
     * in the order they were filled, so they become ready in order. */
    struct gpu_service_holder holder;
};

static pthread_once_t gatherer_once = PTHREAD_ONCE_INIT;
static pthread_key_t gatherer_key;

/* Scans on the CPU what the device could not ('why' is its error), so that
 * nothing goes on unchecked; counts and logs it.  Returns the CPU scan's
 * status, or 'why' if there is no CPU matcher. */
static int
ids_match_on_cpu(struct ids_ruleset *r, int why, const uint8_t *data,
                 const uint32_t *offsets, const struct gpu_ids_pkt_hdr *hdrs,
                 size_t n, struct gpu_ids_verdict *verdicts)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    struct gpu_ids_matcher *cpu = (r->cpu_matcher ? r->cpu_matcher
                                   : gpu_ids_matcher_backend(r->matcher)
                                     == GPU_IDS_BACKEND_CPU ? r->matcher
                                   : NULL);

    if (!cpu) {
        return why;
    }
    gpu_counter_add(&r->n_faults, 1);
    VLOG_WARN_RL(&rl, "gpu_ids %s: device scan failed (%s); %"PRIuSIZE
                 " packets scanned on the CPU", r->name,
                 gpu_status_string(why), n);
    return gpu_ids_match(cpu, data, offsets, hdrs, n, verdicts);
}

/* The held batch after 'h' (NULL: from the thread's oldest) whose
 * payloads are in 'g', or NULL if there is none.  Held batches are in the
 * order they were gathered, so those of 'g' are together. */
static struct ids_held *
ids_gather_next_held(const struct ids_gather *g, const struct ids_held *h)
{
    const struct ovs_list *list = &g->gt->holder.held;
    const struct ovs_list *node;

    if (!g->n_dropping) {
        return NULL;
    }
    for (node = h ? h->held.node.next : list->next; node != list;
         node = node->next) {
        struct ids_held *next = CONTAINER_OF(node, struct ids_held,
                                             held.node);

        if (next->gen == g->gen) {
            return next;
        } else if (next->gen > g->gen) {
            break;
        }
    }
    return NULL;
}

/* Gives the held batches whose payloads are in 'g' their verdicts, if
 * 'scanned' (else they all pass, as in a failed synchronous scan). */
static void
ids_gather_set_ready(struct ids_gather *g, bool scanned)
{
    for (struct ids_held *h = ids_gather_next_held(g, NULL); h;
         h = ids_gather_next_held(g, h)) {
        h->held.ready = true;
        h->drop = 0;
        for (size_t i = 0; scanned && h->drop_matched
                           && i < h->held.packets.count; i++) {
            size_t j = h->first + i;

            if (g->verdicts[j].n_matches
                && ids_is_ip(&g->info[j], &g->verdicts[j])) {
                h->drop |= UINT32_C(1) << i;
            }
        }
    }
}

/* Adds what 'g' counted of its packets to its ruleset's counters, and
 * takes them out of those in scans under way. */
static void
ids_gather_count(struct ids_gather *g)
{
    struct ids_ruleset *r = g->r;

    gpu_counter_add(&r->n_gathered, -(uint64_t) g->n_submitted);
    if (g->n_frames) {
        gpu_counter_add(&r->n_frames, g->n_frames);
    }
    if (g->n_held) {
        gpu_counter_add(&r->n_held, g->n_held);
        /* The latency drop mode adds, which the ruleset's in-flight and
         * hold-us trade against the PMD's time: an operator's figure. */
        gpu_counter_add(&r->held_us, gpu_service_now_us() - g->first_held_us);
        gpu_counter_add(&r->n_held_scans, 1);
    }
}

/* Empties 'g' for its next filling. */
static void
ids_gather_reset(struct ids_gather *g)
{
    g->n = 0;
    g->n_payload_bytes = 0;
    g->n_dropping = 0;
    g->n_in_place = 0;
    g->n_frames = 0;
    g->n_held = 0;
    g->n_submitted = 0;
}

/* Counts and logs a scan of 'g' that could not be done: its packets
 * went on unscanned. */
static void
ids_gather_failed(struct ids_gather *g, int status)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);

    gpu_counter_add(&g->r->n_errors, 1);
    ids_gather_count(g);
    VLOG_WARN_RL(&rl, "gpu_ids %s: match failed (%s); %"PRIuSIZE
                 " gathered packets passed unscanned", g->r->name,
                 gpu_status_string(status), g->n);
    ids_gather_set_ready(g, false);
    ids_gather_reset(g);
}

/* Fills in the alert lines' details of 'g''s held packets that matched:
 * held packets are still there when their scan completes, so that only
 * 'is_ip' was taken from each when it was gathered (the rest cost ~23 ns
 * a packet on the PMD, for the few that match). */
static void
ids_gather_held_info(struct ids_gather *g)
{
    for (struct ids_held *h = ids_gather_next_held(g, NULL); h;
         h = ids_gather_next_held(g, h)) {
        for (size_t i = 0; i < h->held.packets.count; i++) {
            size_t j = h->first + i;

            if (g->verdicts[j].n_matches
                && !(g->verdicts[j].flags & GPU_IDS_HDR_PARSED)
                && g->info[j].is_ip) {
                ids_alert_info_of_packet(&g->info[j],
                                         h->held.packets.packets[i]);
            }
        }
    }
}

/* What the scan found out about 'g''s packets that the matcher parsed:
 * the alert lines' details of those that matched, parsed from the frame
 * where it was gathered (alert mode's copy, or a held packet, in place
 * or copied).  Returns the payload bytes the scan read, those of the
 * packets parsed here included.  Only the verdicts are read of the
 * others (written by the device, they are read once anyway), and their
 * 'info' not touched. */
static uint64_t
ids_gather_frames_info(struct ids_gather *g)
{
    uint64_t n_bytes = g->n_payload_bytes;

    for (size_t j = 0; j < g->n; j++) {
        const struct gpu_ids_verdict *v = &g->verdicts[j];

        if (!(v->flags & GPU_IDS_HDR_PARSED)) {
            continue;
        }
        n_bytes += v->payload_len;
        if (v->n_matches) {
            const uint8_t *frame = (g->srcs[j] ? g->srcs[j]
                                    : g->data + g->offsets[j]);
            struct gpu_frame_l4 l4;

            gpu_frame_parse(frame, g->offsets[j + 1] - g->offsets[j],
                            GPU_FRAME_ETH, &l4);
            ids_alert_info_init(&g->info[j], frame, &l4);
        }
    }
    return n_bytes;
}

/* Completes 'g''s scan, whose device call ended with 'status' (or could
 * not start). */
static void
ids_gather_complete(void *g_, int status)
{
    struct ids_gather *g = g_;

    if (gpu_service_is_device_error(status)) {
        for (size_t i = 0; g->n_in_place && i < g->n; i++) {
            if (g->srcs[i]) {
                /* Their packets are still held. */
                memcpy(g->data + g->offsets[i], g->srcs[i],
                       g->offsets[i + 1] - g->offsets[i]);
            }
        }
        status = ids_match_on_cpu(g->r, status, g->data, g->offsets, g->hdrs,
                                  g->n, g->verdicts);
    }
    if (status) {
        ids_gather_failed(g, status);
    } else {
        uint64_t n_bytes = ids_gather_frames_info(g);

        ids_gather_count(g);
        ids_gather_held_info(g);
        ids_account(g->r, g->n, g->info, g->verdicts, n_bytes,
                    g->n_dropping ? g->dropping : NULL, NULL);
        if (g->n_in_place) {
            gpu_counter_add(&g->r->n_in_place, g->n_in_place);
        }
        ids_gather_set_ready(g, true);
        ids_gather_reset(g);
    }
}

static bool
ids_gather_is_empty(const void *g_)
{
    const struct ids_gather *g = g_;

    return !g->n;
}

/* True while "gpu/inject-fault ids-null-scan 1" has the gathers scanned
 * by nobody (gpu-actions.h). */
static bool
ids_null_scan(void)
{
    return OVS_UNLIKELY(gpu_service_test_knob(GPU_KNOB_IDS_NULL_SCAN));
}

static int
ids_gather_start(void *g_)
{
    struct ids_gather *g = g_;

    g->n_submitted = g->n;
    gpu_counter_add(&g->r->n_gathered, g->n);

    g->null_scan = ids_null_scan();
    if (g->null_scan) {
        memset(g->verdicts, 0, g->n * sizeof *g->verdicts);
        return 0;
    }
    return gpu_ids_submit_in_place(g->batch, NULL, g->data, g->offsets,
                                   g->n_in_place ? g->srcs : NULL, g->hdrs,
                                   g->n, g->verdicts);
}

static int
ids_gather_poll(void *g_)
{
    struct ids_gather *g = g_;

    return g->null_scan ? 0 : gpu_ids_poll(g->batch);
}

static int
ids_gather_wait(void *g_)
{
    struct ids_gather *g = g_;

    return g->null_scan ? 0 : gpu_ids_wait(g->batch);
}

static const struct gpu_service_gather_ops ids_gather_ops = {
    .target = GPU_FAULT_IDS,
    .is_empty = ids_gather_is_empty,
    .start = ids_gather_start,
    .poll = ids_gather_poll,
    .wait = ids_gather_wait,
    .complete = ids_gather_complete,
};

/* Hands 'g''s ruleset back (after a reload, the old one's matcher). */
static void
ids_gather_unbind(struct ids_gather *g)
{
    ovs_assert(!g->n);
    gpu_ids_batch_destroy(g->batch);
    g->batch = NULL;
    g->data = NULL;
    g->offsets = NULL;
    g->hdrs = NULL;
    g->verdicts = NULL;
    ids_ruleset_unref(g->r);
    g->r = NULL;
}

static void
ids_gatherer_destroy(void *gt_)
{
    struct ids_gatherer *gt = gt_;

    /* The thread is exiting: scan what it gathered, so that every packet
     * that passed is counted. */
    gpu_service_gathers_submit(&gt->gathers);
    gpu_service_gathers_finish(&gt->gathers, true);
    for (size_t i = 0; i < ARRAY_SIZE(gt->slots); i++) {
        struct ids_gather *g = &gt->slots[i];

        if (g->r) {
            ids_gather_unbind(g);
        }
    }
    /* A datapath thread sends on what it holds before it exits (the 'poll'
     * hook, with GPU_SERVICE_POLL_FINISH), so nothing should be left. */
    gpu_service_holder_destroy(&gt->holder);
    free(gt);
}

static void
ids_gatherer_key_create(void)
{
    xpthread_key_create(&gatherer_key, ids_gatherer_destroy);
}

static void ids_held_prepare(struct gpu_service_held *);

static const struct gpu_service_holder_class ids_holder_class = {
    .name = "gpu_ids",
    .held_size = sizeof(struct ids_held),
    .prepare = ids_held_prepare,
};

static struct ids_gatherer *
ids_gatherer_get(bool create)
{
    struct ids_gatherer *gt;

    pthread_once(&gatherer_once, ids_gatherer_key_create);
    gt = pthread_getspecific(gatherer_key);
    if (!gt && create) {
        void *slots[ARRAY_SIZE(gt->slots)];

        gt = xzalloc(sizeof *gt);
        for (size_t i = 0; i < ARRAY_SIZE(gt->slots); i++) {
            gt->slots[i].gt = gt;
            slots[i] = &gt->slots[i];
        }
        gpu_service_gathers_init(&gt->gathers, &ids_gather_ops, slots,
                                 ARRAY_SIZE(gt->slots));
        gpu_service_holder_init(&gt->holder, &ids_holder_class);
        xpthread_setspecific(gatherer_key, gt);
    }
    return gt;
}

/* Makes the filling gather one for 'r' with room for 'b'.  Returns false
 * if that cannot be (no memory for a batch), and the caller scans 'b' at
 * once instead. */
static bool
ids_gather_prepare(struct ids_gatherer *gt, struct ids_ruleset *r,
                   const struct gpu_service_batch *b)
{
    struct ids_gather *g = gpu_service_gathers_filling(&gt->gathers);

    gpu_service_gathers_set_max_in_flight(&gt->gathers, r->in_flight,
                                          &r->scans_out);
    if (g->n && (g->r != r || g->n + b->n > IDS_GATHER_PACKETS
                 || g->offsets[g->n] + b->n_bytes
                    > IDS_GATHER_BYTES)) {
        /* The next gather is idle after. */
        gpu_service_gathers_submit(&gt->gathers);
        g = gpu_service_gathers_filling(&gt->gathers);
    }
    if (g->r != r) {
        if (g->r) {
            ids_gather_unbind(g);
        }
        /* 'r' came from the cmap in this RCU grace period, but its last
         * reference may already be on its way out. */
        if (!ovs_refcount_try_ref_rcu(&r->ref_cnt)) {
            return false;
        }
        struct gpu_ids_batch_buffers bufs;

        g->r = r;
        if (gpu_ids_batch_create(r->matcher, IDS_GATHER_PACKETS,
                                 IDS_GATHER_BYTES, &g->batch)) {
            ids_ruleset_unref(r);
            g->r = NULL;
            return false;
        }
        if (gpu_ids_batch_buffers(g->batch, &bufs)) {
            gpu_ids_batch_destroy(g->batch);
            g->batch = NULL;
            ids_ruleset_unref(r);
            g->r = NULL;
            return false;
        }
        g->data = bufs.data;
        g->offsets = bufs.offsets;
        g->hdrs = bufs.hdrs;
        g->verdicts = bufs.verdicts;
    }
    return true;
}

/* True if the filling gather 'g' should be scanned now: it is nearly
 * full, or its oldest alert-mode packet waited IDS_GATHER_MAX_MS, or it
 * holds drop-mode packets and its oldest waited hold-us (gpu-max-hold-us
 * if less) or 'idle' says no more packets are coming to gather with. */
static bool
ids_gather_due(const struct ids_gather *g, bool idle)
{
    long long int now;

    if (!g->n) {
        return false;
    }
    if (g->n > IDS_GATHER_PACKETS - NETDEV_MAX_BURST
        || (g->n_dropping && idle)) {
        return true;
    }
    now = gpu_service_now_us();
    return (now - g->first_us >= IDS_GATHER_MAX_MS * 1000
            || (g->n_dropping
                && now - g->first_held_us
                   >= MIN(g->r->hold_us, gpu_services_get_max_hold_us())));
}

/* True if alert-mode gather 'g' holds its ruleset's gather-kb of frames:
 * it is then scanned once a scan's room is free, never waited for (the
 * thread goes on filling it up to ids_gather_due()).  Smaller gathers
 * keep the buffers their copies write in the thread's caches. */
static bool
ids_gather_enough(const struct ids_gather *g)
{
    return (g->n && !g->n_dropping
            && g->offsets[g->n] >= (size_t) g->r->gather_kb * 1024);
}

/* How far past its end a gather's buffer is asked for. */
#define IDS_GATHER_PREFETCH (32u << 10)

/* Asks for the lines of 'g''s buffer that the next batches will be
 * copied into, IDS_GATHER_PREFETCH bytes past 'end' (its end now), each
 * line once: the buffer is megabytes, last written a few gathers ago and
 * read by the device since, so its lines are out of the caches and each
 * copy into them stalled on their reads for ownership. */
static void
ids_gather_prefetch(struct ids_gather *g, size_t end)
{
    size_t from = MAX(g->prefetched, end) & ~(size_t) 63;
    size_t to = MIN(end + IDS_GATHER_PREFETCH, IDS_GATHER_BYTES);

    for (; from < to; from += 64) {
        __builtin_prefetch(g->data + from, 1, 3);
    }
    g->prefetched = to;         /* 'end' only grows within a gather. */
}

/* Gathers 'b' for 'r' in the thread's gatherer 'gt': in alert mode with
 * 'h' NULL, else as the held batch 'h', which this puts in the thread's
 * FIFO.  Returns false if it could not, and the caller scans 'b' at
 * once. */
static bool
ids_gather(struct ids_gatherer *gt, struct ids_ruleset *r,
           struct gpu_service_batch *b, const struct gpu_ids_pkt_hdr *hdrs,
           struct ids_held *h)
{
    struct ids_gather *g;

    if (b->n_bytes > IDS_GATHER_BYTES) {
        return false;
    }
    gpu_service_gathers_finish(&gt->gathers, false);
    if (!ids_gather_prepare(gt, r, b)) {
        return false;
    }
    g = gpu_service_gathers_filling(&gt->gathers);
    if (!g->n) {
        g->first_us = gpu_service_now_us();
        g->offsets[0] = 0;
        g->gen = ++gt->gen;
        g->prefetched = 0;
    }
    if (h) {
        if (!g->n_dropping) {
            g->first_held_us = g->n ? gpu_service_now_us() : g->first_us;
        }
        h->gen = g->gen;
        h->first = g->n;
        g->n_held++;
        gpu_service_holder_push(&gt->holder, &h->held, &gt->gathers);
        g->n_dropping += b->n;
    }
    /* The payloads' one copy: straight into the gather's pinned buffer;
     * held ones the device can read where they are, not at all. */
    if (h && gpu_ids_matcher_backend(r->matcher) == GPU_IDS_BACKEND_CUDA) {
        g->n_in_place += gpu_service_batch_stage_in_place(
            b, g->data + g->offsets[g->n], g->srcs + g->n);
    } else {
        gpu_service_batch_stage(b, g->data + g->offsets[g->n]);
        memset(g->srcs + g->n, 0, b->n * sizeof g->srcs[0]);
        ids_gather_prefetch(g, g->offsets[g->n] + b->offsets[b->n]);
    }
    for (size_t i = 0; i < b->n; i++) {
        g->offsets[g->n + i + 1] = g->offsets[g->n] + b->offsets[i + 1];
        g->hdrs[g->n + i] = hdrs[i];
        g->dropping[g->n + i] = h && h->drop_matched;
        if (hdrs[i].flags & GPU_IDS_HDR_FRAME) {
            /* All of it once scanned, if it matches
             * (ids_gather_frames_info()). */
        } else if (h) {
            /* The rest when it matches (ids_gather_held_info()). */
            g->info[g->n + i].is_ip = b->pkts[i].l4.is_ip;
        } else {
            ids_alert_info_init(&g->info[g->n + i],
                                dp_packet_data(b->pkts[i].packet),
                                &b->pkts[i].l4);
        }
    }
    g->n += b->n;
    if (b->n && hdrs[0].flags & GPU_IDS_HDR_FRAME) {
        /* A batch's packets are all frames or none. */
        g->n_frames += b->n;
    } else {
        g->n_payload_bytes += b->n_bytes;
    }
    if (ids_gather_due(g, false)
        ? (!g->n_dropping || gpu_service_gathers_room(&gt->gathers))
        : (ids_gather_enough(g) && gpu_service_gathers_room(&gt->gathers))) {
        /* Held packets wait for a scan out to complete, when the
         * ruleset's in-flight are, rather than make the thread wait,
         * unless the gather is full; so does an alert-mode gather that
         * only holds its gather-kb. */
        gpu_service_gathers_submit(&gt->gathers);
    }
    return true;
}

/* The PMD loop's (and the main thread's) timer hook: completes the scan in
 * flight and starts the next one once its oldest packet waited long
 * enough, also when traffic has stopped. */
static void
ids_timers_run(const struct gpu_service_emitter *emitter OVS_UNUSED)
{
    struct ids_gatherer *gt = ids_gatherer_get(false);

    if (gt) {
        struct ids_gather *g = gpu_service_gathers_filling(&gt->gathers);

        /* Not while the ruleset's in-flight scans are out: submitting
         * would wait for one, and the thread must not wait for the
         * device. */
        if (gpu_service_gathers_room(&gt->gathers)
            && g->n
            && (ids_gather_enough(g)
                || gpu_service_now_us() - g->first_us
                   >= IDS_GATHER_MAX_MS * 1000)) {
            gpu_service_gathers_submit(&gt->gathers);
        }
    }
}

static void
ids_timers_wait(void)
{
    struct ids_gatherer *gt = ids_gatherer_get(false);

    if (gt) {
        bool busy = gt->gathers.n_in_flight > 0;

        for (size_t i = 0; !busy && i < ARRAY_SIZE(gt->slots); i++) {
            busy = gt->slots[i].n > 0;
        }
        if (busy) {
            poll_timer_wait(1);
        }
    }
}

/* Deletes the packets of ready batch 'held' that matched, counting them;
 * the holder sends the others on. */
static void
ids_held_prepare(struct gpu_service_held *held)
{
    struct ids_held *h = CONTAINER_OF(held, struct ids_held, held);
    struct dp_packet_batch *packets = &held->packets;
    const size_t cnt = dp_packet_batch_size(packets);
    struct dp_packet *packet;
    size_t n_dropped = 0;
    size_t i;

    DP_PACKET_BATCH_REFILL_FOR_EACH (i, cnt, packet, packets) {
        if (h->drop & (UINT32_C(1) << i)) {
            dp_packet_delete(packet);
            n_dropped++;
        } else {
            dp_packet_batch_refill(packets, packet, i);
        }
    }
    gpu_service_count_dropped(n_dropped);
}

/* The datapath's per-iteration hook, while the thread holds batches:
 * completes the scan in flight without waiting, starts the next one when
 * it is due, and sends on what is ready. */
static void
ids_poll(const struct gpu_service_emitter *emitter,
         enum gpu_service_poll_mode mode)
{
    struct ids_gatherer *gt = ids_gatherer_get(false);

    if (!gt) {
        return;
    }
    if (gpu_service_gathers_room(&gt->gathers)
        && ids_gather_due(gpu_service_gathers_filling(&gt->gathers),
                          mode != GPU_SERVICE_POLL_BUSY)) {
        gpu_service_gathers_submit(&gt->gathers);
    }
    gpu_service_holder_release(&gt->holder, emitter,
                               mode == GPU_SERVICE_POLL_FINISH);
}

/* Makes a held batch of 'packets' for 'gt''s holder, to go on along
 * 'next', less those that match if 'drop_matched'. */
static struct ids_held *
ids_held_create(struct ids_gatherer *gt,
                const struct dp_packet_batch *packets,
                const struct gpu_service_next *next, bool drop_matched)
{
    struct ids_held *h = CONTAINER_OF(gpu_service_holder_new_held(
                                          &gt->holder),
                                      struct ids_held, held);

    gpu_service_held_init(&h->held, packets, next);
    h->drop = 0;
    h->drop_matched = drop_matched;
    return h;
}

/* Parses 'b''s packets for a scan of their payloads, with 'hdrs'. */
static void
ids_batch_parse(struct ids_ruleset *r, struct gpu_service_batch *b,
                struct gpu_ids_pkt_hdr *hdrs)
{
    gpu_counter_add(&r->n_parsed, b->n);
    b->n_bytes = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct gpu_service_packet *p = &b->pkts[i];

        gpu_service_parse_packet(p->packet, p);
        b->n_bytes += p->l4.payload_len;
        memset(&hdrs[i], 0, sizeof hdrs[i]);
        hdrs[i].proto = p->l4.ip_proto;
        hdrs[i].sport = p->l4.sport;
        hdrs[i].dport = p->l4.dport;
    }
}

/* Makes 'b''s packets frames for the matcher to parse (GPU_IDS_HDR_FRAME
 * in 'hdrs'), each staged or read whole, if they are all Ethernet frames;
 * else returns false and they are to be parsed here.  The PMD then reads
 * nothing of a packet for the scan: the parse cost it ~30 ns a packet
 * (docs/PERFORMANCE.md, twentieth session). */
static bool
ids_batch_as_frames(struct gpu_service_batch *b,
                    struct gpu_ids_pkt_hdr *hdrs)
{
    size_t n_bytes = 0;

    for (size_t i = 0; i < b->n; i++) {
        if (b->pkts[i].packet->packet_type != htonl(PT_ETH)) {
            return false;
        }
    }
    for (size_t i = 0; i < b->n; i++) {
        struct gpu_service_packet *p = &b->pkts[i];
        uint32_t size = dp_packet_size(p->packet);

        /* Not known until the scan: staged or read whole. */
        p->l4 = (struct gpu_frame_l4) { .payload_len = size };
        n_bytes += size;
        memset(&hdrs[i], 0, sizeof hdrs[i]);
        hdrs[i].flags = GPU_IDS_HDR_FRAME;
    }
    b->n_bytes = n_bytes;
    return true;
}

/* Scans 'b' for gpu_ids(args): the 'hold' of struct gpu_service_impl
 * ('packets' is the datapath batch 'b' was staged from).  Alert mode and
 * the batches drop mode cannot hold are scanned as 'run' would. */
static void
ids_scan(const char *args, struct gpu_service_batch *b,
         struct dp_packet_batch *packets, bool may_steal,
         const struct gpu_service_next *next,
         const struct gpu_service_emitter *emitter)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    const char *values[ARRAY_SIZE(ids_keys)];
    char buf[256];
    struct gpu_ids_pkt_hdr hdrs[NETDEV_MAX_BURST];
    struct gpu_ids_verdict verdicts[NETDEV_MAX_BURST];
    struct ids_alert_info info[NETDEV_MAX_BURST];
    struct ids_ruleset *r;
    char *error;
    bool alert, hold;
    int status;

    error = gpu_service_args_split(args, ids_keys, values, buf, sizeof buf);
    if (error || !values[IDS_KEY_RULESET]) {
        /* check() refused such flows: only dpctl gets here. */
        VLOG_WARN_RL(&rl, "gpu_ids(%s): %s; packets pass", args,
                     error ? error : "no ruleset");
        free(error);
        return;
    }
    alert = values[IDS_KEY_ALERT] != NULL;
    hold = !alert || gpu_service_test_knob(GPU_KNOB_IDS_ALERT_HOLD);
    {
        struct ids_gatherer *gt = ids_gatherer_get(false);

        if (gt && emitter && !(hold && may_steal && next)) {
            /* This batch cannot be held (below): it must not overtake the
             * thread's held packets, which may be of its flow (alert
             * mode holds none unless GPU_KNOB_IDS_ALERT_HOLD is or was
             * on). */
            gpu_service_holder_release(&gt->holder, emitter, true);
        }
    }
    r = ids_ruleset_find(values[IDS_KEY_RULESET]);
    if (!r) {
        gpu_counter_add(&n_unscanned, b->n);
        VLOG_WARN_RL(&rl, "gpu_ids: ruleset %s is not loaded; packets pass "
                     "unscanned", values[IDS_KEY_RULESET]);
        return;
    }

    /* A batch to gather goes whole, its frames parsed by the matcher (on
     * the device on CUDA), not on this thread; one to scan at once is
     * parsed here. */
    bool gather = hold ? may_steal && next && emitter && b->n : alert;
    bool parsed = !(gather && ids_batch_as_frames(b, hdrs));
    if (parsed) {
        ids_batch_parse(r, b, hdrs);
    }
    if (hold) {
        struct ids_gatherer *gt = gather ? ids_gatherer_get(true) : NULL;

        if (gt) {
            struct ids_held *h = ids_held_create(gt, packets, next, !alert);

            if (ids_gather(gt, r, b, hdrs, h)) {
                /* The packets are the held batch's now. */
                dp_packet_batch_init(packets);
                return;
            }
            gpu_service_holder_recycle(&gt->holder, &h->held);
        }
        /* Nested in clone or sample, or the caller keeps the packets, or
         * no memory to gather: scanned at once, after what the thread
         * held went on (above, or nothing was held if gathering failed
         * here: a failed gather holds nothing). */
        gpu_counter_add(&r->n_not_held, 1);
        if (!gt) {
            gt = ids_gatherer_get(false);
        }
        if (gt && emitter) {
            gpu_service_holder_release(&gt->holder, emitter, true);
        }
    }
    /* Alert mode's packets go on at once, their payloads gathered for a
     * later scan. */
    if (alert && ids_gather(ids_gatherer_get(true), r, b, hdrs, NULL)) {
        return;
    }
    if (!parsed) {
        ids_batch_parse(r, b, hdrs);
    }
    if (!gpu_service_batch_stage(b, NULL)) {
        gpu_counter_add(&r->n_errors, 1);
        VLOG_WARN_RL(&rl, "gpu_ids %s: no memory to stage %"PRIuSIZE
                     " packets; they pass", r->name, b->n);
        return;
    }
    status = gpu_service_fault_take(GPU_FAULT_IDS);
    if (!status) {
        status = gpu_ids_match(r->matcher, b->data, b->offsets, hdrs, b->n,
                               verdicts);
    }
    if (gpu_service_is_device_error(status)) {
        status = ids_match_on_cpu(r, status, b->data, b->offsets, hdrs, b->n,
                                  verdicts);
    }
    if (status) {
        gpu_counter_add(&r->n_errors, 1);
        VLOG_WARN_RL(&rl, "gpu_ids %s: match failed (%s); %"PRIuSIZE
                     " packets pass", r->name, gpu_status_string(status),
                     b->n);
        return;
    }
    for (size_t i = 0; i < b->n; i++) {
        /* Only an alert line needs more than 'is_ip'. */
        if (b->pkts[i].l4.is_ip && verdicts[i].n_matches) {
            ids_alert_info_init(&info[i], dp_packet_data(b->pkts[i].packet),
                                &b->pkts[i].l4);
        } else {
            info[i].is_ip = b->pkts[i].l4.is_ip;
        }
    }
    ids_account(r, b->n, info, verdicts, b->offsets[b->n], NULL,
                alert ? NULL : b->verdicts);
}

const struct gpu_service_impl gpu_ids_service_impl = {
    .type = GPU_SERVICE_IDS,
    .check = ids_check,
    .hold = ids_scan,
    .poll = ids_poll,
    .timers_run = ids_timers_run,
    .timers_wait = ids_timers_wait,
};

/* -------------------------------------------------------------- appctl. */

static uint64_t
read_counter(atomic_uint64_t *counter)
{
    uint64_t value;

    atomic_read_relaxed(counter, &value);
    return value;
}

static void
ids_format_ruleset(struct ds *s, struct ids_ruleset *r)
{
    struct gpu_ids_ruleset_stats st;
    struct gpu_ids_matcher_stats ms;
    uint32_t n_rules = gpu_ids_ruleset_n_rules(r->rs);
    uint64_t *counts = xcalloc(n_rules + 1, sizeof *counts);
    double secs = MAX(1, time_wall_msec() - r->loaded_ms) / 1000.0;
    uint64_t n_bytes = read_counter(&r->n_bytes);

    gpu_ids_ruleset_get_stats(r->rs, &st);
    gpu_ids_matcher_get_stats(r->matcher, &ms);
    ds_put_format(s, "ruleset %s: %s%s%s\n", r->name, r->path,
                  r->partial ? " (partial)" : "",
                  r->commented ? " (commented rules too)" : "");
    /* The hold that applies: gpu-max-hold-us bounds every service's. */
    unsigned int max_hold_us = gpu_services_get_max_hold_us();
    ds_put_format(s, "  backend: %s (launch=%s, in-flight=%u, "
                  "gather-kb=%u, hold-us=%u",
                  gpu_ids_backend_name(ms.backend),
                  r->device_launch ? "device" : "host", r->in_flight,
                  r->gather_kb, r->hold_us);
    if (max_hold_us < r->hold_us) {
        ds_put_format(s, ", %u by gpu-max-hold-us", max_hold_us);
    }
    ds_put_format(s, "), loaded %.0f s ago\n", secs);
    ds_put_format(s, "  rules: %"PRIu32" loaded (%"PRIu32" on contents "
                  "alone), %"PRIu32" skipped\n", st.n_loaded, st.n_partial,
                  st.n_skipped);
    for (int i = 0; i < GPU_IDS_SKIP_N_REASONS; i++) {
        if (st.n_skipped_by[i]) {
            ds_put_format(s, "    skipped, %s: %"PRIu32"\n",
                          gpu_ids_skip_reason_name(i), st.n_skipped_by[i]);
        }
    }
    ds_put_format(s, "  automaton: %"PRIu32" patterns, %"PRIu32" states\n",
                  st.n_patterns, st.n_states);
    ds_put_format(s, "  packets scanned: %"PRIu64" (%"PRIu64" bytes), "
                  "not IP: %"PRIu64"\n", read_counter(&r->n_packets),
                  n_bytes, read_counter(&r->n_not_ip));
    ds_put_format(s, "  matched: %"PRIu64", dropped: %"PRIu64", alerts: %"
                  PRIu64"\n", read_counter(&r->n_matched),
                  read_counter(&r->n_dropped), read_counter(&r->n_alerts));
    uint64_t n_gathered = read_counter(&r->n_gathered);
    if (n_gathered) {
        ds_put_format(s, "  in scans under way: %"PRIu64" packets\n",
                      n_gathered);
    }
    ds_put_format(s, "  drop mode: %"PRIu64" batches held for their "
                  "verdicts, %"PRIu64" scanned at once (could not be "
                  "held)\n", read_counter(&r->n_held),
                  read_counter(&r->n_not_held));
    uint64_t n_held_scans = read_counter(&r->n_held_scans);
    if (n_held_scans) {
        ds_put_format(s, "  held: %"PRIu64" us on average, a scan's first "
                      "held packet to its verdicts (%"PRIu64" scans)\n",
                      read_counter(&r->held_us) / n_held_scans,
                      n_held_scans);
    }
    unsigned int most_out, most_in_ring;

    atomic_read_relaxed(&r->scans_out.most, &most_out);
    atomic_read_relaxed(&r->scans_out.most_in_ring, &most_in_ring);
    ds_put_format(s, "  scans in flight: up to %u at once (in-flight=%u), "
                  "%u in all threads\n", most_in_ring, r->in_flight,
                  most_out);
    if (ms.n_batches) {
        ds_put_format(s, "  scans: %"PRIu64", %.0f packets and %.1f kB each "
                      "on average\n", ms.n_batches,
                      (double) ms.n_packets / ms.n_batches,
                      ms.n_bytes / 1024.0 / ms.n_batches);
    }
    ds_put_format(s, "  parsed: %"PRIu64" packets by the matcher, %"PRIu64
                  " by the datapath thread\n", read_counter(&r->n_frames),
                  read_counter(&r->n_parsed));
    if (gpu_ids_matcher_backend(r->matcher) == GPU_IDS_BACKEND_CUDA) {
        ds_put_format(s, "  held packets read in place by the device (in "
                      "DPDK memory): %"PRIu64"\n",
                      read_counter(&r->n_in_place));
    }
    ds_put_format(s, "  errors (packets passed): %"PRIu64", CPU fallbacks: "
                  "%"PRIu64"\n", read_counter(&r->n_errors), ms.n_fallbacks);
    ds_put_format(s, "  device faults: %"PRIu64" batches scanned on the "
                  "CPU\n", read_counter(&r->n_faults));
    if (ms.n_runtime_calls && ms.n_batches) {
        /* Each costs the submitting thread microseconds
         * (docs/ARCHITECTURE.md, "Runtime calls per submission"). */
        ds_put_format(s, "  device runtime calls: %.1f per scan to submit, "
                      "%.1f to check for completion (%"PRIu64" scans)\n",
                      (double) ms.n_runtime_calls / ms.n_batches,
                      (double) ms.n_completion_checks / ms.n_batches,
                      ms.n_batches);
    }
    if (ms.n_device_launches) {
        ds_put_format(s, "  scans launched by the device: %"PRIu64" (its "
                      "scheduler woken again: %"PRIu64")\n",
                      ms.n_device_launches, ms.n_scheduler_launches);
    }
    ds_put_format(s, "  rate: %.3f Mbit/s since loaded\n",
                  n_bytes * 8 / secs / 1e6);
    if (!gpu_ids_matcher_rule_counts(r->matcher, counts, n_rules + 1)) {
        bool any = false;
        for (uint32_t i = 0; i < n_rules; i++) {
            struct gpu_ids_rule_info info;
            if (counts[i] && gpu_ids_rule_get(r->rs, i, &info)) {
                if (!any) {
                    ds_put_cstr(s, "  matches by sid:\n");
                    any = true;
                }
                ds_put_format(s, "    sid %"PRIu32": %"PRIu64" \"%s\"\n",
                              info.sid, counts[i], info.msg);
            }
        }
    }
    free(counts);
}

static int
compare_rulesets(const void *a_, const void *b_)
{
    const struct ids_ruleset *const *a = a_;
    const struct ids_ruleset *const *b = b_;

    return strcmp((*a)->name, (*b)->name);
}

static void
gpu_ids_show_cmd(struct unixctl_conn *conn, int argc, const char *argv[],
                 void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    struct ids_ruleset **list;
    struct ids_ruleset *r;
    size_t n = 0;

    ovs_mutex_lock(&ids_mutex);
    list = xmalloc((cmap_count(&rulesets) + 1) * sizeof *list);
    CMAP_FOR_EACH (r, node, &rulesets) {
        if (argc < 2 || !strcmp(r->name, argv[1])) {
            list[n++] = r;
        }
    }
    if (argc >= 2 && !n) {
        ovs_mutex_unlock(&ids_mutex);
        free(list);
        unixctl_command_reply_error(conn, "no such ruleset");
        return;
    }
    qsort(list, n, sizeof *list, compare_rulesets);
    for (size_t i = 0; i < n; i++) {
        ids_format_ruleset(&s, list[i]);
    }
    if (argc < 2) {
        ds_put_format(&s, "packets passed unscanned (ruleset not loaded): "
                      "%"PRIu64"\n", read_counter(&n_unscanned));
    }
    ovs_mutex_unlock(&ids_mutex);
    free(list);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

/* Reloads rulesets from their files (after the files changed). */
static void
gpu_ids_reload_cmd(struct unixctl_conn *conn, int argc, const char *argv[],
                   void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    struct shash_node *snode;
    bool failed = false, found = false;

    ovs_mutex_lock(&ids_mutex);
    SHASH_FOR_EACH (snode, &seen_config) {
        struct ids_ruleset *r;
        char *error;

        if (argc >= 2 && strcmp(snode->name, argv[1])) {
            continue;
        }
        found = true;
        r = ids_ruleset_load(snode->name, snode->data, &error);
        if (r) {
            ids_ruleset_log_loaded(r, "reloaded");
            ids_ruleset_install(r);
            ds_put_format(&s, "%s: reloaded\n", snode->name);
        } else {
            ds_put_format(&s, "%s: %s; keeping the previous ruleset\n",
                          snode->name, error);
            VLOG_WARN("ruleset %s: %s; keeping the previous ruleset",
                      snode->name, error);
            free(error);
            failed = true;
        }
    }
    ovs_mutex_unlock(&ids_mutex);
    if (!found) {
        unixctl_command_reply_error(conn, "no such ruleset");
    } else if (failed) {
        unixctl_command_reply_error(conn, ds_cstr(&s));
    } else {
        unixctl_command_reply(conn, ds_cstr(&s));
    }
    ds_destroy(&s);
}

void
gpu_ids_service_init(void)
{
    unixctl_command_register("gpu-ids/show", "[ruleset]", 0, 1,
                             gpu_ids_show_cmd, NULL);
    unixctl_command_register("gpu-ids/reload", "[ruleset]", 0, 1,
                             gpu_ids_reload_cmd, NULL);
}
