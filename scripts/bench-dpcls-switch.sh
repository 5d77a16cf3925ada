#!/bin/bash
# Packets per second of ovs-vswitchd forwarding traffic that hits M
# megaflow masks: stock OVS's lookup (offload off) beside one or more
# offload configurations, measured in the same switch one after another.
#
#   bench-dpcls-switch.sh [--masks "1 8 32 128 512"] [--seconds S]
#                         [--pmds N] [--load PERCENT]
#                         [--configs "NAME=KEY=VALUE,KEY=VALUE ..."]
#                         [--out FILE]
#
# --configs: each NAME=SETTINGS is measured after the "off" run, with
#   gpu-offload=true and SETTINGS (other_config keys, comma-separated).
#   Default: "sync", "burst", "gather" (the designs compared in
#   docs/PERFORMANCE.md, offload forced on every dpcls) and "default"
#   (the switch's default policy, which offloads only where it pays).
# --pmds N: N PMD threads, each polling its own net_pcap port with the
#   same traffic and its own copy of the megaflows; rates are the sum.
# --load P: ingress policing on every port at P% of each
#   configuration's own full-load rate, measured first: hold times
#   at light load.
#
# Setup: see switch-bench-lib.sh; EMC off; megaflows installed straight
# into the datapath (upcalls and revalidators held off), one per mask;
# rate from pmd-stats-show over a fixed interval; GPU busy time sampled by
# nvidia-smi where there is one.
set -e -o pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
MASKS="1 8 32 128 512"
SECONDS_PER_RUN=5
N_PMDS=1
LOAD=
OUTFILE=
FORCED="gpu-dpcls-policy=always,gpu-dpcls-min-subtables=0"
CONFIGS="sync=$FORCED,gpu-dpcls-inflight=0
burst=$FORCED,gpu-dpcls-inflight=8,gpu-max-hold-us=0
gather=$FORCED
default="
while test $# -gt 0; do
    case $1 in
        --masks) MASKS=$2; shift ;;
        --seconds) SECONDS_PER_RUN=$2; shift ;;
        --pmds) N_PMDS=$2; shift ;;
        --load) LOAD=$2; shift ;;
        --configs) CONFIGS=$(echo "$2" | tr ' ' '\n'); shift ;;
        --out) OUTFILE=$2; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

. "$SRC/scripts/switch-bench-lib.sh"

# gpu_busy_start / gpu_busy_stop: the GPU's average utilization (%) over
# the interval, or "-" without nvidia-smi.
gpu_busy_start() {
    if command -v nvidia-smi > /dev/null 2>&1; then
        nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits \
            -lms 100 > "$RUN/util.txt" 2>/dev/null &
        UTIL_PID=$!
    else
        UTIL_PID=
    fi
}
gpu_busy_stop() {
    if test -n "$UTIL_PID"; then
        kill "$UTIL_PID" 2>/dev/null; wait "$UTIL_PID" 2>/dev/null || true
        awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n; else print "-" }' \
            "$RUN/util.txt"
    else
        echo -
    fi
}

# dpcls_figures: keys per classifier call and hold time p50/p99/max over
# the measured interval, from gpu/dpcls-show (the busiest dpcls).
dpcls_figures() {
    ovs-appctl gpu/dpcls-show | awk '
        /^pmd / { name = $0 }
        /held bursts:/ { held[name] = $3; kpc[name] = $7; sub(/\(/, "", kpc[name]) }
        /hold time/ { hold[name] = $5 " " $7 " " $9 }
        /^  policy:/ { pol[name] = $2 }
        /lookups on GPU:/ { if ($4 >= max) { max = $4; best = name } }
        END {
            if (best == "") { print "- - - - -"; exit }
            h = hold[best]; if (h == "") h = "- - -"
            gsub(/,/, "", h)
            printf "%s %s %s\n", (kpc[best] == "" ? "-" : kpc[best]), h,
                   (pol[best] == "" ? "-" : pol[best])
        }'
}

# police PERCENT MPPS: ingress policing on every port at PERCENT of MPPS
# (the ports' total), in kbit/s of 64-byte frames (plus 20 bytes of
# preamble and gap are not counted by OVS's policer: 64 * 8 bits).
police() {
    local kbps
    kbps=$(awk -v p="$1" -v m="$2" -v n="$N_PMDS" \
           'BEGIN { printf "%d", m * 1e6 * p / 100 / n * 64 * 8 / 1000 }')
    for i in $(seq 0 $((N_PMDS - 1))); do
        ovs-vsctl set interface $(src_port $i) ingress_policing_rate=$kbps \
            ingress_policing_burst=$((kbps / 100 + 64))
    done
}

hdr() {
    printf '%-6s %-5s %-9s %10s %8s %8s %9s %7s %7s %8s %6s %-8s\n' \
        masks pmds config Mpps "vs off" subt/hit keys/call "p50 us" \
        "p99 us" "max us" "gpu %" policy
}
row() {
    printf '%-6s %-5s %-9s %10s %8s %8s %9s %7s %7s %8s %6s %-8s\n' "$@"
}

hdr | tee ${OUTFILE:+"$OUTFILE"}
for m in $MASKS; do
    python3 "$SRC/scripts/gen-masks.py" --masks "$m" --pcap "$RUN/m$m.pcap" \
        --flows "$RUN/m$m.flows" > /dev/null
    N_PORTS=$N_PMDS start_switch "$RUN/m$m.pcap" gpu-offload=false
    ovs-appctl upcall/set-flow-limit 0 >/dev/null
    ovs-appctl revalidator/pause
    out=$(dp_port p1)
    ovs-appctl dpctl/del-flows
    for i in $(seq 0 $((N_PMDS - 1))); do
        in=$(dp_port $(src_port $i))
        sed "s/^in_port(1)/in_port($in)/; s/ 2\$/ $out/" "$RUN/m$m.flows"
    done | while read -r key action; do
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

    read off lookups < <(measure)
    row "$m" "$N_PMDS" off "$off" 1.00x "$lookups" - - - - - ovs \
        | tee -a ${OUTFILE:+"$OUTFILE"}
    echo "$CONFIGS" | while IFS= read -r cfg; do
        test -n "$cfg" || continue
        name=${cfg%%=*}
        set_config "${cfg#*=}"
        sleep 1
        if test -n "$LOAD"; then
            read full dummy < <(measure)
            police "$LOAD" "$full"
            sleep 1
        fi
        ovs-appctl gpu/dpcls-stats-clear
        gpu_busy_start
        read on dummy < <(measure)
        busy=$(gpu_busy_stop)
        read kpc p50 p99 max pol < <(dpcls_figures)
        row "$m" "$N_PMDS" "$name${LOAD:+@$LOAD%}" "$on" \
            "$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.2fx", a / b }')" \
            - "$kpc" "$p50" "$p99" "$max" "$busy" "$pol" \
            | tee -a ${OUTFILE:+"$OUTFILE"}
        if test -n "$OUTFILE"; then
            {
                echo "=== $m masks, $N_PMDS PMDs, $name: ${cfg#*=}"
                ovs-appctl dpif-netdev/pmd-stats-show
                ovs-appctl gpu/dpcls-show
            } >> "$OUTFILE.details"
        fi
        if test -n "$LOAD"; then
            police 0 0
        fi
    done
    stop_switch
done
