#!/usr/bin/env python3
"""The report of tools/roundtrip-ab --device: per type, strategy and N, this checkout's device
time over the base's, from two runs of tools/device_ab with the sides in either place (the side
loaded first also allocates its scratch first, and a row can favour one place by several
percent whatever the code), and their geometric mean, which cancels that.
Usage: device_ab_report.py THIS_SECOND.txt THIS_FIRST.txt"""
import math, re, sys


def table(path):
    rows = {}
    for line in open(path):
        m = re.match(r"\| (\w+) \| (\w+) \| 2\^(\d+) \| ([\d.]+) \| ([\d.]+) \| [\d.]+ \| ([\d.]+) \| ([\d.]+) \|", line)
        if m:
            rows[(m.group(1), m.group(2), int(m.group(3)))] = tuple(float(m.group(k)) for k in range(4, 8))
    return rows


second, first = table(sys.argv[1]), table(sys.argv[2])  # a = base, b = this; a = this, b = base
# The first two columns as the runs name them (type and strategy, or case and kind).
names = next((line.split("|")[1:3] for line in open(sys.argv[1]) if line.startswith("| ")), [" type ", " strategy "])
print(f"|{names[0]}|{names[1]}| N | base µs | this µs | this / base, this second | this first | mean | streams max/min, widest |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for key, (a1, b1, sa1, sb1) in second.items():
    if key not in first:
        continue
    a2, b2, sa2, sb2 = first[key]
    base, this = math.sqrt(a1 * b2), math.sqrt(b1 * a2)
    r1, r2 = b1 / a1, a2 / b2
    print(f"| {key[0]} | {key[1]} | 2^{key[2]} | {base:.3f} | {this:.3f} | {r1:.3f} | {r2:.3f} | "
          f"{math.sqrt(r1 * r2):.3f} | {max(sa1, sb1, sa2, sb2):.3f} |")
