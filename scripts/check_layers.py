#!/usr/bin/env python3
"""Checks that tally's headers include one way down the layers (docs/architecture.md).

A header may include headers of its own layer and of the layers below it, never one above.
From the top:
  umbrella     tally/tally.cuh
  algorithms   the public facility headers: tally/reduce.cuh, transform_reduce.cuh, ...
  dispatch     tally/detail/dispatch/  (strategy, launches, the compiled runtime, the host backend)
  kernels      tally/detail/kernels/   (thin __global__ wrappers)
  tile         tally/detail/tile/      (the per-tile work, tile partials, block 0's fold)
  block/warp   tally/block/, tally/warp/ (public building blocks)
  loads        tally/detail/loads/     (the loader concept and its adapters)
  base         the vocabulary every layer may use: tally/detail/*.cuh (plan, tuning, ...),
               and the public functional.cuh, operator_traits.cuh, error.cuh, execution_policy.cuh
Every header under include/ must belong to a layer. Exits 1 and names each include that runs
upward or each header without a layer. Usage: scripts/check_layers.py [INCLUDE_DIR]
"""
import pathlib
import re
import sys

BASE_PUBLIC = {"functional.cuh", "operator_traits.cuh", "error.cuh", "execution_policy.cuh"}
LAYERS = ["umbrella", "algorithms", "dispatch", "kernels", "tile", "block/warp", "loads", "base"]


def layer_of(rel):
    """The layer of a header, by its path below include/ (tally/...)."""
    parts = rel.split("/")
    if parts[0] != "tally":
        return None
    rest = parts[1:]
    if rest == ["tally.cuh"]:
        return "umbrella"
    if len(rest) == 1:
        return "base" if rest[0] in BASE_PUBLIC else "algorithms"
    if rest[0] in ("block", "warp") and len(rest) == 2:
        return "block/warp"
    if rest[0] == "detail":
        if len(rest) == 2:
            return "base"
        if len(rest) == 3 and rest[1] in ("dispatch", "kernels", "tile", "loads"):
            return rest[1]
    return None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "include")
    include = re.compile(r'^\s*#\s*include\s+[<"](tally/[^>"]+)[>"]', re.M)
    problems = []
    headers = sorted(p for p in root.rglob("*") if p.is_file())
    for path in headers:
        rel = path.relative_to(root).as_posix()
        mine = layer_of(rel)
        if mine is None:
            problems.append(f"{rel}: belongs to no layer (scripts/check_layers.py lists them)")
            continue
        for target in include.findall(path.read_text()):
            theirs = layer_of(target)
            if theirs is None:
                problems.append(f"{rel}: includes {target}, which belongs to no layer")
            elif LAYERS.index(theirs) < LAYERS.index(mine):
                problems.append(f"{rel} ({mine}) includes {target} ({theirs}), a layer above it")
    if problems:
        print("error: the include graph runs upward:", *problems, sep="\n  ")
        return 1
    print(f"layers: {len(headers)} headers, every include runs down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
