#!/bin/bash
# Builds gpu_services/re/ with nvcc and gcc on a GPU machine (no autotools
# tree needed), runs its tests on every backend and the benchmark, and
# leaves logs under $OUT.  About a minute of device time.
#
#   bench/run-re-gpu.sh [tests|bench|latency|all]...   (default: all)
#
# latency: the round trip of one call as re_encode's gathers make it in
# the switch (re-bench --latency, the chunker's modes RE_LATENCY_MODES,
# the encoding calls launched as RE_LATENCY_LAUNCH says: host, device or
# host,device; default host), then, where Nsight Compute is installed,
# the same call of 600 payloads split kernel by kernel (ncu times each
# node of the graph on its own; modes RE_NCU_MODES, "none" for no split;
# RE_NCU_CACHE=none keeps the caches warm between nodes, as a call runs,
# where ncu's default flushes them before each; RE_NCU_METRICS, more
# metrics for the CSV kept in $OUT).
#
# The device machine has no cmocka: it comes from the unpacked Debian
# packages the caller carries in .devdeps/root (libcmocka0, libcmocka-dev).
# Without it the tests are skipped and the benchmark still runs.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/re-gpu-out}
B=${BUILD:-/tmp/re-gpu-build}
mkdir -p "$OUT" "$B"
steps=${*:-all}

CM=$PWD/.devdeps/root
CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=$CUDA/bin/nvcc
LIBDIRS="-L$CM/usr/lib/x86_64-linux-gnu -L$CUDA/lib64"
export LD_LIBRARY_PATH=$CM/usr/lib/x86_64-linux-gnu:$CUDA/lib64:\
${LD_LIBRARY_PATH:-}

log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

log "$(date -u) on $(hostname)," \
    "commit $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm \
    --format=csv,noheader | tee -a "$OUT/summary.txt"
log "$(nproc) CPU cores: $(grep -m1 'model name' /proc/cpuinfo)"

printf '#define HAVE_CUDA 1\n' > "$B/config.h"
# test-re's real text is the repository's (data/), unpacked here.
scripts/unpack-data.sh "$B/data"
CFLAGS="-O2 -g -std=gnu11 -Wall -I$B -I. -I$CUDA/include -I$CM/usr/include \
 -DOVSGPU_DEFAULT_DATA=\"$B/data\""
have_cmocka=no
[ -f "$CM/usr/include/cmocka.h" ] && have_cmocka=yes
build() {
    set -e
    $NVCC -arch=sm_90 -O3 -std=c++17 -Xcompiler -fPIC -I"$B" -I. \
        -DHAVE_CONFIG_H --resource-usage -c gpu_services/re/re-cuda.cu \
        -o "$B/re-cuda.o" 2> "$OUT/nvcc-resource-usage.txt"
    $NVCC -arch=sm_90 -O3 -std=c++17 -I"$B" -I. -DHAVE_CONFIG_H -cubin \
        gpu_services/re/re-cuda.cu -o "$B/re-cuda.cubin"
    $NVCC -arch=sm_90 -O3 -std=c++17 -I"$B" -I. -DHAVE_CONFIG_H -ptx \
        gpu_services/re/re-cuda.cu -o "$OUT/re-cuda.ptx"
    if [ -x $CUDA/bin/cuobjdump ]; then
        $CUDA/bin/cuobjdump -sass "$B/re-cuda.cubin" > "$OUT/re-cuda.sass"
    else
        : > "$OUT/re-cuda.sass"
    fi
    for f in gpu_services/re/re.c gpu_services/re/re-codec.c \
             gpu_services/re/re-cpu.c gpu_runtime/gpu-runtime.c \
             bench/re-bench.c; do
        gcc $CFLAGS -c "$f" -o "$B/$(basename "$f" .c).o"
    done
    LIBS="$B/re.o $B/re-codec.o $B/re-cpu.o $B/re-cuda.o $B/gpu-runtime.o"
    gcc -o "$B/re-bench" "$B/re-bench.o" $LIBS $LIBDIRS \
        -lcudart -lpthread -lstdc++
    if [ $have_cmocka = yes ]; then
        gcc $CFLAGS -c tests/test-re.c -o "$B/test-re.o"
        gcc $CFLAGS -c tests/test-common.c -o "$B/test-common.o"
        gcc -o "$B/test-re" "$B/test-re.o" "$B/test-common.o" $LIBS \
            $LIBDIRS \
            -lcmocka -lcudart -lpthread -lstdc++
    fi
    set +e
}
if ! (build) > "$OUT/build.log" 2>&1; then
    log "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1
fi
log "built (cmocka: $have_cmocka)"
grep -A2 "chunk_kernel" "$OUT/nvcc-resource-usage.txt" \
    | grep -E "registers|stack" | head -10
# 16-byte loads and shared-memory table lookups in the chunk kernels.
log "PTX: $(grep -c 'ld.global.nc.v4' "$OUT/re-cuda.ptx") 16-byte loads," \
    "$(grep -c 'ld.shared.u64' "$OUT/re-cuda.ptx") 64-bit shared loads," \
    "$(grep -c 'ld.local\|st.local' "$OUT/re-cuda.ptx") local accesses;" \
    "SASS: $(grep -c 'LDG.E.128' "$OUT/re-cuda.sass") LDG.E.128," \
    "$(grep -c 'LDS.64' "$OUT/re-cuda.sass") LDS.64," \
    "$(grep -c 'LDL\|STL' "$OUT/re-cuda.sass") LDL/STL"

rc=0
for step in $steps; do
    case $step in
    tests|all)
        if [ $have_cmocka = yes ]; then
            log "tests, CUDA and CPU backends"
            GPU_RE_BACKEND=all timeout 120 "$B/test-re" \
                > "$OUT/test-re.log" 2>&1
            t=$?
            log "test-re (all backends) exit $t"
            [ $t = 0 ] || rc=1
            grep -E "SEED|backends|auto backend|PASSED|FAILED|ERROR|SKIP" \
                "$OUT/test-re.log" | head -20
        else
            log "tests skipped: no cmocka in .devdeps/root"
        fi
        ;;&
    bench|all)
        log "benchmark"
        cmd="$B/re-bench --mb 64 --iters 5 --streams 4 --trace-mb 16"
        cmd="$cmd --cache-mb 64"
        timeout 240 $cmd > "$OUT/bench.log" 2>&1
        log "re-bench exit $?"
        cat "$OUT/bench.log"
        ;;&
    latency|all)
        log "latency"
        cmd="$B/re-bench --mb 0 --trace-mb 8 --latency 64,256,600,1024,2048"
        cmd="$cmd --latency-modes ${RE_LATENCY_MODES:-packet,256}"
        cmd="$cmd --latency-launch ${RE_LATENCY_LAUNCH:-host}"
        echo "command: $cmd" > "$OUT/latency.log"
        timeout 120 $cmd >> "$OUT/latency.log" 2>&1
        log "re-bench --latency exit $?"
        grep -E "round trip" "$OUT/latency.log"
        NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu \
              2>/dev/null | tail -1)
        if [ -n "$NCU" ] && [ "${RE_NCU_MODES:-}" != none ]; then
            timeout 300 "$NCU" --graph-profiling node --clock-control none \
                --cache-control "${RE_NCU_CACHE:-all}" \
                --metrics \
                "gpu__time_duration.sum${RE_NCU_METRICS:+,$RE_NCU_METRICS}" \
                --csv \
                --log-file "$OUT/latency-ncu.csv" --kernel-name regex:graph \
                --launch-count 1200 "$B/re-bench" --mb 0 --trace-mb 8 \
                --latency 600 --latency-rounds 5 \
                --latency-modes "${RE_NCU_MODES:-packet,256}" \
                > "$OUT/latency-ncu.log" \
                2>&1
            log "ncu exit $? ($NCU)"
            python3 - "$OUT/latency-ncu.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14]
rows = rows[[r[0] for r in rows].index("ID"):]
head = rows[0]
k, v = head.index("Kernel Name"), head.index("Metric Value")
u = head.index("Metric Unit")
us = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}
t = collections.OrderedDict()
for r in rows[1:]:
    if r[head.index("Metric Name")] == "gpu__time_duration.sum":
        t.setdefault(r[k].split("(")[0].split("<")[0], []).append(
            float(r[v].replace(",", "")) * us.get(r[u], 1e-3))
for name, xs in t.items():
    print("  %-28s %4d launches, mean %8.2f us, min %8.2f, max %8.2f"
          % (name, len(xs), sum(xs) / len(xs), min(xs), max(xs)))
PY
        else
            log "no ncu: kernels not split"
        fi
        ;;
    esac
done
log "done $(date -u)"
exit $rc
