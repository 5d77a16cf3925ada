#!/usr/bin/env python3
"""Draws a small line plot as SVG with no plotting library (the machines
have none): log-scaled axes, one line per series.

  plot-svg.py --out FILE.svg --title T --xlabel X --ylabel Y \\
      --series "NAME:x1,y1 x2,y2 ..." [--series ...]
"""
import argparse
import math

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="")
    ap.add_argument("--xlabel", default="")
    ap.add_argument("--ylabel", default="")
    ap.add_argument("--series", action="append", required=True)
    args = ap.parse_args()

    series = []
    for s in args.series:
        name, pts = s.split(":", 1)
        series.append((name, [tuple(map(float, p.split(",")))
                              for p in pts.split()]))
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    lx0, lx1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    ly0, ly1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    lx1 = max(lx1, lx0 + 1)
    ly1 = max(ly1, ly0 + 1)
    W, H, L, R, T, B = 640, 400, 70, 180, 40, 50

    def px(x):
        return L + (math.log10(x) - lx0) / (lx1 - lx0) * (W - L - R)

    def py(y):
        return H - B - (math.log10(y) - ly0) / (ly1 - ly0) * (H - T - B)

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14">%s</text>' % (L, args.title)]
    for e in range(lx0, lx1 + 1):
        x = px(10 ** e)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>'
                   % (x, T, x, H - B))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>'
                   % (x, H - B + 16, 10 ** e))
    for e in range(ly0, ly1 + 1):
        y = py(10 ** e)
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>'
                   % (L, y, W - R, y))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>'
                   % (L - 6, y + 4, 10 ** e))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>'
               % ((L + W - R) // 2, H - 12, args.xlabel))
    out.append('<text x="16" y="%d" transform="rotate(-90 16 %d)" '
               'text-anchor="middle">%s</text>'
               % ((T + H - B) // 2, (T + H - B) // 2, args.ylabel))
    for i, (name, pts) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        path = " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in pts)
        out.append('<polyline points="%s" fill="none" stroke="%s" '
                   'stroke-width="2"/>' % (path, c))
        for x, y in pts:
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>'
                       % (px(x), py(y), c))
        ly = T + 10 + 18 * i
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" '
                   'stroke-width="2"/>' % (W - R + 10, ly, W - R + 30, ly, c))
        out.append('<text x="%d" y="%d">%s</text>' % (W - R + 36, ly + 4, name))
    out.append("</svg>")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
