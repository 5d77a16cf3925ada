# The plugin is the only part of ovs-gpu that includes Open vSwitch's
# headers, so it is compiled after OVS is configured and its generated
# headers exist (see ovs.mk), with OVS's own config.h.
noinst_LIBRARIES += ovs_plugin/libovsgpuplugin.a
ovs_plugin_libovsgpuplugin_a_SOURCES = \
	ovs_plugin/gpu-actions.c \
	ovs_plugin/gpu-actions.h \
	ovs_plugin/gpu-dpcls.c \
	ovs_plugin/gpu-dpcls.h \
	ovs_plugin/gpu-fec-service.c \
	ovs_plugin/gpu-fec-service.h \
	ovs_plugin/gpu-ids-service.c \
	ovs_plugin/gpu-ids-service.h \
	ovs_plugin/gpu-index-service.c \
	ovs_plugin/gpu-index-service.h \
	ovs_plugin/gpu-plugin.c \
	ovs_plugin/gpu-plugin.h \
	ovs_plugin/gpu-re-service.c \
	ovs_plugin/gpu-re-service.h
ovs_plugin_libovsgpuplugin_a_CPPFLAGS = \
	-DOVS_GPU_VERSION='"$(PACKAGE_VERSION)"' \
	-I$(OVS_BUILDDIR) -I$(OVS_BUILDDIR)/include -I$(OVS_BUILDDIR)/lib \
	-I$(OVS_BUILDDIR)/vswitchd -I$(top_srcdir) $(CUDA_CFLAGS)
if HAVE_DPDK
ovs_plugin_libovsgpuplugin_a_CPPFLAGS += $(DPDK_CFLAGS)
endif
# OVS's headers are not written for -Wextra; the classifier's shared
# per-element header carries nvcc's "#pragma unroll".
ovs_plugin_libovsgpuplugin_a_CFLAGS = -Wall -std=gnu11 -g -O2 \
	-Wno-unknown-pragmas
$(ovs_plugin_libovsgpuplugin_a_OBJECTS): $(OVS_STAMP_LIBS)
