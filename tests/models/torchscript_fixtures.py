#!/usr/bin/env python3
"""The files the TorchScript and tensor-file tests train on, written by the
real PyTorch and NumPy a user has (Debian's python3-torch), and the check
that a trained model.pt loads back into the module it came from.

    torchscript_fixtures.py export DIR [INIT_PT]
        DIR/mlp.pt          an MLP 32-32-4 (layers.0, layers.1: the built-in
                            mlp's names), with INIT_PT's weights when given
        DIR/cnn.pt          a small CNN with BatchNorm (buffers)
        DIR/traced.pt       the MLP through torch.jit.trace
        DIR/returned.pt     forward(input, target) returns its loss
        DIR/pair.pt         forward returns a tuple
        DIR/empty.pt        no parameters
        DIR/resnet18.pt     torchvision's ResNet-18, 10 classes (if torchvision is there)
        DIR/too_new.pt      mlp.pt with its archive's format version set to 99
        DIR/data/{train,test}/{input,target}.npy    512 and 256 examples, 32 features, 4 classes
        DIR/data.safetensors                       the same 768 examples in one file
        DIR/cifar/{input,target}.npy               64 random 3x32x32 images
        DIR/bad/...                                files that are not what they claim
    torchscript_fixtures.py check MODEL_PT
        loads ExoGym's model.pt into the MLP (strict) and prints its accuracy
        on DIR/data/test, where DIR is MODEL_PT's fixtures (--fixtures DIR)."""
import json
import pathlib
import struct
import sys
import zipfile

import numpy
import torch


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(32, 32), torch.nn.Linear(32, 4)])

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        x = input.reshape(input.shape[0], 32)
        x = torch.relu(self.layers[0](x))
        return self.layers[1](x)


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.head = torch.nn.Linear(4 * 2 * 4, 4)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv(input.reshape(input.shape[0], 1, 4, 8))))
        return self.head(torch.nn.functional.max_pool2d(x, 2).flatten(1))


class Returned(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = MLP()

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.net(input), target)


class Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = MLP()

    def forward(self, input: torch.Tensor):
        y = self.net(input)
        return y, y


class Empty(torch.nn.Module):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return input * 2


def blobs(count, seed):
    """Gaussian blobs around 4 centroids: a problem an MLP learns quickly."""
    rng = numpy.random.default_rng(seed)
    centroids = numpy.random.default_rng(0).normal(size=(4, 32)).astype(numpy.float32)
    target = rng.integers(0, 4, size=count).astype(numpy.int64)
    input = (centroids[target] + 0.5 * rng.normal(size=(count, 32))).astype(numpy.float32)
    return input, target


def save_safetensors(path, tensors):
    """The safetensors format, as the safetensors package writes it."""
    names = {numpy.dtype(numpy.float32): "F32", numpy.dtype(numpy.int64): "I64"}
    header, offset, blobs_ = {}, 0, []
    for name, array in tensors.items():
        data = numpy.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": names[array.dtype], "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs_.append(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs_))


def export(out, init_pt=None):
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    mlp = MLP()
    if init_pt:
        mlp.load_state_dict(torch.load(init_pt, weights_only=True))
    torch.jit.script(mlp).save(str(out / "mlp.pt"))
    torch.jit.trace(mlp, torch.zeros(2, 32)).save(str(out / "traced.pt"))
    torch.jit.script(CNN()).save(str(out / "cnn.pt"))
    torch.jit.script(Returned()).save(str(out / "returned.pt"))
    torch.jit.script(Pair()).save(str(out / "pair.pt"))
    torch.jit.script(Empty()).save(str(out / "empty.pt"))
    try:
        import torchvision
        torch.jit.script(torchvision.models.resnet18(num_classes=10)).save(str(out / "resnet18.pt"))
    except ImportError:
        pass
    # The same archive, claiming a file format no LibTorch reads yet.
    with zipfile.ZipFile(out / "mlp.pt") as source, zipfile.ZipFile(out / "too_new.pt", "w") as target:
        for item in source.infolist():
            data = source.read(item)
            target.writestr(item, b"99\n" if item.filename.endswith("/version") else data)
    for split, count, seed in (("train", 512, 1), ("test", 256, 2)):
        folder = out / "data" / split
        folder.mkdir(parents=True, exist_ok=True)
        input, target = blobs(count, seed)
        numpy.save(folder / "input.npy", input)
        numpy.save(folder / "target.npy", target)
    train, test = blobs(512, 1), blobs(256, 2)
    save_safetensors(out / "data.safetensors", {"input": numpy.concatenate([train[0], test[0]]),
                                                "target": numpy.concatenate([train[1], test[1]])})
    cifar = out / "cifar"
    cifar.mkdir(exist_ok=True)
    rng = numpy.random.default_rng(3)
    numpy.save(cifar / "input.npy", rng.normal(size=(64, 3, 32, 32)).astype(numpy.float32))
    numpy.save(cifar / "target.npy", rng.integers(0, 10, size=64).astype(numpy.int64))
    bad = out / "bad"
    for name in ("nan", "uint16", "fortran", "lengths", "notnpy"):
        (bad / name).mkdir(parents=True, exist_ok=True)
    input, target = blobs(16, 4)
    poisoned = input.copy()
    poisoned[3, 5] = numpy.nan
    numpy.save(bad / "nan" / "input.npy", poisoned)
    numpy.save(bad / "nan" / "target.npy", target)
    numpy.save(bad / "uint16" / "input.npy", input)
    numpy.save(bad / "uint16" / "target.npy", target.astype(numpy.uint16))
    numpy.save(bad / "fortran" / "input.npy", numpy.asfortranarray(input))
    numpy.save(bad / "fortran" / "target.npy", target)
    numpy.save(bad / "lengths" / "input.npy", input)
    numpy.save(bad / "lengths" / "target.npy", target[:10])
    (bad / "notnpy" / "input.npy").write_text("not an array\n")
    numpy.save(bad / "notnpy" / "target.npy", target)
    (bad / "model.pt").write_text("not TorchScript\n")


def check(model_pt, fixtures):
    mlp = MLP()
    mlp.load_state_dict(torch.load(model_pt, weights_only=True))  # strict: every name, no other
    mlp.eval()
    input = torch.from_numpy(numpy.load(fixtures / "data" / "test" / "input.npy"))
    target = torch.from_numpy(numpy.load(fixtures / "data" / "test" / "target.npy"))
    with torch.no_grad():
        accuracy = (mlp(input).argmax(1) == target).float().mean().item()
    print(f"accuracy {accuracy:.4f}")


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(pathlib.Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        check(sys.argv[2], pathlib.Path(sys.argv[3]))
