#!/usr/bin/env python3
"""Summarises bench_types' Google Benchmark JSON as a markdown report.

Usage:
  bench_types --benchmark_out=types.json --benchmark_out_format=json
  python3 scripts/bench_types_report.py types.json --commit abc123 [--markdown-out out.md]

Reads the median aggregate of every benchmark, named device/TYPE/LIBRARY/N[/manual_time]
(benchmarks/bench_types.cu lists them). Prints one table per type (int8, half, bf16,
double): tally's and CUB's sums and the streaming-read ceiling of the same bytes in GB/s,
tally's % of the ceiling and tally/CUB; then, per type, the smallest % of the ceiling at
N >= 2^24 and the smallest tally/CUB over all N. Standard library only.
"""

import datetime
import sys

from bench_report_common import load_medians, log2_label, report_main

# Value type: (bytes per value, init's type).
TYPES = {"int8": (1, "int"), "half": (2, "float"), "bf16": (2, "float"), "double": (8, "double")}


def fmt(value, spec, suffix=""):
    return "–" if value is None else format(value, spec) + suffix


def ratio(a, b):
    return None if a is None or b is None or b <= 0 else a / b


def gbps(n, size, us):
    return None if us is None or us <= 0 else n * size / (us * 1e3)


def type_table(medians, name):
    size, acc = TYPES[name]
    tally = medians.get(("device", name, "tally"), {})
    cub = medians.get(("device", name, "cub"), {})
    ceiling = medians.get(("device", name, "ceiling"), {})
    lines = [
        f"{name} ({size}-byte values, {acc} accumulator), device GB/s (N × {size} bytes / time):",
        "",
        "| N | tally | CUB | ceiling | tally % of ceiling | tally/CUB |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sorted(set(tally) | set(cub) | set(ceiling)):
        t, c, r = tally.get(n), cub.get(n), ceiling.get(n)
        pct = ratio(r, t)
        lines.append(
            f"| {log2_label(n)} | {fmt(gbps(n, size, t), '.1f')} | {fmt(gbps(n, size, c), '.1f')} | "
            f"{fmt(gbps(n, size, r), '.1f')} | {fmt(None if pct is None else 100 * pct, '.1f', '%')} | "
            f"{fmt(ratio(c, t), '.2f', '×')} |")
    return lines


def lowest(found, unit):
    """found: [(value, n)]; the smallest value and its N, or 'not measured'."""
    if not found:
        return "not measured"
    value, n = min(found)
    return f"{value:.2f}{unit} (at {log2_label(n)})"


def targets(medians):
    lines = ["Per type: the smallest % of the ceiling at N ≥ 2^24, and the smallest tally/CUB over all N:"]
    for name in TYPES:
        tally = medians.get(("device", name, "tally"), {})
        cub = medians.get(("device", name, "cub"), {})
        ceiling = medians.get(("device", name, "ceiling"), {})
        pct = [(100 * ceiling[n] / t, n) for n, t in tally.items() if n >= 1 << 24 and n in ceiling and t > 0]
        vs_cub = [(cub[n] / t, n) for n, t in tally.items() if n in cub and t > 0]
        lines.append(f"- {name}: % of ceiling {lowest(pct, '%')}; tally/CUB {lowest(vs_cub, '×')}")
    return lines


def build_report(context, medians, errors, commit):
    date = context.get("date") or datetime.datetime.now().isoformat(timespec="seconds")
    lines = [
        f"Date: {date}",
        f"GPU: {context.get('gpu', 'unknown')}",
        f"Commit: {commit}",
        "",
        "Sums of narrow and wide types (seeded random values); medians of the repetitions. Device time: CUDA "
        "events around back-to-back tally::reduce_into and cub::DeviceReduce::Reduce calls with the same "
        "accumulator; the ceiling is our streaming read of the same bytes (benchmarks/bench_types.cu).",
        "",
    ]
    for name in TYPES:
        lines += type_table(medians, name) + [""]
    lines += targets(medians)
    if errors:
        lines += ["", "Benchmarks that reported an error:"] + [f"- {e}" for e in errors]
    return "\n".join(lines) + "\n"


def main(argv=None):
    return report_main(__doc__, "bench_types", build_report, argv)


if __name__ == "__main__":
    sys.exit(main())
