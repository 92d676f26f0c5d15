#!/usr/bin/env python3
"""Summarises bench_reduce's Google Benchmark JSON as a markdown table (and a plot).

Usage:
  bench_reduce --benchmark_out=results.json --benchmark_out_format=json
  python3 scripts/bench_report.py results.json --commit abc123 \
      [--markdown-out out.md] [--plot out.png]

Reads the median aggregate of every benchmark (run_type "aggregate", aggregate_name
"median"). Times are shown in microseconds, bandwidths in GB/s (1e9 bytes per second,
N * 4 bytes read per call). Standard library only; matplotlib is needed for --plot only.
"""

import argparse
import datetime
import json
import sys

FAMILIES = {
    "device/tally_reduce_into": "tally",
    "device/cub_sum": "cub",
    "device/read_ceiling": "ceiling",
    "roundtrip/tally_reduce": "tally_rt",
    "roundtrip/thrust_reduce": "thrust_rt",
}
TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
BYTES_PER_ITEM = 4  # float


def load_medians(path):
    """Returns (context, {family key: {N: time in microseconds}})."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    medians = {key: {} for key in FAMILIES.values()}
    for b in doc.get("benchmarks", []):
        if b.get("run_type") != "aggregate" or b.get("aggregate_name") != "median":
            continue
        run_name = b.get("run_name", b.get("name", ""))
        parts = run_name.split("/")
        key = FAMILIES.get("/".join(parts[:2]))
        if key is None:
            continue
        if "N" in b:
            n = int(round(float(b["N"])))
        else:
            n = int(parts[2])
        medians[key][n] = float(b["real_time"]) * TO_US[b.get("time_unit", "ns")]
    return doc.get("context", {}), medians


def gbps(n, time_us):
    if time_us is None or time_us <= 0:
        return None
    return n * BYTES_PER_ITEM / (time_us * 1e-6) / 1e9


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt(value, spec):
    return "–" if value is None else format(value, spec)


def log2_label(n):
    exp = n.bit_length() - 1
    return f"2^{exp}" if n == 1 << exp else str(n)


def build_report(context, medians, commit):
    date = context.get("date") or datetime.datetime.now().isoformat(timespec="seconds")
    lines = [
        f"Date: {date}",
        f"GPU: {context.get('gpu', 'unknown')}",
        f"Commit: {commit}",
        "",
        "Float sums; medians of the repetitions. Device times from CUDA events over "
        "back-to-back calls; round trips from the host clock, result back on the host.",
        "",
        "| N | tally µs | CUB µs | ceiling µs | tally GB/s | CUB GB/s | ceiling GB/s "
        "| tally/CUB speedup | % of ceiling | tally round trip µs | thrust round trip µs "
        "| tally/thrust speedup |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    sizes = sorted(set().union(*(m.keys() for m in medians.values())))
    for n in sizes:
        t, c, ce = (medians[k].get(n) for k in ("tally", "cub", "ceiling"))
        trt, thrt = medians["tally_rt"].get(n), medians["thrust_rt"].get(n)
        g_t, g_c, g_ce = gbps(n, t), gbps(n, c), gbps(n, ce)
        of_ceiling = ratio(g_t, g_ce)
        lines.append(
            "| "
            + " | ".join([
                f"{log2_label(n)} ({n})",
                fmt(t, ".2f"), fmt(c, ".2f"), fmt(ce, ".2f"),
                fmt(g_t, ".1f"), fmt(g_c, ".1f"), fmt(g_ce, ".1f"),
                fmt(ratio(c, t), ".2f") + ("×" if ratio(c, t) is not None else ""),
                fmt(None if of_ceiling is None else 100 * of_ceiling, ".1f")
                + ("%" if of_ceiling is not None else ""),
                fmt(trt, ".2f"), fmt(thrt, ".2f"),
                fmt(ratio(thrt, trt), ".2f") + ("×" if ratio(thrt, trt) is not None else ""),
            ])
            + " |"
        )
    return "\n".join(lines) + "\n"


def plot(medians, context, commit, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"note: matplotlib is not installed; skipping the plot {path}", file=sys.stderr)
        return
    series = [
        ("tally", "tally reduce_into (device)", "-o"),
        ("cub", "CUB DeviceReduce::Sum (device)", "-s"),
        ("ceiling", "streaming-read ceiling (device)", "--"),
        ("tally_rt", "tally::reduce round trip (effective)", "-^"),
        ("thrust_rt", "thrust::reduce round trip (effective)", "-v"),
    ]
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for key, label, style in series:
        points = sorted(medians[key].items())
        if not points:
            continue
        ax.plot([n for n, _ in points], [gbps(n, t) for n, t in points], style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (floats)")
    ax.set_ylabel("GB/s (N × 4 bytes / time)")
    ax.set_title(f"tally float sum on {context.get('gpu', 'unknown GPU')} ({commit})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}", file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="Google Benchmark JSON from bench_reduce")
    parser.add_argument("--commit", default="unknown", help="commit the results were measured at")
    parser.add_argument("--markdown-out", metavar="FILE", help="also write the report to FILE")
    parser.add_argument("--plot", metavar="FILE.png", help="plot GB/s against N (needs matplotlib)")
    args = parser.parse_args(argv)

    context, medians = load_medians(args.results)
    if not any(medians.values()):
        print(f"error: no median aggregates of bench_reduce's benchmarks in {args.results}", file=sys.stderr)
        return 1
    report = build_report(context, medians, args.commit)
    sys.stdout.write(report)
    if args.markdown_out:
        with open(args.markdown_out, "w", encoding="utf-8") as f:
            f.write(report)
    if args.plot:
        plot(medians, context, args.commit, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
