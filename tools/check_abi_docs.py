#!/usr/bin/env python3
"""The plugin ABI the documentation names is the one the SDK declares.

sdk/plugin.h defines EXOGYM_ABI_VERSION, the one source of the number.
docs/plugins.md says it twice: "The plugin ABI is now **N**" and the
SONAME `libexogym_sdk.so.N` of the install; this check fails when either
differs from the header (or is gone), so that a bump cannot leave the page
behind.

Usage: check_abi_docs.py SOURCE_DIR"""
import pathlib
import re
import sys


def main():
    root = pathlib.Path(sys.argv[1])
    header = (root / "sdk" / "plugin.h").read_text()
    declared = re.search(r"^#define EXOGYM_ABI_VERSION (\d+)$", header, re.M)
    if not declared:
        sys.exit("FAIL: sdk/plugin.h defines no EXOGYM_ABI_VERSION")
    abi = declared.group(1)
    page = (root / "docs" / "plugins.md").read_text()
    problems = []
    for what, pattern in (("The plugin ABI is now **N**", r"The plugin ABI is now \*\*(\d+)\*\*"),
                          ("`libexogym_sdk.so.N`", r"`libexogym_sdk\.so\.(\d+)`")):
        found = re.findall(pattern, page)
        if not found:
            problems.append(f"docs/plugins.md no longer says {what}")
        problems += [f"docs/plugins.md says {what.replace('N', n)}, sdk/plugin.h says {abi}" for n in found if n != abi]
    if problems:
        sys.exit("FAIL: " + "\nFAIL: ".join(problems))
    print(f"docs/plugins.md names plugin ABI {abi}, as sdk/plugin.h does")


if __name__ == "__main__":
    main()
