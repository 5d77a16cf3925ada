/*
 * ovs-gpu runtime: device discovery with CPU fallback, pinned buffers and
 * per-thread streams.
 *
 * The CUDA runtime API is plain C, so this file is compiled by the C
 * compiler in both builds; HAVE_CUDA selects whether it talks to a device.
 */
#include <config.h>

#include "gpu_runtime/gpu-runtime.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

const char *
gpu_status_string(int status)
{
    switch (status) {
    case GPU_OK: return "success";
    case GPU_ERR_INVALID: return "invalid argument";
    case GPU_ERR_NOMEM: return "out of host memory";
    case GPU_ERR_DEVICE_NOMEM: return "out of device memory";
    case GPU_ERR_DEVICE: return "device error";
    case GPU_ERR_NO_DEVICE: return "no such device";
    case GPU_ERR_EXISTS: return "already exists";
    case GPU_ERR_NOT_FOUND: return "not found";
    case GPU_ERR_BUSY: return "busy";
    default: return "unknown error";
    }
}

int
gpu_cuda_status(int cuda_error, const char *what)
{
#ifdef HAVE_CUDA
    cudaError_t e = (cudaError_t) cuda_error;

    if (e == cudaSuccess) {
        return GPU_OK;
    }
    cudaGetLastError();
    if (e == cudaErrorMemoryAllocation) {
        return GPU_ERR_DEVICE_NOMEM;
    }
    fprintf(stderr, "ovs-gpu: %s: %s\n", what, cudaGetErrorString(e));
#else
    (void) cuda_error;
    (void) what;
#endif
    return GPU_ERR_DEVICE;
}

bool
gpu_runtime_has_cuda(void)
{
#ifdef HAVE_CUDA
    return true;
#else
    return false;
#endif
}

#ifdef HAVE_CUDA
/* Device discovery is done once per process: cudaGetDeviceCount() costs a
 * driver initialisation, and the answer does not change while we run. */
static pthread_once_t discover_once = PTHREAD_ONCE_INIT;
static int n_devices;
static char discover_why[256];

static void
discover_devices(void)
{
    cudaError_t err = cudaGetDeviceCount(&n_devices);

    if (err != cudaSuccess) {
        snprintf(discover_why, sizeof discover_why,
                 "no usable CUDA device (%s: %s)",
                 cudaGetErrorName(err), cudaGetErrorString(err));
        n_devices = 0;
        /* Clear the sticky error so later calls report their own. */
        cudaGetLastError();
    } else if (!n_devices) {
        snprintf(discover_why, sizeof discover_why,
                 "no CUDA device found");
    }
}
#endif

int
gpu_device_count(const char **why)
{
#ifdef HAVE_CUDA
    pthread_once(&discover_once, discover_devices);
    if (!n_devices && why) {
        *why = discover_why;
    }
    return n_devices;
#else
    if (why) {
        *why = "built without CUDA";
    }
    return 0;
#endif
}

int
gpu_device_query(int index, struct gpu_device_info *info)
{
    memset(info, 0, sizeof *info);
    if (index < 0 || index >= gpu_device_count(NULL)) {
        return GPU_ERR_NO_DEVICE;
    }
#ifdef HAVE_CUDA
    struct cudaDeviceProp prop;
    cudaError_t err = cudaGetDeviceProperties(&prop, index);
    if (err != cudaSuccess) {
        return GPU_ERR_DEVICE;
    }
    info->index = index;
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->total_mem = prop.totalGlobalMem;
    info->multiprocessors = prop.multiProcessorCount;
    return GPU_OK;
#else
    return GPU_ERR_NO_DEVICE;
#endif
}

int
gpu_device_select(int index)
{
    if (index < 0 || index >= gpu_device_count(NULL)) {
        return GPU_ERR_NO_DEVICE;
    }
#ifdef HAVE_CUDA
    return cudaSetDevice(index) == cudaSuccess ? GPU_OK : GPU_ERR_DEVICE;
#else
    return GPU_ERR_NO_DEVICE;
#endif
}

/* Warm-ups running now (gpu_device_is_warm()). */
static atomic_int warm_ups_running;

bool
gpu_device_is_warm(void)
{
    return atomic_load_explicit(&warm_ups_running,
                                memory_order_acquire) == 0;
}

#ifdef HAVE_CUDA
static void *
warm_up_main(void *index_)
{
    int index = (int) (intptr_t) index_;

    /* cudaFree(NULL) is the customary way to create a context without
     * doing anything else. */
    if (cudaSetDevice(index) != cudaSuccess || cudaFree(NULL) != cudaSuccess) {
        cudaGetLastError();
    }
    atomic_fetch_sub_explicit(&warm_ups_running, 1, memory_order_release);
    return NULL;
}
#endif

void
gpu_device_warm_up(int index)
{
#ifdef HAVE_CUDA
    pthread_t thread;

    /* CUDA loads each kernel at its first launch by default, which would
     * put that cost on the first lookup of some PMD thread.  Load them all
     * with the context instead, unless the user chose otherwise.  This
     * must be set before the context exists: the caller is the first. */
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);

    if (index >= 0 && index < gpu_device_count(NULL)) {
        atomic_fetch_add(&warm_ups_running, 1);
        if (!pthread_create(&thread, NULL, warm_up_main,
                            (void *) (intptr_t) index)) {
            pthread_detach(thread);
        } else {
            atomic_fetch_sub(&warm_ups_running, 1);
        }
    }
#else
    (void) index;
#endif
}

int
gpu_device_parse(const char *value, struct gpu_device_choice *choice,
                 char *err, size_t err_size)
{
    if (!value || !value[0]) {
        choice->use_cpu = false;
        choice->index = 0;
        return GPU_OK;
    }
    if (!strcmp(value, "cpu")) {
        choice->use_cpu = true;
        choice->index = -1;
        return GPU_OK;
    }

    /* A device index: decimal digits only, no sign, no spaces. */
    char *end;
    errno = 0;
    long index = strtol(value, &end, 10);
    if (value[0] < '0' || value[0] > '9' || *end || errno
        || index < 0 || index > 1023) {
        snprintf(err, err_size, "\"%s\" is neither \"cpu\" nor a CUDA "
                 "device index (0 to 1023)", value);
        return GPU_ERR_INVALID;
    }
    choice->use_cpu = false;
    choice->index = index;
    return GPU_OK;
}

int
gpu_device_check(const struct gpu_device_choice *choice,
                 char *err, size_t err_size)
{
    if (choice->use_cpu) {
        return GPU_OK;
    }

    const char *why = NULL;
    int n = gpu_device_count(&why);
    if (choice->index >= n) {
        if (n) {
            snprintf(err, err_size, "CUDA device %d does not exist (this "
                     "machine has %d, numbered from 0)", choice->index, n);
        } else {
            snprintf(err, err_size, "CUDA device %d does not exist (%s)",
                     choice->index, why);
        }
        return GPU_ERR_NO_DEVICE;
    }
    return GPU_OK;
}

int
gpu_bool_parse(const char *value, bool dflt, bool *out,
               char *err, size_t err_size)
{
    if (!value || !value[0]) {
        *out = dflt;
    } else if (!strcmp(value, "true")) {
        *out = true;
    } else if (!strcmp(value, "false")) {
        *out = false;
    } else {
        snprintf(err, err_size, "\"%s\" is not \"true\" or \"false\"",
                 value);
        return GPU_ERR_INVALID;
    }
    return GPU_OK;
}

int
gpu_uint_parse(const char *value, unsigned int dflt, unsigned int max,
               unsigned int *out, char *err, size_t err_size)
{
    if (!value || !value[0]) {
        *out = dflt;
        return GPU_OK;
    }

    char *end;
    errno = 0;
    unsigned long n = strtoul(value, &end, 10);
    if (value[0] < '0' || value[0] > '9' || *end || errno || n > max) {
        snprintf(err, err_size, "\"%s\" is not a number from 0 to %u",
                 value, max);
        return GPU_ERR_INVALID;
    }
    *out = n;
    return GPU_OK;
}

/* Pinned host memory.  cudaHostAlloc'd and malloc'd blocks must be freed
 * by their own allocator, so a small header in front of each block records
 * which one it came from.  The header is 64 bytes to keep the user's block
 * cache-line (and 16-byte vector load) aligned. */
#define HOST_HDR 64
enum { HOST_HEAP = 0x48454150, HOST_PINNED = 0x50494e4e };

void *
gpu_host_alloc(size_t size)
{
    if (size > SIZE_MAX - HOST_HDR) {
        return NULL;
    }
    uint8_t *block = NULL;
    uint32_t kind = HOST_HEAP;
#ifdef HAVE_CUDA
    if (gpu_device_count(NULL) > 0
        && cudaHostAlloc((void **) &block, size + HOST_HDR,
                         cudaHostAllocPortable) == cudaSuccess) {
        kind = HOST_PINNED;
    } else {
        cudaGetLastError();
        block = NULL;
    }
#endif
    if (!block && posix_memalign((void **) &block, HOST_HDR,
                                 size + HOST_HDR)) {
        return NULL;
    }
    memcpy(block, &kind, sizeof kind);
    return block + HOST_HDR;
}

void
gpu_host_free(void *p)
{
    if (!p) {
        return;
    }
    uint8_t *block = (uint8_t *) p - HOST_HDR;
    uint32_t kind;
    memcpy(&kind, block, sizeof kind);
#ifdef HAVE_CUDA
    if (kind == HOST_PINNED) {
        cudaFreeHost(block);
        return;
    }
#endif
    free(block);
}

/* Host memory registered for in-place reads (gpu_host_register()).
 * Entries are only appended, under the mutex, and published by the count,
 * so readers need no lock; an unregistered entry is emptied in place. */
#define MAX_HOST_RANGES 64
struct host_range {
    _Atomic uintptr_t start, end;   /* Empty once unregistered or retired. */
    bool pinned;                    /* Registered with the device (mutex). */
};
static struct host_range host_ranges[MAX_HOST_RANGES];
static atomic_size_t n_host_ranges;
static pthread_mutex_t host_ranges_mutex = PTHREAD_MUTEX_INITIALIZER;

bool
gpu_host_registered(const void *p, size_t len)
{
    size_t n = atomic_load_explicit(&n_host_ranges, memory_order_acquire);
    uintptr_t a = (uintptr_t) p;

    if (!p || len > UINTPTR_MAX - a) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        uintptr_t start = atomic_load_explicit(&host_ranges[i].start,
                                               memory_order_relaxed);
        uintptr_t end = atomic_load_explicit(&host_ranges[i].end,
                                             memory_order_relaxed);

        if (a >= start && a + len <= end && start < end) {
            return true;
        }
    }
    return false;
}

void
gpu_host_registered_totals(size_t *n_ranges, size_t *n_bytes)
{
    size_t n = atomic_load_explicit(&n_host_ranges, memory_order_acquire);

    *n_ranges = 0;
    *n_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        uintptr_t start = atomic_load_explicit(&host_ranges[i].start,
                                               memory_order_relaxed);
        uintptr_t end = atomic_load_explicit(&host_ranges[i].end,
                                             memory_order_relaxed);

        if (start < end) {
            ++*n_ranges;
            *n_bytes += end - start;
        }
    }
}

int
gpu_gather_descs(const uint32_t *offsets, size_t n,
                 const uint8_t *const *srcs, const char *staged_dev,
                 struct gpu_gather_desc *out, uint32_t *n_out)
{
    struct gpu_gather_desc *run = NULL;     /* The staged run to extend. */
    uint32_t base = n ? offsets[0] : 0;

    *n_out = 0;
    if (!n) {
        return GPU_OK;
    }
    if (!srcs) {
        if (staged_dev) {
            /* All staged, one after the other: pieces of the whole,
             * without a look at each packet (~3 ns a packet of the
             * thread's time for 4,096 packets in ids-bench).  No more
             * pieces than packets: 'out' has room for that many. */
            uint32_t total = offsets[n] - base;
            uint32_t piece = (total + n - 1) / n;

            piece = piece > GPU_GATHER_RUN_BYTES ? piece
                    : GPU_GATHER_RUN_BYTES;
            for (uint32_t at = 0; at < total; at += piece) {
                struct gpu_gather_desc *d = &out[(*n_out)++];

                d->src = (uintptr_t) (staged_dev + at);
                d->dst = at;
                d->len = total - at < piece ? total - at : piece;
            }
        }
        return GPU_OK;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t dst = offsets[i] - base;
        uint32_t len = offsets[i + 1] - offsets[i];
        const uint8_t *src = srcs[i];
        struct gpu_gather_desc *d;

        if (!len || (!src && !staged_dev)) {
            continue;
        }
        if (src) {
            if (!gpu_host_readable_in_place(src, len)) {
                return GPU_ERR_INVALID;
            }
            run = NULL;
        } else if (run && run->dst + run->len == dst
                   && run->len + len <= GPU_GATHER_RUN_BYTES) {
            run->len += len;
            continue;
        }
        d = &out[(*n_out)++];
        d->src = (uintptr_t) (src ? (const char *) src : staged_dev + dst);
        d->dst = dst;
        d->len = len;
        run = src ? NULL : d;
    }
    return GPU_OK;
}

int
gpu_host_register(void *addr, size_t len, int device)
{
    if (!addr || !len || len > UINTPTR_MAX - (uintptr_t) addr) {
        return GPU_ERR_INVALID;
    }
#ifdef HAVE_CUDA
    int usable = 0, status = GPU_OK;
    size_t n;

    pthread_mutex_lock(&host_ranges_mutex);
    n = atomic_load_explicit(&n_host_ranges, memory_order_relaxed);
    if (gpu_host_registered(addr, len)) {
        /* Done already. */
    } else if (n >= MAX_HOST_RANGES) {
        status = GPU_ERR_NOMEM;
    } else if (cudaSetDevice(device) != cudaSuccess
               || cudaDeviceGetAttribute(
                      &usable, cudaDevAttrCanUseHostPointerForRegisteredMem,
                      device) != cudaSuccess
               || !usable) {
        /* The kernels read payloads at their host addresses. */
        cudaGetLastError();
        status = GPU_ERR_NO_DEVICE;
    } else if (cudaHostRegister(addr, len, cudaHostRegisterMapped
                                           | cudaHostRegisterPortable)
               != cudaSuccess) {
        cudaGetLastError();
        status = GPU_ERR_DEVICE;
    } else {
        atomic_store_explicit(&host_ranges[n].start, (uintptr_t) addr,
                              memory_order_relaxed);
        atomic_store_explicit(&host_ranges[n].end, (uintptr_t) addr + len,
                              memory_order_relaxed);
        host_ranges[n].pinned = true;
        atomic_store_explicit(&n_host_ranges, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&host_ranges_mutex);
    return status;
#else
    (void) device;
    return GPU_ERR_NO_DEVICE;
#endif
}

int
gpu_host_unregister(void *addr)
{
    int status = GPU_ERR_NOT_FOUND;
    size_t n;

    pthread_mutex_lock(&host_ranges_mutex);
    n = atomic_load_explicit(&n_host_ranges, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        struct host_range *r = &host_ranges[i];

        if (r->pinned && atomic_load_explicit(&r->start, memory_order_relaxed)
                         == (uintptr_t) addr) {
            atomic_store_explicit(&r->end, (uintptr_t) addr,
                                  memory_order_relaxed);
            r->pinned = false;
#ifdef HAVE_CUDA
            cudaHostUnregister(addr);
            cudaGetLastError();
#endif
            status = GPU_OK;
            break;
        }
    }
    pthread_mutex_unlock(&host_ranges_mutex);
    return status;
}

size_t
gpu_host_retire(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t) p;
    uintptr_t b = len > UINTPTR_MAX - a ? UINTPTR_MAX : a + len;
    size_t n, n_retired = 0;

    pthread_mutex_lock(&host_ranges_mutex);
    n = atomic_load_explicit(&n_host_ranges, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        struct host_range *r = &host_ranges[i];
        uintptr_t start = atomic_load_explicit(&r->start,
                                               memory_order_relaxed);
        uintptr_t end = atomic_load_explicit(&r->end, memory_order_relaxed);

        if (start < end && a < end && b > start) {
            /* Empty, as gpu_host_unregister() leaves it, but still
             * registered with the device: see the header. */
            atomic_store_explicit(&r->end, start, memory_order_relaxed);
            n_retired++;
        }
    }
    pthread_mutex_unlock(&host_ranges_mutex);
    return n_retired;
}

struct gpu_stream {
    void *native;               /* cudaStream_t, or NULL on the CPU. */
};

int
gpu_stream_create(struct gpu_stream **streamp)
{
    struct gpu_stream *stream = calloc(1, sizeof *stream);
    if (!stream) {
        return GPU_ERR_NOMEM;
    }
#ifdef HAVE_CUDA
    if (gpu_device_count(NULL) > 0) {
        cudaStream_t native;
        if (cudaStreamCreateWithFlags(&native, cudaStreamNonBlocking)
            != cudaSuccess) {
            cudaGetLastError();
            free(stream);
            return GPU_ERR_DEVICE;
        }
        stream->native = native;
    }
#endif
    *streamp = stream;
    return GPU_OK;
}

void
gpu_stream_destroy(struct gpu_stream *stream)
{
    if (!stream) {
        return;
    }
#ifdef HAVE_CUDA
    if (stream->native) {
        cudaStreamDestroy((cudaStream_t) stream->native);
    }
#endif
    free(stream);
}

int
gpu_stream_sync(struct gpu_stream *stream)
{
#ifdef HAVE_CUDA
    if (stream && stream->native
        && cudaStreamSynchronize((cudaStream_t) stream->native)
           != cudaSuccess) {
        return GPU_ERR_DEVICE;
    }
#endif
    (void) stream;
    return GPU_OK;
}

int
gpu_stream_query(struct gpu_stream *stream)
{
#ifdef HAVE_CUDA
    if (stream && stream->native) {
        cudaError_t err = cudaStreamQuery((cudaStream_t) stream->native);
        if (err == cudaErrorNotReady) {
            return GPU_ERR_BUSY;
        }
        return err == cudaSuccess ? GPU_OK : GPU_ERR_DEVICE;
    }
#endif
    (void) stream;
    return GPU_OK;
}

void *
gpu_stream_native(const struct gpu_stream *stream)
{
    return stream ? stream->native : NULL;
}

/* Per-thread streams: each PMD or handler thread orders its own GPU work
 * without locking against the others. */
static pthread_key_t stream_key;
static pthread_once_t stream_key_once = PTHREAD_ONCE_INIT;

static void
stream_key_destructor(void *stream)
{
    gpu_stream_destroy(stream);
}

static void
stream_key_create(void)
{
    pthread_key_create(&stream_key, stream_key_destructor);
}

struct gpu_stream *
gpu_stream_per_thread(void)
{
    pthread_once(&stream_key_once, stream_key_create);
    struct gpu_stream *stream = pthread_getspecific(stream_key);
    if (!stream && !gpu_stream_create(&stream)) {
        pthread_setspecific(stream_key, stream);
    }
    return stream;
}

/* ---- CUDA graphs (struct gpu_graph). ---- */

#ifdef HAVE_CUDA
/* A new stream, capturing, in '*capture_stream'.  Returns false if it
 * could not be made. */
static bool
graph_begin_capture(void **capture_stream)
{
    cudaStream_t cs;

    if (cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking)
        != cudaSuccess) {
        return false;
    }
    if (cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal)
        != cudaSuccess) {
        cudaStreamDestroy(cs);
        return false;
    }
    *capture_stream = cs;
    return true;
}
#endif

/* Begins building 'g': allocates its flag and returns in
 * '*capture_stream' a stream of its own, capturing, to queue the chain
 * on. */
int
gpu_graph_capture_begin(struct gpu_graph *g, void **capture_stream)
{
    memset(g, 0, sizeof *g);
    *capture_stream = NULL;
#ifdef HAVE_CUDA
    if (cudaHostAlloc((void **) &g->flag, sizeof *g->flag,
                      cudaHostAllocMapped) != cudaSuccess) {
        g->flag = NULL;
    } else if (cudaHostGetDevicePointer((void **) &g->flag_dev, g->flag, 0)
               == cudaSuccess) {
        *g->flag = 0;
        if (graph_begin_capture(capture_stream)) {
            return GPU_OK;
        }
    }
    cudaGetLastError();
    gpu_graph_destroy(g);
    g->broken = true;
    return GPU_ERR_DEVICE;
#else
    g->broken = true;
    return GPU_ERR_NO_DEVICE;
#endif
}

#ifdef HAVE_CUDA
/* Schedulers that exist (struct gpu_graph's device launch). */
static atomic_int n_schedulers;
#endif

/* Ends the capture on 'capture_stream' and instantiates its graph with
 * 'flags' (cudaGraphInstantiateFlags) into '*execp', uploading it to the
 * device if 'upload'; destroys the stream.  Returns GPU_OK or an
 * error. */
static int
graph_end_capture(void *capture_stream, int error, unsigned long long flags,
                  bool upload, void **execp)
{
#ifdef HAVE_CUDA
    cudaStream_t cs = capture_stream;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;

    if (cudaStreamEndCapture(cs, &graph) != cudaSuccess || error
        || cudaGraphInstantiateWithFlags(&exec, graph, flags) != cudaSuccess
        || (upload && (cudaGraphUpload(exec, cs) != cudaSuccess
                       || cudaStreamSynchronize(cs) != cudaSuccess))) {
        if (exec) {
            cudaGraphExecDestroy(exec);
        }
        exec = NULL;
        error = error ? error : GPU_ERR_DEVICE;
    }
    if (graph) {
        cudaGraphDestroy(graph);
    }
    cudaStreamDestroy(cs);
    cudaGetLastError();
    *execp = exec;
    return error;
#else
    (void) capture_stream;
    (void) flags;
    (void) upload;
    *execp = NULL;
    return error ? error : GPU_ERR_NO_DEVICE;
#endif
}

/* Ends the capture begun by gpu_graph_capture_begin() and builds 'g', or,
 * if that fails or 'error' (the queueing's own status) is set, marks it
 * broken.  Returns GPU_OK or an error. */
int
gpu_graph_capture_end(struct gpu_graph *g, void *capture_stream, int error)
{
    error = graph_end_capture(capture_stream, error, 0, false, &g->exec);
    if (error) {
        gpu_graph_destroy(g);
        g->broken = true;
    }
    return error;
}

/* The same, building 'g' so that the device may launch it too (then
 * gpu_graph_start_scheduler()). */
int
gpu_graph_capture_end_device(struct gpu_graph *g, void *capture_stream,
                             int error)
{
#ifdef HAVE_CUDA
    error = graph_end_capture(capture_stream, error,
                              cudaGraphInstantiateFlagDeviceLaunch, true,
                              &g->exec);
#else
    error = graph_end_capture(capture_stream, error, 0, false, &g->exec);
#endif
    if (error) {
        gpu_graph_destroy(g);
        g->broken = true;
    } else {
        g->device_launchable = true;
    }
    return error;
}

#ifdef HAVE_CUDA
/* Frees the scheduler's doorbell, state and stream ('g''s scheduler has
 * ended or was never launched). */
static void
graph_scheduler_free(struct gpu_graph *g)
{
    if (g->sched_exec) {
        cudaGraphExecDestroy((cudaGraphExec_t) g->sched_exec);
        g->sched_exec = NULL;
    }
    if (g->sched_stream) {
        cudaStreamDestroy((cudaStream_t) g->sched_stream);
        g->sched_stream = NULL;
    }
    if (g->bell) {
        cudaFreeHost(g->bell);
        g->bell = NULL;
        g->bell_dev = NULL;
        atomic_fetch_sub(&n_schedulers, 1);
    }
    if (g->sched_state_dev) {
        cudaFree(g->sched_state_dev);
        g->sched_state_dev = NULL;
    }
    if (g->entries) {
        cudaFreeHost(g->entries);
        g->entries = NULL;
        g->entries_dev = NULL;
    }
    cudaGetLastError();
}
#endif

#ifdef HAVE_CUDA
/* Makes 'g''s scheduler's doorbell, state and stream, and begins the
 * capture of its kernel on '*capture_stream'. */
static int
graph_scheduler_setup(struct gpu_graph *g, void **capture_stream)
{
    if (atomic_fetch_add(&n_schedulers, 1) >= GPU_GRAPH_MAX_SCHEDULERS) {
        atomic_fetch_sub(&n_schedulers, 1);
        return GPU_ERR_INVALID;
    }

    /* The scheduler has seen what the doorbell says now. */
    uint64_t state[2] = { g->seq, 0 };
    cudaStream_t ss;

    if (cudaHostAlloc((void **) &g->bell,
                      GPU_GRAPH_BELL_WORDS * sizeof *g->bell,
                      cudaHostAllocMapped) != cudaSuccess) {
        g->bell = NULL;
        atomic_fetch_sub(&n_schedulers, 1);
        cudaGetLastError();
        return GPU_ERR_DEVICE;
    }
    memset(g->bell, 0, GPU_GRAPH_BELL_WORDS * sizeof *g->bell);
    g->bell[GPU_GRAPH_BELL_SEQ] = g->seq;
    g->bell[GPU_GRAPH_BELL_PARKED] = 1;
    if (cudaHostGetDevicePointer((void **) &g->bell_dev, g->bell, 0)
        == cudaSuccess
        && cudaMalloc((void **) &g->sched_state_dev, sizeof state)
           == cudaSuccess
        && cudaMemcpy(g->sched_state_dev, state, sizeof state,
                      cudaMemcpyHostToDevice) == cudaSuccess
        && cudaStreamCreateWithFlags(&ss, cudaStreamNonBlocking)
           == cudaSuccess) {
        g->sched_stream = ss;
        if (graph_begin_capture(capture_stream)) {
            return GPU_OK;
        }
    }
    graph_scheduler_free(g);
    return GPU_ERR_DEVICE;
}
#endif

int
gpu_graph_scheduler_begin(struct gpu_graph *g, void **capture_stream)
{
    *capture_stream = NULL;
#ifdef HAVE_CUDA
    if (!g->exec || !g->device_launchable || g->sched_exec || g->bell
        || g->in_flight) {
        return GPU_ERR_INVALID;
    }
    return graph_scheduler_setup(g, capture_stream);
#else
    (void) g;
    return GPU_ERR_NO_DEVICE;
#endif
}

int
gpu_graph_queue_begin(struct gpu_graph *q, void **capture_stream)
{
    memset(q, 0, sizeof *q);
    *capture_stream = NULL;
#ifdef HAVE_CUDA
    size_t size = GPU_GRAPH_QUEUE_LEN * sizeof *q->entries;

    if (cudaHostAlloc((void **) &q->entries, size, cudaHostAllocMapped)
        != cudaSuccess) {
        q->entries = NULL;
        cudaGetLastError();
        return GPU_ERR_DEVICE;
    }
    memset(q->entries, 0, size);
    if (cudaHostGetDevicePointer((void **) &q->entries_dev, q->entries, 0)
        != cudaSuccess) {
        graph_scheduler_free(q);
        return GPU_ERR_DEVICE;
    }
    return graph_scheduler_setup(q, capture_stream);
#else
    return GPU_ERR_NO_DEVICE;
#endif
}

int
gpu_graph_scheduler_end(struct gpu_graph *g, void *capture_stream, int error)
{
#ifdef HAVE_CUDA
    /* Tail-launched by itself from the device: built for device launch,
     * and uploaded. */
    error = graph_end_capture(capture_stream, error,
                              cudaGraphInstantiateFlagDeviceLaunch, true,
                              &g->sched_exec);
    if (!error) {
        g->bell[GPU_GRAPH_BELL_PARKED] = 0;
        if (cudaGraphLaunch((cudaGraphExec_t) g->sched_exec,
                            (cudaStream_t) g->sched_stream)
            != cudaSuccess) {
            cudaGetLastError();
            error = GPU_ERR_DEVICE;
        }
    }
    if (error) {
        graph_scheduler_free(g);
    }
    return error;
#else
    (void) g;
    (void) capture_stream;
    return error ? error : GPU_ERR_NO_DEVICE;
#endif
}

/* The sequence number the next launch's done kernel must write. */
uint32_t
gpu_graph_next_seq(struct gpu_graph *g)
{
    return g->seq + 1;
}

/* Launches 'g' on 'stream' (a cudaStream_t) from this thread. */
int
gpu_graph_launch_on_stream(struct gpu_graph *g, void *stream)
{
#ifdef HAVE_CUDA
    if (g->exec
        && cudaGraphLaunch(g->exec, (cudaStream_t) stream) == cudaSuccess) {
        g->seq++;
        g->stream = stream;
        g->in_flight = true;
        g->rung = false;
        g->n_unseen = 0;
        g->n_host_launches++;
        return GPU_OK;
    }
    cudaGetLastError();
#endif
    (void) g;
    (void) stream;
    return GPU_ERR_DEVICE;
}

#ifdef HAVE_CUDA
/* Rings 'g''s scheduler for its launch number g->seq + 1, launching it
 * from this thread if it is parked. */
static void
graph_ring(struct gpu_graph *g)
{
    uint32_t seq = g->seq + 1;

    /* Release: the arguments the host wrote go before the ring. */
    __atomic_store_n(&g->bell[GPU_GRAPH_BELL_SEQ], seq, __ATOMIC_RELEASE);
    /* The scheduler writes 'parked', then reads the doorbell; this thread
     * writes the doorbell, then reads 'parked': one of the two sees the
     * other's write, so a ring is never lost between a scheduler that
     * parks and a thread that thinks it polls. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&g->bell[GPU_GRAPH_BELL_PARKED], __ATOMIC_RELAXED)) {
        /* Queued after whatever scheduler is still on its way out: the
         * new one takes the ring if the old one did not. */
        g->bell[GPU_GRAPH_BELL_PARKED] = 0;
        g->n_host_launches++;
        if (cudaGraphLaunch((cudaGraphExec_t) g->sched_exec,
                            (cudaStream_t) g->sched_stream)
            != cudaSuccess) {
            /* Whether anything will take the ring is unknown; the poll
             * tells once the stream is idle. */
            cudaGetLastError();
            g->bell[GPU_GRAPH_BELL_PARKED] = 1;
        }
    }
    g->seq = seq;
    g->n_rings++;
}

/* 'g''s launch is in flight, rung for scheduler 'sched' (its own or a
 * queue's). */
static void
graph_rung(struct gpu_graph *g, const struct gpu_graph *sched)
{
    g->stream = sched->sched_stream;
    g->in_flight = true;
    g->rung = true;
    g->n_unseen = 0;
}
#endif

int
gpu_graph_launch(struct gpu_graph *g, void *stream)
{
#ifdef HAVE_CUDA
    if (g->sched_exec) {
        graph_ring(g);
        graph_rung(g, g);
        return GPU_OK;
    }
#endif
    return gpu_graph_launch_on_stream(g, stream);
}

/* Spins until the queue's scheduler has finished all but 'ahead' of its
 * launches.  GPU_OK, or GPU_ERR_DEVICE if its stream went idle first
 * (its scheduler stopped: a launch failed, or the device faulted).  The
 * stream stays busy while a scheduler polls or a graph it launched runs
 * (each run is tail-launched in the same stream), so it is asked every
 * 1,024 spins whatever 'parked' says: a device fault stops the
 * scheduler without it. */
static int
graph_queue_wait(struct gpu_graph *q, uint32_t ahead)
{
#ifdef HAVE_CUDA
    for (uint32_t spins = 1; ; spins++) {
        uint32_t done = __atomic_load_n(&q->bell[GPU_GRAPH_BELL_DONE],
                                        __ATOMIC_ACQUIRE);

        if ((uint32_t) (q->seq - done) <= ahead) {
            return GPU_OK;
        }
        if (!(spins % 1024)) {
            cudaError_t e = cudaStreamQuery((cudaStream_t) q->sched_stream);

            if (e != cudaErrorNotReady) {
                cudaGetLastError();
                done = __atomic_load_n(&q->bell[GPU_GRAPH_BELL_DONE],
                                       __ATOMIC_ACQUIRE);
                return ((uint32_t) (q->seq - done) <= ahead
                        ? GPU_OK : GPU_ERR_DEVICE);
            }
        }
    }
#else
    (void) q;
    (void) ahead;
    return GPU_ERR_NO_DEVICE;
#endif
}

int
gpu_graph_queue_launch(struct gpu_graph *q, struct gpu_graph *g)
{
#ifdef HAVE_CUDA
    if (!q->entries || !q->sched_exec || !g->exec || !g->device_launchable
        || g->sched_exec || g->in_flight) {
        return GPU_ERR_INVALID;
    }
    /* The entry this launch takes must have been read. */
    if (graph_queue_wait(q, GPU_GRAPH_QUEUE_LEN - 1)) {
        return GPU_ERR_DEVICE;
    }
    q->entries[(uint32_t) (q->seq + 1) % GPU_GRAPH_QUEUE_LEN]
        = (uint64_t) (uintptr_t) g->exec;
    graph_ring(q);
    g->seq++;
    g->n_rings++;
    graph_rung(g, q);
    return GPU_OK;
#else
    (void) q;
    (void) g;
    return GPU_ERR_NO_DEVICE;
#endif
}

int
gpu_graph_queue_drain(struct gpu_graph *q)
{
    return q->entries ? graph_queue_wait(q, 0) : GPU_OK;
}

static bool
graph_seen_done(const struct gpu_graph *g)
{
    /* Acquire: what the graph wrote to host memory before its flag is
     * read after it. */
    return __atomic_load_n(g->flag, __ATOMIC_ACQUIRE) == g->seq;
}

/* Whether the launch in flight is done: a read of host memory, and once
 * in 1,024 polls that did not see it done a stream query, which tells a
 * launch that failed on the device (whose flag never comes) from one
 * still running.  Returns GPU_OK (done), GPU_ERR_BUSY or GPU_ERR_DEVICE
 * (done with an error). */
int
gpu_graph_poll(struct gpu_graph *g)
{
    if (!g->in_flight) {
        return GPU_OK;
    }
    if (graph_seen_done(g)) {
        g->in_flight = false;
        return GPU_OK;
    }
    if (++g->n_unseen % 1024) {
        return GPU_ERR_BUSY;
    }
#ifdef HAVE_CUDA
    cudaError_t e = cudaStreamQuery((cudaStream_t) g->stream);

    if (e == cudaErrorNotReady) {
        return GPU_ERR_BUSY;
    }
    g->in_flight = false;
    cudaGetLastError();
    return e == cudaSuccess && graph_seen_done(g) ? GPU_OK : GPU_ERR_DEVICE;
#else
    g->in_flight = false;
    return GPU_ERR_DEVICE;
#endif
}

/* Waits for the launch in flight.  Returns GPU_OK or GPU_ERR_DEVICE. */
int
gpu_graph_wait(struct gpu_graph *g)
{
    if (!g->in_flight) {
        return GPU_OK;
    }
    g->in_flight = false;
#ifdef HAVE_CUDA
    if (g->rung) {
        /* The scheduler's stream stays busy while it polls: spin on the
         * flag, and stop once the stream is idle (or failed) without
         * it. */
        for (;;) {
            if (graph_seen_done(g)) {
                return GPU_OK;
            }
            cudaError_t e = cudaStreamQuery((cudaStream_t) g->stream);

            if (e != cudaErrorNotReady) {
                cudaGetLastError();
                return e == cudaSuccess && graph_seen_done(g)
                       ? GPU_OK : GPU_ERR_DEVICE;
            }
        }
    }
    if (cudaStreamSynchronize((cudaStream_t) g->stream) == cudaSuccess
        && graph_seen_done(g)) {
        return GPU_OK;
    }
    cudaGetLastError();
#endif
    return GPU_ERR_DEVICE;
}

/* Frees what 'g' holds; it is then as gpu_graph_capture_begin() found
 * it, not built. */
void
gpu_graph_destroy(struct gpu_graph *g)
{
#ifdef HAVE_CUDA
    if (g->sched_exec) {
        /* Before the graph it launches: it ends at its next poll, after
         * the launch in flight if any. */
        __atomic_store_n(&g->bell[GPU_GRAPH_BELL_STOP], 1, __ATOMIC_RELEASE);
        cudaStreamSynchronize((cudaStream_t) g->sched_stream);
    }
    graph_scheduler_free(g);
    if (g->exec) {
        cudaGraphExecDestroy((cudaGraphExec_t) g->exec);
    }
    if (g->flag) {
        cudaFreeHost(g->flag);
    }
#endif
    memset(g, 0, sizeof *g);
}
