# bench/classifier-bench-ovs: classifier-bench with OVS 3.1's own dpcls as a
# peer (bench/ovs-dpcls-peer.c), on the same rules and keys in the same
# run.  The peer includes OVS's headers and config.h, like the plugin, so
# it is a library of its own, compiled after OVS is built (its generated
# headers); the program links it with OVS's libopenvswitch.a and what that
# needs (libtool's dependency_libs, copied to bench/ovs-libs.txt once OVS
# is built, since the .la file does not exist before).

noinst_LIBRARIES += bench/libovsdpclspeer.a
bench_libovsdpclspeer_a_SOURCES = \
	bench/ovs-dpcls-peer.c \
	bench/ovs-dpcls-peer.h
bench_libovsdpclspeer_a_CPPFLAGS = \
	-I$(OVS_BUILDDIR) -I$(OVS_BUILDDIR)/include -I$(OVS_BUILDDIR)/lib \
	-I$(top_srcdir)
# Without DPDK's -march=corei7, as OVS builds itself (see CFLAGS below).
if HAVE_DPDK
bench_libovsdpclspeer_a_CPPFLAGS += $(filter-out -march=%,$(DPDK_CFLAGS))
endif
# OVS's headers are not written for -Wextra.  OVS's own CFLAGS (read from
# its Makefile when compiling): OVS's inline hash functions depend on the
# ISA they are compiled for (SSE 4.2's CRC32 or not), and a rule hashed
# here must be found by OVS's lookup, hashed there.
bench_libovsdpclspeer_a_CFLAGS = -Wall -std=gnu11 \
	`sed -n 's/^CFLAGS = //p' $(OVS_BUILDDIR)/Makefile`
$(bench_libovsdpclspeer_a_OBJECTS): $(OVS_STAMP_LIBS)

OVS_LIBOPENVSWITCH = $(OVS_BUILDDIR)/lib/.libs/libopenvswitch.a
$(OVS_LIBOPENVSWITCH): $(OVS_STAMP_LIBS)
	@:
bench/ovs-libs.txt: $(OVS_STAMP_LIBS)
	$(AM_V_GEN)sed -n "s/^dependency_libs='\(.*\)'$$/\1/p" \
		$(OVS_BUILDDIR)/lib/libopenvswitch.la \
		| sed 's|\([^ ]*\)/\([^/ ]*\)\.la|\1/.libs/\2.a|g' > $@
CLEANFILES += bench/ovs-libs.txt

noinst_PROGRAMS += bench/classifier-bench-ovs
bench_classifier_bench_ovs_SOURCES = \
	bench/classifier-bench.c \
	tests/classifier-classbench.c \
	tests/classifier-classbench.h
bench_classifier_bench_ovs_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) \
	-DOVS_DPCLS_PEER
bench_classifier_bench_ovs_LDADD = bench/libovsdpclspeer.a \
	gpu_classifier/libgpuclassifier.a gpu_runtime/libgpuruntime.a \
	$(OVS_LIBOPENVSWITCH) `cat bench/ovs-libs.txt` $(CUDA_LIBS)
# Named, so that automake does not make prerequisites of the -l flags.
bench_classifier_bench_ovs_DEPENDENCIES = bench/libovsdpclspeer.a \
	gpu_classifier/libgpuclassifier.a gpu_runtime/libgpuruntime.a \
	$(OVS_LIBOPENVSWITCH) bench/ovs-libs.txt

# The peer's answers against the classifier's, on small synthetic sets (a
# few seconds); the exit status says whether any differed.
check-dpcls-peer: bench/classifier-bench-ovs
	$(AM_V_at)status=0; \
	for set in 4096:1 4096:64 16384:300; do \
		bench/classifier-bench-ovs --synth $$set --max-seconds 0.02 \
			--check-keys 65536 || status=1; \
	done > dpcls-peer-check.log 2>&1; \
	if test $$status = 0; then \
		echo "dpcls peer check passed" >> dpcls-peer-check.log; \
	else \
		echo "dpcls peer check FAILED" >> dpcls-peer-check.log; \
	fi; \
	grep -E 'ovs dpcls|MISMATCH|FAILED|passed' dpcls-peer-check.log; \
	$(SHELL) $(abs_srcdir)/tests/layer-result record dpcls-peer \
		"OVS dpcls peer check" $$status; \
	exit $$status
.PHONY: check-dpcls-peer

# Standalone (nvcc only): what CUDA runtime calls cost the calling thread.
EXTRA_DIST += bench/cuda-bench-gather.cuh bench/cuda-call-cost.cu \
	bench/cuda-device-launch.cu \
	bench/cuda-rewrite-after-read.cu \
	bench/cuda-submit-designs.cu \
	bench/cuda-zero-copy.cu
