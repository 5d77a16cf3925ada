#!/usr/bin/env python3
"""Draws a small line or bar plot as SVG with no plotting library (the
machines have none).  Lines: log-scaled axes, one line per series.  Bars
(--bars): a linear axis from 0, one group of bars per label, one bar per
series in each group, and an optional dashed line at --target.

  plot-svg.py --out FILE.svg --title T --xlabel X --ylabel Y \\
      --series "NAME:x1,y1 x2,y2 ..." [--series ...]
  plot-svg.py --bars --out FILE.svg --title T --ylabel Y [--target V] \\
      --series "NAME:LABEL=v LABEL=v ..." [--series ...]
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
    ap.add_argument("--bars", action="store_true")
    ap.add_argument("--target", type=float)
    args = ap.parse_args()
    out = bars(args) if args.bars else lines(args)
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


W, H, L, R, T, B = 640, 400, 70, 180, 40, 50


def frame(args):
    """The SVG's start: background, title and axis labels."""
    return ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="sans-serif" font-size="12">' % (W, H),
            '<rect width="100%" height="100%" fill="white"/>',
            '<text x="%d" y="20" font-size="14">%s</text>' % (L, args.title),
            '<text x="%d" y="%d" text-anchor="middle">%s</text>'
            % ((L + W - R) // 2, H - 12, args.xlabel),
            '<text x="16" y="%d" transform="rotate(-90 16 %d)" '
            'text-anchor="middle">%s</text>'
            % ((T + H - B) // 2, (T + H - B) // 2, args.ylabel)]


def legend(out, i, name, color):
    ly = T + 10 + 18 * i
    out.append('<rect x="%d" y="%d" width="20" height="8" fill="%s"/>'
               % (W - R + 10, ly - 4, color))
    out.append('<text x="%d" y="%d">%s</text>' % (W - R + 36, ly + 4, name))


def bars(args):
    series = []
    labels = []
    for s in args.series:
        name, pts = s.split(":", 1)
        vals = {}
        for p in pts.split():
            label, v = p.rsplit("=", 1)
            vals[label] = float(v)
            if label not in labels:
                labels.append(label)
        series.append((name, vals))
    top = max([1.0] + [v for _, vals in series for v in vals.values()])

    def py(y):
        return H - B - y / top * (H - T - B)

    out = frame(args)
    for k in range(0, 11):
        y = top * k / 10
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>'
                   % (L, py(y), W - R, py(y)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.2g</text>'
                   % (L - 6, py(y) + 4, y))
    group = (W - L - R) / len(labels)
    width = group * 0.8 / len(series)
    for g, label in enumerate(labels):
        x0 = L + g * group + group * 0.1
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (x0 + group * 0.4, H - B + 16, label))
        for i, (name, vals) in enumerate(series):
            if label in vals:
                v = vals[label]
                out.append('<rect x="%.1f" y="%.1f" width="%.1f" '
                           'height="%.1f" fill="%s"/>'
                           % (x0 + i * width, py(v), width * 0.95,
                              py(0) - py(v), COLORS[i % len(COLORS)]))
    if args.target is not None:
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black" '
                   'stroke-dasharray="6,4"/>'
                   % (L, py(args.target), W - R, py(args.target)))
        out.append('<text x="%d" y="%.1f">target %g</text>'
                   % (W - R + 4, py(args.target) + 4, args.target))
    for i, (name, _) in enumerate(series):
        legend(out, i + (args.target is not None), name,
               COLORS[i % len(COLORS)])
    out.append("</svg>")
    return out


def lines(args):

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

    def px(x):
        return L + (math.log10(x) - lx0) / (lx1 - lx0) * (W - L - R)

    def py(y):
        return H - B - (math.log10(y) - ly0) / (ly1 - ly0) * (H - T - B)

    out = frame(args)
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
    for i, (name, pts) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        path = " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in pts)
        out.append('<polyline points="%s" fill="none" stroke="%s" '
                   'stroke-width="2"/>' % (path, c))
        for x, y in pts:
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>'
                       % (px(x), py(y), c))
        legend(out, i, name, c)
    out.append("</svg>")
    return out


if __name__ == "__main__":
    main()
