# gpu_services/parity/: the Cauchy Reed-Solomon parity library, its tests
# and its benchmark.  Included from the top-level Makefile.am
# (non-recursive).

noinst_LIBRARIES += gpu_services/parity/libgpuparity.a
gpu_services_parity_libgpuparity_a_SOURCES = \
	gpu_services/parity/gpu-parity.h \
	gpu_services/parity/parity-inline.h \
	gpu_services/parity/parity-private.h \
	gpu_services/parity/parity.c \
	gpu_services/parity/parity-cpu.c
# ISA-L, where configure found it, codes the GF8 code on the CPU (its
# flags are in AM_CPPFLAGS: per-target flags would rename the objects,
# which the .cu suffix rule does not follow).
if HAVE_CUDA
gpu_services_parity_libgpuparity_a_SOURCES += \
	gpu_services/parity/parity-cuda.cu
endif

# Jerasure and ISA-L are the tests' oracles and the benchmark's CPU
# peers; both say so and skip them when they are missing.
if HAVE_CMOCKA
check_PROGRAMS += tests/test-parity
TESTS += tests/test-parity
tests_test_parity_SOURCES = tests/test-parity.c tests/test-common.c \
	tests/test-common.h
tests_test_parity_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) \
	$(JERASURE_CFLAGS) $(ISAL_CFLAGS)
tests_test_parity_LDADD = gpu_services/parity/libgpuparity.a \
	gpu_runtime/libgpuruntime.a $(CMOCKA_LIBS) $(JERASURE_LIBS) \
	$(ISAL_LIBS) $(CUDA_LIBS)
endif

noinst_PROGRAMS += bench/parity-bench
bench_parity_bench_SOURCES = bench/parity-bench.c
bench_parity_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) \
	$(JERASURE_CFLAGS) $(ISAL_CFLAGS)
bench_parity_bench_LDADD = gpu_services/parity/libgpuparity.a \
	gpu_runtime/libgpuruntime.a $(JERASURE_LIBS) $(ISAL_LIBS) \
	$(CUDA_LIBS)
