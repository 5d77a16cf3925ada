# Shared by the switch benchmarks (bench-dpcls-switch.sh,
# bench-ids-switch.sh): one ovs-vswitchd with DPDK (without hugepages
# unless BENCH_HUGEPAGES=yes), one
# PMD thread on the last core, port p0 a net_pcap replaying a pcap
# forever, p1 a net_null sink (as in docs/BASELINES.md).  Sourced,
# not run.
#
# The OVS programs come from PATH (a build's ovs/ folders, or a bundle
# made by make-device-bundle.sh); VSWITCH_SCHEMA names vswitch.ovsschema;
# DPDK_PMD_ARGS may add "-d LIB" options for DPDK's pcap and null drivers.
# The run's folder (and gpu_index's stores, inside it) is made in TMPDIR
# (default /tmp): TMPDIR=/dev/shm tells a disk-bound recorder from one
# that is not.
#
# BENCH_HUGEPAGES=yes in the environment: DPDK's memory (its mbuf pools,
# the services' packet pool, net_pcap's copy of the trace) in 2 MB
# hugepages, as OVS-DPDK runs in production, instead of --no-huge's 4 kB
# pages; the pages are reserved and hugetlbfs mounted here if need be
# (and given back and unmounted at the end), and the benchmark fails if
# they cannot be.  Default: no.

RUN=$(mktemp -d "${TMPDIR:-/tmp}/ovsgpu-bench.XXXXXX")
export OVS_RUNDIR=$RUN OVS_LOGDIR=$RUN OVS_DBDIR=$RUN OVS_SYSCONFDIR=$RUN
bench_cleanup() {
    ovs-appctl -t ovs-vswitchd exit --cleanup >/dev/null 2>&1 || true
    ovs-appctl -t ovsdb-server exit >/dev/null 2>&1 || true
    # A switch that did not exit would hold the netdev datapath's tap
    # device and fail the next run's bridge.
    for p in ovs-vswitchd ovsdb-server; do
        kill -9 "$(cat "$RUN/$p.pid" 2>/dev/null)" 2>/dev/null || true
    done
    rm -rf "/var/run/dpdk/ovsgpu-bench-$$"
    # What dpdk_memory() reserved or mounted goes back.
    if test -n "${hugepages_before:-}"; then
        echo "$hugepages_before" > /proc/sys/vm/nr_hugepages || true
    fi
    if test -n "${hugetlbfs_mounted:-}"; then
        umount /dev/hugepages || true
    fi
}
trap bench_cleanup EXIT

# dpdk_memory MB: DPDK's memory options for MB megabytes, in $dpdk_mem.
dpdk_memory() {
    local mb=$1 need free total
    case ${BENCH_HUGEPAGES:-no} in
    no)
        dpdk_mem="--no-huge --legacy-mem -m $mb" ;;
    yes)
        need=$((mb / 2 + 32))
        if ! grep -qs ' hugetlbfs ' /proc/mounts; then
            mkdir -p /dev/hugepages
            mount -t hugetlbfs nodev /dev/hugepages || {
                echo "BENCH_HUGEPAGES=yes: hugetlbfs cannot be mounted" >&2
                return 1
            }
            hugetlbfs_mounted=1
        fi
        free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
        if test "$free" -lt "$need"; then
            total=$(awk '/^HugePages_Total:/ { print $2 }' /proc/meminfo)
            hugepages_before=${hugepages_before:-$total}
            echo $((total + need - free)) > /proc/sys/vm/nr_hugepages \
                2>/dev/null || true
            free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
        fi
        if test "$free" -lt "$need"; then
            echo "BENCH_HUGEPAGES=yes: $free free 2 MB pages, $need" \
                 "needed" >&2
            return 1
        fi
        # Unlinked once mapped, so that they go back when the switch
        # exits, however it exits.
        dpdk_mem="--legacy-mem --huge-unlink -m $mb" ;;
    *)
        echo "BENCH_HUGEPAGES: yes or no, not $BENCH_HUGEPAGES" >&2
        return 1 ;;
    esac
}

ncores=$(nproc)
# The PMD on the last core, away from the main thread, or on core
# BENCH_PMD_CORE (e.g. one that no device's interrupts go to); with
# N_PORTS sources (bench-dpcls-switch.sh --pmds), one PMD each on that
# core and the N_PORTS - 1 below it.
pmd_core=${BENCH_PMD_CORE:-$((ncores - 1))}
case $pmd_core in
*[!0-9]*|'')
    echo "BENCH_PMD_CORE: a core number, not \"$pmd_core\"" >&2
    return 1 ;;
esac
if test "$pmd_core" -ge "$ncores"; then
    echo "BENCH_PMD_CORE=$pmd_core: this machine has cores 0 to" \
         "$((ncores - 1))" >&2
    return 1
fi

# src_port I: the name of source port I (p0, then q1, q2, ...).
src_port() {
    if test "$1" = 0; then echo p0; else echo "q$1"; fi
}

# start_switch PCAP [KEY=VALUE...]: starts the switch replaying PCAP, with
# the given other_config settings.  SINK_DEVARGS replaces p1's DPDK device
# (e.g. "net_pcap9,tx_pcap=FILE" to keep what it sends); with PCAP "-" no
# source port is added yet (add_sources, once the flows are in).
start_switch() {
    local pcap=$1
    shift
    local settings=
    for kv in "$@"; do
        settings="$settings other_config:$kv"
    done
    local n_ports=${N_PORTS:-1} i pmd_mask=0
    if test $((pmd_core + 1)) -lt "$n_ports"; then
        echo "$n_ports PMDs do not fit on cores $pmd_core and below" >&2
        return 1
    fi
    for i in $(seq 0 $((n_ports - 1))); do
        pmd_mask=$((pmd_mask | (1 << (pmd_core - i))))
    done
    pmd_mask=$(printf '0x%x' $pmd_mask)
    ovsdb-tool create "$RUN/conf.db" "$VSWITCH_SCHEMA"
    ovsdb-server "$RUN/conf.db" --remote=punix:"$RUN/db.sock" --pidfile \
        --detach --log-file
    ovs-vsctl --no-wait init
    dpdk_memory $((2048 + 512 * n_ports))
    ovs-vsctl --no-wait set Open_vSwitch . \
        other_config:dpdk-init=true \
        other_config:dpdk-extra="$dpdk_mem --no-pci --file-prefix=ovsgpu-bench-$$ $DPDK_PMD_ARGS" \
        other_config:pmd-cpu-mask=$pmd_mask \
        other_config:emc-insert-inv-prob=0 $settings
    ovs-vswitchd unix:"$RUN/db.sock" --pidfile --detach --log-file
    ovs-vsctl add-br br0 -- set bridge br0 datapath_type=netdev
    ovs-vsctl add-port br0 p1 -- set Interface p1 type=dpdk \
        options:dpdk-devargs="${SINK_DEVARGS:-net_null0,no-rx=1}"
    test "$pcap" = - || add_sources br0 "$pcap" 1
}

# add_sources BRIDGE PCAP INFINITE: adds the N_PORTS source ports to
# BRIDGE, each replaying PCAP forever (INFINITE 1) or once (0).  Source
# port I is OpenFlow port 10 + I, so that flows can name it before it
# exists.
add_sources() {
    local i
    for i in $(seq 0 $((${N_PORTS:-1} - 1))); do
        ovs-vsctl add-port $1 $(src_port $i) \
            -- set Interface $(src_port $i) type=dpdk \
            options:dpdk-devargs="net_pcap$i,rx_pcap=$2,infinite_rx=$3" \
            ofport_request=$((10 + i)) \
            other_config:pmd-rxq-affinity="0:$((pmd_core - i))"
    done
    if test -z "$(dp_port p0)"; then
        echo "switch-bench-lib: the switch did not start its ports:" >&2
        grep -E 'ERR|WARN' "$RUN/ovs-vswitchd.log" | tail -5 >&2
        return 1
    fi
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

# dp_tx PORT: what PORT has sent, asked of the port itself (DPDK ports'
# statistics reach the database only every few seconds).
dp_tx() {
    ovs-appctl dpctl/show -s | awk -v port="$1" '
        $0 ~ ": " port "( |$)" { p = 1; next }
        p && /TX packets:/ { sub("packets:", "", $2); print $2; exit }'
}

# measure [PORT]: prints the PMD's received packets per second (millions)
# over SECONDS_PER_RUN, and its average subtable lookups per megaflow hit;
# with PORT, then the packets per second PORT sent (millions).
measure() {
    ovs-appctl dpif-netdev/pmd-stats-clear
    sleep 1
    ovs-appctl dpif-netdev/pmd-stats-clear
    local tx0=0 tx1=0
    test -n "${1:-}" && tx0=$(dp_tx "$1")
    local t0=$(date +%s.%N)
    sleep "$SECONDS_PER_RUN"
    local stats=$(ovs-appctl dpif-netdev/pmd-stats-show)
    test -n "${1:-}" && tx1=$(dp_tx "$1")
    local t1=$(date +%s.%N)
    # Every PMD's packets (the main thread polls no DPDK port).
    local rx=$(echo "$stats" | awk '/^pmd thread/ { p = 1 } p && /packets received:/ { s += $3 } END { print s }')
    local lookups=$(echo "$stats" | awk '/^pmd thread/ { p = 1 } p && /avg. subtable lookups per megaflow hit:/ { print $7; exit }')
    awk -v rx="$rx" -v t0="$t0" -v t1="$t1" -v l="$lookups" \
        -v tx="$((tx1 - tx0))" -v port="${1:-}" \
        'BEGIN { printf "%.3f %s", rx / (t1 - t0) / 1e6, l
                 if (port != "") printf " %.3f", tx / (t1 - t0) / 1e6
                 printf "\n" }'
}

# set_config SETTINGS: other_config from "k=v,k=v", on top of the
# defaults (each run starts from no gpu-* key but gpu-offload).
set_config() {
    local keys
    keys=$(ovs-vsctl get Open_vSwitch . other_config \
           | tr -d '{}" ' | tr ',' '\n' | sed -n 's/^\(gpu-[^=]*\)=.*/\1/p')
    for k in $keys; do
        ovs-vsctl remove Open_vSwitch . other_config "$k"
    done
    # gpu-offload=true unless the configuration says otherwise (an "off"
    # run again, after the others, shows how much the machine drifts).
    local args="other_config:gpu-offload=true"
    case ",$1," in *,gpu-offload=*) args= ;; esac
    for kv in $(echo "$1" | tr ',' ' '); do
        args="$args other_config:$kv"
    done
    ovs-vsctl set Open_vSwitch . $args
}
