#!/bin/bash
# Every test on CUDA (test-re's XXH64 payload checks from the device's
# hash kernel against the host's among them, the OVS autotests).
# carry: .devcmdC.sh .devauto.tgz .devdeps .devdeps-index .devdeps-ids
# .devdeps-parity
tar xzf .devauto.tgz && OUT=/tmp/dr timeout 420 bash scripts/device-run.sh build test > /tmp/dr.log 2>&1
echo "device-run rc $?"
grep -E "^  test-|^  OVS|^tests:|cmocka: exit|check-ovs: exit|xxhash" /tmp/dr.log | head -30
grep -h -E "oracle|version 1|cuda|FAILED|ERROR" /tmp/dr/test-re.log | head -20
grep -h -E "FAILED| failed" /tmp/dr/check-ovs.log | head -20
tar czf $OUT/dr.tgz /tmp/dr /tmp/dr.log 2>/dev/null
