#!/bin/bash
# pmd-perf-profile.sh PID SECONDS [THREAD-REGEX]: a sampling profile
# (perf) of the threads of process PID whose name matches THREAD-REGEX
# (default "pmd", the switch's PMD threads): perf record at 999 Hz with
# call chains for SECONDS, then the functions (by library) by their own
# share of the samples (self) and by the share of the samples they were
# on the stack of (inclusive).  Unlike pmd-stack-sample.sh (gdb, which
# stops the process; cuda-gdb stopped a CUDA switch after 11 samples), it
# never stops the process: take it while the traffic flows.  perf comes
# from PATH (on the GPU machine, the bundle's: make-device-bundle.sh).
#
# The hardware cycles event where there is a PMU, else the cpu-clock
# software event (virtual machines often have none).  As root, the
# kernel's perf_event_paranoid and kptr_restrict are opened up for the
# run (kernel symbols), and set back after.  PERF_ROWS=N in the
# environment: N rows of each view instead of 40.  PERF_DATA=FILE: the
# recording is kept in FILE.1 (FILE.2 if that exists, and so on), for
# perf report -i with its call chains.
#
# Call chains come from a copy of the stack's top 8 KiB with each sample,
# walked with the unwind tables (perf's --call-graph dwarf): OVS and
# DPDK are built with -O2, which leaves out frame pointers, and with -g
# (frame pointers) the inclusive view was mostly unknown addresses, with
# no pmd_thread_main and dp_netdev_input__ at its self share.  It costs 8 MB of perf data
# per thread and second, in TMPDIR, and a report 2 s longer for 3 s of
# one thread.  The walk stops at dp_netdev_input__ for the samples under
# it (an [unknown] caller 0xffffffffffffffff, with 32 KiB copied too):
# the shares under it hold, pmd_thread_main's lacks those samples.
# PERF_CALL_GRAPH=fp takes -g instead (or e.g. dwarf,16384: perf's
# --call-graph); self shares are the same either way.
set -u
pid=$1
seconds=$2
match=${3:-pmd}
command -v perf >/dev/null || {
    echo "pmd-perf-profile.sh: no perf in PATH" >&2
    exit 1
}
tids=
for t in /proc/"$pid"/task/*; do
    name=$(cat "$t/comm" 2>/dev/null) || continue
    [[ $name =~ $match ]] && tids=$tids${tids:+,}${t##*/}
done
if test -z "$tids"; then
    echo "pmd-perf-profile.sh: no thread of $pid matches \"$match\"" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pmd-perf.XXXXXX")
restore=
for k in perf_event_paranoid:-1 kptr_restrict:0; do
    f=/proc/sys/kernel/${k%%:*}
    old=$(cat "$f" 2>/dev/null) || continue
    test "$old" = "${k#*:}" && continue
    if echo "${k#*:}" 2>/dev/null > "$f"; then
        restore="$restore $f:$old"
    fi
done
cleanup() {
    local r
    for r in $restore; do
        echo "${r#*:}" > "${r%:*}" 2>/dev/null
    done
    if test -n "${PERF_DATA:-}" && test -f "$tmp/perf.data"; then
        local n=1
        while test -e "$PERF_DATA.$n"; do
            n=$((n + 1))
        done
        cp "$tmp/perf.data" "$PERF_DATA.$n"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

case ${PERF_CALL_GRAPH:=dwarf} in
    fp) cg=-g ;;
    *) cg="--call-graph $PERF_CALL_GRAPH" ;;
esac
for event in cycles cpu-clock; do
    perf record -q -e $event -F 999 $cg -N -t "$tids" -o "$tmp/perf.data" \
        -- sleep "$seconds" > "$tmp/record.log" 2>&1 && break
    event=
done
if test -z "$event"; then
    echo "pmd-perf-profile.sh: perf record failed:" >&2
    cat "$tmp/record.log" >&2
    exit 1
fi

# The report's first PERF_ROWS (default 40) rows by self share, then by
# inclusive share, without its header and call chains.
rows=${PERF_ROWS:-40}
for view in no-children children; do
    fields=overhead,dso,sym
    test $view = children && fields=overhead_children,$fields
    perf report -i "$tmp/perf.data" --$view -F $fields --stdio -g none \
        --percent-limit 0.1 2>/dev/null > "$tmp/$view.txt"
done
echo "perf: threads $tids matching \"$match\";" \
    "$(sed -n 's/^# Samples: *\(.*\)/\1/p' "$tmp/children.txt") in" \
    "$seconds s; call chains $PERF_CALL_GRAPH"
echo "self:"
grep -v -e '^#' -e '^ *$' "$tmp/no-children.txt" | head -"$rows"
echo "inclusive, self:"
grep -v -e '^#' -e '^ *$' "$tmp/children.txt" | head -"$rows"
