noinst_LIBRARIES += gpu_runtime/libgpuruntime.a
gpu_runtime_libgpuruntime_a_SOURCES = \
	gpu_runtime/gpu-frame.h \
	gpu_runtime/gpu-runtime.c \
	gpu_runtime/gpu-runtime.h
# The done kernel of struct gpu_graph and the in-place gather, included
# by each library's .cu.
EXTRA_DIST += gpu_runtime/gpu-graph.cuh gpu_runtime/gpu-gather.cuh
gpu_runtime_libgpuruntime_a_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
