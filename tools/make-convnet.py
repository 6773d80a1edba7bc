#!/usr/bin/python3
"""A depthwise-separable conv net, written as ONNX for tools/bench-convnets.sh.

MobileNet-style: a 3x3 stride-2 stem, then blocks of a 3x3 depthwise
convolution (stride 1 or 2) and a 1x1 pointwise one, each followed by Relu,
with a residual Add where a block keeps its shape; global average pooling
and a 1x1 classifier.  Batch normalisation is already folded into the
weights, as in exported inference models.  Random weights (fixed seed).

    tools/make-convnet.py OUT.onnx [--size 256]
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# (output channels, depthwise stride) per block
BLOCKS = [(32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (256, 2),
          (256, 1), (256, 1), (512, 2), (512, 1)]


def build(size):
    rng = np.random.default_rng(15)
    nodes, inits = [], []

    def weight(name, shape, fan_in):
        w = rng.standard_normal(shape).astype(np.float32)
        inits.append(numpy_helper.from_array(w * np.sqrt(2.0 / fan_in), name))
        return name

    def conv(x, name, cin, cout, k, stride, group, relu=True):
        w = weight(name + "_w", (cout, cin // group, k, k), cin // group * k * k)
        b = weight(name + "_b", (cout,), 50.0)
        nodes.append(helper.make_node(
            "Conv", [x, w, b], [name], kernel_shape=[k, k],
            strides=[stride, stride], pads=[k // 2] * 4, group=group))
        if not relu:
            return name
        nodes.append(helper.make_node("Relu", [name], [name + "_r"]))
        return name + "_r"

    x = conv("x", "stem", 3, 16, 3, 2, 1)
    c = 16
    for i, (cout, stride) in enumerate(BLOCKS):
        y = conv(x, f"dw{i}", c, c, 3, stride, c)
        y = conv(y, f"pw{i}", c, cout, 1, 1, 1, relu=stride != 1 or c != cout)
        if stride == 1 and c == cout:
            nodes.append(helper.make_node("Add", [x, y], [f"res{i}"]))
            nodes.append(helper.make_node("Relu", [f"res{i}"], [f"res{i}_r"]))
            y = f"res{i}_r"
        x, c = y, cout
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"]))
    y = conv("pool", "fc", c, 1000, 1, 1, 1, relu=False)
    nodes.append(helper.make_node("Flatten", [y], ["logits"]))
    graph = helper.make_graph(
        nodes, "dwsep_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       ["N", 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       ["N", 1000])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--size", type=int, default=256)
    a = ap.parse_args()
    onnx.save(build(a.size), a.out)


if __name__ == "__main__":
    main()
