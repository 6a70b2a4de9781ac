#!/usr/bin/python3
"""trace-svg.py - draw a window of a gradwire timeline (GW_TRACE's Chrome
trace JSON) as an SVG picture, one band per rank, one row per kind of span
(compute, collectives, their waits), for the docs.

    scripts/trace-svg.py TRACE OUT.svg [START_MS DURATION_MS]

START_MS counts from the first event (default: the middle of the run);
DURATION_MS defaults to 20. Python's standard library only."""
import json
import sys
from xml.sax.saxutils import escape

ROWS = [("compute", "compute", "#4c9f70"), ("collective", "collective", "#3b6fb6"),
        ("wire", "wait for peers", "#e0a030")]


def main():
    if len(sys.argv) not in (3, 5):
        sys.exit(__doc__)
    events = json.load(open(sys.argv[1]))["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"]
    if not spans:
        sys.exit("trace-svg: no spans in " + sys.argv[1])
    t0 = min(e["ts"] for e in spans)
    t_end = max(e["ts"] + e["dur"] for e in spans)
    if len(sys.argv) == 5:
        start, width = t0 + float(sys.argv[3]) * 1e3, float(sys.argv[4]) * 1e3
    else:
        width = 20e3
        start = t0 + (t_end - t0) / 2 - width / 2
    ranks = sorted({e["pid"] for e in spans})
    left, px, row_h, band = 140, 900, 14, 3 * 14 + 14
    height = 40 + band * len(ranks) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + px + 20}" height="{height}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{left}" y="16">gradwire train --trace: {width / 1e3:.0f} ms of a {len(ranks)}-rank '
           'run, one band per rank</text>']
    for i, pid in enumerate(ranks):
        y0 = 30 + i * band
        out.append(f'<text x="4" y="{y0 + 2 * row_h}">rank {pid}</text>')
        for j, (cat, label, color) in enumerate(ROWS):
            y = y0 + j * row_h
            out.append(f'<text x="54" y="{y + 11}" fill="#555">{label}</text>')
            for e in spans:
                if e["pid"] != pid or e.get("cat") != cat:
                    continue
                a, b = max(e["ts"], start), min(e["ts"] + e["dur"], start + width)
                if b <= a:
                    continue
                x, w = left + (a - start) / width * px, max((b - a) / width * px, 0.5)
                out.append(f'<rect x="{x:.1f}" y="{y + 1}" width="{w:.1f}" height="{row_h - 2}" '
                           f'fill="{color}"><title>{escape(e["name"])}</title></rect>')
    y = height - 12
    for k in range(5):
        x = left + k * px / 4
        out.append(f'<line x1="{x}" y1="28" x2="{x}" y2="{y - 10}" stroke="#ddd"/>')
        out.append(f'<text x="{x - 10}" y="{y}">{k * width / 4e3:.0f} ms</text>')
    out.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


main()
