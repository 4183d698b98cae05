#!/usr/bin/env python3
"""Checks that two run folders (or two comparisons' folders) hold the same
results: for a change that must not change what a run computes (a refactor,
a faster kernel). model.pt and model.safetensors must be byte-identical; the
CSVs must hold the same rows, compared as sets of rows, since node threads
append metrics.csv rows in no fixed order; comparison.csv must be identical
but for its last column, wall_s. Runs whose compute time is measured (the
default) have simulated times that vary: give both runs the same fixed
step time.

usage: tools/compare_runs.py BEFORE AFTER    exits 1 if anything differs

  build/bin/exogym-run examples/mnist-compare.json --set output.dir=/tmp/before \\
      --set compute.step_time=10ms -q
  (the same with the changed build into /tmp/after)
  tools/compare_runs.py /tmp/before/mnist-compare /tmp/after/mnist-compare
"""
import csv
import filecmp
import sys
from pathlib import Path

BINARY = ("model.pt", "model.safetensors")
ROW_SETS = ("train.csv", "validation.csv", "metrics.csv", "comm.csv", "events.csv", "data.csv")


def rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def compare(before, after):
    problems, checked = [], 0
    for b in sorted(before.rglob("*")):
        a = after / b.relative_to(before)
        name = str(b.relative_to(before))
        if b.name in BINARY + ROW_SETS + ("comparison.csv",) and not a.exists():
            problems.append(f"{name}: missing in {after}")
            continue
        if b.name in BINARY:
            same = filecmp.cmp(b, a, shallow=False)
        elif b.name in ROW_SETS:
            same = sorted(map(tuple, rows(b))) == sorted(map(tuple, rows(a)))
        elif b.name == "comparison.csv":
            same = [r[:-1] for r in rows(b)] == [r[:-1] for r in rows(a)]
        else:
            continue
        checked += 1
        if not same:
            problems.append(f"{name}: differs")
    return problems, checked


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    problems, checked = compare(Path(argv[1]), Path(argv[2]))
    for p in problems:
        print(p)
    if checked == 0:
        print("no model files or CSVs found")
        return 1
    print(f"{checked} files compared, {len(problems)} differ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
