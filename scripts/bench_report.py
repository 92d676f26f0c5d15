#!/usr/bin/env python3
"""Summarises bench_reduce's Google Benchmark JSON as markdown tables (and a plot).

Usage:
  bench_reduce --benchmark_out=results.json --benchmark_out_format=json
  python3 scripts/bench_report.py results.json --commit abc123 \
      [--markdown-out out.md] [--plot out.png]

Reads the median aggregate of every benchmark (run_type "aggregate", aggregate_name
"median"), named KIND/TYPE/VARIANT/N[/manual_time] (docs/benchmarks.md lists them; the
older float-only names KIND/VARIANT/N are read as float). Prints one table per element type
(float, int, double) and a summary against the performance issue's targets. Times are in
microseconds, bandwidths in GB/s (1e9 bytes per second, N * sizeof(type) bytes read per
call). Standard library only; matplotlib is needed for --plot only.
"""

import argparse
import datetime
import json
import sys

TYPES = ("float", "int", "double")
BYTES_PER_ITEM = {"float": 4, "int": 4, "double": 8}
VARIANTS = {
    "device": {
        "tally_reduce_into": "tally",
        "tally_two_pass": "two_pass",
        "tally_ordered": "ordered",
        "tally_block_atomic": "block_atomic",
        "tally_block_atomic_nd": "block_atomic",
        "tally_warp_atomic": "warp_atomic",
        "tally_warp_atomic_nd": "warp_atomic",
        "cub_sum": "cub",
        "read_ceiling": "ceiling",
    },
    "loop": {
        "tally_reduce_into": "tally_loop",
        "cub_sum": "cub_loop",
    },
    "roundtrip": {
        "tally_reduce": "tally_rt",
        "thrust_reduce": "thrust_rt",
        "tally_reduce_copy": "tally_rt_copy",
        "launch_floor_flag": "floor_flag",
        "launch_floor_sync": "floor_sync",
        "launch_floor_read": "floor_read",
    },
}
KEYS = sorted({key for names in VARIANTS.values() for key in names.values()})
ATOMIC_KEYS = ("block_atomic", "warp_atomic")
SHORT = {"two_pass": "two-pass", "block_atomic": "block", "warp_atomic": "warp"}
TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}

# The performance issue's targets (benchmarks/RESULTS.md quotes them): tally must reach at
# least each bound.
TARGET_NEVER_SLOWER_THAN_CUB = 1.0
TARGET_MID_VS_CUB = 1.5  # 2^14 <= N <= 2^20
TARGET_CEILING_PCT = 95.0  # N >= 2^24
TARGET_ROUNDTRIP_SMALL = 2.5  # N <= 2^22
TARGET_ROUNDTRIP_LARGE = 1.0  # N > 2^22
# The operators issue: the order-preserving path on a float sum, at least this share of the
# commutative path's bandwidth.
TARGET_ORDERED_SHARE_PCT = 90.0


def parse_name(run_name):
    """(type, key, nondeterministic) of a benchmark name, or None if it is not ours."""
    parts = run_name.split("/")
    if len(parts) >= 3 and parts[0] in VARIANTS and parts[1] in TYPES:
        typ, variant = parts[1], parts[2]
    elif len(parts) >= 2 and parts[0] in VARIANTS:
        typ, variant = "float", parts[1]  # the float-only suite's names
    else:
        return None
    key = VARIANTS[parts[0]].get(variant)
    if key is None:
        return None
    return typ, key, variant.endswith("_nd")


def parse_n(bench, run_name):
    if "N" in bench:
        return int(round(float(bench["N"])))
    for part in reversed(run_name.split("/")):
        if part.isdigit():
            return int(part)
    return None


def load_medians(path):
    """Returns (context, {type: {key: {N: time in microseconds}}}, {type: atomics are nd})."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    medians = {typ: {key: {} for key in KEYS} for typ in TYPES}
    nondeterministic = {typ: False for typ in TYPES}
    for b in doc.get("benchmarks", []):
        if b.get("run_type") != "aggregate" or b.get("aggregate_name") != "median":
            continue
        if b.get("error_occurred"):
            continue
        run_name = b.get("run_name", b.get("name", ""))
        parsed = parse_name(run_name)
        n = parse_n(b, run_name)
        if parsed is None or n is None:
            continue
        typ, key, nd = parsed
        nondeterministic[typ] |= nd
        medians[typ][key][n] = float(b["real_time"]) * TO_US[b.get("time_unit", "ns")]
    return doc.get("context", {}), medians, nondeterministic


def gbps(n, time_us, bytes_per_item):
    if time_us is None or time_us <= 0:
        return None
    return n * bytes_per_item / (time_us * 1e-6) / 1e9


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt(value, spec, suffix=""):
    return "–" if value is None else format(value, spec) + suffix


def log2_label(n):
    exp = n.bit_length() - 1
    return f"2^{exp}" if n == 1 << exp else str(n)


def has_data(series):
    return any(series.values())


def fastest_alternative(m, n, keys):
    """(time, key) of the fastest of keys at N, or (None, None)."""
    times = [(m[k][n], k) for k in keys if m[k].get(n) is not None]
    return min(times) if times else (None, None)


def alternative_keys(typ, nondeterministic):
    """The variants tally's default is weighed against: the non-reproducible ones for float and
    double; for int, whose atomics are exact, every other strategy."""
    if nondeterministic.get(typ) or typ != "int":
        return ATOMIC_KEYS, "fastest non-reproducible variant"
    return ("two_pass",) + ATOMIC_KEYS, "fastest other strategy"


def type_table(typ, m, nondeterministic):
    bpi = BYTES_PER_ITEM[typ]
    nd = nondeterministic.get(typ, False)
    alt_keys, alt_label = alternative_keys(typ, nondeterministic)
    with_copy = has_data(m["tally_rt_copy"])
    atomic = " nd" if nd else ""
    header = [
        "N", "tally µs", "two-pass µs", f"block-atomic{atomic} µs", f"warp-atomic{atomic} µs", "CUB µs",
        "ceiling µs", "tally GB/s", "tally/CUB speedup", "% of ceiling", f"tally vs {alt_label}",
        "tally round trip µs", "thrust round trip µs", "tally/thrust speedup",
    ]
    if with_copy:
        header += ["tally round trip via copy µs"]
    with_loop = has_data(m["tally_loop"])
    if with_loop:
        header += ["tally host-loop µs", "CUB host-loop µs", "host-loop tally/CUB"]
    with_ordered = has_data(m["ordered"])
    if with_ordered:
        header += ["ordered µs", "ordered % of tally's bandwidth"]
    with_floor = has_data(m["floor_flag"])
    if with_floor:
        header += ["launch floor µs (flag)", "launch floor µs (sync)", "thrust / launch floor"]
    with_read_floor = has_data(m["floor_read"])
    if with_read_floor:
        header += ["launch floor µs (one read)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    sizes = sorted(set().union(*(series.keys() for series in m.values())))
    for n in sizes:
        t = m["tally"].get(n)
        cub, ceiling = m["cub"].get(n), m["ceiling"].get(n)
        alt_t, alt_k = fastest_alternative(m, n, alt_keys)
        alt = ratio(alt_t, t)
        of_ceiling = ratio(ceiling, t)
        trt, thrt = m["tally_rt"].get(n), m["thrust_rt"].get(n)
        row = [
            f"{log2_label(n)} ({n})",
            fmt(t, ".2f"), fmt(m["two_pass"].get(n), ".2f"), fmt(m["block_atomic"].get(n), ".2f"),
            fmt(m["warp_atomic"].get(n), ".2f"), fmt(cub, ".2f"), fmt(ceiling, ".2f"),
            fmt(gbps(n, t, bpi), ".1f"),
            fmt(ratio(cub, t), ".2f", "×"),
            fmt(None if of_ceiling is None else 100 * of_ceiling, ".1f", "%"),
            fmt(alt, ".2f", f"× ({SHORT[alt_k]})" if alt_k else "×"),
            fmt(trt, ".2f"), fmt(thrt, ".2f"), fmt(ratio(thrt, trt), ".2f", "×"),
        ]
        if with_copy:
            row.append(fmt(m["tally_rt_copy"].get(n), ".2f"))
        if with_loop:
            tl, cl = m["tally_loop"].get(n), m["cub_loop"].get(n)
            row += [fmt(tl, ".2f"), fmt(cl, ".2f"), fmt(ratio(cl, tl), ".2f", "×")]
        if with_ordered:
            share = ratio(t, m["ordered"].get(n))
            row += [fmt(m["ordered"].get(n), ".2f"), fmt(None if share is None else 100 * share, ".1f", "%")]
        if with_floor:
            floor = m["floor_flag"].get(n)
            row += [fmt(floor, ".2f"), fmt(m["floor_sync"].get(n), ".2f"), fmt(ratio(thrt, floor), ".2f", "×")]
        if with_read_floor:
            row.append(fmt(m["floor_read"].get(n), ".2f"))
        lines.append("| " + " | ".join(row) + " |")
    return lines


def extreme(values, pick):
    """pick (min or max) of [(value, n)] with its N, or None."""
    values = [(v, n) for v, n in values if v is not None]
    return pick(values) if values else None


def target_line(label, found, spec, suffix, bound=None):
    if found is None:
        return f"- {label}: no data"
    value, n = found
    shown = format(value, spec)
    if bound is not None and value < bound and shown == format(bound, spec):
        # A miss that rounds to the bound ("1.50×: not met") is shown with one digit more.
        digits = int(spec.split(".")[1].rstrip("f%")) + 1
        shown = format(value, spec.split(".")[0] + f".{digits}" + spec[-1])
    text = f"- {label}: {shown}{suffix} (at {log2_label(n)})"
    if bound is not None:
        text += f"; target ≥ {format(bound, spec)}{suffix}: " + ("met" if value >= bound else "not met")
    return text


def best_bandwidth(medians):
    """(GB/s, type, key, N) of the fastest device-timed read of any benchmark in the run."""
    device_keys = set(VARIANTS["device"].values())
    found = [(gbps(n, t, BYTES_PER_ITEM[typ]), typ, key, n)
             for typ in TYPES for key in device_keys for n, t in medians[typ][key].items()]
    found = [f for f in found if f[0] is not None]
    return max(found) if found else None


def roundtrip_bound_lines(typ, m, read_floor, best):
    """Where the round-trip target is missed at N <= 2^22: the least any reduction's round trip
    could take there (the launch floor with one read from memory, then N * sizeof(type) bytes
    at the best bandwidth any kernel reached in this run), against the time the target needs."""
    if best is None or not read_floor:
        return []
    bw, best_typ, best_key, best_n = best
    bpi = BYTES_PER_ITEM[typ]
    lines = []
    for n in sorted(m["tally_rt"]):
        tally_rt, thrust_rt, floor = m["tally_rt"][n], m["thrust_rt"].get(n), read_floor.get(n)
        if n > 1 << 22 or thrust_rt is None or floor is None or thrust_rt / tally_rt >= TARGET_ROUNDTRIP_SMALL:
            continue
        stream_us = n * bpi / (bw * 1e3)
        bound, needed = floor + stream_us, thrust_rt / TARGET_ROUNDTRIP_SMALL
        verdict = ("unreachable: below the bound" if needed < bound
                   else f"reachable in principle: {needed - bound:.2f} µs above the bound")
        lines.append(
            f"- round-trip bound at {log2_label(n)}: {bound:.2f} µs (launch floor with one read {floor:.2f} + "
            f"{n * bpi / 1e6:.1f} MB at {bw:.0f} GB/s, this run's fastest read ({best_typ} {best_key} at "
            f"{log2_label(best_n)}), {stream_us:.2f}); tally {tally_rt:.2f} µs; {TARGET_ROUNDTRIP_SMALL}× thrust "
            f"needs {needed:.2f} µs: {verdict}")
    return lines


def targets(typ, m, nondeterministic, read_floor=None, best=None):
    sizes = sorted(set().union(*(series.keys() for series in m.values())))
    alt_keys, alt_label = alternative_keys(typ, nondeterministic)

    def over(f, lo=None, hi=None):
        """[(f(N), N)] for lo <= N <= hi."""
        return [(f(n), n) for n in sizes if (lo is None or n >= lo) and (hi is None or n <= hi)]

    def vs_cub(n):
        return ratio(m["cub"].get(n), m["tally"].get(n))

    def of_ceiling(n):
        r = ratio(m["ceiling"].get(n), m["tally"].get(n))
        return None if r is None else 100 * r

    def roundtrip(n):
        return ratio(m["thrust_rt"].get(n), m["tally_rt"].get(n))

    def cost(n):
        """How much longer tally's default takes than the fastest alternative, in %."""
        alt_t, _ = fastest_alternative(m, n, alt_keys)
        r = ratio(m["tally"].get(n), alt_t)
        return None if r is None else 100 * (r - 1)

    lines = [
        f"Targets ({typ}):",
        target_line("tally/CUB, min over all N", extreme(over(vs_cub), min), ".2f", "×",
                    TARGET_NEVER_SLOWER_THAN_CUB),
        target_line("tally/CUB, min over 2^14 ≤ N ≤ 2^20", extreme(over(vs_cub, 1 << 14, 1 << 20), min),
                    ".2f", "×", TARGET_MID_VS_CUB),
        target_line("% of ceiling, min over N ≥ 2^24", extreme(over(of_ceiling, lo=1 << 24), min), ".1f", "%",
                    TARGET_CEILING_PCT),
        target_line("round trip tally/thrust, min over N ≤ 2^22", extreme(over(roundtrip, hi=1 << 22), min),
                    ".2f", "×", TARGET_ROUNDTRIP_SMALL),
    ]
    lines += roundtrip_bound_lines(typ, m, read_floor, best)
    lines += [
        target_line("round trip tally/thrust, min over N > 2^22", extreme(over(roundtrip, lo=(1 << 22) + 1), min),
                    ".2f", "×", TARGET_ROUNDTRIP_LARGE),
        target_line(f"cost of tally's default vs the {alt_label} (tally time / its time − 1), max over N",
                    extreme(over(cost), max), "+.1f", "%"),
    ]
    if has_data(m["tally_loop"]):
        def loop_vs_cub(n):
            return ratio(m["cub_loop"].get(n), m["tally_loop"].get(n))
        lines.append(target_line("host loop tally/CUB (events without the hold), min over all N",
                                 extreme(over(loop_vs_cub), min), ".2f", "×", TARGET_NEVER_SLOWER_THAN_CUB))
        lines.append(target_line("host loop tally/CUB, min over 2^14 ≤ N ≤ 2^20",
                                 extreme(over(loop_vs_cub, 1 << 14, 1 << 20), min), ".2f", "×", TARGET_MID_VS_CUB))
    if has_data(m["ordered"]):
        def ordered_share(n):
            r = ratio(m["tally"].get(n), m["ordered"].get(n))
            return None if r is None else 100 * r
        lines.append(target_line("order-preserving path, % of the commutative path's bandwidth, min over all N",
                                 extreme(over(ordered_share), min), ".1f", "%", TARGET_ORDERED_SHARE_PCT))
        lines.append(target_line("order-preserving path, % of the commutative path's bandwidth, min over N ≥ 2^24",
                                 extreme(over(ordered_share, lo=1 << 24), min), ".1f", "%",
                                 TARGET_ORDERED_SHARE_PCT))
    if has_data(m["floor_flag"]):
        # No round trip can beat one launch that hands a value over: thrust's time over that
        # floor is the most any GPU reduction could gain over thrust at that N.
        lines.append(target_line("launch floor: thrust round trip / launch floor, min over N ≤ 2^22 (the best "
                                 "ratio any reduction could reach there)",
                                 extreme(over(lambda n: ratio(m["thrust_rt"].get(n), m["floor_flag"].get(n)),
                                              hi=1 << 22), min), ".2f", "×"))
        lines.append(target_line("tally round trip − launch floor, max over N ≤ 2^20 (µs)",
                                 extreme(over(lambda n: None if m["tally_rt"].get(n) is None or
                                              m["floor_flag"].get(n) is None else
                                              m["tally_rt"][n] - m["floor_flag"][n], hi=1 << 20), max), ".2f", " µs"))
    slot_vs_copy = over(lambda n: ratio(m["tally_rt_copy"].get(n), m["tally_rt"].get(n)))
    lo, hi = extreme(slot_vs_copy, min), extreme(slot_vs_copy, max)
    if lo is not None:
        lines.append(
            f"- round trip, mapped slot vs copy (copy time / slot time; above 1: the slot is faster): "
            f"{lo[0]:.2f}× (at {log2_label(lo[1])}) to {hi[0]:.2f}× (at {log2_label(hi[1])})"
        )
    return lines


def build_report(context, medians, nondeterministic, commit):
    date = context.get("date") or datetime.datetime.now().isoformat(timespec="seconds")
    lines = [
        f"Date: {date}",
        f"GPU: {context.get('gpu', 'unknown')}",
        f"Commit: {commit}",
        "",
        "Sums of float, int and double; medians of the repetitions. Device times from CUDA events over "
        "back-to-back calls, the stream held while they are enqueued, so that they time the GPU; host-loop "
        "times from the same events without the hold, so that at small N the host's enqueue sets the pace; "
        "round trips from the host clock, result back on the host. tally is "
        "tally::reduce_into under the default policy (automatic strategy, reproducible); two-pass and the "
        "atomic columns force a strategy, and \"nd\" marks atomics run under nondeterministic() (float and "
        "double: not reproducible; int's atomics are exact). The ceiling reads the input's N × sizeof(type) "
        "bytes. Ratios above 1 favour tally.",
    ]
    for typ in TYPES:
        m = medians[typ]
        if not any(has_data(series) for series in m.values()):
            continue
        lines += ["", f"### {typ}", ""]
        lines += type_table(typ, m, nondeterministic)
        lines += [""]
        lines += targets(typ, m, nondeterministic, medians["float"]["floor_read"], best_bandwidth(medians))
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
        ("tally_rt_copy", "tally reduce_into + copy round trip (effective)", ":^"),
    ]
    types = [typ for typ in TYPES if any(has_data(s) for s in medians[typ].values())]
    if not types:
        return
    fig, axes = plt.subplots(1, len(types), figsize=(7 * len(types), 5.5), squeeze=False)
    for ax, typ in zip(axes[0], types):
        bpi = BYTES_PER_ITEM[typ]
        for key, label, style in series:
            points = sorted(medians[typ][key].items())
            if not points:
                continue
            ax.plot([n for n, _ in points], [gbps(n, t, bpi) for n, t in points], style, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"N ({typ}s)")
        ax.set_ylabel(f"GB/s (N × {bpi} bytes / time)")
        ax.set_title(f"{typ} sum")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"tally on {context.get('gpu', 'unknown GPU')} ({commit})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}", file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="Google Benchmark JSON from bench_reduce")
    parser.add_argument("--commit", default="unknown", help="commit the results were measured at")
    parser.add_argument("--markdown-out", metavar="FILE", help="also write the report to FILE")
    parser.add_argument("--plot", metavar="FILE.png", help="plot GB/s against N per type (needs matplotlib)")
    args = parser.parse_args(argv)

    context, medians, nondeterministic = load_medians(args.results)
    if not any(has_data(series) for m in medians.values() for series in m.values()):
        print(f"error: no median aggregates of bench_reduce's benchmarks in {args.results}", file=sys.stderr)
        return 1
    report = build_report(context, medians, nondeterministic, args.commit)
    sys.stdout.write(report)
    if args.markdown_out:
        with open(args.markdown_out, "w", encoding="utf-8") as f:
            f.write(report)
    if args.plot:
        plot(medians, context, args.commit, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
