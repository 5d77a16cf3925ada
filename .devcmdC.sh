# Tests at HEAD on CUDA, then the re pair before/after.
tar xzf .devauto.tgz
OUT=/tmp/dr bash scripts/device-run.sh build test > /tmp/dr-log.txt 2>&1
grep -E "^(  test-|  kernel|  OVS|tests:|cmocka|check-ovs|      FAILED)" /tmp/dr-log.txt
grep -h -E "FAILED \(" /tmp/dr/check-ovs.log | head -5
mkdir -p /tmp/o; cp /tmp/dr-log.txt /tmp/dr/*.log /tmp/o/ 2>/dev/null
B=$PWD/.devbench; cp $B/bin/ovs-vswitchd /tmp/vs-new
export LD_LIBRARY_PATH=$B/lib PATH=$B/bin:$PATH VSWITCH_SCHEMA=$B/vswitch.ovsschema DPDK_PMD_ARGS="-d $B/pmds"
scripts/unpack-data.sh /tmp/d >/dev/null; R=/tmp/d/snort-community/community.rules
sb() { timeout 150 scripts/bench-services-switch.sh --rules $R --text $R --seconds 3 --services re "$@" 2>&1 | grep -v '^20[0-9][0-9]-' | grep -E '^re '; }
for r in 1 2; do
  cp .devbench-base/ovs-vswitchd $B/bin/ovs-vswitchd; echo "== base round $r"
  sb --backends cuda --out /tmp/o/re-base$r.txt
  cp /tmp/vs-new $B/bin/ovs-vswitchd; echo "== graph round $r"
  if [ $r = 1 ]; then bk="cuda cpu"; else bk=cuda; fi
  sb --backends "$bk" --out /tmp/o/re-graph$r.txt
done
tar czf $OUT/c.tgz -C /tmp/o .
