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

/* The packet recorder service: gpu_index(store=NAME[,snaplen=N]).
 *
 * Stores come from OVSDB, other_config:gpu-index-store-NAME=DIR[,OPTIONS],
 * so they survive restarts.  Each is a gpu_index_recorder: the PMD thread
 * only copies frames into its staging ring (never blocking: a full ring
 * drops and counts), and the recorder's own thread writes pcap segments
 * and builds their bitmap indexes on the plugin's backend.  Queries from
 * ovs-appctl run on the compressed indexes of the segments on disk.
 *
 * The PMD threads find stores by name in an RCU cmap; a changed setting
 * replaces the recorder, and the old one is flushed and freed after a
 * grace period. */

#include <config.h>

#include "ovs_plugin/gpu-index-service.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cmap.h"
#include "dp-packet.h"
#include "hash.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/shash.h"
#include "openvswitch/vlog.h"
#include "ovs-rcu.h"
#include "ovs-thread.h"
#include "smap.h"
#include "timeval.h"
#include "unixctl.h"
#include "util.h"

#include "gpu_services/index/gpu-index.h"
#include "ovs_plugin/gpu-actions.h"

VLOG_DEFINE_THIS_MODULE(gpu_index_service);

#define STORE_KEY_PREFIX "gpu-index-store-"

struct index_store {
    struct cmap_node node;      /* In 'stores', by hash of 'name'. */
    char *name;
    char *config;               /* other_config value. */
    char *dir;
    long long int created_ms;
    struct gpu_index_recorder *recorder;
};

static struct cmap stores = CMAP_INITIALIZER;
static struct ovs_mutex index_mutex = OVS_MUTEX_INITIALIZER;
static struct shash seen_config OVS_GUARDED_BY(index_mutex)
    = SHASH_INITIALIZER(&seen_config);

static struct index_store *
index_store_find(const char *name)
{
    struct index_store *st;

    CMAP_FOR_EACH_WITH_HASH (st, node, hash_string(name, 0), &stores) {
        if (!strcmp(st->name, name)) {
            return st;
        }
    }
    return NULL;
}

static void
index_store_destroy(struct index_store *st)
{
    if (st) {
        gpu_index_recorder_destroy(st->recorder);
        free(st->name);
        free(st->config);
        free(st->dir);
        free(st);
    }
}

/* Parses a byte count with an optional K, M or G suffix.  A count that
 * does not fit in 64 bits is refused: strtoull() would saturate it and
 * the shift would wrap it, and either would silently give a different
 * limit (a wrapped retention of 0 means "keep everything"). */
static bool
parse_size(const char *s, uint64_t *out)
{
    unsigned long long v;
    int shift = 0;
    char *end;

    if (*s < '0' || *s > '9') {
        return false;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno) {
        return false;
    }
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    }
    if (*end || v > UINT64_MAX >> shift) {
        return false;
    }
    *out = (uint64_t) v << shift;
    return true;
}

/* Parses "DIR[,segment=N][,segment_seconds=S][,retention=SIZE]
 * [,retention_seconds=S][,snaplen=N][,encoding=wah|plwah]" into 'cfg'
 * (whose 'dir' points into '*dirp', malloc()'d).  Returns NULL or a
 * malloc()'d error. */
static char *
index_parse_config(const char *value, struct gpu_index_recorder_config *cfg,
                   char **dirp)
{
    char *copy = xstrdup(value);
    char *save_ptr = NULL;
    char *item = strtok_r(copy, ",", &save_ptr);
    char *error = NULL;

    gpu_index_recorder_config_init(cfg);
    *dirp = NULL;
    if (!item || item[0] != '/') {
        error = xasprintf("\"%s\": expected an absolute directory, then "
                          "options", value);
        goto out;
    }
    *dirp = xstrdup(item);
    cfg->dir = *dirp;
    while ((item = strtok_r(NULL, ",", &save_ptr))) {
        char *eq = strchr(item, '=');
        uint64_t v = 0;
        bool ok;

        if (!eq) {
            error = xasprintf("\"%s\" needs a value", item);
            goto out;
        }
        *eq++ = '\0';
        if (!strcmp(item, "encoding")) {
            ok = !strcmp(eq, "wah") || !strcmp(eq, "plwah");
            cfg->encoding = !strcmp(eq, "plwah") ? GPU_INDEX_PLWAH
                                                 : GPU_INDEX_WAH;
        } else {
            ok = parse_size(eq, &v);
            if (!strcmp(item, "segment")) {
                ok = ok && v > 0 && v <= UINT32_MAX;
                cfg->segment_packets = v;
            } else if (!strcmp(item, "segment_seconds")) {
                ok = ok && v <= UINT32_MAX;
                cfg->segment_seconds = v;
            } else if (!strcmp(item, "retention")) {
                cfg->retention_bytes = v;
            } else if (!strcmp(item, "retention_seconds")) {
                ok = ok && v <= UINT32_MAX;
                cfg->retention_seconds = v;
            } else if (!strcmp(item, "snaplen")) {
                ok = ok && v >= 14 && v <= 65535;
                cfg->snaplen = v;
            } else {
                error = xasprintf("unknown option \"%s\" (known: segment, "
                                  "segment_seconds, retention, "
                                  "retention_seconds, snaplen, encoding)",
                                  item);
                goto out;
            }
        }
        if (!ok) {
            error = xasprintf("%s: bad value \"%s\"", item, eq);
            goto out;
        }
    }
out:
    free(copy);
    if (error) {
        free(*dirp);
        *dirp = NULL;
    }
    return error;
}

static struct index_store *
index_store_create(const char *name, const char *value, char **errorp)
{
    struct gpu_index_recorder_config cfg;
    struct index_store *st;
    char err[256];
    char *dir;
    int device, status;

    *errorp = index_parse_config(value, &cfg, &dir);
    if (*errorp) {
        return NULL;
    }
    cfg.backend = gpu_services_get_backend(&device)
                  ? GPU_INDEX_BACKEND_CUDA : GPU_INDEX_BACKEND_CPU;
    st = xzalloc(sizeof *st);
    status = gpu_index_recorder_create(&cfg, &st->recorder, err, sizeof err);
    if (status && cfg.backend == GPU_INDEX_BACKEND_CUDA) {
        VLOG_WARN("store %s: CUDA index builder failed (%s); using the CPU",
                  name, err);
        cfg.backend = GPU_INDEX_BACKEND_CPU;
        status = gpu_index_recorder_create(&cfg, &st->recorder, err,
                                           sizeof err);
    }
    if (status) {
        *errorp = xasprintf("%s: %s", dir, err);
        free(dir);
        free(st);
        return NULL;
    }
    st->name = xstrdup(name);
    st->config = xstrdup(value);
    st->dir = dir;
    st->created_ms = time_wall_msec();
    return st;
}

void
gpu_index_service_set_config(const struct smap *other_config)
{
    struct smap_node *node;
    struct shash_node *snode;

    ovs_mutex_lock(&index_mutex);
    SMAP_FOR_EACH (node, other_config) {
        const char *name, *seen;
        struct index_store *st, *old;
        char *error;

        if (strncmp(node->key, STORE_KEY_PREFIX, strlen(STORE_KEY_PREFIX))) {
            continue;
        }
        name = node->key + strlen(STORE_KEY_PREFIX);
        seen = shash_find_data(&seen_config, name);
        if (seen && !strcmp(seen, node->value)) {
            continue;
        }
        free(shash_replace(&seen_config, name, xstrdup(node->value)));
        if (!name[0]) {
            VLOG_WARN("other_config:%s: the store needs a name after \"%s\"",
                      node->key, STORE_KEY_PREFIX);
            continue;
        }
        old = index_store_find(name);
        st = index_store_create(name, node->value, &error);
        if (!st) {
            VLOG_WARN("other_config:%s: %s; %s", node->key, error,
                      old ? "keeping the previous store settings"
                          : "the store is not open");
            free(error);
            continue;
        }
        VLOG_INFO("store %s %s in %s", name, old ? "reopened" : "opened",
                  st->dir);
        if (old) {
            cmap_replace(&stores, &old->node, &st->node, hash_string(name, 0));
            ovsrcu_postpone(index_store_destroy, old);
        } else {
            cmap_insert(&stores, &st->node, hash_string(name, 0));
        }
    }
    SHASH_FOR_EACH_SAFE (snode, &seen_config) {
        char *key = xasprintf(STORE_KEY_PREFIX "%s", snode->name);
        if (!smap_get(other_config, key)) {
            struct index_store *st = index_store_find(snode->name);
            if (st) {
                cmap_remove(&stores, &st->node, hash_string(st->name, 0));
                ovsrcu_postpone(index_store_destroy, st);
                VLOG_INFO("store %s closed", snode->name);
            }
            free(snode->data);
            shash_delete(&seen_config, snode);
        }
        free(key);
    }
    ovs_mutex_unlock(&index_mutex);
}

/* ------------------------------------------------------------ The action. */

static const char *const index_keys[] = { "store=", "snaplen=", NULL };
enum { INDEX_KEY_STORE, INDEX_KEY_SNAPLEN };

static char *
index_check(const char *args)
{
    const char *values[ARRAY_SIZE(index_keys)];
    char buf[GPU_SERVICE_ARGS_MAX + 1];
    char *error = gpu_service_args_split(args, index_keys, values, buf,
                                         sizeof buf);
    uint64_t snaplen;

    if (!error && !values[INDEX_KEY_STORE]) {
        error = xstrdup("gpu_index needs store=NAME");
    }
    if (!error && values[INDEX_KEY_SNAPLEN]
        && (!parse_size(values[INDEX_KEY_SNAPLEN], &snaplen)
            || snaplen < 14 || snaplen > 65535)) {
        error = xasprintf("snaplen: bad value \"%s\" (14 to 65535)",
                          values[INDEX_KEY_SNAPLEN]);
    }
    if (!error && !index_store_find(values[INDEX_KEY_STORE])) {
        /* Allowed: the store may be configured after the flow. */
        VLOG_WARN("gpu_index: store %s is not open yet (set other_config:"
                  STORE_KEY_PREFIX "%s); until it is, packets pass "
                  "unrecorded", values[INDEX_KEY_STORE],
                  values[INDEX_KEY_STORE]);
    }
    return error;
}

static atomic_uint64_t n_unrecorded = 0;

static void
index_run(const char *args, struct gpu_service_batch *b)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    const char *values[ARRAY_SIZE(index_keys)];
    char buf[GPU_SERVICE_ARGS_MAX + 1];
    uint64_t snaplen = UINT32_MAX, ts_ns;
    struct index_store *st;
    char *error;

    error = gpu_service_args_split(args, index_keys, values, buf,
                                   sizeof buf);
    st = error ? NULL : index_store_find(values[INDEX_KEY_STORE]);
    if (!st) {
        gpu_counter_add(&n_unrecorded, b->n);
        VLOG_WARN_RL(&rl, "gpu_index(%s): %s; packets pass unrecorded", args,
                     error ? error : "store not open");
        free(error);
        return;
    }
    if (values[INDEX_KEY_SNAPLEN]) {
        parse_size(values[INDEX_KEY_SNAPLEN], &snaplen);
    }
    ts_ns = time_wall_usec() * 1000;
    for (size_t i = 0; i < b->n; i++) {
        struct dp_packet *packet = b->pkts[i].packet;
        uint32_t len = dp_packet_size(packet);

        /* A full ring drops and counts inside the recorder; the packet
         * itself always goes on. */
        gpu_index_recorder_submit_capped(
            st->recorder, dp_packet_data(packet), MIN(len, snaplen), len,
            ts_ns, odp_to_u32(packet->md.in_port.odp_port));
    }
}

const struct gpu_service_impl gpu_index_service_impl = {
    .type = GPU_SERVICE_INDEX,
    .stage_payloads = false,
    .check = index_check,
    .run = index_run,
};

/* -------------------------------------------------------------- appctl. */

static void
index_format_store(struct ds *s, struct index_store *st)
{
    struct gpu_index_recorder_stats rs;
    double secs = MAX(1, time_wall_msec() - st->created_ms) / 1000.0;

    gpu_index_recorder_get_stats(st->recorder, &rs);
    ds_put_format(s, "store %s: %s\n", st->name, st->config);
    ds_put_format(s, "  index builder: %s\n", rs.backend);
    ds_put_format(s, "  packets: %"PRIu64" submitted, %"PRIu64" recorded, %"
                  PRIu64" dropped (ring full)\n", rs.submitted, rs.recorded,
                  rs.dropped);
    ds_put_format(s, "  records per second: %.0f since opened, index build "
                  "%.1f M rows/s\n", rs.recorded / secs,
                  rs.build_ns ? rs.build_rows * 1e3 / rs.build_ns : 0.0);
    ds_put_format(s, "  segments: %"PRIu64" written, %"PRIu64" deleted\n",
                  rs.segments_written, rs.segments_deleted);
    ds_put_format(s, "  on disk: %"PRIu64" bytes of pcap, %"PRIu64" bytes of "
                  "index (%.1f%%)\n", rs.pcap_bytes, rs.index_bytes,
                  rs.pcap_bytes ? 100.0 * rs.index_bytes / rs.pcap_bytes
                                : 0.0);
}

static void
gpu_index_show_cmd(struct unixctl_conn *conn, int argc, const char *argv[],
                   void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    struct index_store *st;
    bool found = false;
    uint64_t unrecorded;

    ovs_mutex_lock(&index_mutex);
    CMAP_FOR_EACH (st, node, &stores) {
        if (argc < 2 || !strcmp(st->name, argv[1])) {
            index_format_store(&s, st);
            found = true;
        }
    }
    ovs_mutex_unlock(&index_mutex);
    if (argc >= 2 && !found) {
        unixctl_command_reply_error(conn, "no such store");
    } else {
        atomic_read_relaxed(&n_unrecorded, &unrecorded);
        if (argc < 2) {
            ds_put_format(&s, "packets passed unrecorded (store not open): "
                          "%"PRIu64"\n", unrecorded);
        }
        unixctl_command_reply(conn, ds_cstr(&s));
    }
    ds_destroy(&s);
}

/* gpu-index/query STORE EXPR [--pcap FILE] [--limit N] */
static void
gpu_index_query_cmd(struct unixctl_conn *conn, int argc, const char *argv[],
                    void *aux OVS_UNUSED)
{
    const char *pcap = NULL;
    uint64_t limit = 0;
    struct index_store *st;
    unsigned int n_skipped = 0;
    char *text = NULL;
    size_t size = 0;
    char err[256];
    int64_t n;
    FILE *out;

    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--pcap") && i + 1 < argc) {
            pcap = argv[++i];
        } else if (!strcmp(argv[i], "--limit") && i + 1 < argc
                   && parse_size(argv[i + 1], &limit)) {
            i++;
        } else {
            unixctl_command_reply_error(conn, "usage: gpu-index/query STORE "
                                        "EXPR [--pcap FILE] [--limit N]");
            return;
        }
    }

    ovs_mutex_lock(&index_mutex);
    st = index_store_find(argv[1]);
    if (!st) {
        ovs_mutex_unlock(&index_mutex);
        unixctl_command_reply_error(conn, "no such store");
        return;
    }
    /* Close the open segment, so that the query sees every packet
     * recorded so far. */
    gpu_index_recorder_flush(st->recorder);
    out = open_memstream(&text, &size);
    n = gpu_index_store_query(st->dir, argv[2], out, pcap, limit,
                              &n_skipped, err, sizeof err);
    ovs_mutex_unlock(&index_mutex);
    if (n >= 0) {
        fprintf(out, "%"PRId64" packets%s", n,
                limit && (uint64_t) n >= limit ? " (limit reached)" : "");
        if (n_skipped) {
            fprintf(out, ", %u segments skipped", n_skipped);
        }
        fputc('\n', out);
    }
    fclose(out);
    if (n < 0) {
        unixctl_command_reply_error(conn, err);
    } else {
        unixctl_command_reply(conn, text);
    }
    free(text);
}

void
gpu_index_service_init(void)
{
    unixctl_command_register("gpu-index/show", "[store]", 0, 1,
                             gpu_index_show_cmd, NULL);
    unixctl_command_register("gpu-index/query",
                             "store expr [--pcap file] [--limit n]", 2, 6,
                             gpu_index_query_cmd, NULL);
}
