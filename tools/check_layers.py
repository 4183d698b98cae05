#!/usr/bin/env python3
"""Checks that the rooms of runtime/ depend one way, in the order
CONTRIBUTING.md writes down once.

The order is CONTRIBUTING.md's table under "## Rooms of runtime/": each row
whose first cell is a number and whose second names a folder (`util/`) puts
that room at that level, bottom first. A file of runtime/<room>/ may include
(`#include "exogym/runtime/<other>/..."`) only its own room and rooms of a
lower level; so no two rooms can include each other, directly or through
others. Every folder of runtime/ must be in the table and every room in the
table must be a folder. The SDK (sdk/) includes no runtime header at all:
it is the contract below every room (plugins keep to it too:
tests/repository/plugin_include_rule.py).

usage: tools/check_layers.py [REPOSITORY]   prints each include against the
                                            order, exits 1 if any
       tools/check_layers.py --self-test    checks that a loop is caught
"""
import re
import sys
import tempfile
from pathlib import Path

ROOM_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`([a-z_]+)/`")
INCLUDE = re.compile(r'^\s*#\s*include\s+"exogym/runtime/([a-z_]+)/')
SOURCE_SUFFIXES = (".h", ".cpp")


def room_levels(contributing):
    """{room: level} from the rooms table of CONTRIBUTING.md."""
    levels = {}
    in_section = False
    for line in contributing.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            in_section = line.strip() == "## Rooms of runtime/"
            continue
        match = ROOM_ROW.match(line) if in_section else None
        if match:
            levels[match.group(2)] = int(match.group(1))
    return levels


def violations(root):
    contributing = root / "CONTRIBUTING.md"
    levels = room_levels(contributing)
    problems = []
    if not levels:
        return [f"{contributing}: no rooms table under '## Rooms of runtime/'"]
    runtime = root / "runtime"
    folders = {p.name for p in runtime.iterdir() if p.is_dir()}
    for room in sorted(folders - levels.keys()):
        problems.append(f"runtime/{room}/ is not in CONTRIBUTING.md's rooms table")
    for room in sorted(levels.keys() - folders):
        problems.append(f"CONTRIBUTING.md lists the room {room}/, which is not a folder of runtime/")
    files = [(p, p.relative_to(runtime).parts[0]) for p in runtime.rglob("*") if p.suffix in SOURCE_SUFFIXES]
    files += [(p, None) for p in (root / "sdk").rglob("*") if p.suffix in SOURCE_SUFFIXES]
    for path, room in sorted(files):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1)
            where = f"{path.relative_to(root)}:{number}"
            if room is None:
                problems.append(f"{where}: the SDK includes runtime/{target}/ (the SDK is below every room)")
            elif room in levels and target in levels and levels[target] > levels[room]:
                problems.append(f"{where}: {room}/ (level {levels[room]}) includes {target}/ (level "
                                f"{levels[target]}); a room includes only rooms below it")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "CONTRIBUTING.md").write_text("## Rooms of runtime/\n\n| level | room |\n|---|---|\n"
                                              "| 1 | `low/` | x |\n| 2 | `high/` | y |\n")
        for room in ("low", "high"):
            (root / "runtime" / room).mkdir(parents=True)
        (root / "sdk").mkdir()
        (root / "runtime/high/a.h").write_text('#include "exogym/runtime/low/b.h"\n')
        if violations(root):
            print("self-test: an include downward was reported")
            return 1
        (root / "runtime/low/b.cpp").write_text('#include "exogym/runtime/high/a.h"\n')
        (root / "runtime/extra").mkdir()
        found = violations(root)
        if len(found) != 2 or "low/ (level 1) includes high/" not in found[1] or "extra" not in found[0]:
            print("self-test: expected the upward include and the unlisted room, got:", *found, sep="\n  ")
            return 1
    print("self-test: an upward include and an unlisted room are reported")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent)
    problems = violations(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) against the rooms' order (CONTRIBUTING.md, 'Rooms of runtime/')")
        return 1
    print("runtime/'s rooms include one way only")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
