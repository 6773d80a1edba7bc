#!/usr/bin/env python3
"""Export three small, randomly initialised models to ONNX with reference outputs.

No training: weights come from torch.manual_seed, so the files are reproducible.

  small_cnn.onnx          (batch, 1, 28, 28) -> (batch, 10), opset 13, no constant
                          folding (BatchNormalization nodes stay in the graph)
  small_cnn_input.npy     float32 (8, 1, 28, 28)
  small_cnn_output.npy    PyTorch's output, float32 (8, 10)

  small_transformer.onnx  (batch, 16, 64) -> (batch, 16, 64), one hand-written
                          pre-LayerNorm encoder block, opset 17
  small_transformer_input.npy   float32 (4, 16, 64)
  small_transformer_output.npy  PyTorch's output, float32 (4, 16, 64)

  torch_encoder.onnx      (batch, seq) int64 token ids -> (batch, 10): token
                          and position embeddings, torch's own
                          nn.TransformerEncoder (two post-LayerNorm layers,
                          GELU) under a padding mask made from the ids (id 0),
                          mean pooling over the unpadded tokens, a Linear head;
                          opset 14, batch and seq dynamic: the exporter's
                          Shape / Gather / Concat / Reshape chains, Where,
                          Expand, Equal, Not, Range
  torch_encoder_input.npy   int64 (6, 12), rows padded to 12, 9, 5, 12, 1, 7
  torch_encoder_output.npy  PyTorch's output, float32 (6, 10)

For each model the script runs onnx.checker.check_model and prints the op_types.

Usage: /usr/bin/python3 tools/make_fixtures.py [--out DIR] [--only NAME]

--only NAME writes that model's files alone (small_cnn, small_transformer or
torch_encoder), leaving the others as they are.
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


class TorchEncoder(nn.Module):
    """Token ids to ten logits through torch's nn.TransformerEncoder."""

    def __init__(self, vocab=100, d=64, heads=4, ff=128, layers=2, classes=10):
        super().__init__()
        self.tok = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = nn.Embedding(32, d)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0,
                                           activation="gelu",
                                           batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers,
                                         enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.tok(ids) + self.pos(pos)
        pad = ids == 0
        y = self.enc(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        return self.head((y * keep).sum(1) / keep.sum(1).clamp(min=1.0))


def randomise_ln(ln, gen):
    with torch.no_grad():
        ln.weight.copy_(torch.rand(ln.normalized_shape, generator=gen) + 0.5)
        ln.bias.copy_(torch.randn(ln.normalized_shape, generator=gen) * 0.1)


def export(model, x, path, opset, constant_folding, training, seq=False):
    model.eval()
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, x, path, opset_version=opset,
                      do_constant_folding=constant_folding,
                      training=training,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch", 1: "seq"} if seq
                                    else {0: "batch"},
                                    "output": {0: "batch"}})
    base = path[:-len(".onnx")]
    np.save(base + "_input.npy", np.ascontiguousarray(x.numpy()))
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
    ap.add_argument("--only", choices=["small_cnn", "small_transformer",
                                       "torch_encoder"])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)

    def wanted(name):
        return args.only in (None, name)

    # Small CNN, fixture batch 8.
    torch.manual_seed(1)
    cnn = SmallCNN()
    gen = torch.Generator().manual_seed(11)
    randomise_bn(cnn.bn1, gen)
    randomise_bn(cnn.bn2, gen)
    x = torch.rand(8, 1, 28, 28, generator=gen)
    if wanted("small_cnn"):
        export(cnn, x, os.path.join(args.out, "small_cnn.onnx"), 13, False,
               # PRESERVE (the model is in eval mode) rather than EVAL: EVAL
               # runs torch's eval peephole, which folds BatchNorm into Conv
               # even with do_constant_folding=False.
               torch.onnx.TrainingMode.PRESERVE)

    # Small transformer block, fixture batch 4.
    torch.manual_seed(2)
    blk = EncoderBlock()
    gen = torch.Generator().manual_seed(22)
    randomise_ln(blk.ln1, gen)
    randomise_ln(blk.ln2, gen)
    x = torch.randn(4, 16, 64, generator=gen)
    if wanted("small_transformer"):
        export(blk, x, os.path.join(args.out, "small_transformer.onnx"), 17,
               True, torch.onnx.TrainingMode.EVAL)

    # torch's own encoder over padded token ids, fixture batch 6: the
    # layers are deep copies of one, so each gets weights of its own (the
    # exporter would otherwise share one set, and a bug that mixes layers
    # up would not show).
    torch.manual_seed(3)
    enc = TorchEncoder()
    gen = torch.Generator().manual_seed(33)
    with torch.no_grad():
        for p in enc.enc.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    ids = torch.randint(1, 100, (6, 12), generator=gen)
    for row, length in enumerate([12, 9, 5, 12, 1, 7]):
        ids[row, length:] = 0
    if wanted("torch_encoder"):
        export(enc, ids, os.path.join(args.out, "torch_encoder.onnx"), 14,
               True, torch.onnx.TrainingMode.EVAL, seq=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
