# libFuzzer targets for every parser of untrusted or operator input (see
# docs/RELIABILITY.md, "Fuzzing"), laid out like Open vSwitch's
# tests/oss-fuzz/: one NAME_target.c each, with a seed corpus in
# tests/fuzz/corpus/NAME_target/ and, where it helps, a dictionary
# tests/fuzz/NAME_target.dict.
#
# They are built with clang's -fsanitize=fuzzer,address,undefined by the
# rules below, not by automake's (the flags are clang's alone, and the
# objects must not mix with the gcc-built libraries): every source a target
# uses is compiled again here, CPU-only whatever configure found (a fuzz
# target never needs a GPU), from tests/fuzz/obj/.  The plugin's targets
# (fec_decode, service_args, other_config) are built against Open
# vSwitch's headers and library, as the plugin is, once OVS is built.
#
# "make check" runs every target over its corpus, then fuzzes each for
# FUZZ_SECONDS (5) seconds: the layer "fuzz-targets".  "make fuzz
# FUZZ_SECONDS=N" fuzzes each for N seconds and says how far it got.
# "make fuzz-corpus" remakes the generated seeds.

FUZZ_SECONDS = 5
FUZZ_SANITIZE = -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined
FUZZ_CFLAGS = -g -O1 -fno-omit-frame-pointer $(FUZZ_SANITIZE) -std=gnu11 \
	-Wall -Wno-unused-parameter -Wno-unknown-pragmas -MMD -MP

FUZZ_LIB_TARGETS = \
	tests/fuzz/frame_parse_target \
	tests/fuzz/ids_rules_target \
	tests/fuzz/re_decode_target \
	tests/fuzz/index_query_target \
	tests/fuzz/index_segment_target
FUZZ_OVS_TARGETS = \
	tests/fuzz/fec_decode_target \
	tests/fuzz/service_args_target \
	tests/fuzz/other_config_target
FUZZ_TARGETS = $(FUZZ_LIB_TARGETS) $(FUZZ_OVS_TARGETS)

# Sources of ovs-gpu's libraries, compiled with a copy of config.h that
# does not say HAVE_CUDA.
FUZZ_CPPFLAGS = -Itests/fuzz/cfg -I$(top_srcdir) $(PCAP_CFLAGS) \
	-DOVSGPU_DEFAULT_DATA='"$(abs_top_builddir)/data"'
tests/fuzz/cfg/config.h: config.h
	$(AM_V_GEN)$(MKDIR_P) tests/fuzz/cfg && \
	sed '/HAVE_CUDA/d' config.h > $@
tests/fuzz/obj/%.o: $(srcdir)/%.c tests/fuzz/cfg/config.h
	@$(MKDIR_P) $(@D)
	$(AM_V_CC)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_CPPFLAGS) -c $< -o $@

# The plugin's sources and hooks, with OVS's config.h and headers.
FUZZ_OVS_CPPFLAGS = -I$(OVS_BUILDDIR) -I$(OVS_BUILDDIR)/include \
	-I$(OVS_BUILDDIR)/lib -I$(OVS_BUILDDIR)/vswitchd -I$(top_srcdir) \
	-DOVS_GPU_VERSION='"$(PACKAGE_VERSION)"'
if HAVE_DPDK
FUZZ_OVS_CPPFLAGS += $(DPDK_CFLAGS)
endif
# OVS must be built first (its generated headers, its library); for work
# on the targets alone, "make FUZZ_OVS_DEP= OVS_BUILDDIR=DIR" uses another
# build tree's OVS as it is.
FUZZ_OVS_DEP = $(OVS_STAMP_LIBS)
tests/fuzz/obj-ovs/%.o: $(srcdir)/%.c $(FUZZ_OVS_DEP)
	@$(MKDIR_P) $(@D)
	$(AM_V_CC)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_OVS_CPPFLAGS) -c $< -o $@
# OVS's library and what it needs, as libtool recorded them.
FUZZ_OVS_LIBS = $(OVS_BUILDDIR)/lib/.libs/libopenvswitch.a \
	`sed -n "s|^dependency_libs='\(.*\)'|\1|p" \
		$(OVS_BUILDDIR)/lib/libopenvswitch.la \
	 | sed 's|\([^ ]*\)/\([^/ ]*\)\.la|\1/.libs/\2.a|g'`

FUZZ_RUNTIME = tests/fuzz/obj/gpu_runtime/gpu-runtime.o
FUZZ_IDS = tests/fuzz/obj/gpu_services/ids/ids.o \
	tests/fuzz/obj/gpu_services/ids/ids-rules.o \
	tests/fuzz/obj/gpu_services/ids/ids-cpu.o
FUZZ_RE = tests/fuzz/obj/gpu_services/re/re.o \
	tests/fuzz/obj/gpu_services/re/re-codec.o \
	tests/fuzz/obj/gpu_services/re/re-cpu.o
FUZZ_INDEX = tests/fuzz/obj/gpu_services/index/index.o \
	tests/fuzz/obj/gpu_services/index/index-cpu.o \
	tests/fuzz/obj/gpu_services/index/query.o \
	tests/fuzz/obj/gpu_services/index/store.o
FUZZ_PARITY = tests/fuzz/obj/gpu_services/parity/parity.o \
	tests/fuzz/obj/gpu_services/parity/parity-cpu.o
FUZZ_CLASSIFIER = tests/fuzz/obj/gpu_classifier/classifier.o \
	tests/fuzz/obj/gpu_classifier/classifier-cpu.o
# The plugin: its sources whose parsers the targets reach go in through
# the hooks (plugin-hooks.h), the others as they are.
FUZZ_PLUGIN = tests/fuzz/obj-ovs/ovs_plugin/gpu-dpcls.o \
	tests/fuzz/obj-ovs/tests/fuzz/ovs-stubs.o \
	tests/fuzz/obj-ovs/tests/fuzz/hook-actions.o \
	tests/fuzz/obj-ovs/tests/fuzz/hook-fec.o \
	tests/fuzz/obj-ovs/tests/fuzz/hook-ids.o \
	tests/fuzz/obj-ovs/tests/fuzz/hook-index.o \
	tests/fuzz/obj-ovs/tests/fuzz/hook-plugin.o \
	tests/fuzz/obj-ovs/tests/fuzz/hook-re.o \
	$(FUZZ_IDS) $(FUZZ_RE) $(FUZZ_INDEX) $(FUZZ_PARITY) \
	$(FUZZ_CLASSIFIER) $(FUZZ_RUNTIME)
FUZZ_LINK = $(AM_V_CCLD)$(FUZZ_CC) $(FUZZ_SANITIZE) -o $@

tests/fuzz/frame_parse_target: \
		tests/fuzz/obj/tests/fuzz/frame_parse_target.o
	$(FUZZ_LINK) $^
tests/fuzz/ids_rules_target: tests/fuzz/obj/tests/fuzz/ids_rules_target.o \
		$(FUZZ_IDS) $(FUZZ_RUNTIME)
	$(FUZZ_LINK) $^ -lpthread -lm
tests/fuzz/re_decode_target: tests/fuzz/obj/tests/fuzz/re_decode_target.o \
		$(FUZZ_RE) $(FUZZ_RUNTIME)
	$(FUZZ_LINK) $^ -lpthread -lm
tests/fuzz/index_query_target: \
		tests/fuzz/obj/tests/fuzz/index_query_target.o \
		$(FUZZ_INDEX) $(FUZZ_RUNTIME)
	$(FUZZ_LINK) $^ $(PCAP_LIBS) -lpthread -lm
tests/fuzz/index_segment_target: \
		tests/fuzz/obj/tests/fuzz/index_segment_target.o \
		$(FUZZ_INDEX) $(FUZZ_RUNTIME)
	$(FUZZ_LINK) $^ $(PCAP_LIBS) -lpthread -lm
$(FUZZ_OVS_TARGETS): %: tests/fuzz/obj-ovs/%.o $(FUZZ_PLUGIN)
	$(FUZZ_LINK) $^ $(FUZZ_OVS_LIBS) $(PCAP_LIBS) $(ISAL_LIBS) -lpthread \
		-lm

-include $(wildcard tests/fuzz/obj/*/*.d tests/fuzz/obj/*/*/*.d \
	tests/fuzz/obj/*/*/*/*.d tests/fuzz/obj-ovs/*/*.d \
	tests/fuzz/obj-ovs/*/*/*.d)

# What the layer's script needs to know, from make: it runs under the test
# harness, which passes it nothing else.
TESTS += tests/fuzz/fuzz-targets.sh
check_DATA += tests/fuzz/fuzz-env
tests/fuzz/fuzz-env: Makefile
	$(AM_V_GEN)$(MKDIR_P) tests/fuzz && { \
		echo "FUZZ_TARGETS='$(FUZZ_TARGETS)'"; \
		echo "FUZZ_CC_FOUND='$(FUZZ_CC_FOUND)'"; \
		echo "FUZZ_CC='$(FUZZ_CC)'"; \
		echo "FUZZ_SRCDIR='$(abs_srcdir)'"; \
		echo ": \$${FUZZ_SECONDS:=$(FUZZ_SECONDS)}"; \
	} > $@
if HAVE_LIBFUZZER
check_DATA += $(FUZZ_TARGETS)
endif

fuzz: $(FUZZ_TARGETS) tests/fuzz/fuzz-env
	$(AM_V_at)FUZZ_SECONDS=$(FUZZ_SECONDS) $(SHELL) \
		$(srcdir)/tests/fuzz/fuzz-targets.sh --long
fuzz-corpus: tests/fuzz/re_decode_target tests/fuzz/index_segment_target \
		tests/fuzz/fec_decode_target
	$(AM_V_at)for t in $^; do \
		d=$(srcdir)/tests/fuzz/corpus/`basename $$t`; \
		$(MKDIR_P) $$d; rm -f $$d/gen-*; \
		mkdir -p tests/fuzz/gen; rm -rf tests/fuzz/gen/*; \
		FUZZ_GEN_CORPUS=tests/fuzz/gen ./$$t || exit 1; \
		for f in tests/fuzz/gen/*; do \
			mv "$$f" "$$d/gen-`basename $$f`"; \
		done; \
	done
.PHONY: fuzz fuzz-corpus

CLEANFILES += $(FUZZ_TARGETS) tests/fuzz/fuzz-env tests/fuzz/cfg/config.h
fuzz-clean:
	rm -rf tests/fuzz/obj tests/fuzz/obj-ovs tests/fuzz/cfg \
		tests/fuzz/work tests/fuzz/gen tests/fuzz/artifacts $(FUZZ_TARGETS)
.PHONY: fuzz-clean

EXTRA_DIST += tests/fuzz/automake.mk tests/fuzz/fuzz-targets.sh \
	tests/fuzz/fuzzer.h tests/fuzz/plugin-hooks.h tests/fuzz/re-traffic.h \
	tests/fuzz/index-records.h tests/fuzz/ovs-stubs.c \
	$(addsuffix .c,$(FUZZ_TARGETS)) \
	$(wildcard $(srcdir)/tests/fuzz/hook-*.c $(srcdir)/tests/fuzz/*.dict \
		$(srcdir)/tests/fuzz/corpus/*/*)
