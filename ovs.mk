# Building Open vSwitch 3.1.0 with ovs-gpu inside.
#
# The OVS source is never committed: it is extracted from Debian's
# openvswitch-source tarball into $(OVS_BUILDDIR), patched with the series
# in patches/, configured and built there.  Each step leaves a stamp so that
# a change to one plugin file relinks ovs-vswitchd and nothing else; only a
# change to the tarball or to patches/ starts OVS over.

OVS_BUILDDIR = $(abs_top_builddir)/ovs
OVS_STAMP_PATCHED = $(OVS_BUILDDIR)/.ovs-gpu-patched
OVS_STAMP_CONFIGURED = $(OVS_BUILDDIR)/.ovs-gpu-configured
OVS_STAMP_LIBS = $(OVS_BUILDDIR)/.ovs-gpu-libs

OVS_GPU_AT = $(wildcard $(srcdir)/ovs-tests/*.at)
EXTRA_DIST += $(OVS_GPU_AT)

OVS_PATCHES = $(shell grep -v '^\#' $(srcdir)/patches/series 2>/dev/null)
EXTRA_DIST += patches/series $(addprefix patches/,$(OVS_PATCHES))

# OVS is configured with our installation directories, so that "make
# install" puts OVS's programs, schema and man pages where ours go and the
# paths OVS compiles in (run, database and log directories) agree with them.
OVS_CONFIGURE_ARGS = --enable-silent-rules \
	--prefix=$(prefix) --exec-prefix=$(exec_prefix) \
	--bindir=$(bindir) --sbindir=$(sbindir) --libexecdir=$(libexecdir) \
	--sysconfdir=$(sysconfdir) --localstatedir=$(localstatedir) \
	--libdir=$(libdir) --includedir=$(includedir) \
	--datarootdir=$(datarootdir) --datadir=$(datadir) --mandir=$(mandir)
if HAVE_DPDK
OVS_CONFIGURE_ARGS += --with-dpdk=shared
endif
# --enable-sanitizers: OVS too, since the plugin runs inside ovs-vswitchd
# and ASan's run time must be in the program that loads it (configure.ac
# says why OVS's UBSan recovers).  Given here rather than by the user's
# OVS_CONFIGURE_FLAGS, which may still add to or replace it.
if SANITIZERS
OVS_CONFIGURE_ARGS += CFLAGS="-g -O2 $(OVS_SANITIZER_CFLAGS)"
endif

$(OVS_STAMP_PATCHED): $(OVS_TARBALL) $(srcdir)/patches/series \
		$(addprefix $(srcdir)/patches/,$(OVS_PATCHES))
	@echo "  OVS      extracting $(OVS_TARBALL)"
	$(AM_V_at)rm -rf $(OVS_BUILDDIR).tmp $(OVS_BUILDDIR)
	$(AM_V_at)$(MKDIR_P) $(OVS_BUILDDIR).tmp
	$(AM_V_at)tar -xzf $(OVS_TARBALL) -C $(OVS_BUILDDIR).tmp \
		--strip-components=1
	$(AM_V_at)for p in $(OVS_PATCHES); do \
		echo "  PATCH    $$p"; \
		patch -d $(OVS_BUILDDIR).tmp -p1 -s --no-backup-if-mismatch \
			< $(srcdir)/patches/$$p || exit 1; \
	done
	$(AM_V_at)cp $(OVS_GPU_AT) $(OVS_BUILDDIR).tmp/tests/
	$(AM_V_at)mv $(OVS_BUILDDIR).tmp $(OVS_BUILDDIR)
	$(AM_V_at)touch $@

$(OVS_STAMP_CONFIGURED): $(OVS_STAMP_PATCHED)
	@echo "  OVS      configure $(OVS_CONFIGURE_ARGS) $(OVS_CONFIGURE_FLAGS)"
	$(AM_V_at)cd $(OVS_BUILDDIR) && ./configure $(OVS_CONFIGURE_ARGS) \
		$(OVS_CONFIGURE_FLAGS) > configure.out 2>&1 \
		|| { tail -40 configure.out; exit 1; }
	$(AM_V_at)touch $@

# The plugin includes OVS headers, some of which OVS generates as it
# builds (BUILT_SOURCES), so OVS is built once before the plugin is
# compiled; ovs-build below then relinks only ovs-vswitchd.
$(OVS_STAMP_LIBS): $(OVS_STAMP_CONFIGURED)
	$(AM_V_at)$(MAKE) -C $(OVS_BUILDDIR) all
	$(AM_V_at)touch $@

# One relocatable object holds the plugin and the ovs-gpu libraries it
# uses, whole: the plugin registers itself from a constructor, which a
# plain archive link would drop because nothing in OVS refers to it.
OVS_GPU_PLUGIN_OBJ = ovs_plugin/ovs-gpu-plugin.o
OVS_GPU_PLUGIN_ARCHIVES = ovs_plugin/libovsgpuplugin.a \
	gpu_classifier/libgpuclassifier.a gpu_services/ids/libgpuids.a \
	gpu_services/re/libgpure.a gpu_services/index/libgpuindex.a \
	gpu_services/parity/libgpuparity.a gpu_runtime/libgpuruntime.a
$(OVS_GPU_PLUGIN_OBJ): $(OVS_GPU_PLUGIN_ARCHIVES)
	$(AM_V_GEN)$(LD) -r -o $@ --whole-archive $(OVS_GPU_PLUGIN_ARCHIVES)
CLEANFILES += $(OVS_GPU_PLUGIN_OBJ)

# ovs-gpu's own OVS-level tests join OVS's testsuite (patch 0002): copied
# in when OVS is extracted, and again whenever they change.
ovs-tests-sync: $(OVS_STAMP_CONFIGURED)
	$(AM_V_at)for f in $(OVS_GPU_AT); do \
		b=`basename $$f`; \
		if ! cmp -s $$f $(OVS_BUILDDIR)/tests/$$b; then \
			cp $$f $(OVS_BUILDDIR)/tests/$$b; \
			touch $(OVS_BUILDDIR)/tests/testsuite.at; \
		fi; \
	done

# ovs-vswitchd is linked with the plugin by appending it to the one link
# variable OVS keeps for ovs-vswitchd alone; OVS's make does not know the
# plugin, so a newer plugin object removes the old binary first.  Every
# make of OVS that may link ovs-vswitchd (all, install) is given
# OVS_MAKE_ARGS after OVS_DPDK_LD, so that none links it without the
# plugin.  ($(MAKE) stays in the recipes themselves, where make sees it
# and shares its jobs.)
OVS_DPDK_LD = dpdk_ld=`sed -n 's/^DPDK_vswitchd_LDFLAGS = //p' \
		$(OVS_BUILDDIR)/Makefile`
OVS_MAKE_ARGS = -C $(OVS_BUILDDIR) \
	DPDK_vswitchd_LDFLAGS="$$dpdk_ld \
		$(abs_top_builddir)/$(OVS_GPU_PLUGIN_OBJ) $(PCAP_LIBS) \
		$(ISAL_LIBS) $(CUDA_LIBS)"
ovs-build: $(OVS_GPU_PLUGIN_OBJ) ovs-tests-sync
	$(AM_V_at)if test $(OVS_BUILDDIR)/vswitchd/ovs-vswitchd \
			-ot $(OVS_GPU_PLUGIN_OBJ); then \
		rm -f $(OVS_BUILDDIR)/vswitchd/ovs-vswitchd; \
	fi
	$(AM_V_at)$(OVS_DPDK_LD); $(MAKE) $(OVS_MAKE_ARGS) all

all-local: ovs-build

# "make install" installs Open vSwitch as OVS's own "make install" does
# (configured with our directories, above): its programs, ovs-vswitchd
# linked with the plugin, the schema, the man pages (those made from rST,
# ovs-actions(7) among them, when sphinx-build was found), the Python
# library; and ovs-gpu(7) beside them.  OVS's install runs as one make, from
# install-exec-local only: two makes in OVS's tree at once, as a parallel
# install-exec and install-data would start, could race on its files.
dist_man_MANS = docs/ovs-gpu.7
install-exec-local: ovs-build
	$(AM_V_at)$(OVS_DPDK_LD); \
	$(MAKE) $(OVS_MAKE_ARGS) install DESTDIR="$(DESTDIR)"
uninstall-local:
	$(AM_V_at)$(MAKE) -C $(OVS_BUILDDIR) uninstall DESTDIR="$(DESTDIR)"

# Installs into a scratch DESTDIR (install-check/) and checks what is
# there: ovs-vswitchd with the plugin, OVS's programs, the schema, the man
# pages, and that these name every key, action and command of the plugin
# (scripts/check-install).  Log: check-install.log.
check-install: ovs-build
	$(AM_V_at)rm -rf install-check; \
	{ $(MAKE) $(AM_MAKEFLAGS) install \
		DESTDIR=$(abs_builddir)/install-check \
		|| echo "install check failed: make install failed"; } \
		> check-install.log 2>&1; \
	$(srcdir)/scripts/check-install $(abs_srcdir) $(OVS_BUILDDIR) \
		$(abs_builddir)/install-check $(bindir) $(sbindir) \
		$(datadir)/openvswitch $(mandir) >> check-install.log 2>&1; \
	status=$$?; \
	if grep -q '^install check failed: make install' check-install.log; then \
		status=1; \
	fi; \
	grep '^install check' check-install.log; \
	$(LAYER_RESULT) record install-check "install check" $$status; \
	exit $$status

# OVS's testsuite, with ovs-gpu's tests.  OVS_TESTS selects test files (by
# name, from OVS's tests/ folder); TESTSUITEFLAGS is passed on (e.g. -j2).
OVS_TESTS ?= ovs-gpu.at ovs-gpu-actions.at ovs-gpu-re.at ovs-gpu-fec.at \
	ovs-gpu-index.at ovs-gpu-dpcls.at ovs-gpu-async.at ovs-gpu-faults.at \
	ovs-gpu-hold.at \
	dpif-netdev.at pmd.at
# Each layer below leaves a record in results/ (tests/layer-result) for
# scripts/test-summary.  Autotest keeps the folders of failed tests only,
# so the old ones go first.
LAYER_RESULT = $(SHELL) $(abs_srcdir)/tests/layer-result
# Runs the selected tests, and those that fail once more (why: the
# script's comment); a test that passed only the second time is named in
# the summary.
OVS_TESTSUITE_RUN = $(SHELL) $(abs_srcdir)/tests/ovs-testsuite-run
check-ovs: ovs-build
	$(AM_V_at)nums=`cd $(OVS_BUILDDIR)/tests && ./testsuite -l \
		| $(abs_srcdir)/scripts/at-select $(OVS_TESTS)`; \
	test -n "$$nums" || { echo "no OVS tests selected"; \
		$(LAYER_RESULT) record ovs-testsuite "OVS testsuite" 1; \
		exit 1; }; \
	$(SANITIZER_ENV) MAKE="$(MAKE)" $(OVS_TESTSUITE_RUN) \
		$(OVS_BUILDDIR) testsuite-ovs.first.log $$nums \
		$(TESTSUITEFLAGS); \
	status=$$?; \
	cp $(OVS_BUILDDIR)/tests/testsuite.log testsuite-ovs.log; \
	$(LAYER_RESULT) autotest ovs-testsuite "OVS testsuite" $$status \
		$(OVS_BUILDDIR)/tests `echo $$nums | wc -w` \
		testsuite-ovs.first.log; \
	exit $$status

# OVS's own datapath tests again, with the megaflow offload forced on for
# every dpcls (no subtable threshold, no cost policy) and every answer
# validated against OVS's own lookup: a difference logs a warning, which
# fails the test.  Lookups go through the asynchronous path (bursts held
# while their lookups are out, patch 0007), as by default.
OVS_OFFLOAD_TESTS ?= dpif-netdev.at pmd.at ofproto-dpif.at
OVS_GPU_FORCED_CONFIG = gpu-offload=true,gpu-dpcls-policy=always,gpu-dpcls-min-subtables=0,gpu-validate=true
check-ovs-offload: ovs-build
	$(AM_V_at)nums=`cd $(OVS_BUILDDIR)/tests && ./testsuite -l \
		| $(abs_srcdir)/scripts/at-select $(OVS_OFFLOAD_TESTS)`; \
	test -n "$$nums" || { echo "no OVS tests selected"; \
		$(LAYER_RESULT) record ovs-testsuite-offload \
			"OVS testsuite, offload forced" 1; \
		exit 1; }; \
	rm -f offload-stats.txt; \
	$(SANITIZER_ENV) MAKE="$(MAKE)" \
	OVS_GPU_TEST_CONFIG="$(OVS_GPU_FORCED_CONFIG)" \
	OVS_GPU_TEST_STATS=$(abs_builddir)/offload-stats.txt \
	$(OVS_TESTSUITE_RUN) $(OVS_BUILDDIR) testsuite-offload.first.log \
		$$nums $(TESTSUITEFLAGS); \
	status=$$?; \
	cp $(OVS_BUILDDIR)/tests/testsuite.log testsuite-offload.log; \
	awk '{ n++; if ($$2 > 0) used++; lookups += $$2; mism += $$4 } \
	     END { printf "offload: %d of %d ovs-vswitchd runs used it, " \
	           "%d lookups offloaded, %d validation mismatches\n", \
	           used, n, lookups, mism; exit mism > 0 }' \
		offload-stats.txt | tee -a testsuite-offload.log || status=1; \
	$(LAYER_RESULT) autotest ovs-testsuite-offload \
		"OVS testsuite, offload forced" $$status $(OVS_BUILDDIR)/tests \
		`echo $$nums | wc -w` testsuite-offload.first.log; \
	exit $$status

clean-local:
	rm -rf $(OVS_BUILDDIR) $(OVS_BUILDDIR).tmp install-check results \
		$(SANITIZERS_BUILDDIR)

.PHONY: ovs-build ovs-tests-sync check-ovs check-ovs-offload

# The DPDK smoke test: the demo's setup (ovs-vswitchd with DPDK pcap ports,
# no hugepages) on a small pcap, checking what came out.
# Built without DPDK it cannot run, and fails: "scripts/ovs-gpu test"
# installs DPDK, and a skip would hide that configure did not find it.
check-dpdk-smoke: ovs-build
if HAVE_DPDK
	$(AM_V_at)RUN=$(abs_top_builddir)/smoke $(LAYER_RESULT) run \
		--id dpdk-smoke --name "DPDK smoke" $(srcdir)/scripts/demo.sh \
		$(abs_top_builddir) --smoke --count 2000 > dpdk-smoke.log 2>&1; \
	status=$$?; tail -3 dpdk-smoke.log; exit $$status
else
	@echo "DPDK smoke test FAILED: built without DPDK" | tee dpdk-smoke.log
	@$(LAYER_RESULT) record dpdk-smoke "DPDK smoke" 1
	@exit 1
endif

# The service actions that make and rewrite packets, the fec pair and the
# re pair, through ovs-vswitchd with DPDK pcap ports on the CPU backend
# (scripts/bench-services-switch.sh --check): every frame the fec pair
# delivers is one of the input's, lost frames are rebuilt, parity comes
# from the services' mbuf pool, and the re pair across two bridges gives
# back the input byte for byte and in order, as re_decode alone does
# replaying what re_encode made (taking up the link again each pass and
# mid-pass); then drop-mode gpu_ids
# holding DPDK's mbufs, on a switch that alternates it with no service
# (--alternate), drops exactly what it matched, and alert-mode gpu_ids,
# the trace sent once, scans every frame and matches exactly the packets
# the signature was planted in.  One service packet in 3 comes from the
# heap (BENCH_PKT_HEAP), so that batches mix mbufs and heap packets as an
# empty pool makes them.  The dummy datapath of the autotests has no
# mbufs, so this is where the DPDK side of the services is tested.
check-dpdk-services: ovs-build
if HAVE_DPDK
	$(AM_V_at)b=$(abs_top_builddir)/ovs; \
	PATH=$$b/utilities:$$b/vswitchd:$$b/ovsdb:$$PATH \
		VSWITCH_SCHEMA=$$b/vswitchd/vswitch.ovsschema BENCH_PKT_HEAP=3 \
		$(LAYER_RESULT) run --id dpdk-services --name "DPDK services" \
		$(SHELL) -c '$(srcdir)/scripts/bench-services-switch.sh --check \
		--rules data/snort-community/community.rules \
		--text data/snort-community/community.rules \
		--services "fec re re-dec" --backends cpu --seconds 1 \
		--count 3000 \
		&& $(srcdir)/scripts/bench-services-switch.sh --check \
		--rules data/snort-community/community.rules \
		--services "ids-drop ids-alert" --alternate 1 --backends cpu \
		--seconds 1 --count 3000 --out dpdk-services-ids.txt' \
		> dpdk-services.log 2>&1; \
	status=$$?; tail -6 dpdk-services.log; exit $$status
else
	@echo "DPDK services test FAILED: built without DPDK" \
		| tee dpdk-services.log
	@$(LAYER_RESULT) record dpdk-services "DPDK services" 1
	@exit 1
endif

# One after the other: both keep cores busy (PMD threads), and OVS's
# tests have timeouts.  Both run even if the first fails.  The sanitized
# cmocka tests (tests/sanitizers.mk) come last, for the same timeouts.
CHECK_LOCAL_LAYERS = ovs-testsuite ovs-testsuite-offload dpdk-smoke \
	dpdk-services dpcls-peer install-check
check-local:
	$(AM_V_at)for l in $(CHECK_LOCAL_LAYERS); do \
		rm -f results/$$l.result; \
	done
	$(AM_V_at)status=0; \
	$(MAKE) $(AM_MAKEFLAGS) check-ovs || status=1; \
	$(MAKE) $(AM_MAKEFLAGS) check-ovs-offload || status=1; \
	$(MAKE) $(AM_MAKEFLAGS) check-dpdk-smoke || status=1; \
	$(MAKE) $(AM_MAKEFLAGS) check-dpdk-services || status=1; \
	$(MAKE) $(AM_MAKEFLAGS) check-dpcls-peer || status=1; \
	$(MAKE) $(AM_MAKEFLAGS) check-install || status=1; \
	$(MAKE) $(AM_MAKEFLAGS) check-sanitizers || status=1; \
	exit $$status
.PHONY: check-dpdk-smoke check-dpdk-services check-install
