/*
 * A minimal stand-in for gpu_runtime/, used only by
 * bench/run-classifier-gpu.sh and throwaway builds when the real runtime
 * (gpu_runtime/gpu-runtime.c, gpu-runtime-cuda.cu) is not there yet.  It
 * implements just what gpu_classifier/ and its tests and benchmark call.
 * The build proper links gpu_runtime/libgpuruntime.a instead.
 */
#include <config.h>

#include "gpu_runtime/gpu-runtime.h"

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
    case GPU_OK: return "ok";
    case GPU_ERR_INVALID: return "invalid argument";
    case GPU_ERR_NOMEM: return "out of host memory";
    case GPU_ERR_DEVICE_NOMEM: return "out of device memory";
    case GPU_ERR_DEVICE: return "device error";
    case GPU_ERR_NO_DEVICE: return "no device";
    case GPU_ERR_EXISTS: return "exists";
    case GPU_ERR_NOT_FOUND: return "not found";
    case GPU_ERR_BUSY: return "busy";
    }
    return "unknown error";
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

int
gpu_device_count(const char **why)
{
#ifdef HAVE_CUDA
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
        cudaGetLastError();
        if (why) {
            *why = "no usable CUDA device";
        }
        return 0;
    }
    return n;
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
#ifdef HAVE_CUDA
    struct cudaDeviceProp p;

    if (cudaGetDeviceProperties(&p, index) != cudaSuccess) {
        cudaGetLastError();
        return GPU_ERR_NO_DEVICE;
    }
    memset(info, 0, sizeof *info);
    info->index = index;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->total_mem = p.totalGlobalMem;
    info->multiprocessors = p.multiProcessorCount;
    return GPU_OK;
#else
    (void) index;
    (void) info;
    return GPU_ERR_NO_DEVICE;
#endif
}

int
gpu_device_select(int index)
{
#ifdef HAVE_CUDA
    return cudaSetDevice(index) == cudaSuccess ? GPU_OK : GPU_ERR_NO_DEVICE;
#else
    (void) index;
    return GPU_ERR_NO_DEVICE;
#endif
}

void *
gpu_host_alloc(size_t size)
{
#ifdef HAVE_CUDA
    void *p;

    if (gpu_device_count(NULL) > 0
        && cudaMallocHost(&p, size ? size : 1) == cudaSuccess) {
        return p;
    }
    cudaGetLastError();
#endif
    return aligned_alloc(64, ((size ? size : 1) + 63) & ~(size_t) 63);
}

void
gpu_host_free(void *p)
{
#ifdef HAVE_CUDA
    if (p && cudaFreeHost(p) == cudaSuccess) {
        return;
    }
    cudaGetLastError();
#endif
    free(p);
}

struct gpu_stream {
    void *native;
};

int
gpu_stream_create(struct gpu_stream **sp)
{
    struct gpu_stream *s = calloc(1, sizeof *s);

    if (!s) {
        return GPU_ERR_NOMEM;
    }
#ifdef HAVE_CUDA
    if (gpu_device_count(NULL) > 0) {
        cudaStream_t cs;

        if (cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking)
            != cudaSuccess) {
            free(s);
            return GPU_ERR_DEVICE;
        }
        s->native = cs;
    }
#endif
    *sp = s;
    return GPU_OK;
}

void
gpu_stream_destroy(struct gpu_stream *s)
{
    if (s) {
#ifdef HAVE_CUDA
        if (s->native) {
            cudaStreamDestroy((cudaStream_t) s->native);
        }
#endif
        free(s);
    }
}

int
gpu_stream_sync(struct gpu_stream *s)
{
#ifdef HAVE_CUDA
    if (s && s->native) {
        return cudaStreamSynchronize((cudaStream_t) s->native) == cudaSuccess
               ? GPU_OK : GPU_ERR_DEVICE;
    }
#endif
    (void) s;
    return GPU_OK;
}

int
gpu_stream_query(struct gpu_stream *s)
{
#ifdef HAVE_CUDA
    if (s && s->native) {
        cudaError_t e = cudaStreamQuery((cudaStream_t) s->native);

        return e == cudaSuccess ? GPU_OK
               : e == cudaErrorNotReady ? GPU_ERR_BUSY : GPU_ERR_DEVICE;
    }
#endif
    (void) s;
    return GPU_OK;
}

void *
gpu_stream_native(const struct gpu_stream *s)
{
    return s ? s->native : NULL;
}

struct gpu_stream *
gpu_stream_per_thread(void)
{
    static __thread struct gpu_stream *s;

    if (!s) {
        gpu_stream_create(&s);
    }
    return s;
}
