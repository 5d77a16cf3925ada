#!/bin/bash
# Every GPU service action measured inside ovs-vswitchd: packets per
# second of one PMD thread forwarding an Internet-like packet mix (50% 64,
# 20% 576, 30% 1500 bytes) from a net_pcap port to a net_null port through
# the service, with no service, with the service on CUDA and with it on
# the CPU backend, each run printed beside the no-service rate of the
# same traffic.
#
#   bench-services-switch.sh --rules FILE --text FILE
#                            [--services "ids-alert ids-drop re fec index
#                                         re-enc fec-enc fec-dec re-dec"]
#                            [--backends "cuda cpu"] [--pmds "1 2 4"]
#                            [--frames internet|BYTES] [--seconds S]
#                            [--count N] [--repeat R | --alternate N]
#                            [--out FILE] [--check]
#
# The lists of --services, --backends and --pmds may be separated by
# commas as well as spaces ("cuda,cpu").
#
# --rules: a Snort rule file (the community rules), for gpu_ids; a rule
# for a signature planted in one packet in 100 is added to it.
# --text: a file (.gz allowed) the payloads of the re, fec and index runs
# are cut from at random offsets, so that the traffic repeats itself as
# real traffic does (the gpu_ids runs keep gen-pcap.py's fixed pattern:
# rule text as payload would match thousands of rules).
#
# The services and what each run checks:
#   ids-alert  gpu_ids(ruleset=bench,alert): every packet goes out;
#              matched counts the planted signatures.
#   ids-drop   gpu_ids(ruleset=bench): the planted packets are dropped.
#   re         re_encode(peer=b),re_decode(peer=a) in one action list (as
#              two switches joined by a patch port would run it): bytes
#              saved by the encoder, and the decoder's undecodable and
#              check failures (a byte-for-byte check of every payload).
#              Then, per backend, re_encode on br0 and re_decode on br1
#              (two bridges joined by patch ports) with the trace sent
#              once and p1's frames kept: they must be the input's, byte
#              for byte and in order.
#   fec        fec_encode(k=10,m=4),fec_decode() with 1% of the coded
#              frames lost between them (gpu/inject-fault fec-loss 10000,
#              test and benchmark only: fec_decode discards them,
#              pseudo-randomly, before decoding): "out" is the goodput;
#              the checks give the frames the link lost, the packets
#              rebuilt, the groups lost (of them forgotten for room, of
#              parity only: parity after its group was forgotten, and
#              past m: fewer frames than a rebuild needs at their
#              timeout, i.e. more than m lost on the link, or the rest
#              later than the timeout), the most packets the decoder
#              buffered, the late packets it dropped, the times parity or
#              rebuilt packets were left to a batch's own thread, and a
#              corruption check: for another second p1's traffic goes to
#              a pcap port instead and every frame delivered must be one
#              of the input's, byte for byte.
#   re-enc, fec-enc, fec-dec, re-dec
#              one end of a pair alone, as the switch at one end of a
#              link runs it (the pairs above run both ends on one PMD, so
#              their "vs none" is two services' work against forwarding):
#              re_encode(peer=b,cache=64M); fec_encode(k=10,m=4);
#              fec_decode(group_timeout=1000) replaying the trace as
#              fec_encode coded it (made once by the switch, data and
#              parity frames; the 1 ms timeout lets the replay's group
#              ids, which repeat every pass, start new groups), with the
#              same 1% loss and corruption check as fec;
#              re_decode(peer=a,cache=64M) replaying the trace as
#              re_encode coded it (made once by the switch on the CPU
#              backend: each pass starts with the encoder's first shim,
#              which starts its epoch, so the decoder starts again with
#              it), with the bytes the link saved, the undecodable
#              frames and the corruption check (every frame delivered one
#              of the input's, byte for byte: decoded or passed).  The
#              decoder runs on the CPU whatever the backend.  Not in the
#              default list.
#   index      gpu_index(store=bench): records kept and lost (ring
#              full), records kept per second (from the flows' insertion
#              to the end of the run), then the time of a query over
#              what was recorded, and how long the main loop was held
#              meanwhile: the longest round trip of "ovs-appctl version"
#              asked every 50 ms while the query ran (process start
#              included: an upper bound), and the longest "Unreasonably
#              long poll interval" the switch logged then (none: "-").
#
# --pmds: for each number N in the list, every row again with N source
# ports and N PMD threads (one port each, on the last N cores) sharing
# the GPU; each port's flow has its own re_encode/re_decode peers, as N
# links would.  --frames: the Internet mix (default) or frames of one
# size (e.g. 1500).
#
# --repeat R: each service's rows (none, then the backends) R times over,
# each "vs none" against the no-service run just before it: on a virtual
# machine the no-service rate itself moves by up to 40% from one run to
# the next (on the H100 machine, 2.2 to 4.8 Mpps minutes apart), so a
# ratio is worth as much as its neighbours agree.  With R > 1 the end
# prints each row's medians: Mpps, "vs none", and the median rate over
# the no-service median.
#
# --alternate N: instead of a switch per row, one switch per service and
# backend whose flows change N times from no service to the service and
# back, each measured as a row is (1 s settling, then S seconds); one
# line per service and backend with the medians of the N pairs: the
# no-service rate, the service's, their ratio ("vs none"; the ranges of
# the ratios and of the service's rate after the checks) and what the
# service costs a packet ("ns/pkt": 1/(service rate) - 1/(no-service
# rate)).  The two runs of a pair are seconds apart on one switch, not a
# restart and a ruleset load apart (the no-service rate moved 3.5 to
# 5.6 Mpps between neighbouring rows on the H200 machine).  It still
# moved 2.1 to 5.1 Mpps from pair to pair there: compare two builds on
# the service's own rate, in rounds run in both orders.  Each pair's
# rates go to OUT.details.  The state of a service stays between its
# turns (the RE cache; the index's records, its "kept/s" over the time
# its flows were on).
#
# --check: a test, not only a benchmark: exits 1 if a service's checks
# found what must not happen (a corrupt fec frame or none delivered, no
# packet rebuilt, fec or re errors, an undecodable re frame, the two
# bridges' frames not the input's, a gpu_ids error or drop-mode drops
# other than its matches), naming each; "make check" runs the fec and re
# pair so on the CPU backend with DPDK ports (check-dpdk-services).
#
# BENCH_FEC_DEC in the environment: more fec_decode arguments for the
# fec and fec-dec rows, e.g. "cpu_max_groups=0" (every call to the
# device); BENCH_FEC_LAUNCH=host|device: fec_encode's launch= for the
# fec and fec-enc rows (unset: the default, host).
#
# BENCH_PKT_HEAP=N in the environment: one packet in N that the services
# make comes from the heap, not the mbuf pool (gpu/inject-fault pkt-heap,
# test only), so that batches mix the two; with --check the fec rows
# must then show both.
#
# BENCH_PMD_CORE=N in the environment: the (first) PMD on core N
# instead of the last core (switch-bench-lib.sh), e.g. one that the
# disk's interrupts do not go to.
#
# BENCH_HUGEPAGES=yes in the environment: DPDK's memory in 2 MB
# hugepages (switch-bench-lib.sh), as a deployment runs it.
#
# BENCH_INDEX_STORE in the environment: the index store's settings
# (default "bench"), e.g. "bench,ring=8192,snaplen=128".
#
# BENCH_OTHER_CONFIG="K=V ..." in the environment: more other_config
# settings for every row's switch, e.g. "per-port-memory=true" (DPDK's
# mbuf pools sized by the ports' queues instead of 256k mbufs shared).
#
# BENCH_INDEX_DISK_RATE=MB in the environment: the index store's files
# are written at no more than MB megabytes a second (gpu/inject-fault
# index-disk-rate, test only), a disk slower than the traffic, to see
# what the recorder loses, or keeps short with
# BENCH_INDEX_STORE=bench,overload_snaplen=64.
#
# BENCH_SAMPLES=N in the environment: after each service row's rate, N
# stack samples of its PMD threads (scripts/pmd-stack-sample.sh: gdb or
# cuda-gdb, for machines without perf) into OUT.samples.  cuda-gdb,
# attached to a switch using the CUDA backend, stopped it after 11
# samples on the H100 machine (2026-11-27): use gdb where there is one.
#
# BENCH_IDS_SLOW=US in the environment: no gpu_ids scan is seen done
# sooner than US microseconds after its submission (gpu/inject-fault
# ids-slow): with US past the scan's own round trip, what a longer round
# trip costs the PMD (held packets wait longer, scans gather more).
#
# BENCH_IDS_NULL_SCAN=1 in the environment: gpu_ids gathers and holds
# but scans nothing (gpu/inject-fault ids-null-scan; with BENCH_IDS_SLOW
# its held packets wait as long as a scan would): what holding and
# gathering cost the PMD without the device's calls.  --check then wants
# no match.
#
# BENCH_IDS_ALERT_HOLD=1 in the environment: alert-mode gpu_ids holds
# its batches for their scan as drop mode does (gpu/inject-fault
# ids-alert-hold, an experiment: the device then reads the payloads in
# place).
#
# BENCH_RE_COPY=1 in the environment: re_encode copies every gathered
# payload into its pinned gather (gpu/inject-fault re-copy) instead of
# having the chunker read it in the held packet: the way before, to
# measure both in one switch.
#
# BENCH_MAX_HOLD_US=US in the environment: other_config:gpu-max-hold-us
# (USAGE.md), how long a held packet may wait for its device call: the
# size of re_encode's calls against the packets held meanwhile (and a
# bound on gpu_ids's hold-us, BENCH_IDS_HOLD_US).
#
# BENCH_IDS_LAUNCH=host|device in the environment: the gpu_ids rows'
# ruleset option launch= (USAGE.md, "gpu_ids rulesets"): who launches
# each scan's graph, the PMD (host) or a scheduler kernel on the device
# (device, the default).
#
# BENCH_IDS_IN_FLIGHT=N and BENCH_IDS_HOLD_US=N in the environment: the
# gpu_ids rows' ruleset options in-flight= (scans out at once, the PMD
# threads together, each one at least; 1 to 3, default 3) and hold-us=
# (how soon each gather of held packets starts, default 25 us, at most
# gpu-max-hold-us).  BENCH_IDS_GATHER_KB=N: gather-kb= (alert mode's
# gathers are scanned at N kB of frames; 16 to 4096, default 512).
#
# BENCH_RE_IN_FLIGHT=N and BENCH_RE_HOLD_US=N in the environment:
# re_encode's options in-flight= (chunking calls out at once, the PMD
# threads together, each one at least; 1 to 3) and hold-us= (how soon
# each gather starts, at most gpu-max-hold-us).
#
# BENCH_RE_ENCODER=host|device in the environment: re_encode's option
# encoder= (USAGE.md): the encoder's table probes, match extension and
# shim bodies on the host or on the device (the default).
# BENCH_RE_LAUNCH=host|device: its option launch= (who launches an
# encoding call: the PMD, or the encoder's scheduler on the device, the
# default).
#
# BENCH_PERF=SECONDS in the environment: after each row's rate, the none
# rows' included (plain forwarding, the comparison), a perf profile of
# the row's PMD threads over SECONDS while the traffic still flows
# (scripts/pmd-perf-profile.sh: functions by self and inclusive share;
# perf never stops the switch), appended to OUT.perf, or to stderr
# without --out.  perf comes from PATH: on the GPU machine, the bundle's
# (make-device-bundle.sh).  The fec and index rows' checks take the
# flows away: they are put back for the profile.
#
# Rates: "in" is what the PMDs received, "out" what p1 sent, both per
# second over S seconds after 1 s of warm-up.  "call us" is gpu/show's
# service call latency (the service's run() time per batch).  Setup as
# the other switch benchmarks (switch-bench-lib.sh): DPDK without
# hugepages, one PMD on the last core, EMC insertion off, one OpenFlow
# rule from p0 to p1.
set -e -o pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_PER_RUN=5
COUNT=20000
SERVICES="ids-alert ids-drop re fec index"
BACKENDS="cuda cpu"
REPEAT=1
ALTERNATE=0
PMDS=1
FRAMES=internet
RULES=
TEXT=
OUTFILE=
CHECK=false
FAILED=
while test $# -gt 0; do
    case $1 in
        --rules) RULES=$2; shift ;;
        --text) TEXT=$2; shift ;;
        # Lists separated by spaces or commas (commas survive a caller's
        # unquoted expansion, as device-run.sh's SERVICES_BENCH_ARGS).
        --services) SERVICES=${2//,/ }; shift ;;
        --backends) BACKENDS=${2//,/ }; shift ;;
        --pmds) PMDS=${2//,/ }; shift ;;
        --frames) FRAMES=$2; shift ;;
        --seconds) SECONDS_PER_RUN=$2; shift ;;
        --repeat) REPEAT=$2; shift ;;
        --alternate) ALTERNATE=$2; shift ;;
        --count) COUNT=$2; shift ;;
        --out) OUTFILE=$2; shift ;;
        --check) CHECK=true ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
case " $SERVICES " in
    *" ids-"*) test -f "$RULES" || {
        echo "bench-services-switch.sh: --rules FILE needed" >&2; exit 2; } ;;
esac
case " $SERVICES " in
    *" re"*|*" fec"*|*" index "*) test -f "$TEXT" || {
        echo "bench-services-switch.sh: --text FILE needed" >&2; exit 2; } ;;
esac

case $FRAMES in
    internet) size_args="--size-mix internet" ;;
    *[!0-9]*|"") echo "bench-services-switch.sh: --frames internet|BYTES" >&2
        exit 2 ;;
    *) size_args="--size $FRAMES" ;;
esac
for n in $PMDS; do
    if test "$n" -lt 1 || test "$n" -gt "$(nproc)"; then
        echo "bench-services-switch.sh: --pmds: $n PMDs need $n cores" >&2
        exit 2
    fi
done

. "$SRC/scripts/switch-bench-lib.sh"

SIGNATURE=ovs-gpu-bench-signature
if test -f "$RULES"; then
    cp "$RULES" "$RUN/bench.rules"
    printf 'alert tcp any any -> any any (msg:"%s"; content:"%s"; %s)\n' \
        "bench signature" "$SIGNATURE" "sid:9000001; rev:1;" \
        >> "$RUN/bench.rules"
fi
python3 "$SRC/scripts/gen-pcap.py" --out "$RUN/ids.pcap" --count "$COUNT" \
    $size_args --plant "$SIGNATURE" --plant-every 100 >/dev/null
if test -n "$TEXT"; then
    python3 "$SRC/scripts/gen-pcap.py" --out "$RUN/text.pcap" \
        --count "$COUNT" $size_args --payload-from "$TEXT" \
        >/dev/null
fi

# mean_frame PCAP: the mean frame size on the wire (with FCS), for Gbit/s.
mean_frame() {
    python3 -c "
import struct, sys
f = open(sys.argv[1], 'rb'); f.read(24); n = t = 0
while True:
    h = f.read(16)
    if len(h) < 16: break
    l = struct.unpack('<IIII', h)[2]; f.read(l); n += 1; t += l + 4
print('%.1f' % (t / n))" "$1"
}

# re_encoder: re_encode's encoder=, launch=, in-flight= and hold-us=
# options from BENCH_RE_ENCODER, BENCH_RE_LAUNCH, BENCH_RE_IN_FLIGHT and
# BENCH_RE_HOLD_US.
re_encoder() {
    if test -n "${BENCH_RE_ENCODER:-}"; then
        printf ',encoder=%s' "$BENCH_RE_ENCODER"
    fi
    if test -n "${BENCH_RE_LAUNCH:-}"; then
        printf ',launch=%s' "$BENCH_RE_LAUNCH"
    fi
    if test -n "${BENCH_RE_IN_FLIGHT:-}"; then
        printf ',in-flight=%s' "$BENCH_RE_IN_FLIGHT"
    fi
    if test -n "${BENCH_RE_HOLD_US:-}"; then
        printf ',hold-us=%s' "$BENCH_RE_HOLD_US"
    fi
}

# actions SERVICE PORT: the OpenFlow actions of SERVICE's runs for the
# flow from source port PORT (0, 1, ...).
actions() {
    case $1 in
        none) echo "output:p1" ;;
        ids-alert) echo "gpu_ids(ruleset=bench,alert),output:p1" ;;
        ids-drop) echo "gpu_ids(ruleset=bench),output:p1" ;;
        re) echo "re_encode(peer=b$2,cache=64M$(re_encoder)),\
re_decode(peer=a$2,cache=64M),output:p1" ;;
        fec) echo "fec_encode(k=10,m=4${BENCH_FEC_LAUNCH:+,launch=\
$BENCH_FEC_LAUNCH}),fec_decode(${BENCH_FEC_DEC:-}),output:p1" ;;
        re-enc) echo "re_encode(peer=b$2,cache=64M$(re_encoder)),output:p1"
            ;;
        re-dec) echo "re_decode(peer=a$2,cache=64M),output:p1" ;;
        fec-enc) echo "fec_encode(k=10,m=4${BENCH_FEC_LAUNCH:+,launch=\
$BENCH_FEC_LAUNCH}),output:p1" ;;
        fec-dec) echo "fec_decode(group_timeout=1000${BENCH_FEC_DEC:+,\
$BENCH_FEC_DEC}),output:p1" ;;
        index) echo "gpu_index(store=bench),output:p1" ;;
    esac
}

# add_flows SERVICE: SERVICE's flow from each source port, in place of
# br0's flows; $a: the last one's actions.
add_flows() {
    local i
    ovs-ofctl del-flows br0
    for i in $(seq 0 $((N_PORTS - 1))); do
        a=$(actions $1 $i)
        ovs-ofctl add-flow br0 "in_port=$(src_port $i),actions=$a"
    done
}

# checks SERVICE: the service's own figures after a run, one line.
checks() {
    local s
    case $1 in
        ids-*)
            s=$(ovs-appctl gpu-ids/show bench)
            echo "$s" | awk '/^  matched:/ { m = $2; d = $4 }
                /^  packets scanned:/ { n = $3 }
                /^  errors/ { e = $4 }
                /^  scans launched by the device:/ { l = $6 }
                /^  held: / { h = $2 }
                END { printf "matched %s dropped %s errors %s scanned %s",
                             m, d, e, n
                      if (l != "") printf " device-launched %s", l
                      if (h != "") printf " held-us %s", h }' \
                | tr -d , ;;
        re|re-enc)
            s=$(ovs-appctl gpu-re/show)
            echo "$s" | awk '
                /^re_encode/ { w = "enc" } /^re_decode/ { w = "dec" }
                w == "enc" && /bytes in:/ { i += $3; o += $6 }
                w == "dec" && /undecodable/ { u += $3 }
                /errors/ { e += $4 }
                END { printf "saved %.1f%% undecodable %d errors %d",
                      i ? 100 * (i - o) / i : 0, u, e }' | tr -d ,
            ;;
        re-dec)
            # The decoder's bytes in are the link's, its bytes out the
            # original payloads'.
            s=$(ovs-appctl gpu-re/show)
            echo "$s" | awk '
                /^  packets:/ { sh += substr($3, 2) }
                /bytes in:/ { i += $3; o += $6 }
                /undecodable/ { u += $3 }
                /epochs:/ { ep += $NF }
                /errors/ { e += $4 }
                END { printf "shims %d saved %.1f%% undecodable %d " \
                      "errors %d epochs %d", sh,
                      o ? 100 * (o - i) / o : 0, u, e, ep }' | tr -d ,
            ;;
        fec|fec-*)
            s=$(ovs-appctl gpu-fec/show)
            echo "$s" | awk '
                /^fec_encode/ { w = "enc" } /^fec_decode/ { w = "dec" }
                w == "enc" && /parity sent:/ { p = $3 }
                w == "enc" && /groups per call:/ { g = $7 }
                w == "enc" && /parity written by the device:/ { ip = $6 }
                w == "dec" && /packets passed:/ { d = $3 }
                w == "dec" && /link losses emulated:/ { x = $4 }
                w == "dec" && /packets rebuilt:/ { r = $3 }
                w == "dec" && /groups lost:/ { l = $3 }
                w == "dec" && /of them forgotten for room:/ {
                    lr = $6; sub(/,/, "", lr); lp = $10 }
                w == "dec" && /of them timed out past m losses:/ { pm = $8 }
                w == "dec" && /most buffered:/ { mb = $3 }
                w == "dec" && /late or duplicate/ { lt = $5 }
                /left to a batch.s own thread:/ { bw += $7 }
                /^  errors:/ { e += $2 }
                END { printf "parity %s (%s groups/call) ", p, g
                      if (ip != "") printf "in-place %s groups ", ip
                      printf "passed %s link-lost %s rebuilt %s " \
                      "lost-groups %s", d, x, r, l
                      if (lr != "") printf " (room %s parity-only %s", \
                          lr, lp
                      if (lr != "" && pm != "") printf " past-m %s", pm
                      if (lr != "") printf ")"
                      if (mb != "") printf " most-buffered %s", mb
                      if (lt != "") printf " late %s", lt
                      printf " left-to-batch %d", bw
                      printf " errors %s", e }'
            # Where the parity and rebuilt packets came from: DPDK's mbufs
            # (the service's pool) or the heap.
            printf '; made %s mbufs %s heap' \
                "$(ovs-appctl coverage/read-counter gpu_service_pkt_mbuf)" \
                "$(ovs-appctl coverage/read-counter gpu_service_pkt_heap)"
            ;;
        index)
            s=$(ovs-appctl gpu-index/show bench)
            echo "$s" | awk -v t="$(awk -v a="$flow_t0" -v b="$(date +%s.%N)" \
                                    'BEGIN { print b - a }')" '
                /packets:.*submitted/ {
                    printf "recorded %s lost %s (%.3f M kept/s)", $4, $6,
                           $4 / t / 1e6 }
                /kept short under load:/ {
                    printf " short %s at %s bytes", $5, $8 }' \
                | tr -d , ;;
        none) echo "-" ;;
    esac
}

# check_heap CHECKS: with BENCH_PKT_HEAP, some of the fec rows' packets
# must have come from the heap too (adds to check_row's 'why').
check_heap() {
    if test -n "${BENCH_PKT_HEAP:-}"; then
        echo "$1" | grep -q 'mbufs [1-9][0-9]* heap' \
            || why="$why, no packet from the heap (BENCH_PKT_HEAP)"
    fi
}

# check_in_place BACKEND CHECKS: on CUDA the device writes the encoder's
# parity into the packets (DPDK's memory is registered with it): a row
# where it wrote none lost that path (adds to check_row's 'why').
check_in_place() {
    if test $1 = cuda && test -z "${BENCH_PKT_HEAP:-}"; then
        echo "$2" | grep -q 'in-place [1-9][0-9]* groups' \
            || why="$why, no parity written by the device"
    fi
}

# check_row SERVICE BACKEND CHECKS: with --check, adds to FAILED what
# CHECKS (the row's "checks" column) shows went wrong.
check_row() {
    local why=
    $CHECK || return 0
    case $1 in
        fec-enc)
            echo "$3" | grep -q ' errors 0;' || why="fec errors"
            check_in_place $2 "$3"
            echo "$3" | grep -q '^parity [1-9]' || why="$why, no parity"
            echo "$3" | grep -q 'made [1-9][0-9]* mbufs' \
                || why="$why, no packet made from the mbuf pool"
            check_heap "$3" ;;
        fec|fec-dec)
            echo "$3" | grep -q ' errors 0;' || why="fec errors"
            test $1 = fec && check_in_place $2 "$3"
            echo "$3" | grep -q ' rebuilt 0 ' && why="$why, nothing rebuilt"
            echo "$3" | grep -q 'corrupt 0 of [1-9]' \
                || why="$why, corrupt frames or none delivered"
            echo "$3" | grep -q 'made [1-9][0-9]* mbufs' \
                || why="$why, no packet made from the mbuf pool"
            check_heap "$3" ;;
        re|re-enc)
            echo "$3" | grep -q 'undecodable 0 errors 0' \
                || why="re undecodable frames or errors" ;;
        re-dec)
            # A decoder that takes up the link mid-pass (each turn of the
            # flow, the corruption check's) cannot decode references to
            # what it did not see until the next pass's first shim starts
            # the epoch again: at most a pass's shims each time.
            local u limit=$(( (ALTERNATE + REPEAT + 2) * RE_CODED_SHIMS ))
            u=$(echo "$3" | sed -n 's/.* undecodable \([0-9]*\) .*/\1/p')
            test "${u:-x}" -le $limit 2>/dev/null \
                || why="undecodable frames ($u) past the $limit the turns of \
the flow explain"
            echo "$3" | grep -q ' errors 0 ' || why="$why, re errors"
            echo "$3" | grep -q '^shims [1-9]' || why="$why, no shim decoded"
            echo "$3" | grep -q 'corrupt 0 of [1-9]' \
                || why="$why, corrupt frames or none delivered" ;;
        re-bridges)
            echo "$3" | grep -q ': MISMATCH' \
                && why="frames out are not the input's" ;;
        ids-*)
            echo "$3" | grep -q ' errors 0' || why="gpu_ids errors"
            if test -n "${BENCH_IDS_NULL_SCAN:-}" && test $2 != none; then
                # Nothing scanned: nothing may match or be dropped.
                echo "$3" | awk '{ exit !($2 == 0 && $4 == 0) }' \
                    || why="$why, matches without a scan"
            elif test $1 = ids-drop; then
                echo "$3" | awk '{ exit !($2 == $4 && $2 > 0) }' \
                    || why="$why, drops are not the matches"
            fi ;;
    esac
    if test -n "$why"; then
        FAILED="$FAILED
$1 $2: ${why#, }"
    fi
}

# send_once BRIDGE PCAP [VDEV]: PCAP sent once into BRIDGE by source port
# p0 (OpenFlow port 10), DPDK's device VDEV (net_pcap0; a port added
# again needs a new one); returns once p1 has sent COUNT frames more than
# before, or has sent some and stopped (a minute at most).
send_once() {
    # p0 must not be polled before ofproto knows it, or the first upcalls
    # fail and drop packets.  Pinned to a core with no PMD while p1
    # isolates the only PMD, p0 waits unpolled.
    ovs-vsctl set Interface p1 other_config:pmd-rxq-affinity="0:$pmd_core"
    local base=$(dp_tx p1) last=0 n i
    ovs-vsctl add-port $1 p0 -- set Interface p0 type=dpdk \
        options:dpdk-devargs="${3:-net_pcap0},rx_pcap=$2,infinite_rx=0" \
        ofport_request=10 \
        other_config:pmd-rxq-affinity="0:$((pmd_core - 1))"
    sleep 1
    ovs-vsctl set Interface p0 other_config:pmd-rxq-affinity="0:$pmd_core"
    for i in $(seq 1 60); do
        sleep 1
        n=$(( $(dp_tx p1) - ${base:-0} ))
        test "$n" -ge "$COUNT" && break
        test "$n" -gt 0 && test "$n" = "$last" && break
        last=$n
    done
}

# ids_counts BACKEND: the bench ruleset's packets scanned, packets matched,
# and packets with the planted signature's rule among them (counted by
# rule on the CPU backend only, else "-").
ids_counts() {
    ovs-appctl gpu-ids/show bench | awk -v cpu=$(test $1 = cpu && echo 1) '
        /^  packets scanned:/ { n = $3 } /^  matched:/ { m = $2 }
        /^    sid 9000001:/ { p = $3 }
        END { printf "%d %d %s\n", n, m, cpu ? p + 0 : "-" }' | tr -d ,
}

# verify_ids BACKEND: the ids trace sent once through alert-mode gpu_ids
# (which gathers copies of the packets that went on): every frame must be
# scanned, and on the CPU backend (which counts matches by rule) exactly
# the TCP packets the signature was planted in must match its rule (they
# are counted in the trace by pcap-count.py); the packets matched are
# printed, for the backends' rows to be compared.
verify_ids() {
    local settings="gpu-device=$1 \
gpu-ids-ruleset-bench=$RUN/bench.rules,commented,partial"
    local planted counts n m p why=
    planted=$("$SRC/scripts/pcap-count.py" --proto 6 \
              --containing "$SIGNATURE" "$RUN/ids.pcap")
    N_PORTS=1 start_switch - $settings
    wait_log 'ruleset bench loaded' 30
    ovs-ofctl del-flows br0
    ovs-ofctl add-flow br0 \
        "in_port=10,actions=gpu_ids(ruleset=bench,alert),output:p1"
    send_once br0 "$RUN/ids.pcap"
    sleep 1         # Each gather is scanned within IDS_GATHER_MAX_MS.
    counts=$(ids_counts $1)
    stop_switch
    read -r n m p <<< "$counts"
    test "$n" = $COUNT || why="$why, scanned $n of $COUNT"
    test "$p" = - || test "$p" = "$planted" \
        || why="$why, $planted packets planted, $p matched its rule"
    printf '%-10s %-5s trace once: scanned %s of %s, matched %s; planted '\
'%s, matched its rule %s\n' ids-alert "$1" "$n" $COUNT "$m" $planted "$p" \
        | tee -a ${OUTFILE:+"$OUTFILE"}
    if $CHECK && test -n "$why"; then
        FAILED="$FAILED
ids-alert $1 trace once: ${why#, }"
    fi
}

# verify_re BACKEND: re_encode on br0 and re_decode on br1, two bridges
# joined by patch ports as two switches joined by a link would be, every
# frame of the trace sent once; what p1 sends is kept and compared with
# what went in.
verify_re() {
    local settings="gpu-device=$1" n
    SINK_DEVARGS="net_pcap9,tx_pcap=$RUN/re-out.pcap" \
        N_PORTS=1 start_switch - $settings
    ovs-vsctl add-br br1 -- set bridge br1 datapath_type=netdev \
        -- add-port br0 link0 -- set Interface link0 type=patch \
           options:peer=link1 \
        -- add-port br1 link1 -- set Interface link1 type=patch \
           options:peer=link0 \
        -- del-port br0 p1 \
        -- add-port br1 p1 -- set Interface p1 type=dpdk \
           options:dpdk-devargs="net_pcap9,tx_pcap=$RUN/re-out.pcap"
    ovs-ofctl del-flows br0
    ovs-ofctl del-flows br1
    ovs-ofctl add-flow br0 "in_port=10,actions=re_encode(peer=v,\
cache=64M),output:link0"
    ovs-ofctl add-flow br1 "in_port=link1,actions=re_decode(peer=v,\
cache=64M),output:p1"
    send_once br0 "$RUN/text.pcap"
    local chk=$(checks re)
    local failed=$(ovs-appctl dpif-netdev/pmd-stats-show \
                   | awk '/miss with failed upcall:/ { n += $5 }
                          END { print n + 0 }')
    stop_switch
    local same=$("$SRC/scripts/pcap-compare.py" same "$RUN/text.pcap" \
                 "$RUN/re-out.pcap" $failed || true)
    printf '%-10s %-5s two bridges, %s: %s\n' re "$1" "$chk" "$same" \
        | tee -a ${OUTFILE:+"$OUTFILE"}
    check_row re "$1" "$chk"
    check_row re-bridges "$1" "$same"
}

# make_fec_coded: $RUN/fec-coded.pcap, the text trace sent once through
# fec_encode as the link would carry it (data and parity frames), the
# fec-dec rows' source; made once.
make_fec_coded() {
    local n last=0
    test -s "$RUN/fec-coded.pcap" && return 0
    SINK_DEVARGS="net_pcap9,tx_pcap=$RUN/fec-coded.pcap" \
        N_PORTS=1 start_switch - gpu-device=cpu
    # Coded frames are 26 bytes longer: the link's MTU must allow them.
    ovs-vsctl set Interface p1 mtu_request=1600
    ovs-ofctl del-flows br0
    ovs-ofctl add-flow br0 "in_port=10,actions=$(actions fec-enc 0)"
    N_PORTS=1 add_sources br0 "$RUN/text.pcap" 0
    for i in $(seq 1 60); do
        sleep 1
        n=$(dp_tx p1)
        test "$n" -gt 0 && test "$n" = "$last" && break
        last=$n
    done
    stop_switch
    mv "$RUN/ovs-vswitchd.log" "$RUN/ovs-vswitchd-fec-coded.log"
}

# make_re_coded: $RUN/re-coded.pcap, the text trace sent once through
# re_encode (on the CPU backend) as the link would carry it, the re-dec
# rows' source; made once.  The encoder's first shim starts its epoch
# (and raw frames before it are outside any), so every pass of the
# replay starts the decoder again where the encoder started.
RE_IPPROTO=253      # GPU_RE_IPPROTO: the shims' IP protocol.
make_re_coded() {
    test -s "$RUN/re-coded.pcap" && return 0
    SINK_DEVARGS="net_pcap9,tx_pcap=$RUN/re-coded.pcap" \
        N_PORTS=1 start_switch - gpu-device=cpu
    ovs-ofctl del-flows br0
    ovs-ofctl add-flow br0 "in_port=10,actions=$(actions re-enc 0)"
    send_once br0 "$RUN/text.pcap"
    stop_switch
    mv "$RUN/ovs-vswitchd.log" "$RUN/ovs-vswitchd-re-coded.log"
    RE_CODED_SHIMS=$("$SRC/scripts/pcap-count.py" --proto $RE_IPPROTO \
                     "$RUN/re-coded.pcap")
}

# fec_corruption PCAP: sends p1's traffic to a pcap port for a second
# and prints how many of the frames delivered are not, byte for byte, a
# frame of PCAP (the input): what a wrong rebuild (fec) or a wrong
# decoding (re-dec) would deliver.
fec_corruption() {
    local out=$RUN/fec-out.pcap
    rm -f "$out"
    ovs-vsctl add-port br0 p2 -- set Interface p2 type=dpdk \
        options:dpdk-devargs="net_pcap9,tx_pcap=$out"
    ovs-ofctl del-flows br0
    ovs-ofctl add-flow br0 "in_port=p0,actions=$(actions $service 0 | \
        sed 's/output:p1$/output:p2/')"
    sleep 1
    ovs-ofctl del-flows br0
    sleep 0.5
    ovs-vsctl del-port br0 p2
    "$SRC/scripts/pcap-compare.py" corrupt "$1" "$out" || true
}

# query_time: the wall time of a query over the recorded packets, and
# how many it found, once the traffic has stopped (no flow: the switch
# drops what comes in); and how long the main loop was held meanwhile.
query_time() {
    local log_lines max=0 a b ms long
    ovs-ofctl del-flows br0
    sleep 1
    log_lines=$(wc -l < "$RUN/ovs-vswitchd.log")
    rm -f "$RUN/query.done"
    (
        t0=$(date +%s.%N)
        ovs-appctl -T 300 gpu-index/query bench 'udp or tcp' \
            --pcap "$RUN/query.pcap" > "$RUN/query.out" 2>&1
        t1=$(date +%s.%N)
        awk -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.2f", t1 - t0 }' \
            > "$RUN/query.done"
    ) &
    local qpid=$!
    while ! test -s "$RUN/query.done"; do
        a=$(date +%s%N)
        ovs-appctl -T 300 version >/dev/null
        b=$(date +%s%N)
        ms=$(( (b - a) / 1000000 ))
        test $ms -gt $max && max=$ms
        sleep 0.05
    done
    wait $qpid
    long=$(tail -n +$((log_lines + 1)) "$RUN/ovs-vswitchd.log" \
           | sed -n 's/.*Unreasonably long \([0-9]*\)ms poll interval.*/\1/p' \
           | sort -n | tail -1)
    printf 'query "udp or tcp": %s in %s s; main loop: appctl round trip ' \
        "$(tail -1 "$RUN/query.out")" "$(cat "$RUN/query.done")"
    printf 'max %d ms, longest poll interval logged %s' "$max" \
        "$(test -n "$long" && echo "$long ms" || echo -)"
}

# An awk function, median(LIST): the median of the numbers in the
# space-separated string LIST.
AWK_MEDIAN='
    function median(list,    n, v, i, j, t) {
        n = split(list, v, " ")
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
                t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
            }
        return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }'

# wait_log TEXT SECONDS: waits until the switch's log has TEXT, or fails
# the benchmark saying so (rows measured without it would measure
# something else).
wait_log() {
    local i
    for i in $(seq 1 $(($2 * 10))); do
        grep -q "$1" "$RUN/ovs-vswitchd.log" && return 0
        sleep 0.1
    done
    echo "no \"$1\" in ovs-vswitchd.log after $2 s" >&2
    exit 1
}

# start_row SERVICE BACKEND PCAP: a switch for SERVICE's rows on BACKEND
# (none, cuda, cpu) with PCAP as its source, ready for SERVICE's flows.
start_row() {
    local device settings
    case $2 in
        none|cuda) device=0 ;;
        cpu) device=cpu ;;
    esac
    rm -rf "$RUN/gpu-index"
    settings="gpu-device=$device"
    settings="$settings gpu-index-store-bench=${BENCH_INDEX_STORE:-bench}"
    if test -n "${BENCH_MAX_HOLD_US:-}"; then
        settings="$settings gpu-max-hold-us=$BENCH_MAX_HOLD_US"
    fi
    case $1 in
        ids-*) settings="$settings
            gpu-ids-ruleset-bench=$RUN/bench.rules,commented,partial"
            if test -n "${BENCH_IDS_LAUNCH:-}"; then
                settings="$settings,launch=$BENCH_IDS_LAUNCH"
            fi
            if test -n "${BENCH_IDS_IN_FLIGHT:-}"; then
                settings="$settings,in-flight=$BENCH_IDS_IN_FLIGHT"
            fi
            if test -n "${BENCH_IDS_GATHER_KB:-}"; then
                settings="$settings,gather-kb=$BENCH_IDS_GATHER_KB"
            fi
            if test -n "${BENCH_IDS_HOLD_US:-}"; then
                settings="$settings,hold-us=$BENCH_IDS_HOLD_US"
            fi ;;
    esac
    settings="$settings ${BENCH_OTHER_CONFIG:-}"
    start_switch "$3" $settings
    case $1 in ids-*) wait_log 'ruleset bench loaded' 60 ;; esac
    case $1 in fec-enc|fec-dec)
        # Coded frames are 26 bytes longer than the MTU's 1500 (and
        # fec-dec's none rows forward them coded).
        ovs-vsctl set Interface p1 mtu_request=1600 ;;
    esac
    case $1,$2 in fec,none|fec-dec,none) ;; fec,*|fec-dec,*)
        ovs-appctl gpu/inject-fault fec-loss 10000 >/dev/null ;;
    esac
    if test -n "${BENCH_PKT_HEAP:-}"; then
        ovs-appctl gpu/inject-fault pkt-heap $BENCH_PKT_HEAP >/dev/null
    fi
    if test -n "${BENCH_IDS_SLOW:-}"; then
        ovs-appctl gpu/inject-fault ids-slow $BENCH_IDS_SLOW >/dev/null
    fi
    if test -n "${BENCH_IDS_NULL_SCAN:-}"; then
        ovs-appctl gpu/inject-fault ids-null-scan $BENCH_IDS_NULL_SCAN \
            >/dev/null
    fi
    if test -n "${BENCH_IDS_ALERT_HOLD:-}"; then
        ovs-appctl gpu/inject-fault ids-alert-hold \
            $BENCH_IDS_ALERT_HOLD >/dev/null
    fi
    if test -n "${BENCH_RE_COPY:-}"; then
        ovs-appctl gpu/inject-fault re-copy $BENCH_RE_COPY >/dev/null
    fi
    if test -n "${BENCH_INDEX_DISK_RATE:-}" && test $1 = index; then
        # The store opens in the main loop after the switch starts; the
        # fault reaches only open stores.
        wait_log 'store bench opened' 10
        ovs-appctl gpu/inject-fault index-disk-rate \
            $BENCH_INDEX_DISK_RATE >/dev/null
    fi
}

# row_checks SERVICE BACKEND: the row's "checks" column, once its rate is
# taken (the index and fec rows' checks take the flows away).
row_checks() {
    local chk
    chk=$(checks $(test $2 = none && echo none || echo $1))
    if test $1 = index && test $2 != none; then
        chk="$chk; $(query_time)"
    fi
    case $1,$2 in fec,none|fec-dec,none|re-dec,none) ;;
        fec,*|fec-dec,*|re-dec,*)
        # Every frame delivered must be one of the original trace's.
        chk="$chk; $(fec_corruption "$RUN/text.pcap")" ;;
    esac
    echo "$chk"
}

# row_profile SERVICE BACKEND: with BENCH_PERF, a perf profile of the
# PMD threads while SERVICE's traffic flows.
row_profile() {
    test -n "${BENCH_PERF:-}" || return 0
    # While the traffic flows: perf does not stop the switch.
    if test $2 != none; then
        case $1 in
            fec*|index|re-dec) add_flows $1; sleep 1 ;;
        esac
    fi
    {
        echo "=== $1 $2, $N_PORTS PMDs"
        bash "$SRC/scripts/pmd-perf-profile.sh" \
            "$(cat "$RUN/ovs-vswitchd.pid")" "$BENCH_PERF" 2>&1 \
            || true
    } >> "${OUTFILE:-/dev/stderr}${OUTFILE:+.perf}"
}

# stop_row SERVICE BACKEND SHOW: the row's details (with --out: PMD
# statistics, gpu/show's SHOW, the service's own), then the switch
# stopped and its log kept.
stop_row() {
    if test -n "$OUTFILE"; then
        {
            echo "=== $1 $2, $N_PORTS PMDs: $a"
            ovs-appctl dpif-netdev/pmd-stats-show
            echo "$3"
            grep -E "registered with device|not registered" \
                "$RUN/ovs-vswitchd.log" || true
            case $1 in
                ids-*) ovs-appctl gpu-ids/show bench | awk 'NR <= 12 ||
                           /runtime calls|drop mode|held:|in place|in flight/' ;;
                re*) ovs-appctl gpu-re/show ;;
                fec*) ovs-appctl gpu-fec/show ;;
                index) ovs-appctl gpu-index/show bench ;;
            esac
            grep -E 'WARN|ERR' "$RUN/ovs-vswitchd.log" | tail -5
        } >> "$OUTFILE.details" 2>&1
    fi
    stop_switch
    mv "$RUN/ovs-vswitchd.log" "$RUN/ovs-vswitchd-$1-$2-$N_PORTS.log"
}

# alternate_row SERVICE BACKEND PCAP (--alternate N): one switch, its
# flows N times no service then SERVICE, each measured as a row is; one
# line with the medians of the pairs: the no-service and service rates,
# the pairs' ratios, and what the service cost a packet,
# 1/(service rate) - 1/(no-service rate), each pair measured seconds
# apart on the same switch.
alternate_row() {
    local service=$1 backend=$2 i none svc lookups out pairs= show chk lat
    local t0 on=0
    start_row $service $backend "$3"
    for i in $(seq 1 $ALTERNATE); do
        add_flows none
        read none lookups out < <(measure p1)
        t0=$(date +%s.%N)
        add_flows $service
        read svc lookups out < <(measure p1)
        on=$(awk -v on=$on -v t0=$t0 -v t1=$(date +%s.%N) \
             'BEGIN { printf "%.6f", on + t1 - t0 }')
        pairs="$pairs $none $svc"
        test -n "$OUTFILE" && echo "$service $backend $N_PORTS pair $i:" \
            "none $none, service $svc Mpps" >> "$OUTFILE.details"
    done
    show=$(ovs-appctl gpu/show)
    lat=$(echo "$show" | awk '/service call latency:/ { print $4 }')
    # The index's "kept/s": its records over the time its flows were on.
    flow_t0=$(awk -v on=$on -v t=$(date +%s.%N) \
              'BEGIN { printf "%.6f", t - on }')
    chk=$(row_checks $service $backend)
    echo "$pairs" | awk -v s=$service -v b=$backend -v p=$N_PORTS \
        -v m="$mean" -v lat="$lat" -v chk="$chk" "$AWK_MEDIAN"'
        {
            for (i = 1; i < NF; i += 2) {
                n++
                ratio = $i > 0 ? $(i + 1) / $i : 0
                none = none " " $i; svc = svc " " $(i + 1)
                ratios = ratios " " ratio
                costs = costs " " ($i > 0 && $(i + 1) > 0 \
                                   ? 1000 / $(i + 1) - 1000 / $i : 0)
                lo = n == 1 || ratio < lo ? ratio : lo
                hi = n == 1 || ratio > hi ? ratio : hi
                slo = n == 1 || $(i + 1) < slo ? $(i + 1) : slo
                shi = n == 1 || $(i + 1) > shi ? $(i + 1) : shi
            }
            r = median(ratios); c = median(costs)
            mn = median(none); ms = median(svc)
            printf "%-10s %-5s %4s %8.3f %8.3f %8.2f %8.2f %7.0f %9s  " \
                   "%s; pairs %d, vs none %.2f-%.2f, service " \
                   "%.3f-%.3f Mpps\n", s, b, p, mn, ms, ms * m * 8 / 1e3, \
                   r, c, lat, chk, n, lo, hi, slo, shi
        }' | tee -a ${OUTFILE:+"$OUTFILE"}
    check_row $service $backend "$chk"
    row_profile $service $backend
    if test -n "${BENCH_PERF:-}" && test $backend != none; then
        # The same switch without the service, seconds later: the two
        # profiles' shares, times each half's time a packet, say what
        # the service added where.
        add_flows none
        sleep 1
        row_profile "$service-none" none
    fi
    stop_row $service $backend "$show"
}

echo "# DPDK memory: $(test "${BENCH_HUGEPAGES:-no}" = yes \
    && echo '2 MB hugepages' || echo '4 kB pages (--no-huge)'); \
transparent hugepages: $(cat /sys/kernel/mm/transparent_hugepage/enabled \
    2>/dev/null || echo unknown); $COUNT frames" | tee ${OUTFILE:+"$OUTFILE"}
fmt='%-10s %-5s %4s %8s %8s %8s %8s %9s  %s\n'
if test "$ALTERNATE" -gt 0; then
    printf '%-10s %-5s %4s %8s %8s %8s %8s %7s %9s  %s\n' service back \
        pmds "none" "Mpps in" Gbit/s "vs none" "ns/pkt" "call us" \
        "checks; pairs" | tee ${OUTFILE:+-a "$OUTFILE"}
else
    printf "$fmt" service back pmds "Mpps in" "Mpps out" Gbit/s \
        "vs none" "call us" "checks" | tee ${OUTFILE:+-a "$OUTFILE"}
fi
for N_PORTS in $PMDS; do
for service in $SERVICES; do
    case $service in
        ids-*) pcap=$RUN/ids.pcap ;;
        fec-dec) make_fec_coded; pcap=$RUN/fec-coded.pcap ;;
        re-dec) make_re_coded; pcap=$RUN/re-coded.pcap ;;
        *) pcap=$RUN/text.pcap ;;
    esac
    mean=$(mean_frame "$pcap")
    if test "$ALTERNATE" -gt 0; then
        for backend in $BACKENDS; do
            alternate_row $service $backend "$pcap"
        done
        continue
    fi
    base=
    for backend in $(for r in $(seq 1 $REPEAT); do
                         echo none $BACKENDS; done); do
        start_row $service $backend "$pcap"
        add_flows $(test $backend = none && echo none || echo $service)
        flow_t0=$(date +%s.%N)
        read mpps_in lookups mpps_out < <(measure p1)
        show=$(ovs-appctl gpu/show)
        gbps=$(awk -v p="$mpps_in" -v m="$mean" \
            'BEGIN { printf "%.2f", p * m * 8 / 1e3 }')
        test $backend = none && base=$mpps_in
        vs=$(awk -v p="$mpps_in" -v b="$base" \
            'BEGIN { printf "%.2f", (b > 0 ? p / b : 0) }')
        lat=$(echo "$show" | awk '/service call latency:/ { print $4 }')
        chk=$(row_checks $service $backend)
        test $backend = none && lat=-
        printf "$fmt" "$service" "$backend" "$N_PORTS" "$mpps_in" \
            "$mpps_out" "$gbps" "$vs" "$lat" "$chk" \
            | tee -a ${OUTFILE:+"$OUTFILE"}
        echo "$service $backend $N_PORTS $mpps_in $vs" >> "$RUN/rates"
        test $backend = none || check_row $service $backend "$chk"
        row_profile $service $backend
        if test -n "${BENCH_SAMPLES:-}" && test $backend != none; then
            # Stacks of the PMD threads, after the rate was taken (each
            # sample stops the switch for a moment).
            {
                echo "=== $service $backend, $N_PORTS PMDs: PMD stacks"
                bash "$(dirname "$0")/pmd-stack-sample.sh" \
                    "$(cat "$RUN/ovs-vswitchd.pid")" "$BENCH_SAMPLES"
            } >> "${OUTFILE:-/dev/stderr}${OUTFILE:+.samples}"
        fi
        stop_row $service $backend "$show"
    done
done
done
case " $SERVICES " in *" re "*)
    for backend in $BACKENDS; do
        case $backend in cuda) verify_re 0 ;; cpu) verify_re cpu ;; esac
    done ;;
esac
case " $SERVICES " in *" ids-alert "*)
    for backend in $BACKENDS; do
        case $backend in cuda) verify_ids 0 ;; cpu) verify_ids cpu ;; esac
    done ;;
esac
if test "$REPEAT" -gt 1; then
    # Medians over the repeats: the no-service rate of one run can be far
    # from the next's (a shared host), so one run's ratio says little.
    echo "medians of $REPEAT runs: Mpps in, then each run's \"vs none\"," \
        "then the service's median over the no-service median:" \
        | tee -a ${OUTFILE:+"$OUTFILE"}
    awk "$AWK_MEDIAN"'
        {
            key = $1 " " $2 " " $3
            if (!(key in rate)) order[++n] = key
            rate[key] = rate[key] " " $4
            vs[key] = vs[key] " " $5
        }
        END {
            for (i = 1; i <= n; i++) {
                split(order[i], f, " ")
                m = median(rate[order[i]])
                none = median(rate[f[1] " none " f[3]])
                printf "%-10s %-5s %4s %8.3f %8.2f %8.2f\n", f[1], f[2], \
                    f[3], m, median(vs[order[i]]), (none > 0 ? m / none : 0)
            }
        }' "$RUN/rates" | tee -a ${OUTFILE:+"$OUTFILE"}
fi
others=
test -f "$RUN/text.pcap" && others=", others $(mean_frame "$RUN/text.pcap")"
echo "mean frames: ids $(mean_frame "$RUN/ids.pcap")$others bytes on the" \
    "wire; $(nproc) cores, PMDs from core $pmd_core down" \
    | tee -a ${OUTFILE:+"$OUTFILE"}
if test -n "$FAILED"; then
    echo "bench-services-switch.sh: checks FAILED:$FAILED" >&2
    exit 1
fi
