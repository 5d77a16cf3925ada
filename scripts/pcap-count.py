#!/usr/bin/env python3
"""Counts the packets of a pcap file, optionally only IPv4 packets of the
given IP protocols (--proto 6,17), and of those only the ones whose bytes
contain a text (--containing TEXT: what an IDS rule with that content
alone must match).  Independent of OVS and DPDK, so the tests can check
what the switch forwarded or matched."""
import argparse
import struct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pcap")
    ap.add_argument("--proto")
    ap.add_argument("--containing")
    args = ap.parse_args()
    protos = {int(p) for p in args.proto.split(",")} if args.proto else None
    text = args.containing.encode() if args.containing else None

    n = 0
    with open(args.pcap, "rb") as f:
        magic = struct.unpack("<I", f.read(24)[:4])[0]
        endian = "<" if magic in (0xa1b2c3d4, 0xa1b23c4d) else ">"
        while True:
            hdr = f.read(16)
            if len(hdr) < 16:
                break
            incl = struct.unpack(endian + "IIII", hdr)[2]
            frame = f.read(incl)
            if text is not None and text not in frame:
                continue
            if protos is None:
                n += 1
            elif (len(frame) >= 34 and frame[12:14] == b"\x08\x00"
                  and frame[23] in protos):
                n += 1
    print(n)


if __name__ == "__main__":
    main()
