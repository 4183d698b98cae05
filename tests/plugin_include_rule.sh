#!/usr/bin/env bash
# Plugins see only the SDK: a plugin that includes a runtime header, built
# with exactly a plugin's flags (exogym_add_plugin), fails to compile because
# the header is not on its include path.
set -uo pipefail
build_dir=$1
target=$2
header=exogym/runtime/manifest/manifest.h
# The header exists for the runtime: the failure below is the include path's.
test -f "$build_dir/internal-include/$header" || { echo "$header is not in the runtime's include path" >&2; exit 1; }
output=$(cmake --build "$build_dir" --target "$target" 2>&1)
status=$?
echo "$output"
if [ "$status" -eq 0 ]; then
  echo "FAIL: $target compiled: a plugin can include $header" >&2
  exit 1
fi
# GCC: "<header>: No such file or directory"; Clang: "'<header>' file not found".
if ! grep -qE "$header'?(: No such file or directory| file not found)" <<< "$output"; then
  echo "FAIL: $target failed to build, but not because $header is out of reach" >&2
  exit 1
fi
echo "OK: $header is out of a plugin's reach"
