# gpu_services/ids/: the IDS signature-matching library, its tests and its
# benchmark.  Included from the top-level Makefile.am (non-recursive).

noinst_LIBRARIES += gpu_services/ids/libgpuids.a
gpu_services_ids_libgpuids_a_SOURCES = \
	gpu_services/ids/gpu-ids.h \
	gpu_services/ids/ids-inline.h \
	gpu_services/ids/ids-kernels.cuh \
	gpu_services/ids/ids-private.h \
	gpu_services/ids/ids.c \
	gpu_services/ids/ids-rules.c \
	gpu_services/ids/ids-cpu.c
if HAVE_CUDA
gpu_services_ids_libgpuids_a_SOURCES += gpu_services/ids/ids-cuda.cu
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test-ids
TESTS += tests/test-ids
tests_test_ids_SOURCES = tests/test-ids.c tests/test-common.c \
	tests/test-common.h
tests_test_ids_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) \
	$(HYPERSCAN_CFLAGS)
tests_test_ids_LDADD = gpu_services/ids/libgpuids.a \
	gpu_runtime/libgpuruntime.a $(CMOCKA_LIBS) $(HYPERSCAN_LIBS) \
	$(CUDA_LIBS)
endif

noinst_PROGRAMS += bench/ids-bench
bench_ids_bench_SOURCES = bench/ids-bench.c
bench_ids_bench_CPPFLAGS = $(AM_CPPFLAGS) $(HYPERSCAN_CFLAGS)
bench_ids_bench_LDADD = gpu_services/ids/libgpuids.a \
	gpu_runtime/libgpuruntime.a $(HYPERSCAN_LIBS) $(CUDA_LIBS)
