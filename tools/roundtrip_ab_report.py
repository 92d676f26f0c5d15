#!/usr/bin/env python3
"""The report of tools/roundtrip-ab: per type and N, this checkout's round trip over the base's,
the geometric mean of the two placements in each round (which cancels the second side's
small handicap), per round and averaged. Usage: roundtrip_ab_report.py RUNS.txt"""
import collections, math, re, statistics, sys
runs = collections.defaultdict(dict)
for section in re.split(r"^## ", open(sys.argv[1]).read(), flags=re.M)[1:]:
    m = re.match(r"round (\d+): a = (\w+), b = (\w+)", section)
    placement = "this_second" if m.group(3) == "this" else "this_first"
    for line in section.splitlines():
        row = re.match(r"\| (\w+) \| 2\^(\d+) \| ([\d.]+) \| ([\d.]+) \|", line)
        if row:
            runs[(int(m.group(1)), placement)][(row.group(1), int(row.group(2)))] = (float(row.group(3)), float(row.group(4)))
rounds = sorted({r for r, _ in runs})
print("| type | N | base µs | this µs | this / base, per round | mean |")
print("|---|---:|---:|---:|---|---:|")
for key in runs[(rounds[0], "this_second")]:
    base, this, ratios = [], [], []
    for r in rounds:
        a1, b1 = runs[(r, "this_second")][key]  # a = base, b = this
        a2, b2 = runs[(r, "this_first")][key]   # a = this, b = base
        base += [a1, b2]; this += [b1, a2]
        ratios.append(math.sqrt((b1 / a1) * (a2 / b2)))
    print(f"| {key[0]} | 2^{key[1]} | {statistics.median(base):.2f} | {statistics.median(this):.2f} | "
          f"{' '.join(f'{x:.3f}' for x in ratios)} | {statistics.mean(ratios):.3f} |")
