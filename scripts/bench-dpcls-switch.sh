#!/bin/bash
# Packets per second of ovs-vswitchd forwarding traffic that hits M
# megaflow masks, with the megaflow offload off and on, side by side.
#
#   bench-dpcls-switch.sh [--masks "1 8 32 128 512"] [--seconds S]
#                         [--classifier auto] [--min-subtables N]
#                         [--out FILE]
#
# --min-subtables is gpu-dpcls-min-subtables for the "on" runs: 0 (the
# default here) offloads every dpcls; 20 (the switch's default) shows
# what a default switch does.
#
# Setup: see switch-bench-lib.sh; EMC off; megaflows installed straight
# into the datapath (upcalls and revalidators held off), one per mask;
# rate from pmd-stats-show over a fixed interval.
set -e -o pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
MASKS="1 8 32 128 512"
SECONDS_PER_RUN=5
CLASSIFIER=auto
MIN_SUBTABLES=0
OUTFILE=
while test $# -gt 0; do
    case $1 in
        --masks) MASKS=$2; shift ;;
        --seconds) SECONDS_PER_RUN=$2; shift ;;
        --classifier) CLASSIFIER=$2; shift ;;
        --min-subtables) MIN_SUBTABLES=$2; shift ;;
        --out) OUTFILE=$2; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

. "$SRC/scripts/switch-bench-lib.sh"

printf '%-6s %12s %10s %12s %10s %8s %12s %10s\n' masks "off Mpps" \
    "subt/hit" "on Mpps" "speedup" "batch" "lat us" "backend" \
    | tee ${OUTFILE:+"$OUTFILE"}
for m in $MASKS; do
    python3 "$SRC/scripts/gen-masks.py" --masks "$m" --pcap "$RUN/m$m.pcap" \
        --flows "$RUN/m$m.flows" > /dev/null
    start_switch "$RUN/m$m.pcap" gpu-offload=false \
        gpu-classifier=$CLASSIFIER gpu-dpcls-min-subtables=$MIN_SUBTABLES
    ovs-appctl upcall/set-flow-limit 0 >/dev/null
    ovs-appctl revalidator/pause
    in=$(dp_port p0)
    out=$(dp_port p1)
    ovs-appctl dpctl/del-flows
    sed "s/^in_port(1)/in_port($in)/; s/ 2\$/ $out/" "$RUN/m$m.flows" \
        | while read -r key action; do
            ovs-appctl dpctl/add-flow "$key" "$action" > /dev/null
        done
    # Traffic flows from the start, and until the megaflows above were in,
    # missed packets went up and installed a broad megaflow (NORMAL: one
    # MAC pair, everything else wildcarded; the flow limit has a floor of
    # 1000 in the upcall path).  OVS then found every packet in that one
    # subtable (the 1.00 subtables per hit of earlier H100 runs).  Delete
    # such flows (exact Ethernet source; ours wildcard it) now that ours
    # take every packet.  del-flow reports ENOENT for the main thread,
    # which never had them.
    for ufid in $(ovs-appctl dpctl/dump-flows -m | sed -n '/^ufid:/ {
            /eth(src=00:00:00:00:00:00\/00:00:00:00:00:00/ !s/^\(ufid:[^,]*\),.*/\1/p
        }'); do
        ovs-appctl dpctl/del-flow "$ufid" > /dev/null 2>&1 || true
    done

    nflows=$(ovs-appctl dpctl/dump-flows | grep -c 'actions:')
    nours=$(grep -c . "$RUN/m$m.flows")
    if test "$nflows" -ne $((2 * nours)); then
        echo "warning: $nflows datapath flows for $nours megaflows" \
             "(one in the PMD and one in the main thread each)" >&2
    fi
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
