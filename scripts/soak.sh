#!/bin/bash
# Soak test: every service action under traffic for a long time, with the
# configuration changing every second, on the CPU backend or on CUDA.  Not
# part of the test command (it runs for minutes); docs/RELIABILITY.md
# records its runs.
#
#   scripts/soak.sh [--minutes N] [--device cpu|0] [--build DIR]
#
# One ovs-vswitchd (dummy datapath ports, so no DPDK or NIC is needed;
# the input port is polled by a PMD thread) carries four kinds of
# traffic from p1:
#
#   TCP to port 80    gpu_index(store=soak),gpu_ids(ruleset=soak) -> o_ids
#                     (one packet in ten carries the signature: dropped)
#   TCP to port 8080  re_encode(peer=s),re_decode(peer=s) -> o_re
#   UDP to port 5000  fec_encode(k=4,m=2),fec_decode -> o_fec
#   UDP to port 6000  plain forwarding over 64 prefixes -> o_plain
#
# Every second one change, in turn: a flow added and an older one
# deleted; the ruleset reloaded; the store's settings changed (it
# reopens); the megaflow offload switched on or off.  At the end it
# checks that every port sent exactly what came in less the intended IDS
# drops, that ovs-vswitchd's resident memory is flat after the first
# quarter of the run (within 10% or 16 MiB), and that the log has no
# warning or error.  Exit status 0 if all hold.
#
# OVS programs come from PATH if ovs-vswitchd is there and VSWITCH_SCHEMA
# is set (a bundle, see make-device-bundle.sh), else from DIR/ovs
# (default: the source tree's _build).
set -e -o pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
minutes=10
device=cpu
BUILD=${BUILD:-$SRC/_build}
while test $# -gt 0; do
    case $1 in
        --minutes) minutes=$2; shift 2 ;;
        --device) device=$2; shift 2 ;;
        --build) BUILD=$2; shift 2 ;;
        *) sed -n '2,30s/^# \{0,1\}//p' "$0"; exit 2 ;;
    esac
done
if test -z "${VSWITCH_SCHEMA:-}" || ! command -v ovs-vswitchd >/dev/null
then
    export PATH=$BUILD/ovs/vswitchd:$BUILD/ovs/ovsdb:$BUILD/ovs/utilities:$PATH
    VSWITCH_SCHEMA=$BUILD/ovs/vswitchd/vswitch.ovsschema
fi
test -f "$VSWITCH_SCHEMA" || { echo "soak: no $VSWITCH_SCHEMA" >&2; exit 1; }

RUN=$(mktemp -d /tmp/ovsgpu-soak.XXXXXX)
export OVS_RUNDIR=$RUN OVS_LOGDIR=$RUN OVS_DBDIR=$RUN OVS_SYSCONFDIR=$RUN
cleanup() {
    ovs-appctl -t ovs-vswitchd exit >/dev/null 2>&1 || true
    ovs-appctl -t ovsdb-server exit >/dev/null 2>&1 || true
    for p in ovs-vswitchd ovsdb-server; do
        kill -9 "$(cat "$RUN/$p.pid" 2>/dev/null)" 2>/dev/null || true
    done
}
trap cleanup EXIT
echo "soak: $minutes minutes, gpu-device=$device, in $RUN"

# ---- Traffic: pools of frames, one per line in hex. ----
python3 - "$RUN" <<'EOF'
import random, struct, sys
run = sys.argv[1]
random.seed(20261124)

def ipv4(src, dst, proto, l4):
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0x4000, 64,
                     proto, 0, bytes(src), bytes(dst))
    s = sum(struct.unpack("!10H", ip))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    ip = ip[:10] + struct.pack("!H", ~s & 0xffff) + ip[12:]
    return bytes.fromhex("5054000000025054000000010800") + ip + l4

def tcp(sport, dport, payload):
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 0x50, 0x18, 65535,
                       0, 0) + payload

def udp(sport, dport, payload):
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload

text = bytes(random.getrandbits(8) for _ in range(4000))
pools = {"ids": [], "re": [], "fec": [], "plain": []}
for i in range(2000):
    evil = i % 10 == 0
    payload = bytes(random.getrandbits(8) for _ in range(random.randrange(
        20, 600)))
    if evil:
        payload = payload[:10] + b"SOAKEVIL" + payload[10:]
    else:
        payload = payload.replace(b"SOAKEVIL", b"soakgood")
    pools["ids"].append((ipv4((10, 0, i % 200, 1), (10, 1, 0, 1), 6,
                              tcp(1024 + i, 80, payload)), evil))
    off = random.randrange(0, 3000)
    pools["re"].append((ipv4((10, 0, 0, 2), (10, 1, 0, 2), 6,
                             tcp(2000, 8080, struct.pack("!Q", i)
                                 + text[off:off + 900])), False))
    payload = bytes(random.getrandbits(8)
                    for _ in range(random.randrange(1, 1000)))
    pools["fec"].append((ipv4((10, 0, 0, 3), (10, 1, 0, 3), 17,
                              udp(3000, 5000, payload)), False))
    pools["plain"].append((ipv4((10 + i % 64, 0, 0, 9), (10, 1, 0, 4), 17,
                                udp(4000 + i % 100, 6000, b"x" * 64)),
                           False))
# Chunks of 25 frames (netdev-dummy queues up to 100 per port, dropping
# more without counting), one file each, and the signatures in each.
for name, pool in pools.items():
    for c in range(len(pool) // 25):
        chunk = pool[c * 25:(c + 1) * 25]
        with open(f"{run}/{name}.{c}", "w") as f:
            f.write(" ".join(frame.hex() for frame, _ in chunk))
        with open(f"{run}/{name}.{c}.evil", "w") as f:
            f.write(str(sum(evil for _, evil in chunk)))
EOF

# ---- The switch. ----
cat > "$RUN/soak.rules" <<'EOF'
alert tcp any any -> any 80 (msg:"soak signature"; content:"SOAKEVIL"; sid:9000001; rev:1;)
alert tcp any any -> any 80 (msg:"never sent"; content:"|de ad be ef ca fe|"; sid:9000002; rev:1;)
EOF
ovsdb-tool create "$RUN/conf.db" "$VSWITCH_SCHEMA"
ovsdb-server "$RUN/conf.db" --remote=punix:"$RUN/db.sock" --pidfile \
    --detach --log-file
ovs-vsctl --no-wait init
ovs-vsctl --no-wait set Open_vSwitch . \
    other_config:pmd-cpu-mask=0x1 \
    other_config:gpu-device=$device \
    other_config:gpu-offload=true \
    other_config:gpu-dpcls-min-subtables=0 \
    other_config:gpu-ids-ruleset-soak="$RUN/soak.rules" \
    other_config:gpu-index-store-soak=soak,segment=5000,retention=20M
ovs-vswitchd --enable-dummy --disable-system --disable-system-route \
    unix:"$RUN/db.sock" --pidfile --detach --log-file
ovs-vsctl add-br br0 -- set bridge br0 datapath_type=dummy \
    fail-mode=secure \
    -- add-port br0 p1 -- set interface p1 type=dummy-pmd ofport_request=1 \
    -- add-port br0 o_ids -- set interface o_ids type=dummy ofport_request=2 \
    -- add-port br0 o_re -- set interface o_re type=dummy ofport_request=3 \
    -- add-port br0 o_fec -- set interface o_fec type=dummy ofport_request=4 \
    -- add-port br0 o_plain -- set interface o_plain type=dummy \
       ofport_request=5
for i in $(seq 1 50); do
    grep -q 'ruleset soak loaded' "$RUN/ovs-vswitchd.log" && break
    sleep 0.2
done
{
    echo "in_port=1,tcp,tp_dst=80,actions=gpu_index(store=soak),gpu_ids(ruleset=soak),output:2"
    echo "in_port=1,tcp,tp_dst=8080,actions=re_encode(peer=s),re_decode(peer=s),output:3"
    echo "in_port=1,udp,tp_dst=5000,actions=fec_encode(k=4,m=2,group_timeout=2000),fec_decode(group_timeout=100000),output:4"
    for p in $(seq 10 73); do
        echo "in_port=1,udp,tp_dst=6000,nw_src=$p.0.0.0/$((8 + p % 17)),actions=output:5"
    done
    echo "priority=0,actions=drop"
} > "$RUN/flows.txt"
ovs-ofctl add-flows br0 "$RUN/flows.txt"

# ---- Load and changes. ----
declare -A sent=([ids]=0 [re]=0 [fec]=0 [plain]=0)
evil_sent=0
chunk=0
for c in $(seq 0 79); do
    evil[$c]=$(< "$RUN/ids.$c.evil")
done
# send_chunk KIND: sends the next chunk (25 frames) of KIND's pool.
send_chunk() {
    local kind=$1
    ovs-appctl netdev-dummy/receive p1 $(< "$RUN/$kind.$chunk") >/dev/null
    sent[$kind]=$((sent[$kind] + 25))
    if test "$kind" = ids; then
        evil_sent=$((evil_sent + evil[chunk]))
    fi
}

p1_rx() {
    ovs-ofctl dump-ports br0 1 | sed -n 's/.*rx pkts=\([0-9]*\),.*/\1/p'
}

rss_kb() {
    ps -o rss= -p "$(cat "$RUN/ovs-vswitchd.pid")" | tr -d ' '
}

end=$(( $(date +%s) + minutes * 60 ))
second=0
change=0
offload=true
: > "$RUN/rss.txt"
while test "$(date +%s)" -lt "$end"; do
    t0=$(date +%s)
    while test "$(date +%s)" = "$t0"; do
        # A round is 100 frames, what p1's queue holds: the next waits
        # until the switch has taken them all.
        while test "$(p1_rx)" -lt $((sent[ids] + sent[re] + sent[fec]
                                      + sent[plain])); do
            sleep 0.001
        done
        for kind in ids re fec plain; do
            send_chunk $kind
        done
        chunk=$(( (chunk + 1) % 80 ))
    done
    second=$((second + 1))
    case $((change % 4)) in
        0)  k=$((change / 4 % 50))
            ovs-ofctl add-flow br0 "priority=5,udp,tp_dst=7000,nw_src=172.$k.0.0/16,actions=output:5"
            ovs-ofctl del-flows --strict br0 "priority=5,udp,tp_dst=7000,nw_src=172.$(( (k + 25) % 50 )).0.0/16" ;;
        1)  ovs-appctl gpu-ids/reload soak >/dev/null ;;
        2)  ovs-vsctl set Open_vSwitch . other_config:gpu-index-store-soak=soak,segment=5000,retention=$((20 + change % 3))M ;;
        3)  if test $offload = true; then offload=false; else offload=true; fi
            ovs-vsctl set Open_vSwitch . other_config:gpu-offload=$offload ;;
    esac
    change=$((change + 1))
    if test $((second % 10)) = 0; then
        echo "$second $(rss_kb)" >> "$RUN/rss.txt"
        echo "soak: ${second}s, sent ${sent[ids]} ids ${sent[re]} re ${sent[fec]} fec ${sent[plain]} plain, rss $(rss_kb) kB"
    fi
done

# ---- Checks. ----
sleep 2
tx() {
    ovs-ofctl dump-ports br0 "$1" | sed -n 's/.*tx pkts=\([0-9]*\),.*/\1/p'
}
rx_p1=$(p1_rx)
total=$((sent[ids] + sent[re] + sent[fec] + sent[plain]))
fail=0
check() {
    if test "$2" = "$3"; then
        echo "soak: ok   $1: $2"
    else
        echo "soak: FAIL $1: $2, expected $3"
        fail=1
    fi
}
check "p1 received" "$rx_p1" "$total"
check "o_ids sent (ids in less signatures)" "$(tx 2)" "$((sent[ids] - evil_sent))"
check "o_re sent" "$(tx 3)" "${sent[re]}"
check "o_fec sent" "$(tx 4)" "${sent[fec]}"
check "o_plain sent" "$(tx 5)" "${sent[plain]}"

# Resident memory after warm-up: the first quarter of the run excluded.
awk -v skip=$((minutes * 15)) '
    $1 > skip && !base { base = $2 }
    $1 > skip { last = $2; if ($2 > max) max = $2 }
    END {
        growth = max - base
        printf "soak: rss after warm-up %d kB, at the end %d kB, peak %d kB (+%d kB)\n", base, last, max, growth
        exit !(growth <= 16384 || growth <= base / 10)
    }' "$RUN/rss.txt" && echo "soak: ok   memory flat" \
    || { echo "soak: FAIL memory grew"; fail=1; }

# The intended ones: gpu_ids's line for each dropped packet, and the rate
# limiter's count of those it left out.
grep -E '\|(WARN|ERR|EMER)\|' "$RUN/ovs-vswitchd.log" \
    | grep -v -e 'gpu_ids soak: sid 9000001 "soak signature"' \
              -e 'gpu_ids_service.*|WARN|Dropped [0-9]* log messages' \
    > "$RUN/warnings.txt" || true
check "other warnings and errors in the log" "$(wc -l < "$RUN/warnings.txt")" 0
head -5 "$RUN/warnings.txt"

ovs-appctl gpu-index/show soak | sed -n '1,8p'
ovs-appctl gpu/show | head -20
echo "soak: $second seconds, $change changes, $total packets;" \
     "$(test $fail = 0 && echo PASSED || echo FAILED)"
cp "$RUN/rss.txt" "$RUN/ovs-vswitchd.log" "${SOAK_OUT:-$RUN}/" 2>/dev/null \
    || true
exit $fail
