# Shared by the switch benchmarks (bench-dpcls-switch.sh,
# bench-ids-switch.sh): one ovs-vswitchd with DPDK without hugepages, one
# PMD thread on the last core, port p0 a net_pcap replaying a pcap
# forever, p1 a net_null sink (as in docs/BASELINES.md).  Sourced,
# not run.
#
# The OVS programs come from PATH (a build's ovs/ folders, or a bundle
# made by make-device-bundle.sh); VSWITCH_SCHEMA names vswitch.ovsschema;
# DPDK_PMD_ARGS may add "-d LIB" options for DPDK's pcap and null drivers.

RUN=$(mktemp -d /tmp/ovsgpu-bench.XXXXXX)
export OVS_RUNDIR=$RUN OVS_LOGDIR=$RUN OVS_DBDIR=$RUN OVS_SYSCONFDIR=$RUN
bench_cleanup() {
    ovs-appctl -t ovs-vswitchd exit --cleanup >/dev/null 2>&1 || true
    ovs-appctl -t ovsdb-server exit >/dev/null 2>&1 || true
    rm -rf "/var/run/dpdk/ovsgpu-bench-$$"
}
trap bench_cleanup EXIT

ncores=$(nproc)
# The PMD on the last core, away from the main thread.
pmd_core=$((ncores - 1))
pmd_mask=$(printf '0x%x' $((1 << pmd_core)))

# start_switch PCAP [KEY=VALUE...]: starts the switch replaying PCAP, with
# the given other_config settings.
start_switch() {
    local pcap=$1
    shift
    local settings=
    for kv in "$@"; do
        settings="$settings other_config:$kv"
    done
    ovsdb-tool create "$RUN/conf.db" "$VSWITCH_SCHEMA"
    ovsdb-server "$RUN/conf.db" --remote=punix:"$RUN/db.sock" --pidfile \
        --detach --log-file
    ovs-vsctl --no-wait init
    ovs-vsctl --no-wait set Open_vSwitch . \
        other_config:dpdk-init=true \
        other_config:dpdk-extra="--no-huge --legacy-mem -m 2048 --no-pci --file-prefix=ovsgpu-bench-$$ $DPDK_PMD_ARGS" \
        other_config:pmd-cpu-mask=$pmd_mask \
        other_config:emc-insert-inv-prob=0 $settings
    ovs-vswitchd unix:"$RUN/db.sock" --pidfile --detach --log-file
    ovs-vsctl add-br br0 -- set bridge br0 datapath_type=netdev
    ovs-vsctl add-port br0 p1 -- set Interface p1 type=dpdk \
        options:dpdk-devargs="net_null0,no-rx=1"
    ovs-vsctl add-port br0 p0 -- set Interface p0 type=dpdk \
        options:dpdk-devargs="net_pcap0,rx_pcap=$pcap,infinite_rx=1"
}

stop_switch() {
    local pid
    for p in ovs-vswitchd ovsdb-server; do
        pid=$(cat "$RUN/$p.pid" 2>/dev/null) || continue
        ovs-appctl -t $p exit $(test $p = ovs-vswitchd && echo --cleanup) \
            >/dev/null 2>&1 || kill "$pid" 2>/dev/null
        for i in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -f "$RUN/conf.db" "$RUN"/*.pid
}

# dp_port NAME: the datapath port number of NAME.
dp_port() {
    ovs-appctl dpctl/show | sed -n "s/^  port \([0-9]*\): $1 .*/\1/p"
}

# measure: prints the PMD's received packets per second (millions) over
# SECONDS_PER_RUN, and its average subtable lookups per megaflow hit.
measure() {
    ovs-appctl dpif-netdev/pmd-stats-clear
    sleep 1
    ovs-appctl dpif-netdev/pmd-stats-clear
    local t0=$(date +%s.%N)
    sleep "$SECONDS_PER_RUN"
    local stats=$(ovs-appctl dpif-netdev/pmd-stats-show)
    local t1=$(date +%s.%N)
    local rx=$(echo "$stats" | awk '/^pmd thread/ { p = 1 } p && /packets received:/ { print $3; exit }')
    local lookups=$(echo "$stats" | awk '/^pmd thread/ { p = 1 } p && /avg. subtable lookups per megaflow hit:/ { print $7; exit }')
    awk -v rx="$rx" -v t0="$t0" -v t1="$t1" -v l="$lookups" \
        'BEGIN { printf "%.3f %s\n", rx / (t1 - t0) / 1e6, l }'
}
