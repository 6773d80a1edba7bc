#!/usr/bin/python3
"""A BERT-sized encoder exported by PyTorch from a seed, for measuring.

torch's own nn.TransformerEncoder (post-LayerNorm, GELU) over token and
position embeddings, a padding mask made from the ids (id 0), mean pooling
over the unpadded tokens; exported by torch.onnx (opset 17, batch and
sequence dynamic).  Each layer's weights are its own (nn.TransformerEncoder
deep-copies one layer, and the exporter would share their equal weights).
Never committed: BERT-base's size is 436 MB.

    tools/make-transformer.py OUTDIR [--layers 12] [--width 768]
                              [--batch 8] [--seq 128] [--quantize]

writes OUTDIR/encoder.onnx, OUTDIR/ids.npy (int64 (batch, seq), each row
padded from a random length on) and OUTDIR/output.npy (PyTorch's answer);
with --quantize also OUTDIR/encoder_q.onnx, every MatMul by a constant 2-D
weight in ONNX Runtime's dynamic-quantization form (DynamicQuantizeLinear,
MatMulInteger with the weight as int8, symmetric per tensor, a Cast to
float and a Mul by the two scales), written here as quantize_dynamic
writes it.  Then, for example:

    shardnet run OUTDIR/encoder.onnx -d cpu:0 -i ids=OUTDIR/ids.npy -r 5
    node tools/ort_run.js OUTDIR/encoder_q.onnx OUT ids=OUTDIR/ids.npy

Needs Debian's python3-torch and python3-onnx.
"""
import argparse
import os

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import TensorProto, helper, numpy_helper


class Encoder(nn.Module):
    def __init__(self, vocab, width, heads, layers):
        super().__init__()
        self.tok = nn.Embedding(vocab, width, padding_idx=0)
        self.pos = nn.Embedding(512, width)
        self.ln = nn.LayerNorm(width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width,
                                           dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers,
                                         enable_nested_tensor=False)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(pos))
        pad = ids == 0
        y = self.enc(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        return (y * keep).sum(1) / keep.sum(1).clamp(min=1.0)


def quantize_dynamic(src, dst):
    """src's MatMuls by constant 2-D float weights in the dynamic form."""
    m = onnx.load(src)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    nodes, count = [], 0
    for n in g.node:
        w = inits.get(n.input[1]) if n.op_type == "MatMul" else None
        if w is None or len(w.dims) != 2:
            nodes.append(n)
            continue
        wf = numpy_helper.to_array(w).astype(np.float32)
        scale = max(float(np.abs(wf).max()), 1e-30) / 127.0
        wq = np.clip(np.round(wf / scale), -127, 127).astype(np.int8)
        p = "%s_q%d" % (n.output[0], count)
        g.initializer.extend([
            numpy_helper.from_array(wq, p + "_w"),
            numpy_helper.from_array(np.array(scale, np.float32), p + "_ws"),
            numpy_helper.from_array(np.array(0, np.int8), p + "_wz")])
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [n.input[0]],
                             [p + "_x", p + "_xs", p + "_xz"]),
            helper.make_node("MatMulInteger",
                             [p + "_x", p + "_w", p + "_xz", p + "_wz"],
                             [p + "_i"]),
            helper.make_node("Cast", [p + "_i"], [p + "_f"],
                             to=TensorProto.FLOAT),
            helper.make_node("Mul", [p + "_xs", p + "_ws"], [p + "_s"]),
            helper.make_node("Mul", [p + "_f", p + "_s"], [n.output[0]])]
        count += 1
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    onnx.save(m, dst)
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--quantize", action="store_true")
    a = ap.parse_args()
    if a.width % 64 or a.seq > 512:
        ap.error("--width must be a multiple of 64, --seq 512 at most")
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(11)
    model = Encoder(30522, a.width, a.width // 64, a.layers).eval()
    with torch.no_grad():
        for p in model.enc.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    rng = np.random.default_rng(5)
    ids = rng.integers(1, 30522, size=(a.batch, a.seq)).astype(np.int64)
    for r in range(a.batch):
        ids[r, rng.integers(a.seq // 2, a.seq + 1):] = 0
    x = torch.from_numpy(ids)
    with torch.no_grad():
        y = model(x)
    path = os.path.join(a.out, "encoder.onnx")
    torch.onnx.export(model, (x,), path, opset_version=17,
                      input_names=["ids"], output_names=["emb"],
                      dynamic_axes={"ids": {0: "batch", 1: "seq"},
                                    "emb": {0: "batch"}})
    np.save(os.path.join(a.out, "ids.npy"), ids)
    np.save(os.path.join(a.out, "output.npy"), y.numpy())
    print("%s: %d bytes" % (path, os.path.getsize(path)))
    if a.quantize:
        q = os.path.join(a.out, "encoder_q.onnx")
        n = quantize_dynamic(path, q)
        print("%s: %d MatMuls quantized, %d bytes" % (q, n,
                                                      os.path.getsize(q)))


if __name__ == "__main__":
    main()
