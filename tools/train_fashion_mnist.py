#!/usr/bin/env python3
"""Train the seed experiment's Fashion-MNIST perceptron and export it to ONNX.

Model: 784 -> 512 ReLU -> 512 ReLU -> 10 (nn.Linear layers, float32).
Inputs are the 28x28 uint8 images scaled to [0, 1] and flattened to 784.

Reads the Fashion-MNIST IDX .gz files directly (gzip + struct + numpy).
Training is deterministic: fixed seeds, deterministic algorithms, 2 threads,
a seeded generator for shuffling.  Running it twice gives the same weights,
the same accuracy and byte-identical fixtures.

Outputs (default tests/fixtures/):
  fashion_mlp.onnx          opset 13, input "input" (batch, 784), output "logits" (batch, 10)
  fashion_mlp_input.npy     first 256 test images, float32 (256, 784)
  fashion_mlp_logits.npy    PyTorch's logits for them, float32 (256, 10)
  fashion_mlp_labels.npy    their labels, int64 (256,)

Usage: /usr/bin/python3 tools/train_fashion_mnist.py [--data DIR] [--out DIR] [--epochs N]
"""

import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "tests", "fixtures")
N_FIXTURE = 256


def read_idx(path):
    """Read an IDX file (optionally gzip-compressed) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0:
        raise ValueError(f"{path}: bad IDX magic")
    dtypes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4",
              0x0D: ">f4", 0x0E: ">f8"}
    if dtype_code not in dtypes:
        raise ValueError(f"{path}: unknown IDX type 0x{dtype_code:02x}")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=dtypes[dtype_code], offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: size mismatch")
    return arr.reshape(dims).astype(arr.dtype.newbyteorder("="))


def load_split(data_dir, prefix):
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = (images.reshape(images.shape[0], -1).astype(np.float32) / np.float32(255.0))
    y = labels.astype(np.int64)
    return x, y


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 512)
        self.fc2 = nn.Linear(512, 512)
        self.fc3 = nn.Linear(512, 10)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


def evaluate(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            logits = model(x[i:i + batch])
            correct += int((logits.argmax(1) == y[i:i + batch]).sum())
    return correct / x.shape[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    torch.set_num_threads(2)
    torch.manual_seed(0)
    np.random.seed(0)
    torch.use_deterministic_algorithms(True)

    x_train, y_train = load_split(args.data, "train")
    x_test, y_test = load_split(args.data, "t10k")
    print(f"train {x_train.shape} test {x_test.shape}", flush=True)
    xt_train, yt_train = torch.from_numpy(x_train), torch.from_numpy(y_train)
    xt_test, yt_test = torch.from_numpy(x_test), torch.from_numpy(y_test)

    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(0)

    n = xt_train.shape[0]
    for epoch in range(1, args.epochs + 1):
        t0 = time.time()
        model.train()
        perm = torch.randperm(n, generator=gen)
        total_loss = 0.0
        for i in range(0, n, args.batch_size):
            idx = perm[i:i + args.batch_size]
            opt.zero_grad()
            loss = loss_fn(model(xt_train[idx]), yt_train[idx])
            loss.backward()
            opt.step()
            total_loss += float(loss) * idx.shape[0]
        acc = evaluate(model, xt_test, yt_test)
        print(f"epoch {epoch:2d}/{args.epochs}  loss {total_loss / n:.4f}  "
              f"test acc {acc * 100:.2f}%  ({time.time() - t0:.1f}s)", flush=True)

    acc = evaluate(model, xt_test, yt_test)
    print(f"final test accuracy: {acc * 100:.2f}%")

    os.makedirs(args.out, exist_ok=True)
    model.eval()
    onnx_path = os.path.join(args.out, "fashion_mlp.onnx")
    dummy = torch.zeros(1, 784, dtype=torch.float32)
    torch.onnx.export(model, dummy, onnx_path, opset_version=13,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})

    x_fix = np.ascontiguousarray(x_test[:N_FIXTURE], dtype=np.float32)
    y_fix = np.ascontiguousarray(y_test[:N_FIXTURE], dtype=np.int64)
    with torch.no_grad():
        logits = model(torch.from_numpy(x_fix)).numpy().astype(np.float32)
    np.save(os.path.join(args.out, "fashion_mlp_input.npy"), x_fix)
    np.save(os.path.join(args.out, "fashion_mlp_logits.npy"), logits)
    np.save(os.path.join(args.out, "fashion_mlp_labels.npy"), y_fix)
    fix_acc = float((logits.argmax(1) == y_fix).mean())
    print(f"wrote {onnx_path} ({os.path.getsize(onnx_path)} bytes); "
          f"fixture accuracy on first {N_FIXTURE}: {fix_acc * 100:.2f}%")
    if acc < 0.88:
        print("error: test accuracy below 88%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
