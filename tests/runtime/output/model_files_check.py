#!/usr/bin/env python3
"""Checks a run's model files with the real libraries a user has.

model.pt is loaded by PyTorch itself with torch.load(weights_only=True) (the
default since PyTorch 2.6) and must be a plain {name: tensor} dict.
model.safetensors is read with json and numpy (the safetensors package is not
in Debian 12) and must hold the same tensors, name for name and byte for
byte: the two files come from two independent writers, so agreeing bytes
check each against the other.

usage: model_files_check.py RUN_DIR COUNT NAME:SHAPE:DTYPE...
  COUNT: the number of tensors; each NAME:SHAPE:DTYPE (e.g.
  layers.0.weight:256x784:float32, bn.num_batches_tracked::int64) must be there.
"""
import json
import struct
import sys

import numpy as np
import torch

SAFETENSORS_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
                      "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = np.dtype(SAFETENSORS_DTYPES[entry["dtype"]]).newbyteorder("<")
        tensors[name] = np.frombuffer(body[begin:end], dtype=dtype).reshape(entry["shape"])
    return metadata, tensors


def main(run_dir, count, specs):
    model = torch.load(f"{run_dir}/model.pt", weights_only=True)
    if type(model) is not dict:
        fail(f"model.pt holds a {type(model).__name__}, not a plain dict")
    if len(model) != count:
        fail(f"model.pt has {len(model)} tensors, expected {count}")
    for name, tensor in model.items():
        if type(name) is not str or type(tensor) is not torch.Tensor:
            fail(f"model.pt: {name!r} is a {type(tensor).__name__}, not a tensor named by a string")
        if tensor.requires_grad or not torch.isfinite(tensor.double()).all():
            fail(f"model.pt: {name} requires grad or is not finite")
    for spec in specs:
        name, shape, dtype = spec.split(":")
        expected = tuple(int(d) for d in shape.split("x")) if shape else ()
        if name not in model:
            fail(f"model.pt has no {name}; it has {list(model)}")
        if tuple(model[name].shape) != expected or str(model[name].dtype) != f"torch.{dtype}":
            fail(f"model.pt: {name} is {tuple(model[name].shape)} {model[name].dtype}, expected {expected} {dtype}")

    metadata, arrays = read_safetensors(f"{run_dir}/model.safetensors")
    if metadata != {"format": "pt"}:
        fail(f"model.safetensors: metadata {metadata}")
    if sorted(arrays) != sorted(model):  # a safetensors header is a JSON object: unordered
        fail(f"model.safetensors holds {sorted(arrays)}, model.pt {sorted(model)}")
    for name, array in arrays.items():
        tensor = model[name].numpy()
        if array.dtype != tensor.dtype or array.shape != tensor.shape or array.tobytes() != tensor.tobytes():
            fail(f"{name}: model.safetensors has {array.dtype} {array.shape}, model.pt {tensor.dtype} "
                 f"{tensor.shape}, or their bytes differ")
    print(f"{run_dir}: {len(model)} tensors, the same in model.pt (torch {torch.__version__}, weights_only) "
          f"and model.safetensors")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
