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
 * so they survive restarts.  DIR is relative to other_config:gpu-index-dir
 * (default "gpu-index" in OVS's database directory) and may not leave it,
 * the way netdev-dpdk confines vhost-sock-dir: whoever may write
 * other_config should not thereby choose any path of a process that runs
 * as root.  Each is a gpu_index_recorder: the PMD thread
 * only copies frames into its staging ring (never blocking: a full ring
 * drops and counts), and the recorder's own thread writes pcap segments
 * and builds their bitmap indexes on the plugin's backend.  Queries from
 * ovs-appctl run on the compressed indexes of the segments on disk, in a
 * thread of their own (one at a time): a query over millions of records
 * takes seconds, which the main loop must not spend; the main thread
 * answers the unixctl connection once the query is done.
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
#include <unistd.h>

#include "cmap.h"
#include "dirs.h"
#include "dp-packet.h"
#include "hash.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/shash.h"
#include "openvswitch/vlog.h"
#include "ovs-rcu.h"
#include "ovs-thread.h"
#include "seq.h"
#include "smap.h"
#include "timeval.h"
#include "unixctl.h"
#include "util.h"

#include "gpu_services/index/gpu-index.h"
#include "ovs_plugin/gpu-actions.h"

VLOG_DEFINE_THIS_MODULE(gpu_index_service);

#define STORE_KEY_PREFIX "gpu-index-store-"
#define BASE_KEY "gpu-index-dir"
#define BASE_DEFAULT "gpu-index"

struct index_store {
    struct cmap_node node;      /* In 'stores', by hash of 'name'. */
    char *name;
    char *config;               /* other_config value. */
    char *dir;
    uint32_t overload_snaplen;  /* 0: drops when the ring is full. */
    long long int created_ms;
    struct gpu_index_recorder *recorder;
    struct ovs_refcount ref;    /* The map's, and a running query's. */
    atomic_uint64_t logged_fallbacks;   /* Build fallbacks logged so far. */
    atomic_uint64_t logged_unwritten;   /* Unwritten records logged. */
    atomic_bool logged_recovery;        /* Its recovery log, once ready. */
};

static struct cmap stores = CMAP_INITIALIZER;
static struct ovs_mutex index_mutex = OVS_MUTEX_INITIALIZER;
static struct shash seen_config OVS_GUARDED_BY(index_mutex)
    = SHASH_INITIALIZER(&seen_config);
/* The folder stores live in: absolute, without "..".  NULL until the
 * first configuration. */
static char *index_base OVS_GUARDED_BY(index_mutex);

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

/* Drops a reference to 'st' (the map's, after a grace period, or a
 * query's), and closes the store with the last. */
static void
index_store_destroy(struct index_store *st)
{
    if (st && ovs_refcount_unref(&st->ref) == 1) {
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

/* True if 'path' has a ".." component. */
static bool
path_climbs(const char *path)
{
    for (const char *p = path; (p = strstr(p, "..")); p += 2) {
        if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/')) {
            return true;
        }
    }
    return false;
}

/* Parses "DIR[,segment=N][,segment_seconds=S][,retention=SIZE]
 * [,retention_seconds=S][,snaplen=N][,encoding=wah|plwah]
 * [,index_threads=N][,ring=N][,overload_snaplen=N]" into 'cfg'
 * (whose 'dir', 'base'/DIR, points to '*dirp', malloc()'d).  Returns NULL
 * or a malloc()'d error. */
static char *
index_parse_config(const char *value, const char *base,
                   struct gpu_index_recorder_config *cfg, char **dirp)
{
    char *copy = xstrdup(value);
    char *save_ptr = NULL;
    char *item = strtok_r(copy, ",", &save_ptr);
    char *error = NULL;

    gpu_index_recorder_config_init(cfg);
    *dirp = NULL;
    if (!item || item[0] == '/' || path_climbs(item)) {
        error = xasprintf("\"%s\": expected a directory relative to "
                          "other_config:"BASE_KEY" (%s), without \"..\", "
                          "then options", value, base);
        goto out;
    }
    *dirp = xasprintf("%s/%s", base, item);
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
            } else if (!strcmp(item, "index_threads")) {
                ok = ok && v >= 1 && v <= 16;
                cfg->index_threads = v;
            } else if (!strcmp(item, "ring")) {
                /* Slots of the staging ring: milliseconds of traffic
                 * that wait for the writer. */
                ok = ok && v >= 1024 && v <= (1u << 24);
                cfg->ring_slots = v;
            } else if (!strcmp(item, "overload_snaplen")) {
                /* At most 'snaplen' (the recorder checks). */
                ok = ok && (!v || (v >= 64 && v <= 65535));
                cfg->overload_snaplen = v;
            } else {
                error = xasprintf("unknown option \"%s\" (known: segment, "
                                  "segment_seconds, retention, "
                                  "retention_seconds, snaplen, encoding, "
                                  "index_threads, ring, overload_snaplen)",
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

/* Logs what the recorder of 'st' found of a crash, once it has looked
 * (at once, or when the store it replaces has closed). */
static void
index_store_log_recovery(struct index_store *st)
{
    const char *log = gpu_index_recorder_recovery_log(st->recorder);
    bool logged;

    atomic_read_relaxed(&st->logged_recovery, &logged);
    if (!log || logged
        || !atomic_compare_exchange_strong(&st->logged_recovery, &logged,
                                           true)) {
        return;
    }
    while (*log) {
        size_t len = strcspn(log, "\n");

        VLOG_WARN("store %s: %.*s", st->name, (int) len, log);
        log += len + (log[len] == '\n');
    }
}

/* Opens store 'name' with settings 'value' in 'base'.  'replacing' is the
 * store it replaces, if any: if that one has the same folder, the new
 * recorder waits for it to close. */
static struct index_store *
index_store_create(const char *name, const char *value, const char *base,
                   const struct index_store *replacing, char **errorp)
{
    struct gpu_index_recorder_config cfg;
    struct index_store *st;
    char err[256];
    char *dir;
    int device, status;

    *errorp = index_parse_config(value, base, &cfg, &dir);
    if (*errorp) {
        return NULL;
    }
    cfg.backend = gpu_services_get_backend(&device)
                  ? GPU_INDEX_BACKEND_CUDA : GPU_INDEX_BACKEND_CPU;
    cfg.wait_for_lock = replacing && !strcmp(replacing->dir, dir);
    st = xzalloc(sizeof *st);
    status = gpu_index_recorder_create(&cfg, &st->recorder, err, sizeof err);
    if ((gpu_service_is_device_error(status) || status == GPU_ERR_NO_DEVICE)
        && cfg.backend == GPU_INDEX_BACKEND_CUDA) {
        /* The device refused the builder (a busy or unwritable folder is
         * no reason to try the CPU). */
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
    st->overload_snaplen = cfg.overload_snaplen;
    st->created_ms = time_wall_msec();
    ovs_refcount_init(&st->ref);
    index_store_log_recovery(st);
    return st;
}

/* Resolves other_config:gpu-index-dir: absolute, or relative to OVS's
 * database directory.  Returns NULL or a malloc()'d error. */
static char *
index_base_resolve(const struct smap *other_config, char **basep)
{
    const char *value = smap_get_def(other_config, BASE_KEY, BASE_DEFAULT);

    *basep = NULL;
    if (!value[0] || path_climbs(value)) {
        return xasprintf("other_config:"BASE_KEY"=\"%s\": expected a "
                         "directory without \"..\"", value);
    }
    *basep = (value[0] == '/' ? xstrdup(value)
              : xasprintf("%s/%s", ovs_dbdir(), value));
    return NULL;
}

/* Replaces (or adds, if 'old' is NULL) store 'name'.  The PMD threads
 * record into the old store until the new one is in the map; the old one
 * closes after a grace period, in the RCU thread (closing a segment
 * builds its index and syncs it to disk), and a new recorder of the same
 * folder waits for that before it touches the folder. */
static void
index_store_replace(const char *name, struct index_store *old,
                    const char *value, const char *base)
{
    struct index_store *st;
    char *error;

    st = index_store_create(name, value, base, old, &error);
    if (!st) {
        VLOG_WARN("other_config:"STORE_KEY_PREFIX"%s: %s; %s", name, error,
                  old ? "keeping the previous store settings"
                      : "the store is not open");
        free(error);
        return;
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

void
gpu_index_service_set_config(const struct smap *other_config)
{
    struct smap_node *node;
    struct shash_node *snode;
    bool base_changed;
    char *base, *error;

    ovs_mutex_lock(&index_mutex);
    error = index_base_resolve(other_config, &base);
    if (error) {
        VLOG_WARN("%s; %s", error, index_base ? "keeping the previous one"
                                              : "using the default");
        free(error);
        free(base);
        base = index_base ? xstrdup(index_base)
                          : xasprintf("%s/"BASE_DEFAULT, ovs_dbdir());
    }
    base_changed = index_base && strcmp(base, index_base);
    if (base_changed) {
        VLOG_INFO("stores now in %s (were in %s)", base, index_base);
    }

    SMAP_FOR_EACH (node, other_config) {
        struct gpu_index_recorder_config cfg;
        const char *name, *seen;
        struct index_store *old;
        char *dir;

        if (strncmp(node->key, STORE_KEY_PREFIX, strlen(STORE_KEY_PREFIX))) {
            continue;
        }
        name = node->key + strlen(STORE_KEY_PREFIX);
        seen = shash_find_data(&seen_config, name);
        if (seen && !strcmp(seen, node->value) && !base_changed) {
            continue;
        }
        free(shash_replace(&seen_config, name, xstrdup(node->value)));
        if (!name[0]) {
            VLOG_WARN("other_config:%s: the store needs a name after \"%s\"",
                      node->key, STORE_KEY_PREFIX);
            continue;
        }
        old = index_store_find(name);
        /* Settings that do not parse never close the store that runs. */
        error = index_parse_config(node->value, base, &cfg, &dir);
        free(dir);
        if (error) {
            VLOG_WARN("other_config:%s: %s; %s", node->key, error,
                      old ? "keeping the previous store settings"
                          : "the store is not open");
            free(error);
            if (old && base_changed) {
                /* The running settings, in the new base folder. */
                char *config = xstrdup(old->config);

                index_store_replace(name, old, config, base);
                free(config);
            }
            continue;
        }
        index_store_replace(name, old, node->value, base);
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
    free(index_base);
    index_base = base;
    ovs_mutex_unlock(&index_mutex);
}

/* ------------------------------------------------------------- Queries. */

/* The query that runs, if any (one at a time).  The main thread creates
 * it and, once 'done', answers 'conn' and frees it; the query's thread
 * only reads its arguments and writes its results before 'done'. */
struct index_query {
    struct unixctl_conn *conn;
    struct index_store *st;     /* Holds a reference. */
    char *expr;
    char *pcap;                 /* --pcap FILE, or NULL. */
    uint64_t limit;
    long long int started_ms;
    pthread_t thread;

    /* Results. */
    char *text;                 /* The reply, or the error if 'n' < 0. */
    int64_t n;
    atomic_bool done;
};

static struct index_query *running_query; /* Main thread only. */
static pthread_t main_thread;
static struct seq *query_seq;   /* Changes when a query is done. */
static uint64_t query_seq_seen;

/* Lines of matches a query's answer holds at most.  The main thread
 * sends the answer (it alone may answer unixctl), and encoding it as JSON
 * takes about a second per 200 MB: 2.4 M lines held the main loop for
 * 1.4 s on the development VM.  100,000 lines are ~9 MB. */
#define QUERY_MAX_LINES 100000

/* Cuts 'text' ('*size' bytes) after its QUERY_MAX_LINES'th line.  Returns
 * true if it did. */
static bool
index_query_cut_lines(char *text, size_t *size)
{
    char *p = text, *end = text + *size;

    for (int i = 0; i < QUERY_MAX_LINES; i++) {
        p = p < end ? memchr(p, '\n', end - p) : NULL;
        if (!p) {
            return false;
        }
        p++;
    }
    if (p == end) {
        return false;
    }
    *size = p - text;
    return true;
}

static void *
index_query_main(void *q_)
{
    struct index_query *q = q_;
    unsigned int n_skipped = 0;
    bool lines_cut;
    size_t size = 0;
    char err[256];
    int slow_ms;
    FILE *out;

    /* This thread reads nothing RCU protects (the store is referenced),
     * so it never holds up a grace period however long it runs. */
    ovsrcu_quiesce_start();
    slow_ms = gpu_service_test_knob(GPU_KNOB_INDEX_QUERY_SLOW);
    if (slow_ms > 0) {
        usleep((useconds_t) slow_ms * 1000);
    }
    /* Close the open segment, so that the query sees every packet
     * recorded so far. */
    gpu_index_recorder_flush(q->st->recorder);
    out = open_memstream(&q->text, &size);
    q->n = gpu_index_store_query(q->st->dir, q->expr, out, q->pcap,
                                 q->limit, &n_skipped, err, sizeof err);
    fflush(out);
    lines_cut = index_query_cut_lines(q->text, &size);
    fseeko(out, size, SEEK_SET);
    if (q->n >= 0) {
        fprintf(out, "%"PRId64" packets%s", q->n,
                q->limit && (uint64_t) q->n >= q->limit
                ? " (limit reached)" : "");
        if (n_skipped) {
            fprintf(out, ", %u segments skipped", n_skipped);
        }
        if (lines_cut) {
            fprintf(out, ", lines after the first %d left out (use --pcap "
                    "FILE or --limit N)", QUERY_MAX_LINES);
        }
        fputc('\n', out);
    }
    fclose(out);
    if (q->n < 0) {
        free(q->text);
        q->text = xstrdup(err);
    }
    atomic_store(&q->done, true);
    seq_change(query_seq);
    return NULL;
}

/* Main thread: answers the query that ran, once it is done. */
static void
index_query_finish(void)
{
    struct index_query *q = running_query;
    bool done;

    if (!q) {
        return;
    }
    atomic_read(&q->done, &done);
    if (!done) {
        return;
    }
    xpthread_join(q->thread, NULL);
    if (q->n < 0) {
        unixctl_command_reply_error(q->conn, q->text);
    } else {
        unixctl_command_reply(q->conn, q->text);
    }
    VLOG_DBG("query of store %s took %lld ms", q->st->name,
             time_msec() - q->started_ms);
    ovsrcu_postpone(index_store_destroy, q->st);
    free(q->text);
    free(q->expr);
    free(q->pcap);
    free(q);
    running_query = NULL;
}

/* gpu-index/query STORE EXPR [--pcap FILE] [--limit N] */
static void
gpu_index_query_cmd(struct unixctl_conn *conn, int argc, const char *argv[],
                    void *aux OVS_UNUSED)
{
    const char *pcap = NULL;
    struct index_query *q;
    struct index_store *st;
    uint64_t limit = 0;

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
    if (running_query) {
        char *msg = xasprintf("a query is running (of store %s, for %lld "
                              "ms): try again when it is done",
                              running_query->st->name,
                              time_msec() - running_query->started_ms);

        unixctl_command_reply_error(conn, msg);
        free(msg);
        return;
    }

    ovs_mutex_lock(&index_mutex);
    st = index_store_find(argv[1]);
    if (st) {
        ovs_refcount_ref(&st->ref);
    }
    ovs_mutex_unlock(&index_mutex);
    if (!st) {
        unixctl_command_reply_error(conn, "no such store");
        return;
    }
    q = xzalloc(sizeof *q);
    q->conn = conn;
    q->st = st;
    q->expr = xstrdup(argv[2]);
    q->pcap = nullable_xstrdup(pcap);
    q->limit = limit;
    q->started_ms = time_msec();
    atomic_init(&q->done, false);
    query_seq_seen = seq_read(query_seq);
    running_query = q;
    q->thread = ovs_thread_create("gpu_index_query", index_query_main, q);
}

/* The timers hook runs in every PMD thread too; only the main thread may
 * answer unixctl connections. */
static bool
in_main_thread(void)
{
    return pthread_equal(pthread_self(), main_thread);
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
    /* One ring reservation for the whole batch.  A full ring drops and
     * counts inside the recorder; the packets themselves always go on. */
    for (size_t i = 0; i < b->n; ) {
        struct gpu_index_frame frames[NETDEV_MAX_BURST];
        size_t k;

        for (k = 0; k < ARRAY_SIZE(frames) && i < b->n; k++, i++) {
            struct dp_packet *packet = b->pkts[i].packet;
            uint32_t len = dp_packet_size(packet);

            frames[k] = (struct gpu_index_frame) {
                .data = dp_packet_data(packet),
                .cap_len = MIN(len, snaplen),
                .len = len,
                .in_port = odp_to_u32(packet->md.in_port.odp_port),
            };
        }
        gpu_index_recorder_submit_batch(st->recorder, frames, k, ts_ns);
    }
}

/* Index builds happen in the recorders' own threads, inside the library,
 * which cannot log: the timer hook says when a device failed some. */
static void
index_timers_run(const struct gpu_service_emitter *emitter OVS_UNUSED)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    static atomic_llong next_ms = 0;
    long long int now = time_msec(), next;
    struct index_store *st;

    if (in_main_thread() && running_query) {
        index_query_finish();
    }
    /* Ten times a second is enough, by whichever thread comes first. */
    atomic_read_relaxed(&next_ms, &next);
    if (now < next
        || !atomic_compare_exchange_strong(&next_ms, &next, now + 100)) {
        return;
    }
    CMAP_FOR_EACH (st, node, &stores) {
        struct gpu_index_recorder_stats rs;
        uint64_t logged;

        index_store_log_recovery(st);
        gpu_index_recorder_get_stats(st->recorder, &rs);
        atomic_read_relaxed(&st->logged_fallbacks, &logged);
        if (rs.build_fallbacks > logged
            && atomic_compare_exchange_strong(&st->logged_fallbacks,
                                              &logged, rs.build_fallbacks)) {
            VLOG_WARN_RL(&rl, "store %s: %"PRIu64" index builds failed on "
                         "the device; built on the CPU", st->name,
                         rs.build_fallbacks - logged);
        }
        atomic_read_relaxed(&st->logged_unwritten, &logged);
        if (rs.records_unwritten > logged
            && atomic_compare_exchange_strong(&st->logged_unwritten,
                                              &logged,
                                              rs.records_unwritten)) {
            VLOG_WARN_RL(&rl, "store %s: %"PRIu64" records could not be "
                         "written (%s); the segments keep the records "
                         "before the failure", st->name,
                         rs.records_unwritten - logged,
                         ovs_strerror(rs.last_write_error));
        }
    }
}

/* Main thread: wakes the main loop when the running query is done. */
static void
index_timers_wait(void)
{
    if (in_main_thread() && running_query) {
        seq_wait(query_seq, query_seq_seen);
    }
}

void
gpu_index_service_inject_store_fault(enum gpu_index_store_fault fault,
                                     uint64_t value)
{
    struct index_store *st;

    CMAP_FOR_EACH (st, node, &stores) {
        switch (fault) {
        case GPU_INDEX_DISK_FULL:
            gpu_index_recorder_inject_disk_full(st->recorder, value);
            break;
        case GPU_INDEX_DISK_RATE:
            gpu_index_recorder_inject_disk_rate(st->recorder, value);
            break;
        case GPU_INDEX_WRITER_STOP:
            gpu_index_recorder_pause(st->recorder, value != 0);
            break;
        }
    }
}

void
gpu_index_service_inject_fault(int error, unsigned int n)
{
    struct index_store *st;

    CMAP_FOR_EACH (st, node, &stores) {
        gpu_index_recorder_inject_fault(st->recorder, error, n);
    }
}

const struct gpu_service_impl gpu_index_service_impl = {
    .type = GPU_SERVICE_INDEX,
    .check = index_check,
    .run = index_run,
    .timers_run = index_timers_run,
    .timers_wait = index_timers_wait,
};

/* -------------------------------------------------------------- appctl. */

static void
index_format_store(struct ds *s, struct index_store *st)
{
    struct gpu_index_recorder_stats rs;
    double secs = MAX(1, time_wall_msec() - st->created_ms) / 1000.0;

    gpu_index_recorder_get_stats(st->recorder, &rs);
    ds_put_format(s, "store %s: %s\n", st->name, st->config);
    ds_put_format(s, "  folder: %s\n", st->dir);
    ds_put_format(s, "  index builder: %s\n", rs.backend);
    ds_put_format(s, "  packets: %"PRIu64" submitted, %"PRIu64" recorded, %"
                  PRIu64" dropped (ring full)\n", rs.submitted, rs.recorded,
                  rs.dropped);
    if (st->overload_snaplen) {
        ds_put_format(s, "  kept short under load: %"PRIu64" records at %"
                      PRIu32" bytes (ring more than 3/4 full)\n",
                      rs.squeezed, st->overload_snaplen);
    }
    ds_put_format(s, "  records per second: %.0f since opened, index build "
                  "%.1f M rows/s\n", rs.recorded / secs,
                  rs.build_ns ? rs.build_rows * 1e3 / rs.build_ns : 0.0);
    ds_put_format(s, "  segments: %"PRIu64" written, %"PRIu64" deleted\n",
                  rs.segments_written, rs.segments_deleted);
    /* Time the ring could not drain: drops then are the indexer's. */
    ds_put_format(s, "  writer waited for the indexer: %.3f s (%"PRIu64
                  " segment ends)\n", rs.writer_wait_ns / 1e9,
                  rs.writer_waits);
    ds_put_format(s, "  writer waited for the disk: %.3f s (%"PRIu64
                  " times)\n", rs.disk_wait_ns / 1e9, rs.disk_waits);
    if (rs.records_unwritten || rs.last_write_error) {
        ds_put_format(s, "  disk errors: %"PRIu64" records not written "
                      "(%s)\n", rs.records_unwritten,
                      ovs_strerror(rs.last_write_error));
    }
    ds_put_format(s, "  indexer: %.3f s building, %.3f s syncing pcap "
                  "files, %.3f s writing index files\n", rs.build_ns / 1e9,
                  rs.sync_ns / 1e9, rs.index_write_ns / 1e9);
    ds_put_format(s, "  device faults: %"PRIu64" index builds done on the "
                  "CPU\n", rs.build_fallbacks);
    if (rs.segments_recovered || rs.segments_set_aside) {
        ds_put_format(s, "  left by a crash: %"PRIu64" segments recovered "
                      "(%"PRIu64" records, %"PRIu64" bytes cut short), %"
                      PRIu64" set aside\n", rs.segments_recovered,
                      rs.records_recovered, rs.bytes_cut,
                      rs.segments_set_aside);
        const char *log = gpu_index_recorder_recovery_log(st->recorder);
        while (log && *log) {
            size_t len = strcspn(log, "\n");

            ds_put_format(s, "    %.*s\n", (int) len, log);
            log += len + (log[len] == '\n');
        }
    }
    ds_put_format(s, "  on disk: %"PRIu64" bytes of pcap, %"PRIu64" bytes of "
                  "index (%.1f%%)\n", rs.pcap_bytes, rs.index_bytes,
                  rs.pcap_bytes ? 100.0 * rs.index_bytes / rs.pcap_bytes
                                : 0.0);
    if (running_query && !strcmp(running_query->st->name, st->name)) {
        ds_put_format(s, "  query: running for %lld ms: %s\n",
                      time_msec() - running_query->started_ms,
                      running_query->expr);
    }
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

void
gpu_index_service_init(void)
{
    main_thread = pthread_self();
    query_seq = seq_create();
    unixctl_command_register("gpu-index/show", "[store]", 0, 1,
                             gpu_index_show_cmd, NULL);
    unixctl_command_register("gpu-index/query",
                             "store expr [--pcap file] [--limit n]", 2, 6,
                             gpu_index_query_cmd, NULL);
}
