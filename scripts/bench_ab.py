#!/usr/bin/env python3
"""Compares two runs of one benchmark program (Google Benchmark JSON with median aggregates):
the base (say the parent commit) and a change, run in one device session. Prints, per
benchmark family and N, both medians in microseconds and the change's time over the base's,
and the families and sizes where the change is slower by more than the threshold.
Usage: scripts/bench_ab.py BASE.json CHANGE.json [--threshold 0.03] [--markdown-out FILE]"""
import argparse
import sys

from bench_report_common import load_medians


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("change")
    parser.add_argument("--threshold", type=float, default=0.03, help="slower than this fraction is flagged")
    parser.add_argument("--markdown-out")
    args = parser.parse_args()
    _, base, base_errors = load_medians(args.base)
    _, change, change_errors = load_medians(args.change)
    lines = ["| benchmark | N | base µs | change µs | change / base |", "|---|---|---|---|---|"]
    slower = []
    for key in sorted(set(base) & set(change)):
        for n in sorted(set(base[key]) & set(change[key])):
            b, c = base[key][n], change[key][n]
            ratio = c / b if b > 0 else float("nan")
            flag = " **slower**" if ratio > 1 + args.threshold else ""
            lines.append(f"| {'/'.join(key)} | 2^{n.bit_length() - 1} | {b:.2f} | {c:.2f} | {ratio:.3f}{flag} |")
            if flag:
                slower.append(f"{'/'.join(key)} at 2^{n.bit_length() - 1}: {b:.2f} -> {c:.2f} us ({ratio:.3f})")
    text = "\n".join(lines)
    print(text)
    print()
    for errors, name in ((base_errors, "base"), (change_errors, "change")):
        if errors:
            print(f"{name} errors: {', '.join(errors)}")
    print(f"slower by more than {args.threshold:.0%}: {len(slower)}")
    for s in slower:
        print("  " + s)
    if args.markdown_out:
        with open(args.markdown_out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
