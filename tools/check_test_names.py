#!/usr/bin/env python3
"""The test binary's sources are compiled in unity batches (several .cpp
files in one translation unit, tests/CMakeLists.txt), so the names a test
file defines for itself, at file scope in its anonymous namespace, must be
its own: two files defining `json manifest()` compile apart and fail the
day they share a batch. This check lists every such name defined by more
than one file of the test binary; shared helpers belong in tests/support/.

It reads what clang-format writes: a definition inside `namespace {` starts
in the first column, and the anonymous namespace ends at
`}  // namespace`.

Usage: check_test_names.py SOURCE_DIR\n       check_test_names.py --self-test   shows that a clash is reported"""
import pathlib
import re
import sys
import tempfile

# Where the binary's sources are not: their own targets (tests/CMakeLists.txt).
OWN_TARGETS = ("plugins", "interposition")

# A definition's name: a type, or the identifier before the first "(" (a
# function) or before " =", " {" or ";" (a variable), at the line's start.
TYPE = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:class|struct|enum(?:\s+class)?|union)\s+(\w+)")
ALIAS = re.compile(r"^using\s+(\w+)\s*=")
FUNCTION = re.compile(r"^[\w:<>,*&\s]+?[\s*&](\w+)\s*\(")
VARIABLE = re.compile(r"^(?:static\s+|inline\s+)?(?:constexpr\s+|const\s+)*[\w:<>,*&\s]+?[\s*&](\w+)\s*(?:=|\{|;|\[)")
SKIP = re.compile(r"^(?:namespace|using\s+namespace|using\s+[\w:]+;|#|//|TEST_CASE|SECTION|}|\s|$)")


def names_in(text):
    """The names the anonymous namespaces of `text` define at file scope."""
    names, inside = set(), False
    for line in text.splitlines():
        if line.startswith("namespace {"):
            inside = True
            continue
        if inside and line.startswith("}  // namespace"):
            inside = False
            continue
        if not inside or SKIP.match(line):
            continue
        for pattern in (TYPE, ALIAS, FUNCTION, VARIABLE):
            match = pattern.match(line)
            if match:
                names.add(match.group(1))
                break
    return names


def clashes_in(root):
    """{name: [files]} of the names more than one test file defines, and how many names there are."""
    tests = root / "tests"
    defined = {}
    for source in sorted(tests.rglob("*.cpp")):
        relative = source.relative_to(tests)
        if relative.parts[0] in OWN_TARGETS:
            continue
        for name in names_in(source.read_text(encoding="utf-8")):
            defined.setdefault(name, []).append(str(relative))
    return {name: files for name, files in defined.items() if len(files) > 1}, len(defined)


def self_test():
    """Two files that each define manifest() and a Folder, and one that only calls it: both names reported."""
    with tempfile.TemporaryDirectory() as folder:
        root = pathlib.Path(folder)
        (root / "tests" / "a").mkdir(parents=True)
        (root / "tests" / "plugins").mkdir()
        own = "namespace {\n\nstruct Folder {};\njson manifest(int nodes) {\n  return {};\n}\n\n}  // namespace\n"
        (root / "tests" / "a" / "test_one.cpp").write_text(own, encoding="utf-8")
        (root / "tests" / "test_two.cpp").write_text(own, encoding="utf-8")
        (root / "tests" / "test_calls.cpp").write_text("TEST_CASE(\"x\") { manifest(2); }\n", encoding="utf-8")
        (root / "tests" / "plugins" / "own_target.cpp").write_text(own, encoding="utf-8")
        clashes, _ = clashes_in(root)
        expected = {"Folder": ["a/test_one.cpp", "test_two.cpp"], "manifest": ["a/test_one.cpp", "test_two.cpp"]}
        if clashes != expected:
            sys.exit(f"self-test: expected {expected}, got {clashes}")
    print("self-test: a name two test files define is reported, a test-only plugin's is not")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    clashes, count = clashes_in(pathlib.Path(sys.argv[1]))
    for name, files in sorted(clashes.items()):
        print(f"FAIL: {name} is defined by {len(files)} test files: {', '.join(files)}")
    if clashes:
        sys.exit("rename each file's own, or move one shared helper to tests/support/ "
                 "(the test sources are compiled in unity batches)")
    print(f"{count} file-scope names of the test files' own, each defined once")


if __name__ == "__main__":
    main()
