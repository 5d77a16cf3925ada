#!/bin/bash
# pmd-stack-sample.sh PID [SAMPLES] [THREAD-REGEX]: a poor man's profiler
# for a machine without perf (the GPU machine has cuda-gdb, no perf): stops
# process PID SAMPLES times (default 40), takes every thread's stack, and
# prints for the threads whose name matches THREAD-REGEX (default "pmd")
# how often each function was on top of the stack (self) and anywhere in
# it (inclusive), as shares of the samples.  Each sample stops the process
# for a moment: take rates before sampling, not during.
set -u
pid=$1
samples=${2:-40}
match=${3:-pmd}
gdb=$(command -v gdb || command -v cuda-gdb || \
      ls /usr/local/cuda/bin/cuda-gdb 2>/dev/null) || {
    echo "pmd-stack-sample.sh: no gdb or cuda-gdb" >&2
    exit 1
}
for i in $(seq 1 "$samples"); do
    "$gdb" -q -batch -nx -p "$pid" -ex "set pagination off" \
        -ex "thread apply all bt 24" 2>/dev/null
    echo "=== sample end"
    sleep 0.05
done | awk -v match_re="$match" '
    /^Thread [0-9]+ / {
        # Thread 3 (Thread 0x7f.. (LWP 123) "pmd-c01/id:6"):
        name = $0
        sub(/^[^"]*"/, "", name)
        sub(/".*$/, "", name)
        take = name ~ match_re
        if (take) {
            threads++
            delete seen
        }
        next
    }
    take && /^#[0-9]+ / {
        line = $0
        # "#1  0x00.. in func (args) at f.c:1" or "#0  func (args) at ..."
        sub(/^#[0-9]+ +(0x[0-9a-f]+ in )?/, "", line)
        sub(/ \(.*$/, "", line)
        if (line == "") line = "??"
        if ($1 == "#0") self[line]++
        if (!(line in seen)) { seen[line] = 1; incl[line]++ }
        next
    }
    END {
        if (!threads) { print "no thread matched " match_re; exit }
        printf "%d stacks of threads matching \"%s\"\n", threads, match_re
        print "self:"
        for (f in self) printf "%6.1f%%  %s\n", 100 * self[f] / threads, f \
            | "sort -rn | head -25"
        close("sort -rn | head -25")
        print "inclusive:"
        for (f in incl) printf "%6.1f%%  %s\n", 100 * incl[f] / threads, f \
            | "sort -rn | head -40"
        close("sort -rn | head -40")
    }'
