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

/* Fuzzing hook: see plugin-hooks.h. */
#include "ovs_plugin/gpu-fec-service.c"

#include <stdio.h>

#include "tests/fuzz/plugin-hooks.h"

char *
fuzz_fec_parse_args(const char *args, bool encoder)
{
    struct fec_inst *inst = xzalloc(sizeof *inst);
    char *error = fec_parse_args(args, encoder, inst);

    free(inst);
    return error;
}

/* An instance as fec_check() makes it, but not in the table: each input
 * gets its own, so that one input's groups do not decide the next one's
 * fate and a crash reproduces from its input alone. */
static struct fec_inst *
inst_create(const char *args, bool encoder)
{
    struct fec_inst *inst = xzalloc(sizeof *inst);
    char *error = fec_parse_args(args, encoder, inst);

    if (error) {
        fprintf(stderr, "%s: %s\n", args, error);
        abort();
    }
    if (encoder) {
        fec_encoder_resolve_code(inst);
        inst->coder = fec_coder_get(inst->k, inst->m, inst->code, false,
                                    inst->device_launch, false, NULL);
        inst->group = 0x5eed0000;
    }
    fec_inst_init(inst, args, encoder);
    return inst;
}

static void
inst_destroy(struct fec_inst *inst)
{
    struct fec_group *g;

    ovs_mutex_lock(&inst->mutex);
    /* Calls still gathered or in flight finish first, as a thread's last
     * poll has them finish: what they rebuild waits with the rest. */
    fec_calls_run(inst, NULL, GPU_SERVICE_POLL_FINISH, 0);
    /* Before the coders their batches use go, below. */
    fec_calls_free_spares(inst);
    HMAP_FOR_EACH_SAFE (g, node, &inst->groups) {
        fec_group_destroy(inst, g);
    }
    if (inst->n_buffered || inst->n_buffered_bytes) {
        /* The accounting must come back to zero with the groups. */
        fprintf(stderr, "%"PRIuSIZE" packets, %"PRIuSIZE" bytes still "
                "counted as buffered\n", inst->n_buffered,
                inst->n_buffered_bytes);
        abort();
    }
    for (size_t i = 0; i < inst->n_pending; i++) {
        dp_packet_delete(inst->pending[i]);
    }
    if (!inst->encoder) {
        struct fec_coder *c;

        if (hmap_count(&coders) > FEC_MAX_WIRE_CODERS) {
            /* Every frame may name another k and m: what they make the
             * decoder keep must stay bounded. */
            fprintf(stderr, "%"PRIuSIZE" coders kept\n",
                    hmap_count(&coders));
            abort();
        }
        /* Coders are kept from one input to the next, as ovs-vswitchd
         * keeps them (building one costs more than most inputs), but
         * never more than half the bound: an input naming up to half of
         * FEC_MAX_WIRE_CODERS codes then behaves as it would alone, and
         * one naming more still meets the bound.  (No encoder uses them
         * here.) */
        ovs_mutex_lock(&coders_mutex);
        if (n_wire_coders >= FEC_MAX_WIRE_CODERS / 2) {
            HMAP_FOR_EACH_POP (c, node, &coders) {
                gpu_parity_destroy(c->coder);
                free(c);
            }
            n_wire_coders = 0;
        }
        ovs_mutex_unlock(&coders_mutex);
    }
    fec_inst_free_reusable(inst);
    ovs_mutex_unlock(&inst->mutex);
    hmap_destroy(&inst->groups);
    ovs_mutex_destroy(&inst->mutex);
    free(inst->next_actions);
    free(inst->args);
    free(inst);
}

/* Runs one batch of 'n' packets through 'inst' and frees what comes out
 * (a datapath would send it on). */
static void
run_batch(struct fec_inst *inst, struct dp_packet **pkts, size_t n,
          long long int now, void (*sink)(struct dp_packet *, void *),
          void *aux)
{
    struct dp_packet_batch batch;
    struct fec_out out;

    dp_packet_batch_init(&batch);
    for (size_t i = 0; i < n; i++) {
        dp_packet_batch_add(&batch, pkts[i]);
    }
    out.n = 0;
    out.n_reserved = n;
    out.may_steal = true;
    ovs_mutex_lock(&inst->mutex);
    if (inst->encoder) {
        fec_encode_batch(inst, &batch, &out, now);
    } else {
        fec_decode_batch(inst, &batch, &out, now);
    }
    ovs_mutex_unlock(&inst->mutex);
    if (out.n > NETDEV_MAX_BURST) {
        abort();
    }
    for (size_t i = 0; i < out.n; i++) {
        if (sink) {
            sink(out.pkts[i], aux);
        }
        dp_packet_delete(out.pkts[i]);
    }
}

/* Input: one byte of options, then records of a 16-bit big-endian length
 * and that many bytes: a frame, or, where the length's top bit is set, a
 * step of the clock by the low 15 bits in units of 100 us (which ends the
 * batch).  A batch also ends after NETDEV_MAX_BURST frames.  Options: bits
 * 0-1 pick max_packets (4096, 64, 8, 1), bit 2 a group_timeout of 1 ms
 * instead of 100 ms. */
static uint64_t
fec_decode_input(const uint8_t *data, size_t size)
{
    static const char *const args[] = {
        "max_packets=4096,max_bytes=65536", "max_packets=64",
        "max_packets=8,max_bytes=65536", "max_packets=1",
        "max_packets=4096,max_bytes=65536,group_timeout=1000",
        "max_packets=64,group_timeout=1000",
        "max_packets=8,max_bytes=65536,group_timeout=1000",
        "max_packets=1,group_timeout=1000",
    };
    struct dp_packet *pkts[NETDEV_MAX_BURST];
    long long int now = 1000000000;
    struct fec_inst *inst;
    uint64_t n_rebuilt;
    size_t n = 0;

    if (!size) {
        return 0;
    }
    inst = inst_create(args[data[0] & 7], false);
    data++;
    size--;
    while (size >= 2) {
        size_t len = (data[0] << 8) | data[1];

        data += 2;
        size -= 2;
        if (len & 0x8000) {
            run_batch(inst, pkts, n, now, NULL, NULL);
            n = 0;
            now += (len & 0x7fff) * 100;
            continue;
        }
        len = MIN(len, size);
        pkts[n] = dp_packet_clone_data(data, len);
        pkt_metadata_init(&pkts[n]->md, u32_to_odp(1));
        n++;
        data += len;
        size -= len;
        if (n == NETDEV_MAX_BURST) {
            run_batch(inst, pkts, n, now, NULL, NULL);
            n = 0;
        }
    }
    run_batch(inst, pkts, n, now, NULL, NULL);
    /* Groups are rebuilt in calls, which a thread's poll finishes: so
     * here, before they are counted. */
    ovs_mutex_lock(&inst->mutex);
    fec_calls_run(inst, NULL, GPU_SERVICE_POLL_FINISH, 0);
    ovs_mutex_unlock(&inst->mutex);
    n_rebuilt = inst->n_rebuilt;
    inst_destroy(inst);
    return n_rebuilt;
}

void
fuzz_fec_decode(const uint8_t *data, size_t size)
{
    fec_decode_input(data, size);
}

/* ---- Seeds. ---- */

struct seed {
    FILE *f;
    unsigned int n_out;         /* Frames the encoder sent so far. */
    uint32_t drop_mask;         /* Of those, the ones "lost" on the way. */
    unsigned int n_tags;        /* VLAN tags the link puts on each. */
};

static void
seed_sink(struct dp_packet *packet, void *seed_)
{
    struct seed *seed = seed_;
    size_t len = dp_packet_size(packet);

    if (!(seed->drop_mask & (1u << (seed->n_out++ % 32)))) {
        const uint8_t *d = dp_packet_data(packet);
        size_t wire_len = len + 4 * seed->n_tags;

        fputc(wire_len >> 8, seed->f);
        fputc(wire_len & 0xff, seed->f);
        /* A VLAN link's tags, between the MAC addresses and the FEC
         * ethertype: 802.1ad outside 802.1Q for two. */
        fwrite(d, 1, 2 * ETH_ADDR_LEN, seed->f);
        for (unsigned int t = seed->n_tags; t > 0; t--) {
            fwrite(t == 2 ? "\x88\xa8\x00\x64" : "\x81\x00\x00\x07",
                   1, 4, seed->f);
        }
        fwrite(d + 2 * ETH_ADDR_LEN, 1, len - 2 * ETH_ADDR_LEN, seed->f);
    }
}

/* What a PMD's poll does after each batch, waiting for the device: the
 * encoder's closed groups are coded in a call, whose parity then goes out
 * (with an empty batch, as the datapath would send it). */
static void
seed_encode_poll(struct fec_inst *enc, long long int now, struct seed *seed)
{
    ovs_mutex_lock(&enc->mutex);
    fec_calls_run(enc, NULL, GPU_SERVICE_POLL_FINISH, now);
    ovs_mutex_unlock(&enc->mutex);
    while (enc->n_pending) {
        run_batch(enc, NULL, 0, now, seed_sink, seed);
    }
}

/* A frame of the original traffic: 'i' picks its length and bytes. */
static struct dp_packet *
seed_frame(unsigned int i)
{
    static const size_t lens[] = { 60, 98, 1514, 300, 64, 590, 1000 };
    size_t len = lens[i % 7];
    struct dp_packet *p = dp_packet_new(len);
    uint8_t *d = dp_packet_put_zeros(p, len);

    memcpy(d, "\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00",
           14);
    for (size_t j = 14; j < len; j++) {
        d[j] = (uint8_t) (j * 7 + i * 13);
    }
    pkt_metadata_init(&p->md, u32_to_odp(1));
    return p;
}

void
fuzz_fec_generate(const char *dir)
{
    /* Each seed with the packets its decoding must rebuild: a seed that
     * rebuilds nothing never reaches the rebuilding it is there for (as
     * once, when the encoder's parity came from device calls that the
     * generation never finished). */
    static const struct {
        const char *args;
        unsigned int n_frames;
        uint32_t drop_mask;
        uint8_t options;
        unsigned int n_tags;
        uint64_t n_rebuilt;
    } seeds[] = {
        { "k=4,m=2", 4, 0, 0, 0, 0 },
        { "k=4,m=2", 4, 0x1, 0, 0, 1 },
        { "k=4,m=2", 4, 0x6, 0, 0, 2 },
        { "k=4,m=2", 8, 0x21, 0, 0, 1 },
        { "k=4,m=2", 3, 0x2, 4, 0, 1 },     /* A short group, by timeout. */
        { "k=2,m=1", 6, 0x9, 0, 0, 2 },
        { "k=8,m=4", 8, 0xf, 0, 0, 4 },
        { "k=8,m=4", 8, 0x1f, 1, 0, 0 },    /* Too many lost. */
        { "k=1,m=1", 3, 0x1, 2, 0, 1 },
        { "k=10,m=3", 10, 0x404, 0, 0, 1 },
        { "k=4,m=2", 12, 0x1248, 3, 0, 4 },
        { "k=3,m=3", 3, 0x7, 6, 0, 3 },
        { "k=4,m=2", 4, 0x2, 0, 1, 1 },     /* From a VLAN link. */
        { "k=4,m=2", 8, 0x81, 0, 2, 2 },    /* From a QinQ link. */
    };

    for (size_t s = 0; s < ARRAY_SIZE(seeds); s++) {
        struct fec_inst *enc = inst_create(seeds[s].args, true);
        struct seed seed = { .drop_mask = seeds[s].drop_mask,
                             .n_tags = seeds[s].n_tags };
        long long int now = 1000000000;
        char path[512];

        snprintf(path, sizeof path, "%s/%s-%u-%x%s", dir, seeds[s].args,
                 seeds[s].n_frames, seeds[s].drop_mask,
                 seeds[s].n_tags == 2 ? "-qinq"
                 : seeds[s].n_tags ? "-vlan" : "");
        for (char *c = path + strlen(dir); *c; c++) {
            *c = *c == ',' || *c == '=' ? '_' : *c;
        }
        seed.f = fopen(path, "wb");
        if (!seed.f) {
            perror(path);
            exit(1);
        }
        fputc(seeds[s].options, seed.f);
        for (unsigned int i = 0; i < seeds[s].n_frames; i++) {
            struct dp_packet *p = seed_frame(i + s);

            run_batch(enc, &p, 1, now, seed_sink, &seed);
            seed_encode_poll(enc, now, &seed);
        }
        /* The encoder's timeout closes a short group. */
        now += 2 * enc->timeout_us;
        run_batch(enc, NULL, 0, now, seed_sink, &seed);
        seed_encode_poll(enc, now, &seed);
        if (seeds[s].options & 4) {
            /* And the decoder's clock moves on too. */
            fputc(0x80, seed.f);
            fputc(0x20, seed.f);
        }
        fclose(seed.f);
        inst_destroy(enc);

        /* The decoder must rebuild what it can of a seed, or the seed
         * does not reach the rebuilding. */
        FILE *f = fopen(path, "rb");
        uint8_t buf[65536];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        uint64_t n_rebuilt = fec_decode_input(buf, len);

        printf("%s: %"PRIu64" rebuilt\n", path, n_rebuilt);
        if (n_rebuilt != seeds[s].n_rebuilt) {
            fprintf(stderr, "%s: %"PRIu64" packets rebuilt, expected "
                    "%"PRIu64"\n", path, n_rebuilt, seeds[s].n_rebuilt);
            exit(1);
        }
    }
}
