#!/bin/bash
# Device encoder, warp per payload: every test on CUDA (test-re's
# test_device_encode, the OVS autotests with encoder=device among them).
# carry: .devcmdC.sh .devauto.tgz .devdeps .devdeps-index .devdeps-ids
# .devdeps-parity
tar xzf .devauto.tgz && OUT=/tmp/dr timeout 400 bash scripts/device-run.sh build test > /tmp/dr.log 2>&1
echo "device-run rc $?"
grep -E "^  test-|^  OVS|^tests:" /tmp/dr.log | head -30
grep -h -E "device encoder|LINE|ERROR" /tmp/dr/test-re.log | head -20
grep -h "re_encode\|FAILED" /tmp/dr/check-ovs.log | head -20
tar czf $OUT/dr.tgz /tmp/dr /tmp/dr.log 2>/dev/null
