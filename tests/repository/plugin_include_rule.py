#!/usr/bin/env python3
"""Plugins see only the SDK: tests/plugins/runtime_include.cpp, a plugin made
by exogym_add_plugin that includes a runtime header (or, compiled again, a
header of the SDK library's own details, sdk/internal/), must fail to compile
because the header is not on a plugin's include path.

It runs the target's own compile command from compile_commands.json (so
exactly a plugin's flags), writing its outputs to a temporary folder rather
than building the target: a build here could rebuild and relink libraries
that other tests are running."""
import json
import os
import shlex
import subprocess
import sys
import tempfile

build_dir = sys.argv[1]
source = "tests/plugins/runtime_include.cpp"
# Each header, and the include folder where the runtime, the SDK's sources and
# the tests find it.
headers = {
    "exogym/runtime/manifest/manifest.h": "internal-include",
    "exogym/sdk/internal/fused_adamw.h": "sdk-internal-include",
}

entries = [e for e in json.load(open(os.path.join(build_dir, "compile_commands.json")))
           if e["file"].endswith(source)]
if len(entries) != 1:
    sys.exit(f"FAIL: expected one compile command for {source}, found {len(entries)}")
entry = entries[0]
command = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])

for header, folder in headers.items():
    # The header exists for the build: the failure below is the include path's.
    if not os.path.isfile(os.path.join(build_dir, folder, header)):
        sys.exit(f"FAIL: {header} is not in {folder}")
    args = list(command)
    args.insert(1, f'-DEXOGYM_OUT_OF_REACH="{header}"')
    with tempfile.TemporaryDirectory() as work:
        # The object and its dependency file go to `work`, not the build tree.
        for flag, name in (("-o", "plugin.o"), ("-MF", "plugin.d")):
            if flag in args:
                args[args.index(flag) + 1] = os.path.join(work, name)
        result = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True)

    print(" ".join(shlex.quote(a) for a in args))
    print(result.stdout + result.stderr)
    if result.returncode == 0:
        sys.exit(f"FAIL: {source} compiled: a plugin can include {header}")
    # GCC: "<header>: No such file or directory"; Clang: "'<header>' file not found".
    if f"{header}: No such file or directory" not in result.stderr and f"'{header}' file not found" not in result.stderr:
        sys.exit(f"FAIL: {source} did not compile, but not because {header} is out of reach")
    print(f"OK: {header} is out of a plugin's reach")
