#!/bin/bash
# Runs Open vSwitch with ovs-gpu on DPDK pcap ports, in a private run
# directory, and reports what it forwarded.
#
#   demo.sh BUILD_DIR [--count N] [--smoke] [--keep]
#
# ovsdb-server and ovs-vswitchd start under $RUN (default BUILD_DIR/demo),
# never the system's run directory.  DPDK runs without hugepages
# (--no-huge --legacy-mem) and without PCI devices: port p0 reads a pcap
# made from a ClassBench header trace (net_pcap), port p1 writes what the
# switch forwards to another pcap.  The flow table is the ClassBench ACL
# the trace was made for (acl1, about 5,500 OpenFlow flows once port ranges
# are split): half its rules forward to p1, half drop.  Its many prefix
# lengths give the datapath many megaflow masks, which is what the GPU
# classifier offload is for; the offload is on, with every answer
# validated against OVS's own lookup.
#
# --smoke checks that exactly the packets a brute-force reference
# classifier (scripts/classbench-flows.py) forwards came out, that the
# offload answered lookups and that validation found no difference; it
# exits non-zero otherwise and is part of the tests.
set -e -o pipefail

BUILD=$(cd "${1:?usage: demo.sh BUILD_DIR [--count N] [--smoke] [--keep]}" \
        && pwd)
shift
SRC=$(cd "$(dirname "$0")/.." && pwd)
COUNT=20000
SMOKE=false
KEEP=false
while test $# -gt 0; do
    case $1 in
        --count) COUNT=$2; shift ;;
        --smoke) SMOKE=true ;;
        --keep) KEEP=true ;;
        *) echo "demo.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

OVS=$BUILD/ovs
RUN=${RUN:-$BUILD/demo}
# The ClassBench set and trace are in the repository (data/classbench);
# OVSGPU_DATA names another folder laid out the same way.
DATA=${OVSGPU_DATA:-$SRC/data}
TRACE=$DATA/classbench/acl1_10000_trace.gz
# The text planted in one packet of ten, and the demo IDS rule that finds it.
SIGNATURE=ovs-gpu-demo-attack
FILTERS=$DATA/classbench/acl1_10000

# fail TEXT: stops, saying why, also to the test summary when run as a
# test (tests/layer-result sets OVSGPU_TEST_COUNTS).
fail() {
    echo "$*" >&2
    if test -n "${OVSGPU_TEST_COUNTS:-}"; then
        printf 'passed: 0\nfailed: 1\nskipped: 0\nfail: %s\n' "$*" \
            > "$OVSGPU_TEST_COUNTS"
    fi
    exit 1
}

# Without them this would not be the demo the README describes (nor a
# smoke test of it): stop, naming the file.
for f in "$TRACE" "$FILTERS"; do
    test -r "$f" || fail "demo.sh: missing data file $f"
done

if ! grep -q '^#define DPDK_NETDEV' "$OVS/config.h" 2>/dev/null; then
    echo "demo.sh: Open vSwitch in $OVS was built without DPDK" >&2
    exit 77
fi

rm -rf "$RUN"
mkdir -p "$RUN"
export OVS_RUNDIR=$RUN OVS_LOGDIR=$RUN OVS_DBDIR=$RUN OVS_SYSCONFDIR=$RUN
export PATH=$OVS/utilities:$OVS/vswitchd:$OVS/ovsdb:$PATH
DB_SOCK=unix:$RUN/db.sock

cleanup() {
    status=$?
    if ! $KEEP; then
        ovs-appctl -t ovs-vswitchd exit --cleanup >/dev/null 2>&1 || true
        ovs-appctl -t ovsdb-server exit >/dev/null 2>&1 || true
        for p in ovs-vswitchd ovsdb-server; do
            pid=$(cat "$RUN/$p.pid" 2>/dev/null) || continue
            kill "$pid" 2>/dev/null || true
        done
        rm -rf "/var/run/dpdk/ovsgpu-demo-$$"
    fi
    exit $status
}
trap cleanup EXIT

echo "== traffic and flows"
python3 "$SRC/scripts/gen-pcap.py" --out "$RUN/empty.pcap" --count 0 \
    >/dev/null
python3 "$SRC/scripts/gen-pcap.py" --out "$RUN/in.pcap" --trace "$TRACE" \
    --count "$COUNT" --plant "$SIGNATURE" --plant-every 10
python3 "$SRC/scripts/classbench-flows.py" flows "$FILTERS" \
    --count 100000 > "$RUN/flows.txt"
# What the flow table must let through, by a brute-force search.
expected=$(python3 "$SRC/scripts/classbench-flows.py" expect "$FILTERS" \
           "$RUN/in.pcap" --count 100000)
total=$(python3 "$SRC/scripts/pcap-count.py" "$RUN/in.pcap")
# The TCP flows that forward also pass their packets through the IDS, in
# alert mode (so what is forwarded does not change): one packet in ten
# carries the demo signature.
sed -i '/nw_proto=6,/s/actions=output:2$/actions=gpu_ids(ruleset=demo,alert),output:2/' \
    "$RUN/flows.txt"
# What the ACL drops is recorded, with bitmap indexes, for forensics.
sed -i 's/actions=drop$/actions=gpu_index(store=dropped)/' "$RUN/flows.txt"
cat > "$RUN/demo.rules" <<EOF
alert tcp any any -> any any (msg:"ovs-gpu demo signature"; content:"$SIGNATURE"; sid:9000001; rev:1;)
alert tcp any any -> any any (msg:"demo, case-insensitive"; content:"OVS-GPU-DEMO"; nocase; sid:9000002; rev:1;)
alert udp any any -> any 53 (msg:"never in this traffic"; content:"|00 ff 00 ff 00 ff|"; sid:9000003; rev:1;)
EOF
echo "$(wc -l < "$RUN/flows.txt") flows," \
     "$(grep -c gpu_ids "$RUN/flows.txt") of them through gpu_ids," \
     "$(grep -c gpu_index "$RUN/flows.txt") recording what they drop"

echo "== starting ovsdb-server and ovs-vswitchd in $RUN"
ovsdb-tool create "$RUN/conf.db" "$OVS/vswitchd/vswitch.ovsschema"
ovsdb-server "$RUN/conf.db" --remote=p"$DB_SOCK" --pidfile --detach \
    --log-file
ovs-vsctl --no-wait init
if test "$(nproc)" -ge 2; then pmd_mask=0x2; else pmd_mask=0x1; fi
ovs-vsctl --no-wait set Open_vSwitch . \
    other_config:dpdk-init=true \
    other_config:dpdk-extra="--no-huge --legacy-mem -m 1024 --no-pci --file-prefix=ovsgpu-demo-$$" \
    other_config:pmd-cpu-mask=$pmd_mask \
    other_config:emc-insert-inv-prob=0 \
    other_config:gpu-offload=true \
    other_config:gpu-dpcls-min-subtables=${MIN_SUBTABLES:-0} \
    other_config:gpu-validate=true \
    other_config:gpu-ids-ruleset-demo="$RUN/demo.rules" \
    other_config:gpu-index-dir="$RUN" \
    other_config:gpu-index-store-dropped=dropped
ovs-vswitchd "$DB_SOCK" --pidfile --detach --log-file

# Flows go in before the ports, so the first packet meets them.
ovs-vsctl add-br br0 -- set bridge br0 datapath_type=netdev
ovs-ofctl del-flows br0
ovs-ofctl add-flows br0 "$RUN/flows.txt"
# A pcap port delivers its whole file as soon as it is polled, and a
# packet that arrives before the port is known to the upcall path is lost
# ("miss with failed upcall"), as happened on a loaded machine.  So p1's
# queue is pinned to the PMD, which isolates it, and p0 is left unpolled
# ("no non-isolated pmd") until the switch can translate its packets.
pmd_core=$(( pmd_mask == 0x2 ? 1 : 0 ))
ovs-vsctl add-port br0 p1 -- set Interface p1 type=dpdk ofport_request=2 \
    options:dpdk-devargs="net_pcap1,rx_pcap=$RUN/empty.pcap,tx_pcap=$RUN/out.pcap" \
    other_config:pmd-rxq-affinity="0:$pmd_core"
ovs-vsctl add-port br0 p0 -- set Interface p0 type=dpdk ofport_request=1 \
    options:dpdk-devargs="net_pcap0,rx_pcap=$RUN/in.pcap"
for i in $(seq 1 100); do
    ovs-appctl ofproto/trace br0 in_port=p0,udp > /dev/null 2>&1 && break
    sleep 0.1
done
ovs-vsctl set Interface p0 other_config:pmd-rxq-affinity="0:$pmd_core"

rx_of() {
    ovs-ofctl dump-ports br0 "$1" | sed -n 's/.*rx pkts=\([0-9]*\).*/\1/p'
}
tx_of() {
    ovs-ofctl dump-ports br0 "$1" | sed -n 's/.*tx pkts=\([0-9]*\).*/\1/p'
}

echo "== replaying $total packets"
for i in $(seq 1 300); do
    rx=$(rx_of p0)
    test "${rx:-0}" -ge "$total" && break
    sleep 0.1
done
# Let the last burst leave p1.
for i in $(seq 1 50); do
    tx=$(tx_of p1)
    test "${tx:-0}" -ge "$expected" && break
    sleep 0.1
done

echo "== report"
echo "packets in pcap:        $total (to be forwarded: $expected)"
echo "p0 rx packets:          $(rx_of p0)"
echo "p1 tx packets:          $(tx_of p1)"
echo "flows hit:              $(ovs-ofctl dump-flows br0 | grep -vc 'n_packets=0,')" \
     "of $(wc -l < "$RUN/flows.txt")"
echo "datapath megaflows:     $(ovs-appctl dpctl/dump-flows | wc -l)"
echo "-- dpif-netdev/pmd-stats-show"
ovs-appctl dpif-netdev/pmd-stats-show \
    | awk '/^pmd thread/ { p = 1 } /^main thread/ { p = 0 } p' \
    | grep -E 'pmd thread|packets received|hits|miss|lost|avg\.' \
    | sed 's/^ */  /'
echo "-- gpu/show"
ovs-appctl gpu/show
echo "-- gpu-ids/show"
ovs-appctl gpu-ids/show | tee "$RUN/ids-show.txt"
echo "-- IDS alerts logged (first 3)"
# (awk reads the whole log: "grep | head" would die of SIGPIPE under
# pipefail once head has its lines.)
awk '/gpu_ids demo: sid/ && n++ < 3 { print "  " $0 }' "$RUN/ovs-vswitchd.log"
echo "-- gpu-index/query dropped 'tcp and dport=0-1023' --limit 3"
ovs-appctl gpu-index/query dropped 'tcp and dport=0-1023' --limit 3
ovs-appctl gpu-index/show dropped | tee "$RUN/index-show.txt"
echo "-- gpu/dpcls-show"
ovs-appctl gpu/dpcls-show | tee "$RUN/dpcls-show.txt"
gpu_lookups=$(awk '/^  lookups on GPU:/ { n += $4 } END { print n + 0 }' \
              "$RUN/dpcls-show.txt")
mismatches=$(awk '/^  validation mismatches:/ { n += $3 } END { print n + 0 }' \
             "$RUN/dpcls-show.txt")

ids_matched=$(sed -n 's/^  matched: \([0-9]*\),.*/\1/p' "$RUN/ids-show.txt")
recorded=$(sed -n 's/^  packets: [0-9]* submitted, \([0-9]*\) recorded.*/\1/p' \
           "$RUN/index-show.txt")
rx=$(rx_of p0)
tx=$(tx_of p1)
# Close the ports so the output pcap is complete, then count it.
ovs-vsctl del-port br0 p0 -- del-port br0 p1
written=$(python3 "$SRC/scripts/pcap-count.py" "$RUN/out.pcap")
echo "packets in output pcap: $written"

if $SMOKE; then
    if test "$rx" != "$total" || test "$tx" != "$expected" \
            || test "$written" != "$expected" || test "$gpu_lookups" = 0 \
            || test "$mismatches" != 0 || test "$ids_matched" = 0 \
            || test "${recorded:-0}" != $((rx - tx)); then
        fail "smoke test FAILED: rx $rx of $total, tx $tx and written" \
             "$written of $expected, $gpu_lookups lookups offloaded," \
             "$mismatches validation mismatches, $ids_matched IDS" \
             "matches, ${recorded:-0} dropped packets recorded"
    fi
    echo "smoke test passed: $rx in, $tx out, $((rx - tx)) dropped by flow," \
         "$gpu_lookups lookups offloaded, no validation mismatch," \
         "$ids_matched packets matched by gpu_ids," \
         "$recorded dropped packets recorded and indexed"
fi
