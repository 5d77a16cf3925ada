#!/bin/bash
# Starts ovsdb-server and ovs-vswitchd from BUILD_DIR in a private run
# directory (no DPDK: a dummy-datapath bridge), turns the offload on,
# prints "ovs-appctl gpu/show", and stops them.  Used on the GPU machine,
# which has no DPDK, to show what the plugin finds there.
set -e
BUILD=$(cd "${1:?usage: gpu-show-live.sh BUILD_DIR}" && pwd)
OVS=$BUILD/ovs
RUN=$(mktemp -d)
export OVS_RUNDIR=$RUN OVS_LOGDIR=$RUN OVS_DBDIR=$RUN OVS_SYSCONFDIR=$RUN
export PATH=$OVS/utilities:$OVS/vswitchd:$OVS/ovsdb:$PATH
trap 'ovs-appctl -t ovs-vswitchd exit >/dev/null 2>&1;
      ovs-appctl -t ovsdb-server exit >/dev/null 2>&1; rm -rf "$RUN"' EXIT
ovsdb-tool create "$RUN/conf.db" "$OVS/vswitchd/vswitch.ovsschema"
ovsdb-server "$RUN/conf.db" --remote=punix:"$RUN/db.sock" --pidfile \
    --detach --log-file
ovs-vsctl --no-wait init
ovs-vswitchd unix:"$RUN/db.sock" --pidfile --detach --log-file \
    --enable-dummy=override
ovs-vsctl set Open_vSwitch . other_config:gpu-offload=true
ovs-vsctl add-br br0 -- set bridge br0 datapath_type=dummy
ovs-appctl gpu/show
grep -E 'gpu_plugin' "$RUN/ovs-vswitchd.log" || true
