#!/usr/bin/python3
"""Make the models that tests/split_cases.c runs split as well as the ONNX
node cases: the same small network written for opsets 9, 11 and 13, each
in its opset's forms of Slice (attributes before 10), Clip (attributes
before 11), Squeeze, Unsqueeze, Split and ReduceSum (attributes before 13)
and ReduceMean (attributes before 18), like the PaddleOCR classifier whose
opset-9 Slice broke the tensor split.

The test_rows_mixed_* models mix the rows of a symbolic batch (a Softmax
and a sum over axis 0): the layer split must not cut them into
micro-batches, where the opset models must be.

A product by a constant matrix gets its columns cut by the tensor split;
the Add after it meets a whole (replicated) Slice of the input, which the
split slices locally: the node the split writes itself, in the opset's
form.  The batch is symbolic ("N"), so the layer split cuts it into
micro-batches.

test_residual_partial is the residual block of the PaddleOCR classifier
(a product's partial sums t read by the next product and by a residual Add
with other partial sums): the tensor split all-reduces t in place for the
product, and the Add then took the sum for partial sums (twice the answer
on two devices).

Each model is written in the layout of the ONNX node cases:
    test_opsetK_forms/model.onnx
    test_opsetK_forms/test_data_set_0/input_0.pb, output_*.pb
with outputs computed here by NumPy.

Run from anywhere with Debian's python3-onnx and python3-numpy:
    /usr/bin/python3 tests/split_models/make_models.py
The outputs are committed; rerun only to change them.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, IN, HID = 8, 64, 32


def ints_input(inits, name, vals):
    """An int64 constant input (an initializer) named name."""
    inits.append(numpy_helper.from_array(np.array(vals, dtype=np.int64), name))
    return name


def model(opset):
    rng = np.random.default_rng(opset)
    w = rng.standard_normal((IN, HID)).astype(np.float32) / 8
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "W")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm")]

    # Slice: the input's first HID columns.
    if opset < 10:
        nodes.append(helper.make_node("Slice", ["x"], ["s"], name="slice",
                                      starts=[0], ends=[HID], axes=[1]))
    else:
        nodes.append(helper.make_node(
            "Slice", ["x", ints_input(inits, "starts", [0]),
                      ints_input(inits, "ends", [HID]),
                      ints_input(inits, "axes", [1])],
            ["s"], name="slice"))
    nodes.append(helper.make_node("Add", ["h", "s"], ["a"], name="add"))

    # Clip to [-1, 1].
    if opset < 11:
        nodes.append(helper.make_node("Clip", ["a"], ["c"], name="clip",
                                      min=-1.0, max=1.0))
    else:
        inits.append(numpy_helper.from_array(np.array(-1, np.float32), "lo"))
        inits.append(numpy_helper.from_array(np.array(1, np.float32), "hi"))
        nodes.append(helper.make_node("Clip", ["a", "lo", "hi"], ["c"],
                                      name="clip"))

    # Unsqueeze to (N, 1, HID), Squeeze back; Split the columns in two.
    if opset < 13:
        nodes.append(helper.make_node("Unsqueeze", ["c"], ["u"],
                                      name="unsqueeze", axes=[1]))
        nodes.append(helper.make_node("Squeeze", ["u"], ["q"],
                                      name="squeeze", axes=[1]))
        nodes.append(helper.make_node("Split", ["q"], ["p0", "p1"],
                                      name="split", axis=1,
                                      split=[HID // 2, HID // 2]))
        nodes.append(helper.make_node("ReduceSum", ["p0"], ["rs"],
                                      name="rsum", axes=[1], keepdims=1))
    else:
        one = ints_input(inits, "one", [1])
        nodes.append(helper.make_node("Unsqueeze", ["c", one], ["u"],
                                      name="unsqueeze"))
        nodes.append(helper.make_node("Squeeze", ["u", one], ["q"],
                                      name="squeeze"))
        halves = ints_input(inits, "halves", [HID // 2, HID // 2])
        nodes.append(helper.make_node("Split", ["q", halves], ["p0", "p1"],
                                      name="split", axis=1))
        nodes.append(helper.make_node("ReduceSum", ["p0", one], ["rs"],
                                      name="rsum", keepdims=1))
    # ReduceMean: axes an attribute up to opset 17.
    nodes.append(helper.make_node("ReduceMean", ["p1"], ["rm"], name="rmean",
                                  axes=[1], keepdims=1))
    nodes.append(helper.make_node("Mul", ["rs", "rm"], ["y"], name="mul"))

    graph = helper.make_graph(
        nodes, "opset%d_forms" % opset,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", IN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1]),
         helper.make_tensor_value_info("q", TensorProto.FLOAT, ["N", HID])],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="shardnet make_models.py")
    m.ir_version = 4 if opset < 11 else 7
    onnx.checker.check_model(m)

    a = x @ w + x[:, :HID]
    q = np.clip(a, -1, 1)
    y = q[:, :HID // 2].sum(1, keepdims=True) * \
        q[:, HID // 2:].mean(1, keepdims=True)
    return m, [x], [y.astype(np.float32), q.astype(np.float32)]


def mixed(kind):
    """A model whose nodes mix the rows of its (symbolic) batch: the layer
    split must run the batch whole, not in micro-batches."""
    x = np.random.default_rng(7).standard_normal((BATCH, 4)).astype(
        np.float32)
    if kind == "softmax0":
        opset = 13
        nodes = [helper.make_node("Softmax", ["x"], ["s"], name="softmax",
                                  axis=0),
                 helper.make_node("Relu", ["s"], ["y"], name="relu")]
        e = np.exp(x - x.max(0, keepdims=True))
        y = e / e.sum(0, keepdims=True)
    else:
        opset = 11
        nodes = [helper.make_node("ReduceSum", ["x"], ["s"], name="rsum",
                                  axes=[0], keepdims=1),
                 helper.make_node("Sub", ["x", "s"], ["y"], name="sub")]
        y = x - x.sum(0, keepdims=True)
    graph = helper.make_graph(
        nodes, "mixed_" + kind,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="shardnet make_models.py")
    m.ir_version = 7
    onnx.checker.check_model(m)
    return m, [x], [y.astype(np.float32)]


def residual():
    """y = t + f(t) over 1x1 convolutions (products over the channels):
    t = relu(x * W1) * W2 and f(t) = relu(t * W3) * W4.  The split cuts
    W2's input channels (partial sums t), all-reduces t for W3 (whose
    output channels it cuts) and meets f(t)'s partial sums in the Add."""
    rng = np.random.default_rng(11)
    c, hw = 16, 3
    shapes = ((c, c), (c, c), (2 * c, c), (c, 2 * c))
    ws = [rng.standard_normal(s).astype(np.float32) / 4 for s in shapes]
    x = rng.standard_normal((BATCH, c, hw, hw)).astype(np.float32)
    inits = [numpy_helper.from_array(w.reshape(w.shape + (1, 1)),
                                     "W%d" % (i + 1))
             for i, w in enumerate(ws)]
    conv = lambda i, o, w, name: helper.make_node(  # noqa: E731
        "Conv", [i, w], [o], name=name, kernel_shape=[1, 1])
    nodes = [conv("x", "a", "W1", "conv1"),
             helper.make_node("Relu", ["a"], ["ar"], name="relu1"),
             conv("ar", "t", "W2", "conv2"),
             conv("t", "b", "W3", "conv3"),
             helper.make_node("Relu", ["b"], ["br"], name="relu2"),
             conv("br", "u", "W4", "conv4"),
             helper.make_node("Add", ["t", "u"], ["y"], name="residual")]
    graph = helper.make_graph(
        nodes, "residual_partial",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       ["N", c, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       ["N", c, hw, hw])],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="shardnet make_models.py")
    m.ir_version = 7
    onnx.checker.check_model(m)
    mix = lambda w, v: np.einsum("oc,nchw->nohw", w, v)  # noqa: E731
    t = mix(ws[1], np.maximum(mix(ws[0], x), 0))
    y = t + mix(ws[3], np.maximum(mix(ws[2], t), 0))
    return m, [x], [y.astype(np.float32)]


def write(name, m, inputs, outputs):
    d = os.path.join(HERE, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for kind, ts, names in (("input", inputs, ["x"]),
                            ("output", outputs, ["y", "q"][:len(outputs)])):
        for i, (t, n) in enumerate(zip(ts, names)):
            with open(os.path.join(d, "test_data_set_0",
                                   "%s_%d.pb" % (kind, i)), "wb") as f:
                f.write(numpy_helper.from_array(t, n).SerializeToString())


if __name__ == "__main__":
    for opset in (9, 11, 13):
        write("test_opset%d_forms" % opset, *model(opset))
    for kind in ("softmax0", "reducesum0"):
        write("test_rows_mixed_" + kind, *mixed(kind))
    write("test_residual_partial", *residual())
