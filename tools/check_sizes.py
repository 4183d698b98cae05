#!/usr/bin/env python3
"""Checks the project's size limits, so that no file or function grows past
what a reader can hold in mind:

  - source files: at most 400 lines (tests: 600);
  - functions (and lambdas at namespace scope): at most 80 lines.

Functions are found by Universal Ctags (start and end lines), not by a
home-made parser. Usage: tools/check_sizes.py [REPOSITORY]; prints each
violation and exits 1 if there is any.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

FILE_LIMIT = 400
TEST_FILE_LIMIT = 600
FUNCTION_LIMIT = 80
FOLDERS = ("runtime", "sdk", "plugins", "models", "tools", "tests", "examples")


def sources(root):
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "--", *FOLDERS], capture_output=True, text=True)
    if listed.returncode != 0:
        # A copy without its repository (or a worktree seen from a chroot, whose
        # .git names a folder outside it): as check_references.py, a skip.
        print(f"not a git checkout, no list of tracked files: skipped ({listed.stderr.strip()})")
        sys.exit(77)
    return [f for f in listed.stdout.split() if f.endswith((".cpp", ".h"))]


def functions(root, files):
    # Debian's universal-ctags installs ctags-universal; "ctags" is an
    # alternative that an unpacked package (the GPU kit) does not have.
    ctags = shutil.which("ctags") or shutil.which("ctags-universal")
    runs = ctags and subprocess.run([ctags, "--version"], capture_output=True).returncode == 0
    if not runs:
        # tools/dev test installs it; elsewhere the check is skipped, visibly.
        print(f"no working Universal Ctags ({ctags or 'ctags not found'}): skipped")
        sys.exit(77)
    out = subprocess.run([ctags, "--fields=+ne", "--kinds-C++=f", "--language-force=C++",
                          "--output-format=json", "-o", "-", *files],
                         cwd=root, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        tag = json.loads(line)
        # Lambdas inside a function count towards that function.
        if tag.get("scopeKind") == "function" or "end" not in tag:
            continue
        yield tag["path"], tag["name"], tag["line"], tag["end"]


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    files = sources(root)
    problems = []
    for f in files:
        limit = TEST_FILE_LIMIT if f.startswith("tests/") else FILE_LIMIT
        lines = sum(1 for _ in open(root / f, encoding="utf-8", errors="replace"))
        if lines > limit:
            problems.append(f"{f}: {lines} lines (limit {limit})")
    for path, name, start, end in functions(root, files):
        length = end - start + 1
        if length > FUNCTION_LIMIT:
            problems.append(f"{path}:{start}: function {name} has {length} lines (limit {FUNCTION_LIMIT})")
    for p in problems:
        print(p)
    print(f"{len(files)} files checked, {len(problems)} over the limits")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
