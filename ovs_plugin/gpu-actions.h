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

#ifndef OVS_GPU_ACTIONS_H
#define OVS_GPU_ACTIONS_H 1

/* The executor of GPU service actions (gpu_ids, re_encode, ...).
 *
 * dpif-netdev hands each datapath batch that meets a GPU service action to
 * the executor (lib/gpu-service.h in the patched OVS).  The executor parses
 * every packet's headers once, packs the L4 payloads back to back into a
 * per-thread pinned staging buffer (one copy in), hands the whole batch to
 * the service in one call, applies the verdicts (pass or drop) and counts.
 * A service never sees a dp_packet: it sees a struct gpu_service_batch.
 *
 * Each service is a struct gpu_service_impl; adding one is adding an
 * implementation and a line in gpu-actions.c's table. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dp-packet.h"
#include "flow.h"
#include "gpu-dpcls.h"
#include "gpu-service.h"
#include "gpu_runtime/gpu-frame.h"
#include "gpu_runtime/gpu-runtime.h"
#include "openvswitch/list.h"
#include "ovs-atomic.h"

struct ds;

/* One packet of a batch, and what a service that parses it found
 * (gpu_service_parse_packet(); all zero until then). */
struct gpu_service_packet {
    struct dp_packet *packet;
    struct gpu_frame_l4 l4;
};

enum gpu_service_verdict {
    GPU_SERVICE_PASS,
    GPU_SERVICE_DROP,
};

/* A datapath batch as a service sees it. */
struct gpu_service_batch {
    size_t n;
    struct gpu_service_packet pkts[NETDEV_MAX_BURST];

    /* The payloads of 'pkts', back to back in pinned memory: packet i is
     * data[offsets[i]] to data[offsets[i + 1]] (empty if not IP).  NULL
     * and all zero until the service stages them itself
     * (gpu_service_batch_stage()). */
    const uint8_t *data;
    uint32_t offsets[NETDEV_MAX_BURST + 1];
    size_t n_bytes;             /* Sum of the payloads' lengths. */

    /* Set by the service; all GPU_SERVICE_PASS on entry. */
    enum gpu_service_verdict verdicts[NETDEV_MAX_BURST];
};

struct gpu_service_impl {
    enum gpu_service_type type;

    /* The executor gives a service each packet alone ('packet' of
     * struct gpu_service_packet): parsing every frame cost ~30 ns a
     * packet (re_encode's profile on the H100 machine, eighteenth
     * session), and each service parses what it needs, where it is
     * cheapest (gpu_ids: in its matcher, on the device). */

    /* Checks the arguments of an action in a flow being added: NULL if
     * good, else a malloc()'d reason (the flow is refused). */
    char *(*check)(const char *args);

    /* Runs the service on 'batch' and sets its verdicts.  Errors of its
     * own (device, missing configuration) must leave packets passing, and
     * be counted and logged by the service. */
    void (*run)(const char *args, struct gpu_service_batch *batch);

    /* Optional, for a service whose verdicts take a device round trip
     * (gpu_ids in drop mode): called instead of 'run', with the datapath
     * batch and the rules of gpu-service.h's 'execute' too.  Either it
     * takes the packets of 'packets' (leaving it empty) to send them on
     * later, oldest first, along a copy of 'next' from its 'poll', or it
     * does what 'run' does.  Before a batch it cannot hold goes on it
     * sends what it holds through 'emitter', so that no packet overtakes
     * an earlier one; it keeps gpu_service_n_held up to date for the
     * calling thread. */
    void (*hold)(const char *args, struct gpu_service_batch *batch,
                 struct dp_packet_batch *packets, bool may_steal,
                 const struct gpu_service_next *next,
                 const struct gpu_service_emitter *emitter);
    void (*poll)(const struct gpu_service_emitter *emitter,
                 enum gpu_service_poll_mode mode);

    /* Optional, instead of 'run': for services that add packets to the
     * flow or hold them back (fec_encode, fec_decode), the datapath batch
     * itself and the actions that follow ('next', or NULL), with the rules
     * of gpu-service.h's 'execute'.  The executor then neither parses nor
     * stages. */
    void (*execute)(const char *args, struct dp_packet_batch *batch,
                    bool may_steal, const struct gpu_service_next *next);

    /* Optional: the service's timers, from gpu-service.h's 'run' (which
     * may send packets through 'emitter') and 'wait' hooks. */
    void (*timers_run)(const struct gpu_service_emitter *emitter);
    void (*timers_wait)(void);
};

/* Adds 'n' to a statistics counter that several threads update. */
static inline void
gpu_counter_add(atomic_uint64_t *counter, uint64_t n)
{
    uint64_t orig;

    atomic_add_relaxed(counter, n, &orig);
}

/* A statistics counter that one thread at a time adds to and any thread
 * reads: a plain load and store, no locked add (which waits for the
 * thread's earlier stores, and bounces the line between the threads that
 * share it); a reader sees a whole value, old or new. */
struct gpu_thread_counter {
    atomic_uint64_t value;
};

static inline void
gpu_thread_counter_add(struct gpu_thread_counter *c, uint64_t n)
{
    uint64_t value;

    atomic_read_relaxed(&c->value, &value);
    atomic_store_relaxed(&c->value, value + n);
}

static inline uint64_t
gpu_thread_counter_read(const struct gpu_thread_counter *c)
{
    uint64_t value;

    atomic_read_relaxed(CONST_CAST(atomic_uint64_t *, &c->value), &value);
    return value;
}

/* The time for a service's work, in microseconds (time_usec()).  A
 * datapath thread's action call or per-iteration poll
 * (gpu_actions_execute(), gpu_actions_poll()) reads the clock at most
 * once, when a service it runs first asks, and gives every service the
 * same reading: a clock read costs ~30 ns on the H200 machine and the
 * services took about five a batch for their hold limits
 * (docs/PERFORMANCE.md, thirty-fifth session).  Outside such a call (the
 * main thread's timers) it reads the clock. */
long long int gpu_service_now_us(void);
/* Drops the reading of the call this thread is in, after the thread
 * waited for the device: what the services time next (a call's
 * duration, how long packets were held) must include the wait. */
void gpu_service_clock_forget(void);

/* The GPU services: gpu-ids-service.c, ... */
extern const struct gpu_service_impl gpu_ids_service_impl;
extern const struct gpu_service_impl gpu_re_encode_service_impl;
extern const struct gpu_service_impl gpu_re_decode_service_impl;
extern const struct gpu_service_impl gpu_index_service_impl;
extern const struct gpu_service_impl gpu_fec_encode_service_impl;
extern const struct gpu_service_impl gpu_fec_decode_service_impl;

/* Parses 'packet' into 'p' (which keeps a pointer to it). */
void gpu_service_parse_packet(struct dp_packet *packet,
                              struct gpu_service_packet *p);
/* The same parse (gpu_frame_parse()) into 'l4', for any packet type. */
void gpu_service_parse_frame(const struct dp_packet *packet,
                             struct gpu_frame_l4 *l4);

/* Copies the payloads of 'b''s packets back to back to 'dst' (room for
 * b->n_bytes), or, if 'dst' is NULL, to the calling thread's pinned
 * staging buffer, and points b->data and b->offsets at them.  Returns
 * false only if 'dst' is NULL and the staging buffer could not grow (the
 * batch is left unstaged). */
bool gpu_service_batch_stage(struct gpu_service_batch *b, uint8_t *dst);

/* Payloads shorter than this are copied even where the device could read
 * them in place: a descriptor costs as much as their copy. */
#define GPU_SERVICE_IN_PLACE_MIN 64

/* Whether a held packet's payload of 'len' bytes at 'payload' is read
 * where it is rather than copied: long enough, and, for a 'device' that
 * reads it (else the CPU does, anywhere), in memory it may read. */
static inline bool
gpu_service_read_in_place(const void *payload, size_t len, bool device)
{
    return (len >= GPU_SERVICE_IN_PLACE_MIN
            && (!device || gpu_host_readable_in_place(payload, len)));
}

/* As gpu_service_batch_stage() into 'dst', for a batch whose packets wait
 * until the device has read them (held): a payload of at least
 * GPU_SERVICE_IN_PLACE_MIN bytes in memory the device reads in place
 * (gpu_host_readable_in_place(): DPDK's, once
 * gpu_service_register_packet_memory() ran) is not copied, and 'srcs[i]'
 * points at it; the others are copied and their 'srcs[i]' is NULL.  The
 * offsets are laid out as if all were copied.  Returns how many are in
 * place. */
size_t gpu_service_batch_stage_in_place(struct gpu_service_batch *b,
                                        uint8_t *dst, const uint8_t **srcs);

/* Registers DPDK's memory, where packets' mbufs are, with CUDA device
 * 'device' so that services may give the device payloads in place
 * (gpu_host_register()), in a thread of its own (about a second for
 * gigabytes); logs what it did.  Main thread; a no-op without DPDK or if
 * done already. */
void gpu_service_register_packet_memory(int device);

/* Parses a service's arguments "key=value,flag,..." (already checked for
 * syntax by OVS) against 'keys', a NULL-terminated list of the keys the
 * service knows, each written "name=" if it takes a value and "name" if it
 * is a flag.  Stores the values, in the order of 'keys', in 'values' (NULL
 * for a missing key, "" for a flag that is present), pointing into
 * 'buf' (a copy of 'args' of 'buf_size' bytes).  Returns NULL, or a
 * malloc()'d message naming the first bad item. */
char *gpu_service_args_split(const char *args, const char *const keys[],
                             const char *values[], char *buf,
                             size_t buf_size);

/* The backend new service objects (matchers, chunkers) use: CUDA on
 * 'device', or the CPU.  Set by the plugin from gpu-device; services read
 * it when they build objects, in the main thread. */
void gpu_services_set_backend(bool cuda, int device);
bool gpu_services_get_backend(int *device);

/* Device faults.  A service whose device call fails (or is made to fail
 * by "ovs-appctl gpu/inject-fault SERVICE launch|nomem N", test only)
 * finishes that batch on its CPU backend: no packet is lost or goes on
 * unchecked.  Each service counts and logs such batches itself. */
enum gpu_fault_target {
    GPU_FAULT_IDS,              /* gpu_ids scans. */
    GPU_FAULT_RE,               /* re_encode's chunking. */
    GPU_FAULT_FEC,              /* fec_encode and fec_decode coding. */
    GPU_FAULT_INDEX,            /* gpu_index's index builds. */
    GPU_FAULT_N_TARGETS
};

/* Returns 0, or the device error an injected fault makes the next device
 * call of 'target' fail with (GPU_ERR_DEVICE for "launch",
 * GPU_ERR_DEVICE_NOMEM for "nomem"), using up one injection.  Cheap
 * enough for every batch. */
int gpu_service_fault_take(enum gpu_fault_target);

/* Test and benchmark only knobs, "gpu/inject-fault NAME VALUE" (0 to
 * stop):
 *
 *   ids-slow US: a gpu_ids scan polled for is not done until US
 *   microseconds after it was started, as on a slow or busy device, so
 *   that the tests see drop-mode batches held on the CPU backend (whose
 *   scans are otherwise done at once).  A thread that must wait for a
 *   scan still gets it at once.
 *
 *   re-slow US: the same for re_encode's chunking calls.
 *
 *   fec-slow US: the same for the coding calls of fec_encode and
 *   fec_decode (groups in flight).
 *
 *   fec-stall US: a datapath thread sleeps US microseconds after
 *   fec_encode or fec_decode gave back a batch in which groups closed,
 *   before the batch's next action, as a thread preempted there would,
 *   so that a test sees the other threads leave those groups' parity
 *   (or rebuilt packets) to it, to go out behind the batch.
 *
 *   fec-loss PPM: fec_decode discards PPM per million of the coded frames
 *   that arrive, pseudo-randomly (seeded per decoder), before decoding:
 *   a lossy link for the benchmarks, which OpenFlow cannot make (a select
 *   group sends every packet of a flow the same way).
 *
 *   index-query-slow MS: every gpu-index/query waits MS milliseconds in
 *   its thread before it runs, so that a test sees the main loop go on
 *   while a long query runs.
 *
 *   pkt-heap N: one packet in N that the services make comes from the
 *   heap although the mbuf pool has room, so that batches mix mbufs and
 *   heap packets (the path of an empty pool or a frame too large) under
 *   a test's traffic; 0 stops it.
 *
 *   ids-alert-hold 1: alert-mode gpu_ids holds its batches until their
 *   scan, as drop mode does (dropping nothing), so that the device can
 *   read their payloads in place rather than from copies: an experiment
 *   to be measured on a GPU before it becomes an option; 0 stops it.
 *
 *   re-copy 1: re_encode copies every gathered payload into its pinned
 *   gather, as it did before the chunker read them in place, so that a
 *   benchmark can measure both ways in one switch; 0 stops it.
 *
 *   ids-null-scan 1: gpu_ids gathers and holds as ever but never scans:
 *   every gathered packet matches nothing, its scan done when polled
 *   (with ids-slow, no sooner than that), so that a benchmark can tell
 *   what holding and gathering cost the datapath thread from what the
 *   device's calls do; 0 stops it.  Never on a switch that needs its
 *   verdicts. */
enum gpu_service_knob {
    GPU_KNOB_IDS_SLOW,
    GPU_KNOB_RE_SLOW,
    GPU_KNOB_FEC_SLOW,
    GPU_KNOB_FEC_LOSS,
    GPU_KNOB_INDEX_QUERY_SLOW,
    GPU_KNOB_PKT_HEAP,
    GPU_KNOB_IDS_ALERT_HOLD,
    GPU_KNOB_RE_COPY,
    GPU_KNOB_IDS_NULL_SCAN,
    GPU_KNOB_FEC_STALL,
    GPU_KNOB_N
};

int gpu_service_test_knob(enum gpu_service_knob);


/* True for the errors a device call fails with (a failed launch, device
 * memory full, an injected fault), which the CPU backend can recover
 * from. */
static inline bool
gpu_service_is_device_error(int status)
{
    return status == GPU_ERR_DEVICE || status == GPU_ERR_DEVICE_NOMEM;
}

/* For "gpu/inject-fault": if 'argv[1]' names a service, handles the
 * command ("SERVICE launch|nomem N") and returns true. */
struct unixctl_conn;
bool gpu_service_inject_fault_cmd(struct unixctl_conn *, int argc,
                                  const char *argv[]);

/* gpu_index's part of the above: its builds happen in the recorders'
 * threads, inside the library (gpu-index-service.c). */
void gpu_index_service_inject_fault(int error, unsigned int n);
/* Test only: what every open store's disk or writer does from now on.
 * GPU_INDEX_DISK_FULL: pcap writes fail, as on a full disk, once 'value'
 * more bytes are written (UINT64_MAX: room again).  GPU_INDEX_DISK_RATE:
 * the files are written at no more than 'value' bytes a second (0: as
 * fast as the disk goes).  GPU_INDEX_WRITER_STOP: the writer takes no
 * records off the staging ring while 'value' is nonzero, so that the
 * ring fills. */
enum gpu_index_store_fault {
    GPU_INDEX_DISK_FULL,
    GPU_INDEX_DISK_RATE,
    GPU_INDEX_WRITER_STOP,
};
void gpu_index_service_inject_store_fault(enum gpu_index_store_fault,
                                          uint64_t value);

/* How long a service may hold a batch to gather it with later ones,
 * beyond the device round trip (other_config:gpu-max-hold-us, shared with
 * the megaflow offload).  Set by the plugin. */
void gpu_services_set_max_hold_us(unsigned int);
unsigned int gpu_services_get_max_hold_us(void);

/* The options of a service's held batches, a gpu_ids ruleset's or a
 * re_encode peer's: "in-flight=N", the calls out at once in all threads
 * together, each thread one at least (1 to GPU_SERVICE_GATHERS_MAX - 1,
 * see gpu_service_gathers_set_max_in_flight()), and "hold-us=N", how
 * long a gather of held batches waits for more before its call starts
 * (0 to GPU_SERVICE_HOLD_US_MAX, gpu-max-hold-us's range, and never more
 * than gpu-max-hold-us).  If 'key' is one of them, parses 'value' into
 * '*in_flight' or '*hold_us' and returns true, with '*errorp' a
 * malloc()'d error if 'value' is bad (the outputs unchanged), else NULL.
 * Returns false for any other key. */
#define GPU_SERVICE_HOLD_US_MAX GPU_DPCLS_MAX_HOLD_US_MAX
bool gpu_service_parse_hold_option(const char *key, const char *value,
                                   unsigned int *in_flight,
                                   unsigned int *hold_us, char **errorp);

/* Held batches, and the gathers their payloads wait in.
 *
 * A service that holds datapath batches (see 'hold': gpu_ids in drop
 * mode, re_encode) while one device call runs over the payloads of many
 * keeps, per thread, a FIFO of them (struct gpu_service_holder), and, per
 * thing a call is for (a ruleset, a peer), a pair of gathers: one filling
 * while the other's call runs (struct gpu_service_gathers).  The service
 * says how to start, poll, wait for and complete a call; completing it
 * makes the held batches whose payloads it had ready to go on, and the
 * holder sends them on, oldest first, so that packets keep their order. */

/* A datapath batch a service holds. */
struct gpu_service_held {
    struct ovs_list node;           /* In its holder's FIFO. */
    struct gpu_service_gathers *gathers;    /* Where its payloads are. */
    bool ready;                     /* Its call is done: it may go on. */

    /* Taken from the datapath, and where it goes on: copies of what
     * 'execute' was told, since the flow's actions may change, and the
     * flow go, meanwhile. */
    struct dp_packet_batch packets;
    const void *dp;
    struct nlattr *actions;
    size_t actions_len;
    size_t actions_size;            /* Allocated for 'actions', kept when
                                     * the held batch is reused. */
    bool has_flow;
    struct flow flow;
};

/* Makes 'h' (from gpu_service_holder_new_held()) hold 'packets' (which
 * the caller empties), to go on along a copy of 'next'. */
void gpu_service_held_init(struct gpu_service_held *h,
                           const struct dp_packet_batch *packets,
                           const struct gpu_service_next *next);

struct gpu_service_gather_ops {
    enum gpu_fault_target target;   /* Whose injected faults (and "-slow"
                                     * delays) its calls meet. */
    /* True if gather 'g' has nothing to start a call over. */
    bool (*is_empty)(const void *g);
    /* Starts the device call over gather 'g'. */
    int (*start)(void *g);
    /* The status of the call over 'g', or GPU_ERR_BUSY if it is not done
     * yet ('poll'), or once it is ('wait'). */
    int (*poll)(void *g);
    int (*wait)(void *g);
    /* Completes 'g', whose call ended with 'status' (or could not start,
     * e.g. a device fault: then 'status' is why): makes its held batches
     * ready, and 'g' empty. */
    void (*complete)(void *g, int status);
};

/* A thread's gathers of one service, in a ring: one filling, and up to
 * 'max_in_flight' before it whose calls are out, started, polled and
 * completed in the order they filled.  With one call in flight a gather
 * fills while the call before it runs, so a held packet waits about half
 * a call and a call; with more, each gather can start sooner, as soon as
 * it is due, if the device runs the calls side by side (gpu_ids's graphs
 * launched by the device do: docs/PERFORMANCE.md, twenty-sixth
 * session). */
#define GPU_SERVICE_GATHERS_MAX 4

/* The calls out of one thing a call is for (a ruleset, a peer), in all
 * the threads' rings together.  What costs is how many calls the device
 * runs, not how many one thread has out: four PMD threads keeping three
 * gpu_ids scans each out cost each packet 50 ns against 33-35 for one
 * each (docs/PERFORMANCE.md, twenty-seventh and twenty-eighth sessions),
 * while one thread alone gains from three. */
struct gpu_service_calls_out {
    atomic_uint n;                  /* Out now. */
    atomic_uint most;               /* Out at once, at most... */
    atomic_uint most_in_ring;       /* ...and from one thread's ring. */
};

struct gpu_service_gathers {
    const struct gpu_service_gather_ops *ops;
    void *slots[GPU_SERVICE_GATHERS_MAX];
    size_t n_slots;
    size_t max_in_flight;           /* At most n_slots - 1. */
    size_t filling;                 /* Index of the one filling. */
    size_t n_in_flight;             /* The slots before it with calls
                                     * out. */
    /* When each slot's call started (gpu_service_now_us()). */
    long long int submit_us[GPU_SERVICE_GATHERS_MAX];
    /* Shared with other threads' rings, or NULL (set with
     * 'max_in_flight'), and where each slot's call out was counted. */
    struct gpu_service_calls_out *shared;
    struct gpu_service_calls_out *counted[GPU_SERVICE_GATHERS_MAX];
};

/* Makes a ring of the 'n_slots' gathers 'slots' (2 to
 * GPU_SERVICE_GATHERS_MAX), one call in flight at a time. */
void gpu_service_gathers_init(struct gpu_service_gathers *,
                              const struct gpu_service_gather_ops *,
                              void *const slots[], size_t n_slots);
/* Lets up to 'n' calls be in flight at once (1 to n_slots - 1), from the
 * next submission on.  With 'shared' nonnull, 'n' bounds the calls out in
 * all the rings that share it: a ring may always have one call out (a
 * thread must never wait for another's calls), a second or more only
 * while fewer than 'n' are out in all. */
void gpu_service_gathers_set_max_in_flight(struct gpu_service_gathers *,
                                           size_t n,
                                           struct gpu_service_calls_out *
                                           shared);
void *gpu_service_gathers_filling(const struct gpu_service_gathers *);
/* Completes the calls in flight that are done, oldest first, or, if
 * 'wait', all of them, waiting.  Returns true if none is left in
 * flight. */
bool gpu_service_gathers_finish(struct gpu_service_gathers *, bool wait);
/* Completes the calls that are done (as gpu_service_gathers_finish()
 * without waiting) and returns true if the filling gather's call may
 * start now: without waiting for one, and within the shared bound. */
bool gpu_service_gathers_room(struct gpu_service_gathers *);
/* Starts the call over the filling gather, unless it is empty, waiting
 * for the oldest call in flight first if 'max_in_flight' are; the next
 * gather of the ring fills next. */
void gpu_service_gathers_submit(struct gpu_service_gathers *);

struct gpu_service_holder_class {
    const char *name;               /* The service, for log lines. */
    /* The size of the service's held batch, a struct that begins with
     * its struct gpu_service_held: the holder allocates it
     * (gpu_service_holder_new_held()) and frees it. */
    size_t held_size;
    /* Optional: applies ready batch 'h''s verdicts to its packets (drops
     * some) before the holder sends the rest on along its saved
     * actions. */
    void (*prepare)(struct gpu_service_held *h);
};

/* A thread's held batches of one service, oldest first. */
struct gpu_service_holder {
    const struct gpu_service_holder_class *class;
    struct ovs_list held;           /* struct gpu_service_held's 'node'. */
    bool releasing;                 /* In gpu_service_holder_release(). */

    /* Held batches sent on, to be reused: a held batch is ~1 kB (its
     * flow), past what the allocator's per-thread cache keeps, and one
     * was allocated and freed for every datapath batch. */
    struct ovs_list spares;         /* struct gpu_service_held's 'node'. */
    size_t n_spares;
};

void gpu_service_holder_init(struct gpu_service_holder *,
                             const struct gpu_service_holder_class *);
/* A held batch of the class's 'held_size' bytes for the service to fill
 * and then gpu_service_held_init(): one sent on before, or a new one. */
struct gpu_service_held *gpu_service_holder_new_held(
    struct gpu_service_holder *);
/* Takes back 'h', which is not in the FIFO and whose packets are gone:
 * kept for gpu_service_holder_new_held(), or freed. */
void gpu_service_holder_recycle(struct gpu_service_holder *,
                                struct gpu_service_held *h);
/* Puts 'h' at the back of the FIFO, waiting for the call over the
 * filling gather of 'gathers', and counts it in gpu_service_n_held. */
void gpu_service_holder_push(struct gpu_service_holder *,
                             struct gpu_service_held *h,
                             struct gpu_service_gathers *gathers);
/* Sends on the held batches that are ready, oldest first, through
 * 'emitter'; with 'wait', all of them, starting and waiting for the
 * calls they wait for. */
void gpu_service_holder_release(struct gpu_service_holder *,
                                const struct gpu_service_emitter *,
                                bool wait);
/* For a thread that exits: drops what is still held (a datapath thread
 * sends everything on before, so there should be nothing), logging it. */
void gpu_service_holder_destroy(struct gpu_service_holder *);

/* Counts 'n' packets a service dropped after holding them, in the
 * executor's totals. */
void gpu_service_count_dropped(size_t n);

/* Packets a service makes (FEC parity, rebuilt packets), of 'size' bytes
 * (uninitialized) with metadata for 'in_port'.  Where DPDK is running they
 * come from a pool of mbufs (gpu_service_packets_init()), so that making
 * one costs no malloc() and a DPDK port sends it without copying it into
 * an mbuf; else, or when the pool is empty or 'size' does not fit an
 * mbuf, from the heap.  coverage/show counts both
 * (gpu_service_pkt_mbuf, gpu_service_pkt_heap). */
struct dp_packet *gpu_service_packet_new(size_t size, odp_port_t in_port);

/* Creates the mbuf pool for gpu_service_packet_new() if DPDK is running
 * and the pool does not exist yet; called from the main thread when a
 * service that makes packets is configured.  A failure is logged once and
 * leaves the heap. */
void gpu_service_packets_init(void);

/* Appends the pool's state to 's' for gpu/show (nothing without one). */
void gpu_service_packets_format(struct ds *s);

/* Executor totals, for gpu/show. */
struct gpu_service_totals {
    uint64_t n_batches;
    uint64_t n_packets;
    uint64_t n_dropped;
    uint64_t run_ns;            /* Time spent in the services, in the
                                 * n_timed batches timed (one in eight,
                                 * at random: a time costs two clock
                                 * reads). */
    uint64_t n_timed;
};
void gpu_service_get_totals(struct gpu_service_totals *);

#endif /* gpu-actions.h */
