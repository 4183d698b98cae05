#!/usr/bin/env python3
"""Reads a model.pt the way Python's torch.load does, without needing torch.

torch.load unpickles data.pkl from the zip archive, resolving storages through
persistent ids and rebuilding tensors with torch._utils._rebuild_tensor_v2.
This reader allows exactly the globals torch.load(weights_only=True) allows
for a {name: tensor} dict, so a file it reads is one torch.load reads, and it
checks every tensor's storage against its shape and dtype.

usage: torch_load_check.py model.pt NAME:D0xD1... [NAME:SHAPE ...]
"""
import collections
import pickle
import struct
import sys
import zipfile

DTYPES = {"FloatStorage": ("f", 4), "DoubleStorage": ("d", 8), "LongStorage": ("q", 8),
          "IntStorage": ("i", 4), "HalfStorage": ("e", 2), "BoolStorage": ("?", 1)}


class StorageType:
    def __init__(self, name):
        self.name = name


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)

    def values(self):
        fmt, width = DTYPES[self.storage["type"].name]
        data = self.storage["bytes"]
        n = 1
        for d in self.size:
            n *= d
        start = self.offset * width
        return struct.unpack("<%d%s" % (n, fmt), data[start:start + n * width])


def load(path):
    archive = zipfile.ZipFile(path)
    names = archive.namelist()
    pkl = [n for n in names if n.endswith("/data.pkl")]
    assert len(pkl) == 1, names
    prefix = pkl[0][: -len("data.pkl")]

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
                return lambda storage, offset, size, stride, requires_grad, hooks, *rest: Tensor(storage, offset, size, stride)
            if (module, name) == ("torch.jit._pickle", "restore_type_tag"):
                return lambda value, tag: value
            if (module, name) == ("collections", "OrderedDict"):
                return collections.OrderedDict
            if module == "torch" and name in DTYPES:
                return StorageType(name)
            raise pickle.UnpicklingError("torch.load(weights_only=True) would refuse %s.%s" % (module, name))

        def persistent_load(self, pid):
            kind, storage_type, key, location, numel = pid
            assert kind == "storage" and location == "cpu", pid
            data = archive.read(prefix + "data/" + key)
            assert len(data) == numel * DTYPES[storage_type.name][1], (key, len(data), numel)
            return {"type": storage_type, "bytes": data}

    return Unpickler(archive.open(pkl[0])).load()


def main():
    state = load(sys.argv[1])
    assert isinstance(state, dict), type(state)
    expected = {}
    for spec in sys.argv[2:]:
        name, shape = spec.split(":")
        expected[name] = tuple(int(d) for d in shape.split("x")) if shape else ()
    for name, shape in expected.items():
        assert name in state, "missing %s; have %s" % (name, sorted(state))
        t = state[name]
        assert t.size == shape, (name, t.size, shape)
        values = t.values()
        assert all(v == v and abs(v) < 1e6 for v in values), name  # finite, sane
    print("ok: %d tensors, torch.load-compatible" % len(state))


if __name__ == "__main__":
    main()
