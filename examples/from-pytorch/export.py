#!/usr/bin/env python3
"""Exports a small CNN as TorchScript and the MNIST this repository carries
as .npy files, for examples/from-pytorch.json (docs/from-pytorch.md).

    python3 examples/from-pytorch/export.py      # writes cnn.pt and data/ here
    build/bin/exogym-run examples/from-pytorch.json
    python3 examples/from-pytorch/export.py --check examples/runs/from-pytorch/model.pt

The model is plain PyTorch; ExoGym trains a copy of it on every node and
writes model.pt, a {name: tensor} dict that loads back into SmallCNN."""
import argparse
import gzip
import pathlib

import numpy
import torch

HERE = pathlib.Path(__file__).resolve().parent
MNIST = HERE.parent / "data" / "mnist"


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.head = torch.nn.Linear(32 * 7 * 7, 10)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(input).flatten(1))


def read_idx(name):
    """An IDX file of MNIST's as a numpy array (big-endian sizes, then bytes)."""
    data = gzip.open(MNIST / name).read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return numpy.frombuffer(data, numpy.uint8, offset=4 + 4 * dims).reshape(shape)


def export(out):
    torch.manual_seed(0)
    torch.jit.script(SmallCNN()).save(str(out / "cnn.pt"))
    for split, prefix in (("train", "train"), ("test", "t10k")):
        folder = out / "data" / split
        folder.mkdir(parents=True, exist_ok=True)
        images = read_idx(prefix + "-images-idx3-ubyte.gz").astype(numpy.float32) / 255.0
        images = ((images - 0.1307) / 0.3081)[:, None, :, :]  # [N, 1, 28, 28], MNIST's usual normalisation
        numpy.save(folder / "input.npy", images)
        numpy.save(folder / "target.npy", read_idx(prefix + "-labels-idx1-ubyte.gz").astype(numpy.int64))
    print(f"wrote {out / 'cnn.pt'} and {out / 'data'}")


def check(model_pt):
    """Loads ExoGym's model.pt into SmallCNN and measures it on the test set."""
    model = SmallCNN()
    model.load_state_dict(torch.load(model_pt, weights_only=True))
    model.eval()
    images = torch.from_numpy(numpy.load(HERE / "data" / "test" / "input.npy"))
    labels = torch.from_numpy(numpy.load(HERE / "data" / "test" / "target.npy"))
    with torch.no_grad():
        accuracy = (model(images).argmax(1) == labels).float().mean().item()
    print(f"{model_pt}: test accuracy {accuracy:.4f} over {len(labels)} images")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", metavar="MODEL_PT", help="load a trained model.pt back and measure it")
    args = parser.parse_args()
    check(args.check) if args.check else export(HERE)
