#!/usr/bin/env python3
"""ClassBench filters as OpenFlow flows, and the answers they must give.

  classbench-flows.py flows FILTERS --count N
      prints N filters as ovs-ofctl flows (for add-flows), from in_port 1:
      priority falls with file order, port ranges are split into
      value/mask prefixes, even-numbered filters output to port 2 and odd
      ones drop, and a priority-0 flow drops the rest.
  classbench-flows.py expect FILTERS --count N PCAP
      prints how many packets of PCAP those flows send to port 2, found by
      a brute-force highest-priority search written independently of OVS:
      the reference the DPDK smoke test checks the switch against.

Filters with many megaflow masks are what the GPU classifier is for: OVS's
megaflows over these rules differ in prefix lengths and ports.
"""
import argparse
import struct
import sys


def parse_filters(path, count):
    filters = []
    with open(path) as f:
        for line in f:
            if not line.startswith("@"):
                continue
            fields = line[1:].replace(":", " ").split()
            src, dst = fields[0], fields[1]
            sp_lo, sp_hi, dp_lo, dp_hi = (int(x) for x in fields[2:6])
            proto, proto_mask = (int(x, 16) for x in fields[6].split("/"))
            filters.append((prefix(src), prefix(dst), (sp_lo, sp_hi),
                            (dp_lo, dp_hi), proto if proto_mask else None))
            if len(filters) >= count:
                break
    return filters


def prefix(text):
    addr, plen = text.split("/")
    a = [int(x) for x in addr.split(".")]
    value = (a[0] << 24) | (a[1] << 16) | (a[2] << 8) | a[3]
    plen = int(plen)
    mask = (0xffffffff << (32 - plen)) & 0xffffffff if plen else 0
    return value & mask, mask


def range_to_prefixes(lo, hi):
    """Splits [lo, hi] into (value, mask) pairs over 16 bits."""
    out = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << 16
        while lo + size - 1 > hi:
            size >>= 1
        out.append((lo, (0xffff ^ (size - 1)) & 0xffff))
        lo += size
    return out


def dotted(v):
    return "%d.%d.%d.%d" % (v >> 24, (v >> 16) & 255, (v >> 8) & 255,
                            v & 255)


def flows(filters):
    n = len(filters)
    for i, (src, dst, sp, dp, proto) in enumerate(filters):
        action = "output:2" if i % 2 == 0 else "drop"
        match = ["priority=%d" % (n - i + 1), "in_port=1", "ip"]
        if src[1]:
            match.append("nw_src=%s/%s" % (dotted(src[0]), dotted(src[1])))
        if dst[1]:
            match.append("nw_dst=%s/%s" % (dotted(dst[0]), dotted(dst[1])))
        ports = proto in (6, 17)
        if proto is not None:
            match.append("nw_proto=%d" % proto)
        sps = range_to_prefixes(*sp) if ports and sp != (0, 65535) else [None]
        dps = range_to_prefixes(*dp) if ports and dp != (0, 65535) else [None]
        for s in sps:
            for d in dps:
                m = list(match)
                if s:
                    m.append("tp_src=0x%x/0x%x" % s)
                if d:
                    m.append("tp_dst=0x%x/0x%x" % d)
                print(",".join(m) + ",actions=" + action)
    print("priority=0,actions=drop")


def packets(path):
    with open(path, "rb") as f:
        f.read(24)
        while True:
            hdr = f.read(16)
            if len(hdr) < 16:
                return
            frame = f.read(struct.unpack("<IIII", hdr)[2])
            if len(frame) < 34 or frame[12:14] != b"\x08\x00":
                yield None
                continue
            proto = frame[23]
            src, dst = struct.unpack("!II", frame[26:34])
            sport = dport = None
            if proto in (6, 17) and len(frame) >= 38:
                sport, dport = struct.unpack("!HH", frame[34:38])
            yield src, dst, proto, sport, dport


def expect(filters, pcap):
    forwarded = 0
    for pkt in packets(pcap):
        if pkt is None:
            continue
        src, dst, proto, sport, dport = pkt
        for i, (fs, fd, sp, dp, fproto) in enumerate(filters):
            if src & fs[1] != fs[0] or dst & fd[1] != fd[0]:
                continue
            if fproto is not None and proto != fproto:
                continue
            if fproto in (6, 17):
                if not sp[0] <= sport <= sp[1] or not dp[0] <= dport <= dp[1]:
                    continue
            # OpenFlow ignores port matches for other protocols, and so
            # did flows() above.
            forwarded += i % 2 == 0
            break
    print(forwarded)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("flows", "expect"))
    ap.add_argument("filters")
    ap.add_argument("pcap", nargs="?")
    ap.add_argument("--count", type=int, default=1000)
    args = ap.parse_args()
    filters = parse_filters(args.filters, args.count)
    if args.what == "flows":
        flows(filters)
    else:
        if not args.pcap:
            sys.exit("expect needs a pcap")
        expect(filters, args.pcap)


if __name__ == "__main__":
    main()
