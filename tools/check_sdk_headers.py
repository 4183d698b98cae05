#!/usr/bin/env python3
"""The SDK a strategy author reads stays short, and its page stays true.

docs/plugins.md, under "### The SDK's headers", lists every header of sdk/
in one of two tables: the common case of writing a strategy (first column
"common case") and the others (first column "other header"). That page is
the only list: this check reads it and fails when the common-case headers
total more than 500 lines, or when a header of sdk/ is in neither table,
in both, or listed but gone. The count follows includes: a header of sdk/
that a common-case header includes (sdk/plugin.h's sdk/options.h, say) is read
with it and counted once, whichever table lists it.

Usage: check_sdk_headers.py SOURCE_DIR"""
import pathlib
import re
import sys

LIMIT = 500
HEADING = "### The SDK's headers"


def tables(section):
    """{first header cell: [backticked names of the rows' first cells]}."""
    found, current = {}, None
    for line in section.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if current is None:
            current = found.setdefault(cells[0], [])
        elif not set(cells[0]) <= set("-: "):
            current.extend(re.findall(r"`([^`]+\.h)`", cells[0]))
    return found


def reached(sdk, start):
    """The headers of sdk/ that `start` and what they include, transitively, in the order met, and which
    header first included each one not in `start`."""
    order, by, todo = [], {}, list(start)
    while todo:
        h = todo.pop(0)
        if h in order:
            continue
        order.append(h)
        for inc in re.findall(r'^#include "exogym/sdk/([^"/]+\.h)"', (sdk / h).read_text(), flags=re.M):
            if inc not in order and inc not in todo:
                by.setdefault(inc, h)
                todo.append(inc)
    return order, by


def main():
    root = pathlib.Path(sys.argv[1])
    page = (root / "docs" / "plugins.md").read_text()
    if HEADING not in page:
        sys.exit(f"FAIL: docs/plugins.md has no section {HEADING!r}")
    section = page.split(HEADING, 1)[1]
    section = re.split(r"^#{1,3} ", section, maxsplit=1, flags=re.M)[0]
    found = tables(section)
    common, others = found.get("common case", []), found.get("other header", [])
    if not common or not others:
        sys.exit(f"FAIL: {HEADING!r} needs a table headed 'common case' and one headed 'other header'")
    headers = sorted(p.name for p in (root / "sdk").glob("*.h"))
    listed = common + others
    problems = [f"sdk/{h} is in neither table" for h in headers if h not in listed]
    problems += [f"{h} is listed twice" for h in sorted(set(listed)) if listed.count(h) > 1]
    problems += [f"{h} is listed but sdk/{h} does not exist" for h in sorted(set(listed)) if h not in headers]
    read, by = reached(root / "sdk", [h for h in common if h in headers])
    lines = {h: len((root / "sdk" / h).read_text().splitlines()) for h in read}
    total = sum(lines.values())
    for h in read:
        print(f"{lines[h]:5} sdk/{h}" + (f" (included by {by[h]})" if h in by else ""))
    print(f"{total:5} lines in the common case (limit {LIMIT})")
    if total > LIMIT:
        problems.append(f"the common-case headers total {total} lines, more than {LIMIT}: move what only "
                        "advanced use needs into another header, or tighten comments")
    if problems:
        sys.exit("FAIL: " + "\nFAIL: ".join(problems))
    print("OK")


if __name__ == "__main__":
    main()
