#!/usr/bin/env bash
# model.pt from a real run is a plain {name: tensor} dict for Python's torch.load.
set -euo pipefail
source_dir=$1
build_dir=$2
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build_dir/bin/exogym-run" --quiet "$source_dir/examples/mnist-ddp.json" --set "output.dir=$work" \
  --set train.max_steps=3 --set eval.size=100 > "$work/log.txt"
python3 "$source_dir/tests/torch_load_check.py" "$work/mnist-ddp/model.pt" \
  layers.0.weight:256x784 layers.0.bias:256 layers.1.weight:10x256 layers.1.bias:10
