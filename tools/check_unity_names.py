#!/usr/bin/env python3
"""The test binary's and the libraries' sources are compiled in unity
batches (several .cpp files in one translation unit: tests/CMakeLists.txt,
cmake/UnityBatches.cmake), so the names a source defines for itself, at
file scope in its anonymous namespace, must be its own within its target:
two files defining `json manifest()` compile apart and fail the day they
share a batch. This check lists every such name defined by more than one
source of one batched target; shared helpers belong in a header of their
own (tests/support/ for the tests).

It reads what clang-format writes: a definition inside `namespace {` starts
in the first column, and the anonymous namespace ends at
`}  // namespace`.

Usage: check_unity_names.py SOURCE_DIR\n       check_unity_names.py --self-test   shows that a clash is reported"""
import pathlib
import re
import sys
import tempfile

# The batched targets: the folder of their sources, and the subfolders that
# are other targets' (tests/CMakeLists.txt, plugins/CMakeLists.txt).
TARGETS = {
    "tests": ("plugins", "interposition"),
    "runtime": (),
    "sdk": (),
    "plugins/modules": (),
    "tools/bench": (),
}

# A definition's name: a type, or the identifier before the first "(" (a
# function) or before " =", " {" or ";" (a variable), at the line's start.
TYPE = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:class|struct|enum(?:\s+class)?|union)\s+(\w+)")
ALIAS = re.compile(r"^using\s+(\w+)\s*=")
FUNCTION = re.compile(r"^[\w:<>,*&\s]+?[\s*&](\w+)\s*\(")
VARIABLE = re.compile(r"^(?:static\s+|inline\s+)?(?:constexpr\s+|const\s+)*[\w:<>,*&\s]+?[\s*&](\w+)\s*(?:=|\{|;|\[)")
SKIP = re.compile(r"^(?:namespace|using\s+namespace|using\s+[\w:]+;|#|//|TEST_CASE|SECTION|}|\s|$)")


def names_in(text):
    """{name: alias} for the names the anonymous namespaces of `text` define
    at file scope; alias is the line of a `using name = ...;` (the same alias
    twice in one batch declares one type twice, which C++ allows), else None."""
    names, inside = {}, False
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
                names[match.group(1)] = line.strip() if pattern is ALIAS else None
                break
    return names


def clashes_in(root):
    """{(target, name): [files]} of the names more than one source of a target defines, and how many names there are."""
    defined = {}
    for target, others in TARGETS.items():
        folder = root / target
        for source in sorted(folder.rglob("*.cpp")):
            relative = source.relative_to(folder)
            if relative.parts[0] in others:
                continue
            for name, alias in names_in(source.read_text(encoding="utf-8")).items():
                defined.setdefault((target, name), []).append((str(source.relative_to(root)), alias))
    clashes = {}
    for key, definitions in defined.items():
        aliases = {alias for _, alias in definitions}
        if len(definitions) > 1 and (None in aliases or len(aliases) > 1):
            clashes[key] = [file for file, _ in definitions]
    return clashes, len(defined)


def self_test():
    """Two files that each define manifest() and a Folder, and one that only calls it: both names reported."""
    with tempfile.TemporaryDirectory() as folder:
        root = pathlib.Path(folder)
        (root / "tests" / "a").mkdir(parents=True)
        (root / "tests" / "plugins").mkdir()
        own = ("namespace {\n\nstruct Folder {};\nusing Clock = std::chrono::steady_clock;\n"
               "json manifest(int nodes) {\n  return {};\n}\n\n}  // namespace\n")
        (root / "tests" / "a" / "test_one.cpp").write_text(own, encoding="utf-8")
        (root / "tests" / "test_two.cpp").write_text(own, encoding="utf-8")
        (root / "tests" / "test_calls.cpp").write_text("TEST_CASE(\"x\") { manifest(2); }\n", encoding="utf-8")
        (root / "tests" / "plugins" / "own_target.cpp").write_text(own, encoding="utf-8")
        clashes, _ = clashes_in(root)
        (root / "runtime").mkdir()
        (root / "runtime" / "one.cpp").write_text(own, encoding="utf-8")
        files = ["tests/a/test_one.cpp", "tests/test_two.cpp"]
        expected = {("tests", "Folder"): files, ("tests", "manifest"): files}
        if clashes != expected:
            sys.exit(f"self-test: expected {expected}, got {clashes}")
    print("self-test: a name two test files define is reported; a test-only plugin's, "
          "one alias defined alike, and the same name in another target, are not")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    clashes, count = clashes_in(pathlib.Path(sys.argv[1]))
    for (target, name), files in sorted(clashes.items()):
        print(f"FAIL: {name} is defined by {len(files)} sources of {target}/: {', '.join(files)}")
    if clashes:
        sys.exit("rename each file's own, or move one shared helper to a header "
                 "(tests/support/ for the tests): these sources are compiled in unity batches")
    print(f"{count} file-scope names of the batched targets' sources, each defined once in its target")


if __name__ == "__main__":
    main()
