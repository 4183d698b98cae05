#!/usr/bin/env python3
"""Checks that the comments of the sources point at things the repository
holds, so that a moved, renamed or never-committed file, heading or document
cannot leave a dead reference behind.

What is read: every tracked C++ source (.h, .cpp, a C header's .h.in), CMake
file (CMakeLists.txt, .cmake, .cmake.in), shell script (.sh, or no suffix and
a `#!` line naming a shell, e.g. tools/dev) and Python script (.py, or a `#!`
line naming python), as `git ls-files` lists them; not this file, whose
header shows what is reported.

What is a comment: C++ `//` and `/* */` comments (not string or character
literals, raw strings included); `#` comments of CMake (outside quoted and
bracket arguments; bracket comments too) and of shell scripts (outside quotes
and here-documents, a `#` that starts a word); Python's `#` comments and the
docstrings of modules, classes and functions. Code is never read: an
`#include` is checked by the compiler, and a string in code may name a file
the program writes (`config.json`) rather than one of the repository's. A
path cut at a `/` at the end of a comment line goes on at the next line's
start.

What is a reference, in a comment, after removing URLs (scheme://...):
  - a file name with a source or document suffix (.h .hpp .cpp .cc .md .py
    .sh .cmake .in .supp, and CMakeLists.txt), with or without folders and a
    `#heading` anchor: `docs/manifest.md#fields`, `see thread_plan.h`,
    `(node_loop.cpp)`, `cmake/LinkOrder.cmake`;
  - a path of any kind under one of the repository's top-level folders:
    `examples/mnist-compare.json`, `tests/plugins/`.
Not references: a pattern (`test_*.cpp`, `plugins/<name>/`, `{a,b}.h`); a
placeholder, a name of one letter (`runtime/x.cpp:42`, `sdk/x.h`); a header
of another project written as it is included (`<ATen/core/TensorBody.h>`);
another project's file named with that project, `LibTorch's TorchConfig.cmake`
(the projects: OWNERS below); a path git ignores (`examples/runs/`, what a run
writes).

How a reference resolves, first match wins: relative to the commenting file's
folder; relative to the repository root; with an include path's `exogym/`
dropped, as the tail of exactly one tracked path (`cluster/thread_plan.h`,
`exogym/modules/outer/diloco.h`); a bare name as the basename of exactly one
tracked file (two `run_folder.h`: write which). A generated file resolves
through its template (`X` through a tracked `X.in`). Folders count where they
hold tracked files. A `#anchor` on a .md must name one of its headings,
slugged as tools/check_links.py does.

Document-style references are reported whatever they say, since every
document the code may cite is in the repository and cited by path: `DESIGN`,
`§N`, and lettered codes of an outside list (`bug B7`, `B8`).

usage: tools/check_references.py [REPOSITORY]  prints each dead reference, exits 1 if any
       tools/check_references.py --self-test   checks that dead references are caught
"""
import ast
import io
import os
import re
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_links import anchors  # noqa: E402  (headings slugged by one rule)

SHEBANG = re.compile(r"^#!.*\b(sh|bash|dash|python3?)\b")
URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S*")
SUFFIXES = ("h", "hpp", "cpp", "cc", "md", "py", "sh", "cmake", "in", "supp")
# Words of a comment: what lies between spaces, quotes, brackets and the
# punctuation that ends a path (`x.cpp:42`, `(node_loop.cpp)`, `a.h, b.h`).
WORD = re.compile(r"[^\s`'\"(),;:\[\]=]+")
PATTERN = re.compile(r"[<>{}*$%|?!@\\]")
PLACEHOLDER = re.compile(r"[A-Za-z]\.\w+")
OWNERS = ("LibTorch", "PyTorch", "Catch2", "nanoGPT", "reference", "CMake", "glibc", "libstdc++", "Gloo", "NCCL",
          "Debian", "Python")
OWNED = re.compile(r"(?:%s)'s\s*$" % "|".join(re.escape(o) for o in OWNERS))
DOCUMENT_STYLE = re.compile(r"\bDESIGN\b(?:\.md)?(?:\s*§\s*\d+)?|§\s*\d*|\b[Bb]ugs?\s+[A-Z]\d+\b|\bB\d+\b")


def classify(path, first_line):
    name = path.name
    if name == "CMakeLists.txt" or name.endswith((".cmake", ".cmake.in")):
        return "cmake"
    if name.endswith((".h", ".hpp", ".cpp", ".cc", ".h.in")):
        return "cpp"
    if name.endswith(".py"):
        return "python"
    if name.endswith(".sh"):
        return "shell"
    m = SHEBANG.match(first_line) if "." not in name else None
    if m:
        return "python" if m.group(1).startswith("python") else "shell"
    return None


def cpp_comments(text):
    """(line, text) of every // and /* */ comment, outside literals."""
    i, n, line = 0, len(text), 1
    raw = re.compile(r'R"([^()\\\s]{0,16})\(')
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif text.startswith("//", i) or text.startswith("/*", i):
            end = text.find("\n", i) if text[i + 1] == "/" else text.find("*/", i)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2:end].split("\n")):
                yield line + k, part
            line += text.count("\n", i, end)
            i = end
            continue
        elif c == "R" and raw.match(text, i) and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")):
            delimiter = raw.match(text, i).group(1)
            close = text.find(")" + delimiter + '"', i)
            close = n if close < 0 else close + len(delimiter) + 2
            line += text.count("\n", i, close)
            i = close
            continue
        elif c == '"' or (c == "'" and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"))):
            j = i + 1  # a literal ends at its quote; a digit separator (1'000) is not one
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j
        i += 1


def hash_comments(text, kind):
    """(line, text) of every # comment of a CMake file or shell script."""
    state = {"quote": None, "bracket": None, "heredoc": None}
    for number, line in enumerate(text.splitlines(), start=1):
        if state["heredoc"]:
            if line.strip() == state["heredoc"]:
                state["heredoc"] = None
            continue
        comment = scan_hash_line(line, kind, state)
        if comment is not None:
            yield number, comment


def scan_hash_line(line, kind, state):
    """The comment text of one line, or None; `state` carries a quote, a
    CMake bracket or a shell here-document over to the next lines."""
    i, comment = 0, None
    while i < len(line):
        if state["bracket"]:
            close, is_comment = state["bracket"]
            end = line.find(close, i)
            if is_comment:
                comment = (comment or "") + (line[i:] if end < 0 else line[i:end])
            if end < 0:
                return comment
            i, state["bracket"] = end + len(close), None
            continue
        c = line[i]
        if state["quote"]:
            if c == "\\" and state["quote"] == '"':
                i += 1
            elif c == state["quote"]:
                state["quote"] = None
        elif c == "#" and (i == 0 or kind == "cmake" or line[i - 1] in " \t;|&()"):
            m = re.match(r"#\[(=*)\[", line[i:]) if kind == "cmake" else None
            if not m:
                return (comment or "") + line[i + 1:]
            state["bracket"] = ("]" + m.group(1) + "]", True)
            i += len(m.group(0))
            continue
        elif kind == "cmake" and re.match(r"\[(=*)\[", line[i:]):
            m = re.match(r"\[(=*)\[", line[i:])
            state["bracket"] = ("]" + m.group(1) + "]", False)
            i += len(m.group(0))
            continue
        elif c == '"' or (c == "'" and kind == "shell"):
            state["quote"] = c
        elif c == "\\" and kind == "shell":
            i += 1
        elif kind == "shell" and line.startswith("<<", i) and not line.startswith("<<<", i):
            m = re.match(r"<<-?\s*(['\"]?)([\w.-]+)\1", line[i:])
            if m:
                state["heredoc"] = m.group(2)
                i += len(m.group(0))
                continue
        i += 1
    return comment


def python_comments(text):
    """(line, text) of # comments and of module, class and function docstrings."""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string[1:]
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                for number in range(first.lineno, first.end_lineno + 1):
                    yield number, lines[number - 1]


def comments(path, kind):
    """(line, text) of the comments of one file, a path cut at a line's end
    joined with its rest."""
    text = path.read_text(encoding="utf-8", errors="replace")
    found = cpp_comments(text) if kind == "cpp" else python_comments(text) if kind == "python" else \
        hash_comments(text, kind)
    last, cut = None, ""
    for number, part in sorted(found):
        rest = WORD.match(part.lstrip())
        if cut and number == last + 1 and rest and ("/" in rest.group(0) or "." in rest.group(0).rstrip(".")):
            part = cut + part.lstrip()
        words = part.split()
        cut = words[-1] if words and words[-1].endswith("/") and "/" in words[-1][:-1] else ""
        last = number
        yield number, part


class Repository:
    """The tracked files and folders, and how a reference resolves among them."""

    def __init__(self, root, files):
        self.root = root
        self.files = set(files)
        self.folders = {str(p) for f in files for p in Path(f).parents if str(p) != "."}
        self.top = {f.split("/", 1)[0] for f in files if "/" in f}
        self.by_name = {}
        for f in files:
            self.by_name.setdefault(f.rsplit("/", 1)[-1], []).append(f)

    def is_reference(self, path):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if PLACEHOLDER.fullmatch(name):
            return False
        if name == "CMakeLists.txt" or (re.match(r"[\w+-][\w.+-]*\.\w+$", name) and name.rsplit(".", 1)[1] in SUFFIXES):
            return True
        return "/" in path and path.split("/", 1)[0] in self.top

    def known(self, path):
        return path in self.files or path in self.folders or path + ".in" in self.files

    def resolve(self, path, folder):
        """(the tracked file or folder `path` names, None), or (None, what is wrong)."""
        bare = path.rstrip("/")
        for candidate in (os.path.normpath(os.path.join(folder, bare)), os.path.normpath(bare)):
            if self.known(candidate):
                return candidate, None
        tail = bare[len("exogym/"):] if bare.startswith("exogym/") else bare
        if "/" in tail:
            found = [f for f in self.files | self.folders if f.endswith("/" + tail)]
            found += [f[:-3] for f in self.files if f.endswith("/" + tail + ".in")]
        else:
            found = self.by_name.get(tail, []) + [f[:-3] for f in self.by_name.get(tail + ".in", [])]
        if len(found) == 1:
            return found[0], None
        if found:
            return None, f"names {len(found)} files ({', '.join(sorted(found))}): write which"
        if self.ignored(bare):
            return bare, None
        return None, "no such file or folder in the repository"

    def ignored(self, path):
        """Whether git ignores `path` (what builds and runs write); outside a
        git checkout, never."""
        if "/" not in path or path.split("/", 1)[0] not in self.top:
            return False
        # Both spellings: a folder's pattern (`/examples/runs/`) matches only
        # the one with a slash when the folder is not there.
        return subprocess.run(["git", "-C", str(self.root), "check-ignore", "--no-index", path, path + "/"],
                              capture_output=True).returncode == 0


def references(text):
    """(path, anchor) for every path-like word of a comment's text that is
    not a pattern nor named as another project's."""
    text = URL.sub(" ", text)
    for m in WORD.finditer(text):
        word = m.group(0)
        if PATTERN.search(word) or OWNED.search(text[:m.start()]):
            continue
        path, _, anchor = word.partition("#")
        path = path.rstrip(".")
        if path:
            yield path, anchor.rstrip(".")


def check_file(repo, relative, kind, problems):
    checked = 0
    folder = os.path.dirname(relative)
    for number, text in comments(repo.root / relative, kind):
        where = f"{relative}:{number}"
        for m in DOCUMENT_STYLE.finditer(text):
            problems.append(f"{where}: \"{m.group(0)}\" cites a document outside the repository: "
                            "point at docs/ or say it here")
        for path, anchor in references(text):
            if not repo.is_reference(path):
                continue
            checked += 1
            target, error = repo.resolve(path, folder)
            if error:
                problems.append(f"{where}: {path}: {error}")
            elif anchor and target.endswith(".md") and anchor not in anchors(repo.root / target):
                problems.append(f"{where}: {path}#{anchor}: no heading with that anchor in {target}")
    return checked


def check(root, files):
    """(sources read, references checked, problems) over the listed files."""
    repo = Repository(root, files)
    problems, checked, read = [], 0, 0
    for relative in sorted(files):
        path = root / relative
        # This file's header shows what is reported; it is not checked.
        if not path.is_file() or path.resolve() == Path(__file__).resolve():
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            kind = classify(path, f.readline())
        if kind:
            read += 1
            checked += check_file(repo, relative, kind, problems)
    return read, checked, problems


SELF_TEST = {
    "docs/guide.md": "# The API\n## Run outputs\n",
    "src/one/run_folder.h": "", "src/two/run_folder.h": "", "src/two/ok.h": "", "src/gen.h.in": "",
    "src/code.cpp": (
        '#include "not_here.h"\n'
        "// see docs/guide.md#run-outputs, ok.h, (src/two/ok.h), exogym/gen.h, test_*.cpp, <vendor/v.h>\n"
        "// https://example.com/x.h  runtime/x.cpp:42  LibTorch's TensorBody.h\n"
        'const char* s = "// missing_in_string.h"; char q = \'"\'; // dead_line3.h\n'
        "/* docs/guide.md#nowhere\n   gone.cpp */ auto r = R\"x(// raw.h)x\";\n"
        "// DESIGN §3 and bug B7, or B8 alone\n"
        "// wrapped: src/two/\n// ok.h, and run_folder.h\n"),
    "tools/script": (
        "#!/bin/sh\n# docs/guide.md is here\necho \"# quoted.sh\" '#x.sh' ${#x}\n"
        "cat <<'EOF'\n# heredoc.h\nEOF\nls # dead.sh\n"),
    "CMakeLists.txt": 'message("# quoted.cmake")\n#[[ bracket_dead.cmake\n]] # LinkOrder.cmake\n',
    "tools/tool.py": '"""Reads docstring_dead.md."""\nx = "# string.py"  # comment_dead.py\n',
}
SELF_TEST_EXPECTED = [
    "CMakeLists.txt:2: bracket_dead.cmake", "CMakeLists.txt:3: LinkOrder.cmake",
    "src/code.cpp:4: dead_line3.h", "src/code.cpp:5: docs/guide.md#nowhere", "src/code.cpp:6: gone.cpp",
    'src/code.cpp:7: "DESIGN §3"', 'src/code.cpp:7: "bug B7"',
    'src/code.cpp:7: "B8"', "src/code.cpp:9: run_folder.h",
    "tools/script:7: dead.sh", "tools/tool.py:1: docstring_dead.md", "tools/tool.py:2: comment_dead.py"]


def self_test():
    """Dead files, anchors, ambiguous names and outside documents are caught in
    each language's comments; code, strings, patterns and live references are
    not reported."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in SELF_TEST.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        read, checked, problems = check(root, list(SELF_TEST))
    got = [re.sub(r"^(\S+:\d+: (?:\"[^\"]*\"|\S+?)):? .*$", r"\1", p) for p in problems]
    if got != SELF_TEST_EXPECTED or read != 8:
        print(f"self-test failed: {read} sources read, {checked} references checked; problems:")
        print("\n".join(problems))
        print("expected:\n" + "\n".join(SELF_TEST_EXPECTED))
        return 1
    print(f"self-test passed: {len(problems)} dead references reported among {checked} and 4 document-style ones")
    return 0


def tracked(root):
    listed = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True)
    if listed.returncode != 0:
        # Sources outside a git checkout (an unpacked archive): skipped, visibly.
        print(f"not a git checkout, no list of tracked files: skipped ({listed.stderr.strip()})")
        sys.exit(77)
    return listed.stdout.splitlines()


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    read, checked, problems = check(root, tracked(root))
    for p in problems:
        print(p)
    print(f"{read} sources, {checked} references in comments checked, {len(problems)} dead")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
