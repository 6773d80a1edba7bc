#!/usr/bin/env python3
"""Export two small, randomly initialised models to ONNX with reference outputs.

No training: weights come from torch.manual_seed, so the files are reproducible.

  small_cnn.onnx          (batch, 1, 28, 28) -> (batch, 10), opset 13, no constant
                          folding (BatchNormalization nodes stay in the graph)
  small_cnn_input.npy     float32 (8, 1, 28, 28)
  small_cnn_output.npy    PyTorch's output, float32 (8, 10)

  small_transformer.onnx  (batch, 16, 64) -> (batch, 16, 64), one hand-written
                          pre-LayerNorm encoder block, opset 17
  small_transformer_input.npy   float32 (4, 16, 64)
  small_transformer_output.npy  PyTorch's output, float32 (4, 16, 64)

For each model the script runs onnx.checker.check_model and prints the op_types.

Usage: /usr/bin/python3 tools/make_fixtures.py [--out DIR]
"""

import argparse
import math
import os
import sys
from collections import Counter

import numpy as np
import onnx
import torch
import torch.nn as nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "tests", "fixtures")


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=1, padding=1, groups=2)
        self.bn2 = nn.BatchNorm2d(16)
        self.relu2 = nn.ReLU()
        # count_include_pad=False: identical maths (no padding), but torch 1.13
        # otherwise emits a zero-width Pad node in front of AveragePool.
        self.pool2 = nn.AvgPool2d(2, count_include_pad=False)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = self.pool1(self.relu1(self.bn1(self.conv1(x))))
        x = self.pool2(self.relu2(self.bn2(self.conv2(x))))
        return self.fc(self.flatten(x))


def randomise_bn(bn, gen):
    """Give a BatchNorm layer non-trivial affine parameters and running stats."""
    c = bn.num_features
    with torch.no_grad():
        bn.weight.copy_(torch.rand(c, generator=gen) + 0.5)            # [0.5, 1.5)
        bn.bias.copy_(torch.randn(c, generator=gen) * 0.2)
        bn.running_mean.copy_(torch.randn(c, generator=gen) * 0.5)
        bn.running_var.copy_(torch.rand(c, generator=gen) * 1.5 + 0.5)  # [0.5, 2.0)


class EncoderBlock(nn.Module):
    """Pre-LN transformer encoder block written out by hand.

    The sequence length and head layout are Python constants, so the reshapes
    export as Reshape with constant shapes (-1 for the dynamic batch axis).
    """

    def __init__(self, seq=16, d=64, heads=4, ff=256):
        super().__init__()
        self.seq, self.d, self.heads, self.dh = seq, d, heads, d // heads
        self.ln1 = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, ff)
        self.gelu = nn.GELU()  # exact (erf) form
        self.ff2 = nn.Linear(ff, d)

    def forward(self, x):
        s, h, dh = self.seq, self.heads, self.dh
        y = self.ln1(x)
        q = self.q(y).reshape(-1, s, h, dh).permute(0, 2, 1, 3)   # (b, h, s, dh)
        k = self.k(y).reshape(-1, s, h, dh).permute(0, 2, 3, 1)   # (b, h, dh, s) = K^T
        v = self.v(y).reshape(-1, s, h, dh).permute(0, 2, 1, 3)   # (b, h, s, dh)
        scores = torch.matmul(q, k) / math.sqrt(dh)
        attn = torch.softmax(scores, dim=-1)
        o = torch.matmul(attn, v).permute(0, 2, 1, 3).reshape(-1, s, self.d)
        x = x + self.proj(o)
        y = self.ln2(x)
        return x + self.ff2(self.gelu(self.ff1(y)))


def randomise_ln(ln, gen):
    with torch.no_grad():
        ln.weight.copy_(torch.rand(ln.normalized_shape, generator=gen) + 0.5)
        ln.bias.copy_(torch.randn(ln.normalized_shape, generator=gen) * 0.1)


def export(model, x, path, opset, constant_folding, training):
    model.eval()
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, x, path, opset_version=opset,
                      do_constant_folding=constant_folding,
                      training=training,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    base = path[:-len(".onnx")]
    np.save(base + "_input.npy", np.ascontiguousarray(x.numpy(), dtype=np.float32))
    np.save(base + "_output.npy", np.ascontiguousarray(y.numpy(), dtype=np.float32))

    # torch 1.13 sometimes names static output dims symbolically (e.g. the
    # transformer's seq axis becomes "Addoutput_dim_1"); pin every non-batch
    # output dim to the value PyTorch produced so only "batch" stays dynamic.
    m = onnx.load(path)
    dims = m.graph.output[0].type.tensor_type.shape.dim
    for i in range(1, len(dims)):
        if dims[i].dim_value != y.shape[i]:
            dims[i].dim_value = y.shape[i]
            onnx.save(m, path)
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    ops = [n.op_type for n in m.graph.node]
    counts = Counter(ops)
    uniq = list(dict.fromkeys(ops))
    print(f"{os.path.basename(path)}: opset {m.opset_import[0].version}, "
          f"{len(ops)} nodes, {os.path.getsize(path)} bytes, check_model OK")
    print("  op_types: " + ", ".join(f"{o} x{counts[o]}" for o in uniq))
    print("  sequence: " + " ".join(ops))
    print(f"  input {tuple(x.shape)} -> output {tuple(y.shape)}")
    return uniq


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)

    # Small CNN, fixture batch 8.
    torch.manual_seed(1)
    cnn = SmallCNN()
    gen = torch.Generator().manual_seed(11)
    randomise_bn(cnn.bn1, gen)
    randomise_bn(cnn.bn2, gen)
    x = torch.rand(8, 1, 28, 28, generator=gen)
    export(cnn, x, os.path.join(args.out, "small_cnn.onnx"), 13, False,
           # PRESERVE (the model is in eval mode) rather than EVAL: EVAL runs
           # torch's eval peephole, which folds BatchNorm into Conv even with
           # do_constant_folding=False.
           torch.onnx.TrainingMode.PRESERVE)

    # Small transformer block, fixture batch 4.
    torch.manual_seed(2)
    blk = EncoderBlock()
    gen = torch.Generator().manual_seed(22)
    randomise_ln(blk.ln1, gen)
    randomise_ln(blk.ln2, gen)
    x = torch.randn(4, 16, 64, generator=gen)
    export(blk, x, os.path.join(args.out, "small_transformer.onnx"), 17, True,
           torch.onnx.TrainingMode.EVAL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
