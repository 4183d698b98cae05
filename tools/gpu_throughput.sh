#!/bin/bash
# nanoGPT DiLoCo throughput on one GPU: the runs of docs/performance.md#on-a-gpu.
#   tools/gpu_throughput.sh [BUILD_DIR]      (default build-torch/, a CUDA LibTorch's build)
# Prints one JSON line per run: tokens/s of the training loop (summary.json's
# timing.loop_s), its seconds, the last training loss and the final evaluation.
# OUT (default /tmp/exogym-gpu) keeps the manifests, logs and run folders; RUNS="small1 base8"
# runs only the runs named. The runs after the first nine compare per-node and stacked
# execution (docs/performance.md#stacked-execution-on-a-gpu): RUNS="$(tools/gpu_throughput.sh --stacked-runs)".
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-torch}
out=${OUT:-/tmp/exogym-gpu}
stacked_runs="small8-per-node small8-stacked small8-bf16-stacked small32-per-node small32-stacked small1-512 \
base8-per-node base8-stacked base8-bf16-per-node base8-bf16-stacked"
[ "${1:-}" = --stacked-runs ] && { echo "$stacked_runs"; exit 0; }
mkdir -p "$out"
# name size steps precision nodes [exogym-run arguments]
run() {
  local name=$1 size=$2 steps=$3 prec=$4 nodes=$5
  [[ -n ${RUNS:-} && " $RUNS " != *" $name "* ]] && return
  shift 5
  python3 - "$root" "$out" "$name" "$size" "$steps" "$prec" "$nodes" >"$out/$name.json" <<'PY'
import json, sys
root, out, name, size, steps, prec, nodes = sys.argv[1:]
text = {"dataset": "text-char", "path": f"{root}/examples/data/shakespeare/input.txt", "options": {"block_size": 128}}
print(json.dumps({"name": name, "seed": 7, "nodes": int(nodes), "device": "cuda", "precision": prec,
    "model": {"plugin": "nanogpt", "options": {"size": size, "block_size": 128}},
    "strategy": {"plugin": "diloco", "options": {"H": 10, "optimizer": {"name": "adamw", "lr": 3e-4, "weight_decay": 1e-4}}},
    "data": {"train": text, "val": dict(text, split="val")},
    "train": {"max_steps": int(steps), "batch_size": 16}, "eval": {"interval": 0, "size": 64},
    "output": {"dir": f"{out}/runs", "save_model": False}}))
PY
  rm -rf "$out/runs/$name"
  if ! timeout 300 "$build/bin/exogym-run" "$out/$name.json" --quiet "$@" >"$out/$name.log" 2>&1; then
    echo "{\"run\": \"$name\", \"failed\": \"$(tail -n 1 "$out/$name.log" | tr -d '"\\')\"}"
    return
  fi
  python3 - "$out/runs/$name/summary.json" "$name" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
def find(d, key):
    if isinstance(d, dict):
        if key in d: return d[key]
        for v in d.values():
            x = find(v, key)
            if x is not None: return x
t = find(s, "timing"); tokens = find(s, "tokens_trained")
print(json.dumps({"run": sys.argv[2], "tokens_per_s": round(tokens / t["loop_s"]), "loop_s": round(t["loop_s"], 3),
                  "last_train_loss": find(s, "last_train_loss"), "eval_loss": find(s, "global_loss")}), flush=True)
PY
}
run small8 small 60 fp32 8
EXOGYM_FUSED_ADAMW=0 run small8-libtorch-adamw small 60 fp32 8
run small8-parallelism1 small 60 fp32 8 --set parallelism=1
run small1 small 100 fp32 1
run base8 base 30 fp32 8
run base8-bf16 base 30 bf16 8
run small32 small 40 fp32 32
run base1 base 30 fp32 1
EXOGYM_FUSED_ADAMW=0 run base8-libtorch-adamw base 30 fp32 8
run small8-per-node small 60 fp32 8 --set execution=per_node
run small8-stacked small 60 fp32 8 --set execution=stacked
run small8-bf16-stacked small 60 bf16 8 --set execution=stacked
run small32-per-node small 40 fp32 32 --set execution=per_node
run small32-stacked small 40 fp32 32 --set execution=stacked
run small1-512 small 40 fp32 1 --set train.batch_size=512
run base8-per-node base 30 fp32 8 --set execution=per_node
run base8-stacked base 30 fp32 8 --set execution=stacked
run base8-bf16-per-node base 30 bf16 8 --set execution=per_node
run base8-bf16-stacked base 30 bf16 8 --set execution=stacked
