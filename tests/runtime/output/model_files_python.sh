#!/usr/bin/env bash
# model.pt and model.safetensors from real runs, read by the real PyTorch
# (torch.load with weights_only=True) and numpy: tests/runtime/output/model_files_check.py.
# An MLP (float tensors) and a CNN (BatchNorm's int64 num_batches_tracked).
set -euo pipefail
source_dir=$1
build_dir=$2
python=("$source_dir/tests/support/python_with.sh" numpy,torch)
# Skip (77) before running anything when PyTorch is not there.
"${python[@]}" -c "" || exit
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {
  "$build_dir/bin/exogym-run" --quiet "$source_dir/examples/$1.json" --set "output.dir=$work" \
    --set train.max_steps=2 --set eval.size=100 "${@:2}" > "$work/log.txt"
}
run mnist-ddp
"${python[@]}" "$source_dir/tests/runtime/output/model_files_check.py" "$work/mnist-ddp" 4 \
  layers.0.weight:256x784:float32 layers.0.bias:256:float32 layers.1.weight:10x256:float32 layers.1.bias:10:float32
run mnist-cnn --only ddp
"${python[@]}" "$source_dir/tests/runtime/output/model_files_check.py" "$work/mnist-cnn/ddp" 32 \
  blocks.0.conv1.weight:64x1x3x3:float32 blocks.0.bn1.running_var:64:float32 \
  blocks.0.bn1.num_batches_tracked::int64 fc2.bias:10:float32
