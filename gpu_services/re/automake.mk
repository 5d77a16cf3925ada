# gpu_services/re/: the redundancy-elimination library (Rabin chunking on
# the CPU or CUDA, encoder, decoder, packet helpers), its tests and its
# benchmark.  Included from the top-level Makefile.am (non-recursive).

noinst_LIBRARIES += gpu_services/re/libgpure.a
gpu_services_re_libgpure_a_SOURCES = \
	gpu_services/re/gpu-re.h \
	gpu_services/re/re-inline.h \
	gpu_services/re/re-kernels.cuh \
	gpu_services/re/re-private.h \
	gpu_services/re/re.c \
	gpu_services/re/re-codec.c \
	gpu_services/re/re-cpu.c
if HAVE_CUDA
gpu_services_re_libgpure_a_SOURCES += gpu_services/re/re-cuda.cu
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test-re
TESTS += tests/test-re
tests_test_re_SOURCES = tests/test-re.c tests/test-common.c \
	tests/test-common.h
tests_test_re_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_test_re_LDADD = gpu_services/re/libgpure.a \
	gpu_runtime/libgpuruntime.a $(CMOCKA_LIBS) $(CUDA_LIBS)
endif

noinst_PROGRAMS += bench/re-bench
bench_re_bench_SOURCES = bench/re-bench.c
bench_re_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
bench_re_bench_LDADD = gpu_services/re/libgpure.a \
	gpu_runtime/libgpuruntime.a $(CUDA_LIBS) -lpthread
