#!/usr/bin/env python3
"""Re-runs example manifests and compares what they print with the tables
the docs show for them (README.md and docs/*.md).

A documented table is a fenced block whose first line is the manifest's
name and whose second line is the header exogym-run prints ("variant
strategy nodes ..."); a single run's result is the line
"NAME: final local loss ..., global loss ..., global accuracy ...". Where the
docs show the command above the table with `--set` options
(`exogym-run examples/X.json --set compute.step_time=50ms`), the run takes
them too. Every column is compared exactly as printed, except `wall_s` (the
machine's speed) and `sim_time` where `compute.step_time` is left to be
measured. Runs are bit-for-bit reproducible, so a difference means a change
of results: one a commit meant (then regenerate the docs with --update and
say why in its message) or a defect.

The runs pin the CPU kernels (OPENBLAS_CORETYPE=Haswell,
ATEN_CPU_CAPABILITY=avx2) so that any x86-64 machine with AVX2 computes the
same bits as the machine that wrote the docs; without them a machine with
other kernels (AVX-512) may differ in the last digits.

usage: check_example_tables.py [--exogym-run BIN] [--update] [--keep DIR] MANIFEST...
  --update   rewrite the documented tables with what the runs print now
             (the prose around them is yours to check)
  --keep DIR keep the runs' folders in DIR (the CSVs the prose's figures
             come from); without it they go to a temporary folder
exit status: 0 when every table matches, 1 when one differs, 2 for a
manifest with no documented table or a run that fails.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINNED = {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2"}
ALWAYS_SKIPPED = {"wall_s"}
SINGLE = re.compile(r"^(?P<name>\S+): final local loss (?P<local_loss>\S+), global loss (?P<global_loss>\S+), "
                    r"global accuracy (?P<global_accuracy>[0-9.]+)")


def manifest_name(path):
    """The manifest's "name" (its first "name" key: the top level's comes
    first in every example)."""
    match = re.search(r'"name"\s*:\s*"([^"]+)"', path.read_text())
    if not match:
        sys.exit(f"{path}: no \"name\"")
    return match.group(1)


def split_row(line):
    # Columns are separated by two spaces or more; a value ("42.7 MB") has
    # at most one.
    return re.split(r"\s{2,}", line.strip())


def parse_table(lines):
    """lines: NAME, header, dashes, rows. Returns (columns, {variant: row})."""
    columns = split_row(lines[1])
    rows = {}
    for line in lines[3:]:
        if not line.strip() or line.startswith("outputs:"):
            break
        values = split_row(line)
        rows[values[0]] = dict(zip(columns, values))
    return columns, rows


def command_sets(lines, index, manifest):
    """The `--set` options of the command the docs show for `manifest` in
    the code block just above line `index` (none when there is none)."""
    start = index - 1
    while start >= 0 and lines[start] != "```":
        start -= 1  # the closing fence of the block above
    for line in reversed(lines[max(0, start - 5):start]):
        if line.startswith("```"):
            break
        if f"exogym-run {manifest.resolve().relative_to(ROOT).as_posix()}" in line:
            return tuple(re.findall(r"--set (\S+)", line))
    return ()


def documented(name, manifest):
    """Where the docs show NAME's results: [(file, first line index, kind,
    lines, sets)], kind "table" (lines from NAME to the last row) or
    "single", sets the --set options of the command shown above a table."""
    found = []
    for doc in [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md")):
        lines = doc.read_text().split("\n")
        for i, line in enumerate(lines):
            if line == name and i > 0 and lines[i - 1] == "```" and i + 1 < len(lines) and \
                    lines[i + 1].startswith("variant "):
                end = i + 3
                while end < len(lines) and lines[end].strip() and not lines[end].startswith(("```", "outputs:")):
                    end += 1
                found.append((doc, i, "table", lines[i:end], command_sets(lines, i - 1, manifest)))
            elif line.startswith(name + ": final local loss"):
                found.append((doc, i, "single", [line], ()))
    return found


def run(exogym_run, manifest, out_dir, sets):
    env = dict(os.environ, **PINNED)
    options = [arg for value in sets for arg in ("--set", value)]
    result = subprocess.run([exogym_run, str(manifest), "--progress=none", *options, "--set", f"output.dir={out_dir}"],
                            capture_output=True, text=True, env=env)
    if result.returncode != 0:
        print(f"FAIL: {manifest}: exogym-run exited with {result.returncode}:\n{result.stdout}{result.stderr}")
        sys.exit(2)
    return result.stdout.split("\n")


def printed_table(output, name):
    for i, line in enumerate(output):
        if line == name and i + 1 < len(output) and output[i + 1].startswith("variant "):
            end = i + 3
            while end < len(output) and output[end].strip() and not output[end].startswith("outputs:"):
                end += 1
            return output[i:end]
    return None


def compare(where, name, doc_lines, now_lines, kind, step_time_fixed):
    skipped = set(ALWAYS_SKIPPED) | (set() if step_time_fixed else {"sim_time"})
    differences = []
    if kind == "single":
        doc, now = SINGLE.match(doc_lines[0]), SINGLE.match(now_lines[0]) if now_lines else None
        if not now:
            return [f"{where}: the run printed no \"{name}: final ...\" line"]
        for key in ("local_loss", "global_loss", "global_accuracy"):
            if doc.group(key) != now.group(key):
                differences.append(f"{where}: {name}: {key} {doc.group(key)} in the docs, {now.group(key)} now")
        return differences
    if now_lines is None:
        return [f"{where}: the run printed no table for {name}"]
    doc_columns, doc_rows = parse_table(doc_lines)
    now_columns, now_rows = parse_table(now_lines)
    if doc_columns != now_columns:
        return [f"{where}: {name}: columns {doc_columns} in the docs, {now_columns} now"]
    if list(doc_rows) != list(now_rows):
        return [f"{where}: {name}: variants {list(doc_rows)} in the docs, {list(now_rows)} now"]
    for variant, row in doc_rows.items():
        for column, value in row.items():
            if column not in skipped and now_rows[variant].get(column) != value:
                differences.append(f"{where}: {name}/{variant}: {column} {value} in the docs, "
                                   f"{now_rows[variant].get(column)} now")
    return differences


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exogym-run", default=str(ROOT / "build" / "bin" / "exogym-run"))
    parser.add_argument("--update", action="store_true")
    parser.add_argument("--keep", type=Path, help="keep the runs' folders here")
    parser.add_argument("manifests", nargs="+", type=Path)
    args = parser.parse_args()
    failures = []
    with tempfile.TemporaryDirectory(prefix="exogym-example-tables-") as temporary:
        out_dir = args.keep.resolve() if args.keep else temporary
        for manifest in args.manifests:
            name = manifest_name(manifest)
            places = documented(name, manifest)
            if not places:
                print(f"FAIL: {manifest}: no documented table or result line for \"{name}\" in README.md or docs/")
                sys.exit(2)
            outputs = {}  # one run per set of --set options the docs show
            before = len(failures)
            for doc, index, kind, doc_lines, sets in places:
                if sets not in outputs:
                    outputs[sets] = run(args.exogym_run, manifest, out_dir, sets)
                output = outputs[sets]
                step_time_fixed = "step_time" in manifest.read_text() or any("step_time" in s for s in sets)
                where = f"{doc.relative_to(ROOT)}:{index + 1}"
                if kind == "table":
                    now_lines = printed_table(output, name)
                else:
                    now_lines = [line for line in output if line.startswith(name + ": final local loss")]
                differences = compare(where, name, doc_lines, now_lines, kind, step_time_fixed)
                if differences and args.update and now_lines:
                    text = doc.read_text().split("\n")
                    text[index:index + len(doc_lines)] = now_lines[:len(doc_lines)] if kind == "single" else now_lines
                    doc.write_text("\n".join(text))
                    print(f"updated {where} ({len(differences)} values)")
                    differences = []
                failures += differences
            print(f"{manifest}: {'differs' if len(failures) > before else 'as documented'}", flush=True)
    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        print("Results differ from the docs: if a commit meant to change them, run "
              "tools/check_example_tables.py --update with the same manifests and check the prose around the tables.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
