# AddressSanitizer and UndefinedBehaviorSanitizer (docs/RELIABILITY.md).
#
# In a build configured with --enable-sanitizers, every test runs with the
# environment below: the kernel emulators are compiled with the same
# flags as the libraries, and the suppressions (each entry says why; only
# for Open vSwitch and system libraries, never for our code) are named.
# The options come before the user's, which may add to or replace them.
# OVS's testsuite (ovs.mk) gets the same, after its own tests/atlocal
# options (log_path=asan, log_path=ubsan: a report fails the test).
EXTRA_DIST += tests/sanitizers.mk tests/asan.supp tests/lsan.supp \
	tests/ubsan.supp
if SANITIZERS
SANITIZER_SUPP = suppressions=$(abs_top_srcdir)/tests
SANITIZER_UBSAN = \
	print_stacktrace=1:halt_on_error=1:$(SANITIZER_SUPP)/ubsan.supp
SANITIZER_ENV = \
	ASAN_OPTIONS="$(SANITIZER_SUPP)/asan.supp:$${ASAN_OPTIONS-}"; \
	LSAN_OPTIONS="$(SANITIZER_SUPP)/lsan.supp:$${LSAN_OPTIONS-}"; \
	UBSAN_OPTIONS="$(SANITIZER_UBSAN):$${UBSAN_OPTIONS-}"; \
	KERNEL_EMU_FLAGS='$(SANITIZER_CFLAGS)'; \
	export ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS KERNEL_EMU_FLAGS;
else
SANITIZER_ENV =
endif
AM_TESTS_ENVIRONMENT = $(SANITIZER_ENV)

# check-sanitizers, part of "make check" (check-local) in every build:
# the cmocka tests and the kernel emulation again, in a sub-build of
# their own (sanitizers/: --enable-sanitizers, CPU-only, without DPDK)
# that builds only the libraries and the tests, never OVS (check-TESTS
# needs only check_PROGRAMS; "all" would build OVS), so that it costs CI
# minutes, not half an hour.  Each test is a layer of its own,
# "sanitizers-" before its name (tests/layer-result), in this build's
# results/; a sub-build that does not configure or build leaves them
# missing, which scripts/test-summary counts as failed.  It runs last in
# check-local, after OVS's testsuite, whose timeouts it would otherwise
# share two cores with.
SANITIZERS_BUILDDIR = $(abs_top_builddir)/sanitizers
SANITIZERS_TESTS = $(filter tests/test-%,$(TESTS)) tests/kernel-emu.sh
SANITIZERS_LAYERS = \
	$(addprefix sanitizers-,$(basename $(notdir $(SANITIZERS_TESTS))))
CHECK_LOCAL_LAYERS += $(SANITIZERS_LAYERS)
check-sanitizers:
	$(AM_V_at)for l in $(SANITIZERS_LAYERS); do \
		rm -f results/$$l.result; \
	done
	$(AM_V_at)$(MKDIR_P) $(SANITIZERS_BUILDDIR)
	$(AM_V_at)cd $(SANITIZERS_BUILDDIR) && \
	if test ! -f Makefile || test Makefile -ot $(abs_top_srcdir)/configure; \
	then \
		echo "  SAN      configure --enable-sanitizers --without-cuda"; \
		$(abs_top_srcdir)/configure --enable-sanitizers --without-cuda \
			--without-dpdk --with-ovs-tarball=$(OVS_TARBALL) \
			CC="$(CC)" > configure.out 2>&1 \
			|| { tail -20 configure.out; exit 1; }; \
	fi
	$(AM_V_at)$(MAKE) -C $(SANITIZERS_BUILDDIR) data-unpack
	$(AM_V_at)OVSGPU_RESULTS=$(abs_builddir)/results \
	OVSGPU_LAYER_PREFIX=sanitizers- \
	$(MAKE) -C $(SANITIZERS_BUILDDIR) check-TESTS \
		TESTS="$(SANITIZERS_TESTS)" \
		|| { echo "sanitizer tests FAILED: logs in" \
			"$(SANITIZERS_BUILDDIR)/tests"; exit 1; }
.PHONY: check-sanitizers
