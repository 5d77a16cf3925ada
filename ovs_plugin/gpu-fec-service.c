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

/* The parity (forward error correction) services, the two ends of a lossy
 * link: fec_encode(k=K,m=M[,group_timeout=US][,code=CODE]) and
 * fec_decode([group_timeout=US][,max_packets=N][,max_bytes=N]).
 *
 * On the wire every coded packet is an Ethernet frame of its own, so that
 * the original frame comes back byte for byte whatever it carried:
 *
 *     dst, src (copied from the original)   12 bytes
 *     ethertype FEC_ETH_TYPE (0x88b5)        2 bytes
 *     struct fec_hdr                        12 bytes
 *     the original frame (data packet) or a parity chunk (parity packet)
 *
 * The header says which group (a 32-bit id, counting from a random start
 * so that two encoders are unlikely to collide at one decoder), the
 * packet's index in it (data 0 .. k-1, parity k .. k+m-1), k and m (so the
 * decoder needs no options) and, in parity packets, how many data packets
 * the group has: fewer than k when the group timed out.  A flag names the
 * code (gpu-parity.h): FEC_F_GF8 for the GF(2^8) code (ISA-L's), none for
 * the bitmatrix code, so frames from before the flag decode as they did;
 * the decoder rebuilds either code on any backend, and refuses flags it
 * does not know (a later code) rather than rebuild wrong bytes.  The
 * encoder's code is its option code=: "gf8", "bitmatrix", or "auto" (the
 * default): gf8 where the plugin's backend is the CPU and ISA-L is built
 * in (ISA-L codes it about three times faster than the bitmatrix code on
 * one core), else bitmatrix.  The original
 * lengths travel inside the parity chunks (gpu_parity_pkt_encode() codes
 * each packet's length with its bytes), so a rebuilt frame comes back with
 * its length.
 *
 * A service instance is one encoder or decoder, named by its action's
 * arguments: every flow with the same arguments shares it (one sequence
 * of groups), so flows that must be coded apart need different arguments.
 * Instances live as long as ovs-vswitchd.  Each has a mutex, taken by a
 * PMD thread for one batch.
 *
 * The encoder sends each data packet at once and, after the k-th (or the
 * first packet after group_timeout, with a short group), the m parity
 * packets.  The decoder passes data packets on at once, without the
 * header, keeps copies until the group is complete, drops parity packets
 * and, once k packets of a group with missing data are in, rebuilds the
 * missing ones and sends them.  Groups that cannot be completed are given
 * up after group_timeout, or when the copies would exceed max_packets or
 * max_bytes (oldest first), and counted.
 *
 * Packets this service makes (parity, rebuilt packets) go out through the
 * flow's next actions in the batch being processed.  Where the batch is
 * full, or the caller keeps its packets (may_steal false), they wait in
 * the instance and go out with its next batch.
 *
 * The periodic hook runs the timers even when traffic stops: it gives up
 * timed-out decoder groups, and closes timed-out encoder groups and sends
 * their parity.  A timer has no batch, so the encoder keeps a copy of the
 * actions that followed it in its last batch (struct gpu_service_next:
 * copied only when they change, so a batch pays a compare) and the hook
 * executes the parity along them through the datapath's emitter, with
 * whatever else waits (parity beyond a full batch), as if it had come out
 * of the action.  Under load every batch is full and the timer would come
 * too late, so parity beyond a full batch also leaves the same way from
 * the datapath's per-iteration 'poll' of the thread that coded it (see
 * fec_poll()).  Where the datapath gave no next actions (the action was
 * nested in clone, sample or check_pkt_larger) or they belong to another
 * datapath than the hook's thread, the parity waits for the flow's next
 * packet, as before, and gpu-fec/show counts it. */

#include <config.h>

#include "ovs_plugin/gpu-fec-service.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cmap.h"
#include "coverage.h"
#include "dp-packet.h"
#include "dpif-netdev.h"
#include "flow.h"
#include "hash.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/hmap.h"
#include "openvswitch/list.h"
#include "openvswitch/poll-loop.h"
#include "openvswitch/vlog.h"
#include "ovs-atomic.h"
#include "ovs-thread.h"
#include "packets.h"
#include "random.h"
#include "timeval.h"
#include "unixctl.h"
#include "util.h"

#include "gpu_services/parity/gpu-parity.h"
#include "ovs_plugin/gpu-actions.h"

VLOG_DEFINE_THIS_MODULE(gpu_fec_service);

/* Open groups whose frames moved from their call to the stage because the
 * call went first (fec_encode_unplace()): rare, and for the tests. */
COVERAGE_DEFINE(fec_encode_open_moved);

#define FEC_ETH_TYPE 0x88b5     /* IEEE 802 local experimental 1. */
#define FEC_MAGIC 0xfe
#define FEC_F_PARITY 0x01
#define FEC_F_GF8 0x02          /* The GF(2^8) code; else bitmatrix. */
#define FEC_F_KNOWN (FEC_F_PARITY | FEC_F_GF8)

struct fec_hdr {
    uint8_t magic;              /* FEC_MAGIC. */
    uint8_t flags;              /* FEC_F_*. */
    uint8_t k, m;
    /* Only 16-bit aligned: the header follows the 14-byte Ethernet
     * header, so a 32-bit field read in place would be misaligned. */
    ovs_16aligned_be32 group;
    uint8_t index;              /* 0 .. k-1 data, k .. k+m-1 parity. */
    uint8_t n_data;             /* Parity: data packets in the group. */
    ovs_be16 reserved;          /* Zero. */
};
BUILD_ASSERT_DECL(sizeof(struct fec_hdr) == 12);

#define FEC_HLEN (ETH_HEADER_LEN + sizeof(struct fec_hdr))

/* The longest frame coded; longer ones (TSO) pass unchanged. */
#define FEC_MAX_FRAME 9216

/* Packets waiting for a batch, per instance; beyond, the oldest are
 * dropped and counted (only a flow that never sees room gets there). */
#define FEC_MAX_PENDING 1024

/* The decoder copies the packets of its groups into buffers of this size
 * where they fit (the Internet's frames do), and keeps up to
 * FEC_MAX_FREE_BUFS of them free for reuse: a malloc() and free() of
 * 1500 bytes per packet cost more than the copy. */
#define FEC_SMALL_BUF 2048
#define FEC_MAX_FREE_BUFS 1024

/* Symbol size of the coders: small, so the padding of a chunk (to a
 * multiple of w * packetsize) stays small. */
#define FEC_PACKETSIZE 8

/* A device call codes up to this many closed groups of one code, side by
 * side (gpu-parity.h), in chunks of up to FEC_CALL_BYTES / (k + m) bytes
 * (at least one largest group's).  Up to FEC_MAX_CALLS calls of an
 * instance are in flight at once: a PMD thread never waits for the device
 * below that bound, which only keeps the pinned host memory (and device
 * memory) of an instance bounded, about FEC_MAX_CALLS * FEC_CALL_BYTES;
 * at the bound the oldest call is waited for, and gpu-fec/show counts
 * it.  Calls done are kept for reuse, as many. */
#define FEC_CALL_MAX_GROUPS 64
#define FEC_CALL_BYTES (1024 * 1024)
#define FEC_MAX_CALLS 16

/* The timer's fallback for calls in flight: the poll of the thread that
 * submitted a call normally finishes it within microseconds, so the timer
 * (which wakes the main thread) only looks after this long. */
#define FEC_CALL_TIMER_US 1000

/* A datapath thread whose batch closed groups (encoder) or completed them
 * (decoder) goes on with that batch's next actions after the service: its
 * data packets are not out yet.  Until the thread's poll says the batch is
 * through, other threads (the main thread's timer, other PMD threads)
 * leave what the calls made, parity or rebuilt packets, to it, so that
 * they go out behind the packets of their own groups, not ahead of them
 * (which makes a decoder rebuild packets that were never lost, then drop
 * them as late).  The poll comes within microseconds; this bound is only
 * for a thread that would never poll again. */
#define FEC_BATCH_WAIT_MAX_US 1000000

#define FEC_ENC_TIMEOUT_DEFAULT 1000            /* us */
#define FEC_DEC_TIMEOUT_DEFAULT 100000          /* us */
#define FEC_TIMEOUT_MAX 60000000                /* us */
#define FEC_DEC_MAX_PACKETS_DEFAULT 4096
#define FEC_DEC_MAX_BYTES_DEFAULT (16 * 1024 * 1024)
/* Decoder calls of at most this many groups are rebuilt at once on the
 * CPU, not submitted to the device (option cpu_max_groups=).  At 1% loss
 * a call gathers 1-9 groups in gpu-max-hold-us (3.4-3.9 on average); a
 * device call costs the PMD its runtime calls (~16 us on the H100
 * machine), a CPU rebuild of one group a few us (ISA-L's gf8 ~1 us, the
 * bitmatrix code ~5 us).  With 8 the H200 machine's decoder took 2.3-2.6
 * us a batch against 3.5-5.6 with 2, sending only the calls of a burst of
 * losses to the device (docs/PERFORMANCE.md, twenty-second session). */
#define FEC_DEC_CPU_MAX_GROUPS_DEFAULT 8

/* A decoder's group. */
struct fec_group {
    struct hmap_node node;      /* In fec_inst's 'groups', by id. */
    struct ovs_list lru_node;   /* In fec_inst's 'lru' (or 'done_lru'
                                 * once done), oldest first. */
    uint32_t id;
    unsigned int k, m;
    enum gpu_parity_code code;  /* From its first packet's flags. */
    unsigned int n_data;        /* From a parity packet, else k. */
    bool n_data_known;
    bool done;                  /* Complete: later packets are dropped. */
    long long int start_us;
    unsigned int n_have_data;   /* Data packets 0 .. k-1 received. */
    unsigned int n_have_parity;
    uint8_t **bufs;             /* k + m copies, NULL if not received. */
    size_t *lens;
};

/* A closed group in a device call. */
struct fec_call_group {
    uint32_t id;
    unsigned int n_data;        /* Data packets (fewer than k: short). */
    size_t ofs, cs;             /* Its chunks' offset and size in the
                                 * call's chunks. */
    struct eth_addr dst, src;   /* Encoder: for its parity packets. */
    /* Decoder: the chunks the group lacks (data packets lost, parity
     * packets not used), at call->erasure_ids + 'erasure_ofs'; the call
     * rebuilds its lost data packets. */
    size_t erasure_ofs, n_erasures;
};

/* One device call: closed groups of one code side by side, gathered, then
 * submitted without waiting; their parity (encoder) or rebuilt packets
 * (decoder) go out once it is done, calls in order. */
struct fec_call {
    struct ovs_list node;       /* In fec_inst's 'calls', oldest first. */
    struct gpu_parity *coder;
    unsigned int k, m;
    enum gpu_parity_code code;
    struct gpu_parity_batch *batch;
    uint8_t *mem;               /* k + m chunks of 'cap' bytes... */
    uint8_t *chunks[GPU_PARITY_MAX_CHUNKS];     /* ...at these. */
    size_t cap;
    size_t size;                /* Bytes of each chunk in use. */

    /* Decoder: the groups' erasure lists, side by side, and the segments
     * the call decodes (one per group, each with its own erasures). */
    int *erasure_ids;           /* FEC_CALL_MAX_GROUPS * (k + m). */
    size_t n_erasure_ids;
    struct gpu_parity_segment *segs;    /* FEC_CALL_MAX_GROUPS. */
    struct fec_call *next_free;         /* In fec_inst's 'spare'. */

    /* Encoder: each group's chunk size, and its m parity packets, made
     * when it closes so that the coder writes their chunks straight into
     * them (the device itself where their memory is registered with it:
     * DPDK's), with where the chunks go; a packet is NULL once sent or
     * dropped.  FEC_CALL_MAX_GROUPS and FEC_CALL_MAX_GROUPS * m. */
    size_t *group_sizes;
    struct dp_packet **parity_pkts;
    uint8_t **parity_dst;
    bool coded_on_cpu;          /* Encoder: after a device fault. */

    long long int start_us;     /* First group gathered, then submitted. */
    int status;                 /* Of the submission. */
    bool on_cpu;                /* Decoder: rebuilt at once on the CPU. */
    size_t n_sent;              /* Groups whose packets went out. */
    size_t n_groups;
    struct fec_call_group groups[FEC_CALL_MAX_GROUPS];
};

struct fec_inst {
    struct cmap_node node;      /* In 'instances'. */
    bool encoder;
    char *args;

    unsigned int k, m;          /* Encoder. */
    enum gpu_parity_code code;  /* Encoder: resolved from code=. */
    bool code_auto;             /* Encoder: code=auto chose it. */
    bool device_launch;         /* Encoder: launch=device. */
    long long int timeout_us;
    size_t max_packets, max_bytes;      /* Decoder. */
    size_t cpu_max_groups;              /* Decoder. */

    struct ovs_mutex mutex;
    atomic_llong deadline_us;   /* Next timer, LLONG_MAX if none. */
    atomic_bool poll_work;      /* Something for the poll: see
                                 * fec_set_deadline(). */

    /* The thread whose batch last gathered groups, while that batch may
     * still be in its next actions (see FEC_BATCH_WAIT_MAX_US), and
     * since when; OVSTHREAD_ID_UNSET once its poll came. */
    unsigned int batch_thread;
    long long int batch_thread_us;
    bool batch_thread_counted;  /* In 'n_batch_waits' already. */
    uint64_t n_gathered;        /* Groups ever gathered into calls. */

    /* Device calls: closed groups being gathered, and calls in flight. */
    struct fec_call *gather;
    struct ovs_list calls;
    size_t n_calls;
    struct fec_call *spare;     /* Calls done, for reuse (a list through
                                 * 'next_free'). */
    size_t n_spare;

    /* Packets waiting for room in a batch, oldest first. */
    struct dp_packet *pending[FEC_MAX_PENDING];
    size_t n_pending;

    /* Encoder: the open group. */
    struct gpu_parity *coder;
    uint32_t group;
    unsigned int n;             /* Data packets so far. */
    uint8_t *frames[GPU_PARITY_MAX_CHUNKS];     /* In place or 'stage'. */
    /* The group's frames are copied once, in place in the gathered call
     * ('open_call', the chunks at 'open_ofs', room kept for the longest
     * frames), where their chunks will be; or, if the call had to go
     * first (fec_call_submit()) or there was none, into the stage. */
    struct fec_call *open_call;
    size_t open_ofs;
    uint8_t *stage;             /* k * FEC_MAX_FRAME bytes, or NULL. */
    size_t stage_used;
    size_t lens[GPU_PARITY_MAX_CHUNKS];
    struct eth_addr dst, src;   /* Of the group's last data packet. */
    odp_port_t in_port;
    long long int start_us;

    /* The actions that followed the service in its last batch, if the
     * datapath said (see gpu_service_next), for the timer and the poll to
     * send parity (encoder) or rebuilt packets (decoder) through. */
    bool has_next;
    const void *next_dp;
    uint8_t *next_actions;
    size_t next_actions_len;
    bool next_has_flow;
    struct flow next_flow;

    /* Decoder. */
    void *free_bufs;            /* FEC_SMALL_BUF buffers for copies, a
                                 * list through their first bytes. */
    size_t n_free_bufs;
    struct hmap groups;
    struct fec_group *last_group;       /* Last found: a group's packets
                                         * come one after another. */
    struct ovs_list lru;        /* Groups not done: they hold buffers. */
    struct ovs_list done_lru;   /* Groups done, kept until their timeout
                                 * so that their late parity is known,
                                 * at most max_packets of them. */
    size_t n_done_kept;         /* Groups in 'done_lru'. */
    size_t n_buffered, n_buffered_bytes;
    size_t max_buffered;        /* Most packets buffered at once. */
    uint32_t loss_rng;          /* For "fec-loss". */

    /* Statistics. */
    uint64_t n_groups;          /* Encoder: closed; decoder: completed. */
    uint64_t n_packets;         /* Data packets coded, or passed on. */
    uint64_t n_parity;          /* Parity sent, or received. */
    uint64_t n_losses;          /* Decoder: data packets found missing. */
    uint64_t n_rebuilt;
    uint64_t n_groups_lost;
    uint64_t n_lost_for_room;   /* Decoder: of those, forgotten to make
                                 * room (max_packets, max_bytes)... */
    uint64_t n_lost_parity_only; /* ...and held parity only (it came after
                                  * its group's data was forgotten)... */
    uint64_t n_lost_past_m;     /* ...and timed out with fewer packets
                                 * than a rebuild needs: the link lost
                                 * more than m of them (or the rest came
                                 * after the timeout). */
    uint64_t n_late;            /* Decoder: for a group done or gone. */
    uint64_t n_malformed;
    uint64_t n_unchanged;       /* Not coded, or not FEC: passed as is. */
    uint64_t n_pending_dropped;
    uint64_t n_errors;
    uint64_t n_parity_in_place; /* Encoder: groups whose parity packets
                                 * the device wrote. */
    uint64_t n_faults;          /* Groups of device calls that failed, done
                                 * on the CPU. */
    uint64_t n_fault_calls;     /* Those calls. */
    uint64_t n_calls_done;      /* Device calls. */
    uint64_t n_runtime_calls;   /* CUDA runtime calls they made. */
    uint64_t n_call_groups;     /* Their groups. */
    size_t max_call_groups;
    size_t max_calls;           /* Most calls in flight at once. */
    long long int max_call_us;  /* Longest call, submission to done. */
    uint64_t n_call_waits;      /* Calls waited for at FEC_MAX_CALLS. */
    uint64_t n_batch_waits;     /* Another thread left packets to the
                                 * thread whose batch was in its actions. */
    uint64_t n_cpu_calls;       /* Decoder: calls rebuilt at once on the
                                 * CPU (cpu_max_groups)... */
    uint64_t n_cpu_call_groups; /* ...and their groups. */
    uint64_t n_link_losses;     /* Decoder: "fec-loss" discards. */
    uint64_t n_timeouts;        /* Encoder: groups closed by the timeout. */
    uint64_t n_timeouts_held;   /* ...whose parity the timer could not send
                                 * (no next actions). */
    /* Decoder: groups staged for rebuilding, by code, and what coded the
     * last of them (gpu_parity_impl()). */
    uint64_t n_code_groups[2];
    const char *code_impl[2];
};

static struct cmap instances = CMAP_INITIALIZER;
static struct ovs_mutex instances_mutex = OVS_MUTEX_INITIALIZER;

/* --------------------------------------------------------------- Coders. */

/* Coders are immutable and thread-safe: one per (k, m, code), shared by
 * every instance, created on first use and kept. */
struct fec_coder {
    struct hmap_node node;
    unsigned int k, m;
    enum gpu_parity_code code;
    bool cpu;                   /* On the CPU whatever the backend. */
    bool device_launch;         /* CUDA: encodes launched by the device. */
    struct gpu_parity *coder;
};

static struct hmap coders = HMAP_INITIALIZER(&coders);
static struct ovs_mutex coders_mutex = OVS_MUTEX_INITIALIZER;

/* The decoder learns k and m from the frames, so without a bound the wire
 * could name every pair with k + m <= GPU_PARITY_MAX_CHUNKS, about 32000
 * coders kept forever, the largest holding megabytes of matrices and each
 * built in a PMD thread.  Beyond this many coders made for the decoder,
 * groups of a new (k, m) are not rebuilt (and time out, counted lost);
 * encoders, configured by the operator, always get theirs. */
#define FEC_MAX_WIRE_CODERS 16
static size_t n_wire_coders OVS_GUARDED_BY(coders_mutex);

/* Returns the coder for (k, m, code) on the plugin's backend, or on the
 * CPU if 'cpu' (for what a device call failed to code), made if need be;
 * or NULL with a message in '*errorp' (if nonnull).  'from_wire': for the
 * decoder, on the k, m and code a frame gave.  'device_launch': on CUDA,
 * its packet-group encodes launched by the device rather than by the
 * calling thread (fec_encode's launch=device). */
static struct gpu_parity *
fec_coder_get(unsigned int k, unsigned int m, enum gpu_parity_code code,
              bool cpu, bool device_launch, bool from_wire, char **errorp)
{
    uint32_t hash = hash_3words(k, m, device_launch * 4 + cpu * 2 + code);
    struct gpu_parity *coder = NULL;
    struct gpu_parity_config cfg;
    struct fec_coder *c;
    char err[256];
    int device, status;

    ovs_mutex_lock(&coders_mutex);
    HMAP_FOR_EACH_WITH_HASH (c, node, hash, &coders) {
        if (c->k == k && c->m == m && c->code == code && c->cpu == cpu
            && c->device_launch == device_launch) {
            coder = c->coder;
            goto out;
        }
    }
    if (from_wire && n_wire_coders >= FEC_MAX_WIRE_CODERS) {
        if (errorp) {
            *errorp = xasprintf("k=%u,m=%u: the decoder already uses %d "
                                "codes, its most", k, m,
                                FEC_MAX_WIRE_CODERS);
        }
        goto out;
    }
    gpu_parity_config_init(&cfg, k, m);
    cfg.code = code;
    cfg.packetsize = FEC_PACKETSIZE;
    cfg.backend = gpu_services_get_backend(&device) && !cpu
                  ? GPU_PARITY_BACKEND_CUDA : GPU_PARITY_BACKEND_CPU;
    cfg.device = device;
    /* With launch=device a call is a store to the batch's doorbell, not
     * a launch that costs the PMD microseconds. */
    cfg.device_launch = device_launch;
    status = gpu_parity_create(&cfg, &coder, err, sizeof err);
    if (status && cfg.backend == GPU_PARITY_BACKEND_CUDA) {
        VLOG_WARN("fec k=%u m=%u: CUDA coder failed (%s); using the CPU",
                  k, m, err);
        cfg.backend = GPU_PARITY_BACKEND_CPU;
        status = gpu_parity_create(&cfg, &coder, err, sizeof err);
    }
    if (status) {
        if (errorp) {
            *errorp = xasprintf("k=%u,m=%u: %s", k, m, err);
        }
        coder = NULL;
        goto out;
    }
    c = xmalloc(sizeof *c);
    c->k = k;
    c->m = m;
    c->code = code;
    c->cpu = cpu;
    c->device_launch = device_launch;
    c->coder = coder;
    hmap_insert(&coders, &c->node, hash);
    n_wire_coders += from_wire;
out:
    ovs_mutex_unlock(&coders_mutex);
    return coder;
}

/* A device call of 'inst' coding 'n_groups' groups failed with 'why':
 * returns the CPU coder that codes them instead (NULL if there is none),
 * and counts and logs it.  'done' says what happens to the groups
 * ("coded", "rebuilt"). */
static struct gpu_parity *
fec_coder_on_cpu(struct fec_inst *inst, unsigned int k, unsigned int m,
                 enum gpu_parity_code code, size_t n_groups, int why,
                 const char *done)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);

    inst->n_faults += n_groups;
    inst->n_fault_calls++;
    VLOG_WARN_RL(&rl, "%s(%s): device call failed (%s); its %"PRIuSIZE" "
                 "groups %s on the CPU",
                 inst->encoder ? "fec_encode" : "fec_decode", inst->args,
                 gpu_parity_strerror(why), n_groups, done);
    /* The decoder's k and m come from the wire: bounded as above. */
    return fec_coder_get(k, m, code, true, false, !inst->encoder, NULL);
}

/* ------------------------------------------------------------ Arguments. */

/* Parses 'value' as an integer from 'min' to 'max' into '*out'. */
static char *
fec_parse_uint(const char *name, const char *value, unsigned long long min,
               unsigned long long max, unsigned long long *out)
{
    char *end;

    errno = 0;
    *out = strtoull(value, &end, 10);
    if (errno || end == value || *end || value[0] == '-'
        || *out < min || *out > max) {
        return xasprintf("%s=%s: expected an integer from %llu to %llu",
                         name, value, min, max);
    }
    return NULL;
}

/* An integer option: its name, range and default, and where it goes. */
struct fec_option {
    const char *name;
    unsigned long long min, max, dflt;
    unsigned long long *out;
};

/* Parses 'values[i]', if given, into '*opts[i].out', else sets its
 * default, for the 'n' options of 'opts'. */
static char *
fec_parse_options(const struct fec_option *opts, size_t n,
                  const char *const values[])
{
    for (size_t i = 0; i < n; i++) {
        *opts[i].out = opts[i].dflt;
        if (values[i]) {
            char *error = fec_parse_uint(opts[i].name, values[i],
                                         opts[i].min, opts[i].max,
                                         opts[i].out);
            if (error) {
                return error;
            }
        }
    }
    return NULL;
}

/* Parses the arguments of fec_encode ('encoder') or fec_decode into
 * 'inst''s options. */
static char *
fec_parse_args(const char *args, bool encoder, struct fec_inst *inst)
{
    static const char *const enc_keys[] = {
        "k=", "m=", "group_timeout=", "code=", "launch=", NULL
    };
    static const char *const dec_keys[] = {
        "group_timeout=", "max_packets=", "max_bytes=", "cpu_max_groups=",
        NULL
    };
    const char *values[5];
    char buf[GPU_SERVICE_ARGS_MAX + 1];
    unsigned long long v;
    char *error;

    error = gpu_service_args_split(args, encoder ? enc_keys : dec_keys,
                                   values, buf, sizeof buf);
    if (error) {
        return error;
    }
    if (encoder) {
        char err[256];

        if (!values[0] || !values[1]) {
            return xstrdup("needs k=K and m=M");
        }
        error = fec_parse_uint("k", values[0], 1, GPU_PARITY_MAX_CHUNKS - 1,
                               &v);
        if (error) {
            return error;
        }
        inst->k = v;
        error = fec_parse_uint("m", values[1], 1, GPU_PARITY_MAX_CHUNKS - 1,
                               &v);
        if (error) {
            return error;
        }
        inst->m = v;
        if (inst->k + inst->m > GPU_PARITY_MAX_CHUNKS) {
            return xasprintf("k=%u,m=%u: k + m must be at most %d",
                             inst->k, inst->m, GPU_PARITY_MAX_CHUNKS);
        }
        if (gpu_parity_check_params(inst->k, inst->m, GPU_PARITY_MAX_W,
                                    FEC_PACKETSIZE, err, sizeof err)) {
            return xstrdup(err);
        }
        const struct fec_option timeout = {
            "group_timeout", 1, FEC_TIMEOUT_MAX, FEC_ENC_TIMEOUT_DEFAULT, &v
        };

        error = fec_parse_options(&timeout, 1, &values[2]);
        if (error) {
            return error;
        }
        inst->timeout_us = v;
        inst->code_auto = !values[3] || !strcmp(values[3], "auto");
        if (!inst->code_auto
            && gpu_parity_code_parse(values[3], &inst->code)) {
            return xasprintf("code=%s: expected gf8, bitmatrix or auto",
                             values[3]);
        }
        if (values[4] && strcmp(values[4], "host")
            && strcmp(values[4], "device")) {
            return xasprintf("launch=%s: expected host or device",
                             values[4]);
        }
        /* The host's launch stays the default: the device's has passed
         * the library's tests on the H200 but was not measured in the
         * switch (a scheduler a call, where re_encode has one a peer). */
        inst->device_launch = values[4] && !strcmp(values[4], "device");
    } else {
        unsigned long long timeout, max_packets, max_bytes, cpu_max_groups;
        /* In dec_keys' order. */
        const struct fec_option opts[] = {
            { "group_timeout", 1, FEC_TIMEOUT_MAX, FEC_DEC_TIMEOUT_DEFAULT,
              &timeout },
            { "max_packets", 1, 1 << 20, FEC_DEC_MAX_PACKETS_DEFAULT,
              &max_packets },
            /* Room for one largest frame at least. */
            { "max_bytes", 65536, UINT64_C(1) << 32,
              FEC_DEC_MAX_BYTES_DEFAULT, &max_bytes },
            { "cpu_max_groups", 0, FEC_CALL_MAX_GROUPS,
              FEC_DEC_CPU_MAX_GROUPS_DEFAULT, &cpu_max_groups },
        };

        error = fec_parse_options(opts, ARRAY_SIZE(opts), values);
        if (error) {
            return error;
        }
        inst->timeout_us = timeout;
        inst->max_packets = max_packets;
        inst->max_bytes = max_bytes;
        inst->cpu_max_groups = cpu_max_groups;
    }
    return NULL;
}

static struct fec_inst *
fec_inst_find(const char *args, bool encoder)
{
    struct fec_inst *inst;

    CMAP_FOR_EACH_WITH_HASH (inst, node, hash_string(args, encoder),
                             &instances) {
        if (inst->encoder == encoder && !strcmp(inst->args, args)) {
            return inst;
        }
    }
    return NULL;
}

/* Sets up the state of 'inst', whose arguments (and coder, for an
 * encoder) are set, as the instance named 'args'. */
static void
fec_inst_init(struct fec_inst *inst, const char *args, bool encoder)
{
    inst->encoder = encoder;
    inst->args = xstrdup(args);
    ovs_mutex_init(&inst->mutex);
    atomic_init(&inst->deadline_us, LLONG_MAX);
    inst->batch_thread = OVSTHREAD_ID_UNSET;
    atomic_init(&inst->poll_work, false);
    ovs_list_init(&inst->calls);
    hmap_init(&inst->groups);
    ovs_list_init(&inst->lru);
    ovs_list_init(&inst->done_lru);
    /* Seeded by the arguments: a benchmark's losses repeat run to run. */
    inst->loss_rng = hash_string(args, 0x10557) | 1;
}

/* Sets the code of encoder 'inst' where its code= left it to us ("auto"):
 * gf8 where the backend is the CPU and ISA-L codes it, which beats the
 * bitmatrix code there; bitmatrix on a GPU, whose kernel is the measured
 * one. */
static void
fec_encoder_resolve_code(struct fec_inst *inst)
{
    int device;

    if (inst->code_auto) {
        inst->code = (!gpu_services_get_backend(&device)
                      && gpu_parity_isal_built()
                      ? GPU_PARITY_CODE_GF8 : GPU_PARITY_CODE_BITMATRIX);
    }
}

/* Checks a flow's arguments and creates the instance they name, in the
 * main thread, so that a PMD thread never builds a coder. */
static char *
fec_check(const char *args, bool encoder)
{
    struct fec_inst *inst = xzalloc(sizeof *inst);
    char *error = fec_parse_args(args, encoder, inst);

    if (error) {
        free(inst);
        return error;
    }
    ovs_mutex_lock(&instances_mutex);
    if (fec_inst_find(args, encoder)) {
        ovs_mutex_unlock(&instances_mutex);
        free(inst);
        return NULL;
    }
    if (encoder) {
        fec_encoder_resolve_code(inst);
        inst->coder = fec_coder_get(inst->k, inst->m, inst->code, false,
                                    inst->device_launch, false, &error);
        if (!inst->coder) {
            ovs_mutex_unlock(&instances_mutex);
            free(inst);
            return error;
        }
        inst->group = random_uint32();
    }
    fec_inst_init(inst, args, encoder);
    gpu_service_packets_init();
    if (encoder && gpu_parity_backend(inst->coder)
                   == GPU_PARITY_BACKEND_CUDA) {
        struct gpu_parity_config cfg;

        /* So that the device writes parity straight into the packets. */
        gpu_parity_get_config(inst->coder, &cfg);
        gpu_service_register_packet_memory(cfg.device);
    }
    cmap_insert(&instances, &inst->node, hash_string(args, encoder));
    ovs_mutex_unlock(&instances_mutex);
    VLOG_INFO("%s(%s) created", encoder ? "fec_encode" : "fec_decode",
              args);
    return NULL;
}

static char *
fec_encode_check(const char *args)
{
    return fec_check(args, true);
}

static char *
fec_decode_check(const char *args)
{
    return fec_check(args, false);
}

/* -------------------------------------------------------------- Output. */

/* What a batch will carry out of the service, in order. */
struct fec_out {
    struct dp_packet *pkts[NETDEV_MAX_BURST];
    size_t n;
    size_t n_reserved;          /* Slots kept for input packets to come. */
    bool may_steal;
};

static void
fec_pending_push(struct fec_inst *inst, struct dp_packet *packet)
    OVS_REQUIRES(inst->mutex)
{
    if (inst->n_pending == FEC_MAX_PENDING) {
        dp_packet_delete(inst->pending[0]);
        memmove(&inst->pending[0], &inst->pending[1],
                (FEC_MAX_PENDING - 1) * sizeof inst->pending[0]);
        inst->n_pending--;
        inst->n_pending_dropped++;
    }
    inst->pending[inst->n_pending++] = packet;
}

/* Whether this thread may send what the calls made: not while another
 * thread's batch that gathered groups may still be in its next actions
 * (see FEC_BATCH_WAIT_MAX_US).  Reads the clock only then: it is asked
 * on every batch. */
static bool
fec_may_send(struct fec_inst *inst)
    OVS_REQUIRES(inst->mutex)
{
    if (inst->batch_thread == OVSTHREAD_ID_UNSET
        || inst->batch_thread == ovsthread_id_self()) {
        return true;
    }
    if (gpu_service_now_us() - inst->batch_thread_us
        >= FEC_BATCH_WAIT_MAX_US) {
        inst->batch_thread = OVSTHREAD_ID_UNSET;
        return true;
    }
    if (!inst->batch_thread_counted) {
        inst->batch_thread_counted = true;
        inst->n_batch_waits++;
    }
    return false;
}

/* Called by a thread outside its batches (its poll, its timer): a batch of
 * its that gathered groups is through its actions. */
static void
fec_batch_through(struct fec_inst *inst)
    OVS_REQUIRES(inst->mutex)
{
    if (inst->batch_thread == ovsthread_id_self()) {
        inst->batch_thread = OVSTHREAD_ID_UNSET;
    }
}

/* Sends 'packet', made by the service, with this batch if there is room
 * and nothing older waits, else later. */
static void
fec_emit(struct fec_inst *inst, struct fec_out *out, struct dp_packet *packet)
    OVS_REQUIRES(inst->mutex)
{
    if (out && out->may_steal && !inst->n_pending
        && out->n + out->n_reserved < NETDEV_MAX_BURST) {
        out->pkts[out->n++] = packet;
        if (inst->encoder) {
            inst->n_parity++;
        }
    } else {
        fec_pending_push(inst, packet);
    }
}

/* Moves what waits into 'out', as far as room allows. */
static void
fec_pending_flush(struct fec_inst *inst, struct fec_out *out)
    OVS_REQUIRES(inst->mutex)
{
    size_t n = 0;

    if (!out->may_steal || !fec_may_send(inst)) {
        return;
    }
    while (n < inst->n_pending
           && out->n + out->n_reserved < NETDEV_MAX_BURST) {
        out->pkts[out->n++] = inst->pending[n++];
        if (inst->encoder) {
            inst->n_parity++;
        }
    }
    memmove(&inst->pending[0], &inst->pending[n],
            (inst->n_pending - n) * sizeof inst->pending[0]);
    inst->n_pending -= n;
}

static void
fec_put_header(uint8_t *frame, const struct eth_addr *dst,
               const struct eth_addr *src, const struct fec_hdr *hdr)
{
    struct eth_header *eth = (struct eth_header *) frame;

    eth->eth_dst = *dst;
    eth->eth_src = *src;
    eth->eth_type = htons(FEC_ETH_TYPE);
    memcpy(frame + ETH_HEADER_LEN, hdr, sizeof *hdr);
}

/* --------------------------------------------------------- Device calls.
 *
 * A closed group (encoder: its k data packets; decoder: the k packets it
 * has, once it lacks data that they can rebuild) is not coded at once: its
 * chunks are staged side by side with other closed groups' into the
 * instance's gathered call ('gather'), which is submitted without waiting
 * once it is full, once its first group has waited gpu-max-hold-us, or
 * when the thread has nothing else to do (an idle poll, the timer).  What
 * a call makes (parity, rebuilt packets) goes out from the poll of the
 * thread that submitted it, or from the next batch, calls in the order
 * they were submitted, so parity leaves in group order.  A call the device
 * fails is coded again on the CPU. */

static void fec_set_deadline(struct fec_inst *);
static void fec_calls_run(struct fec_inst *, struct fec_out *,
                          enum gpu_service_poll_mode, long long int);
static void fec_encode_send_parity(struct fec_inst *, struct fec_call *,
                                   const struct fec_call_group *,
                                   struct fec_out *);
static void fec_decode_send_rebuilt(struct fec_inst *,
                                    const struct fec_call *,
                                    const struct fec_call_group *,
                                    struct fec_out *);

/* Drops the parity packets of group 'gi' of 'call' not sent. */
static void
fec_call_drop_parity(struct fec_call *call, size_t gi)
{
    for (unsigned int j = 0; call->parity_pkts && j < call->m; j++) {
        struct dp_packet **pp = &call->parity_pkts[gi * call->m + j];

        dp_packet_delete(*pp);
        *pp = NULL;
    }
}

static void
fec_call_destroy(struct fec_call *call)
{
    if (call) {
        /* Waited for first: the device may be writing the packets. */
        gpu_parity_batch_destroy(call->batch);
        for (size_t gi = 0; gi < call->n_groups; gi++) {
            fec_call_drop_parity(call, gi);
        }
        free(call->group_sizes);
        free(call->parity_pkts);
        free(call->parity_dst);
        if (call->mem) {
            gpu_host_free(call->mem);
        }
        free(call->erasure_ids);
        free(call->segs);
        free(call);
    }
}

/* Frees the calls kept for reuse. */
static void
fec_calls_free_spares(struct fec_inst *inst)
    OVS_REQUIRES(inst->mutex)
{
    while (inst->spare) {
        struct fec_call *call = inst->spare;

        inst->spare = call->next_free;
        fec_call_destroy(call);
    }
    inst->n_spare = 0;
}

/* Keeps the done 'call' for reuse: its pinned memory, touched, costs
 * nothing the next time, where a new one costs page faults. */
static void
fec_call_recycle(struct fec_inst *inst, struct fec_call *call)
    OVS_REQUIRES(inst->mutex)
{
    if (inst->n_spare >= FEC_MAX_CALLS) {
        fec_call_destroy(call);
        return;
    }
    call->next_free = inst->spare;
    inst->spare = call;
    inst->n_spare++;
}

/* Returns an empty call for groups of 'coder' (k, m), or NULL if memory or
 * the device has none (logged). */
static struct fec_call *
fec_call_new(struct fec_inst *inst, struct gpu_parity *coder,
             unsigned int k, unsigned int m)
    OVS_REQUIRES(inst->mutex)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    struct fec_call *call = inst->spare;
    size_t unit, cap;
    int error;

    if (call) {
        inst->spare = call->next_free;
        inst->n_spare--;
        if (call->coder == coder) {
            call->size = 0;
            call->n_sent = 0;
            call->n_groups = 0;
            call->n_erasure_ids = 0;
            call->on_cpu = false;
            call->coded_on_cpu = false;
            return call;
        }
        /* Another code's: the others kept are likely the same. */
        fec_call_destroy(call);
        fec_calls_free_spares(inst);
    }

    /* Room for one largest group at least. */
    unit = gpu_parity_pkt_chunk_size(coder, 0);
    cap = MAX(gpu_parity_pkt_chunk_size(coder, FEC_MAX_FRAME),
              FEC_CALL_BYTES / (k + m) / unit * unit);
    call = xzalloc(sizeof *call);
    call->coder = coder;
    call->k = k;
    call->m = m;
    struct gpu_parity_config cfg;
    gpu_parity_get_config(coder, &cfg);
    call->code = cfg.code;
    call->cap = cap;
    call->mem = gpu_host_alloc((k + m) * cap);
    if (!inst->encoder) {
        call->erasure_ids = xmalloc(FEC_CALL_MAX_GROUPS * (k + m)
                                    * sizeof *call->erasure_ids);
        call->segs = xmalloc(FEC_CALL_MAX_GROUPS * sizeof *call->segs);
    } else {
        call->group_sizes = xmalloc(FEC_CALL_MAX_GROUPS
                                    * sizeof *call->group_sizes);
        call->parity_pkts = xcalloc(FEC_CALL_MAX_GROUPS * m,
                                    sizeof *call->parity_pkts);
        call->parity_dst = xmalloc(FEC_CALL_MAX_GROUPS * m
                                   * sizeof *call->parity_dst);
    }
    error = (call->mem ? gpu_parity_batch_create(coder, cap, &call->batch)
             : GPU_ERR_NOMEM);
    if (error) {
        VLOG_WARN_RL(&rl, "%s(%s): no device call to be had (%s)",
                     inst->encoder ? "fec_encode" : "fec_decode",
                     inst->args, gpu_parity_strerror(error));
        fec_call_destroy(call);
        return NULL;
    }
    for (unsigned int i = 0; i < k + m; i++) {
        call->chunks[i] = call->mem + i * cap;
    }
    return call;
}

static void fec_call_finish_oldest(struct fec_inst *);
static void fec_encode_unplace(struct fec_inst *);

/* Decoder: rebuilds the few groups of 'call', whose segments are set, at
 * once with a CPU coder of its code (see FEC_DEC_CPU_MAX_GROUPS_DEFAULT),
 * into '*status'.  Returns false, leaving 'call' for the device, if there
 * is no such coder. */
static bool
fec_call_rebuild_on_cpu(struct fec_inst *inst, struct fec_call *call,
                        int *status)
    OVS_REQUIRES(inst->mutex)
{
    struct gpu_parity *cpu = fec_coder_get(call->k, call->m, call->code,
                                           true, false, true, NULL);

    if (!cpu) {
        return false;
    }
    *status = gpu_parity_decode_segments(cpu, call->chunks,
                                         call->chunks + call->k,
                                         call->segs, call->n_groups);
    call->on_cpu = true;
    inst->code_impl[call->code] = gpu_parity_impl(cpu);
    inst->n_cpu_calls++;
    inst->n_cpu_call_groups += call->n_groups;
    return true;
}

/* Decoder: the segments of 'call', one per group, each rebuilding the
 * group's lost data packets from the chunks it has. */
static void
fec_call_segments(struct fec_call *call)
{
    for (size_t i = 0; i < call->n_groups; i++) {
        const struct fec_call_group *g = &call->groups[i];
        struct gpu_parity_segment *seg = &call->segs[i];

        seg->offset = g->ofs;
        seg->size = g->cs;
        seg->erasures = call->erasure_ids + g->erasure_ofs;
        seg->n_erasures = g->n_erasures;
        seg->data_only = true;
    }
}

/* Submits the gathered call, without waiting.  Its status (an injected
 * fault's too) is looked at once it is done, in turn. */
static void
fec_call_submit(struct fec_inst *inst)
    OVS_REQUIRES(inst->mutex)
{
    struct fec_call *call = inst->gather;
    int status;

    inst->gather = NULL;
    if (call == inst->open_call) {
        fec_encode_unplace(inst);
    }
    if (!call->n_groups) {
        /* Only kept room for an open group. */
        fec_call_recycle(inst, call);
        return;
    }
    if (inst->n_calls >= FEC_MAX_CALLS) {
        /* Memory (pinned, on a device) stays bounded: the oldest call is
         * waited for, and its packets wait in the instance. */
        inst->n_call_waits++;
        fec_call_finish_oldest(inst);
    }
    if (!inst->encoder) {
        /* For the device, or the CPU if it fails. */
        fec_call_segments(call);
    }
    status = gpu_service_fault_take(GPU_FAULT_FEC);
    if (!status && !inst->encoder && call->n_groups <= inst->cpu_max_groups
        && fec_call_rebuild_on_cpu(inst, call, &status)) {
        /* Done already; it goes out after the calls before it. */
    } else {
        if (!status && inst->encoder) {
            status = gpu_parity_pkt_encode_submit(call->batch, NULL,
                                                  call->chunks,
                                                  call->chunks + call->k,
                                                  call->group_sizes,
                                                  call->n_groups,
                                                  call->parity_dst);
        } else if (!status) {
            status = gpu_parity_decode_submit_segments(
                call->batch, NULL, call->chunks, call->chunks + call->k,
                call->segs, call->n_groups);
        }
        if (!status) {
            inst->n_runtime_calls
                += gpu_parity_batch_runtime_calls(call->batch);
        }
        inst->n_calls_done++;
        inst->n_call_groups += call->n_groups;
        inst->max_call_groups = MAX(inst->max_call_groups, call->n_groups);
    }
    call->status = status;
    call->start_us = gpu_service_now_us();
    ovs_list_push_back(&inst->calls, &call->node);
    inst->n_calls++;
    inst->max_calls = MAX(inst->max_calls, inst->n_calls);
}

/* Returns room for a closed group of 'cs'-byte chunks of 'coder' in the
 * gathered call, or NULL if there is no call to be had.  Groups of
 * another code, or that leave no room, are submitted first; the decoder's
 * groups each have their own erasures (a segment of the call).  The
 * caller writes the group's chunks (and the decoder its erasures), then
 * calls fec_call_added(). */
static struct fec_call_group *
fec_call_add(struct fec_inst *inst, struct gpu_parity *coder,
             unsigned int k, unsigned int m, size_t cs, long long int now)
    OVS_REQUIRES(inst->mutex)
{
    struct fec_call *call = inst->gather;
    struct fec_call_group *g;

    if (call && (call->coder != coder || call->size + cs > call->cap)) {
        fec_call_submit(inst);
        call = NULL;
    }
    if (!call) {
        call = fec_call_new(inst, coder, k, m);
        if (!call || cs > call->cap) {
            if (call) {
                fec_call_recycle(inst, call);
            }
            return NULL;
        }
        inst->gather = call;
    }
    if (!call->n_groups) {
        /* Its groups wait from the first one's closing, not from when
         * an open group kept room in it. */
        call->start_us = now;
    }
    g = &call->groups[call->n_groups++];
    inst->n_gathered++;
    g->ofs = call->size;
    g->cs = cs;
    g->erasure_ofs = call->n_erasure_ids;
    g->n_erasures = 0;
    call->size += cs;
    return g;
}

/* The gathered call has one more group: submitted if full, or if groups
 * may not wait (gpu-max-hold-us 0). */
static void
fec_call_added(struct fec_inst *inst)
    OVS_REQUIRES(inst->mutex)
{
    if (inst->gather->n_groups == FEC_CALL_MAX_GROUPS
        || !gpu_services_get_max_hold_us()) {
        fec_call_submit(inst);
    }
}

/* Returns true if 'call' is done (coded on the CPU if the device failed
 * it), waiting for it if 'wait'. */
static bool
fec_call_done(struct fec_inst *inst, struct fec_call *call, bool wait,
              long long int now)
    OVS_REQUIRES(inst->mutex)
{
    int slow = gpu_service_test_knob(GPU_KNOB_FEC_SLOW);

    if (call->on_cpu) {
        return true;
    }
    if (!wait && OVS_UNLIKELY(slow) && now - call->start_us < slow) {
        return false;
    }
    if (!call->status) {
        int status;

        if (wait) {
            status = gpu_parity_wait(call->batch);
            gpu_service_clock_forget();
        } else {
            status = gpu_parity_poll(call->batch);
            if (status == GPU_ERR_BUSY) {
                return false;
            }
        }
        call->status = status;
        inst->max_call_us = MAX(inst->max_call_us,
                                gpu_service_now_us() - call->start_us);
    }
    if (gpu_service_is_device_error(call->status)) {
        struct gpu_parity *cpu = fec_coder_on_cpu(
            inst, call->k, call->m, call->code, call->n_groups,
            call->status, inst->encoder ? "coded" : "rebuilt");

        if (!cpu) {
            /* Left failed: its groups are counted as errors. */
        } else if (inst->encoder) {
            call->status = gpu_parity_pkt_encode_groups(
                cpu, call->chunks, call->chunks + call->k,
                call->group_sizes, call->n_groups, call->parity_dst);
            call->coded_on_cpu = true;
        } else {
            call->status = gpu_parity_decode_segments(cpu, call->chunks,
                                                      call->chunks + call->k,
                                                      call->segs,
                                                      call->n_groups);
        }
    }
    return true;
}

/* Sends what the done 'call', the oldest, made (into 'out' if room, else
 * to wait in the instance) and recycles it.  A call may make more packets
 * than may wait (FEC_MAX_PENDING): unless 'force', its groups go out as
 * room allows, the rest on the next poll, once the waiting ones are sent.
 * Returns true if the call is done with. */
static bool
fec_call_send(struct fec_inst *inst, struct fec_call *call,
              struct fec_out *out, bool force)
    OVS_REQUIRES(inst->mutex)
{
    while (call->n_sent < call->n_groups
           && (force || !inst->n_pending
               || inst->n_pending + call->m <= FEC_MAX_PENDING)) {
        const struct fec_call_group *g = &call->groups[call->n_sent++];

        if (inst->encoder) {
            fec_encode_send_parity(inst, call, g, out);
        } else {
            fec_decode_send_rebuilt(inst, call, g, out);
        }
    }
    if (call->n_sent < call->n_groups) {
        return false;
    }
    ovs_list_remove(&call->node);
    inst->n_calls--;
    fec_call_recycle(inst, call);
    return true;
}

/* At the bound of calls in flight: waits for the oldest only, and sends
 * what it made (to wait in the instance, oldest dropped beyond
 * FEC_MAX_PENDING as always), so that one more call may go. */
static void
fec_call_finish_oldest(struct fec_inst *inst)
    OVS_REQUIRES(inst->mutex)
{
    struct fec_call *call = CONTAINER_OF(ovs_list_front(&inst->calls),
                                         struct fec_call, node);

    fec_call_done(inst, call, true, 0);
    fec_call_send(inst, call, NULL, true);
}

/* Submits the gathered groups when they may wait no longer: at once if
 * 'mode' is not GPU_SERVICE_POLL_BUSY (the thread is idle, or finishes).
 * Then sends (into 'out' if room, else to wait in the instance) what the
 * calls in flight made, oldest call first, as far as they are done; with
 * GPU_SERVICE_POLL_FINISH all of them, waiting. */
static void
fec_calls_run(struct fec_inst *inst, struct fec_out *out,
              enum gpu_service_poll_mode mode, long long int now)
    OVS_REQUIRES(inst->mutex)
{
    bool finish = mode == GPU_SERVICE_POLL_FINISH;

    if (inst->gather && inst->gather->n_groups
        && (mode != GPU_SERVICE_POLL_BUSY
            || now - inst->gather->start_us
               >= gpu_services_get_max_hold_us())) {
        fec_call_submit(inst);
    }
    while (!ovs_list_is_empty(&inst->calls) && fec_may_send(inst)) {
        struct fec_call *call = CONTAINER_OF(ovs_list_front(&inst->calls),
                                             struct fec_call, node);

        if (!fec_call_done(inst, call, finish, now)
            || !fec_call_send(inst, call, out, finish)) {
            break;
        }
    }
}

/* Publishes when the timer has work ('deadline_us'), and whether the poll
 * has ('poll_work'): packets waiting that saved next actions can send
 * (due at once), groups gathered or in flight, a batch's thread to poll
 * (until then, other threads' timers have nothing to do). */
static void
fec_set_deadline(struct fec_inst *inst)
    OVS_REQUIRES(inst->mutex)
{
    long long int deadline = LLONG_MAX;
    bool sendable = inst->n_pending && inst->has_next;
    bool gathering;

    if (sendable) {
        deadline = 0;
    } else if (inst->encoder && inst->n) {
        deadline = inst->start_us + inst->timeout_us;
    } else if (!inst->encoder) {
        const struct ovs_list *lists[] = { &inst->lru, &inst->done_lru };

        for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
            if (!ovs_list_is_empty(lists[i])) {
                struct fec_group *g = CONTAINER_OF(ovs_list_front(lists[i]),
                                                   struct fec_group,
                                                   lru_node);

                deadline = MIN(deadline, g->start_us + inst->timeout_us);
            }
        }
    }
    /* The poll does these; the timer is the fallback.  A gathered call
     * with no group only keeps room for the open group. */
    gathering = inst->gather && inst->gather->n_groups;
    if (gathering) {
        deadline = MIN(deadline, inst->gather->start_us + FEC_CALL_TIMER_US
                                 + gpu_services_get_max_hold_us());
    }
    if (inst->n_calls) {
        struct fec_call *call = CONTAINER_OF(ovs_list_front(&inst->calls),
                                             struct fec_call, node);

        deadline = MIN(deadline,
                       call->start_us
                       + MAX(FEC_CALL_TIMER_US,
                             gpu_service_test_knob(GPU_KNOB_FEC_SLOW)));
    }
    if (inst->batch_thread != OVSTHREAD_ID_UNSET) {
        deadline = MAX(deadline,
                       inst->batch_thread_us + FEC_BATCH_WAIT_MAX_US);
    }
    atomic_store_relaxed(&inst->deadline_us, deadline);
    atomic_store_relaxed(&inst->poll_work,
                         sendable || gathering || inst->n_calls
                         || inst->batch_thread != OVSTHREAD_ID_UNSET);
}

/* ------------------------------------------------------------- Encoder. */

/* Opens a group: keeps room for it in the gathered call (made if there is
 * none) where that has room for k of the longest frames, so that its
 * frames are copied once, in place; else they go to the stage.  A call
 * with too little room is left to be submitted when the group closes, as
 * it would be without. */
static void
fec_encode_place(struct fec_inst *inst)
    OVS_REQUIRES(inst->mutex)
{
    size_t room = gpu_parity_pkt_chunk_size(inst->coder, FEC_MAX_FRAME);

    if (!inst->gather) {
        inst->gather = fec_call_new(inst, inst->coder, inst->k, inst->m);
    }
    if (inst->gather && inst->gather->size + room <= inst->gather->cap) {
        inst->open_call = inst->gather;
        inst->open_ofs = inst->gather->size;
    } else {
        inst->open_call = NULL;
    }
}

/* The gathered call holding the open group's frames is about to go: they
 * move to the stage. */
static void
fec_encode_unplace(struct fec_inst *inst)
    OVS_REQUIRES(inst->mutex)
{
    if (!inst->stage) {
        inst->stage = xmalloc(inst->k * FEC_MAX_FRAME);
    }
    for (unsigned int i = 0; i < inst->n; i++) {
        memcpy(inst->stage + inst->stage_used, inst->frames[i],
               inst->lens[i]);
        inst->frames[i] = inst->stage + inst->stage_used;
        inst->stage_used += inst->lens[i];
    }
    inst->open_call = NULL;
    COVERAGE_INC(fec_encode_open_moved);
}

/* Makes the parity packets of the group 'g' of 'call', whose chunks the
 * coder writes into them. */
static void
fec_encode_make_parity(struct fec_inst *inst, struct fec_call *call,
                       const struct fec_call_group *g)
    OVS_REQUIRES(inst->mutex)
{
    size_t gi = g - call->groups;

    call->group_sizes[gi] = g->cs;
    for (unsigned int j = 0; j < call->m; j++) {
        struct dp_packet *pp = gpu_service_packet_new(FEC_HLEN + g->cs,
                                                      inst->in_port);

        call->parity_pkts[gi * call->m + j] = pp;
        call->parity_dst[gi * call->m + j] = ((uint8_t *) dp_packet_data(pp)
                                              + FEC_HLEN);
    }
}

/* Closes the open group, even a short one: stages it to be coded. */
static void
fec_encode_close(struct fec_inst *inst, long long int now)
    OVS_REQUIRES(inst->mutex)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    struct fec_call_group *g;
    size_t max_len = 0;

    if (!inst->n) {
        return;
    }
    for (unsigned int i = 0; i < inst->n; i++) {
        max_len = MAX(max_len, inst->lens[i]);
    }
    g = fec_call_add(inst, inst->coder, inst->k, inst->m,
                     gpu_parity_pkt_chunk_size(inst->coder, max_len), now);
    if (g) {
        g->id = inst->group;
        g->n_data = inst->n;
        g->dst = inst->dst;
        g->src = inst->src;
        /* Still in place only if its call was not submitted meanwhile,
         * so the group went where it kept room. */
        ovs_assert(!inst->open_call || g->ofs == inst->open_ofs);
        for (unsigned int i = 0; i < inst->k; i++) {
            uint8_t *chunk = inst->gather->chunks[i] + g->ofs;

            if (i < inst->n && !inst->open_call) {
                memcpy(chunk + GPU_PARITY_PKT_HLEN, inst->frames[i],
                       inst->lens[i]);
            }
            /* The missing packets of a short group code as empty ones;
             * the decoder knows them from n_data.  The zeros after each
             * packet are the coder's to write (the device's on CUDA):
             * more bytes than the packets, for the Internet mix. */
            gpu_parity_pkt_chunk_head(chunk, i < inst->n ? inst->lens[i]
                                                         : 0);
        }
        fec_encode_make_parity(inst, inst->gather, g);
        /* Closed: a call submitted now has nothing open to move. */
        inst->open_call = NULL;
        fec_call_added(inst);
    } else {
        inst->n_errors++;
        VLOG_WARN_RL(&rl, "fec_encode(%s): group %"PRIu32" not coded; its "
                     "packets went without parity", inst->args,
                     inst->group);
    }
    inst->open_call = NULL;
    inst->stage_used = 0;
    inst->n = 0;
    inst->group++;
}

/* Sends (or queues) the parity of group 'g' of the done 'call'. */
static void
fec_encode_send_parity(struct fec_inst *inst, struct fec_call *call,
                       const struct fec_call_group *g, struct fec_out *out)
    OVS_REQUIRES(inst->mutex)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    size_t gi = g - call->groups;

    if (call->status) {
        inst->n_errors++;
        VLOG_WARN_RL(&rl, "fec_encode(%s): group %"PRIu32" not coded (%s); "
                     "its packets went without parity", inst->args, g->id,
                     gpu_parity_strerror(call->status));
        fec_call_drop_parity(call, gi);
        return;
    }
    if (!call->coded_on_cpu && gpu_parity_batch_wrote_in_place(call->batch)) {
        inst->n_parity_in_place++;
    }
    for (unsigned int j = 0; j < call->m; j++) {
        struct dp_packet *pp = call->parity_pkts[gi * call->m + j];
        uint8_t *frame = dp_packet_data(pp);
        struct fec_hdr hdr = {
            .magic = FEC_MAGIC,
            .flags = (FEC_F_PARITY
                      | (call->code == GPU_PARITY_CODE_GF8 ? FEC_F_GF8 : 0)),
            .k = call->k,
            .m = call->m,
            .index = call->k + j,
            .n_data = g->n_data,
        };

        put_16aligned_be32(&hdr.group, htonl(g->id));
        fec_put_header(frame, &g->dst, &g->src, &hdr);
        /* The coder wrote the parity at frame + FEC_HLEN. */
        call->parity_pkts[gi * call->m + j] = NULL;
        fec_emit(inst, out, pp);
    }
    inst->n_groups++;
}

/* Remembers 'next' (NULL if the datapath gave none) as the actions that
 * follow the service.  They rarely change, so they are copied only when
 * they do. */
static void
fec_save_next(struct fec_inst *inst,
                     const struct gpu_service_next *next)
    OVS_REQUIRES(inst->mutex)
{
    if (!next) {
        inst->has_next = false;
        return;
    }
    if (inst->has_next && inst->next_dp == next->dp
        && inst->next_actions_len == next->actions_len
        && !memcmp(inst->next_actions, next->actions, next->actions_len)
        && inst->next_has_flow == (next->flow != NULL)
        && (!next->flow
            || !memcmp(&inst->next_flow, next->flow, sizeof *next->flow))) {
        return;
    }
    free(inst->next_actions);
    inst->next_actions = xmemdup(next->actions, next->actions_len);
    inst->next_actions_len = next->actions_len;
    inst->next_dp = next->dp;
    inst->next_has_flow = next->flow != NULL;
    if (next->flow) {
        inst->next_flow = *next->flow;
    }
    inst->has_next = true;
}

static void
fec_encode_expire(struct fec_inst *inst, long long int now)
    OVS_REQUIRES(inst->mutex)
{
    if (inst->n && now - inst->start_us >= inst->timeout_us) {
        inst->n_timeouts++;
        fec_encode_close(inst, now);
    }
}

static void
fec_encode_batch(struct fec_inst *inst, struct dp_packet_batch *batch,
                 struct fec_out *out, long long int now)
    OVS_REQUIRES(inst->mutex)
{
    size_t n_in = dp_packet_batch_size(batch);
    struct dp_packet *packet;

    fec_encode_expire(inst, now);
    fec_pending_flush(inst, out);
    DP_PACKET_BATCH_FOR_EACH (i, packet, batch) {
        size_t size = dp_packet_size(packet);
        const struct eth_header *eth;

        out->n_reserved = n_in - i - 1;
        if (i + 1 < n_in) {
            /* The header goes in front of the frame, in headroom no one
             * has touched: a cache miss per packet, unless fetched while
             * this one is copied. */
            const uint8_t *next = dp_packet_data(batch->packets[i + 1]);

            OVS_PREFETCH_WRITE(next - FEC_HLEN);
        }
        if (packet->packet_type != htonl(PT_ETH) || size < ETH_HEADER_LEN
            || size > FEC_MAX_FRAME) {
            inst->n_unchanged++;
            out->pkts[out->n++] = packet;
            continue;
        }
        if (!inst->n) {
            inst->start_us = now;
            fec_encode_place(inst);
        }
        eth = dp_packet_data(packet);
        inst->dst = eth->eth_dst;
        inst->src = eth->eth_src;
        inst->in_port = packet->md.in_port.odp_port;
        if (inst->open_call) {
            inst->frames[inst->n] = (inst->open_call->chunks[inst->n]
                                     + inst->open_ofs + GPU_PARITY_PKT_HLEN);
        } else {
            if (!inst->stage) {
                inst->stage = xmalloc(inst->k * FEC_MAX_FRAME);
            }
            /* Side by side, k frames at most. */
            inst->frames[inst->n] = inst->stage + inst->stage_used;
            inst->stage_used += size;
        }
        memcpy(inst->frames[inst->n], dp_packet_data(packet), size);
        inst->lens[inst->n] = size;

        struct fec_hdr hdr = {
            .magic = FEC_MAGIC,
            .flags = inst->code == GPU_PARITY_CODE_GF8 ? FEC_F_GF8 : 0,
            .k = inst->k,
            .m = inst->m,
            .index = inst->n,
        };
        put_16aligned_be32(&hdr.group, htonl(inst->group));
        dp_packet_resize_l2(packet, FEC_HLEN);
        fec_put_header(dp_packet_data(packet), &inst->dst, &inst->src,
                       &hdr);
        out->pkts[out->n++] = packet;
        inst->n_packets++;
        if (++inst->n == inst->k) {
            fec_encode_close(inst, now);
        }
    }
}

/* ------------------------------------------------------------- Decoder. */

/* A copy of the 'len' bytes at 'p', in a reused buffer where it fits. */
static uint8_t *
fec_buf_copy(struct fec_inst *inst, const void *p, size_t len)
    OVS_REQUIRES(inst->mutex)
{
    uint8_t *buf;

    if (len > FEC_SMALL_BUF) {
        return xmemdup(p, len);
    }
    if (inst->free_bufs) {
        buf = inst->free_bufs;
        memcpy(&inst->free_bufs, buf, sizeof inst->free_bufs);
        inst->n_free_bufs--;
    } else {
        buf = xmalloc(FEC_SMALL_BUF);
    }
    memcpy(buf, p, len);
    return buf;
}

/* Frees 'buf', a copy of 'len' bytes from fec_buf_copy(). */
static void
fec_buf_free(struct fec_inst *inst, uint8_t *buf, size_t len)
    OVS_REQUIRES(inst->mutex)
{
    if (len > FEC_SMALL_BUF || inst->n_free_bufs >= FEC_MAX_FREE_BUFS) {
        free(buf);
        return;
    }
    memcpy(buf, &inst->free_bufs, sizeof inst->free_bufs);
    inst->free_bufs = buf;
    inst->n_free_bufs++;
}

/* Frees what an instance keeps for reuse (for tests: instances live as
 * long as the process). */
static void OVS_UNUSED
fec_inst_free_reusable(struct fec_inst *inst)
    OVS_REQUIRES(inst->mutex)
{
    while (inst->free_bufs) {
        void *buf = inst->free_bufs;

        memcpy(&inst->free_bufs, buf, sizeof inst->free_bufs);
        free(buf);
    }
    inst->n_free_bufs = 0;
    free(inst->stage);
    inst->stage = NULL;
    inst->stage_used = 0;
    fec_calls_free_spares(inst);
}

static void
fec_group_free_bufs(struct fec_inst *inst, struct fec_group *g)
    OVS_REQUIRES(inst->mutex)
{
    if (!g->bufs) {
        return;
    }
    for (unsigned int i = 0; i < g->k + g->m; i++) {
        if (g->bufs[i]) {
            inst->n_buffered--;
            inst->n_buffered_bytes -= g->lens[i];
            fec_buf_free(inst, g->bufs[i], g->lens[i]);
        }
    }
    /* Allocated with the group. */
    g->bufs = NULL;
    g->lens = NULL;
}

/* Data packets of 'g' not received. */
static unsigned int
fec_group_missing(const struct fec_group *g)
{
    unsigned int n = 0;

    for (unsigned int i = 0; i < g->n_data; i++) {
        n += !g->bufs || !g->bufs[i];
    }
    return n;
}

/* Forgets 'g'; if it was not complete, it is lost. */
static void
fec_group_destroy(struct fec_inst *inst, struct fec_group *g)
    OVS_REQUIRES(inst->mutex)
{
    if (g->done) {
        inst->n_done_kept--;
    } else {
        /* Without a parity packet the decoder cannot know a group was
         * short: its missing packets count against k. */
        inst->n_groups_lost++;
        inst->n_lost_parity_only += !g->n_have_data;
        inst->n_losses += fec_group_missing(g);
    }
    fec_group_free_bufs(inst, g);
    if (inst->last_group == g) {
        inst->last_group = NULL;
    }
    hmap_remove(&inst->groups, &g->node);
    ovs_list_remove(&g->lru_node);
    free(g);
}

static void
fec_decode_expire(struct fec_inst *inst, long long int now)
    OVS_REQUIRES(inst->mutex)
{
    struct ovs_list *lists[] = { &inst->lru, &inst->done_lru };

    for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
        struct fec_group *g;

        LIST_FOR_EACH_SAFE (g, lru_node, lists[i]) {
            if (now - g->start_us < inst->timeout_us) {
                break;
            }
            if (!g->done
                && (g->n_have_data + g->n_have_parity
                    < (g->n_data_known ? g->n_data : g->k))) {
                /* Lost to the link, not to the decoder: nothing could
                 * have rebuilt it. */
                inst->n_lost_past_m++;
            }
            fec_group_destroy(inst, g);
        }
    }
}

/* 'g' is done: it holds no buffer from now on, and leaves the groups that
 * fec_decode_make_room() may forget for the done ones, of which the
 * oldest goes beyond max_packets.  (Counted with the others, groups done
 * made room by forgetting those not done yet, which waited for parity:
 * at ~190,000 groups a second, 4,096 groups are ~20 ms.) */
static void
fec_group_set_done(struct fec_inst *inst, struct fec_group *g)
    OVS_REQUIRES(inst->mutex)
{
    g->done = true;
    fec_group_free_bufs(inst, g);
    ovs_list_remove(&g->lru_node);
    ovs_list_push_back(&inst->done_lru, &g->lru_node);
    if (++inst->n_done_kept > inst->max_packets) {
        fec_group_destroy(inst, CONTAINER_OF(ovs_list_front(&inst->done_lru),
                                             struct fec_group, lru_node));
    }
}

static bool
fec_decode_fits(const struct fec_inst *inst, size_t len)
    OVS_REQUIRES(inst->mutex)
{
    return (inst->n_buffered + 1 <= inst->max_packets
            && inst->n_buffered_bytes + len <= inst->max_bytes
            && hmap_count(&inst->groups) - inst->n_done_kept
               <= inst->max_packets);
}

/* Gives up the oldest groups but 'keep' until 'len' more bytes fit. */
static void
fec_decode_make_room(struct fec_inst *inst, struct fec_group *keep,
                     size_t len)
    OVS_REQUIRES(inst->mutex)
{
    struct fec_group *g;

    LIST_FOR_EACH_SAFE (g, lru_node, &inst->lru) {
        if (fec_decode_fits(inst, len)) {
            break;
        }
        /* Only groups not done are here: one done holds no buffer, and
         * forgetting it would make its parity, which may still be on its
         * way, a group of parity only, lost in turn. */
        if (g != keep) {
            inst->n_lost_for_room++;
            fec_group_destroy(inst, g);
        }
    }
}

static struct fec_group *
fec_group_get(struct fec_inst *inst, uint32_t id, unsigned int k,
              unsigned int m, enum gpu_parity_code code, long long int now)
    OVS_REQUIRES(inst->mutex)
{
    struct fec_group *g = inst->last_group;

    /* Thousands of groups (complete ones kept until their timeout) make
     * a lookup a cache miss or two; most packets need none. */
    if (g && g->id == id) {
        return g;
    }
    HMAP_FOR_EACH_WITH_HASH (g, node, hash_int(id, 0), &inst->groups) {
        if (g->id == id) {
            inst->last_group = g;
            return g;
        }
    }
    /* One allocation for the group and its arrays. */
    g = xzalloc(sizeof *g + (k + m) * (sizeof *g->bufs + sizeof *g->lens));
    g->id = id;
    g->k = k;
    g->m = m;
    g->code = code;
    g->n_data = k;
    g->start_us = now;
    g->bufs = (uint8_t **) (g + 1);
    g->lens = (size_t *) (g->bufs + k + m);
    hmap_insert(&inst->groups, &g->node, hash_int(id, 0));
    ovs_list_push_back(&inst->lru, &g->lru_node);
    inst->last_group = g;
    return g;
}

/* Completes 'g' if it can: all its data packets in, or enough packets to
 * rebuild the missing ones, which it then stages for a device call (they
 * are sent once it is done). */
static void
fec_group_try_complete(struct fec_inst *inst, struct fec_group *g,
                       long long int now)
    OVS_REQUIRES(inst->mutex)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    int erasures[GPU_PARITY_MAX_CHUNKS];
    size_t n_erasures = 0, cs = 0;
    struct fec_call_group *cg;
    struct gpu_parity *coder;
    unsigned int n_in = 0, missing;
    char *error = NULL;

    /* Called for every packet: until a parity packet says otherwise a
     * group has k data packets, so with fewer in, some are missing and
     * nothing can be rebuilt yet.  That settles most packets without
     * counting the missing ones. */
    if (!g->n_data_known && g->n_have_data < g->k) {
        return;
    }
    missing = fec_group_missing(g);
    if (!missing) {
        if (g->n_data_known || g->n_have_data == g->k) {
            inst->n_groups++;
            fec_group_set_done(inst, g);
        }
        return;
    }
    if (!g->n_data_known
        || (g->n_data - missing) + (g->k - g->n_data) + g->n_have_parity
           < g->k) {
        return;
    }

    /* The call reads the first k chunks the group has (beyond a short
     * group's data packets, empty ones) and rebuilds the lost data ones;
     * the chunks not read are erasures too, so they need no copy. */
    for (unsigned int i = 0; i < g->k + g->m; i++) {
        bool have = (i >= g->n_data && i < g->k) || g->bufs[i];

        if (have && n_in < g->k) {
            n_in++;
            if (i >= g->k) {
                cs = g->lens[i];
            }
        } else {
            erasures[n_erasures++] = i;
        }
    }
    for (unsigned int i = 0; i < g->k + g->m; i++) {
        if (g->bufs[i] && (i < g->k ? g->lens[i] + 2 > cs
                                    : g->lens[i] != cs)) {
            error = xasprintf("packet %u's length %"PRIuSIZE" does not fit "
                              "chunks of %"PRIuSIZE, i, g->lens[i], cs);
            break;
        }
    }
    coder = (error ? NULL
             : fec_coder_get(g->k, g->m, g->code, false, false, true,
                             &error));
    if (coder && cs % gpu_parity_pkt_chunk_size(coder, 0)) {
        /* Not a chunk size the encoder makes (too short for even a
         * length, or not whole blocks): the call would refuse it, and
         * with it every group gathered beside it. */
        error = xasprintf("parity length %"PRIuSIZE" is no chunk size",
                          cs);
        coder = NULL;
    }
    cg = coder ? fec_call_add(inst, coder, g->k, g->m, cs, now) : NULL;
    if (!cg) {
        VLOG_WARN_RL(&rl, "fec_decode(%s): group %"PRIu32" not rebuilt "
                     "(%s)", inst->args, g->id,
                     error ? error : "no device call");
        free(error);
        inst->n_errors++;
        /* Left to time out, and counted lost then. */
        return;
    }
    cg->id = g->id;
    cg->n_data = g->n_data;
    inst->n_code_groups[g->code]++;
    inst->code_impl[g->code] = gpu_parity_impl(coder);
    memcpy(inst->gather->erasure_ids + cg->erasure_ofs, erasures,
           n_erasures * sizeof *erasures);
    cg->n_erasures = n_erasures;
    inst->gather->n_erasure_ids += n_erasures;
    for (unsigned int i = 0, e = 0; i < g->k + g->m; i++) {
        uint8_t *chunk = inst->gather->chunks[i] + cg->ofs;

        if (e < n_erasures && erasures[e] == (int) i) {
            e++;
        } else if (i >= g->k) {
            memcpy(chunk, g->bufs[i], cs);
        } else {
            gpu_parity_pkt_to_chunk(chunk, cs,
                                    i < g->n_data ? g->bufs[i] : NULL,
                                    i < g->n_data ? g->lens[i] : 0);
        }
    }
    fec_call_added(inst);
    inst->n_losses += missing;
    fec_group_set_done(inst, g);
}

/* Sends (or queues) the packets the done 'call' rebuilt for group 'g'. */
static void
fec_decode_send_rebuilt(struct fec_inst *inst, const struct fec_call *call,
                        const struct fec_call_group *g, struct fec_out *out)
    OVS_REQUIRES(inst->mutex)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    const int *erasures = call->erasure_ids + g->erasure_ofs;
    int status = call->status;

    for (size_t e = 0; !status && e < g->n_erasures; e++) {
        unsigned int i = erasures[e];

        if (i < g->n_data
            && gpu_parity_pkt_from_chunk(call->chunks[i] + g->ofs,
                                         g->cs) < 0) {
            status = GPU_PARITY_ERR_PACKET;
        }
    }
    if (status) {
        VLOG_WARN_RL(&rl, "fec_decode(%s): group %"PRIu32" not rebuilt "
                     "(%s)", inst->args, g->id, gpu_parity_strerror(status));
        inst->n_errors++;
        inst->n_groups_lost++;
        return;
    }
    for (size_t e = 0; e < g->n_erasures; e++) {
        unsigned int i = erasures[e];
        const uint8_t *chunk = call->chunks[i] + g->ofs;
        struct dp_packet *rp;
        int len;

        if (i >= g->n_data) {
            continue;
        }
        len = gpu_parity_pkt_from_chunk(chunk, g->cs);
        rp = gpu_service_packet_new(len, inst->in_port);
        memcpy(dp_packet_data(rp), chunk + 2, len);
        fec_emit(inst, out, rp);
        inst->n_rebuilt++;
    }
    inst->n_groups++;
}

/* "fec-loss": true if the link is to lose the next coded frame, 'ppm' in
 * a million (xorshift32, seeded per decoder). */
static bool
fec_link_loses(struct fec_inst *inst, int ppm)
    OVS_REQUIRES(inst->mutex)
{
    uint32_t x = inst->loss_rng;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    inst->loss_rng = x;
    return x % 1000000 < (uint32_t) ppm;
}

/* Returns the FEC header of 'packet', or NULL if it is not a FEC packet,
 * and in '*hlen' the length of what is in front of the original frame:
 * the link's Ethernet header, with the VLAN tags of a VLAN or QinQ link
 * (an output action after fec_encode pushing one, or a trunk), then the
 * FEC header. */
static const struct fec_hdr *
fec_parse(const struct dp_packet *packet, size_t *hlen)
{
    const uint8_t *d = dp_packet_data(packet);
    size_t size = dp_packet_size(packet);
    const struct fec_hdr *hdr;
    size_t ofs;

    if (packet->packet_type != htonl(PT_ETH)
        || gpu_frame_eth_type(d, size, &ofs) != FEC_ETH_TYPE
        || size - ofs < sizeof *hdr) {
        return NULL;
    }
    hdr = (const struct fec_hdr *) (d + ofs);
    *hlen = ofs + sizeof *hdr;
    return hdr->magic == FEC_MAGIC ? hdr : NULL;
}

static bool
fec_hdr_valid(const struct fec_hdr *hdr, size_t payload_len)
{
    bool parity = hdr->flags & FEC_F_PARITY;

    return (!(hdr->flags & ~FEC_F_KNOWN)
            && hdr->k && hdr->m && hdr->k + hdr->m <= GPU_PARITY_MAX_CHUNKS
            && hdr->index < hdr->k + hdr->m
            && parity == (hdr->index >= hdr->k)
            && (!parity || (hdr->n_data >= 1 && hdr->n_data <= hdr->k))
            && payload_len);
}

static void
fec_drop(struct dp_packet *packet, bool may_steal)
{
    if (may_steal) {
        dp_packet_delete(packet);
    }
}

static void
fec_decode_batch(struct fec_inst *inst, struct dp_packet_batch *batch,
                 struct fec_out *out, long long int now)
    OVS_REQUIRES(inst->mutex)
{
    int loss_ppm = gpu_service_test_knob(GPU_KNOB_FEC_LOSS);
    size_t n_in = dp_packet_batch_size(batch);
    struct dp_packet *packet;

    fec_decode_expire(inst, now);
    fec_pending_flush(inst, out);
    DP_PACKET_BATCH_FOR_EACH (i, packet, batch) {
        size_t hlen;
        const struct fec_hdr *hdr = fec_parse(packet, &hlen);
        size_t len = hdr ? dp_packet_size(packet) - hlen : 0;
        struct fec_group *g;

        out->n_reserved = n_in - i - 1;
        if (!hdr) {
            inst->n_unchanged++;
            out->pkts[out->n++] = packet;
            continue;
        }
        if (OVS_UNLIKELY(loss_ppm) && fec_link_loses(inst, loss_ppm)) {
            inst->n_link_losses++;
            fec_drop(packet, out->may_steal);
            continue;
        }
        if (!fec_hdr_valid(hdr, len)) {
            inst->n_malformed++;
            fec_drop(packet, out->may_steal);
            continue;
        }

        bool parity = hdr->flags & FEC_F_PARITY;
        enum gpu_parity_code code = (hdr->flags & FEC_F_GF8
                                     ? GPU_PARITY_CODE_GF8
                                     : GPU_PARITY_CODE_BITMATRIX);
        unsigned int idx = hdr->index;

        if (parity) {
            inst->n_parity++;
        }
        g = fec_group_get(inst, ntohl(get_16aligned_be32(&hdr->group)),
                          hdr->k, hdr->m, code, now);
        if (g->k != hdr->k || g->m != hdr->m || g->code != code
            || (parity && g->n_data_known && g->n_data != hdr->n_data)) {
            inst->n_malformed++;
            fec_drop(packet, out->may_steal);
            continue;
        }
        if (g->done || g->bufs[idx]) {
            /* Parity for a group already complete is no news. */
            if (!parity || !g->done) {
                inst->n_late++;
            }
            fec_drop(packet, out->may_steal);
            continue;
        }
        if (!fec_decode_fits(inst, len)) {
            /* Apart, so that a copy that fits (most) does not touch the
             * oldest group, a cache miss. */
            fec_decode_make_room(inst, g, len);
        }
        g->bufs[idx] = fec_buf_copy(inst, (const uint8_t *)
                                    dp_packet_data(packet) + hlen, len);
        g->lens[idx] = len;
        inst->n_buffered++;
        inst->max_buffered = MAX(inst->max_buffered, inst->n_buffered);
        inst->n_buffered_bytes += len;
        inst->in_port = packet->md.in_port.odp_port;
        if (parity) {
            g->n_have_parity++;
            g->n_data = hdr->n_data;
            g->n_data_known = true;
            fec_drop(packet, out->may_steal);
        } else {
            g->n_have_data++;
            dp_packet_resize_l2(packet, -(int) hlen);
            out->pkts[out->n++] = packet;
            inst->n_packets++;
        }
        fec_group_try_complete(inst, g, now);
    }
    fec_decode_expire(inst, now);
}

/* ------------------------------------------------------------ Executor. */

/* Under load every batch is full, so what the services make (parity,
 * rebuilt packets) waits in the instance, and the timer (every ~1024 PMD
 * iterations) comes too late: beyond FEC_MAX_PENDING waiting packets the
 * oldest are dropped.  Groups gathered for a device call or in flight
 * must also be seen to within microseconds.  So a thread that leaves such
 * work adds one to its gpu_service_n_held, which gpu_ids shares (each adds
 * and takes back its own), and the PMD loop calls fec_poll() on its next
 * iterations until none is left.  'fec_poll_armed' says whether the
 * thread added its one, however many instances have work. */
DEFINE_STATIC_PER_THREAD_DATA(bool, fec_poll_armed, false);

static void
fec_poll_arm(void)
{
    bool *armed = fec_poll_armed_get();

    if (!*armed) {
        *armed = true;
        (*gpu_service_n_held_get())++;
    }
}

/* Whether 'inst' has work for the poll (fec_set_deadline() says). */
static bool
fec_poll_work(struct fec_inst *inst)
{
    bool work;

    atomic_read_relaxed(&inst->poll_work, &work);
    return work;
}

static void
fec_execute(const char *args, struct dp_packet_batch *batch,
            bool may_steal, const struct gpu_service_next *next,
            bool encoder)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    struct fec_inst *inst = fec_inst_find(args, encoder);
    long long int now = gpu_service_now_us();
    uint64_t n_gathered;
    struct fec_out out;
    bool gathered;

    if (!inst) {
        VLOG_WARN_RL(&rl, "%s(%s): no such instance; packets pass "
                     "unchanged", encoder ? "fec_encode" : "fec_decode",
                     args);
        return;
    }
    out.n = 0;
    out.n_reserved = dp_packet_batch_size(batch);
    out.may_steal = may_steal;

    ovs_mutex_lock(&inst->mutex);
    fec_save_next(inst, next);
    n_gathered = inst->n_gathered;
    if (encoder) {
        fec_encode_batch(inst, batch, &out, now);
    } else {
        fec_decode_batch(inst, batch, &out, now);
    }
    gathered = inst->n_gathered != n_gathered;
    if (gathered) {
        /* The groups' packets are in this batch, yet to go on: what
         * their calls make is this thread's to send, until its poll. */
        inst->batch_thread = ovsthread_id_self();
        inst->batch_thread_us = now;
        inst->batch_thread_counted = false;
    }
    /* What is done goes with this batch if there is room. */
    fec_calls_run(inst, &out, GPU_SERVICE_POLL_BUSY, now);
    fec_set_deadline(inst);
    ovs_mutex_unlock(&inst->mutex);
    if (fec_poll_work(inst)) {
        fec_poll_arm();
    }
    if (gathered) {
        int stall_us = gpu_service_test_knob(GPU_KNOB_FEC_STALL);

        if (OVS_UNLIKELY(stall_us)) {
            xnanosleep(stall_us * 1000LL);
        }
    }

    /* 'out' holds what passes, in order, within the batch's capacity. */
    batch->count = 0;
    for (size_t i = 0; i < out.n; i++) {
        batch->packets[batch->count++] = out.pkts[i];
    }
}

static void
fec_encode_execute(const char *args, struct dp_packet_batch *batch,
                   bool may_steal, const struct gpu_service_next *next)
{
    fec_execute(args, batch, may_steal, next, true);
}

static void
fec_decode_execute(const char *args, struct dp_packet_batch *batch,
                   bool may_steal, const struct gpu_service_next *next)
{
    fec_execute(args, batch, may_steal, next, false);
}

/* With 'inst''s mutex held, which it releases: sends what waits along the
 * saved next actions, if 'emitter' can execute them (they belong to its
 * datapath), else leaves it waiting.  The mutex is released first, since
 * those actions may lead to this or another service instance.  Returns
 * true if work for the poll is left. */
static bool
fec_send_pending(struct fec_inst *inst,
                 const struct gpu_service_emitter *emitter)
    OVS_RELEASES(inst->mutex)
{
    bool can_send = (inst->has_next && inst->next_dp == emitter->dp
                     && fec_may_send(inst));
    struct gpu_service_next next = { .actions = NULL };
    struct dp_packet **pkts = NULL;
    struct flow *flow = NULL;
    size_t n = 0;
    bool work;

    if (can_send && inst->n_pending) {
        n = inst->n_pending;
        pkts = xmemdup(inst->pending, n * sizeof *pkts);
        inst->n_pending = 0;
        if (inst->encoder) {
            inst->n_parity += n;
        }
        next.dp = inst->next_dp;
        next.actions = (const struct nlattr *)
                       xmemdup(inst->next_actions, inst->next_actions_len);
        next.actions_len = inst->next_actions_len;
        if (inst->next_has_flow) {
            flow = xmemdup(&inst->next_flow, sizeof *flow);
        }
        next.flow = flow;
    }
    fec_set_deadline(inst);
    work = fec_poll_work(inst);
    ovs_mutex_unlock(&inst->mutex);

    for (size_t i = 0; i < n; i += NETDEV_MAX_BURST) {
        struct dp_packet_batch batch;

        dp_packet_batch_init(&batch);
        for (size_t j = i; j < n && j < i + NETDEV_MAX_BURST; j++) {
            dp_packet_batch_add(&batch, pkts[j]);
        }
        emitter->execute(emitter, &batch, &next);
    }
    if (pkts) {
        free(pkts);
        free(CONST_CAST(struct nlattr *, next.actions));
        free(flow);
    }
    return work;
}

/* The timer, with 'inst''s mutex held, which it releases: closes a
 * timed-out encoder group or gives up timed-out decoder groups, submits
 * gathered groups that waited long enough, and sends what waits (done
 * calls' packets first) along the saved next actions, if 'emitter' can
 * execute them. */
static void
fec_timer(struct fec_inst *inst, const struct gpu_service_emitter *emitter,
          long long int now)
    OVS_RELEASES(inst->mutex)
{
    if (!inst->has_next || inst->next_dp != emitter->dp) {
        /* Another datapath's actions (this thread cannot run them) are
         * forgotten, so that packets do not keep the timer due. */
        inst->has_next = false;
        if (inst->encoder && inst->n
            && now - inst->start_us >= inst->timeout_us) {
            inst->n_timeouts_held++;
        }
    }
    fec_batch_through(inst);
    if (inst->encoder) {
        fec_encode_expire(inst, now);
    } else {
        fec_decode_expire(inst, now);
    }
    fec_calls_run(inst, NULL, GPU_SERVICE_POLL_BUSY, now);
    if (fec_send_pending(inst, emitter)) {
        /* A group the timer closed: the poll of this thread submits it
         * (the main thread's at once, before it sleeps). */
        fec_poll_arm();
    }
}

/* The PMD loop's per-iteration hook (the main thread's too, at the end of
 * dpif_netdev_run()), while the thread's gpu_service_n_held is nonzero:
 * submits gathered groups that may wait no longer (at once if 'mode' says
 * the thread is idle), sends what done calls made and what waits along
 * the saved next actions, where they belong to the emitter's datapath,
 * behind the data of its group, which left with its batch.  With
 * GPU_SERVICE_POLL_FINISH, waits for every call. */
static void
fec_poll(const struct gpu_service_emitter *emitter,
         enum gpu_service_poll_mode mode)
{
    bool *armed = fec_poll_armed_get();
    bool retry = false;
    struct fec_inst *inst;

    if (!*armed) {
        /* Called for gpu_ids's held batches: nothing of ours waits. */
        return;
    }
    /* Given back first: the actions run below may leave work again (a
     * later fec_encode or fec_decode) and count this thread in anew. */
    *armed = false;
    (*gpu_service_n_held_get())--;

    CMAP_FOR_EACH (inst, node, &instances) {
        /* Instances without work cost no lock. */
        if (!fec_poll_work(inst)) {
            continue;
        }
        if (mode == GPU_SERVICE_POLL_FINISH) {
            ovs_mutex_lock(&inst->mutex);
        } else if (ovs_mutex_trylock(&inst->mutex)) {
            /* Another thread codes a batch (and will flush what waits
             * into it, or count itself in) or sends: look again on the
             * next iteration rather than wait for it. */
            retry = true;
            continue;
        }
        fec_batch_through(inst);
        fec_calls_run(inst, NULL, mode, gpu_service_now_us());
        retry |= fec_send_pending(inst, emitter);
    }
    if (retry) {
        fec_poll_arm();
    }
}

/* The periodic hook: timeouts, even without traffic, and the fallback for
 * what the poll does.  Runs in every PMD thread and the main thread, so
 * it does nothing until the earliest deadline and never waits for an
 * instance a PMD thread holds. */
static void
fec_timers_run(const struct gpu_service_emitter *emitter)
{
    long long int now = time_usec();
    struct fec_inst *inst;

    CMAP_FOR_EACH (inst, node, &instances) {
        long long int deadline;

        atomic_read_relaxed(&inst->deadline_us, &deadline);
        if (now < deadline || ovs_mutex_trylock(&inst->mutex)) {
            continue;
        }
        fec_timer(inst, emitter, now);
    }
}

static void
fec_timers_wait(void)
{
    long long int next = LLONG_MAX;
    struct fec_inst *inst;

    CMAP_FOR_EACH (inst, node, &instances) {
        long long int deadline;

        atomic_read_relaxed(&inst->deadline_us, &deadline);
        next = MIN(next, deadline);
    }
    if (next != LLONG_MAX) {
        long long int now = time_usec();

        poll_timer_wait(next > now ? (next - now + 999) / 1000 : 0);
    }
}

const struct gpu_service_impl gpu_fec_encode_service_impl = {
    .type = GPU_SERVICE_FEC_ENCODE,
    .check = fec_encode_check,
    .execute = fec_encode_execute,
    .timers_run = fec_timers_run,
    .timers_wait = fec_timers_wait,
    .poll = fec_poll,
};

/* One instance table for both: the encoder's entry runs the timers. */
const struct gpu_service_impl gpu_fec_decode_service_impl = {
    .type = GPU_SERVICE_FEC_DECODE,
    .check = fec_decode_check,
    .execute = fec_decode_execute,
};

/* -------------------------------------------------------------- appctl. */

static int
compare_insts(const void *a_, const void *b_)
{
    const struct fec_inst *const *a = a_;
    const struct fec_inst *const *b = b_;

    if ((*a)->encoder != (*b)->encoder) {
        return (*b)->encoder - (*a)->encoder;
    }
    return strcmp((*a)->args, (*b)->args);
}

static void
fec_format_inst(struct ds *s, struct fec_inst *inst)
{
    ovs_mutex_lock(&inst->mutex);
    ds_put_format(s, "%s(%s):\n", inst->encoder ? "fec_encode" : "fec_decode",
                  inst->args);
    ds_put_format(s, "  groups: %"PRIu64"\n", inst->n_groups);
    if (inst->encoder) {
        ds_put_format(s, "  packets sent: %"PRIu64"\n", inst->n_packets);
        ds_put_format(s, "  parity sent: %"PRIu64"\n", inst->n_parity);
        ds_put_format(s, "  parity waiting: %"PRIuSIZE"\n",
                      inst->n_pending);
        ds_put_format(s, "  open group: %u of %u packets\n", inst->n,
                      inst->k);
        ds_put_format(s, "  code: %s%s, coded by %s on the %s\n",
                      gpu_parity_code_name(inst->code),
                      inst->code_auto ? " (auto)" : "",
                      gpu_parity_impl(inst->coder),
                      gpu_parity_backend_name(
                          gpu_parity_backend(inst->coder)));
        ds_put_format(s, "  parity written by the device: %"PRIu64
                      " groups\n", inst->n_parity_in_place);
        ds_put_format(s, "  groups timed out: %"PRIu64"\n",
                      inst->n_timeouts);
        ds_put_format(s, "  timed out without next actions: %"PRIu64"\n",
                      inst->n_timeouts_held);
    } else {
        ds_put_format(s, "  packets passed: %"PRIu64"\n", inst->n_packets);
        ds_put_format(s, "  parity received: %"PRIu64"\n", inst->n_parity);
        ds_put_format(s, "  losses seen: %"PRIu64"\n", inst->n_losses);
        ds_put_format(s, "  packets rebuilt: %"PRIu64"\n", inst->n_rebuilt);
        ds_put_format(s, "  groups lost: %"PRIu64"\n", inst->n_groups_lost);
        ds_put_format(s, "    of them forgotten for room: %"PRIu64", "
                      "of parity only: %"PRIu64"\n", inst->n_lost_for_room,
                      inst->n_lost_parity_only);
        ds_put_format(s, "    of them timed out past m losses: %"PRIu64"\n",
                      inst->n_lost_past_m);
        ds_put_format(s, "  rebuilt waiting: %"PRIuSIZE"\n",
                      inst->n_pending);
        ds_put_format(s, "  buffered: %"PRIuSIZE" packets, %"PRIuSIZE
                      " bytes, %"PRIuSIZE" groups\n", inst->n_buffered,
                      inst->n_buffered_bytes, hmap_count(&inst->groups));
        ds_put_format(s, "  most buffered: %"PRIuSIZE" packets (max_packets="
                      "%"PRIuSIZE")\n", inst->max_buffered, inst->max_packets);
        ds_put_format(s, "  late or duplicate (dropped): %"PRIu64"\n",
                      inst->n_late);
        ds_put_format(s, "  malformed (dropped): %"PRIu64"\n",
                      inst->n_malformed);
        ds_put_format(s, "  link losses emulated: %"PRIu64"\n",
                      inst->n_link_losses);
        for (int c = 0; c < 2; c++) {
            if (inst->n_code_groups[c]) {
                ds_put_format(s, "  rebuilt with %s: %"PRIu64" groups, "
                              "last coded by %s\n",
                              gpu_parity_code_name(c), inst->n_code_groups[c],
                              inst->code_impl[c]);
            }
        }
    }
    ds_put_format(s, "  passed unchanged: %"PRIu64"\n", inst->n_unchanged);
    ds_put_format(s, "  waiting dropped: %"PRIu64"\n",
                  inst->n_pending_dropped);
    ds_put_format(s, "  device calls: %"PRIu64", groups per call: %.1f "
                  "(most %"PRIuSIZE")\n", inst->n_calls_done,
                  inst->n_calls_done
                  ? (double) inst->n_call_groups / inst->n_calls_done : 0.0,
                  inst->max_call_groups);
    if (inst->n_runtime_calls) {
        ds_put_format(s, "  device runtime calls: %.1f per call\n",
                      (double) inst->n_runtime_calls / inst->n_calls_done);
    }
    if (inst->encoder && inst->coder
        && gpu_parity_backend(inst->coder) == GPU_PARITY_BACKEND_CUDA) {
        struct gpu_parity_stats ps;

        /* The coder's: shared by the encoders of the same k, m, code
         * and launch=. */
        gpu_parity_get_stats(inst->coder, &ps);
        ds_put_format(s, "  calls launched by the device: %"PRIu64
                      " (launch=%s)\n", ps.n_device_launches,
                      inst->device_launch ? "device" : "host");
    }
    if (inst->n_cpu_calls) {
        ds_put_format(s, "  rebuilt at once on the CPU: %"PRIu64" calls, "
                      "%"PRIu64" groups (cpu_max_groups=%"PRIuSIZE")\n",
                      inst->n_cpu_calls, inst->n_cpu_call_groups,
                      inst->cpu_max_groups);
    }
    ds_put_format(s, "  calls in flight: %"PRIuSIZE" (most %"PRIuSIZE"), "
                  "groups gathering: %"PRIuSIZE"\n", inst->n_calls,
                  inst->max_calls, inst->gather ? inst->gather->n_groups : 0);
    ds_put_format(s, "  longest call: %lld us\n", inst->max_call_us);
    ds_put_format(s, "  waits for the device: %"PRIu64" (calls in flight "
                  "at their bound, %d)\n", inst->n_call_waits,
                  FEC_MAX_CALLS);
    ds_put_format(s, "  left to a batch's own thread: %"PRIu64" times\n",
                  inst->n_batch_waits);
    ds_put_format(s, "  device faults: %"PRIu64" groups coded on the CPU "
                  "(%"PRIu64" calls)\n", inst->n_faults,
                  inst->n_fault_calls);
    ds_put_format(s, "  errors: %"PRIu64"\n", inst->n_errors);
    ovs_mutex_unlock(&inst->mutex);
}

static void
gpu_fec_show_cmd(struct unixctl_conn *conn, int argc OVS_UNUSED,
                 const char *argv[] OVS_UNUSED, void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    struct fec_inst **list;
    struct fec_inst *inst;
    size_t n = 0;

    ovs_mutex_lock(&instances_mutex);
    list = xmalloc((cmap_count(&instances) + 1) * sizeof *list);
    CMAP_FOR_EACH (inst, node, &instances) {
        list[n++] = inst;
    }
    ovs_mutex_unlock(&instances_mutex);
    qsort(list, n, sizeof *list, compare_insts);
    for (size_t i = 0; i < n; i++) {
        fec_format_inst(&s, list[i]);
    }
    free(list);

    /* Which code each coder codes, and with what. */
    struct fec_coder *c;
    ovs_mutex_lock(&coders_mutex);
    if (hmap_count(&coders)) {
        ds_put_cstr(&s, "coders:\n");
    }
    HMAP_FOR_EACH (c, node, &coders) {
        ds_put_format(&s, "  k=%u m=%u %s%s%s: %s on the %s\n", c->k,
                      c->m, gpu_parity_code_name(c->code),
                      c->cpu ? " (for CPU rebuilds)" : "",
                      c->device_launch ? " (launch=device)" : "",
                      gpu_parity_impl(c->coder),
                      gpu_parity_backend_name(gpu_parity_backend(c->coder)));
    }
    ovs_mutex_unlock(&coders_mutex);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

void
gpu_fec_service_init(void)
{
    unixctl_command_register("gpu-fec/show", "", 0, 0, gpu_fec_show_cmd,
                             NULL);
}
