#!/usr/bin/env bash
# Symbols resolve to what ExoGym was compiled against, whatever LibTorch
# exports (cmake/LinkOrder.cmake). exogym-run-poisoned is exogym-run with
# tests/interposition/poison.cpp linked where LibTorch sits in its load
# order; a run, a checkpoint prune and a two-process collective must still
# succeed. The canary first shows that the poison does bite an executable
# linked the usual way.
#   check.sh SOURCE_DIR BUILD_DIR HAVE_GLOO
set -euo pipefail
source_dir=$1
build_dir=$2
have_gloo=$3
bin=$build_dir/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

expect_poisoned() {
  local status=0
  "$bin/exogym_interposition_canary" "$1" 2>"$work/canary.txt" || status=$?
  if [ "$status" -ne 86 ]; then
    echo "FAIL: the canary's $1 call should have reached the poison (status 86), got $status:"
    cat "$work/canary.txt"
    exit 1
  fi
}
expect_poisoned filesystem
[ "$have_gloo" = 1 ] && expect_poisoned gloo

# The poison really sits in the executable's load order, after libstdc++.
needed=$(readelf -d "$bin/exogym-run-poisoned" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case "$needed" in
  libstdc++.so.6*libexogym_test_poison.so*libexogym_runtime.so*) ;;
  *) echo "FAIL: unexpected load order of exogym-run-poisoned: $needed"; exit 1 ;;
esac

run() {
  "$bin/exogym-run-poisoned" --quiet "$source_dir/examples/mnist-ddp.json" --set "output.dir=$work" \
    --set train.max_steps=4 --set eval.size=100 --set nodes=2 --set checkpoint.interval=1 --set checkpoint.keep=1 \
    --set "name=$1" "${@:2}" >"$work/$1.txt" 2>&1 || { echo "FAIL: $1 ended with status $?:"; cat "$work/$1.txt"; exit 1; }
  # Pruning kept only the newest checkpoint.
  local left
  left=$(ls "$work/$1/checkpoints")
  [ "$left" = step-4 ] || { echo "FAIL: $1 left checkpoints $left, expected step-4 alone"; exit 1; }
}
run one-process
if [ "$have_gloo" = 1 ]; then
  run two-processes --nproc 2 --timeout 60
fi
echo "interposition: every call reached the library it was compiled against"
