#!/usr/bin/env python3
"""Checks the relative links of the documentation, so that a moved or renamed
file or heading cannot leave a dead link behind.

Reads README.md, CONTRIBUTING.md and docs/*.md. For every Markdown link or
image whose target is relative (not http:, https:, mailto:), the file or
folder must exist, and a #fragment must name a heading of the target file,
slugged the way GitHub does it ("Run outputs" -> #run-outputs; a repeated
heading gets -1, -2, ...). Links inside code spans and fenced code blocks are
not links and are skipped.

usage: tools/check_links.py [REPOSITORY]   prints each dead link, exits 1 if any
       tools/check_links.py --self-test    checks that a dead link is caught
"""
import re
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target "title") and ![alt](target); the text may hold one level of
# brackets, e.g. [`a[0]`](x) or a nested image.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s)]*)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def documents(root):
    docs = [root / "README.md", root / "CONTRIBUTING.md"]
    docs += sorted((root / "docs").glob("*.md"))
    return [d for d in docs if d.is_file()]


def prose_lines(text):
    """(line number, line) outside fenced code blocks, code spans blanked."""
    in_fence = False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: the text without markup, lowercased,
    without punctuation other than '-' and '_', spaces turned into '-'."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("*", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        text = path.read_text(encoding="utf-8")
        for _, line in prose_lines(text):
            found.update(HTML_ANCHOR.findall(line))
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def links(text):
    for number, line in prose_lines(text):
        line = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        for m in INLINE_LINK.finditer(line):
            yield number, m.group(1)
        m = REFERENCE_DEF.match(line)
        if m:
            yield number, m.group(1)


def check(root):
    problems = []
    checked = 0
    for doc in documents(root):
        for number, target in links(doc.read_text(encoding="utf-8")):
            target = target.strip("<>")
            if not target or EXTERNAL.match(target):
                continue
            checked += 1
            where = f"{doc.relative_to(root)}:{number}: {target}"
            path_part, _, fragment = target.partition("#")
            dest = (doc.parent / unquote(path_part)).resolve() if path_part else doc
            if not dest.exists():
                problems.append(f"{where}: no such file or folder")
            elif fragment and dest.suffix == ".md" and unquote(fragment) not in anchors(dest):
                problems.append(f"{where}: no heading with the anchor #{fragment} in {dest.relative_to(root)}")
    return checked, problems


def self_test():
    """A dead file, a dead anchor and a dead reference are caught; good links,
    repeated headings and links in code are not reported."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs").mkdir()
        (root / "README.md").write_text(
            "# Top\n## Run outputs\n## Run outputs\n"
            "[ok](docs/a.md#the-api-v2) [ok](#run-outputs-1) [ok](docs/) ![ok](docs/a.md)\n"
            "`[code](missing.md)`\n```\n[code](missing.md)\n```\n"
            "[dead](docs/missing.md) [dead](docs/a.md#nowhere)\n[ref]: nothing.md\n")
        (root / "docs" / "a.md").write_text("# The `API`, v2\n[back](../README.md#top) [web](https://example.com/x)\n")
        checked, problems = check(root)
        expected = ["README.md:9: docs/missing.md", "README.md:9: docs/a.md#nowhere", "README.md:10: nothing.md"]
        got = [p.rsplit(":", 1)[0] for p in problems]
        if got != expected or checked != 8:
            print(f"self-test failed: {checked} links checked, problems {problems}")
            return 1
    print("self-test passed: dead files, anchors and references are reported")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    checked, problems = check(root)
    for p in problems:
        print(p)
    print(f"{len(documents(root))} documents, {checked} relative links checked, {len(problems)} dead")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
