#!/usr/bin/env python3
"""Summarises bench_family's Google Benchmark JSON as a markdown report.

Usage:
  bench_family --benchmark_out=family.json --benchmark_out_format=json
  python3 scripts/bench_family_report.py family.json --commit abc123 [--markdown-out out.md]

Reads the median aggregate of every benchmark, named KIND/ALGORITHM/LIBRARY/N[/manual_time]
(benchmarks/bench_family.cu lists them). Prints a round-trip table (tally against Thrust,
every algorithm), a device table (each algorithm's reduction against the streaming-read
ceiling of the bytes it reads) and a summary against the family issue's targets. Times in
microseconds. Standard library only.
"""

import datetime
import sys

from bench_report_common import log2_label, report_main

ROUNDTRIP_ALGORITHMS = (
    "transform_reduce", "inner_product", "count_if", "count", "min_element", "max_element",
    "minmax_element", "all_of", "any_of", "none_of",
)
# Device views and the ceiling that bounds each: inner_product reads two arrays.
DEVICE_ALGORITHMS = {
    "transform_reduce": "read_ceiling_1",
    "inner_product": "read_ceiling_2",
    "count_if": "read_ceiling_1",
    "min_element": "read_ceiling_1",
    "minmax_element": "read_ceiling_1",
    "any_of": "read_ceiling_1",
}

# The family issue's targets: tally must reach at least each bound.
TARGET_ROUNDTRIP_SMALL = 2.0  # vs Thrust, N <= 2^22
TARGET_ROUNDTRIP_LARGE = 1.0  # vs Thrust, N > 2^22
TARGET_CEILING_PCT = {"transform_reduce": 95.0, "inner_product": 95.0, "min_element": 90.0,
                      "minmax_element": 90.0}  # N >= 2^24


def fmt(value, spec, suffix=""):
    return "–" if value is None else format(value, spec) + suffix


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def sizes(medians):
    return sorted({n for series in medians.values() for n in series})


def roundtrip_table(medians):
    header = "| N | " + " | ".join(ROUNDTRIP_ALGORITHMS) + " |"
    lines = [
        "Round trip, tally µs / Thrust µs (speedup):",
        "",
        header,
        "|---:|" + "---:|" * len(ROUNDTRIP_ALGORITHMS),
    ]
    for n in sizes(medians):
        cells = []
        for alg in ROUNDTRIP_ALGORITHMS:
            t = medians.get(("roundtrip", alg, "tally"), {}).get(n)
            r = medians.get(("roundtrip", alg, "thrust"), {}).get(n)
            cells.append("–" if t is None or r is None else f"{t:.1f} / {r:.1f} ({r / t:.2f}×)")
        lines.append(f"| {log2_label(n)} | " + " | ".join(cells) + " |")
    return lines


def device_table(medians):
    header = "| N | " + " | ".join(DEVICE_ALGORITHMS) + " | ceiling 4N B | ceiling 8N B |"
    lines = [
        "Device time, tally µs (% of the read ceiling of the same bytes):",
        "",
        header,
        "|---:|" + "---:|" * (len(DEVICE_ALGORITHMS) + 2),
    ]
    for n in sizes(medians):
        cells = []
        for alg, ceiling in DEVICE_ALGORITHMS.items():
            t = medians.get(("device", alg, "tally"), {}).get(n)
            c = medians.get(("device", ceiling, "ceiling"), {}).get(n)
            pct = ratio(c, t)
            cells.append("–" if t is None else f"{t:.2f} ({fmt(None if pct is None else 100 * pct, '.1f', '%')})")
        for ceiling in ("read_ceiling_1", "read_ceiling_2"):
            cells.append(fmt(medians.get(("device", ceiling, "ceiling"), {}).get(n), ".2f"))
        lines.append(f"| {log2_label(n)} | " + " | ".join(cells) + " |")
    return lines


def targets(medians):
    lines = ["Against the family issue's targets:"]
    small, large = [], []
    for alg in ROUNDTRIP_ALGORITHMS:
        t_series = medians.get(("roundtrip", alg, "tally"), {})
        r_series = medians.get(("roundtrip", alg, "thrust"), {})
        for n, t in t_series.items():
            r = r_series.get(n)
            if r is None or t <= 0:
                continue
            (small if n <= 1 << 22 else large).append((r / t, alg, n))
    for label, found, bound in (("at least 2x faster than Thrust (round trip), N ≤ 2^22", small, TARGET_ROUNDTRIP_SMALL),
                                ("never slower than Thrust (round trip), N > 2^22", large, TARGET_ROUNDTRIP_LARGE)):
        if not found:
            lines.append(f"- {label}: not measured")
            continue
        misses = sorted(x for x in found if x[0] < bound)
        worst = min(found)
        verdict = "met" if not misses else "NOT met at " + ", ".join(f"{a} {log2_label(n)} ({s:.2f}×)" for s, a, n in misses)
        lines.append(f"- {label}: {verdict}; lowest {worst[0]:.2f}× ({worst[1]} {log2_label(worst[2])})")
    for alg, bound in TARGET_CEILING_PCT.items():
        ceiling = DEVICE_ALGORITHMS[alg]
        found = []
        for n, t in medians.get(("device", alg, "tally"), {}).items():
            c = medians.get(("device", ceiling, "ceiling"), {}).get(n)
            if n >= 1 << 24 and c is not None and t > 0:
                found.append((100 * c / t, n))
        if not found:
            lines.append(f"- {alg} at least {bound:.0f}% of the read ceiling, N ≥ 2^24: not measured")
            continue
        misses = sorted(x for x in found if x[0] < bound)
        values = ", ".join(f"{log2_label(n)} {p:.1f}%" for p, n in sorted(found, key=lambda x: x[1]))
        verdict = "met" if not misses else "NOT met"
        lines.append(f"- {alg} at least {bound:.0f}% of the read ceiling, N ≥ 2^24: {verdict} ({values})")
    return lines


def build_report(context, medians, errors, commit):
    date = context.get("date") or datetime.datetime.now().isoformat(timespec="seconds")
    lines = [
        f"Date: {date}",
        f"GPU: {context.get('gpu', 'unknown')}",
        f"Commit: {commit}",
        "",
        "The reduction family on seeded random floats in [0, 1); medians of the repetitions. Round trips: "
        "the host clock around one public call on a stream, answer on the host. Device: CUDA events around "
        "back-to-back enqueues of the reduction each algorithm runs (benchmarks/bench_family.cu). Logical "
        "predicates are chosen so that the whole input must be read (all_of true everywhere, any_of and "
        "none_of true nowhere).",
        "",
    ]
    lines += roundtrip_table(medians) + [""] + device_table(medians) + [""] + targets(medians)
    if errors:
        lines += ["", "Benchmarks that reported an error:"] + [f"- {e}" for e in errors]
    return "\n".join(lines) + "\n"


def main(argv=None):
    return report_main(__doc__, "bench_family", build_report, argv)


if __name__ == "__main__":
    sys.exit(main())
