#!/usr/bin/env python3
"""Megaflows over many masks, and traffic that hits all of them.

  gen-masks.py --masks M --pcap FILE --flows FILE [--packets-per-flow K]
               [--in-port N] [--out-port N] [--seed S]

Writes M datapath flows (ovs-appctl dpctl/add-flow arguments, one per
line) with M distinct masks, and a pcap whose packets hit them in random
order, so that EMC and SMC miss and every lookup searches the megaflow
classifier: the shape of a Tuple Space Explosion attack, as used for the
stock OVS baseline (docs/BASELINES.md).

Flow i owns the disjoint source block 10.x.y.0/24 and its mask combines a
source prefix of /24 to /32, a destination prefix of /1 to /32 and an
exact or wildcarded Ethernet destination, so no two flows overlap.
"""
import argparse
import random
import struct
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from importlib import import_module  # noqa: E402

gen_pcap = import_module("gen-pcap")


def mask_of(plen):
    return (0xffffffff << (32 - plen)) & 0xffffffff if plen else 0


def dotted(v):
    return "%d.%d.%d.%d" % (v >> 24, (v >> 16) & 255, (v >> 8) & 255,
                            v & 255)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--masks", type=int, required=True)
    ap.add_argument("--pcap", required=True)
    ap.add_argument("--flows", required=True)
    ap.add_argument("--packets-per-flow", type=int, default=64)
    ap.add_argument("--in-port", type=int, default=1)
    ap.add_argument("--out-port", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not 1 <= args.masks <= 9 * 32 * 2:
        sys.exit("--masks must be 1 to 576")

    rng = random.Random(args.seed)
    combos = [(s, d, e) for e in (True, False) for d in range(32, 0, -1)
              for s in range(24, 33)]
    flows = []
    with open(args.flows, "w") as out:
        for i in range(args.masks):
            splen, dplen, eth_exact = combos[i]
            src = (10 << 24) | (i << 8)
            dst = (20 << 24) & mask_of(dplen)
            eth = "eth(dst=00:00:00:00:00:02)" if eth_exact else "eth()"
            out.write("in_port(%d),%s,eth_type(0x0800),ipv4(src=%s/%s,"
                      "dst=%s/%s) %d\n"
                      % (args.in_port, eth, dotted(src),
                         dotted(mask_of(splen)), dotted(dst),
                         dotted(mask_of(dplen)), args.out_port))
            flows.append((src, dst, dplen))

    packets = []
    for src, dst, dplen in flows:
        for _ in range(args.packets_per_flow):
            host = rng.getrandbits(32 - dplen) if dplen < 32 else 0
            packets.append((src, dst | host, rng.randrange(1024, 65536)))
    rng.shuffle(packets)
    with open(args.pcap, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for n, (src, dst, sport) in enumerate(packets):
            frame = gen_pcap.packet(src, dst, sport, 4789, 17, 60)
            f.write(struct.pack("<IIII", 0, n, len(frame), len(frame)))
            f.write(frame)
    print("%d flows, %d packets" % (len(flows), len(packets)))


if __name__ == "__main__":
    main()
