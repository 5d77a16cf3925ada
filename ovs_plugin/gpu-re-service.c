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
 * mutex, taken by the PMD thread for one batch. */

#include <config.h>

#include "ovs_plugin/gpu-re-service.h"

#include <inttypes.h>
#include <string.h>

#include "cmap.h"
#include "dp-packet.h"
#include "hash.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/vlog.h"
#include "ovs-atomic.h"
#include "ovs-thread.h"
#include "unixctl.h"
#include "util.h"

#include "gpu_services/re/gpu-re.h"
#include "ovs_plugin/gpu-actions.h"

VLOG_DEFINE_THIS_MODULE(gpu_re_service);

/* The largest Ethernet frame (with two VLAN tags) an encoded packet may
 * grow to: an epoch's first shim is a little longer than its payload. */
#define RE_MAX_FRAME 1522

struct re_peer {
    struct cmap_node node;      /* In 'peers', by hash of name and side. */
    char *name;
    bool encoder;               /* re_encode, else re_decode. */
    char *options;              /* The action's arguments but "peer". */

    struct ovs_mutex mutex;     /* One batch at a time, in order. */
    struct gpu_re_chunker *chunker;         /* Encoder only. */
    struct gpu_re_encoder *enc;
    struct gpu_re_decoder *dec;

    atomic_uint64_t n_errors;   /* Batches the library refused. */
    atomic_uint64_t n_faults;   /* Device calls failed: chunked on CPU. */
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
re_parse_args(const char *args, struct gpu_re_config *cfg, char **name,
              char **options)
{
    struct ds opts = DS_EMPTY_INITIALIZER;
    char *copy = xstrdup(args);
    char *save_ptr = NULL;
    char *item, *error = NULL;
    char err[256];

    *name = NULL;
    gpu_re_config_init(cfg);
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
    char *error = re_parse_args(args, &cfg, &name, &options);
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
    name = options = NULL;
    ovs_mutex_init(&p->mutex);
    if (encoder) {
        struct gpu_re_chunker_config ccfg;
        int device;

        gpu_re_chunker_config_init(&ccfg);
        ccfg.params = cfg.params;
        ccfg.backend = gpu_services_get_backend(&device)
                       ? GPU_RE_BACKEND_CUDA : GPU_RE_BACKEND_CPU;
        ccfg.device = device;
        status = gpu_re_chunker_create(&ccfg, &p->chunker);
        if (status && ccfg.backend == GPU_RE_BACKEND_CUDA) {
            VLOG_WARN("re_encode peer %s: CUDA chunker failed (%s); using "
                      "the CPU", p->name, gpu_status_string(status));
            ccfg.backend = GPU_RE_BACKEND_CPU;
            status = gpu_re_chunker_create(&ccfg, &p->chunker);
        }
        if (!status) {
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

static void
re_run(const char *args, struct gpu_service_batch *b, bool encoder)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    struct re_peer *p = re_peer_from_args(args, encoder);
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
        struct dp_packet *packet = b->pkts[i].packet;
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

    ovs_mutex_lock(&p->mutex);
    if (encoder) {
        status = gpu_service_fault_take(GPU_FAULT_RE);
        if (!status) {
            status = gpu_re_encode_packets(p->enc, frames, lens, caps, b->n,
                                           results);
        }
        if (gpu_service_is_device_error(status)) {
            /* The encoder is unchanged by a failed call: chunk and encode
             * on the CPU, with the same cuts the device would make. */
            gpu_counter_add(&p->n_faults, 1);
            VLOG_WARN_RL(&rl, "re_encode peer %s: device chunking failed "
                         "(%s); %"PRIuSIZE" packets chunked on the CPU",
                         p->name, gpu_status_string(status), b->n);
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

static void
re_encode_run(const char *args, struct gpu_service_batch *b)
{
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
    .run = re_encode_run,
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
        uint64_t n_faults;

        atomic_read_relaxed(&p->n_faults, &n_faults);
        ds_put_format(s, "  chunking: %s\n", gpu_re_chunker_why(p->chunker));
        ds_put_format(s, "  device faults: %"PRIu64" batches chunked on the "
                      "CPU\n", n_faults);
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
