#!/usr/bin/env python3
"""Writes a pcap of Ethernet/IPv4 packets for the ovs-gpu demo and tests.

The headers come from a ClassBench header trace (real 5-tuples: source and
destination address, ports, protocol), so the traffic exercises the same
rule sets the classifier is tested and measured on.  Without a trace, a
seeded random mix is written.  Standard library only, so a fresh machine
needs nothing beyond python3.

  gen-pcap.py --out FILE [--trace TRACE[.gz]] [--count N] [--size BYTES]
              [--size-mix internet] [--plant TEXT [--plant-every N]]
              [--payload-from FILE] [--seed S]
"""
import argparse
import gzip
import random
import struct
import sys

ETH_DST = bytes.fromhex("000000000002")
ETH_SRC = bytes.fromhex("000000000001")


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return ~total & 0xffff


def packet(src, dst, sport, dport, proto, size, plant=b"", fill=None):
    """Returns one frame of 'size' bytes (without FCS, at least 60), or
    longer if needed to start the payload with 'plant'.  The rest of the
    payload is a fixed pattern, or comes from 'fill(length)'."""
    size = max(size, 60)
    if proto == 6:
        l4_len = 20
    elif proto == 17:
        l4_len = 8
    else:
        l4_len = 0
    payload_len = max(size - 14 - 20 - l4_len, len(plant), 0)
    rest = payload_len - len(plant)
    payload = plant + (fill(rest) if fill else
                       bytes((i * 7 + 3) & 0xff for i in range(rest)))
    ip_len = 20 + l4_len + payload_len
    pseudo = struct.pack("!IIBBH", src, dst, 0, proto, l4_len + payload_len)
    if proto == 6:
        hdr = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x18,
                          65535, 0, 0)
        csum = checksum(pseudo + hdr + payload)
        l4 = hdr[:16] + struct.pack("!H", csum) + hdr[18:]
    elif proto == 17:
        hdr = struct.pack("!HHHH", sport, dport, 8 + payload_len, 0)
        csum = checksum(pseudo + hdr + payload) or 0xffff
        l4 = hdr[:6] + struct.pack("!H", csum)
    else:
        l4 = b""
    ip = struct.pack("!BBHHHBBHII", 0x45, 0, ip_len, 0, 0x4000, 64, proto,
                     0, src, dst)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return ETH_DST + ETH_SRC + struct.pack("!H", 0x0800) + ip + l4 + payload


def trace_tuples(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 5:
                continue
            src, dst, sport, dport, proto = (int(x) for x in fields[:5])
            yield src, dst, sport & 0xffff, dport & 0xffff, proto & 0xff


def random_tuples(rng):
    while True:
        proto = rng.choice((6, 6, 17, 17, 1))
        yield (rng.getrandbits(32), (10 << 24) | rng.getrandbits(24),
               rng.randrange(1024, 65536), rng.choice((53, 80, 443, 8080)),
               proto)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--trace")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--size", type=int, default=64,
                    help="frame size with FCS, as on the wire")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--size-mix", choices=("internet",),
                    help="frame sizes drawn from an Internet-like mix: "
                    "50%% 64, 20%% 576, 30%% 1500 bytes (mean near 600), "
                    "instead of --size")
    ap.add_argument("--plant", default="",
                    help="text that starts the payload of some packets "
                    "(an IDS signature for gpu_ids)")
    ap.add_argument("--plant-every", type=int, default=10,
                    help="plant the text in one packet of this many")
    ap.add_argument("--payload-from",
                    help="take payloads from this file (.gz read whole) at "
                    "random offsets, so that the traffic repeats itself as "
                    "real traffic does (for re_encode), instead of a fixed "
                    "pattern")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    fill = None
    if args.payload_from:
        opener = gzip.open if args.payload_from.endswith(".gz") else open
        with opener(args.payload_from, "rb") as f:
            text = f.read()
        if len(text) < 2048:
            sys.exit("%s: too short for payloads" % args.payload_from)

        def fill(length):
            off = rng.randrange(0, len(text) - length)
            return text[off:off + length]
    tuples = trace_tuples(args.trace) if args.trace else random_tuples(rng)
    n = 0
    with open(args.out, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for src, dst, sport, dport, proto in tuples:
            if n >= args.count:
                break
            plant = (args.plant.encode()
                     if args.plant and n % args.plant_every == 0 else b"")
            size = args.size
            if args.size_mix:
                size = rng.choices((64, 576, 1500), (50, 20, 30))[0]
            frame = packet(src, dst, sport, dport, proto, size - 4, plant,
                           fill)
            out.write(struct.pack("<IIII", n // 1000000, n % 1000000,
                                  len(frame), len(frame)))
            out.write(frame)
            n += 1
    if n < args.count:
        print("warning: trace had only %d packets" % n, file=sys.stderr)
    print("%s: %d packets" % (args.out, n))


if __name__ == "__main__":
    main()
