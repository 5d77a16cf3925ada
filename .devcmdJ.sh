#!/bin/bash
# re_encode with the payloads read in place: a profile of the PMD (one
# PMD), then 4 PMDs in place against copying (BENCH_RE_COPY=1).
# carry: .devbench .devcmdJ.sh
cat .devbench/COMMIT
B=$PWD/.devbench
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH PATH=$B/bin:$PATH
export VSWITCH_SCHEMA=$B/vswitch.ovsschema
test -d /usr/lib/x86_64-linux-gnu/dpdk || export DPDK_PMD_ARGS="-d $B/pmds"
scripts/unpack-data.sh /tmp/ovsgpu-data > /dev/null
R=/tmp/ovsgpu-data/snort-community/community.rules
run() {         # NAME PMDS ALTERNATE [ENV...]
    local name=$1 pmds=$2 alt=$3; shift 3
    echo "=== $name"
    env "$@" timeout 200 scripts/bench-services-switch.sh --rules $R \
        --text $R --seconds 2 --services "re-enc" --alternate $alt \
        --check --backends cuda --pmds "$pmds" --out $OUT/$name.txt 2>&1 \
        | grep -v '^20[0-9][0-9]-' | grep -E "^re|^#|rror" | grep -v "^# DPDK"
}
run perf 1 1 BENCH_PERF=2
run pmd4-inplace1 4 2
run pmd4-copy 4 2 BENCH_RE_COPY=1
run pmd4-inplace2 4 2
head -60 $OUT/perf.txt.perf
