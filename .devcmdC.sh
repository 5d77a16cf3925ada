#!/bin/bash
# Every test on CUDA (test-re's device encoder with payloads read in
# place, test-runtime's gather descriptors, the OVS autotests), then
# re-bench.
# carry: .devcmdC.sh .devauto.tgz .devdeps .devdeps-index .devdeps-ids
# .devdeps-parity
tar xzf .devauto.tgz && OUT=/tmp/dr timeout 420 bash scripts/device-run.sh build test > /tmp/dr.log 2>&1
echo "device-run rc $?"
grep -E "^  test-|^  OVS|^tests:|cmocka: exit|check-ovs: exit" /tmp/dr.log | head -30
grep -h -E "device encoder|FAILED|gather" /tmp/dr/test-re.log /tmp/dr/test-runtime.log | head -20
grep -h -E "re_encode|FAILED| failed" /tmp/dr/check-ovs.log | head -20
cd /tmp/ovsgpu-build && timeout 100 bench/re-bench --mb 0 --trace-mb 16 --cache-mb 64 --packet-passes 1 > $OUT/re-bench.txt 2>&1
echo "re-bench rc $?"; grep -E "device|host|saving|undecod" $OUT/re-bench.txt | head -20
tar czf $OUT/dr.tgz /tmp/dr /tmp/dr.log 2>/dev/null
