#!/usr/bin/env bash
# python_with.sh MODULES SCRIPT [ARGS...]: runs SCRIPT with the first python3
# that imports every module of MODULES (comma-separated), or exits 77 (the
# script tests' "skipped") naming the Debian packages to install. Debian's
# python3-torch and python3-jsonschema are for /usr/bin/python3, which
# another python3 on the PATH (pyenv, a venv) may hide.
set -euo pipefail
modules=$1
shift
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c "import $modules" 2>/dev/null; then
    exec "$candidate" "$@"
  fi
done
echo "no python3 that imports $modules (Debian: python3-${modules//,/ python3-}): skipped"
exit 77
