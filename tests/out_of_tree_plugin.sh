#!/usr/bin/env bash
# A third party's view: install ExoGym, build examples/plugin-template against
# the install with find_package(ExoGym), and train with the new strategy.
set -euo pipefail
source_dir=$1
build_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$source_dir/examples/plugin-template" -B "$work/plugin" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} > "$work/configure.log"
cmake --build "$work/plugin" > "$work/build.log"
test -f "$work/plugin/exogym_strategy_signum.so"
"$work/prefix/bin/exogym-run" --plugin-path "$work/plugin" --list-plugins > "$work/list.txt"
grep -q "strategy signum" "$work/list.txt"
"$work/prefix/bin/exogym-run" --quiet --plugin-path "$work/plugin" \
  --set "output.dir=$work/runs" --set train.max_steps=60 \
  "$source_dir/examples/plugin-template/signum.json" | tee "$work/out.txt"
python3 - "$work/runs/signum/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
loss = s["final"]["global_loss"]
print("signum global loss", loss)
assert loss < 1.0, loss
PY
# The installed exogym-generate finds its libraries.
"$work/prefix/bin/exogym-generate" --help | grep -q "Usage: exogym-generate"
