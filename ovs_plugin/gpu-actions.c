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

/* The executor of GPU service actions: see gpu-actions.h. */

#include <config.h>

#include "ovs_plugin/gpu-actions.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <time.h>

#include "coverage.h"
#include "dp-packet.h"
#include "dpdk.h"
#include "dpif-netdev.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/vlog.h"
#include "ovs-atomic.h"
#include "ovs-thread.h"
#include "packets.h"
#include "random.h"
#include "timeval.h"
#include "unixctl.h"
#include "util.h"

#include "gpu_runtime/gpu-runtime.h"

#ifdef DPDK_NETDEV
#include <rte_eal_memconfig.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_memory.h>
#include <rte_mempool.h>
#endif

VLOG_DEFINE_THIS_MODULE(gpu_actions);

static const struct gpu_service_impl *const services[] = {
    &gpu_ids_service_impl,
    &gpu_re_encode_service_impl,
    &gpu_re_decode_service_impl,
    &gpu_index_service_impl,
    &gpu_fec_encode_service_impl,
    &gpu_fec_decode_service_impl,
};

/* The executor's totals, each thread's in a block of its own that only it
 * writes, with plain stores, and gpu_service_get_totals() sums (as OVS
 * keeps its PMD statistics): one counter that every PMD thread adds to
 * with a locked add, four a batch, makes them take turns at its cache
 * line, and each locked add waits for the thread's earlier stores.  A
 * thread's block outlives it, for the next thread to continue, so the
 * sums never go back. */
struct totals_block {
    struct ovs_list node;           /* In 'totals_blocks'. */
    bool in_use;                    /* A thread has it. */
    struct gpu_thread_counter n_batches;
    struct gpu_thread_counter n_packets;
    struct gpu_thread_counter n_dropped;
    struct gpu_thread_counter run_ns;
    struct gpu_thread_counter n_timed;
};

static struct ovs_mutex totals_mutex = OVS_MUTEX_INITIALIZER;
static struct ovs_list totals_blocks OVS_GUARDED_BY(totals_mutex)
    = OVS_LIST_INITIALIZER(&totals_blocks);
static pthread_once_t totals_once = PTHREAD_ONCE_INIT;
static pthread_key_t totals_key;
/* The calling thread's block, once it has one ('totals_key' hands it back
 * when the thread exits). */
static __thread struct totals_block *thread_totals;

static void
totals_block_release(void *block_)
{
    struct totals_block *block = block_;

    ovs_mutex_lock(&totals_mutex);
    block->in_use = false;
    ovs_mutex_unlock(&totals_mutex);
    /* A later key's destructor in this exiting thread that counts takes
     * a block again rather than write to one another thread may have. */
    thread_totals = NULL;
}

static void
totals_init(void)
{
    xpthread_key_create(&totals_key, totals_block_release);
}

/* The calling thread's totals block, found or made the first time. */
static struct totals_block *
totals_get(void)
{
    struct totals_block *block = thread_totals;
    struct totals_block *free_block = NULL;

    if (OVS_LIKELY(block)) {
        return block;
    }
    pthread_once(&totals_once, totals_init);
    ovs_mutex_lock(&totals_mutex);
    LIST_FOR_EACH (block, node, &totals_blocks) {
        if (!block->in_use) {
            free_block = block;
            break;
        }
    }
    block = free_block;
    if (!block) {
        /* A line of its own: no false sharing with another thread's. */
        block = xzalloc_cacheline(sizeof *block);
        ovs_list_push_back(&totals_blocks, &block->node);
    }
    block->in_use = true;
    ovs_mutex_unlock(&totals_mutex);
    xpthread_setspecific(totals_key, block);
    thread_totals = block;
    return block;
}

static uint64_t
monotonic_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * UINT64_C(1000000000) + ts.tv_nsec;
}

/* gpu_service_now_us()'s reading for the action call or poll this thread
 * is in: 0 outside one, CLOCK_UNREAD in one whose services have not asked
 * yet (a call reads the clock only if a service needs the time).  A call
 * nested in another (a held batch's next actions run another service)
 * keeps the outer call's reading.  The reading is time_usec()'s, which
 * the tests' "time/warp" moves, not the executor's monotonic_ns() for
 * its statistics. */
#define CLOCK_UNREAD (-1)
static __thread long long int thread_now_us;

long long int
gpu_service_now_us(void)
{
    long long int now = thread_now_us;

    if (OVS_LIKELY(now > 0)) {
        return now;
    }
    now = time_usec();
    if (thread_now_us == CLOCK_UNREAD) {
        thread_now_us = now;
    }
    return now;
}

void
gpu_service_clock_forget(void)
{
    if (thread_now_us) {
        thread_now_us = CLOCK_UNREAD;
    }
}

/* The executor times one batch in this many, picked at random, for
 * gpu/show's "service call latency": a time taken costs two clock reads,
 * ~60 ns a batch on the H200 machine. */
#define TIMED_ONE_IN 8

/* Whether to time the batch about to run. */
static bool
gpu_actions_time_this(void)
{
    return !(random_uint32() % TIMED_ONE_IN);
}

/* Starts a call's clock unless an outer call did; returns whether this
 * call must end it with gpu_service_clock_end(). */
static bool
gpu_service_clock_start(void)
{
    if (thread_now_us) {
        return false;
    }
    thread_now_us = CLOCK_UNREAD;
    return true;
}

static void
gpu_service_clock_end(bool started)
{
    if (started) {
        thread_now_us = 0;
    }
}

static const struct gpu_service_impl *
gpu_actions_find(enum gpu_service_type type)
{
    for (size_t i = 0; i < ARRAY_SIZE(services); i++) {
        if (services[i]->type == type) {
            return services[i];
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- Parse. */

void
gpu_service_parse_frame(const struct dp_packet *packet,
                        struct gpu_frame_l4 *l4)
{
    ovs_be32 packet_type = packet->packet_type;
    enum gpu_frame_kind kind;

    if (packet_type == htonl(PT_ETH)) {
        kind = GPU_FRAME_ETH;
    } else if (packet_type == htonl(PT_IPV4)) {
        kind = GPU_FRAME_IPV4;
    } else if (packet_type == htonl(PT_IPV6)) {
        kind = GPU_FRAME_IPV6;
    } else {
        *l4 = (struct gpu_frame_l4) { .is_ip = false };
        return;
    }
    gpu_frame_parse(dp_packet_data(packet), dp_packet_size(packet), kind,
                    l4);
}

void
gpu_service_parse_packet(struct dp_packet *packet,
                         struct gpu_service_packet *p)
{
    p->packet = packet;
    gpu_service_parse_frame(packet, &p->l4);
}

/* ------------------------------------------------------------ Arguments. */

char *
gpu_service_args_split(const char *args, const char *const keys[],
                       const char *values[], char *buf, size_t buf_size)
{
    size_t n_keys = 0;
    char *item, *save_ptr = NULL;

    while (keys[n_keys]) {
        values[n_keys++] = NULL;
    }
    if (strlen(args) >= buf_size) {
        return xstrdup("arguments too long");
    }
    strcpy(buf, args);
    for (item = strtok_r(buf, ",", &save_ptr); item;
         item = strtok_r(NULL, ",", &save_ptr)) {
        char *eq = strchr(item, '=');
        size_t name_len = eq ? eq - item : strlen(item);
        size_t i;

        for (i = 0; i < n_keys; i++) {
            size_t key_len = strcspn(keys[i], "=");
            bool takes_value = keys[i][key_len] == '=';

            if (key_len == name_len && !strncmp(keys[i], item, name_len)) {
                if (takes_value != (eq != NULL)) {
                    return xasprintf(takes_value
                                     ? "\"%.*s\" needs a value"
                                     : "\"%.*s\" takes no value",
                                     (int) name_len, item);
                }
                if (values[i]) {
                    return xasprintf("\"%.*s\" given twice",
                                     (int) name_len, item);
                }
                values[i] = eq ? eq + 1 : "";
                break;
            }
        }
        if (i == n_keys) {
            return xasprintf("unknown argument \"%.*s\"",
                             (int) name_len, item);
        }
    }
    return NULL;
}

/* --------------------------------------------------------- Device faults. */

/* Injections left per target, and the error each fails with. */
static atomic_int fault_count[GPU_FAULT_N_TARGETS];
static atomic_int fault_error[GPU_FAULT_N_TARGETS];

/* Test only: see gpu-actions.h.  "gpu/inject-fault NAME VALUE" sets
 * knob NAME; the message says what the value does. */
static const struct {
    const char *name;
    const char *what;
} knobs[GPU_KNOB_N] = {
    [GPU_KNOB_IDS_SLOW] = { "ids-slow",
                            "gpu_ids scans complete %d microseconds late" },
    [GPU_KNOB_RE_SLOW] = { "re-slow",
                           "re_encode chunking calls complete %d "
                           "microseconds late" },
    [GPU_KNOB_FEC_SLOW] = { "fec-slow",
                            "fec coding calls complete %d microseconds "
                            "late" },
    [GPU_KNOB_FEC_LOSS] = { "fec-loss",
                            "fec_decode discards %d per million coded "
                            "frames" },
    [GPU_KNOB_INDEX_QUERY_SLOW] = { "index-query-slow",
                                    "gpu-index queries start %d "
                                    "milliseconds late" },
    [GPU_KNOB_PKT_HEAP] = { "pkt-heap",
                            "one packet in %d that the services make "
                            "comes from the heap (0: none)" },
    [GPU_KNOB_IDS_ALERT_HOLD] = { "ids-alert-hold",
                                  "alert-mode gpu_ids holds its batches "
                                  "for their scan: %d" },
    [GPU_KNOB_RE_COPY] = { "re-copy",
                           "re_encode copies every gathered payload: %d" },
    [GPU_KNOB_IDS_NULL_SCAN] = { "ids-null-scan",
                                 "gpu_ids scans nothing, every gathered "
                                 "packet passes: %d" },
    [GPU_KNOB_FEC_STALL] = { "fec-stall",
                             "fec batches stall %d microseconds after "
                             "closing groups" },
};
static atomic_int knob_values[GPU_KNOB_N];

int
gpu_service_test_knob(enum gpu_service_knob knob)
{
    int value;

    atomic_read_relaxed(&knob_values[knob], &value);
    return value;
}

/* True if a device call of 'target' (a service that holds batches:
 * gpu_ids or re_encode) started at 'submit_us' (gpu_service_now_us())
 * must not be seen done yet: "ids-slow" and "re-slow". */
static bool
gpu_service_call_slowed(enum gpu_fault_target target,
                        long long int submit_us)
{
    int us = gpu_service_test_knob(target == GPU_FAULT_RE
                                   ? GPU_KNOB_RE_SLOW : GPU_KNOB_IDS_SLOW);

    return OVS_UNLIKELY(us) && gpu_service_now_us() - submit_us < us;
}

int
gpu_service_fault_take(enum gpu_fault_target target)
{
    int n;

    atomic_read_relaxed(&fault_count[target], &n);
    while (n > 0) {
        if (atomic_compare_exchange_weak(&fault_count[target], &n, n - 1)) {
            int error;

            atomic_read_relaxed(&fault_error[target], &error);
            return error;
        }
    }
    return 0;
}

/* "gpu/inject-fault index-disk-full BYTES|off", "index-disk-rate MB|off"
 * and "index-writer-stop 1|0": a disk or a writer that falls behind, for
 * every open gpu_index store.  Returns false if 'argv[1]' is none of
 * them. */
static bool
index_store_fault_cmd(struct unixctl_conn *conn, int argc,
                      const char *argv[])
{
    static const struct {
        const char *name, *usage;
        enum gpu_index_store_fault fault;
        unsigned long long int max; /* Largest value. */
        uint64_t unit;              /* Bytes of one unit of the value. */
        uint64_t off;               /* The value of "off" (also 0's, if
                                     * that is 0). */
        const char *on_msg, *off_msg;
    } faults[] = {
        { "index-disk-full", "BYTES|off", GPU_INDEX_DISK_FULL,
          UINT64_MAX - 1, 1, UINT64_MAX,
          "gpu_index stores' pcap writes fail after %llu more bytes (no "
          "space left on device)", "gpu_index stores' disks have room again" },
        { "index-disk-rate", "MB|off", GPU_INDEX_DISK_RATE,
          UINT64_MAX / 1000000, 1000000, 0,
          "gpu_index stores' disks write at most %llu MB a second",
          "gpu_index stores' disks write as fast as they can" },
        { "index-writer-stop", "1|0", GPU_INDEX_WRITER_STOP, 1, 1, 0,
          "gpu_index stores' writers take no records off their rings",
          "gpu_index stores' writers take records off their rings again" },
    };

    for (size_t i = 0; i < ARRAY_SIZE(faults); i++) {
        unsigned long long int n = 0;
        bool ok = argc == 3, off = ok && !strcmp(argv[2], "off");

        if (strcmp(argv[1], faults[i].name)) {
            continue;
        }
        if (ok && !off) {
            ok = str_to_ullong(argv[2], 10, &n) && n <= faults[i].max;
            off = !n && !faults[i].off;
        }
        if (!ok) {
            char *usage = xasprintf("usage: gpu/inject-fault %s %s",
                                    faults[i].name, faults[i].usage);

            unixctl_command_reply_error(conn, usage);
            free(usage);
            return true;
        }
        gpu_index_service_inject_store_fault(faults[i].fault,
                                             off ? faults[i].off
                                                 : n * faults[i].unit);

        /* A message without a conversion ignores 'n'. */
        char *msg = off ? xstrdup(faults[i].off_msg)
                        : xasprintf(faults[i].on_msg, n);
        VLOG_INFO("test fault injected: %s", msg);
        unixctl_command_reply(conn, msg);
        free(msg);
        return true;
    }
    return false;
}

bool
gpu_service_inject_fault_cmd(struct unixctl_conn *conn, int argc,
                             const char *argv[])
{
    static const char *const names[GPU_FAULT_N_TARGETS] = {
        [GPU_FAULT_IDS] = "ids", [GPU_FAULT_RE] = "re",
        [GPU_FAULT_FEC] = "fec", [GPU_FAULT_INDEX] = "index",
    };
    static const char *const calls[GPU_FAULT_N_TARGETS] = {
        [GPU_FAULT_IDS] = "gpu_ids scans",
        [GPU_FAULT_RE] = "re_encode chunking calls",
        [GPU_FAULT_FEC] = "fec coding calls",
        [GPU_FAULT_INDEX] = "gpu_index index builds",
    };
    enum gpu_fault_target target;
    int error, n;

    if (index_store_fault_cmd(conn, argc, argv)) {
        return true;
    }
    for (enum gpu_service_knob knob = 0; knob < GPU_KNOB_N; knob++) {
        if (strcmp(argv[1], knobs[knob].name)) {
            continue;
        }
        if (argc != 3 || !str_to_int(argv[2], 10, &n) || n < 0
            || (knob == GPU_KNOB_FEC_LOSS && n > 1000000)
            || ((knob == GPU_KNOB_IDS_ALERT_HOLD
                 || knob == GPU_KNOB_RE_COPY) && n > 1)) {
            unixctl_command_reply_error(conn, "usage: gpu/inject-fault "
                                        "ids-slow|re-slow|fec-slow|fec-stall "
                                        "US | fec-loss PPM | index-query-slow "
                                        "MS | pkt-heap N | "
                                        "ids-alert-hold 0|1 | "
                                        "re-copy 0|1 | ids-null-scan 0|1");
            return true;
        }
        char *msg = xasprintf(knobs[knob].what, n);

        atomic_store_relaxed(&knob_values[knob], n);
        VLOG_INFO("test fault injected: %s", msg);
        unixctl_command_reply(conn, msg);
        free(msg);
        return true;
    }
    for (target = 0; target < GPU_FAULT_N_TARGETS; target++) {
        if (!strcmp(argv[1], names[target])) {
            break;
        }
    }
    if (target == GPU_FAULT_N_TARGETS) {
        return false;
    }
    if (argc != 4 || (strcmp(argv[2], "launch") && strcmp(argv[2], "nomem"))
        || !str_to_int(argv[3], 10, &n) || n < 0) {
        unixctl_command_reply_error(conn, "usage: gpu/inject-fault "
                                    "ids|re|fec|index launch|nomem N");
        return true;
    }
    error = !strcmp(argv[2], "launch") ? GPU_ERR_DEVICE
                                       : GPU_ERR_DEVICE_NOMEM;
    if (target == GPU_FAULT_INDEX) {
        gpu_index_service_inject_fault(error, n);
    } else {
        atomic_store_relaxed(&fault_error[target], error);
        atomic_store_relaxed(&fault_count[target], n);
    }

    char *reply = xasprintf("the next %d %s fail (%s)", n, calls[target],
                            gpu_status_string(error));
    VLOG_INFO("test fault injected: %s", reply);
    unixctl_command_reply(conn, reply);
    free(reply);
    return true;
}

/* -------------------------------------------------------------- Backend. */

static atomic_uint services_max_hold_us = 100;

void
gpu_services_set_max_hold_us(unsigned int us)
{
    atomic_store_relaxed(&services_max_hold_us, us);
}

unsigned int
gpu_services_get_max_hold_us(void)
{
    unsigned int us;

    atomic_read_relaxed(&services_max_hold_us, &us);
    return us;
}

bool
gpu_service_parse_hold_option(const char *key, const char *value,
                              unsigned int *in_flight, unsigned int *hold_us,
                              char **errorp)
{
    unsigned int n;

    *errorp = NULL;
    if (!strcmp(key, "in-flight")) {
        if (!str_to_uint(value, 10, &n) || n < 1
            || n > GPU_SERVICE_GATHERS_MAX - 1) {
            *errorp = xasprintf("in-flight must be 1 to %d, not \"%s\"",
                                GPU_SERVICE_GATHERS_MAX - 1, value);
        } else {
            *in_flight = n;
        }
        return true;
    } else if (!strcmp(key, "hold-us")) {
        if (!str_to_uint(value, 10, &n) || n > GPU_SERVICE_HOLD_US_MAX) {
            *errorp = xasprintf("hold-us must be 0 to %d, not \"%s\"",
                                GPU_SERVICE_HOLD_US_MAX, value);
        } else {
            *hold_us = n;
        }
        return true;
    }
    return false;
}

static atomic_bool services_cuda = false;
static atomic_int services_device = -1;

void
gpu_services_set_backend(bool cuda, int device)
{
    atomic_store_relaxed(&services_cuda, cuda);
    atomic_store_relaxed(&services_device, device);
}

bool
gpu_services_get_backend(int *device)
{
    bool cuda;

    atomic_read_relaxed(&services_cuda, &cuda);
    atomic_read_relaxed(&services_device, device);
    return cuda;
}

/* --------------------------------------------- Held batches and gathers. */

void
gpu_service_held_init(struct gpu_service_held *h,
                      const struct dp_packet_batch *packets,
                      const struct gpu_service_next *next)
{
    h->gathers = NULL;
    h->ready = false;
    h->packets = *packets;
    h->dp = next->dp;
    if (next->actions_len > h->actions_size) {
        free(h->actions);
        h->actions = xmalloc(next->actions_len);
        h->actions_size = next->actions_len;
    }
    if (next->actions_len) {
        memcpy(h->actions, next->actions, next->actions_len);
    }
    h->actions_len = next->actions_len;
    h->has_flow = next->flow != NULL;
    if (next->flow) {
        h->flow = *next->flow;
    }
}

/* Frees held batch 'h' (from gpu_service_holder_new_held()), whose
 * packets are gone, with its copy of the actions. */
static void
held_free(struct gpu_service_held *h)
{
    free(h->actions);
    free(h);
}

/* Sends what 'h' holds on along its saved actions through 'emitter'
 * ('service' names the sender in a log line). */
static void
held_send(struct gpu_service_held *h,
          const struct gpu_service_emitter *emitter, const char *service)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);

    if (dp_packet_batch_is_empty(&h->packets)) {
        /* Nothing to send. */
    } else if (h->dp == emitter->dp) {
        struct gpu_service_next next = {
            .dp = h->dp,
            .actions = h->actions,
            .actions_len = h->actions_len,
            .flow = h->has_flow ? &h->flow : NULL,
        };

        emitter->execute(emitter, &h->packets, &next);
    } else {
        /* A datapath thread serves one datapath, and the main thread sends
         * on all it holds before it leaves a datapath's dpif_netdev_run(),
         * so this should not happen; another datapath's port numbers would
         * mean other ports. */
        VLOG_WARN_RL(&rl, "%s: %"PRIuSIZE" held packets belong to "
                     "another datapath; dropped", service,
                     dp_packet_batch_size(&h->packets));
        dp_packet_delete_batch(&h->packets, true);
    }
}

void
gpu_service_gathers_init(struct gpu_service_gathers *gs,
                         const struct gpu_service_gather_ops *ops,
                         void *const slots[], size_t n_slots)
{
    ovs_assert(n_slots >= 2 && n_slots <= GPU_SERVICE_GATHERS_MAX);
    memset(gs, 0, sizeof *gs);
    gs->ops = ops;
    for (size_t i = 0; i < n_slots; i++) {
        gs->slots[i] = slots[i];
    }
    gs->n_slots = n_slots;
    gs->max_in_flight = 1;
}

void
gpu_service_gathers_set_max_in_flight(struct gpu_service_gathers *gs,
                                      size_t n,
                                      struct gpu_service_calls_out *shared)
{
    gs->max_in_flight = MAX(1, MIN(n, gs->n_slots - 1));
    gs->shared = shared;
}

void *
gpu_service_gathers_filling(const struct gpu_service_gathers *gs)
{
    return gs->slots[gs->filling];
}

/* Completes the oldest call in flight: waits for it if 'wait', else
 * returns false if it is not done yet. */
static bool
gathers_complete_oldest(struct gpu_service_gathers *gs, bool wait)
{
    size_t oldest = ((gs->filling + gs->n_slots - gs->n_in_flight)
                     % gs->n_slots);
    void *g = gs->slots[oldest];
    int status;

    if (!wait
        && gpu_service_call_slowed(gs->ops->target, gs->submit_us[oldest])) {
        return false;
    }
    if (wait) {
        status = gs->ops->wait(g);
        gpu_service_clock_forget();
    } else {
        status = gs->ops->poll(g);
        if (status == GPU_ERR_BUSY) {
            return false;
        }
    }
    gs->n_in_flight--;
    if (gs->counted[oldest]) {
        unsigned int orig;

        atomic_sub_relaxed(&gs->counted[oldest]->n, 1, &orig);
        gs->counted[oldest] = NULL;
    }
    gs->ops->complete(g, status);
    return true;
}

bool
gpu_service_gathers_finish(struct gpu_service_gathers *gs, bool wait)
{
    while (gs->n_in_flight) {
        if (!gathers_complete_oldest(gs, wait)) {
            return false;
        }
    }
    return true;
}

bool
gpu_service_gathers_room(struct gpu_service_gathers *gs)
{
    unsigned int n_out;

    gpu_service_gathers_finish(gs, false);
    if (gs->n_in_flight >= gs->max_in_flight) {
        return false;
    }
    if (!gs->n_in_flight || !gs->shared) {
        return true;
    }
    atomic_read_relaxed(&gs->shared->n, &n_out);
    return n_out < gs->max_in_flight;
}

/* Raises '*most' to 'n' if that is more: a racy maximum over the threads,
 * written only when it grows, rarely. */
static void
calls_out_note_most(atomic_uint *most, unsigned int n)
{
    unsigned int old;

    atomic_read_relaxed(most, &old);
    if (n > old) {
        atomic_store_relaxed(most, n);
    }
}

void
gpu_service_gathers_submit(struct gpu_service_gathers *gs)
{
    void *g = gs->slots[gs->filling];
    int status;

    if (gs->ops->is_empty(g)) {
        return;
    }
    /* The next slot must be free to fill: calls complete in the order
     * their gathers filled, the oldest first. */
    while (gs->n_in_flight >= gs->max_in_flight) {
        gathers_complete_oldest(gs, true);
    }
    status = gpu_service_fault_take(gs->ops->target);
    if (!status) {
        status = gs->ops->start(g);
    }
    if (status) {
        /* Done now (on the CPU, after a device fault), or failed: after
         * the calls before it, so that gathers still complete in
         * order. */
        gpu_service_gathers_finish(gs, true);
        gs->ops->complete(g, status);
        return;
    }
    gs->submit_us[gs->filling] = gpu_service_now_us();
    gs->counted[gs->filling] = gs->shared;
    gs->n_in_flight++;
    if (gs->shared) {
        unsigned int orig;

        atomic_add_relaxed(&gs->shared->n, 1, &orig);
        calls_out_note_most(&gs->shared->most, orig + 1);
        calls_out_note_most(&gs->shared->most_in_ring, gs->n_in_flight);
    }
    gs->filling = (gs->filling + 1) % gs->n_slots;
}

void
gpu_service_holder_init(struct gpu_service_holder *ho,
                        const struct gpu_service_holder_class *class)
{
    ovs_assert(class->held_size >= sizeof(struct gpu_service_held));
    ho->class = class;
    ovs_list_init(&ho->held);
    ho->releasing = false;
    ovs_list_init(&ho->spares);
    ho->n_spares = 0;
}

/* Held batches a holder keeps for reuse: two gathers' worth of datapath
 * batches, as many as are held at once at full load with one call in
 * flight (more calls out hold about as many, in smaller gathers). */
#define HOLDER_MAX_SPARES 64

struct gpu_service_held *
gpu_service_holder_new_held(struct gpu_service_holder *ho)
{
    if (!ovs_list_is_empty(&ho->spares)) {
        ho->n_spares--;
        return CONTAINER_OF(ovs_list_pop_front(&ho->spares),
                            struct gpu_service_held, node);
    }
    /* Zeroed: no actions buffer yet. */
    return xzalloc(ho->class->held_size);
}

void
gpu_service_holder_recycle(struct gpu_service_holder *ho,
                           struct gpu_service_held *h)
{
    if (ho->n_spares < HOLDER_MAX_SPARES) {
        ovs_list_push_front(&ho->spares, &h->node);
        ho->n_spares++;
    } else {
        held_free(h);
    }
}

void
gpu_service_holder_push(struct gpu_service_holder *ho,
                        struct gpu_service_held *h,
                        struct gpu_service_gathers *gathers)
{
    h->gathers = gathers;
    h->ready = false;
    ovs_list_push_back(&ho->held, &h->node);
    (*gpu_service_n_held_get())++;
}

void
gpu_service_holder_release(struct gpu_service_holder *ho,
                           const struct gpu_service_emitter *emitter,
                           bool wait)
{
    if (ho->releasing) {
        /* Called from the actions of a batch being sent on (the same
         * service, further on, with a batch it cannot hold): the outer
         * call sends the rest. */
        return;
    }
    ho->releasing = true;
    while (!ovs_list_is_empty(&ho->held)) {
        struct gpu_service_held *h = CONTAINER_OF(ovs_list_front(&ho->held),
                                                  struct gpu_service_held,
                                                  node);

        if (!h->ready && wait) {
            /* Its payloads are in the gather whose call is out or in the
             * one filling: finish the first, then start the second. */
            gpu_service_gathers_finish(h->gathers, true);
            if (!h->ready) {
                gpu_service_gathers_submit(h->gathers);
                gpu_service_gathers_finish(h->gathers, true);
            }
        }
        if (!h->ready) {
            break;
        }
        ovs_list_remove(&h->node);
        (*gpu_service_n_held_get())--;
        /* The actions may hold packets again, at the back of the FIFO:
         * they are sent on in turn. */
        if (ho->class->prepare) {
            ho->class->prepare(h);
        }
        held_send(h, emitter, ho->class->name);
        gpu_service_holder_recycle(ho, h);
    }
    ho->releasing = false;
}

void
gpu_service_holder_destroy(struct gpu_service_holder *ho)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    struct gpu_service_held *h;
    size_t n_lost = 0;

    /* With no emitter here, what is left cannot go on. */
    LIST_FOR_EACH_POP (h, node, &ho->held) {
        n_lost += dp_packet_batch_size(&h->packets);
        dp_packet_delete_batch(&h->packets, true);
        held_free(h);
    }
    LIST_FOR_EACH_POP (h, node, &ho->spares) {
        held_free(h);
    }
    ho->n_spares = 0;
    if (n_lost) {
        VLOG_WARN_RL(&rl, "%s: thread exited with %"PRIuSIZE" held "
                     "packets; dropped", ho->class->name, n_lost);
    }
}

/* ------------------------------------------------------------- Executor. */

/* A thread's pinned staging buffer for the payloads of one batch. */
struct gpu_actions_staging {
    uint8_t *data;
    size_t size;
};

static ovsthread_key_t staging_key;

static void
staging_destroy(void *staging_)
{
    struct gpu_actions_staging *staging = staging_;

    if (staging) {
        gpu_host_free(staging->data);
        free(staging);
    }
}

/* Returns this thread's staging buffer with room for 'size' bytes, or NULL
 * if memory ran out. */
static uint8_t *
staging_get(size_t size)
{
    struct gpu_actions_staging *staging = ovsthread_getspecific(staging_key);

    if (!staging) {
        staging = xzalloc(sizeof *staging);
        ovsthread_setspecific(staging_key, staging);
    }
    if (staging->size < size) {
        size_t new_size = MAX(size, NETDEV_MAX_BURST * 2048);

        gpu_host_free(staging->data);
        staging->data = gpu_host_alloc(new_size);
        staging->size = staging->data ? new_size : 0;
    }
    return staging->data;
}

bool
gpu_service_batch_stage(struct gpu_service_batch *b, uint8_t *dst)
{
    if (!dst) {
        dst = staging_get(b->n_bytes);
        if (!dst) {
            return false;
        }
    }
    b->data = dst;
    b->offsets[0] = 0;
    for (size_t i = 0; i < b->n; i++) {
        const struct gpu_service_packet *p = &b->pkts[i];

        memcpy(dst + b->offsets[i],
               (const uint8_t *) dp_packet_data(p->packet)
               + p->l4.payload_ofs, p->l4.payload_len);
        b->offsets[i + 1] = b->offsets[i] + p->l4.payload_len;
    }
    return true;
}

size_t
gpu_service_batch_stage_in_place(struct gpu_service_batch *b, uint8_t *dst,
                                 const uint8_t **srcs)
{
    size_t n_in_place = 0;

    b->data = dst;
    b->offsets[0] = 0;
    for (size_t i = 0; i < b->n; i++) {
        const struct gpu_service_packet *p = &b->pkts[i];
        const uint8_t *payload = ((const uint8_t *) dp_packet_data(p->packet)
                                  + p->l4.payload_ofs);

        if (gpu_service_read_in_place(payload, p->l4.payload_len, true)) {
            srcs[i] = payload;
            n_in_place++;
        } else {
            srcs[i] = NULL;
            memcpy(dst + b->offsets[i], payload, p->l4.payload_len);
        }
        b->offsets[i + 1] = b->offsets[i] + p->l4.payload_len;
    }
    return n_in_place;
}

static void
gpu_actions_execute(enum gpu_service_type type, const char *args,
                    struct dp_packet_batch *batch, bool may_steal,
                    const struct gpu_service_next *next,
                    const struct gpu_service_emitter *emitter)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    const struct gpu_service_impl *impl = gpu_actions_find(type);
    struct gpu_service_batch sb;
    struct dp_packet *packet;
    size_t n_dropped = 0;

    if (!impl) {
        VLOG_WARN_RL(&rl, "%s: service not built into this ovs-vswitchd; "
                     "packets pass", gpu_service_type_to_string(type));
        return;
    }

    bool timed = gpu_actions_time_this();
    uint64_t start_ns = timed ? monotonic_ns() : 0;
    bool clock_started = gpu_service_clock_start();

    if (impl->execute) {
        size_t n = dp_packet_batch_size(batch);

        impl->execute(args, batch, may_steal, next);
        gpu_service_clock_end(clock_started);

        struct totals_block *totals = totals_get();

        if (timed) {
            gpu_thread_counter_add(&totals->run_ns,
                                   monotonic_ns() - start_ns);
            gpu_thread_counter_add(&totals->n_timed, 1);
        }
        gpu_thread_counter_add(&totals->n_batches, 1);
        gpu_thread_counter_add(&totals->n_packets, n);
        return;
    }

    sb.n = dp_packet_batch_size(batch);
    DP_PACKET_BATCH_FOR_EACH (i, packet, batch) {
        sb.pkts[i] = (struct gpu_service_packet) { .packet = packet };
        sb.verdicts[i] = GPU_SERVICE_PASS;
    }
    sb.n_bytes = 0;
    sb.data = NULL;
    memset(sb.offsets, 0, (sb.n + 1) * sizeof sb.offsets[0]);

    if (impl->hold) {
        /* A batch it holds is left empty, so nothing below drops from
         * it: the service counts its drops once the verdicts are in. */
        impl->hold(args, &sb, batch, may_steal, next, emitter);
    } else {
        impl->run(args, &sb);
    }
    gpu_service_clock_end(clock_started);

    struct totals_block *totals = totals_get();

    if (timed) {
        gpu_thread_counter_add(&totals->run_ns, monotonic_ns() - start_ns);
        gpu_thread_counter_add(&totals->n_timed, 1);
    }

    const size_t cnt = dp_packet_batch_size(batch);
    size_t i;

    DP_PACKET_BATCH_REFILL_FOR_EACH (i, cnt, packet, batch) {
        if (sb.verdicts[i] == GPU_SERVICE_DROP) {
            n_dropped++;
            if (may_steal) {
                dp_packet_delete(packet);
            }
        } else {
            dp_packet_batch_refill(batch, packet, i);
        }
    }

    gpu_thread_counter_add(&totals->n_batches, 1);
    gpu_thread_counter_add(&totals->n_packets, sb.n);
    if (n_dropped) {
        gpu_thread_counter_add(&totals->n_dropped, n_dropped);
    }
}

static char *
gpu_actions_check(enum gpu_service_type type, const char *args)
{
    const struct gpu_service_impl *impl = gpu_actions_find(type);

    if (!impl) {
        return xasprintf("%s is not built into this ovs-vswitchd",
                         gpu_service_type_to_string(type));
    }
    return impl->check(args);
}

void
gpu_service_count_dropped(size_t n)
{
    gpu_thread_counter_add(&totals_get()->n_dropped, n);
}

void
gpu_service_get_totals(struct gpu_service_totals *t)
{
    const struct totals_block *block;

    memset(t, 0, sizeof *t);
    ovs_mutex_lock(&totals_mutex);
    LIST_FOR_EACH (block, node, &totals_blocks) {
        t->n_batches += gpu_thread_counter_read(&block->n_batches);
        t->n_packets += gpu_thread_counter_read(&block->n_packets);
        t->n_dropped += gpu_thread_counter_read(&block->n_dropped);
        t->run_ns += gpu_thread_counter_read(&block->run_ns);
        t->n_timed += gpu_thread_counter_read(&block->n_timed);
    }
    ovs_mutex_unlock(&totals_mutex);
}

/* ------------------------------------------------- Packets services make.
 *
 * fec_encode makes m parity packets a group and fec_decode the packets it
 * rebuilds, on the PMD thread.  From the heap each cost two malloc()s (the
 * dp_packet and its ~1.6 kB buffer, too large for glibc's per-thread
 * cache) and their free()s, ~18% of the fec pair's PMD time as profiled,
 * and netdev-dpdk copied each into an mbuf to send it.  Where DPDK runs
 * they come from a pool of mbufs of their own instead: the mempool's
 * per-lcore cache makes an allocation a few stores, and netdev-dpdk sends
 * an mbuf of any pool as it is (the driver frees it into its own pool). */

COVERAGE_DEFINE(gpu_service_pkt_mbuf);
COVERAGE_DEFINE(gpu_service_pkt_heap);

#ifdef DPDK_NETDEV
/* Enough for several PMD threads' parity in flight in transmit queues
 * (~2.4 kB each: 20 MB); beyond it packets come from the heap. */
#define GPU_PKT_POOL_SIZE 8192
#define GPU_PKT_POOL_CACHE 256
#define GPU_PKT_DATA_ROOM (RTE_PKTMBUF_HEADROOM + 2048)

static struct ovs_mutex pkt_pool_mutex = OVS_MUTEX_INITIALIZER;
/* Set once, under the mutex; read by PMD threads without it. */
static ATOMIC(struct rte_mempool *) pkt_pool;
static bool pkt_pool_failed OVS_GUARDED_BY(pkt_pool_mutex);

/* As netdev-dpdk's pools: OVS's fields of a dp_packet follow the mbuf, in
 * its private area. */
static void
gpu_pkt_pool_obj_init(struct rte_mempool *mp OVS_UNUSED,
                      void *opaque OVS_UNUSED, void *obj,
                      unsigned int i OVS_UNUSED)
{
    dp_packet_init_dpdk(obj);
}

void
gpu_service_packets_init(void)
{
    uint32_t priv_size;
    struct rte_mempool *mp;

    if (!dpdk_available()) {
        return;
    }
    ovs_mutex_lock(&pkt_pool_mutex);
    atomic_read_relaxed(&pkt_pool, &mp);
    if (mp || pkt_pool_failed) {
        ovs_mutex_unlock(&pkt_pool_mutex);
        return;
    }
    priv_size = ROUND_UP(sizeof(struct dp_packet) - sizeof(struct rte_mbuf),
                         RTE_MBUF_PRIV_ALIGN);
    mp = rte_pktmbuf_pool_create("ovsgpu_service_pkts", GPU_PKT_POOL_SIZE,
                                 GPU_PKT_POOL_CACHE, priv_size,
                                 GPU_PKT_DATA_ROOM, SOCKET_ID_ANY);
    if (mp) {
        rte_mempool_obj_iter(mp, gpu_pkt_pool_obj_init, NULL);
        VLOG_INFO("service packets: a pool of %d mbufs of %d bytes",
                  GPU_PKT_POOL_SIZE, GPU_PKT_DATA_ROOM);
        atomic_store_explicit(&pkt_pool, mp, memory_order_release);
    } else {
        pkt_pool_failed = true;
        VLOG_WARN("service packets: no mbuf pool (%s); they come from the "
                  "heap and are copied into mbufs to be sent",
                  rte_strerror(rte_errno));
    }
    ovs_mutex_unlock(&pkt_pool_mutex);
}

/* An mbuf of the pool made ready as dp_packet_new_with_headroom() makes a
 * heap packet (dp_packet_init__() is not exported), or NULL. */
static struct dp_packet *
gpu_pkt_from_pool(size_t size, odp_port_t in_port)
{
    struct rte_mempool *mp;
    struct rte_mbuf *mbuf;
    struct dp_packet *packet;

    atomic_read_explicit(&pkt_pool, &mp, memory_order_acquire);
    if (!mp) {
        return NULL;
    }
    mbuf = rte_pktmbuf_alloc(mp);
    if (!mbuf) {
        return NULL;
    }
    packet = CONTAINER_OF(mbuf, struct dp_packet, mbuf);
    if (dp_packet_tailroom(packet) < size) {
        rte_pktmbuf_free(mbuf);
        return NULL;
    }
    dp_packet_reset_offsets(packet);
    dp_packet_reset_cutlen(packet);
    dp_packet_reset_offload(packet);
    packet->packet_type = htonl(PT_ETH);
    pkt_metadata_init(&packet->md, in_port);
    dp_packet_set_size(packet, size);
    return packet;
}

void
gpu_service_packets_format(struct ds *s)
{
    struct rte_mempool *mp;
    size_t n_ranges, n_bytes;

    atomic_read_explicit(&pkt_pool, &mp, memory_order_acquire);
    if (mp) {
        ds_put_format(s, "  service packets: mbuf pool of %u, %u free\n",
                      mp->size, rte_mempool_avail_count(mp));
    }
    gpu_host_registered_totals(&n_ranges, &n_bytes);
    if (n_ranges) {
        ds_put_format(s, "  packet memory the device reads in place: "
                      "%"PRIuSIZE" MB in %"PRIuSIZE" ranges\n",
                      n_bytes >> 20, n_ranges);
    }
}

/* Virtually contiguous DPDK memory, gathered from its segments. */
struct gpu_mem_walk {
    uintptr_t start, end;
    int device;
    size_t n_ranges, n_bytes;
    int status;                 /* The first failure. */
};

static void
gpu_mem_walk_flush(struct gpu_mem_walk *w)
{
    if (w->end > w->start) {
        int status = gpu_host_register((void *) w->start, w->end - w->start,
                                       w->device);

        if (!status) {
            w->n_ranges++;
            w->n_bytes += w->end - w->start;
        } else if (!w->status) {
            w->status = status;
        }
    }
    w->start = w->end = 0;
}

static int
gpu_mem_walk_seg(const struct rte_memseg_list *msl OVS_UNUSED,
                 const struct rte_memseg *ms, void *w_)
{
    struct gpu_mem_walk *w = w_;

    if (w->end && w->end == (uintptr_t) ms->addr) {
        w->end += ms->len;
    } else {
        gpu_mem_walk_flush(w);
        w->start = (uintptr_t) ms->addr;
        w->end = w->start + ms->len;
    }
    return 0;
}

/* DPDK frees memory (without --legacy-mem, hugepages that no longer hold
 * anything go back to the system, and others may be mapped at the same
 * addresses later): payloads there must not be read in place any more.
 * Called with DPDK's memory hotplug lock held for writing, before the
 * pages go. */
static void
gpu_mem_event(enum rte_mem_event type, const void *addr, size_t len,
              void *arg OVS_UNUSED)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);

    if (type == RTE_MEM_EVENT_FREE && gpu_host_retire(addr, len)) {
        VLOG_INFO_RL(&rl, "DPDK freed %"PRIuSIZE" kB of the packet memory "
                     "registered with the device: payloads in its range "
                     "are copied from now on", len >> 10);
    }
}

/* Registers DPDK's memory with the device given as 'device_' (an
 * intptr_t): pinning gigabytes takes about a second, which the main
 * thread must not spend.  PMD threads copy payloads until the ranges are
 * published (gpu_host_registered() is lock-free). */
static void *
gpu_register_packet_memory_main(void *device_)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    int device = (intptr_t) device_;
    struct gpu_mem_walk w = { .device = device };
    long long int start = time_msec();

    /* Under the hotplug lock, so that no segment is freed between the
     * walk and the callback that would retire it. */
    rte_mcfg_mem_read_lock();
    if (rte_mem_event_callback_register("ovs-gpu-in-place", gpu_mem_event,
                                        NULL)
        && rte_errno != ENOTSUP) {
        /* ENOTSUP: --legacy-mem, whose memory is never freed. */
        rte_mcfg_mem_read_unlock();
        VLOG_WARN_RL(&rl, "DPDK memory not registered with the device (no "
                     "memory event callback: %s): services copy every "
                     "payload", rte_strerror(rte_errno));
        return NULL;
    }
    rte_memseg_walk_thread_unsafe(gpu_mem_walk_seg, &w);
    gpu_mem_walk_flush(&w);
    rte_mcfg_mem_read_unlock();
    if (w.status) {
        VLOG_WARN_RL(&rl, "DPDK memory not registered with the device (%s): "
                     "services copy every payload for it",
                     gpu_status_string(w.status));
    } else {
        VLOG_INFO("DPDK memory (%"PRIuSIZE" MB in %"PRIuSIZE" ranges) "
                  "registered with device %d in %lld ms: held packets' "
                  "payloads are read in place", w.n_bytes >> 20, w.n_ranges,
                  device, time_msec() - start);
    }
    return NULL;
}

void
gpu_service_register_packet_memory(int device)
{
    static bool done;

    if (done || !dpdk_available()) {
        return;
    }
    /* Once: DPDK memory allocated later (without --legacy-mem) is not
     * registered, so its packets' payloads are copied. */
    done = true;
    ovs_thread_create("gpu_register", gpu_register_packet_memory_main,
                      (void *) (intptr_t) device);
}
#else /* !DPDK_NETDEV */
void
gpu_service_packets_init(void)
{
}

static struct dp_packet *
gpu_pkt_from_pool(size_t size OVS_UNUSED, odp_port_t in_port OVS_UNUSED)
{
    return NULL;
}

void
gpu_service_packets_format(struct ds *s OVS_UNUSED)
{
}

void
gpu_service_register_packet_memory(int device OVS_UNUSED)
{
}
#endif /* !DPDK_NETDEV */

/* True if "pkt-heap N" says this packet comes from the heap. */
static bool
gpu_pkt_heap_forced(void)
{
    static atomic_uint count;
    int n = gpu_service_test_knob(GPU_KNOB_PKT_HEAP);
    unsigned int i;

    if (OVS_LIKELY(!n)) {
        return false;
    }
    atomic_add_relaxed(&count, 1, &i);
    return i % n == 0;
}

struct dp_packet *
gpu_service_packet_new(size_t size, odp_port_t in_port)
{
    struct dp_packet *packet = (gpu_pkt_heap_forced() ? NULL
                                : gpu_pkt_from_pool(size, in_port));

    if (packet) {
        COVERAGE_INC(gpu_service_pkt_mbuf);
        return packet;
    }
    COVERAGE_INC(gpu_service_pkt_heap);
    packet = dp_packet_new_with_headroom(size, DP_NETDEV_HEADROOM);
    dp_packet_put_uninit(packet, size);
    pkt_metadata_init(&packet->md, in_port);
    return packet;
}

static void
gpu_actions_run(const struct gpu_service_emitter *emitter)
{
    for (size_t i = 0; i < ARRAY_SIZE(services); i++) {
        if (services[i]->timers_run) {
            services[i]->timers_run(emitter);
        }
    }
}

static void
gpu_actions_wait(void)
{
    for (size_t i = 0; i < ARRAY_SIZE(services); i++) {
        if (services[i]->timers_wait) {
            services[i]->timers_wait();
        }
    }
}

static void
gpu_actions_poll(const struct gpu_service_emitter *emitter,
                 enum gpu_service_poll_mode mode)
{
    bool clock_started = gpu_service_clock_start();

    for (size_t i = 0; i < ARRAY_SIZE(services); i++) {
        if (services[i]->poll) {
            services[i]->poll(emitter, mode);
        }
    }
    gpu_service_clock_end(clock_started);
}

static const struct gpu_service_provider gpu_actions_provider = {
    .name = "ovs-gpu",
    .check = gpu_actions_check,
    .execute = gpu_actions_execute,
    .run = gpu_actions_run,
    .wait = gpu_actions_wait,
    .poll = gpu_actions_poll,
};

OVS_CONSTRUCTOR(gpu_actions_register) {
    ovsthread_key_create(&staging_key, staging_destroy);
    gpu_service_provider_register(&gpu_actions_provider);
}
