#!/bin/bash
# Every test on CUDA (test-ids's frames parsed by the device among them,
# the OVS autotests), then ids-bench's kernel and end-to-end figures.
# carry: .devcmdC.sh .devauto.tgz .devdeps .devdeps-index .devdeps-ids
# .devdeps-parity
tar xzf .devauto.tgz && OUT=/tmp/dr timeout 420 bash scripts/device-run.sh build test > /tmp/dr.log 2>&1
echo "device-run rc $?"
grep -E "^  test-|^  OVS|^tests:|cmocka: exit|check-ovs: exit" /tmp/dr.log | head -30
grep -h -E "frames|FAILED|ERROR|seed" /tmp/dr/test-ids.log | head -20
grep -h -E "gpu_ids|FAILED| failed" /tmp/dr/check-ovs.log | head -20
tar czf $OUT/dr.tgz /tmp/dr /tmp/dr.log 2>/dev/null
