#!/usr/bin/env bash
# A third party's view: install ExoGym, move the install elsewhere (an
# install must be relocatable: no absolute paths in its CMake package),
# build examples/plugin-template against it with find_package(ExoGym), and
# train with each of its strategies: one written from scratch, one composed
# with a built-in module (ExoGym::modules), one of exchanges between ring
# neighbours (peer to peer, 5 nodes: an odd ring), and with its per-node
# dataset.
set -euo pipefail
source_dir=$1
build_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A failure says where, with the logs of the step that failed.
trap 'status=$?; echo "FAIL: $0 line $LINENO exited with $status"; tail -n 40 "$work"/*.log 2>/dev/null' ERR
cmake --install "$build_dir" --prefix "$work/installed" > "$work/install.log"
mv "$work/installed" "$work/prefix"
# The package names no library by an absolute path (LibTorch comes through
# find_dependency(Torch)'s targets) and nothing of this machine's build.
if grep -nE "[\";]/[^\";]*\.so|$build_dir|$source_dir" "$work"/prefix/lib/cmake/ExoGym/*.cmake; then
  echo "FAIL: absolute paths in the installed CMake package"; exit 1
fi
# The libraries carry the plugin ABI version as their SOVERSION.
abi=$(sed -n 's/^#define EXOGYM_ABI_VERSION \([0-9]*\)$/\1/p' "$source_dir/sdk/plugin.h")
for lib in exogym_sdk exogym_modules; do
  objdump -p "$work/prefix/lib/lib$lib.so" > "$work/objdump.txt"
  grep -q "SONAME *lib$lib.so.$abi\$" "$work/objdump.txt" ||
    { echo "FAIL: lib$lib.so has no SONAME lib$lib.so.$abi"; exit 1; }
done
# The installed SDK is its contract: every header of sdk/ and nothing else
# (not sdk/internal/, the library's own details).
diff <(cd "$source_dir/sdk" && ls -- *.h) <(ls "$work/prefix/include/exogym/sdk") ||
  { echo "FAIL: the installed SDK headers are not exactly sdk/*.h"; exit 1; }
cmake -S "$source_dir/examples/plugin-template" -B "$work/plugin" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} > "$work/configure.log"
cmake --build "$work/plugin" > "$work/build.log"
# Only the shipped plugins are installed, not the test suite's, and listing
# them reports no error.
diff <(ls "$build_dir/lib/exogym/plugins") <(ls "$work/prefix/lib/exogym/plugins")
"$work/prefix/bin/exogym-run" --list-plugins > "$work/installed-list.txt" 2> "$work/list-errors.txt"
if [ -s "$work/list-errors.txt" ] || grep -Eq "faulty|wrong_|counting|probe" "$work/installed-list.txt"; then
  echo "FAIL: --list-plugins on the install:"; cat "$work/installed-list.txt" "$work/list-errors.txt"; exit 1
fi
# The moved install searches its own folder and no prefix configured at
# build time (a stale /usr/local install would shadow its plugins).
search=$(sed -n '/^plugin search path:$/,/^$/p' "$work/installed-list.txt" | sed '1d;/^$/d')
if [ "$search" != "  $work/prefix/lib/exogym/plugins" ]; then
  echo "FAIL: the moved install's plugin search path is not its own folder alone:"; echo "$search"; exit 1
fi
"$work/prefix/bin/exogym-run" --plugin-path "$work/plugin" --list-plugins > "$work/list.txt"

# Trains with `strategy` for 60 steps and checks the global loss is below 1.
train() {
  local strategy=$1
  test -f "$work/plugin/exogym_strategy_$strategy.so"
  grep -q "strategy $strategy" "$work/list.txt"
  "$work/prefix/bin/exogym-run" --quiet --plugin-path "$work/plugin" \
    --set "output.dir=$work/runs" --set train.max_steps=60 \
    "$source_dir/examples/plugin-template/$strategy.json" | tee "$work/out.txt"
  python3 - "$strategy" "$work/runs/$strategy/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[2]))
loss = s["final"]["global_loss"]
print(sys.argv[1], "global loss", loss)
assert loss < 1.0, loss
PY
}
train signum
train sparta_lookahead
train ring_gossip
# D-PSGD's bytes, in closed form: each node sends its parameters (MLP
# 784-128-10: 101,770 floats) to each of its two neighbours every step.
python3 - "$work/runs/ring_gossip/summary.json" <<'PY'
import json, sys
nodes = json.load(open(sys.argv[1]))["communication"]["per_node"]
assert len(nodes) == 5, nodes
for n in nodes:
    expected = 60 * 2 * 101770 * 4
    assert n["bytes_sent"] == n["group_bytes_sent"] == n["bytes_received"] == expected, n
print("ring_gossip: every node sent 2 x 60 exchanges of 407,080 bytes")
PY
# The per-node dataset: listed as such, one instance per node, each node's
# 60,000 rotated digits in data.csv, and it trains.
grep -q "dataset  rotated-mnist .*(one per node)" "$work/list.txt"
"$work/prefix/bin/exogym-run" --quiet --plugin-path "$work/plugin" \
  --set "output.dir=$work/runs" --set train.max_steps=60 \
  "$source_dir/examples/plugin-template/rotated_mnist.json" | tee "$work/out.txt"
python3 - "$work/runs/rotated_mnist" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1] + "/data.csv")))
assert [r["node"] for r in rows] == ["0", "1", "2", "3"], rows
assert all(r["examples"] == "60000" and r["label_1"] == "6742" for r in rows), rows
loss = json.load(open(sys.argv[1] + "/summary.json"))["final"]["global_loss"]
print("rotated-mnist global loss", loss)
assert loss < 2.0, loss
PY
# The installed exogym-generate and exogym-bench find their libraries.
# (Read whole before matching: under pipefail, `grep -q` leaving early would
# fail the writer with SIGPIPE.)
"$work/prefix/bin/exogym-generate" --help > "$work/generate-help.txt"
grep -q "Usage: exogym-generate" "$work/generate-help.txt"
"$work/prefix/bin/exogym-bench" --help > "$work/bench-help.txt"
grep -q "exogym-bench" "$work/bench-help.txt"
