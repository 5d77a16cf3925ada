/*
 * ovs-gpu's dpcls provider: dpif-netdev's megaflow lookups answered by the
 * ovs-gpu classifier, on the GPU or on its CPU backend.
 *
 * One struct gpu_dpcls mirrors each dpcls (one per PMD thread and input
 * port).  It keeps the dpcls's rules and masks, and builds on demand a
 * "view": a gpu_cls table over the dense key made of the miniflow words
 * that any of the masks uses (the union of the masks), with first-match
 * semantics, since megaflows never overlap.
 *
 * Threads:
 *
 *   - Inserts and removals come from handler and revalidator threads under
 *     the PMD's flow_mutex; they take gpu_dpcls's own 'mutex' too, which
 *     the lookup path takes only to build a view.
 *
 *   - Lookups come from the owning PMD thread, and one key at a time from
 *     other threads (flow_put).  A view's pinned buffers serve one lookup
 *     at a time: a lookup that finds them busy (a rare non-PMD caller)
 *     declines and OVS's own lookup answers.  No lock is shared between
 *     PMD threads, and each submits on its own stream.
 *
 *   - The classifier returns rule handles, never pointers.  A handle maps
 *     to its rule through an RCU-safe cmap; a handle is never reused, and
 *     a removed rule's entry is freed after a grace period, when no lookup
 *     that may have returned it is still running.  Every answer is then
 *     confirmed with one masked compare (dpcls_rule_matches_key()) before
 *     it is used; one that fails falls back to OVS's lookup for that key.
 */
#include <config.h>

#include "ovs_plugin/gpu-dpcls.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmap.h"
#include "dpcls-provider.h"
#include "dpif-netdev-private-dpcls.h"
#include "dp-packet.h"
#include "flow.h"
#include "hash.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/hmap.h"
#include "openvswitch/list.h"
#include "openvswitch/vlog.h"
#include "ovs-atomic.h"
#include "ovs-rcu.h"
#include "ovs-thread.h"
#include "unixctl.h"
#include "util.h"

#include "ovs_plugin/gpu-actions.h"

VLOG_DEFINE_THIS_MODULE(gpu_dpcls);

/* Guards the list of all gpu_dpcls and the main thread's policy.  Taken
 * before a gpu_dpcls's own mutex, never after. */
static struct ovs_mutex all_dpcls_mutex = OVS_MUTEX_INITIALIZER;

/* The policy, published for the PMD threads. */
static atomic_bool policy_offload = false;
static atomic_uint policy_min_subtables = GPU_DPCLS_MIN_SUBTABLES_DEFAULT;
static atomic_bool policy_validate = false;
static atomic_uint policy_algorithm = GPU_CLS_AUTO;
static atomic_bool policy_cuda = false;
static atomic_int policy_device = 0;
static atomic_uint policy_inflight = GPU_DPCLS_INFLIGHT_DEFAULT;
static atomic_uint policy_hold_us = GPU_DPCLS_MAX_HOLD_US_DEFAULT;
static atomic_bool policy_by_cost = true;

/* The main thread's copy, for gpu/dpcls-show. */
static struct gpu_dpcls_policy policy OVS_GUARDED_BY(all_dpcls_mutex);

/* Bumped when the backend or device changes, so that views built for the
 * old one are rebuilt. */
static atomic_uint64_t backend_seq = 1;

/* Test only ("ovs-appctl gpu/inject-fault"): how many more classifier
 * batches fail as a device error would, and how many more table builds
 * fail as full device memory would.  Real device failures are rare and
 * cannot be caused on demand; these let the tests prove that every such
 * failure ends in OVS's own lookup, counted and logged, with no packet
 * lost. */
static atomic_int fault_lookups = 0;
static atomic_int fault_builds = 0;

/* Test only ("gpu/inject-fault dpcls-slow US"): asynchronous lookups are
 * not answered until US microseconds after their call, like a slow or
 * busy device, so that the tests see bursts held on the CPU backend
 * (whose lookups are otherwise answered at once). */
static atomic_int fault_slow_us = 0;

/* Takes one injected fault from 'faults', if any is left. */
static bool
gpu_dpcls_fault_take(atomic_int *faults)
{
    int n;

    atomic_read_relaxed(faults, &n);
    while (n > 0) {
        if (atomic_compare_exchange_weak(faults, &n, n - 1)) {
            return true;
        }
    }
    return false;
}

/* A rule mirrored from a dpcls. */
struct gpu_dpcls_rule {
    struct hmap_node rule_node;     /* In gpu_dpcls 'rules', by 'rule'. */
    struct cmap_node handle_node;   /* In gpu_dpcls 'handles', by handle. */
    const struct dpcls_rule *rule;
    uint32_t handle;
};

/* A mask in use, with the number of rules that use it.  dpif-netdev keeps
 * one mask per subtable, so the pointer identifies the subtable. */
struct gpu_dpcls_mask {
    struct hmap_node node;          /* In gpu_dpcls 'masks'. */
    const struct netdev_flow_key *mask;
    size_t n_rules;
};

/* Asynchronous lookups (dpcls-provider.h): the keys of one or more
 * bursts, gathered into one call of the classifier.  A view's slots are
 * used only by the thread that owns its dpcls. */
#define GPU_DPCLS_SLOTS 8               /* Calls gathering or in flight. */
#define GPU_DPCLS_SLOT_BURSTS 16        /* Bursts gathered into one call. */
#define GPU_DPCLS_SLOT_KEYS (GPU_DPCLS_SLOT_BURSTS * NETDEV_MAX_BURST)

enum gpu_dpcls_slot_state {
    SLOT_FREE,
    SLOT_GATHERING,                 /* Taking keys; not submitted yet. */
    SLOT_IN_FLIGHT,                 /* Submitted to the classifier. */
    SLOT_DONE,                      /* Answered, or failed ('status'). */
};

struct gpu_dpcls_slot;

/* One burst's share of a slot: what dpif-netdev holds as its ticket. */
struct gpu_dpcls_ticket {
    struct gpu_dpcls_view *view;
    struct gpu_dpcls_slot *slot;
    unsigned int offset;            /* First key in the slot. */
    long long int submit_ns;
    uint32_t handle_limit;          /* Rules inserted since have handles
                                     * from this on. */
};

struct gpu_dpcls_slot {
    enum gpu_dpcls_slot_state state;
    int status;                     /* With SLOT_DONE: GPU_OK or error. */
    bool error_counted;             /* 'status' logged and counted. */
    unsigned int n_keys;
    unsigned int n_tickets;         /* Handed out. */
    unsigned int n_pending;         /* Handed out and not finished. */
    long long int gather_ns;        /* When the first key came. */
    long long int launch_ns;
    long long int cpu_ns;           /* Spent gathering and submitting. */
    struct gpu_cls_batch *batch;
    uint64_t *keys;                 /* Pinned: GPU_DPCLS_SLOT_KEYS keys. */
    uint32_t *results;              /* Pinned. */
    struct gpu_dpcls_ticket tickets[GPU_DPCLS_SLOT_BURSTS];
};

/* A classifier table over a fixed dense key layout, and the buffers one
 * synchronous lookup at a time uses. */
struct gpu_dpcls_view {
    struct flowmap map;             /* Miniflow words in the dense key. */
    unsigned int n_words;           /* flowmap_n_1bits(map). */
    uint64_t backend_seq;           /* 'backend_seq' when built. */
    bool cuda;
    struct gpu_cls_table *table;
    struct gpu_cls_batch *batch;
    struct ovs_mutex buffers_mutex; /* Guards the three below. */
    uint64_t *keys;                 /* Pinned: NETDEV_MAX_BURST keys. */
    uint32_t *results;              /* Pinned: NETDEV_MAX_BURST results. */

    /* Asynchronous lookups, by the dpcls's owning thread only. */
    struct gpu_dpcls_slot *slots[GPU_DPCLS_SLOTS];  /* Made on demand. */
    struct gpu_dpcls_slot *gathering;
    unsigned int n_in_flight;
};

/* How long bursts were held (submit to finish), in GPU_DPCLS_HOLD_STEP_US
 * buckets; the last one takes everything longer. */
#define GPU_DPCLS_HOLD_BUCKETS 256
#define GPU_DPCLS_HOLD_STEP_US 2

struct gpu_dpcls_stats {
    atomic_uint64_t gpu_lookups;    /* Keys answered through a view. */
    atomic_uint64_t cpu_lookups;    /* Keys left to OVS by the policy. */
    atomic_uint64_t batches;        /* Batches answered through a view. */
    atomic_uint64_t fallbacks;      /* Keys answered by OVS after a device
                                     * error, a busy view or a failed
                                     * confirmation. */
    atomic_uint64_t device_errors;  /* Batches the classifier failed. */
    atomic_uint64_t confirm_fails;  /* Answers that did not match. */
    atomic_uint64_t mismatches;     /* Validation differences. */
    atomic_uint64_t rebuilds;       /* Views built. */
    atomic_uint64_t busy_ns;        /* Time in submit and wait. */

    /* Asynchronous lookups. */
    atomic_uint64_t held_bursts;    /* Bursts answered asynchronously. */
    atomic_uint64_t launches;       /* Classifier calls they made. */
    atomic_uint64_t bound_launches; /* Of them, calls launched because
                                     * their first burst had waited
                                     * gpu-max-hold-us. */
    atomic_uint64_t launch_keys;    /* Keys in those calls. */
    atomic_uint64_t hold_max_ns;
    atomic_uint64_t hold_hist[GPU_DPCLS_HOLD_BUCKETS];
};

/* What the policy measured and chose for one dpcls ("cost" policy): the
 * CPU time per key of OVS's own lookup and of the offloaded one (submit
 * and finish; the device works meanwhile), as moving averages.  Written
 * only by the thread that owns the dpcls; read racily by gpu/dpcls-show. */
struct gpu_dpcls_cost {
    double ovs_ns;                  /* Per key; 0 until measured. */
    double gpu_ns;                  /* Per key; 0 until measured. */
    double ovs_subtables;           /* Subtables searched per hit. */
    bool use_gpu;
    long long int explore_ns;       /* Next time to try the other path. */
    long long int explore_end_ns;   /* Trying it until then. */
};

struct gpu_dpcls {
    struct ovs_list list_node;      /* In 'all_dpcls'. */
    odp_port_t in_port;
    unsigned int core_id;

    struct ovs_mutex mutex;
    struct hmap rules OVS_GUARDED;  /* Of gpu_dpcls_rule, by rule. */
    struct hmap masks OVS_GUARDED;  /* Of gpu_dpcls_mask, by mask. */
    struct flowmap union_map OVS_GUARDED;   /* Words of all masks. */
    uint32_t next_handle OVS_GUARDED;
    char last_error[128] OVS_GUARDED;

    atomic_count n_rules;
    atomic_count n_masks;
    atomic_count handles_issued;    /* 'next_handle', for lookups. */
    struct cmap handles;            /* Of gpu_dpcls_rule, by handle. */
    OVSRCU_TYPE(struct gpu_dpcls_view *) view;

    struct gpu_dpcls_stats stats;
    struct gpu_dpcls_cost cost;
    pthread_t owner;                /* The thread that submits, once known. */
    bool owner_known;
};

static struct ovs_list all_dpcls OVS_GUARDED_BY(all_dpcls_mutex)
    = OVS_LIST_INITIALIZER(&all_dpcls);

/* Counters of destroyed gpu_dpcls, for gpu_dpcls_totals(). */
static uint64_t retired_gpu_lookups OVS_GUARDED_BY(all_dpcls_mutex);
static uint64_t retired_mismatches OVS_GUARDED_BY(all_dpcls_mutex);

static long long int
clock_nsec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The PMD path reads the time several times per burst.  clock_gettime()
 * can be a system call (on the H100 machine, a virtual machine, it cost
 * about 1 us: 40% of stock OVS's rate at one mask), so on x86 the time
 * comes from the time-stamp counter, scaled once at start-up, as OVS's
 * own PMD cycle counters do. */
#if defined(__x86_64__)
#include <x86intrin.h>
static double tsc_ns_per_tick;
static uint64_t tsc_base;
static long long int tsc_base_ns;

static void
monotonic_calibrate(void)
{
    long long int t0 = clock_nsec();
    uint64_t c0 = __rdtsc();
    long long int t1;

    do {
        t1 = clock_nsec();
    } while (t1 - t0 < 20 * 1000 * 1000);
    uint64_t c1 = __rdtsc();
    if (c1 > c0) {
        tsc_ns_per_tick = (double) (t1 - t0) / (c1 - c0);
        tsc_base = c1;
        tsc_base_ns = t1;
    }
}

static long long int
monotonic_nsec(void)
{
    if (OVS_UNLIKELY(!tsc_ns_per_tick)) {
        return clock_nsec();
    }
    return tsc_base_ns + (long long int) ((int64_t) (__rdtsc() - tsc_base)
                                          * tsc_ns_per_tick);
}
#else
static void
monotonic_calibrate(void)
{
}

static long long int
monotonic_nsec(void)
{
    return clock_nsec();
}
#endif

static void
stat_add(atomic_uint64_t *counter, uint64_t n)
{
    uint64_t orig;
    atomic_add_relaxed(counter, n, &orig);
}

static uint64_t
stat_get(atomic_uint64_t *counter)
{
    uint64_t value;
    atomic_read_relaxed(counter, &value);
    return value;
}

/* Writes the words of miniflow 'mf' selected by 'map' into 'dense', in
 * order, with zero for words that 'mf' does not have. */
static void
gpu_dpcls_flatten(const struct miniflow *mf, const struct flowmap *map,
                  uint64_t *dense)
{
    const uint64_t *values = miniflow_get_values(mf);
    size_t unit;

    for (unit = 0; unit < FLOWMAP_UNITS; unit++) {
        map_t have = mf->map.bits[unit];
        map_t want = map->bits[unit];

        while (want) {
            map_t bit = want & -want;

            *dense++ = have & bit ? values[count_1bits(have & (bit - 1))]
                                  : 0;
            want &= want - 1;
        }
        values += count_1bits(have);
    }
}

static struct gpu_dpcls_view *
gpu_dpcls_view_get(const struct gpu_dpcls *gd)
{
    return ovsrcu_get(struct gpu_dpcls_view *, &gd->view);
}

static void
gpu_dpcls_slot_destroy(struct gpu_dpcls_slot *slot)
{
    if (slot) {
        if (slot->state == SLOT_IN_FLIGHT) {
            /* Its thread quiesced with a call out: cannot happen, since
             * dpif-netdev finishes every ticket first, but never free what
             * the device may still write. */
            gpu_cls_wait(slot->batch);
        }
        gpu_cls_batch_destroy(slot->batch);
        gpu_host_free(slot->keys);
        gpu_host_free(slot->results);
        free(slot);
    }
}

static void
gpu_dpcls_view_destroy(struct gpu_dpcls_view *view)
{
    if (view) {
        for (size_t i = 0; i < GPU_DPCLS_SLOTS; i++) {
            gpu_dpcls_slot_destroy(view->slots[i]);
        }
        gpu_cls_batch_destroy(view->batch);
        gpu_cls_destroy(view->table);
        gpu_host_free(view->keys);
        gpu_host_free(view->results);
        ovs_mutex_destroy(&view->buffers_mutex);
        free(view);
    }
}

/* Drops 'gd''s view, if any, after the lookups that may use it. */
static void
gpu_dpcls_view_drop(struct gpu_dpcls *gd)
    OVS_REQUIRES(gd->mutex)
{
    struct gpu_dpcls_view *view = gpu_dpcls_view_get(gd);

    if (view) {
        ovsrcu_set(&gd->view, NULL);
        ovsrcu_postpone(gpu_dpcls_view_destroy, view);
    }
}

static int
gpu_dpcls_view_insert(struct gpu_dpcls_view *view,
                      const struct gpu_dpcls_rule *gr)
{
    uint64_t value[FLOW_U64S], mask[FLOW_U64S];

    gpu_dpcls_flatten(&gr->rule->flow.mf, &view->map, value);
    gpu_dpcls_flatten(&gr->rule->mask->mf, &view->map, mask);
    return gpu_cls_insert(view->table, value, mask, 0, gr->handle);
}

static int
gpu_dpcls_view_remove(struct gpu_dpcls_view *view,
                      const struct gpu_dpcls_rule *gr)
{
    uint64_t value[FLOW_U64S], mask[FLOW_U64S];

    gpu_dpcls_flatten(&gr->rule->flow.mf, &view->map, value);
    gpu_dpcls_flatten(&gr->rule->mask->mf, &view->map, mask);
    return gpu_cls_remove(view->table, value, mask, NULL);
}

/* Builds a view of all of 'gd''s rules for the current policy and
 * publishes it.  Returns it, or NULL on failure (recorded in
 * 'last_error'). */
static struct gpu_dpcls_view *
gpu_dpcls_view_build(struct gpu_dpcls *gd)
    OVS_REQUIRES(gd->mutex)
{
    struct gpu_dpcls_view *view = xzalloc(sizeof *view);
    struct gpu_cls_config cfg;
    unsigned int algorithm;
    bool cuda;
    int device;
    int error;

    /* Not from 'policy': all_dpcls_mutex may not be taken inside
     * gd->mutex. */
    atomic_read_relaxed(&policy_algorithm, &algorithm);
    atomic_read_relaxed(&policy_cuda, &cuda);
    atomic_read_relaxed(&policy_device, &device);

    atomic_read_relaxed(&backend_seq, &view->backend_seq);
    view->map = gd->union_map;
    view->n_words = flowmap_n_1bits(gd->union_map);
    view->cuda = cuda;
    ovs_mutex_init(&view->buffers_mutex);
    if (!view->n_words) {
        /* Only catch-all masks: still one word, all wildcarded. */
        view->n_words = 1;
    }

    gpu_cls_config_init(&cfg, view->n_words);
    cfg.semantics = GPU_CLS_FIRST_MATCH;
    cfg.algorithm = (enum gpu_cls_algorithm) algorithm;
    cfg.backend = cuda ? GPU_CLS_BACKEND_CUDA : GPU_CLS_BACKEND_CPU;
    cfg.device = device;

    error = gpu_cls_create(&cfg, &view->table);
    if (!error && gpu_dpcls_fault_take(&fault_builds)) {
        error = cuda ? GPU_ERR_DEVICE_NOMEM : GPU_ERR_NOMEM;
    }
    if (!error) {
        error = gpu_cls_batch_create(view->table, NETDEV_MAX_BURST,
                                     &view->batch);
    }
    if (!error) {
        view->keys = gpu_host_alloc(NETDEV_MAX_BURST * view->n_words
                                    * sizeof *view->keys);
        view->results = gpu_host_alloc(NETDEV_MAX_BURST
                                       * sizeof *view->results);
        if (!view->keys || !view->results) {
            error = GPU_ERR_NOMEM;
        }
    }

    struct gpu_dpcls_rule *gr;
    HMAP_FOR_EACH (gr, rule_node, &gd->rules) {
        if (error) {
            break;
        }
        error = gpu_dpcls_view_insert(view, gr);
    }

    if (error) {
        snprintf(gd->last_error, sizeof gd->last_error,
                 "%s table of %"PRIuSIZE" rules: %s",
                 cuda ? "cuda" : "cpu", hmap_count(&gd->rules),
                 gpu_status_string(error));
        static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 5);
        VLOG_WARN_RL(&rl, "pmd %u in_port %"PRIu32": cannot offload "
                     "lookups (%s); OVS's own lookup answers them",
                     gd->core_id, odp_to_u32(gd->in_port), gd->last_error);
        gpu_dpcls_view_destroy(view);
        return NULL;
    }

    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(10, 10);
    VLOG_INFO_RL(&rl, "pmd %u in_port %"PRIu32": lookups offloaded to the "
                 "%s backend (%"PRIuSIZE" subtables, %"PRIuSIZE" rules, "
                 "%u-word key)", gd->core_id, odp_to_u32(gd->in_port),
                 cuda ? "cuda" : "cpu", hmap_count(&gd->masks),
                 hmap_count(&gd->rules), view->n_words);
    stat_add(&gd->stats.rebuilds, 1);
    ovsrcu_set(&gd->view, view);
    return view;
}

static void *
gpu_dpcls_created(struct dpcls *cls OVS_UNUSED, odp_port_t in_port,
                  unsigned int core_id)
{
    struct gpu_dpcls *gd = xzalloc(sizeof *gd);

    gd->in_port = in_port;
    gd->core_id = core_id;
    ovs_mutex_init(&gd->mutex);
    hmap_init(&gd->rules);
    hmap_init(&gd->masks);
    flowmap_init(&gd->union_map);
    gd->next_handle = 0;
    atomic_count_init(&gd->n_rules, 0);
    atomic_count_init(&gd->n_masks, 0);
    atomic_count_init(&gd->handles_issued, 0);
    cmap_init(&gd->handles);
    ovsrcu_set_hidden(&gd->view, NULL);

    ovs_mutex_lock(&all_dpcls_mutex);
    ovs_list_push_back(&all_dpcls, &gd->list_node);
    ovs_mutex_unlock(&all_dpcls_mutex);
    return gd;
}

static void
gpu_dpcls_free(struct gpu_dpcls *gd)
{
    gpu_dpcls_view_destroy(gpu_dpcls_view_get(gd));
    cmap_destroy(&gd->handles);
    hmap_destroy(&gd->rules);
    hmap_destroy(&gd->masks);
    ovs_mutex_destroy(&gd->mutex);
    free(gd);
}

static void
gpu_dpcls_destroyed(void *aux)
{
    struct gpu_dpcls *gd = aux;

    ovs_mutex_lock(&all_dpcls_mutex);
    ovs_list_remove(&gd->list_node);
    retired_gpu_lookups += stat_get(&gd->stats.gpu_lookups);
    retired_mismatches += stat_get(&gd->stats.mismatches);
    ovs_mutex_unlock(&all_dpcls_mutex);

    /* dpif-netdev removes every rule before it destroys a dpcls. */
    ovs_mutex_lock(&gd->mutex);
    ovs_assert(hmap_is_empty(&gd->rules));
    ovs_mutex_unlock(&gd->mutex);

    /* Rule entries removed just before may still be waiting for their
     * grace period; so does this. */
    ovsrcu_postpone(gpu_dpcls_free, gd);
}

static struct gpu_dpcls_mask *
gpu_dpcls_find_mask(struct gpu_dpcls *gd, const struct netdev_flow_key *mask)
    OVS_REQUIRES(gd->mutex)
{
    struct gpu_dpcls_mask *gm;

    HMAP_FOR_EACH_WITH_HASH (gm, node, hash_pointer(mask, 0), &gd->masks) {
        if (gm->mask == mask) {
            return gm;
        }
    }
    return NULL;
}

static void
gpu_dpcls_recompute_union(struct gpu_dpcls *gd)
    OVS_REQUIRES(gd->mutex)
{
    struct gpu_dpcls_mask *gm;

    flowmap_init(&gd->union_map);
    HMAP_FOR_EACH (gm, node, &gd->masks) {
        gd->union_map = flowmap_or(gd->union_map, gm->mask->mf.map);
    }
}

static void
gpu_dpcls_rule_inserted(void *aux, const struct dpcls_rule *rule)
{
    struct gpu_dpcls *gd = aux;
    struct gpu_dpcls_rule *gr = xzalloc(sizeof *gr);
    struct gpu_dpcls_mask *gm;

    ovs_mutex_lock(&gd->mutex);
    gr->rule = rule;
    gr->handle = gd->next_handle++;
    if (gd->next_handle == GPU_CLS_NO_MATCH) {
        /* After 4G inserts on one dpcls; no older handle can still be in
         * flight by then. */
        gd->next_handle = 0;
    }
    hmap_insert(&gd->rules, &gr->rule_node, hash_pointer(rule, 0));
    cmap_insert(&gd->handles, &gr->handle_node, hash_int(gr->handle, 0));
    atomic_count_inc(&gd->n_rules);

    gm = gpu_dpcls_find_mask(gd, rule->mask);
    if (!gm) {
        gm = xzalloc(sizeof *gm);
        gm->mask = rule->mask;
        hmap_insert(&gd->masks, &gm->node, hash_pointer(rule->mask, 0));
        atomic_count_inc(&gd->n_masks);
        gd->union_map = flowmap_or(gd->union_map, rule->mask->mf.map);
    }
    gm->n_rules++;

    struct gpu_dpcls_view *view = gpu_dpcls_view_get(gd);
    if (view) {
        if (!flowmap_equal(flowmap_or(view->map, gd->union_map),
                           view->map)) {
            /* The key grows a word: rebuild at the next lookup. */
            gpu_dpcls_view_drop(gd);
        } else {
            int error = gpu_dpcls_view_insert(view, gr);
            if (error) {
                snprintf(gd->last_error, sizeof gd->last_error,
                         "insert: %s", gpu_status_string(error));
                gpu_dpcls_view_drop(gd);
            }
        }
    }
    /* Published once the view has the rule (or is gone), so that a
     * lookup submitted from now on either sees it or is told it is new. */
    atomic_count_set(&gd->handles_issued, gd->next_handle);
    ovs_mutex_unlock(&gd->mutex);
}

static void
gpu_dpcls_rule_removed(void *aux, const struct dpcls_rule *rule)
{
    struct gpu_dpcls *gd = aux;
    struct gpu_dpcls_rule *gr;
    struct gpu_dpcls_mask *gm;

    ovs_mutex_lock(&gd->mutex);
    HMAP_FOR_EACH_WITH_HASH (gr, rule_node, hash_pointer(rule, 0),
                             &gd->rules) {
        if (gr->rule == rule) {
            break;
        }
    }
    if (!gr) {
        ovs_mutex_unlock(&gd->mutex);
        VLOG_WARN("pmd %u in_port %"PRIu32": removing a rule that was "
                  "never inserted", gd->core_id, odp_to_u32(gd->in_port));
        return;
    }

    struct gpu_dpcls_view *view = gpu_dpcls_view_get(gd);
    if (view) {
        int error = gpu_dpcls_view_remove(view, gr);
        if (error) {
            snprintf(gd->last_error, sizeof gd->last_error, "remove: %s",
                     gpu_status_string(error));
            gpu_dpcls_view_drop(gd);
        }
    }

    hmap_remove(&gd->rules, &gr->rule_node);
    cmap_remove(&gd->handles, &gr->handle_node, hash_int(gr->handle, 0));
    atomic_count_dec(&gd->n_rules);
    ovsrcu_postpone(free, gr);

    gm = gpu_dpcls_find_mask(gd, rule->mask);
    ovs_assert(gm);
    if (!--gm->n_rules) {
        hmap_remove(&gd->masks, &gm->node);
        free(gm);
        atomic_count_dec(&gd->n_masks);
        /* The key may shrink; a view keeps its wider layout until it is
         * rebuilt for another reason, which costs nothing but width. */
        gpu_dpcls_recompute_union(gd);
    }
    ovs_mutex_unlock(&gd->mutex);
}

static const struct dpcls_rule *
gpu_dpcls_handle_to_rule(struct gpu_dpcls *gd, uint32_t handle)
{
    const struct gpu_dpcls_rule *gr;

    CMAP_FOR_EACH_WITH_HASH (gr, handle_node, hash_int(handle, 0),
                             &gd->handles) {
        if (gr->handle == handle) {
            return gr->rule;
        }
    }
    return NULL;
}

/* Whether 'rule' was inserted after the lookup that saw handles below
 * 'handle_limit' was submitted. */
static bool
gpu_dpcls_rule_is_newer(struct gpu_dpcls *gd, const struct dpcls_rule *rule,
                        uint32_t handle_limit)
{
    struct gpu_dpcls_rule *gr;
    bool newer = false;

    ovs_mutex_lock(&gd->mutex);
    HMAP_FOR_EACH_WITH_HASH (gr, rule_node, hash_pointer(rule, 0),
                             &gd->rules) {
        if (gr->rule == rule) {
            newer = gr->handle >= handle_limit;
            break;
        }
    }
    ovs_mutex_unlock(&gd->mutex);
    return newer;
}

/* Compares 'rules' with OVS's own answer for the same keys, and counts and
 * logs each difference.  An asynchronous lookup sees the rules as they
 * were when it was submitted: a miss for a key whose rule came later
 * (handles from 'handle_limit' on; an earlier burst's upcall, say) is no
 * difference, since dpif-netdev looks up every miss again before it makes
 * an upcall. */
static void
gpu_dpcls_validate(struct gpu_dpcls *gd, struct dpcls *cls,
                   const struct netdev_flow_key *keys[],
                   struct dpcls_rule **rules, size_t cnt,
                   uint32_t handle_limit)
{
    struct dpcls_rule *expected[NETDEV_MAX_BURST];
    size_t i;

    dpcls_lookup_ovs(cls, keys, expected, cnt, NULL);
    for (i = 0; i < cnt; i++) {
        if (expected[i] != rules[i]
            && !(!rules[i] && handle_limit != UINT32_MAX
                 && gpu_dpcls_rule_is_newer(gd, expected[i],
                                            handle_limit))) {
            static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 5);

            stat_add(&gd->stats.mismatches, 1);
            VLOG_WARN_RL(&rl, "pmd %u in_port %"PRIu32": validation "
                         "mismatch: offload found %s, OVS found %s",
                         gd->core_id, odp_to_u32(gd->in_port),
                         rules[i] ? "a rule" : "no rule",
                         expected[i] ? (rules[i] ? "another rule"
                                                 : "a rule")
                                     : "no rule");
        }
    }
}

static bool
gpu_dpcls_is_owner(struct gpu_dpcls *gd)
{
    return gd->owner_known && pthread_equal(gd->owner, pthread_self());
}

/* Folds 'ns' for 'n_keys' keys into the moving average '*avg': a sample
 * from exploring the other path weighs more, since they are rare. */
static void
gpu_dpcls_cost_add(double *avg, long long int ns, size_t n_keys,
                   bool exploring)
{
    double sample = (double) ns / n_keys;

    *avg = *avg ? *avg + (sample - *avg) / (exploring ? 4 : 32) : sample;
}

/* Until the offloaded path is measured, it is assumed to cost this much
 * CPU time per key: about what the measured path costs on the H100 and
 * on the CPU backend (docs/PERFORMANCE.md), so that a dpcls whose lookups
 * cost more than that tries the offload. */
#define GPU_DPCLS_GPU_NS_PRIOR 60.0

/* How often and how long the "cost" policy tries the path it did not
 * choose, to keep both measurements current: a dpcls's masks, its
 * subtable ranking and the device's load all change. */
#define GPU_DPCLS_EXPLORE_EVERY_NS (200 * 1000 * 1000LL)
#define GPU_DPCLS_EXPLORE_FOR_NS (1000 * 1000LL)

static void
gpu_dpcls_cost_decide(struct gpu_dpcls_cost *c)
{
    double gpu_ns = c->gpu_ns ? c->gpu_ns : GPU_DPCLS_GPU_NS_PRIOR;

    if (!c->ovs_ns) {
        c->use_gpu = false;
    } else if (c->use_gpu) {
        c->use_gpu = gpu_ns <= c->ovs_ns;
    } else {
        /* A margin, so that near the break-even point the choice does not
         * flip on every measurement. */
        c->use_gpu = gpu_ns < c->ovs_ns * 0.9;
    }
}

/* Whether the next lookup of 'gd' should be offloaded, by the policy. */
static bool
gpu_dpcls_choose(struct gpu_dpcls *gd, bool *exploring)
{
    struct gpu_dpcls_cost *c = &gd->cost;
    bool by_cost;

    *exploring = false;
    atomic_read_relaxed(&policy_by_cost, &by_cost);
    if (!by_cost) {
        return true;
    }
    if (!gpu_dpcls_is_owner(gd)) {
        return c->use_gpu;
    }

    long long int now = monotonic_nsec();
    if (now >= c->explore_ns) {
        c->explore_end_ns = now + GPU_DPCLS_EXPLORE_FOR_NS;
        c->explore_ns = now + GPU_DPCLS_EXPLORE_EVERY_NS;
    }
    if (now < c->explore_end_ns && c->ovs_ns) {
        *exploring = true;
        return !c->use_gpu;
    }
    return c->use_gpu;
}

/* Returned by gpu_dpcls_ready_view() when a table could not be built, and
 * when the "cost" policy chose OVS's lookup (which is then measured). */
static struct gpu_dpcls_view failed_view;
static struct gpu_dpcls_view ovs_chosen_view;

/* Returns the view that should answer a lookup of 'cnt' keys of 'gd', or
 * NULL if OVS's own lookup should by the policy (counted, unless
 * 'uncounted': a declined asynchronous lookup is asked again
 * synchronously), or &failed_view if OVS's own lookup must answer because
 * the table could not be built (counted). */
static struct gpu_dpcls_view *
gpu_dpcls_ready_view(struct gpu_dpcls *gd, size_t cnt, bool uncounted,
                     bool *exploring)
{
    struct gpu_dpcls_view *view;
    unsigned int min_subtables;
    bool offload;

    *exploring = false;
    atomic_read_relaxed(&policy_offload, &offload);
    atomic_read_relaxed(&policy_min_subtables, &min_subtables);
    if (!offload) {
        return NULL;
    }
    if (atomic_count_get(&gd->n_masks) < min_subtables
        || !atomic_count_get(&gd->n_rules)) {
        /* Not a candidate: nothing to measure either. */
        if (!uncounted) {
            stat_add(&gd->stats.cpu_lookups, cnt);
        }
        return NULL;
    }
    if (!gpu_dpcls_choose(gd, exploring)) {
        if (!uncounted) {
            stat_add(&gd->stats.cpu_lookups, cnt);
        }
        return &ovs_chosen_view;
    }

    view = gpu_dpcls_view_get(gd);
    uint64_t seq;
    atomic_read_relaxed(&backend_seq, &seq);
    if (!view || view->backend_seq != seq) {
        bool cuda;

        atomic_read_relaxed(&policy_cuda, &cuda);
        if (cuda && !gpu_device_is_warm()) {
            /* The device's context is still being created: building a
             * table now would stall this thread (and, from flow_put, the
             * flow table's mutex) for as long as that takes.  Only
             * builds touch the device this way, and a device change bumps
             * 'backend_seq', so every view made for it is built here. */
            stat_add(&gd->stats.cpu_lookups, uncounted ? 0 : cnt);
            return NULL;
        }
        ovs_mutex_lock(&gd->mutex);
        view = gpu_dpcls_view_get(gd);
        if (!view || view->backend_seq != seq) {
            gpu_dpcls_view_drop(gd);
            view = gpu_dpcls_view_build(gd);
        }
        ovs_mutex_unlock(&gd->mutex);
        if (!view) {
            /* Counted even if 'uncounted': the caller must not ask again
             * (a second build would fail or stall the same way). */
            stat_add(&gd->stats.fallbacks, cnt);
            *exploring = false;
            return &failed_view;
        }
    }
    return view;
}

static void
gpu_dpcls_device_error(struct gpu_dpcls *gd, int error, size_t cnt)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 5);

    VLOG_WARN_RL(&rl, "pmd %u in_port %"PRIu32": lookup failed (%s); "
                 "OVS's own lookup answers", gd->core_id,
                 odp_to_u32(gd->in_port), gpu_status_string(error));
    stat_add(&gd->stats.device_errors, 1);
    stat_add(&gd->stats.fallbacks, cnt);
}

/* Turns the classifier's 'results' for 'keys' into rules, each confirmed
 * by one masked compare (OVS answers a key whose rule is gone or does not
 * match), and validates them if asked.  Returns the number found. */
static size_t
gpu_dpcls_answer(struct gpu_dpcls *gd, struct dpcls *cls,
                 const struct netdev_flow_key *keys[],
                 const uint32_t *results, struct dpcls_rule **rules,
                 size_t cnt, uint32_t handle_limit)
{
    size_t found = 0;
    bool validate;
    size_t i;

    for (i = 0; i < cnt; i++) {
        uint32_t handle = results[i];
        const struct dpcls_rule *rule = NULL;

        if (handle != GPU_CLS_NO_MATCH) {
            rule = gpu_dpcls_handle_to_rule(gd, handle);
            if (!rule || !dpcls_rule_matches_key(rule, keys[i])) {
                /* Removed since, or wrong: ask OVS for this key. */
                stat_add(&gd->stats.confirm_fails, 1);
                stat_add(&gd->stats.fallbacks, 1);
                dpcls_lookup_ovs(cls, &keys[i], &rules[i], 1, NULL);
                found += rules[i] != NULL;
                continue;
            }
        }
        rules[i] = CONST_CAST(struct dpcls_rule *, rule);
        found += rule != NULL;
    }
    stat_add(&gd->stats.gpu_lookups, cnt);
    stat_add(&gd->stats.batches, 1);

    atomic_read_relaxed(&policy_validate, &validate);
    if (validate) {
        gpu_dpcls_validate(gd, cls, keys, rules, cnt, handle_limit);
    }
    return found;
}

/* OVS's own lookup, timed for the "cost" policy when the owning thread
 * runs it. */
static int
gpu_dpcls_lookup_ovs_measured(struct gpu_dpcls *gd, struct dpcls *cls,
                              const struct netdev_flow_key *keys[],
                              struct dpcls_rule **rules, size_t cnt,
                              int *num_lookups_p, bool exploring)
{
    int n_lookups = 0;

    long long int start = monotonic_nsec();
    bool all = dpcls_lookup_ovs(cls, keys, rules, cnt, &n_lookups);
    long long int ns = monotonic_nsec() - start;

    size_t hits = 0;
    for (size_t i = 0; i < cnt; i++) {
        hits += rules[i] != NULL;
    }
    gpu_dpcls_cost_add(&gd->cost.ovs_ns, ns, cnt, exploring);
    if (hits) {
        gpu_dpcls_cost_add(&gd->cost.ovs_subtables, n_lookups, hits,
                           exploring);
    }
    gpu_dpcls_cost_decide(&gd->cost);
    if (num_lookups_p) {
        *num_lookups_p = n_lookups;
    }
    return all;
}

static int
gpu_dpcls_lookup(void *aux, struct dpcls *cls,
                 const struct netdev_flow_key *keys[],
                 struct dpcls_rule **rules, size_t cnt, int *num_lookups_p)
{
    struct gpu_dpcls *gd = aux;
    struct gpu_dpcls_view *view;
    bool exploring;
    size_t i;

    view = gpu_dpcls_ready_view(gd, cnt, false, &exploring);
    if (view == &ovs_chosen_view) {
        if (gpu_dpcls_is_owner(gd)) {
            return gpu_dpcls_lookup_ovs_measured(gd, cls, keys, rules, cnt,
                                                 num_lookups_p, exploring);
        }
        return -1;
    } else if (!view || view == &failed_view) {
        return -1;
    }

    if (ovs_mutex_trylock(&view->buffers_mutex)) {
        /* Another thread's lookup (flow_put) has the buffers. */
        stat_add(&gd->stats.fallbacks, cnt);
        return -1;
    }

    for (i = 0; i < cnt; i++) {
        gpu_dpcls_flatten(&keys[i]->mf, &view->map,
                          &view->keys[i * view->n_words]);
    }
    long long int start = monotonic_nsec();
    int error = gpu_cls_submit(view->batch, NULL, view->keys, cnt,
                               view->n_words, view->results);
    if (!error) {
        error = gpu_cls_wait(view->batch);
    }
    if (!error && gpu_dpcls_fault_take(&fault_lookups)) {
        error = GPU_ERR_DEVICE;
    }
    stat_add(&gd->stats.busy_ns, monotonic_nsec() - start);
    if (error) {
        ovs_mutex_unlock(&view->buffers_mutex);
        gpu_dpcls_device_error(gd, error, cnt);
        return -1;
    }

    size_t found = gpu_dpcls_answer(gd, cls, keys, view->results, rules,
                                    cnt, UINT32_MAX);
    ovs_mutex_unlock(&view->buffers_mutex);

    /* Each found key took one (batched) lookup, as if it had matched in
     * the first subtable. */
    if (num_lookups_p) {
        *num_lookups_p = found;
    }
    return found == cnt;
}

/* Returns a free slot of 'view' (made if need be), or NULL if all are in
 * use. */
static struct gpu_dpcls_slot *
gpu_dpcls_slot_get(struct gpu_dpcls_view *view)
{
    size_t i;

    for (i = 0; i < GPU_DPCLS_SLOTS; i++) {
        struct gpu_dpcls_slot *slot = view->slots[i];

        if (!slot) {
            slot = xzalloc(sizeof *slot);
            slot->keys = gpu_host_alloc(GPU_DPCLS_SLOT_KEYS * view->n_words
                                        * sizeof *slot->keys);
            slot->results = gpu_host_alloc(GPU_DPCLS_SLOT_KEYS
                                           * sizeof *slot->results);
            if (!slot->keys || !slot->results
                || gpu_cls_batch_create(view->table, GPU_DPCLS_SLOT_KEYS,
                                        &slot->batch)) {
                gpu_dpcls_slot_destroy(slot);
                return NULL;
            }
            view->slots[i] = slot;
            return slot;
        }
        if (slot->state == SLOT_FREE) {
            return slot;
        }
    }
    return NULL;
}

/* Submits the keys 'slot' gathered. */
static void
gpu_dpcls_slot_launch(struct gpu_dpcls *gd, struct gpu_dpcls_view *view,
                      struct gpu_dpcls_slot *slot, long long int now)
{
    int error;

    if (view->gathering == slot) {
        view->gathering = NULL;
    }
    now = monotonic_nsec();
    error = gpu_cls_submit(slot->batch, NULL, slot->keys, slot->n_keys,
                           view->n_words, slot->results);
    if (!error && gpu_dpcls_fault_take(&fault_lookups)) {
        /* The call went out; its answers will be thrown away. */
        gpu_cls_wait(slot->batch);
        error = GPU_ERR_DEVICE;
    }
    slot->launch_ns = now;
    slot->cpu_ns += monotonic_nsec() - now;
    stat_add(&gd->stats.launches, 1);
    stat_add(&gd->stats.launch_keys, slot->n_keys);
    if (error) {
        slot->state = SLOT_DONE;
        slot->status = error;
    } else {
        slot->state = SLOT_IN_FLIGHT;
        view->n_in_flight++;
    }
}

/* Keys a gathering call waits for while the device has room, unless its
 * first burst has waited the longest the policy allows or the PMD thread
 * has nothing else to do.  A call costs the PMD thread about 15 us of CPU
 * time in CUDA's API (H100, docs/PERFORMANCE.md) whatever its size, so
 * small calls would bound the thread's rate. */
static unsigned int min_gather = 8 * NETDEV_MAX_BURST;

/* Why the gathering 'slot' should go now, if it should. */
enum gpu_dpcls_due {
    DUE_NOT_YET,
    DUE_READY,          /* Full, or enough keys while the device has room,
                         * or no holding at all. */
    DUE_AT_BOUND,       /* Its first burst waited the longest the policy
                         * allows. */
};

static enum gpu_dpcls_due
gpu_dpcls_slot_due(const struct gpu_dpcls_view *view,
                   const struct gpu_dpcls_slot *slot, long long int now)
{
    unsigned int inflight, hold_us;

    atomic_read_relaxed(&policy_inflight, &inflight);
    atomic_read_relaxed(&policy_hold_us, &hold_us);
    if (!hold_us
        || (view->n_in_flight < inflight && slot->n_keys >= min_gather)
        || slot->n_tickets == GPU_DPCLS_SLOT_BURSTS
        || slot->n_keys + NETDEV_MAX_BURST > GPU_DPCLS_SLOT_KEYS) {
        return DUE_READY;
    }
    return (now - slot->gather_ns >= hold_us * 1000LL
            ? DUE_AT_BOUND : DUE_NOT_YET);
}

/* Launches the gathering 'slot' if it is due (gpu_dpcls_slot_due()),
 * counting those the hold bound sent; returns whether it did. */
static bool
gpu_dpcls_slot_launch_if_due(struct gpu_dpcls *gd,
                             struct gpu_dpcls_view *view,
                             struct gpu_dpcls_slot *slot, long long int now)
{
    enum gpu_dpcls_due due = gpu_dpcls_slot_due(view, slot, now);

    if (due == DUE_NOT_YET) {
        return false;
    }
    if (due == DUE_AT_BOUND) {
        stat_add(&gd->stats.bound_launches, 1);
    }
    gpu_dpcls_slot_launch(gd, view, slot, now);
    return true;
}

/* A ticket that sends its burst to OVS's own lookup, already counted. */
static struct gpu_dpcls_ticket fallback_ticket;

static void *
gpu_dpcls_lookup_submit(void *aux, struct dpcls *cls OVS_UNUSED,
                        const struct netdev_flow_key *keys[], size_t cnt)
{
    struct gpu_dpcls *gd = aux;
    struct gpu_dpcls_view *view;
    struct gpu_dpcls_slot *slot;
    unsigned int inflight;
    bool exploring;
    size_t i;

    if (!gd->owner_known) {
        gd->owner = pthread_self();
        gd->owner_known = true;
    }
    atomic_read_relaxed(&policy_inflight, &inflight);
    if (!inflight) {
        return NULL;
    }
    view = gpu_dpcls_ready_view(gd, cnt, true, &exploring);
    if (view == &failed_view) {
        /* Counted: have dpif-netdev go to OVS's lookup at once. */
        return &fallback_ticket;
    } else if (!view || view == &ovs_chosen_view) {
        return NULL;
    }

    long long int start = monotonic_nsec();
    slot = view->gathering;
    if (slot && (slot->n_tickets == GPU_DPCLS_SLOT_BURSTS
                 || slot->n_keys + cnt > GPU_DPCLS_SLOT_KEYS)) {
        gpu_dpcls_slot_launch(gd, view, slot, start);
        slot = NULL;
    }
    if (!slot) {
        slot = gpu_dpcls_slot_get(view);
        if (!slot) {
            /* Every slot is out: OVS's lookup or a synchronous one
             * answers this burst when its turn comes. */
            return NULL;
        }
        slot->state = SLOT_GATHERING;
        slot->n_keys = slot->n_tickets = slot->n_pending = 0;
        slot->cpu_ns = 0;
        slot->error_counted = false;
        slot->gather_ns = start;
        view->gathering = slot;
    }

    struct gpu_dpcls_ticket *ticket = &slot->tickets[slot->n_tickets++];
    ticket->view = view;
    ticket->slot = slot;
    ticket->offset = slot->n_keys;
    ticket->submit_ns = start;
    ticket->handle_limit = atomic_count_get(&gd->handles_issued);
    slot->n_pending++;
    for (i = 0; i < cnt; i++) {
        gpu_dpcls_flatten(&keys[i]->mf, &view->map,
                          &slot->keys[(slot->n_keys + i) * view->n_words]);
    }
    slot->n_keys += cnt;
    slot->cpu_ns += monotonic_nsec() - start;

    gpu_dpcls_slot_launch_if_due(gd, view, slot, start);
    stat_add(&gd->stats.busy_ns, monotonic_nsec() - start);
    return ticket;
}

static bool
gpu_dpcls_lookup_poll(void *aux, void *ticket_, bool wait)
{
    struct gpu_dpcls_ticket *ticket = ticket_;
    struct gpu_dpcls_view *view = ticket->view;
    struct gpu_dpcls_slot *slot = ticket->slot;
    struct gpu_dpcls *gd = aux;

    if (ticket == &fallback_ticket) {
        return true;
    }
    if (slot->state == SLOT_GATHERING) {
        long long int now = monotonic_nsec();

        if (wait) {
            /* The thread has nothing else to do: no need to gather. */
            gpu_dpcls_slot_launch(gd, view, slot, now);
        } else if (!gpu_dpcls_slot_launch_if_due(gd, view, slot, now)) {
            return false;
        }
    }
    if (slot->state == SLOT_IN_FLIGHT) {
        int slow_us;

        atomic_read_relaxed(&fault_slow_us, &slow_us);
        if (OVS_UNLIKELY(slow_us)) {
            long long int due = slot->launch_ns + slow_us * 1000LL;

            if (!wait && monotonic_nsec() < due) {
                return false;
            }
            while (monotonic_nsec() < due) {
                xnanosleep_no_quiesce(10 * 1000);
            }
        }

        int status = wait ? gpu_cls_wait(slot->batch)
                          : gpu_cls_poll(slot->batch);
        if (status == GPU_ERR_BUSY) {
            return false;
        }
        slot->state = SLOT_DONE;
        slot->status = status;
        view->n_in_flight--;

        /* The device has room again: send what gathered meanwhile. */
        if (view->gathering) {
            gpu_dpcls_slot_launch_if_due(gd, view, view->gathering,
                                         monotonic_nsec());
        }
    }
    return true;
}

static void
gpu_dpcls_hold_record(struct gpu_dpcls *gd, long long int ns)
{
    uint64_t us = ns > 0 ? ns / 1000 : 0;
    uint64_t bucket = us / GPU_DPCLS_HOLD_STEP_US;
    uint64_t max;

    stat_add(&gd->stats.hold_hist[MIN(bucket, GPU_DPCLS_HOLD_BUCKETS - 1)],
             1);
    atomic_read_relaxed(&gd->stats.hold_max_ns, &max);
    if (ns > max) {
        atomic_store_relaxed(&gd->stats.hold_max_ns, ns);
    }
}

static int
gpu_dpcls_lookup_finish(void *aux, struct dpcls *cls, void *ticket_,
                        const struct netdev_flow_key *keys[],
                        struct dpcls_rule **rules, size_t cnt,
                        int *num_lookups_p)
{
    struct gpu_dpcls_ticket *ticket = ticket_;
    struct gpu_dpcls_slot *slot = ticket->slot;
    struct gpu_dpcls *gd = aux;
    int retval;

    if (ticket == &fallback_ticket) {
        return -1;
    }
    ovs_assert(slot->state == SLOT_DONE);
    long long int start = monotonic_nsec();
    if (slot->status) {
        if (!--slot->n_pending) {
            slot->state = SLOT_FREE;
        }
        /* Counted once per call, not per burst: the first to see it. */
        if (!slot->error_counted) {
            gpu_dpcls_device_error(gd, slot->status, cnt);
            slot->error_counted = true;
        } else {
            stat_add(&gd->stats.fallbacks, cnt);
        }
        gpu_dpcls_hold_record(gd, start - ticket->submit_ns);
        return -1;
    }

    size_t found = gpu_dpcls_answer(gd, cls, keys,
                                    &slot->results[ticket->offset], rules,
                                    cnt, ticket->handle_limit);
    if (!--slot->n_pending) {
        slot->state = SLOT_FREE;
    }
    if (num_lookups_p) {
        *num_lookups_p = found;
    }
    retval = found == cnt;

    long long int end = monotonic_nsec();
    stat_add(&gd->stats.held_bursts, 1);
    gpu_dpcls_hold_record(gd, end - ticket->submit_ns);

    /* The CPU time this burst cost the offloaded path: its share of the
     * submit (flattening its keys, and the call) and of this. */
    bool by_cost;
    atomic_read_relaxed(&policy_by_cost, &by_cost);
    if (by_cost) {
        long long int share = slot->cpu_ns * cnt / MAX(slot->n_keys, 1);

        gpu_dpcls_cost_add(&gd->cost.gpu_ns, end - start + share, cnt,
                           false);
        gpu_dpcls_cost_decide(&gd->cost);
    }
    return retval;
}

static const struct dpcls_provider gpu_dpcls_provider = {
    .name = "ovs-gpu",
    .created = gpu_dpcls_created,
    .destroyed = gpu_dpcls_destroyed,
    .rule_inserted = gpu_dpcls_rule_inserted,
    .rule_removed = gpu_dpcls_rule_removed,
    .lookup = gpu_dpcls_lookup,
    .lookup_submit = gpu_dpcls_lookup_submit,
    .lookup_poll = gpu_dpcls_lookup_poll,
    .lookup_finish = gpu_dpcls_lookup_finish,
};

/* Changes the policy.  Called from the main thread. */
void
gpu_dpcls_set_policy(const struct gpu_dpcls_policy *new)
{
    struct gpu_dpcls *gd;

    ovs_mutex_lock(&all_dpcls_mutex);
    bool backend_changed = new->cuda != policy.cuda
                           || (new->cuda && new->device != policy.device);
    bool algorithm_changed = new->algorithm != policy.algorithm;
    policy = *new;
    atomic_store_relaxed(&policy_algorithm, new->algorithm);
    atomic_store_relaxed(&policy_cuda, new->cuda);
    atomic_store_relaxed(&policy_device, new->device);
    if (backend_changed) {
        uint64_t orig;
        atomic_add(&backend_seq, 1, &orig);
    } else if (algorithm_changed) {
        /* Every algorithm reads the same tables: switch in place. */
        LIST_FOR_EACH (gd, list_node, &all_dpcls) {
            ovs_mutex_lock(&gd->mutex);
            struct gpu_dpcls_view *view = gpu_dpcls_view_get(gd);
            if (view) {
                gpu_cls_set_algorithm(view->table, new->algorithm);
            }
            ovs_mutex_unlock(&gd->mutex);
        }
    }
    ovs_mutex_unlock(&all_dpcls_mutex);

    atomic_store_relaxed(&policy_min_subtables, new->min_subtables);
    atomic_store_relaxed(&policy_by_cost, new->by_cost);
    atomic_store_relaxed(&policy_inflight, new->inflight);
    atomic_store_relaxed(&policy_hold_us, new->max_hold_us);
    atomic_store_relaxed(&policy_validate, new->validate);
    atomic_store_relaxed(&policy_offload, new->offload);
}

/* The bucket of the 'p'-th fraction of 'total' hold times in 'counts'. */
static size_t
gpu_dpcls_percentile(const uint64_t *counts, uint64_t total, double p)
{
    uint64_t want = total * p, seen = 0;
    size_t i;

    for (i = 0; i < GPU_DPCLS_HOLD_BUCKETS - 1; i++) {
        seen += counts[i];
        if (seen > want) {
            break;
        }
    }
    return i;
}

/* The upper bound of that bucket, in microseconds. */
static unsigned int
gpu_dpcls_percentile_us(const uint64_t *counts, uint64_t total, double p)
{
    size_t bucket = gpu_dpcls_percentile(counts, total, p);

    return bucket + 1 == GPU_DPCLS_HOLD_BUCKETS
           ? bucket * GPU_DPCLS_HOLD_STEP_US
           : (bucket + 1) * GPU_DPCLS_HOLD_STEP_US;
}

static void
gpu_dpcls_format(struct ds *s, struct gpu_dpcls *gd)
    OVS_REQUIRES(all_dpcls_mutex)
{
    struct gpu_dpcls_stats *st = &gd->stats;
    uint64_t batches = stat_get(&st->batches);
    uint64_t gpu_lookups = stat_get(&st->gpu_lookups);

    ds_put_format(s, "pmd %u in_port %"PRIu32":\n", gd->core_id,
                  odp_to_u32(gd->in_port));
    ds_put_format(s, "  subtables: %u\n", atomic_count_get(&gd->n_masks));
    ds_put_format(s, "  rules: %u\n", atomic_count_get(&gd->n_rules));

    ovs_mutex_lock(&gd->mutex);
    struct gpu_dpcls_view *view = gpu_dpcls_view_get(gd);
    if (view) {
        struct gpu_cls_stats cs;

        gpu_cls_get_stats(view->table, &cs);
        ds_put_format(s, "  backend: %s\n", gpu_cls_backend_name(cs.backend));
        ds_put_format(s, "  algorithm: %s", gpu_cls_algorithm_name(
                          cs.algorithm));
        if (cs.algorithm == GPU_CLS_AUTO) {
            ds_put_format(s, " (%s)", gpu_cls_algorithm_name(cs.chosen));
        }
        ds_put_format(s, "\n  key words: %u\n", view->n_words);
    } else {
        ds_put_cstr(s, "  backend: none (OVS's own lookup)\n");
    }
    if (gd->last_error[0]) {
        ds_put_format(s, "  last error: %s\n", gd->last_error);
    }
    ovs_mutex_unlock(&gd->mutex);

    ds_put_format(s, "  lookups on GPU: %"PRIu64"\n", gpu_lookups);
    ds_put_format(s, "  lookups on CPU: %"PRIu64"\n",
                  stat_get(&st->cpu_lookups));
    ds_put_format(s, "  batches: %"PRIu64"\n", batches);
    ds_put_format(s, "  avg. batch size: %.2f\n",
                  batches ? (double) gpu_lookups / batches : 0.0);
    ds_put_format(s, "  avg. batch latency (us): %.2f\n",
                  batches ? stat_get(&st->busy_ns) / 1e3 / batches : 0.0);
    ds_put_format(s, "  fallbacks: %"PRIu64"\n", stat_get(&st->fallbacks));
    ds_put_format(s, "  device errors: %"PRIu64"\n",
                  stat_get(&st->device_errors));
    ds_put_format(s, "  failed confirmations: %"PRIu64"\n",
                  stat_get(&st->confirm_fails));
    ds_put_format(s, "  validation mismatches: %"PRIu64"\n",
                  stat_get(&st->mismatches));
    ds_put_format(s, "  table builds: %"PRIu64"\n", stat_get(&st->rebuilds));

    uint64_t held = stat_get(&st->held_bursts);
    uint64_t launches = stat_get(&st->launches);
    ds_put_format(s, "  held bursts: %"PRIu64", classifier calls: %"PRIu64
                  " (%.1f keys per call), %"PRIu64" at gpu-max-hold-us\n",
                  held, launches,
                  launches ? (double) stat_get(&st->launch_keys) / launches
                           : 0.0,
                  stat_get(&st->bound_launches));
    if (held) {
        uint64_t counts[GPU_DPCLS_HOLD_BUCKETS], total = 0;
        size_t i;

        for (i = 0; i < GPU_DPCLS_HOLD_BUCKETS; i++) {
            counts[i] = stat_get(&st->hold_hist[i]);
            total += counts[i];
        }
        ds_put_format(s, "  hold time (us): p50 %s%u, p99 %s%u, max %.1f\n",
                      gpu_dpcls_percentile(counts, total, 0.50) + 1
                      == GPU_DPCLS_HOLD_BUCKETS ? ">" : "<",
                      gpu_dpcls_percentile_us(counts, total, 0.50),
                      gpu_dpcls_percentile(counts, total, 0.99) + 1
                      == GPU_DPCLS_HOLD_BUCKETS ? ">" : "<",
                      gpu_dpcls_percentile_us(counts, total, 0.99),
                      stat_get(&st->hold_max_ns) / 1e3);
    }

    struct gpu_dpcls_cost cost = gd->cost;
    if (policy.by_cost) {
        ds_put_format(s, "  policy: %s", cost.use_gpu ? "offload" : "ovs");
        if (atomic_count_get(&gd->n_masks) < policy.min_subtables) {
            ds_put_format(s, " (fewer than %u subtables)\n",
                          policy.min_subtables);
        } else if (!cost.ovs_ns) {
            ds_put_cstr(s, " (OVS's lookup not measured yet)\n");
        } else {
            ds_put_format(s, " (per key: OVS's lookup %.0f ns, %.2f "
                          "subtables per hit; offload %.0f ns%s)\n",
                          cost.ovs_ns, cost.ovs_subtables,
                          cost.gpu_ns ? cost.gpu_ns : GPU_DPCLS_GPU_NS_PRIOR,
                          cost.gpu_ns ? "" : " assumed, not measured yet");
        }
    } else {
        ds_put_cstr(s, "  policy: offload (gpu-dpcls-policy=always)\n");
    }
}

static void
gpu_dpcls_show_cmd(struct unixctl_conn *conn, int argc, const char *argv[],
                   void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    struct gpu_dpcls *gd;
    unsigned int core_id = 0;
    bool filter = argc > 1;

    if (filter && !str_to_uint(argv[1], 10, &core_id)) {
        unixctl_command_reply_error(conn, "invalid pmd core id");
        return;
    }

    ovs_mutex_lock(&all_dpcls_mutex);
    ds_put_format(&s, "offload: %s, min subtables: %u, classifier: %s, "
                  "validate: %s, backend: %s\n",
                  policy.offload ? "enabled" : "disabled",
                  policy.min_subtables,
                  gpu_cls_algorithm_name(policy.algorithm),
                  policy.validate ? "true" : "false",
                  policy.cuda ? "cuda" : "cpu");
    ds_put_format(&s, "policy: %s, calls in flight: %u%s, max hold: %u us\n",
                  policy.by_cost ? "cost" : "always", policy.inflight,
                  policy.inflight ? "" : " (synchronous)",
                  policy.max_hold_us);
    LIST_FOR_EACH (gd, list_node, &all_dpcls) {
        if (!filter || gd->core_id == core_id) {
            gpu_dpcls_format(&s, gd);
        }
    }
    ovs_mutex_unlock(&all_dpcls_mutex);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

/* "gpu/dpcls-stats-clear": zeroes every dpcls's counters, as
 * dpif-netdev/pmd-stats-clear does for the PMDs', so that a measurement
 * can read its own interval.  The totals for gpu/show keep counting. */
static void
gpu_dpcls_stats_clear_cmd(struct unixctl_conn *conn, int argc OVS_UNUSED,
                          const char *argv[] OVS_UNUSED,
                          void *aux OVS_UNUSED)
{
    struct gpu_dpcls *gd;

    ovs_mutex_lock(&all_dpcls_mutex);
    LIST_FOR_EACH (gd, list_node, &all_dpcls) {
        struct gpu_dpcls_stats *st = &gd->stats;
        atomic_uint64_t *plain[] = {
            &st->cpu_lookups, &st->batches, &st->fallbacks,
            &st->device_errors, &st->confirm_fails, &st->rebuilds,
            &st->busy_ns, &st->held_bursts, &st->launches,
            &st->bound_launches, &st->launch_keys, &st->hold_max_ns,
        };

        /* 'gpu_lookups' and 'mismatches' feed gpu_dpcls_totals(). */
        retired_gpu_lookups += stat_get(&st->gpu_lookups);
        retired_mismatches += stat_get(&st->mismatches);
        atomic_store_relaxed(&st->gpu_lookups, 0);
        atomic_store_relaxed(&st->mismatches, 0);
        for (size_t i = 0; i < ARRAY_SIZE(plain); i++) {
            atomic_store_relaxed(plain[i], 0);
        }
        for (size_t i = 0; i < GPU_DPCLS_HOLD_BUCKETS; i++) {
            atomic_store_relaxed(&st->hold_hist[i], 0);
        }
    }
    ovs_mutex_unlock(&all_dpcls_mutex);
    unixctl_command_reply(conn, NULL);
}

void
gpu_dpcls_totals(uint64_t *gpu_lookups, uint64_t *mismatches)
{
    struct gpu_dpcls *gd;

    ovs_mutex_lock(&all_dpcls_mutex);
    *gpu_lookups = retired_gpu_lookups;
    *mismatches = retired_mismatches;
    LIST_FOR_EACH (gd, list_node, &all_dpcls) {
        *gpu_lookups += stat_get(&gd->stats.gpu_lookups);
        *mismatches += stat_get(&gd->stats.mismatches);
    }
    ovs_mutex_unlock(&all_dpcls_mutex);
}

/* "gpu/inject-fault dpcls|dpcls-nomem N": test only, see 'fault_lookups'.
 * N replaces what is left of earlier injections; 0 cancels them. */
static void
gpu_dpcls_inject_fault_cmd(struct unixctl_conn *conn, int argc OVS_UNUSED,
                           const char *argv[], void *aux OVS_UNUSED)
{
    atomic_int *faults;
    const char *what;
    int n;

    if (gpu_service_inject_fault_cmd(conn, argc, argv)) {
        return;
    }
    if (argc != 3) {
        unixctl_command_reply_error(conn, "usage: gpu/inject-fault "
                                    "dpcls|dpcls-nomem|dpcls-slow N");
        return;
    }
    if (!strcmp(argv[1], "dpcls")) {
        faults = &fault_lookups;
        what = "lookup batches fail with a device error";
    } else if (!strcmp(argv[1], "dpcls-nomem")) {
        faults = &fault_builds;
        what = "table builds fail for lack of memory";
    } else if (!strcmp(argv[1], "dpcls-slow")) {
        faults = &fault_slow_us;
        what = "microseconds before an asynchronous lookup is answered";
    } else {
        unixctl_command_reply_error(conn, "unknown fault (use dpcls, "
                                    "dpcls-nomem, dpcls-slow, ids, re, "
                                    "fec, index, ids-slow, re-slow, "
                                    "fec-slow, fec-loss, "
                                    "index-query-slow or pkt-heap)");
        return;
    }
    if (!str_to_int(argv[2], 10, &n) || n < 0) {
        unixctl_command_reply_error(conn, "invalid count");
        return;
    }
    atomic_store_relaxed(faults, n);
    const char *the_next = faults == &fault_slow_us ? "" : "the next ";
    VLOG_INFO("test fault injected: %s%d %s", the_next, n, what);

    char *reply = xasprintf("%s%d %s\n", the_next, n, what);
    unixctl_command_reply(conn, reply);
    free(reply);
}

void
gpu_dpcls_init(void)
{
    const char *env = getenv("OVS_GPU_DPCLS_MIN_GATHER");

    monotonic_calibrate();
    if (env) {
        /* For benchmarks comparing gather sizes. */
        min_gather = MAX(1, atoi(env));
    }
    unixctl_command_register("gpu/dpcls-show", "[core_id]", 0, 1,
                             gpu_dpcls_show_cmd, NULL);
    unixctl_command_register("gpu/dpcls-stats-clear", "", 0, 0,
                             gpu_dpcls_stats_clear_cmd, NULL);
    unixctl_command_register("gpu/inject-fault",
                             "dpcls|dpcls-nomem|dpcls-slow N | "
                             "ids|re|fec|index launch|nomem N | "
                             "ids-slow|re-slow|fec-slow|fec-stall US | "
                             "fec-loss PPM | index-query-slow MS | "
                             "index-disk-full BYTES|off | "
                             "index-disk-rate MB|off | "
                             "index-writer-stop 1|0 | pkt-heap N", 2, 3,
                             gpu_dpcls_inject_fault_cmd, NULL);
}

OVS_CONSTRUCTOR(gpu_dpcls_register) {
    policy.min_subtables = GPU_DPCLS_MIN_SUBTABLES_DEFAULT;
    policy.algorithm = GPU_CLS_AUTO;
    dpcls_provider_register(&gpu_dpcls_provider);
}
