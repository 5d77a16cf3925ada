# gpu_services/index/: the packet recorder's bitmap index library (WAH and
# PLWAH built on the GPU or the CPU, queries, pcap segment store), its
# tests and its benchmark.  Included from the top-level Makefile.am.

noinst_LIBRARIES += gpu_services/index/libgpuindex.a
gpu_services_index_libgpuindex_a_SOURCES = \
	gpu_services/index/gpu-index.h \
	gpu_services/index/index-inline.h \
	gpu_services/index/index-private.h \
	gpu_services/index/index.c \
	gpu_services/index/index-cpu.c \
	gpu_services/index/query.c \
	gpu_services/index/store.c
gpu_services_index_libgpuindex_a_CPPFLAGS = $(AM_CPPFLAGS) $(PCAP_CFLAGS)
if HAVE_CUDA
gpu_services_index_libgpuindex_a_SOURCES += gpu_services/index/index-cuda.cu
endif

GPU_INDEX_LIBS = gpu_services/index/libgpuindex.a \
	gpu_runtime/libgpuruntime.a $(PCAP_LIBS) $(CUDA_LIBS) -lpthread

if HAVE_CMOCKA
check_PROGRAMS += tests/test-index
TESTS += tests/test-index
tests_test_index_SOURCES = tests/test-index.c tests/test-common.c \
	tests/test-common.h
tests_test_index_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) \
	$(ROARING_CFLAGS) $(PCAP_CFLAGS)
tests_test_index_LDADD = $(GPU_INDEX_LIBS) $(CMOCKA_LIBS) $(ROARING_LIBS)
endif

noinst_PROGRAMS += bench/index-bench
bench_index_bench_SOURCES = bench/index-bench.c
bench_index_bench_CPPFLAGS = $(AM_CPPFLAGS) $(ROARING_CFLAGS)
bench_index_bench_LDADD = $(GPU_INDEX_LIBS) $(ROARING_LIBS)

EXTRA_DIST += bench/run-index-gpu.sh docs/INDEX-NOTES.md

noinst_PROGRAMS += bench/recorder-bench
bench_recorder_bench_SOURCES = bench/recorder-bench.c
bench_recorder_bench_LDADD = $(GPU_INDEX_LIBS)
