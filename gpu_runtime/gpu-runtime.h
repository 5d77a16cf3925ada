/*
 * ovs-gpu runtime: device discovery, CPU fallback, pinned host buffers and
 * per-thread streams.  Every GPU user in ovs-gpu (the classifier and the
 * services) builds on this header; it knows nothing of Open vSwitch.
 *
 * Without a CUDA build, or without a usable device, every call still works:
 * discovery reports the CPU backend and why, pinned buffers are plain
 * aligned heap memory, and streams are NULL handles that callers pass to
 * their CPU backends unchanged.
 */
#ifndef GPU_RUNTIME_H
#define GPU_RUNTIME_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes shared by the ovs-gpu libraries.  Zero is success; the rest
 * are negative so they can share a return value with counts. */
enum gpu_status {
    GPU_OK = 0,
    GPU_ERR_INVALID = -1,       /* Bad argument from the caller. */
    GPU_ERR_NOMEM = -2,         /* Host memory exhausted. */
    GPU_ERR_DEVICE_NOMEM = -3,  /* Device memory exhausted: fall back. */
    GPU_ERR_DEVICE = -4,        /* A CUDA call failed: fall back. */
    GPU_ERR_NO_DEVICE = -5,     /* No CUDA build or no such device. */
    GPU_ERR_EXISTS = -6,        /* Already present. */
    GPU_ERR_NOT_FOUND = -7,     /* Not present. */
    GPU_ERR_BUSY = -8,          /* Asynchronous work still in flight. */
};

const char *gpu_status_string(int status);

/* Maps the status of a CUDA runtime call ('cuda_error', a cudaError_t) to
 * enum gpu_status: GPU_OK, GPU_ERR_DEVICE_NOMEM for an allocation that
 * failed, GPU_ERR_DEVICE (logged to stderr with 'what') for anything
 * else.  It clears CUDA's sticky last error, so later calls report their
 * own.  Every CUDA backend checks its calls through this. */
int gpu_cuda_status(int cuda_error, const char *what);

/* What one CUDA device is. */
struct gpu_device_info {
    int index;                  /* CUDA device ordinal. */
    char name[256];             /* e.g. "NVIDIA H100 80GB HBM3". */
    int cc_major, cc_minor;     /* Compute capability. */
    uint64_t total_mem;         /* Bytes of device memory. */
    int multiprocessors;
};

/* True if this library was built with the CUDA backend. */
bool gpu_runtime_has_cuda(void);

/* Number of usable CUDA devices, 0 when there are none or without a CUDA
 * build.  If 'why' is nonnull and the answer is 0, '*why' is set to a
 * static string explaining it (for "gpu/show"). */
int gpu_device_count(const char **why);

/* Fills 'info' for device 'index'.  Returns GPU_OK or GPU_ERR_NO_DEVICE. */
int gpu_device_query(int index, struct gpu_device_info *info);

/* Makes 'index' the current device of the calling thread. */
int gpu_device_select(int index);

/* Creates device 'index''s context in the background, so that the first
 * thread to use the device (a PMD thread, say) does not stall for the
 * hundreds of milliseconds that takes.  Does nothing without a device. */
void gpu_device_warm_up(int index);

/* False while a warm-up started by gpu_device_warm_up() runs.  A thread
 * that must not stall (a PMD thread, a revalidator holding a flow table's
 * mutex) leaves the device alone until then: on an H100 the context with
 * every kernel loaded takes over a second. */
bool gpu_device_is_warm(void);

/* The parsed value of a "gpu-device" setting: a CUDA device index or the
 * CPU backend. */
struct gpu_device_choice {
    bool use_cpu;
    int index;                  /* Meaningful only if !use_cpu. */
};

/* Parses 'value' ("cpu", or a decimal device index 0..1023).  NULL or ""
 * mean the default, device 0.  Returns GPU_OK, or GPU_ERR_INVALID with a
 * message in 'err' (at least 'err_size' bytes) on a malformed value.  It
 * does not check that the device exists: gpu_device_check() does. */
int gpu_device_parse(const char *value, struct gpu_device_choice *choice,
                     char *err, size_t err_size);

/* Returns GPU_OK if 'choice' can be used on this machine (the CPU always
 * can), otherwise GPU_ERR_NO_DEVICE with the reason in 'err'. */
int gpu_device_check(const struct gpu_device_choice *choice,
                     char *err, size_t err_size);

/* Parses a boolean setting the way OVS's smap_get_bool() does ("true" or
 * "false"), refusing anything else.  NULL or "" give 'dflt'. */
int gpu_bool_parse(const char *value, bool dflt, bool *out,
                   char *err, size_t err_size);

/* Parses an unsigned decimal setting between 0 and 'max'.  NULL or ""
 * give 'dflt'. */
int gpu_uint_parse(const char *value, unsigned int dflt, unsigned int max,
                   unsigned int *out, char *err, size_t err_size);

/* Pinned (page-locked) host memory when a device exists, so that copies
 * are asynchronous and run at full PCIe rate; aligned heap memory
 * otherwise.  Returns NULL on failure. */
void *gpu_host_alloc(size_t size);
void gpu_host_free(void *p);

/* Registers the host memory [addr, addr + len) with device 'device' so
 * that kernels may read it in place, at its host addresses, instead of
 * having it copied (DPDK's packet memory: a service then gives the device
 * the packets' payloads where they are).  Returns GPU_OK (also if the
 * range was registered already), GPU_ERR_NO_DEVICE (no CUDA build or
 * device, or one that cannot use host addresses as they are),
 * GPU_ERR_DEVICE (cudaHostRegister() refused it), GPU_ERR_NOMEM (64
 * registrations over the process's life, unregistered ones included) or
 * GPU_ERR_INVALID.  Registration pins the pages: on the H100 machine
 * ~150 ms for 2.5 GB of 4 kB pages alone (bench/cuda-zero-copy.cu),
 * 0.9-1.4 s for DPDK's 2.5 GB in the switch, so not in a datapath
 * thread.  Ranges stay registered until gpu_host_unregister(), also once
 * gpu_host_retire() retired them (registering one again then fails). */
int gpu_host_register(void *addr, size_t len, int device);

/* Forgets the range that gpu_host_register() registered at 'addr', and
 * unregisters it from the device, also if gpu_host_retire() retired it.
 * No thread may be using gpu_host_registered()'s answer for it any more.
 * Returns GPU_OK or GPU_ERR_NOT_FOUND. */
int gpu_host_unregister(void *addr);

/* Makes every registered range that overlaps [p, p + len) answer "no"
 * from now on, for memory about to be freed (DPDK hands freed hugepages
 * back to the system, and may map other pages at the same addresses
 * later, which the device's mapping would not follow).  The ranges stay
 * registered with the device, their pages pinned until the process
 * exits: a batch already submitted may still read another packet's
 * payload in the same range (gpu_host_unregister() unpins it).  Returns
 * how many ranges it retired. */
size_t gpu_host_retire(const void *p, size_t len);

/* Whether all of [p, p + len) lies in one registered range: lock-free,
 * for datapath threads. */
bool gpu_host_registered(const void *p, size_t len);

/* Whether a kernel may read [p, p + len) in place in aligned 16-byte
 * loads: the 16-byte granules it touches are registered. */
static inline bool
gpu_host_readable_in_place(const void *p, size_t len)
{
    uintptr_t start = (uintptr_t) p & ~(uintptr_t) 15;
    uintptr_t end = ((uintptr_t) p + len + 15) & ~(uintptr_t) 15;

    return p && gpu_host_registered((const void *) start, end - start);
}

/* A payload a kernel gathers from host memory the device reads in
 * place (gpu_gather_body() in gpu-gather.cuh): 'len' bytes at host
 * address 'src' to offset 'dst' of a batch's device payloads. */
struct gpu_gather_desc {
    unsigned long long src;
    uint32_t dst;
    uint32_t len;
};

/* Longest run of payloads staged next to each other in a batch's host
 * block that one descriptor covers (a warp pulls it 512 bytes a step). */
#define GPU_GATHER_RUN_BYTES 2048

/* Writes to 'out' (room for 'n' descriptors) the descriptors of a
 * batch's 'n' payloads, packet i being offsets[i + 1] - offsets[i]
 * bytes at offsets[i] - offsets[0] of the device's copy, and their count
 * to '*n_out': those read in place where 'srcs[i]' is not NULL (an empty
 * payload needs none), and, if 'staged_dev' (the batch's host block of
 * staged payloads as the device addresses it) is not NULL, the others
 * from there, neighbours merged up to GPU_GATHER_RUN_BYTES ('srcs' NULL:
 * all staged, in pieces, with no look at each packet).  Returns
 * GPU_ERR_INVALID if a payload of 'srcs' is not readable in place
 * (gpu_host_readable_in_place()): a kernel reading it would fault. */
int gpu_gather_descs(const uint32_t *offsets, size_t n,
                     const uint8_t *const *srcs, const char *staged_dev,
                     struct gpu_gather_desc *out, uint32_t *n_out);

/* The registered ranges and their bytes, for show commands. */
void gpu_host_registered_totals(size_t *n_ranges, size_t *n_bytes);

/* A stream is the unit of ordering for one thread's GPU work.  On the CPU
 * backend it is an opaque non-null token so code paths stay the same. */
struct gpu_stream;

int gpu_stream_create(struct gpu_stream **streamp);
void gpu_stream_destroy(struct gpu_stream *);
int gpu_stream_sync(struct gpu_stream *);
/* Returns GPU_OK if all work on 'stream' is done, GPU_ERR_BUSY if not. */
int gpu_stream_query(struct gpu_stream *);
/* The underlying cudaStream_t (as void *), NULL on the CPU backend. */
void *gpu_stream_native(const struct gpu_stream *);

/* Returns the calling thread's own stream, created on first use and
 * destroyed at thread exit.  NULL if it could not be created. */
struct gpu_stream *gpu_stream_per_thread(void);

/* A chain of copies and kernels queued as one CUDA graph, for a
 * submission that a PMD thread makes often: every CUDA runtime call costs
 * the calling thread microseconds (docs/PERFORMANCE.md, "What a CUDA call
 * costs the PMD thread"), and a graph launch is one call however many
 * kernels it holds.  A graph fixes its kernels' arguments and grids when
 * it is built, so its user builds it once with the largest grids it
 * needs and has the kernels read what changes per launch from device
 * memory (copied in before each launch).
 *
 * The graph's last kernel, gpu_graph_done_kernel() (gpu-graph.cuh),
 * writes the launch's sequence number into pinned, mapped host memory,
 * so the thread sees completion by reading memory instead of querying an
 * event.
 *
 * Use: gpu_graph_capture_begin() gives a stream to queue the chain on
 * (its own, capturing), ending with gpu_graph_done_kernel(seq, flag_dev)
 * where 'seq' is device memory that will hold gpu_graph_next_seq()'s
 * value at launch time; gpu_graph_capture_end() builds it (or marks the
 * graph broken: the user then queues kernel by kernel).  Per submission:
 * write the arguments with gpu_graph_next_seq(), copy them in, then
 * gpu_graph_launch(); gpu_graph_poll() or gpu_graph_wait() until done.
 *
 * Device launch: a graph built with gpu_graph_capture_end_device() and
 * given a scheduler with gpu_graph_start_scheduler() (gpu-graph.cuh) is
 * launched by the device itself: gpu_graph_launch() writes the sequence
 * number to a doorbell in mapped host memory, which a one-thread
 * scheduler kernel polls; seeing it move, the scheduler launches the
 * graph from the device and relaunches itself to run after it.  The
 * launch then costs the thread a store instead of a runtime call (~2-5
 * us on the H200 machine, bench/cuda-device-launch.cu), which gpu_ids'
 * scans in the switch did not show (docs/PERFORMANCE.md, seventeenth
 * session): its users make it an option.  Its arguments must reach the
 * device without a copy: the graph's first kernel reads them from mapped
 * host memory.  A kernel that never ends would make every
 * runtime call that synchronizes the device (cudaFree(), among others)
 * wait for ever, so the scheduler parks (ends) once it has polled
 * GPU_GRAPH_IDLE_NS without a ring or run GPU_GRAPH_LIFE_NS since it was
 * launched from the host, and the next gpu_graph_launch() that finds it
 * parked launches it again from the host: such a call waits that long at
 * most.
 *
 * A queue: graphs that must run one after the other in the order they
 * were launched (an encoder's batches, each with its own graph and
 * arguments, whose state on the device is one ordered stream) cannot
 * each have a scheduler of their own, which would run two of them at
 * once.  A struct gpu_graph begun with gpu_graph_queue_begin() has no
 * graph of its own: its one scheduler takes the graphs queued by
 * gpu_graph_queue_launch() in order, each once the one before is done
 * (a scheduler's next run is tail-launched, after the work it launched),
 * and writes how many it has finished to its doorbell
 * (GPU_GRAPH_BELL_DONE) for gpu_graph_queue_drain(). */
struct gpu_graph {
    void *exec;                 /* cudaGraphExec_t; NULL until built. */
    uint32_t *flag;             /* Pinned: the sequence number of the
                                 * last launch the device finished... */
    uint32_t *flag_dev;         /* ...as the device addresses it. */
    void *stream;               /* cudaStream_t of the launch in flight. */
    uint32_t seq;               /* Of the last launch. */
    uint32_t n_unseen;          /* Polls that did not see it done. */
    bool broken;                /* Could not be built. */
    bool in_flight;

    /* Device launch (none: 'sched_exec' NULL). */
    bool device_launchable;     /* Built for it. */
    void *sched_exec;           /* cudaGraphExec_t of the scheduler. */
    void *sched_stream;         /* Where it runs, relaunching itself. */
    uint32_t *bell;             /* Pinned, mapped: GPU_GRAPH_BELL_*... */
    uint32_t *bell_dev;         /* ...as the device addresses them. */
    uint64_t *sched_state_dev;  /* Device memory: the scheduler's own. */
    uint64_t n_rings;           /* Launches by the device... */
    uint64_t n_host_launches;   /* ...and by this thread (with a
                                 * scheduler: the parked one's
                                 * relaunches and launches after stream
                                 * work). */
    bool rung;                  /* The launch in flight was rung (its own
                                 * scheduler or a queue's): the stream
                                 * stays busy while the scheduler polls,
                                 * so a wait spins on the flag. */

    /* A queue (gpu_graph_queue_begin(); 'exec' NULL): the graphs its
     * scheduler launches, GPU_GRAPH_QUEUE_LEN exec handles in pinned,
     * mapped memory, the n-th queued at [n % GPU_GRAPH_QUEUE_LEN]. */
    uint64_t *entries;
    uint64_t *entries_dev;
};

/* The doorbell block's words, a cache line apart. */
#define GPU_GRAPH_BELL_SEQ 0        /* Rung: the launch's sequence number. */
#define GPU_GRAPH_BELL_PARKED 16    /* Nonzero: no scheduler polls. */
#define GPU_GRAPH_BELL_STOP 32      /* Nonzero: schedulers end at once. */
#define GPU_GRAPH_BELL_DONE 48      /* A queue's: launches finished. */
#define GPU_GRAPH_BELL_WORDS 64

/* Launches a queue holds at most before gpu_graph_queue_launch() waits
 * for the oldest to be taken. */
#define GPU_GRAPH_QUEUE_LEN 64

/* A scheduler parks after this long without a ring... */
#define GPU_GRAPH_IDLE_NS 500000
/* ...or this long after its launch from the host. */
#define GPU_GRAPH_LIFE_NS 2000000

int gpu_graph_capture_begin(struct gpu_graph *, void **capture_stream);
int gpu_graph_capture_end(struct gpu_graph *, void *capture_stream,
                          int error);
int gpu_graph_capture_end_device(struct gpu_graph *, void *capture_stream,
                                 int error);
uint32_t gpu_graph_next_seq(struct gpu_graph *);
/* Launches the graph: by its scheduler if it has one (GPU_OK even if the
 * scheduler could not be woken: the launch's poll then fails), else on
 * 'stream'. */
int gpu_graph_launch(struct gpu_graph *, void *stream);
/* Launches it on 'stream' from this thread, after the work queued there
 * before (a scheduler's launch would not wait for it). */
int gpu_graph_launch_on_stream(struct gpu_graph *, void *stream);
/* gpu_graph_start_scheduler() (gpu-graph.cuh): gpu_graph_scheduler_begin()
 * makes the doorbell and the scheduler's stream and returns a stream of
 * its own, capturing, for the scheduler kernel; gpu_graph_scheduler_end()
 * builds the scheduler and launches it on the scheduler's stream.  'g'
 * must have been built by gpu_graph_capture_end_device().  Begin fails
 * (GPU_ERR_INVALID) if 'g' has a scheduler or GPU_GRAPH_MAX_SCHEDULERS
 * exist (each keeps a thread of the device polling); on any failure 'g'
 * keeps host launches. */
int gpu_graph_scheduler_begin(struct gpu_graph *, void **capture_stream);
int gpu_graph_scheduler_end(struct gpu_graph *, void *capture_stream,
                            int error);
#define GPU_GRAPH_MAX_SCHEDULERS 32

/* gpu_graph_start_queue() (gpu-graph.cuh): gpu_graph_queue_begin() makes
 * 'q' a queue, with its doorbell, entries and scheduler's stream, and
 * returns a capturing stream for its scheduler kernel as
 * gpu_graph_scheduler_begin() does; gpu_graph_scheduler_end() finishes
 * it.  On failure 'q' is left as gpu_graph_destroy() leaves a graph. */
int gpu_graph_queue_begin(struct gpu_graph *q, void **capture_stream);
/* Queues 'g' (built by gpu_graph_capture_end_device(), with no scheduler
 * of its own, none of its launches in flight) on queue 'q': its
 * scheduler launches it after every graph queued before, and
 * gpu_graph_poll() and _wait() on 'g' then tell when it is done.  The
 * caller serializes the launches on one queue.  Waits while
 * GPU_GRAPH_QUEUE_LEN launches are not yet taken.  Returns GPU_OK (even
 * if the scheduler could not be woken: 'g''s poll then fails) or
 * GPU_ERR_DEVICE. */
int gpu_graph_queue_launch(struct gpu_graph *q, struct gpu_graph *g);
/* Waits until every graph queued on 'q' is done, before work that must
 * follow them goes on a stream of the host's.  GPU_OK, or GPU_ERR_DEVICE
 * if the scheduler stopped with some not done. */
int gpu_graph_queue_drain(struct gpu_graph *q);

int gpu_graph_poll(struct gpu_graph *);
int gpu_graph_wait(struct gpu_graph *);
void gpu_graph_destroy(struct gpu_graph *);

#ifdef __cplusplus
}
#endif

#endif /* gpu-runtime.h */
