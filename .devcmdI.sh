#!/bin/bash
# Switch rows, one PMD: re_encode alone and the re pair, the chunker
# reading held payloads in place against copying them (BENCH_RE_COPY=1),
# in the order copy, in place, in place, copy; then the CPU backend.
# carry: .devbench .devcmdI.sh
cat .devbench/COMMIT
B=$PWD/.devbench
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH PATH=$B/bin:$PATH
export VSWITCH_SCHEMA=$B/vswitch.ovsschema
test -d /usr/lib/x86_64-linux-gnu/dpdk || export DPDK_PMD_ARGS="-d $B/pmds"
scripts/unpack-data.sh /tmp/ovsgpu-data > /dev/null
R=/tmp/ovsgpu-data/snort-community/community.rules
run() {         # NAME BACKENDS ALTERNATE [ENV...]
    local name=$1 be=$2 alt=$3; shift 3
    echo "=== $name"
    env "$@" timeout 200 scripts/bench-services-switch.sh --rules $R \
        --text $R --seconds 2 --services "re-enc re" --alternate $alt \
        --check --backends "$be" --out $OUT/$name.txt 2>&1 \
        | grep -v '^20[0-9][0-9]-' | grep -E "^re|^#|rror" | grep -v "^# DPDK"
}
run copy1 cuda 3 BENCH_RE_COPY=1
run inplace1 cuda 3
run inplace2 cuda 3
run copy2 cuda 3 BENCH_RE_COPY=1
run cpu cpu 2
grep -h "read in place\|registered" $OUT/*.details | sort | uniq -c | head -20
