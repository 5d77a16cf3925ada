# cmocka unit tests.  They are built and run by "make check" when cmocka
# is installed; configure says so in its summary.
#
# Every test runs under tests/layer-result, which records its exit status
# and the counts it reports about itself in results/, the only thing
# scripts/test-summary reads (see there for why not the logs).
LOG_COMPILER = $(SHELL) $(srcdir)/tests/layer-result run
EXTRA_DIST += tests/layer-result tests/ovs-testsuite-run tests/test-report.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test-runtime
TESTS += tests/test-runtime
tests_test_runtime_SOURCES = tests/test-runtime.c tests/test-common.c \
	tests/test-common.h tests/test-report.h
tests_test_runtime_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_runtime_LDADD = gpu_runtime/libgpuruntime.a $(CMOCKA_LIBS) \
	$(CUDA_LIBS)

# The test summary itself, on fabricated build directories.
check_PROGRAMS += tests/test-summary
TESTS += tests/test-summary
tests_test_summary_SOURCES = tests/test-summary.c tests/test-common.c \
	tests/test-common.h tests/test-report.h
tests_test_summary_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) \
	-DOVSGPU_SRCDIR='"$(abs_top_srcdir)"'
tests_test_summary_LDADD = $(CMOCKA_LIBS)
endif

# The CUDA kernels of gpu_ids and gpu_re run on the CPU against the CPU
# backends, so a machine without a GPU checks their logic too (needs only
# a C++ compiler).
TESTS += tests/kernel-emu.sh
EXTRA_DIST += tests/kernel-emu.sh tests/ids-kernel-emu.cc \
	tests/re-kernel-emu.cc

# The data the tests read is the repository's, whole (data/MANIFEST), and
# a missing file fails, by name.
TESTS += tests/data-check.sh tests/data-check-missing.sh
EXTRA_DIST += tests/data-check.sh tests/data-check-missing.sh

# The layers scripts/test-summary must find a record of after "make
# check": the tests above and check-local's (ovs.mk).  Each layer replaces
# its own record when it runs (check-local removes its layers' first, in
# case one cannot run); "scripts/ovs-gpu test" removes results/ before
# "make check", so that nothing is left from an earlier run.  Not a phony
# target: check-TESTS depends on it, and runs beside check-local.
TEST_LAYERS = $(basename $(notdir $(TESTS))) $(CHECK_LOCAL_LAYERS)
check_DATA += results/expected
results/expected: Makefile
	$(AM_V_at)$(MKDIR_P) results
	$(AM_V_at)for t in $(TEST_LAYERS); do echo $$t; done > $@
