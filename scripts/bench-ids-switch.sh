#!/bin/bash
# Packets per second of ovs-vswitchd forwarding an Internet-like packet
# mix (50% 64, 20% 576, 30% 1500 bytes; one packet in 100 carries a
# signature) with no IDS, with gpu_ids on the CUDA backend and with
# gpu_ids on the CPU backend, side by side, in alert mode so that every
# mode forwards the same packets.
#
#   bench-ids-switch.sh --rules FILE [--modes "none cuda cpu"]
#                       [--seconds S] [--count N] [--out FILE]
#
# FILE is a Snort rule file (e.g. the community rules, loaded with their
# commented-out rules); a rule for the planted signature is added to it.
# Setup: see switch-bench-lib.sh; one OpenFlow rule from p0 to p1, so all
# packets share one megaflow and the datapath's batches are full (32).
set -e -o pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_PER_RUN=5
COUNT=20000
MODES="none cuda cpu"
RULES=
OUTFILE=
while test $# -gt 0; do
    case $1 in
        --rules) RULES=$2; shift ;;
        --modes) MODES=$2; shift ;;
        --seconds) SECONDS_PER_RUN=$2; shift ;;
        --count) COUNT=$2; shift ;;
        --out) OUTFILE=$2; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
if ! test -f "$RULES"; then
    echo "bench-ids-switch.sh: --rules FILE needed" >&2
    exit 2
fi

. "$SRC/scripts/switch-bench-lib.sh"

SIGNATURE=ovs-gpu-bench-signature
cp "$RULES" "$RUN/bench.rules"
printf 'alert tcp any any -> any any (msg:"%s"; content:"%s"; %s)\n' \
    "bench signature" "$SIGNATURE" "sid:9000001; rev:1;" >> "$RUN/bench.rules"
python3 "$SRC/scripts/gen-pcap.py" --out "$RUN/mix.pcap" --count "$COUNT" \
    --size-mix internet --plant "$SIGNATURE" --plant-every 100 >/dev/null
# Mean frame size on the wire (with FCS), for Gbit/s.
mean=$(python3 -c "
import struct, sys
f = open(sys.argv[1], 'rb'); f.read(24); n = t = 0
while True:
    h = f.read(16)
    if len(h) < 16: break
    l = struct.unpack('<IIII', h)[2]; f.read(l); n += 1; t += l + 4
print('%.1f' % (t / n))" "$RUN/mix.pcap")

printf '%-6s %10s %10s %12s %10s %12s\n' mode Mpps Gbit/s "call us" \
    matched backend | tee ${OUTFILE:+"$OUTFILE"}
for mode in $MODES; do
    case $mode in
        none|cuda) device=0 ;;
        cpu) device=cpu ;;
    esac
    start_switch "$RUN/mix.pcap" gpu-device=$device \
        gpu-ids-ruleset-bench="$RUN/bench.rules,commented,partial"
    for i in $(seq 1 600); do
        grep -q 'ruleset bench loaded' "$RUN/ovs-vswitchd.log" && break
        sleep 0.1
    done
    ovs-ofctl del-flows br0
    if test $mode = none; then
        ovs-ofctl add-flow br0 "in_port=p0,actions=output:p1"
    else
        ovs-ofctl add-flow br0 \
            "in_port=p0,actions=gpu_ids(ruleset=bench,alert),output:p1"
    fi
    read mpps dummy < <(measure)
    gbps=$(awk -v p="$mpps" -v m="$mean" \
        'BEGIN { printf "%.2f", p * m * 8 / 1e3 }')
    show=$(ovs-appctl gpu/show)
    ids=$(ovs-appctl gpu-ids/show bench)
    lat=$(echo "$show" | awk '/service call latency:/ { print $4 }')
    matched=$(echo "$ids" | awk '/^  matched:/ { print $2 }' | tr -d ,)
    backend=$(echo "$ids" | awk '/^  backend:/ { print $2 }' | tr -d ,)
    test $mode = none && { lat=-; matched=-; backend=-; }
    printf '%-6s %10s %10s %12s %10s %12s\n' "$mode" "$mpps" "$gbps" \
        "$lat" "$matched" "$backend" | tee -a ${OUTFILE:+"$OUTFILE"}
    if test -n "$OUTFILE"; then
        {
            echo "=== $mode"
            ovs-appctl dpif-netdev/pmd-stats-show
            echo "$show"
            echo "$ids" | sed -n 1,20p
        } >> "$OUTFILE.details"
    fi
    stop_switch
done
echo "mean frame: $mean bytes on the wire;" \
    "$(nproc) cores, PMD on core $pmd_core" \
    | tee -a ${OUTFILE:+"$OUTFILE"}
