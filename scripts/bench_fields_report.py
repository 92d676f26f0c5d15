#!/usr/bin/env python3
"""Summarises bench_fields' Google Benchmark JSON as a markdown report.

Usage:
  bench_fields --benchmark_out=fields.json --benchmark_out_format=json
  python3 scripts/bench_fields_report.py fields.json --commit abc123 [--markdown-out out.md]

Reads the median aggregate of every benchmark, named KIND/WHAT/LIBRARY/N[/manual_time]
(benchmarks/bench_fields.cu lists them). Prints the x/y/z sum table (round trips of tally,
three thrust::reduce calls and thrust::reduce over a zip_iterator; tally's device time
against the read ceiling of 3N floats), the bounding box table, the block-reduction
microbenchmark and the multi-field issue's targets as met or not met. Times in
microseconds. Standard library only.
"""

import datetime
import sys

from bench_report_common import load_medians, log2_label, report_main


# The multi-field issue's targets.
TARGET_VS_THREE_REDUCES = 3.0   # xyz sums, round trip, N <= 2^22
TARGET_VS_THRUST_ZIP = 1.1      # xyz sums, round trip, N = 2^24 and 2^26
TARGET_SUM_CEILING_PCT = 95.0   # xyz sums, device, N >= 2^24
TARGET_BOX_CEILING_PCT = 90.0   # bounding box, device, N >= 2^24


def series(medians, kind, what, library):
    return medians.get((kind, what, library), {})


def speedup(slow, fast):
    return None if slow is None or fast is None or fast <= 0 else slow / fast


def fmt(value, spec, suffix=""):
    return "–" if value is None else format(value, spec) + suffix


def xyz_table(medians):
    tally = series(medians, "roundtrip", "xyz_sum", "tally")
    three = series(medians, "roundtrip", "xyz_sum", "thrust3")
    zipped = series(medians, "roundtrip", "xyz_sum", "thrust_zip")
    device = series(medians, "device", "xyz_sum", "tally")
    ceiling = series(medians, "device", "read_ceiling_3", "ceiling")
    lines = [
        "x/y/z sums. Round trip µs (tally's speedup); device µs (% of the read ceiling of 3N floats):",
        "",
        "| N | tally | 3 × thrust::reduce | thrust::reduce over zip | tally device | ceiling 12N B |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sorted(set(tally) | set(device)):
        t, r3, rz, d, c = tally.get(n), three.get(n), zipped.get(n), device.get(n), ceiling.get(n)
        pct = None if c is None or not d else 100 * c / d
        lines.append(
            f"| {log2_label(n)} | {fmt(t, '.1f')} | {fmt(r3, '.1f')} ({fmt(speedup(r3, t), '.2f', '×')}) | "
            f"{fmt(rz, '.1f')} ({fmt(speedup(rz, t), '.2f', '×')}) | {fmt(d, '.2f')} ({fmt(pct, '.1f', '%')}) | "
            f"{fmt(c, '.2f')} |")
    return lines


def box_table(medians):
    box = series(medians, "device", "bounding_box", "tally")
    ceiling = series(medians, "device", "read_ceiling_3", "ceiling")
    lines = ["Bounding box in one pass, device µs (% of the read ceiling of 3N floats):", "",
             "| N | tally | ceiling |", "|---:|---:|---:|"]
    for n in sorted(box):
        b, c = box[n], ceiling.get(n)
        lines.append(f"| {log2_label(n)} | {b:.2f} ({fmt(None if c is None else 100 * c / b, '.1f', '%')}) | {fmt(c, '.2f')} |")
    return lines


def micro_table(medians):
    inter = series(medians, "micro", "block_tuple", "interleaved")
    per_field = series(medians, "micro", "block_tuple", "per_field")
    lines = ["Block reductions of a 3-float tuple (64 per block), µs per kernel:", "",
             "| threads | interleaved tuple | one per field | speedup |", "|---:|---:|---:|---:|"]
    for n in sorted(set(inter) | set(per_field)):
        i, p = inter.get(n), per_field.get(n)
        lines.append(f"| {log2_label(n)} | {fmt(i, '.1f')} | {fmt(p, '.1f')} | {fmt(speedup(p, i), '.2f', '×')} |")
    return lines


def verdict(label, found, bound, unit):
    """found: [(value, n)]; met when every value reaches bound."""
    if not found:
        return f"- {label}: not measured"
    misses = [(v, n) for v, n in found if v < bound]
    values = ", ".join(f"{log2_label(n)} {v:.2f}{unit}" for v, n in sorted(found, key=lambda x: x[1]))
    return f"- {label}: {'met' if not misses else 'NOT met'} ({values})"


def targets(medians):
    tally = series(medians, "roundtrip", "xyz_sum", "tally")
    three = series(medians, "roundtrip", "xyz_sum", "thrust3")
    zipped = series(medians, "roundtrip", "xyz_sum", "thrust_zip")
    device = series(medians, "device", "xyz_sum", "tally")
    box = series(medians, "device", "bounding_box", "tally")
    ceiling = series(medians, "device", "read_ceiling_3", "ceiling")
    vs_three = [(three[n] / t, n) for n, t in tally.items() if n <= 1 << 22 and n in three and t > 0]
    vs_zip = [(zipped[n] / t, n) for n, t in tally.items() if n in (1 << 24, 1 << 26) and n in zipped and t > 0]
    sum_pct = [(100 * ceiling[n] / d, n) for n, d in device.items() if n >= 1 << 24 and n in ceiling and d > 0]
    box_pct = [(100 * ceiling[n] / b, n) for n, b in box.items() if n >= 1 << 24 and n in ceiling and b > 0]
    return [
        "Against the multi-field issue's targets:",
        verdict(f"xyz sums at least {TARGET_VS_THREE_REDUCES:g}x faster than three thrust::reduce calls (round trip), "
                "N ≤ 2^22", vs_three, TARGET_VS_THREE_REDUCES, "×"),
        verdict(f"xyz sums at least {TARGET_VS_THRUST_ZIP:g}x faster than thrust::reduce over a zip_iterator "
                "(round trip), N = 2^24, 2^26", vs_zip, TARGET_VS_THRUST_ZIP, "×"),
        verdict(f"xyz sums at least {TARGET_SUM_CEILING_PCT:.0f}% of the read ceiling for 3N floats, N ≥ 2^24",
                sum_pct, TARGET_SUM_CEILING_PCT, "%"),
        verdict(f"bounding box at least {TARGET_BOX_CEILING_PCT:.0f}% of the read ceiling, N ≥ 2^24",
                box_pct, TARGET_BOX_CEILING_PCT, "%"),
    ]


def build_report(context, medians, errors, commit):
    date = context.get("date") or datetime.datetime.now().isoformat(timespec="seconds")
    lines = [
        f"Date: {date}",
        f"GPU: {context.get('gpu', 'unknown')}",
        f"Commit: {commit}",
        "",
        "Multi-field reductions on three arrays of seeded random floats in [0, 1); medians of the repetitions. "
        "Round trips: the host clock around the calls on one stream, answers on the host. Device: CUDA events "
        "around back-to-back tally::reduce_into calls (benchmarks/bench_fields.cu).",
        "",
    ]
    lines += xyz_table(medians) + [""] + box_table(medians) + [""] + micro_table(medians) + [""] + targets(medians)
    if errors:
        lines += ["", "Benchmarks that reported an error:"] + [f"- {e}" for e in errors]
    return "\n".join(lines) + "\n"


def main(argv=None):
    return report_main(__doc__, "bench_fields", build_report, argv)


if __name__ == "__main__":
    sys.exit(main())
