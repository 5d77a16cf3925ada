noinst_LIBRARIES += gpu_runtime/libgpuruntime.a
gpu_runtime_libgpuruntime_a_SOURCES = \
	gpu_runtime/gpu-runtime.c \
	gpu_runtime/gpu-runtime.h
gpu_runtime_libgpuruntime_a_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
