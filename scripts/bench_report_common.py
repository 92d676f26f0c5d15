"""What the benchmark reports share (bench_types_report, bench_fields_report,
bench_family_report): reading a Google Benchmark JSON's medians, N as 2^k, and the command
line that prints the report and writes it as markdown."""

import argparse
import json
import sys

TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def load_medians(path):
    """Returns (context, {(kind, what, library): {N: microseconds}}, [errors]) for benchmarks named
    kind/what/library/N."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    medians, errors = {}, []
    for b in doc.get("benchmarks", []):
        run_name = b.get("run_name", b.get("name", ""))
        parts = run_name.split("/")
        if len(parts) < 4 or not parts[3].isdigit():
            continue
        if b.get("error_occurred"):
            errors.append(f"{run_name}: {b.get('error_message', 'error')}")
            continue
        if b.get("run_type") != "aggregate" or b.get("aggregate_name") != "median":
            continue
        medians.setdefault(tuple(parts[:3]), {})[int(parts[3])] = float(b["real_time"]) * TO_US[b.get("time_unit", "ns")]
    return doc.get("context", {}), medians, sorted(set(errors))


def log2_label(n):
    exp = n.bit_length() - 1
    return f"2^{exp}" if n == 1 << exp else str(n)


def report_main(description, program, build_report, argv=None, load=load_medians):
    """Reads the JSON, prints the report, writes it to --markdown-out; exits 2 when a benchmark
    reported an error, 1 when there is nothing of program's to report."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help=f"Google Benchmark JSON from {program}")
    parser.add_argument("--commit", default="unknown", help="commit the results were measured at")
    parser.add_argument("--markdown-out", metavar="FILE", help="also write the report to FILE")
    args = parser.parse_args(argv)

    context, medians, errors = load(args.results)
    if not medians:
        print(f"error: no median aggregates of {program}'s benchmarks in {args.results}", file=sys.stderr)
        return 1
    report = build_report(context, medians, errors, args.commit)
    sys.stdout.write(report)
    if args.markdown_out:
        with open(args.markdown_out, "w", encoding="utf-8") as f:
            f.write(report)
    return 0 if not errors else 2
