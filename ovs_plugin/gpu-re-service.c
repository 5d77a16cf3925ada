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

/* The redundancy elimination services: re_encode(peer=NAME[,OPTIONS]) and
 * re_decode(peer=NAME[,OPTIONS]), the two ends of a WAN link.
 *
 * A peer is one ordered stream of packets with its chunk cache: the
 * encoder at one end, the decoder at the other, each created the first
 * time a flow names it, with the options of that flow (cache=SIZE,
 * window, bits, min_chunk, max_chunk, min_ref, resync; see gpu-re.h).
 * Later flows must name the same options, since one cache cannot have two
 * sizes.  Peers live as long as ovs-vswitchd: their caches are what the
 * two ends share.
 *
 * An encoder or decoder is used by one thread at a time: each peer has a
 * mutex, taken by the PMD thread for one batch (re_decode, and the
 * batches re_encode does not hold) or for one gather (below). */

#include <config.h>

#include "ovs_plugin/gpu-re-service.h"

#include <inttypes.h>
#include <string.h>

#include "cmap.h"
#include "dp-packet.h"
#include "hash.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/list.h"
#include "openvswitch/vlog.h"
#include "ovs-atomic.h"
#include "ovs-thread.h"
#include "timeval.h"
#include "unixctl.h"
#include "util.h"

#include "gpu_services/re/gpu-re.h"
#include "ovs_plugin/gpu-actions.h"

VLOG_DEFINE_THIS_MODULE(gpu_re_service);

/* The largest Ethernet frame (with two VLAN tags) an encoded packet may
 * grow to: an epoch's first shim is a little longer than its payload. */
#define RE_MAX_FRAME 1522

/* re_encode's gathers by default: two chunking calls out and 50 us
 * gathers (one and 100 us until the thirty-first session).  On one PMD
 * of the H200 machine, with the device's launch, they cost 98-131 ns a
 * packet against 133-209 for one call and 100 us gathers in four pairs
 * of runs (docs/PERFORMANCE.md); on four PMDs the same (35-56 ns against
 * 48-49): each thread has its call anyway. */
#define RE_IN_FLIGHT_DEFAULT 2
#define RE_HOLD_US_DEFAULT 50

struct re_peer {
    struct cmap_node node;      /* In 'peers', by hash of name and side. */
    char *name;
    bool encoder;               /* re_encode, else re_decode. */
    char *options;              /* The action's arguments but "peer". */
    unsigned int in_flight;     /* re_encode's "in-flight=N" and
                                 * "hold-us=N" (gpu-actions.h): chunking */
    unsigned int hold_us;       /* calls out, the threads together, and
                                 * how long a gather waits for more. */
    struct gpu_service_calls_out calls_out;     /* All threads'. */
    bool device_launch;         /* re_encode's "launch=device". */

    struct ovs_mutex mutex;     /* One batch at a time, in order. */
    struct gpu_re_chunker *chunker;         /* Encoder only. */
    struct gpu_re_encoder *enc;
    struct gpu_re_decoder *dec;

    atomic_uint64_t n_errors;   /* Batches the library refused. */
    atomic_uint64_t n_faults;   /* Device calls failed: chunked on CPU. */

    /* Encoder only: datapath batches held while their payloads were
     * chunked with others', the gathers they were chunked in, and the
     * batches that could not be held and were encoded at once. */
    atomic_uint64_t n_held;
    atomic_uint64_t n_gathers;
    atomic_uint64_t n_not_held;
    /* Of the gathered payloads, those the chunker read where they are
     * (in the held packets) rather than copied. */
    atomic_uint64_t n_gathered;
    atomic_uint64_t n_in_place;
};

static struct cmap peers = CMAP_INITIALIZER;
static struct ovs_mutex peers_mutex = OVS_MUTEX_INITIALIZER;

static uint32_t
re_peer_hash(const char *name, bool encoder)
{
    return hash_string(name, encoder);
}

static struct re_peer *
re_peer_find(const char *name, bool encoder)
{
    struct re_peer *p;

    CMAP_FOR_EACH_WITH_HASH (p, node, re_peer_hash(name, encoder), &peers) {
        if (p->encoder == encoder && !strcmp(p->name, name)) {
            return p;
        }
    }
    return NULL;
}

/* Splits 'args' into the peer's name (in '*name', malloc()'d) and its
 * options, which are applied to 'cfg' and returned, canonical, in
 * '*options' (malloc()'d).  Returns NULL or a malloc()'d error. */
static char *
re_parse_args(const char *args, bool encoder, struct gpu_re_config *cfg,
              char **name, char **options, unsigned int *in_flight,
              unsigned int *hold_us)
{
    struct ds opts = DS_EMPTY_INITIALIZER;
    char *copy = xstrdup(args);
    char *save_ptr = NULL;
    char *item, *error = NULL;
    char err[256];

    *name = NULL;
    *options = NULL;
    *in_flight = RE_IN_FLIGHT_DEFAULT;
    *hold_us = RE_HOLD_US_DEFAULT;
    gpu_re_config_init(cfg);
    /* The encoder's table probes and match extension on the device where
     * the chunking is (docs/RE-NOTES.md): half the PMD's time a packet
     * on the H100 machine; "encoder=host" keeps them on the PMD. */
    cfg->device_encode = true;
    /* Its batches launched by the device, by one scheduler for the
     * encoder: a submission is a store to the doorbell, where a launch
     * cost the PMD microseconds a gather; "launch=host" launches them
     * from the PMD. */
    cfg->device_launch = true;
    for (item = strtok_r(copy, ",", &save_ptr); item;
         item = strtok_r(NULL, ",", &save_ptr)) {
        char *eq = strchr(item, '=');

        if (!eq) {
            error = xasprintf("\"%s\" needs a value", item);
            break;
        }
        *eq = '\0';
        if (!strcmp(item, "peer")) {
            if (*name) {
                error = xstrdup("\"peer\" given twice");
                break;
            }
            *name = xstrdup(eq + 1);
        } else if (gpu_service_parse_hold_option(item, eq + 1, in_flight,
                                                 hold_us, &error)) {
            if (error) {
                break;
            }
            if (!encoder) {
                error = xasprintf("\"%s\" is re_encode's (re_decode holds "
                                  "nothing)", item);
                break;
            }
            ds_put_format(&opts, "%s%s=%s", opts.length ? "," : "", item,
                          eq + 1);
        } else if (gpu_re_config_set(cfg, item, eq + 1, err, sizeof err)) {
            error = xstrdup(err);
            break;
        } else {
            ds_put_format(&opts, "%s%s=%s", opts.length ? "," : "", item,
                          eq + 1);
        }
    }
    if (!error && !*name) {
        error = xstrdup("needs peer=NAME");
    }
    if (!error && gpu_re_config_check(cfg, err, sizeof err)) {
        error = xstrdup(err);
    }
    free(copy);
    if (error) {
        free(*name);
        *name = NULL;
        ds_destroy(&opts);
        return error;
    }
    *options = ds_steal_cstr(&opts);
    return NULL;
}

static void
re_peer_destroy(struct re_peer *p)
{
    gpu_re_encoder_destroy(p->enc);
    gpu_re_decoder_destroy(p->dec);
    gpu_re_chunker_destroy(p->chunker);
    ovs_mutex_destroy(&p->mutex);
    free(p->name);
    free(p->options);
    free(p);
}

/* Creates the peer a flow names, or checks that the flow agrees with the
 * one that exists. */
static char *
re_check(const char *args, bool encoder)
{
    struct gpu_re_config cfg;
    struct re_peer *p;
    char *name, *options;
    unsigned int in_flight, hold_us;
    char *error = re_parse_args(args, encoder, &cfg, &name, &options,
                                &in_flight, &hold_us);
    int status;

    if (error) {
        return error;
    }
    ovs_mutex_lock(&peers_mutex);
    p = re_peer_find(name, encoder);
    if (p) {
        if (strcmp(p->options, options)) {
            error = xasprintf("peer %s already has options \"%s\"; one "
                              "cache cannot have two settings", name,
                              p->options);
        }
        goto out;
    }

    p = xzalloc(sizeof *p);
    p->name = name;
    p->encoder = encoder;
    p->options = options;
    p->in_flight = in_flight;
    p->hold_us = hold_us;
    p->device_launch = cfg.device_launch;
    name = options = NULL;
    ovs_mutex_init(&p->mutex);
    if (encoder) {
        struct gpu_re_chunker_config ccfg;
        int device;

        gpu_re_chunker_config_init(&ccfg);
        ccfg.params = cfg.params;
        /* Segment mode, 64 bytes a thread: a gather is a few hundred
         * payloads, too few threads for a thread a packet to hide its
         * loads; a call of 600 payloads with the device's encoding took
         * 106 us against 178 us (re-bench --latency, H200). */
        ccfg.remap = true;
        ccfg.segment = 64;
        ccfg.device_launch = cfg.device_launch;
        ccfg.backend = gpu_services_get_backend(&device)
                       ? GPU_RE_BACKEND_CUDA : GPU_RE_BACKEND_CPU;
        ccfg.device = device;
        status = gpu_re_chunker_create(&ccfg, &p->chunker);
        if (!status && ccfg.backend == GPU_RE_BACKEND_CUDA) {
            /* So that held packets' payloads go to the device in place. */
            gpu_service_register_packet_memory(device);
        }
        if (status && ccfg.backend == GPU_RE_BACKEND_CUDA) {
            VLOG_WARN("re_encode peer %s: CUDA chunker failed (%s); using "
                      "the CPU", p->name, gpu_status_string(status));
            ccfg.backend = GPU_RE_BACKEND_CPU;
            status = gpu_re_chunker_create(&ccfg, &p->chunker);
        }
        if (!status) {
            status = gpu_re_encoder_create(&cfg, p->chunker, &p->enc);
        }
        if (gpu_service_is_device_error(status) && cfg.device_encode) {
            /* No room for the cache on the device, say: the PMD encodes,
             * as with encoder=host. */
            VLOG_WARN("re_encode peer %s: encoder on the device failed "
                      "(%s); encoding on the host", p->name,
                      gpu_status_string(status));
            cfg.device_encode = false;
            status = gpu_re_encoder_create(&cfg, p->chunker, &p->enc);
        }
    } else {
        status = gpu_re_decoder_create(&cfg, &p->dec);
    }
    if (status) {
        error = xasprintf("peer %s: %s", p->name, gpu_status_string(status));
        re_peer_destroy(p);
        goto out;
    }
    VLOG_INFO("%s peer %s created (%s)%s%s",
              encoder ? "re_encode" : "re_decode", p->name,
              p->options[0] ? p->options : "default options",
              encoder ? ", chunking on " : "",
              encoder ? gpu_re_chunker_why(p->chunker) : "");
    cmap_insert(&peers, &p->node, re_peer_hash(p->name, encoder));
out:
    ovs_mutex_unlock(&peers_mutex);
    free(name);
    free(options);
    return error;
}

static char *
re_encode_check(const char *args)
{
    return re_check(args, true);
}

static char *
re_decode_check(const char *args)
{
    return re_check(args, false);
}

/* Finds the peer named in 'args' (already checked when the flow was
 * added). */
static struct re_peer *
re_peer_from_args(const char *args, bool encoder)
{
    const char *name = strstr(args, "peer=");
    char buf[GPU_SERVICE_ARGS_MAX + 1];

    if (!name || (name != args && name[-1] != ',')) {
        return NULL;
    }
    name += 5;
    ovs_strlcpy(buf, name, MIN(sizeof buf, strcspn(name, ",") + 1));
    return re_peer_find(buf, encoder);
}

/* Points 'frames' at the data of the 'n' 'packets', with their lengths
 * and the room each may use ('caps'). */
static void
re_frames_prepare(struct dp_packet *const *packets, size_t n, bool encoder,
                  uint8_t **frames, size_t *lens, size_t *caps)
{
    for (size_t i = 0; i < n; i++) {
        struct dp_packet *packet = packets[i];
        size_t size = dp_packet_size(packet);

        if (size < RE_MAX_FRAME
            && (packet->source == DPBUF_MALLOC
                || packet->source == DPBUF_STUB)) {
            /* A decoded frame is longer than its shim, and an epoch's
             * first shim longer than its payload: make room where the
             * buffer can grow (a DPDK mbuf cannot, but has ~2 kB). */
            dp_packet_prealloc_tailroom(packet, RE_MAX_FRAME - size);
        }
        frames[i] = dp_packet_data(packet);
        lens[i] = size;
        caps[i] = size + dp_packet_tailroom(packet);
        if (encoder) {
            caps[i] = MIN(caps[i], MAX(size, RE_MAX_FRAME));
        }
    }
}

/* What becomes of the packets of a failed device call to 'p''s encoder,
 * for the log and gpu-re/show. */
static const char *
re_fault_outcome(const struct re_peer *p)
{
    return (gpu_re_encoder_on_device(p->enc)
            ? "sent raw (a new epoch)" : "chunked on the CPU");
}

/* Encodes or decodes 'b' at once (re_decode, and the batches re_encode
 * does not hold). */
static void
re_run(const char *args, struct gpu_service_batch *b, bool encoder)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    struct re_peer *p = re_peer_from_args(args, encoder);
    struct dp_packet *packets[NETDEV_MAX_BURST];
    uint8_t *frames[NETDEV_MAX_BURST];
    size_t lens[NETDEV_MAX_BURST], caps[NETDEV_MAX_BURST];
    int results[NETDEV_MAX_BURST];
    int status;

    if (!p) {
        VLOG_WARN_RL(&rl, "%s(%s): no such peer; packets pass unchanged",
                     encoder ? "re_encode" : "re_decode", args);
        return;
    }
    for (size_t i = 0; i < b->n; i++) {
        packets[i] = b->pkts[i].packet;
    }
    re_frames_prepare(packets, b->n, encoder, frames, lens, caps);

    ovs_mutex_lock(&p->mutex);
    if (encoder) {
        status = gpu_service_fault_take(GPU_FAULT_RE);
        if (!status) {
            status = gpu_re_encode_packets(p->enc, frames, lens, caps, b->n,
                                           results);
        }
        if (gpu_service_is_device_error(status)) {
            /* The encoder is unchanged by a failed call: chunk and encode
             * on the CPU, with the same cuts the device would make (an
             * encoder on the device sends them raw, in a new epoch). */
            gpu_counter_add(&p->n_faults, 1);
            VLOG_WARN_RL(&rl, "re_encode peer %s: device chunking failed "
                         "(%s); %"PRIuSIZE" packets %s", p->name,
                         gpu_status_string(status), b->n,
                         re_fault_outcome(p));
            status = gpu_re_encode_packets_cpu(p->enc, frames, lens, caps,
                                               b->n, results);
        }
    } else {
        status = gpu_re_decode_packets(p->dec, frames, lens, caps, b->n,
                                       results);
    }
    ovs_mutex_unlock(&p->mutex);
    if (status) {
        gpu_counter_add(&p->n_errors, 1);
        VLOG_WARN_RL(&rl, "%s peer %s: %s; %"PRIuSIZE" packets pass "
                     "unchanged", encoder ? "re_encode" : "re_decode",
                     p->name, gpu_status_string(status), b->n);
        return;
    }
    for (size_t i = 0; i < b->n; i++) {
        if (results[i] == GPU_RE_UNDECODABLE) {
            b->verdicts[i] = GPU_SERVICE_DROP;
        } else {
            dp_packet_set_size(b->pkts[i].packet, lens[i]);
        }
    }
}

/* ------------------------------------------------- re_encode's held batches.
 *
 * Chunking a 32-packet datapath batch on the GPU is a device round trip
 * (about 100 us on the H100) for little work, so re_encode holds each
 * batch (patch 0010) while its payloads gather with those of the batches
 * after it, and chunks them all in one call.  Once a gather is chunked,
 * its batches are encoded on the CPU, oldest first, and the PMD loop's
 * per-iteration 'poll' hook sends them on along copies of the actions
 * that followed re_encode, oldest first.
 *
 * The gathers are the thread's, one pair per peer (one filling while the
 * other is chunked): a peer's batches are encoded in the order the thread
 * received them, which is the order it sends them in, and the order
 * within each flow, which comes to one thread.  Gathering per thread
 * rather than per peer keeps each thread's held batches, its count of
 * them (gpu_service_n_held) and the context they are sent from (its
 * emitter: its ports' tx queues) its own; a peer whose packets come to
 * several PMD threads interleaves their gathers, under the peer's mutex,
 * as it interleaved their batches when it encoded them at once.  Each
 * thread sends its packets in the order it encoded them; between two
 * threads the link's order may differ from the encoder's, as it could
 * before, which the decoder survives at the cost of the references it
 * then cannot resolve (such packets are dropped and counted, never
 * delivered wrong).  One thread per peer keeps the link exact.
 *
 * A gather is submitted when the one before it is done and its oldest
 * batch waited gpu-max-hold-us, or the thread received nothing (no more
 * batches to gather with), or it is nearly full; the thread waits for
 * the device only when both of a peer's gathers are full, or when it
 * must send everything (GPU_SERVICE_POLL_FINISH, or a batch it cannot
 * hold: nested in clone or sample, or the caller keeps its packets).
 * Such a batch is encoded at once, after the thread's held batches went
 * on, and counted.  A failed chunking call (a device fault) has its
 * batches chunked on the CPU with the same cuts. */
#define RE_GATHER_PACKETS 2048
#define RE_GATHER_BYTES (2u << 20)
/* A datapath batch's payloads always fit in an empty gather. */
BUILD_ASSERT_DECL(NETDEV_MAX_BURST * GPU_RE_MAX_PAYLOAD <= RE_GATHER_BYTES);
BUILD_ASSERT_DECL(NETDEV_MAX_BURST <= 32);

struct re_gather;
struct re_gatherer;

/* A datapath batch held until its payloads are chunked and it is
 * encoded. */
struct re_held {
    struct gpu_service_held held;   /* The packets and where they go. */
    struct re_gather *g;            /* The gather its payloads are in... */
    size_t first;                   /* ...from this payload on. */
    uint32_t staged;                /* Bit i: packet i's payload is there
                                     * (else the packet is not eligible). */
    /* Each packet's room and, if staged, its parse, as the gather found
     * them (held packets do not change meanwhile). */
    size_t caps[NETDEV_MAX_BURST];
    struct gpu_re_frame frames[NETDEV_MAX_BURST];
    int plens[NETDEV_MAX_BURST];
};
/* As struct gpu_service_holder_class's 'held_size' requires. */
BUILD_ASSERT_DECL(offsetof(struct re_held, held) == 0);

/* The payloads of some of a thread's held batches for one peer, chunked
 * in one call. */
struct re_gather {
    struct gpu_re_batch *batch;     /* On the peer's chunker. */
    uint8_t *data;                  /* RE_GATHER_BYTES, pinned. */
    uint32_t *offsets;              /* RE_GATHER_PACKETS + 1, pinned. */
    uint32_t *rooms;                /* Each payload's room for its shim. */
    /* Where each payload is read, if not copied into 'data': in its held
     * packet (gpu_re_batch_submit_in_place()). */
    const uint8_t **srcs;
    size_t n_in_place;
    size_t n;                       /* Payloads. */
    size_t n_batches;               /* Held batches (some maybe without
                                     * eligible payloads). */
    long long int first_us;         /* When its first batch came. */
    struct re_gatherer *gt;         /* Its owner. */
};

/* A thread's gathers for one peer: one filling while up to the peer's
 * in-flight others are chunked (the slots beyond in-flight + 1 unused,
 * without buffers). */
struct re_gatherer {
    struct re_peer *p;
    bool cuda;                      /* The peer's chunker is on CUDA. */
    struct re_gather slots[GPU_SERVICE_GATHERS_MAX];
    struct gpu_service_gathers gathers;     /* Over 'slots'. */
    struct gpu_service_holder *holder;      /* The thread's. */
};

/* A thread's held batches, oldest first, and its gatherers, one for each
 * peer it encoded for. */
struct re_holder {
    struct gpu_service_holder holder;
    struct re_gatherer **gatherers;
    size_t n_gatherers;
};

static pthread_once_t holder_once = PTHREAD_ONCE_INIT;
static pthread_key_t holder_key;

/* Encodes held batch 'h' with its payloads' results in 'batch' (the
 * device's encoding, or the cuts and hashes for the host's encoder), or,
 * if 'batch' is NULL (the call failed), chunking them here on the CPU.
 * The caller holds the peer's mutex. */
static void
re_held_encode(struct re_peer *p, struct re_held *h,
               struct gpu_re_batch *batch)
    OVS_REQUIRES(p->mutex)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    struct dp_packet_batch *packets = &h->held.packets;
    size_t n = dp_packet_batch_size(packets);
    bool on_device = gpu_re_encoder_on_device(p->enc);
    size_t j = h->first;

    for (size_t i = 0; i < n; i++) {
        uint8_t *frame = dp_packet_data(packets->packets[i]);
        size_t len = dp_packet_size(packets->packets[i]);
        int result;

        if (i + 2 < n) {
            /* Held while the device worked, the frames are cold: start
             * loading the headers the shim rewrites two frames ahead. */
            const uint8_t *ahead = dp_packet_data(packets->packets[i + 2]);

            OVS_PREFETCH_WRITE(ahead);
            OVS_PREFETCH_WRITE(ahead + 64);
        }

        if (batch && h->staged & (UINT32_C(1) << i)) {
            /* Encoded on the device (the frame parsed at the gather), or
             * on the host with the batch's cuts and hashes. */
            result = (on_device
                      ? gpu_re_encode_frame_result(p->enc, batch, j,
                                                   frame, &len, h->caps[i],
                                                   &h->frames[i],
                                                   h->plens[i])
                      : gpu_re_encode_packet_result(p->enc, batch, j,
                                                    frame, &len,
                                                    h->caps[i]));
            j++;
        } else {
            result = gpu_re_encode_packet(p->enc, frame, &len, h->caps[i]);
        }
        if (result < 0) {
            /* The frame changed since its payload was gathered: it goes
             * on as it is, which the decoder's checks survive. */
            gpu_counter_add(&p->n_errors, 1);
            VLOG_WARN_RL(&rl, "re_encode peer %s: %s; a held packet passes "
                         "unchanged", p->name, gpu_status_string(result));
        } else {
            dp_packet_set_size(packets->packets[i], len);
        }
    }
}

/* Completes 'g', whose chunking call ended with 'status' (or could not
 * start): encodes its batches, in order, with its chunks, or chunking
 * them on the CPU if the call failed, and makes them ready to go on. */
static void
re_gather_complete(void *g_, int status)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    struct re_gather *g = g_;
    struct re_peer *p = g->gt->p;
    struct re_held *h;

    /* Held batches counted a gather at a time, not a batch at a time: a
     * locked add to a line that every PMD thread of the peer writes costs
     * each a wait. */
    gpu_counter_add(&p->n_gathers, 1);
    gpu_counter_add(&p->n_held, g->n_batches);
    if (status) {
        bool fault = gpu_service_is_device_error(status);

        gpu_counter_add(fault ? &p->n_faults : &p->n_errors, 1);
        VLOG_WARN_RL(&rl, "re_encode peer %s: %schunking failed (%s); "
                     "%"PRIuSIZE" packets %s", p->name,
                     fault ? "device " : "", gpu_status_string(status),
                     g->n, re_fault_outcome(p));
    }
    ovs_mutex_lock(&p->mutex);
    LIST_FOR_EACH (h, held.node, &g->gt->holder->held) {
        if (h->g == g && !h->held.ready) {
            re_held_encode(p, h, status ? NULL : g->batch);
            h->held.ready = true;
        }
    }
    ovs_mutex_unlock(&p->mutex);
    g->n = 0;
    g->n_in_place = 0;
    g->n_batches = 0;
}

static bool
re_gather_is_empty(const void *g_)
{
    const struct re_gather *g = g_;

    return !g->n_batches;
}

static int
re_gather_start(void *g_)
{
    struct re_gather *g = g_;
    struct re_peer *p = g->gt->p;
    const uint8_t *const *srcs = g->n_in_place ? g->srcs : NULL;
    int status;

    gpu_counter_add(&p->n_gathered, g->n);
    gpu_counter_add(&p->n_in_place, g->n_in_place);
    if (!gpu_re_encoder_on_device(p->enc)) {
        /* Only chunking and hashing: the encoder is not touched. */
        return gpu_re_encoder_submit(p->enc, g->batch, g->data, g->offsets,
                                     srcs, g->rooms, g->n);
    }
    /* The payloads' stream positions are given here, in the order the
     * threads submit. */
    ovs_mutex_lock(&p->mutex);
    status = gpu_re_encoder_submit(p->enc, g->batch, g->data, g->offsets,
                                   srcs, g->rooms, g->n);
    ovs_mutex_unlock(&p->mutex);
    return status;
}

static int
re_gather_poll(void *g_)
{
    struct re_gather *g = g_;

    return gpu_re_batch_poll(g->batch);
}

static int
re_gather_wait(void *g_)
{
    struct re_gather *g = g_;

    return gpu_re_batch_wait(g->batch);
}

static const struct gpu_service_gather_ops re_gather_ops = {
    .target = GPU_FAULT_RE,
    .is_empty = re_gather_is_empty,
    .start = re_gather_start,
    .poll = re_gather_poll,
    .wait = re_gather_wait,
    .complete = re_gather_complete,
};

/* True if the filling gather 'g' should be chunked now: it is nearly
 * full, or its oldest batch waited the peer's hold-us (gpu-max-hold-us if
 * less), or 'idle' says no more batches are coming to gather with. */
static bool
re_gather_due(const struct re_gather *g, bool idle)
{
    return g->n_batches
           && (idle
               || g->n > RE_GATHER_PACKETS - NETDEV_MAX_BURST
               || RE_GATHER_BYTES - g->offsets[g->n]
                  < NETDEV_MAX_BURST * RE_MAX_FRAME
               || gpu_service_now_us() - g->first_us
                  >= MIN(g->gt->p->hold_us,
                         gpu_services_get_max_hold_us()));
}

/* Gathers the payloads of held batch 'h' with 'gt''s and puts 'h' in the
 * thread's FIFO. */
static void
re_gather(struct re_gatherer *gt, struct re_held *h)
{
    struct dp_packet_batch *packets = &h->held.packets;
    size_t n = dp_packet_batch_size(packets);
    uint8_t *frames[NETDEV_MAX_BURST];
    size_t flens[NETDEV_MAX_BURST];
    int lens[NETDEV_MAX_BURST];
    size_t ofs[NETDEV_MAX_BURST];
    size_t n_payloads = 0, n_bytes = 0;
    struct re_gather *g;

    /* The room each frame has for its shim, kept for its encoding. */
    re_frames_prepare(packets->packets, n, true, frames, flens, h->caps);
    for (size_t i = 0; i < n; i++) {
        lens[i] = gpu_re_frame_parse(frames[i], flens[i], &h->frames[i]);
        h->plens[i] = lens[i];
        ofs[i] = lens[i] >= 0 ? h->frames[i].l4 + h->frames[i].l4_len : 0;
        if (lens[i] >= 0) {
            n_payloads++;
            n_bytes += lens[i];
        }
    }
    gpu_service_gathers_finish(&gt->gathers, false);
    g = gpu_service_gathers_filling(&gt->gathers);
    if (g->n_batches && (g->n + n_payloads > RE_GATHER_PACKETS
                         || g->offsets[g->n] + n_bytes > RE_GATHER_BYTES)) {
        /* The next gather is empty after. */
        gpu_service_gathers_submit(&gt->gathers);
        g = gpu_service_gathers_filling(&gt->gathers);
    }
    if (!g->n_batches) {
        g->first_us = gpu_service_now_us();
        g->offsets[0] = 0;
    }
    h->g = g;
    h->first = g->n;
    h->staged = 0;
    for (size_t i = 0; i < n; i++) {
        if (lens[i] >= 0) {
            const uint8_t *payload = frames[i] + ofs[i];

            /* The held packet does not change until it is encoded: the
             * chunker reads its payload there, on the CPU anywhere, on
             * the device where it may (DPDK's mbufs, registered), rather
             * than have the PMD copy it: 12-15% more forwarded on four
             * PMDs of the H100 machine, whose copies shared the memory
             * system (docs/PERFORMANCE.md, nineteenth session). */
            if (gpu_service_read_in_place(payload, lens[i], gt->cuda)
                && !gpu_service_test_knob(GPU_KNOB_RE_COPY)) {
                g->srcs[g->n] = payload;
                g->n_in_place++;
            } else {
                g->srcs[g->n] = NULL;
                memcpy(g->data + g->offsets[g->n], payload, lens[i]);
            }
            g->offsets[g->n + 1] = g->offsets[g->n] + lens[i];
            g->rooms[g->n] = lens[i] + (h->caps[i] - flens[i]);
            g->n++;
            h->staged |= UINT32_C(1) << i;
        }
    }
    g->n_batches++;
    gpu_service_holder_push(gt->holder, &h->held, &gt->gathers);
    if (re_gather_due(g, false) && gpu_service_gathers_room(&gt->gathers)) {
        /* Held packets wait for the chunking before them rather than make
         * the thread wait, unless the gather is full. */
        gpu_service_gathers_submit(&gt->gathers);
    }
}

static void
re_gatherer_free(struct re_gatherer *gt)
{
    for (size_t i = 0; i < ARRAY_SIZE(gt->slots); i++) {
        struct re_gather *g = &gt->slots[i];

        gpu_re_batch_destroy(g->batch);
        gpu_host_free(g->data);
        gpu_host_free(g->offsets);
        free(g->rooms);
        free(g->srcs);
    }
    free(gt);
}

static void
re_holder_destroy(void *ho_)
{
    struct re_holder *ho = ho_;

    for (size_t i = 0; i < ho->n_gatherers; i++) {
        struct re_gatherer *gt = ho->gatherers[i];

        /* Encode what was gathered: the peer's stream must not skip it. */
        gpu_service_gathers_submit(&gt->gathers);
        gpu_service_gathers_finish(&gt->gathers, true);
    }
    /* A datapath thread sends on what it holds before it exits (the 'poll'
     * hook, with GPU_SERVICE_POLL_FINISH), so nothing should be left. */
    gpu_service_holder_destroy(&ho->holder);
    for (size_t i = 0; i < ho->n_gatherers; i++) {
        re_gatherer_free(ho->gatherers[i]);
    }
    free(ho->gatherers);
    free(ho);
}

static void
re_holder_key_create(void)
{
    xpthread_key_create(&holder_key, re_holder_destroy);
}

static const struct gpu_service_holder_class re_holder_class = {
    .name = "re_encode",
    .held_size = sizeof(struct re_held),
};

static struct re_holder *
re_holder_get(bool create)
{
    struct re_holder *ho;

    pthread_once(&holder_once, re_holder_key_create);
    ho = pthread_getspecific(holder_key);
    if (!ho && create) {
        ho = xzalloc(sizeof *ho);
        gpu_service_holder_init(&ho->holder, &re_holder_class);
        xpthread_setspecific(holder_key, ho);
    }
    return ho;
}

/* Returns the calling thread's gatherer for 'p', or NULL if there is no
 * memory for one (its batches are then encoded at once). */
static struct re_gatherer *
re_gatherer_get(struct re_peer *p)
{
    struct re_holder *ho = re_holder_get(true);
    struct re_gatherer *gt;

    for (size_t i = 0; i < ho->n_gatherers; i++) {
        if (ho->gatherers[i]->p == p) {
            return ho->gatherers[i];
        }
    }
    gt = xzalloc(sizeof *gt);
    gt->p = p;
    gt->cuda = gpu_re_chunker_backend(p->chunker) == GPU_RE_BACKEND_CUDA;
    gt->holder = &ho->holder;
    void *slots[ARRAY_SIZE(gt->slots)];
    /* The peer's in-flight never changes: only the slots it uses get
     * their buffers (2 MB pinned each). */
    size_t n_slots = MIN(p->in_flight + 1, ARRAY_SIZE(gt->slots));

    for (size_t i = 0; i < n_slots; i++) {
        slots[i] = &gt->slots[i];
    }
    /* Calls complete in the order they started, and the device's encoder
     * runs every call of the peer on one stream: the peer's stream stays
     * in order with several out. */
    gpu_service_gathers_init(&gt->gathers, &re_gather_ops, slots, n_slots);
    gpu_service_gathers_set_max_in_flight(&gt->gathers, p->in_flight,
                                          &p->calls_out);
    for (size_t i = 0; i < n_slots; i++) {
        struct re_gather *g = &gt->slots[i];

        g->gt = gt;
        g->data = gpu_host_alloc(RE_GATHER_BYTES);
        g->offsets = gpu_host_alloc((RE_GATHER_PACKETS + 1)
                                    * sizeof *g->offsets);
        g->rooms = xmalloc(RE_GATHER_PACKETS * sizeof *g->rooms);
        g->srcs = xmalloc(RE_GATHER_PACKETS * sizeof *g->srcs);
        /* The chunker hashes the chunks too, as for a batch encoded at
         * once (gpu_re_encode_packets()), and with encoder=device encodes
         * them. */
        if (!g->data || !g->offsets
            || gpu_re_encoder_batch_create(p->enc, RE_GATHER_PACKETS,
                                           RE_GATHER_BYTES, &g->batch)) {
            re_gatherer_free(gt);
            return NULL;
        }
    }
    ho->gatherers = xrealloc(ho->gatherers, (ho->n_gatherers + 1)
                                            * sizeof *ho->gatherers);
    ho->gatherers[ho->n_gatherers++] = gt;
    return gt;
}

/* The datapath's per-iteration hook, while the thread holds batches:
 * completes the chunking in flight without waiting, starts the next when
 * it is due, and sends on what is encoded. */
static void
re_poll(const struct gpu_service_emitter *emitter,
        enum gpu_service_poll_mode mode)
{
    struct re_holder *ho = re_holder_get(false);

    if (!ho) {
        return;
    }
    for (size_t i = 0; i < ho->n_gatherers; i++) {
        struct re_gatherer *gt = ho->gatherers[i];

        if (gpu_service_gathers_room(&gt->gathers)
            && re_gather_due(gpu_service_gathers_filling(&gt->gathers),
                             mode != GPU_SERVICE_POLL_BUSY)) {
            gpu_service_gathers_submit(&gt->gathers);
        }
    }
    gpu_service_holder_release(&ho->holder, emitter,
                               mode == GPU_SERVICE_POLL_FINISH);
}

/* re_encode's 'hold': holds 'packets' (the datapath batch 'b' is of) to
 * chunk its payloads with later batches', or encodes 'b' at once if it
 * cannot be held. */
static void
re_encode_hold(const char *args, struct gpu_service_batch *b,
               struct dp_packet_batch *packets, bool may_steal,
               const struct gpu_service_next *next,
               const struct gpu_service_emitter *emitter)
{
    struct re_peer *p = re_peer_from_args(args, true);
    struct re_holder *ho;

    if (p && may_steal && next && emitter && b->n) {
        struct re_gatherer *gt = re_gatherer_get(p);

        if (gt) {
            struct re_held *h = CONTAINER_OF(gpu_service_holder_new_held(
                                                 gt->holder),
                                             struct re_held, held);

            gpu_service_held_init(&h->held, packets, next);
            re_gather(gt, h);
            /* The packets are the held batch's now. */
            dp_packet_batch_init(packets);
            return;
        }
    }
    /* Nested in clone or sample, or the caller keeps the packets, or no
     * memory to gather: encoded at once, after what the thread holds went
     * on, which it must not overtake (the same flow, or the same peer's
     * stream). */
    if (p) {
        gpu_counter_add(&p->n_not_held, 1);
    }
    ho = re_holder_get(false);
    if (ho && emitter) {
        gpu_service_holder_release(&ho->holder, emitter, true);
    }
    re_run(args, b, true);
}

static void
re_decode_run(const char *args, struct gpu_service_batch *b)
{
    re_run(args, b, false);
}

const struct gpu_service_impl gpu_re_encode_service_impl = {
    .type = GPU_SERVICE_RE_ENCODE,
    .check = re_encode_check,
    .hold = re_encode_hold,
    .poll = re_poll,
};

const struct gpu_service_impl gpu_re_decode_service_impl = {
    .type = GPU_SERVICE_RE_DECODE,
    .check = re_decode_check,
    .run = re_decode_run,
};

/* -------------------------------------------------------------- appctl. */

static int
compare_peers(const void *a_, const void *b_)
{
    const struct re_peer *const *a = a_;
    const struct re_peer *const *b = b_;
    int cmp = strcmp((*a)->name, (*b)->name);

    return cmp ? cmp : (*b)->encoder - (*a)->encoder;
}

static void
re_format_peer(struct ds *s, struct re_peer *p)
{
    struct gpu_re_stats st;
    uint64_t n_errors;

    ovs_mutex_lock(&p->mutex);
    if (p->encoder) {
        gpu_re_encoder_get_stats(p->enc, &st);
    } else {
        gpu_re_decoder_get_stats(p->dec, &st);
    }
    ovs_mutex_unlock(&p->mutex);
    atomic_read_relaxed(&p->n_errors, &n_errors);

    ds_put_format(s, "%s peer %s: %s\n",
                  p->encoder ? "re_encode" : "re_decode", p->name,
                  p->options[0] ? p->options : "default options");
    if (p->encoder) {
        uint64_t n_faults, n_held, n_gathers, n_not_held;
        uint64_t n_gathered, n_in_place;

        atomic_read_relaxed(&p->n_faults, &n_faults);
        atomic_read_relaxed(&p->n_held, &n_held);
        atomic_read_relaxed(&p->n_gathers, &n_gathers);
        atomic_read_relaxed(&p->n_not_held, &n_not_held);
        atomic_read_relaxed(&p->n_gathered, &n_gathered);
        atomic_read_relaxed(&p->n_in_place, &n_in_place);
        ds_put_format(s, "  chunking: %s\n", gpu_re_chunker_why(p->chunker));
        if (gpu_re_encoder_on_device(p->enc)) {
            struct gpu_re_chunker_stats cs;

            /* Launched by the device unless the option said host or the
             * queue could not start (then all from the PMD). */
            gpu_re_chunker_get_stats(p->chunker, &cs);
            ds_put_format(s, "  encoding: on the device (encoder=device); "
                          "calls launched by the device: %"PRIu64" of %"
                          PRIu64" (launch=%s), its scheduler woken %"PRIu64
                          " times\n", cs.n_device_launches,
                          cs.n_graph_launches,
                          p->device_launch ? "device" : "host",
                          cs.n_scheduler_launches);
        } else {
            ds_put_format(s, "  encoding: on the host\n");
        }
        unsigned int max_hold_us = gpu_services_get_max_hold_us();
        unsigned int most_out;

        atomic_read_relaxed(&p->calls_out.most, &most_out);
        ds_put_format(s, "  gathers: in-flight=%u, hold-us=%u", p->in_flight,
                      p->hold_us);
        if (max_hold_us < p->hold_us) {
            ds_put_format(s, " (%u by gpu-max-hold-us)", max_hold_us);
        }
        ds_put_format(s, "; up to %u chunking calls out at once in all "
                      "threads\n", most_out);
        ds_put_format(s, "  held: %"PRIu64" batches in %"PRIu64" gathers "
                      "(%.1f batches a gather), %"PRIu64" went the "
                      "synchronous way\n", n_held, n_gathers,
                      n_gathers ? (double) n_held / n_gathers : 0.0,
                      n_not_held);
        ds_put_format(s, "  gathered payloads: %"PRIu64", read in place: "
                      "%"PRIu64"\n", n_gathered, n_in_place);
        ds_put_format(s, "  device faults: %"PRIu64" batches %s\n",
                      n_faults, re_fault_outcome(p));
    }
    ds_put_format(s, "  packets: %"PRIu64" (%"PRIu64" as shims), passed "
                  "unchanged: %"PRIu64"\n", st.packets, st.shims, st.passed);
    ds_put_format(s, "  bytes in: %"PRIu64", bytes out: %"PRIu64"\n",
                  st.bytes_in, st.bytes_out);
    if (p->encoder) {
        ds_put_format(s, "  savings: %.1f%%\n", st.bytes_in
                      ? 100.0 * ((double) st.bytes_in - st.bytes_out)
                        / st.bytes_in : 0.0);
    }
    ds_put_format(s, "  hits: %"PRIu64" (%"PRIu64" bytes), cache fill: %"
                  PRIu64" bytes, epochs: %"PRIu64"\n", st.hits,
                  st.hit_bytes, st.cache_fill, st.epochs);
    if (!p->encoder) {
        ds_put_format(s, "  undecodable (dropped): %"PRIu64" (%"PRIu64
                      " malformed)\n", st.undecodable, st.malformed);
        if (st.shims_v1) {
            /* The peer's ovs-gpu predates shim version 2: still
             * decoded, at MurmurHash3's cost. */
            ds_put_format(s, "  shims of version 1 (an older encoder): %"
                          PRIu64"\n", st.shims_v1);
        }
    }
    ds_put_format(s, "  errors (packets passed): %"PRIu64"\n", n_errors);
}

static void
gpu_re_show_cmd(struct unixctl_conn *conn, int argc, const char *argv[],
                void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    struct re_peer **list;
    struct re_peer *p;
    size_t n = 0;

    ovs_mutex_lock(&peers_mutex);
    list = xmalloc((cmap_count(&peers) + 1) * sizeof *list);
    CMAP_FOR_EACH (p, node, &peers) {
        if (argc < 2 || !strcmp(p->name, argv[1])) {
            list[n++] = p;
        }
    }
    ovs_mutex_unlock(&peers_mutex);
    if (argc >= 2 && !n) {
        free(list);
        unixctl_command_reply_error(conn, "no such peer");
        return;
    }
    qsort(list, n, sizeof *list, compare_peers);
    for (size_t i = 0; i < n; i++) {
        re_format_peer(&s, list[i]);
    }
    free(list);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

/* Starts a new epoch at an encoder: its cache is emptied and the decoder
 * follows when the first shim of the epoch arrives (after a decoder
 * restart, say). */
static void
gpu_re_resync_cmd(struct unixctl_conn *conn, int argc OVS_UNUSED,
                  const char *argv[], void *aux OVS_UNUSED)
{
    struct re_peer *p;

    ovs_mutex_lock(&peers_mutex);
    p = re_peer_find(argv[1], true);
    ovs_mutex_unlock(&peers_mutex);
    if (!p) {
        unixctl_command_reply_error(conn, "no such encoder peer");
        return;
    }
    ovs_mutex_lock(&p->mutex);
    gpu_re_encoder_resync(p->enc);
    ovs_mutex_unlock(&p->mutex);
    unixctl_command_reply(conn, NULL);
}

void
gpu_re_service_init(void)
{
    unixctl_command_register("gpu-re/show", "[peer]", 0, 1,
                             gpu_re_show_cmd, NULL);
    unixctl_command_register("gpu-re/resync", "peer", 1, 1,
                             gpu_re_resync_cmd, NULL);
}
