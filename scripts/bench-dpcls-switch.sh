#!/bin/bash
# Packets per second of ovs-vswitchd forwarding traffic that hits M
# megaflow masks, with the megaflow offload off and on, side by side.
#
#   bench-dpcls-switch.sh [--masks "1 8 32 128 512"] [--seconds S]
#                         [--classifier auto] [--out FILE]
#
# The OVS programs come from PATH (a build's ovs/ folders, or a bundle
# made by make-device-bundle.sh); VSWITCH_SCHEMA names vswitch.ovsschema;
# DPDK_PMD_ARGS may add "-d LIB" options for DPDK's pcap and null drivers.
#
# Setup (as in ../shared/BASELINES.md): DPDK without hugepages, one PMD
# thread, port p0 a net_pcap replaying the pcap forever, p1 a net_null
# sink; EMC off; megaflows installed straight into the datapath (upcalls
# and revalidators held off), one per mask; rate from pmd-stats-show over
# a fixed interval.
set -e -o pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
MASKS="1 8 32 128 512"
SECONDS_PER_RUN=5
CLASSIFIER=auto
OUTFILE=
while test $# -gt 0; do
    case $1 in
        --masks) MASKS=$2; shift ;;
        --seconds) SECONDS_PER_RUN=$2; shift ;;
        --classifier) CLASSIFIER=$2; shift ;;
        --out) OUTFILE=$2; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

RUN=$(mktemp -d /tmp/ovsgpu-bench.XXXXXX)
export OVS_RUNDIR=$RUN OVS_LOGDIR=$RUN OVS_DBDIR=$RUN OVS_SYSCONFDIR=$RUN
cleanup() {
    ovs-appctl -t ovs-vswitchd exit --cleanup >/dev/null 2>&1 || true
    ovs-appctl -t ovsdb-server exit >/dev/null 2>&1 || true
    rm -rf "/var/run/dpdk/ovsgpu-bench-$$"
}
trap cleanup EXIT

ncores=$(nproc)
# The PMD on the last core, away from the main thread.
pmd_core=$((ncores - 1))
pmd_mask=$(printf '0x%x' $((1 << pmd_core)))

start_switch() {
    local pcap=$1
    ovsdb-tool create "$RUN/conf.db" "$VSWITCH_SCHEMA"
    ovsdb-server "$RUN/conf.db" --remote=punix:"$RUN/db.sock" --pidfile \
        --detach --log-file
    ovs-vsctl --no-wait init
    ovs-vsctl --no-wait set Open_vSwitch . \
        other_config:dpdk-init=true \
        other_config:dpdk-extra="--no-huge --legacy-mem -m 2048 --no-pci --file-prefix=ovsgpu-bench-$$ $DPDK_PMD_ARGS" \
        other_config:pmd-cpu-mask=$pmd_mask \
        other_config:emc-insert-inv-prob=0 \
        other_config:gpu-offload=false \
        other_config:gpu-classifier=$CLASSIFIER \
        other_config:gpu-dpcls-min-subtables=0
    ovs-vswitchd unix:"$RUN/db.sock" --pidfile --detach --log-file
    ovs-vsctl add-br br0 -- set bridge br0 datapath_type=netdev
    ovs-vsctl add-port br0 p1 -- set Interface p1 type=dpdk \
        options:dpdk-devargs="net_null0,no-rx=1"
    ovs-vsctl add-port br0 p0 -- set Interface p0 type=dpdk \
        options:dpdk-devargs="net_pcap0,rx_pcap=$pcap,infinite_rx=1"
    ovs-appctl upcall/set-flow-limit 0 >/dev/null
    ovs-appctl revalidator/pause
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

dp_port() {
    ovs-appctl dpctl/show | sed -n "s/^  port \([0-9]*\): $1 .*/\1/p"
}

# Prints the PMD's received packets per second over SECONDS_PER_RUN.
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

printf '%-6s %12s %10s %12s %10s %8s %12s %10s\n' masks "off Mpps" \
    "subt/hit" "on Mpps" "speedup" "batch" "lat us" "backend" \
    | tee ${OUTFILE:+"$OUTFILE"}
for m in $MASKS; do
    python3 "$SRC/scripts/gen-masks.py" --masks "$m" --pcap "$RUN/m$m.pcap" \
        --flows "$RUN/m$m.flows" > /dev/null
    start_switch "$RUN/m$m.pcap"
    in=$(dp_port p0)
    out=$(dp_port p1)
    ovs-appctl dpctl/del-flows
    sed "s/^in_port(1)/in_port($in)/; s/ 2\$/ $out/" "$RUN/m$m.flows" \
        | while read -r key action; do
            ovs-appctl dpctl/add-flow "$key" "$action" > /dev/null
        done

    nflows=$(ovs-appctl dpctl/dump-flows | grep -c 'actions:')
    read off lookups < <(measure)
    ovs-vsctl set Open_vSwitch . other_config:gpu-offload=true
    sleep 1
    read on dummy < <(measure)
    show=$(ovs-appctl gpu/dpcls-show)
    # The PMD's dpcls for p0: the one with the most offloaded lookups.
    busiest=$(echo "$show" | awk '/^pmd / { name = $0 }
        /lookups on GPU:/ && $4 >= max { max = $4; best = name }
        END { print best }')
    block=$(echo "$show" | awk -v b="$busiest" '$0 == b { p = 1; next }
        /^pmd / { p = 0 } p')
    batch=$(echo "$block" | awk '/avg. batch size:/ { print $4 }')
    lat=$(echo "$block" | awk '/avg. batch latency/ { print $5 }')
    backend=$(echo "$block" | awk '/^  backend:/ { print $2 }')
    printf '%-6s %12s %10s %12s %10s %8s %12s %10s\n' "$m" "$off" \
        "$lookups" "$on" \
        "$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.2fx", a / b }')" \
        "$batch" "$lat" "$backend" | tee -a ${OUTFILE:+"$OUTFILE"}
    if test -n "$OUTFILE"; then
        {
            echo "=== $m masks: $nflows datapath flows before, $(ovs-appctl dpctl/dump-flows | grep -c 'actions:') after"
            ovs-appctl dpif-netdev/pmd-stats-show
            echo "$show"
        } >> "$OUTFILE.details"
    fi
    stop_switch
done
