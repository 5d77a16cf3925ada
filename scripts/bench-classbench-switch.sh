#!/bin/bash
# A realistic table: ovs-vswitchd forwarding a ClassBench header trace
# through the ClassBench filter set it was made for, installed as OpenFlow
# rules (as the demo installs them), with OVS's default EMC and SMC
# settings.  Megaflows come from upcalls, as in production; the rate is
# measured once they have settled.  Stock OVS's lookup and the offload,
# in the same switch one after the other.
#
#   bench-classbench-switch.sh [--sets "fw1_10000 acl1_10000"]
#                              [--packets N] [--seconds S] [--data DIR]
#                              [--configs "NAME=KEY=VALUE,... ..."]
#                              [--out FILE]
#
# --data: the folder with the filter sets and traces (default: the
#   repository's data/classbench).
# --packets: packets in the replayed pcap, made from the trace (its
#   headers in order, cycled; default 100000).
set -e -o pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
SETS="fw1_10000 acl1_10000"
PACKETS=100000
SECONDS_PER_RUN=5
DATA=$SRC/data/classbench
OUTFILE=
CONFIGS="default=
forced=gpu-dpcls-policy=always,gpu-dpcls-min-subtables=0"
while test $# -gt 0; do
    case $1 in
        --sets) SETS=$2; shift ;;
        --packets) PACKETS=$2; shift ;;
        --seconds) SECONDS_PER_RUN=$2; shift ;;
        --data) DATA=$2; shift ;;
        --configs) CONFIGS=$(echo "$2" | tr ' ' '\n'); shift ;;
        --out) OUTFILE=$2; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

. "$SRC/scripts/switch-bench-lib.sh"

# flow_figures: megaflows in the PMD's datapath and their distinct masks
# (subtables) from gpu/dpcls-show's busiest dpcls.
flow_figures() {
    local n
    n=$(ovs-appctl dpctl/dump-flows | grep -c 'actions:' || true)
    echo "$n $(ovs-appctl gpu/dpcls-show | awk '/^  subtables:/ {
        if ($2 > max) max = $2 } END { print max + 0 }')"
}

printf '%-11s %-8s %10s %8s %10s %9s %10s %7s %7s %7s\n' set config Mpps \
    "vs off" megaflows subtables subt/hit "emc %" "smc %" "mf %" \
    | tee ${OUTFILE:+"$OUTFILE"}
for set in $SETS; do
    filters=$DATA/$set
    trace=$DATA/${set}_trace.gz
    for f in "$filters" "$trace"; do
        if test ! -f "$f" && test ! -f "$f.gz"; then
            echo "bench-classbench-switch: $f: not found" >&2
            exit 1
        fi
    done
    test -f "$filters" || { gunzip -c "$filters.gz" > "$RUN/$set"; \
                            filters=$RUN/$set; }
    python3 "$SRC/scripts/gen-pcap.py" --out "$RUN/$set.pcap" \
        --trace "$trace" --count "$PACKETS" > /dev/null
    python3 "$SRC/scripts/classbench-flows.py" flows "$filters" \
        --count 100000 \
        | sed 's/in_port=1\b/in_port=p0/; s/output:2\b/output:p1/' \
        > "$RUN/$set.flows"
    # OVS's defaults: EMC inserts 1 in 100, SMC off.
    start_switch "$RUN/$set.pcap" gpu-offload=false \
        emc-insert-inv-prob=100
    ovs-ofctl add-flows br0 "$RUN/$set.flows"
    sleep 3         # upcalls install the megaflows
    for cfg in "off=" $CONFIGS; do
        name=${cfg%%=*}
        if test "$name" = off; then
            ovs-vsctl set Open_vSwitch . other_config:gpu-offload=false
        else
            set_config "${cfg#*=}"
        fi
        sleep 2
        ovs-appctl gpu/dpcls-stats-clear
        read mpps lookups < <(measure)
        test "$name" = off && off=$mpps
        stats=$(ovs-appctl dpif-netdev/pmd-stats-show)
        read emc smc mf < <(echo "$stats" | awk '
            /^pmd thread/ { p = 1 } /^main thread/ { p = 0 }
            p && /packets received:/ { rx = $3 }
            p && /emc hits:/ { emc = $3 } p && /smc hits:/ { smc = $3 }
            p && /megaflow hits:/ { mf = $3 }
            END { if (!rx) rx = 1
                  printf "%.1f %.1f %.1f\n", 100 * emc / rx, 100 * smc / rx,
                         100 * mf / rx }')
        read nflows nmasks < <(flow_figures)
        printf '%-11s %-8s %10s %8s %10s %9s %10s %7s %7s %7s\n' "$set" \
            "$name" "$mpps" \
            "$(awk -v a="$mpps" -v b="$off" 'BEGIN { printf "%.2fx", a / b }')" \
            "$nflows" "$nmasks" "$lookups" "$emc" "$smc" "$mf" \
            | tee -a ${OUTFILE:+"$OUTFILE"}
        if test -n "$OUTFILE"; then
            {
                echo "=== $set, $name: ${cfg#*=}"
                echo "$stats"
                ovs-appctl gpu/dpcls-show
            } >> "$OUTFILE.details"
        fi
    done
    stop_switch
done
