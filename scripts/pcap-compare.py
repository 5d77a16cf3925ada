#!/usr/bin/env python3
"""Compares the frames a switch sent (a pcap) with those it was given.

  pcap-compare.py same IN OUT FAILED
      OUT must hold IN's frames, byte for byte and in order, but for
      FAILED of them (packets the datapath itself dropped, e.g. failed
      upcalls); exit 1 otherwise.
  pcap-compare.py corrupt IN OUT
      Counts the frames of OUT that are not, byte for byte, a frame of IN
      (what a wrong rebuild would deliver); exit 1 if any.
"""
import struct
import sys


def frames(path):
    with open(path, "rb") as f:
        f.read(24)
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            yield f.read(struct.unpack("<IIII", h)[2])


def same(inp, out, failed):
    a, b = list(frames(inp)), list(frames(out))
    i = n_same = 0
    for x in b:
        while i < len(a) and a[i] != x:
            i += 1
        if i == len(a):
            break
        n_same += 1
        i += 1
    ok = n_same == len(b) and len(a) - len(b) == failed
    print("%d of %d frames out, %s; %d failed upcalls%s"
          % (len(b), len(a), "identical and in order" if n_same == len(b)
             else "only %d in order and identical" % n_same, failed,
             "" if ok else ": MISMATCH"))
    return ok


def corrupt(inp, out):
    good = set(frames(inp))
    n = bad = 0
    for x in frames(out):
        n += 1
        bad += x not in good
    print("corrupt %d of %d delivered" % (bad, n))
    return bad == 0


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "same":
        ok = same(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "corrupt":
        ok = corrupt(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
