# gpu_classifier/: the megaflow classifier library, its tests and its
# benchmark.  Included from the top-level Makefile.am (non-recursive).

noinst_LIBRARIES += gpu_classifier/libgpuclassifier.a
gpu_classifier_libgpuclassifier_a_SOURCES = \
	gpu_classifier/gpu-classifier.h \
	gpu_classifier/classifier-inline.h \
	gpu_classifier/classifier-private.h \
	gpu_classifier/classifier.c \
	gpu_classifier/classifier-cpu.c
if HAVE_CUDA
gpu_classifier_libgpuclassifier_a_SOURCES += gpu_classifier/classifier-cuda.cu
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test-classifier
TESTS += tests/test-classifier
tests_test_classifier_SOURCES = \
	tests/test-classifier.c \
	tests/classifier-classbench.c \
	tests/classifier-classbench.h \
	tests/test-common.c \
	tests/test-common.h \
	tests/test-report.h
tests_test_classifier_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_test_classifier_LDADD = gpu_classifier/libgpuclassifier.a \
	gpu_runtime/libgpuruntime.a $(CMOCKA_LIBS) $(CUDA_LIBS)
endif

noinst_PROGRAMS += bench/classifier-bench
bench_classifier_bench_SOURCES = \
	bench/classifier-bench.c \
	tests/classifier-classbench.c \
	tests/classifier-classbench.h
bench_classifier_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
bench_classifier_bench_LDADD = gpu_classifier/libgpuclassifier.a \
	gpu_runtime/libgpuruntime.a $(CUDA_LIBS)

# (CUDA_LIBS carries -lstdc++, which nvcc's host-side stubs need when the
# C compiler links.)
