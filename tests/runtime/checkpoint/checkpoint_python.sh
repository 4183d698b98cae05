#!/usr/bin/env bash
# A checkpoint from a real run reads in plain Python (json and struct, as a
# safetensors reader does): index.json, and every node file's header, byte
# ranges, shapes and metadata.
set -euo pipefail
source_dir=$1
build_dir=$2
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build_dir/bin/exogym-run" --quiet "$source_dir/examples/mnist-ddp.json" --set "output.dir=$work" \
  --set train.max_steps=3 --set eval.size=100 --set nodes=2 --set checkpoint.interval=2 > "$work/log.txt"
python3 - "$work/mnist-ddp/checkpoints" <<'PY'
import json, os, struct, sys
folder = sys.argv[1]
assert sorted(os.listdir(folder)) == ["step-2", "step-3"], os.listdir(folder)
index = json.load(open(os.path.join(folder, "step-3", "index.json")))
assert index["format"] == "exogym-checkpoint-1" and index["step"] == 3 and index["nodes"] == 2, index
sizes = {"F32": 4, "F64": 8, "I64": 8, "U8": 1}
for node in range(2):
    data = open(os.path.join(folder, "step-3", "node-%d.safetensors" % node), "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    meta = header.pop("__metadata__")
    assert meta["node"] == str(node) and meta["step"] == "3", meta
    assert json.loads(meta["meter"])["sequence"] == 3, meta["meter"]  # one all-reduce per step
    body = len(data) - 8 - length
    end = 0
    for name, t in header.items():
        count = 1
        for d in t["shape"]:
            count *= d
        begin, stop = t["data_offsets"]
        assert stop - begin == count * sizes[t["dtype"]] and stop <= body, (name, t)
        end = max(end, stop)
    assert end == body, (end, body)
    assert header["model.layers.0.weight"]["shape"] == [256, 784], header["model.layers.0.weight"]
    assert header["strategy.optimizer.0.step"] == {"dtype": "I64", "shape": [], "data_offsets":
                                                   header["strategy.optimizer.0.step"]["data_offsets"]}
    assert header["rng.model"]["dtype"] == "U8"
print("checkpoint reads in Python")
PY
