#!/usr/bin/env python3
# Copyright (c) 2026 The ovs-gpu authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at:
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""What a service adds to a packet's time, function by function.

    profile-diff.py PERF_FILE SERVICE_MPPS NONE_MPPS [ROWS]

PERF_FILE is the OUT.perf file of scripts/bench-services-switch.sh with
BENCH_PERF (a service's profile, then the no-service profile taken a
second later); SERVICE_MPPS and NONE_MPPS the two rates of that row.  Each
function's self share times its row's time a packet gives its ns a packet;
printed: the service's, the no-service profile's and the difference, the
largest differences first (ROWS of them, default 30), a shared library's
unnamed addresses summed under its name.  perf samples the PMD threads
only, so the shares are of the PMD's time.
"""

import re
import sys


def read_profiles(path):
    """The 'self' tables of PATH's profiles, in order: lists of
    {symbol: share in percent}."""
    profiles = []
    mode = None
    line_re = re.compile(r'\s+([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*)')
    with open(path) as f:
        for line in f:
            if line.startswith('==='):
                profiles.append({})
                mode = None
            elif line.startswith('self:'):
                mode = 'self'
            elif line.startswith('inclusive'):
                mode = None
            elif mode == 'self' and profiles:
                m = line_re.match(line)
                if not m:
                    continue
                dso, sym = m.group(2), m.group(3).strip()
                if sym.startswith('0x'):
                    # An address without a symbol: sum it under its
                    # library's name (e.g. librte_net_pcap.so.23.0).
                    name = re.sub(r'\.so[.\d]*$', '.so', dso)
                else:
                    name = sym
                share = profiles[-1].get(name, 0.0)
                profiles[-1][name] = share + float(m.group(1))
    return profiles


def main(argv):
    if len(argv) not in (4, 5):
        sys.stderr.write(__doc__)
        return 2
    profiles = read_profiles(argv[1])
    if len(profiles) < 2:
        sys.stderr.write('%s: need a service profile and a no-service '
                         'profile after it\n' % argv[1])
        return 1
    service_ns, none_ns = 1000 / float(argv[2]), 1000 / float(argv[3])
    rows = int(argv[4]) if len(argv) == 5 else 30
    service = {k: v / 100 * service_ns for k, v in profiles[0].items()}
    none = {k: v / 100 * none_ns for k, v in profiles[1].items()}
    print('%.0f ns a packet against %.0f' % (service_ns, none_ns))
    names = sorted(set(service) | set(none),
                   key=lambda k: none.get(k, 0) - service.get(k, 0))
    for name in names[:rows]:
        a, b = service.get(name, 0.0), none.get(name, 0.0)
        print('%-40s %7.1f %7.1f %+7.1f' % (name[:40], a, b, a - b))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
