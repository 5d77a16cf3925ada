# cmocka unit tests.  They are built and run by "make check" when cmocka
# is installed; configure says so in its summary.
if HAVE_CMOCKA
check_PROGRAMS += tests/test-runtime
TESTS += tests/test-runtime
tests_test_runtime_SOURCES = tests/test-runtime.c
tests_test_runtime_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_runtime_LDADD = gpu_runtime/libgpuruntime.a $(CMOCKA_LIBS) \
	$(CUDA_LIBS)
endif

# The CUDA kernels of gpu_ids and gpu_re run on the CPU against the CPU
# backends, so a machine without a GPU checks their logic too (needs only
# a C++ compiler).
TESTS += tests/kernel-emu.sh
EXTRA_DIST += tests/kernel-emu.sh tests/ids-kernel-emu.cc \
	tests/re-kernel-emu.cc
