#!/usr/bin/python3
"""Make the small valid model and tensor files that tests/test_onnx.c loads.

Run from anywhere with Debian's python3-onnx and python3-numpy:
    /usr/bin/python3 tests/onnx_cases/make_cases.py
The outputs are committed; rerun only to change them.  Hostile inputs are
built by the test itself (tests/test_onnx.c), byte by byte.
"""
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def out(name):
    return os.path.join(HERE, name)


def initializers_ir3():
    """IR 3 lists initializers among the inputs too; weights in raw_data and
    in typed fields; a Constant given as value_ints; a value_info hint."""
    w = numpy_helper.from_array(
        np.arange(6, dtype=np.float32).reshape(2, 3), "W")  # raw_data
    b = helper.make_tensor("B", TensorProto.FLOAT, [3], [0.5, -1.0, 2.0])
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [3, 2])
    q = helper.make_tensor("q", TensorProto.INT8, [4], [-128, -1, 0, 127])
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"),
        helper.make_node("Add", ["xw", "B"], ["h"], name="bias"),
        helper.make_node("Constant", [], ["axes"], name="axes_const",
                         value_ints=[0, 1]),
        helper.make_node("Reshape", ["h", "shape"], ["y"], name="reshape"),
    ]
    graph = helper.make_graph(
        nodes, "ir3",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2]),
         helper.make_tensor_value_info("W", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("B", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])],
        initializer=[w, b, shape, q],
        value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT,
                                                  ["N", 3])])
    model = helper.make_model(graph, producer_name="make_cases",
                              opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    onnx.save(model, out("initializers_ir3.onnx"))


def external():
    """Weights in a separate file, as onnx.save writes them for big models."""
    w = numpy_helper.from_array(
        np.arange(12, dtype=np.float32).reshape(3, 4), "W")
    b = numpy_helper.from_array(np.array([1, 2, 3, 4], dtype=np.int64), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[w, b])
    model = helper.make_model(graph, producer_name="make_cases",
                              opset_imports=[helper.make_opsetid("", 13)])
    os.makedirs(out("external"), exist_ok=True)
    onnx.save_model(model, out("external/model.onnx"),
                    save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin",
                    size_threshold=0)


def npy():
    np.save(out("f32_2x3.npy"), np.arange(6, dtype=np.float32).reshape(2, 3))
    np.save(out("i64_scalar.npy"), np.array(-7, dtype=np.int64))
    np.save(out("u8_5.npy"), np.array([0, 1, 2, 254, 255], dtype=np.uint8))
    np.save(out("b1_2x2.npy"), np.array([[True, False], [False, True]]))
    np.save(out("f8_0x3.npy"), np.zeros((0, 3), dtype=np.float64))
    with open(out("i4_v2.npy"), "wb") as f:
        np.lib.format.write_array(f, np.array([[1, -2, 3]], dtype=np.int32),
                                  version=(2, 0))
    with open(out("i8_v3.npy"), "wb") as f:
        np.lib.format.write_array(f, np.array([10, 20], dtype=np.int64),
                                  version=(3, 0))


def huge_constant_of_shape():
    """ConstantOfShape asking for 100000 x 100000 floats (40 GB): the
    loader must refuse it clearly instead of trying (tests/test_cli.sh)."""
    shape = numpy_helper.from_array(np.array([100000, 100000], dtype=np.int64),
                                    "shape")
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"])
    graph = helper.make_graph(
        [node], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, os.path.join(HERE, "huge_constant_of_shape.onnx"))


# --- node cases: the ONNX backend-test layout, run by tests/conformance.c --
#
# node/<case>/model.onnx and node/<case>/test_data_set_0/{input,output}_N.pb;
# every expected output is computed here with numpy, independently of
# shardnet.

RNG = np.random.default_rng(13)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def node_case(name, nodes, inputs, outputs, opset, initializers=(),
              batch=False, domains=()):
    """inputs / outputs: lists of (name, array); the graph's declared types
    and shapes are taken from the arrays (with batch, a symbolic first
    dimension "N")."""
    def info(n, a):
        shape = list(a.shape)
        if batch and shape:
            shape[0] = "N"
        return helper.make_tensor_value_info(
            n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], shape)
    graph = helper.make_graph(
        nodes, name, [info(n, a) for n, a in inputs],
        [info(n, a) for n, a in outputs],
        initializer=[a if isinstance(a, onnx.TensorProto)
                     else numpy_helper.from_array(a, n)
                     for n, a in initializers])
    model = helper.make_model(graph, producer_name="make_cases",
                              opset_imports=[helper.make_opsetid("", opset)] +
                              [helper.make_opsetid(d, v) for d, v in domains])
    # Old opsets want an IR version of their time.
    model.ir_version = 3 if opset < 7 else 7
    d = out(os.path.join("node", name))
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for kind, items in (("input", inputs), ("output", outputs)):
        for i, (n, a) in enumerate(items):
            # (ascontiguousarray makes a scalar one-dimensional)
            t = numpy_helper.from_array(
                np.ascontiguousarray(a) if a.ndim else a, n)
            with open(os.path.join(d, "test_data_set_0",
                                   "%s_%d.pb" % (kind, i)), "wb") as f:
                f.write(t.SerializeToString())


def ref_standardise(x, axes, eps):
    """x normalised over axes in float64: (x - mean) / sqrt(var + eps), the
    mean and the (biased) variance."""
    xd = x.astype(np.float64)
    mu = xd.mean(axis=axes, keepdims=True)
    var = ((xd - mu) ** 2).mean(axis=axes, keepdims=True)
    return (xd - mu) / np.sqrt(var + eps), mu, var


def ref_rms(x, axis, eps):
    """x over its axes from axis on divided by the root of their mean
    square plus eps, in float64; and that reciprocal root."""
    xd = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    inv = 1 / np.sqrt((xd ** 2).mean(axis=axes, keepdims=True) + eps)
    return xd * inv, inv


def ref_conv(x, w, b, strides, pads, dilations, out_type=np.float32):
    """Plain loops: x (N, C, H, W), w (M, C, kh, kw), pads (t, l, b, r);
    sums in float64, given as out_type."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]),
                  np.float64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    eh = (kh - 1) * dilations[0] + 1
    ew = (kw - 1) * dilations[1] + 1
    oh = (xp.shape[2] - eh) // strides[0] + 1
    ow = (xp.shape[3] - ew) // strides[1] + 1
    y = np.zeros((n, m, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * strides[0], j * strides[1]
            patch = xp[:, :, r0:r0 + eh:dilations[0], c0:c0 + ew:dilations[1]]
            y[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    return (y + b.reshape(1, m, 1, 1)).astype(out_type)


def ref_pool(x, kernel, strides, pads, dilations, op):
    """MaxPool / AveragePool (padding excluded from the average)."""
    n, c, h, wd = x.shape
    fill = -np.inf if op == "max" else np.nan
    xp = np.full((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), fill)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    eh = (kernel[0] - 1) * dilations[0] + 1
    ew = (kernel[1] - 1) * dilations[1] + 1
    oh = (xp.shape[2] - eh) // strides[0] + 1
    ow = (xp.shape[3] - ew) // strides[1] + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * strides[0], j * strides[1]
            win = xp[:, :, r0:r0 + eh:dilations[0], c0:c0 + ew:dilations[1]]
            y[:, :, i, j] = (win.max(axis=(2, 3)) if op == "max"
                             else np.nanmean(win, axis=(2, 3)))
    return y.astype(np.float32)


def softmax_2d(x, axis, log=False):
    """Softmax before opset 13: x coerced to 2-D at axis, rows normalised."""
    rows = int(np.prod(x.shape[:axis]))
    z = x.reshape(rows, -1).astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    y = e / e.sum(axis=1, keepdims=True)
    if log:
        y = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return y.reshape(x.shape).astype(np.float32)


def legacy_cases():
    """Opsets 1 to 6: the attribute forms of the old operator versions."""
    mk = helper.make_node
    a, b = rand(2, 3, 4, 5), rand(3, 4)
    node_case("test_legacy_add_broadcast_axis_opset6",
              [mk("Add", ["a", "b"], ["y"], broadcast=1, axis=1)],
              [("a", a), ("b", b)], [("y", a + b.reshape(1, 3, 4, 1))], 6)
    a, b = rand(2, 3), rand(2)
    node_case("test_legacy_mul_broadcast_axis0_opset1",
              [mk("Mul", ["a", "b"], ["y"], broadcast=1, axis=0,
                  consumed_inputs=[0, 0])],
              [("a", a), ("b", b)], [("y", a * b.reshape(2, 1))], 1)
    x, w, b = rand(3, 3), rand(3, 3), rand(3)
    node_case("test_legacy_matmul_add_broadcast_axis0_opset6",
              [mk("MatMul", ["x", "w"], ["m"]),
               mk("Add", ["m", "b"], ["y"], broadcast=1, axis=0)],
              [("x", x)], [("y", x @ w + b.reshape(3, 1))], 6,
              initializers=[("w", w), ("b", b)])
    a, b, c = rand(2, 3, 4), rand(4), rand(2, 3, 4)
    node_case("test_legacy_sub_suffix_div_same_shape_opset6",
              [mk("Sub", ["a", "b"], ["t"], broadcast=1),
               mk("Div", ["t", "c"], ["y"])],
              [("a", a), ("b", b), ("c", c)], [("y", (a - b) / c)], 6)
    a = rand(3, 2)
    node_case("test_legacy_pow_scalar_opset5",
              [mk("Pow", ["a", "e"], ["y"], broadcast=1)],
              [("a", np.abs(a) + 0.5)],
              [("y", ((np.abs(a) + 0.5) ** np.float32(1.5)).astype(np.float32))],
              5, initializers=[("e", np.array(1.5, np.float32))])
    a, w, c = rand(3, 4), rand(4, 5), rand(5)
    node_case("test_legacy_gemm_broadcast_opset6",
              [mk("Gemm", ["a", "w", "c"], ["y"], broadcast=1, alpha=0.5,
                  beta=2.0)],
              [("a", a)], [("y", 0.5 * a @ w + 2.0 * c)], 6,
              initializers=[("w", w), ("c", c)])
    a, w, c = rand(4, 3), rand(5, 4), rand(3, 5)
    node_case("test_legacy_gemm_full_c_opset1",
              [mk("Gemm", ["a", "w", "c"], ["y"], transA=1, transB=1)],
              [("a", a), ("c", c)], [("y", a.T @ w.T + c)], 1,
              initializers=[("w", w)])
    x = rand(2, 3, 4, 4)
    sc, bi, mu = rand(3), rand(3), rand(3)
    var = np.abs(rand(3)) + 0.5
    y = ((x - mu.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-3)
         * sc.reshape(1, 3, 1, 1) + bi.reshape(1, 3, 1, 1))
    node_case("test_legacy_batchnorm_is_test_opset5",
              [mk("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                  is_test=1, spatial=1, epsilon=1e-3,
                  consumed_inputs=[0, 0, 0, 1, 1])],
              [("x", x)], [("y", y)], 5,
              initializers=[("s", sc), ("b", bi), ("m", mu), ("v", var)])
    node_case("test_legacy_batchnorm_spatial_opset6",
              [mk("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                  is_test=1, epsilon=1e-3)],
              [("x", x)], [("y", y)], 6,
              initializers=[("s", sc), ("b", bi), ("m", mu), ("v", var)])
    x = rand(3, 4)
    node_case("test_legacy_dropout_relu_opset6",
              [mk("Relu", ["x"], ["r"], consumed_inputs=[0]),
               mk("Dropout", ["r"], ["y"], is_test=1, ratio=0.3)],
              [("x", x)], [("y", np.maximum(x, 0))], 6)
    x = rand(2, 3, 4)
    node_case("test_legacy_reshape_attribute_opset4",
              [mk("Reshape", ["x"], ["y"], shape=[4, -1, 2],
                  consumed_inputs=[0])],
              [("x", x)], [("y", x.reshape(4, -1, 2))], 4)
    a, b = rand(2, 3), rand(2, 2)
    node_case("test_legacy_concat_default_axis_opset3",
              [mk("Concat", ["a", "b"], ["y"])],
              [("a", a), ("b", b)], [("y", np.concatenate([a, b], 1))], 3)
    x = rand(2, 6)
    node_case("test_legacy_split_attribute_opset2",
              [mk("Split", ["x"], ["y0", "y1"], axis=1, split=[2, 4])],
              [("x", x)], [("y0", x[:, :2]), ("y1", x[:, 2:])], 2)
    node_case("test_legacy_split_input_opset1",
              [mk("Split", ["x", "s"], ["y0", "y1", "y2"], axis=1)],
              [("x", x)], [("y0", x[:, :1]), ("y1", x[:, 1:4]),
                           ("y2", x[:, 4:])], 1,
              initializers=[("s", np.array([1, 3, 2], np.int64))])
    x = rand(2, 3, 4)
    node_case("test_legacy_softmax_2d_coercion_opset1",
              [mk("Softmax", ["x"], ["y"])],
              [("x", x)], [("y", softmax_2d(x, 1))], 1)
    x = (rand(2, 3) * 3).astype(np.float32)
    node_case("test_legacy_cast_type_name_opset5",
              [mk("Cast", ["x"], ["y"], to="DOUBLE")],
              [("x", x)], [("y", x.astype(np.float64))], 5)
    node_case("test_legacy_clip_attributes_opset6",
              [mk("Clip", ["x"], ["y"], min=-0.5, max=1.0)],
              [("x", x)], [("y", np.clip(x, -0.5, 1.0))], 6)
    x = rand(1, 2, 6, 6)
    node_case("test_legacy_pools_opset1",
              [mk("MaxPool", ["x"], ["m"], kernel_shape=[3, 3], strides=[2, 2],
                  pads=[1, 1, 1, 1]),
               mk("AveragePool", ["x"], ["a"], kernel_shape=[2, 2],
                  pads=[1, 1, 0, 0])],
              [("x", x)],
              [("m", ref_pool(x, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], "max")),
               ("a", ref_pool(x, [2, 2], [1, 1], [1, 1, 0, 0], [1, 1], "avg"))],
              1)
    x = rand(2, 1, 3)
    node_case("test_legacy_squeeze_unsqueeze_slice_opset1",
              [mk("Squeeze", ["x"], ["s"], axes=[1]),
               mk("Unsqueeze", ["s"], ["u"], axes=[0]),
               mk("Slice", ["u"], ["y"], axes=[2], starts=[1], ends=[3])],
              [("x", x)], [("y", x.reshape(1, 2, 3)[:, :, 1:3])], 1)
    x = rand(2, 3, 4)
    node_case("test_legacy_reduce_transpose_flatten_opset1",
              [mk("ReduceMean", ["x"], ["r"], axes=[1], keepdims=1),
               mk("Transpose", ["r"], ["t"], perm=[2, 1, 0]),
               mk("Flatten", ["t"], ["y"], axis=1)],
              [("x", x)],
              [("y", x.mean(axis=1, keepdims=True).transpose(2, 1, 0)
                .reshape(4, 2))], 1)


def dilation_and_softmax_cases():
    """What no ONNX node case covers: Conv dilations, and Softmax's 2-D
    coercion at opset 11 (the last opset before 13 made it per axis)."""
    mk = helper.make_node
    x, w, b = rand(1, 2, 7, 8), rand(3, 2, 3, 3), rand(3)
    node_case("test_conv_dilations_opset11",
              [mk("Conv", ["x", "w", "b"], ["y"], dilations=[2, 2],
                  pads=[1, 1, 1, 1], kernel_shape=[3, 3])],
              [("x", x)], [("y", ref_conv(x, w, b, [1, 1], [1, 1, 1, 1],
                                          [2, 2]))], 11,
              initializers=[("w", w), ("b", b)])
    x, w, b = rand(2, 3, 9, 7), rand(4, 3, 2, 3), rand(4)
    node_case("test_conv_dilations_strides_uneven_opset11",
              [mk("Conv", ["x", "w", "b"], ["y"], dilations=[3, 1],
                  strides=[2, 1], pads=[0, 2, 1, 0])],
              [("x", x)], [("y", ref_conv(x, w, b, [2, 1], [0, 2, 1, 0],
                                          [3, 1]))], 11,
              initializers=[("w", w), ("b", b)])
    x = rand(1, 1, 7, 7)
    node_case("test_maxpool_dilations_pads_opset12",
              [mk("MaxPool", ["x"], ["y"], kernel_shape=[2, 3],
                  dilations=[3, 2], pads=[1, 0, 0, 1], strides=[1, 2])],
              [("x", x)], [("y", ref_pool(x, [2, 3], [1, 2], [1, 0, 0, 1],
                                          [3, 2], "max"))], 12)
    x = rand(2, 3, 4)
    node_case("test_softmax_2d_coercion_opset11",
              [mk("Softmax", ["x"], ["y"], axis=1)],
              [("x", x)], [("y", softmax_2d(x, 1))], 11)
    x = rand(2, 2, 3, 2)
    node_case("test_logsoftmax_2d_coercion_default_axis_opset11",
              [mk("LogSoftmax", ["x"], ["y"])],
              [("x", x)], [("y", softmax_2d(x, 1, log=True))], 11)


def slice_cases():
    """Negative steps that run to the first element (ends far below -dim,
    as exporters write 'to the start'): no ONNX node case reaches it."""
    mk = helper.make_node
    x = rand(5, 4)
    node_case("test_slice_negative_steps_to_the_start",
              [mk("Slice", ["x", "s", "e", "a", "st"], ["y"])],
              [("x", x)], [("y", x[4::-2, ::-1])], 13,
              initializers=[("s", np.array([-1, 3], np.int64)),
                            ("e", np.array([-1000, -2 ** 63], np.int64)),
                            ("a", np.array([0, 1], np.int64)),
                            ("st", np.array([-2, -1], np.int64))])


def batchnorm_spatial0_cases():
    """spatial = 0 (opsets 1 to 8): one parameter per element of a sample;
    constant parameters, and parameters given as inputs (the device path)."""
    mk = helper.make_node
    x = rand(2, 3, 2, 2)
    sc, bi, mu = rand(3, 2, 2), rand(3, 2, 2), rand(3, 2, 2)
    var = np.abs(rand(3, 2, 2)) + 0.5
    y = (x - mu) / np.sqrt(var + np.float32(1e-2)) * sc + bi
    node_case("test_legacy_batchnorm_spatial0_opset6",
              [mk("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                  is_test=1, spatial=0, epsilon=1e-2)],
              [("x", x)], [("y", y)], 6,
              initializers=[("s", sc), ("b", bi), ("m", mu), ("v", var)])
    node_case("test_batchnorm_spatial0_inputs_opset7",
              [mk("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                  spatial=0, epsilon=1e-2)],
              [("x", x), ("s", sc), ("b", bi), ("m", mu), ("v", var)],
              [("y", y)], 7)


def zero_size_cases():
    """Tensors with no elements flowing through a graph, and results of
    real size computed from them."""
    mk = helper.make_node
    x, w, b = np.zeros((0, 3), np.float32), rand(3, 4), rand(4)
    node_case("test_zero_size_matmul_add_relu_softmax",
              [mk("MatMul", ["x", "w"], ["m"]), mk("Add", ["m", "b"], ["a"]),
               mk("Relu", ["a"], ["r"]), mk("Softmax", ["r"], ["y"])],
              [("x", x)], [("y", np.zeros((0, 4), np.float32))], 13,
              initializers=[("w", w), ("b", b)], batch=True)
    x, w, b = np.zeros((0, 2, 5, 5), np.float32), rand(3, 2, 3, 3), rand(3)
    node_case("test_zero_size_conv_pool_batch",
              [mk("Conv", ["x", "w", "b"], ["c"]),
               mk("MaxPool", ["c"], ["y"], kernel_shape=[2, 2])],
              [("x", x)], [("y", np.zeros((0, 3, 2, 2), np.float32))], 13,
              initializers=[("w", w), ("b", b)])
    a, c = np.zeros((2, 0), np.float32), rand(3)
    bm = np.zeros((0, 3), np.float32)
    node_case("test_zero_size_gemm_inner_dimension",
              [mk("Gemm", ["a", "b", "c"], ["y"], beta=0.5)],
              [("a", a), ("b", bm)],
              [("y", np.tile(0.5 * c, (2, 1)).astype(np.float32))], 13,
              initializers=[("c", c)])
    node_case("test_zero_size_matmul_inner_dimension",
              [mk("MatMul", ["a", "b"], ["y"])],
              [("a", np.zeros((2, 2, 0), np.float32)), ("b", bm)],
              [("y", np.zeros((2, 2, 3), np.float32))], 13)
    a, e = rand(2, 3), np.zeros((2, 0), np.float32)
    node_case("test_zero_size_concat_transpose_reduce",
              [mk("Concat", ["e", "a"], ["c"], axis=1),
               mk("Transpose", ["e"], ["t"]),
               mk("ReduceSum", ["e", "ax"], ["s"], keepdims=1),
               mk("Exp", ["t"], ["z"])],
              [("e", e), ("a", a)],
              [("c", a), ("z", np.zeros((0, 2), np.float32)),
               ("s", np.zeros((2, 1), np.float32))], 13,
              initializers=[("ax", np.array([1], np.int64))])
    x = rand(4, 3)
    node_case("test_zero_size_gather_slice_add",
              [mk("Gather", ["x", "i"], ["g"], axis=0),
               mk("Slice", ["x", "st", "en"], ["s"]),
               mk("Add", ["g", "s"], ["y"])],
              [("x", x)], [("y", np.zeros((0, 3), np.float32))], 13,
              initializers=[("i", np.zeros((0,), np.int64)),
                            ("st", np.array([2], np.int64)),
                            ("en", np.array([2], np.int64))])


def variadic_cases():
    """Max, Min, Sum and Mean of many inputs: a running result whose shape
    grows as the inputs broadcast in (on the device), and the same
    operators folded on the host when every input is known at load
    (constants in float, a shape in int64)."""
    mk = helper.make_node
    a, b, c, d = rand(4, 1, 3), rand(2, 1), rand(3), rand(1, 2, 3)
    node_case("test_variadic_max_four_broadcast",
              [mk("Max", ["a", "b", "c", "d"], ["y"])],
              [("a", a), ("b", b), ("c", c), ("d", d)],
              [("y", np.maximum(np.maximum(np.maximum(a, b), c), d))], 13)
    e = rand(2, 3)
    node_case("test_variadic_sum_mean_min_five",
              [mk("Sum", ["a", "b", "c", "d", "e"], ["s"]),
               mk("Mean", ["a", "b", "c", "d", "e"], ["m"]),
               mk("Min", ["a", "b", "c", "d", "e"], ["n"])],
              [("a", a), ("b", b), ("c", c), ("d", d), ("e", e)],
              [("s", a + b + c + d + e),
               ("m", ((a + b + c + d + e) / np.float32(5)).astype(np.float32)),
               ("n", np.minimum.reduce([np.broadcast_to(v, (4, 2, 3))
                                        for v in (a, b, c, d, e)]))], 13)
    x, k1, k2, k3 = rand(2, 3), rand(2, 3), rand(3), rand(1, 3)
    node_case("test_variadic_constants_folded",
              [mk("Mean", ["k1", "k2", "k3"], ["m"]),
               mk("Add", ["x", "m"], ["y"])],
              [("x", x)],
              [("y", x + ((k1 + k2 + k3) / np.float32(3)).astype(np.float32))],
              13, initializers=[("k1", k1), ("k2", k2), ("k3", k3)])
    node_case("test_variadic_max_of_shapes",
              [mk("Shape", ["x"], ["s"]),
               mk("Max", ["s", "floor"], ["m"]),
               mk("ConstantOfShape", ["m"], ["y"])],
              [("x", x)], [("y", np.zeros((2, 5), np.float32))], 13,
              initializers=[("floor", np.array([1, 5], np.int64))])


def tfidf_reference(x, pool_counts, pool, indexes, weights, lo, hi, skips,
                    mode):
    """TfIdfVectorizer by its definition: every n-gram of lengths lo..hi
    with each skip distance (a unigram counted once), found in the pool."""
    grams = {}
    ordinal = 0
    for g in range(1, len(pool_counts) + 1):
        end = pool_counts[g] if g < len(pool_counts) else len(pool)
        for p in range(pool_counts[g - 1], end, g):
            grams[tuple(pool[p:p + g])] = ordinal
            ordinal += 1
    rows = x.reshape(-1, x.shape[-1])
    y = np.zeros((rows.shape[0], max(indexes) + 1), np.float32)
    for r, row in enumerate(rows):
        for g in range(lo, hi + 1):
            for skip in (range(skips + 1) if g > 1 else [0]):
                step = skip + 1
                for s in range(len(row) - (g - 1) * step):
                    k = tuple(row[s:s + (g - 1) * step + 1:step])
                    if k in grams:
                        y[r, indexes[grams[k]]] += 1
        for i, o in enumerate(indexes):
            w = weights[i] if weights is not None else 1.0
            if mode == "IDF":
                y[r, o] = w if y[r, o] > 0 else 0
            elif mode == "TFIDF":
                y[r, o] *= w
    return y.reshape(x.shape[:-1] + (y.shape[-1],))


def tfidf_cases():
    """TfIdfVectorizer in the IDF and TFIDF modes with weights (the ONNX
    node data has TF only), over int32 rows, counted on the host."""
    mk = helper.make_node
    rng = np.random.default_rng(1501)
    x = rng.integers(2, 8, size=(2, 12)).astype(np.int32)
    counts, pool = [0, 4], [2, 3, 5, 4, 5, 6, 7, 8, 6, 7]
    indexes = [0, 1, 2, 3, 4, 5, 6]
    weights = [0.5, 1.5, 2.0, 0.25, 3.0, 1.0, 0.75]
    for mode in ("IDF", "TFIDF"):
        node_case("test_tfidf_%s_weights_skip2" % mode.lower(),
                  [mk("TfIdfVectorizer", ["x"], ["y"], mode=mode,
                      min_gram_length=1, max_gram_length=2, max_skip_count=2,
                      ngram_counts=counts, ngram_indexes=indexes,
                      pool_int64s=pool, weights=weights)],
                  [("x", x)],
                  [("y", tfidf_reference(x, counts, pool, indexes,
                                         np.float32(weights), 1, 2, 2,
                                         mode))], 9)
def reduce_cases():
    """The reductions of issue 15: axes as an input (opset 18) over
    axes that are not adjacent (one reduce step per run), negative axes,
    noop_with_empty_axes, every axis by default, a log-sum-exp of large
    values (stabilised by the maximum), and integer tensors folded on the
    host (a shape's product and minimum; L1 and sum of squares of an int64
    input, which is bound by value)."""
    mk = helper.make_node
    rng = np.random.default_rng(1501)
    x = rng.standard_normal((3, 4, 5, 2)).astype(np.float32)
    ax = np.array([0, -2], np.int64)
    want = {
        "ReduceMin": x.min(axis=(0, 2), keepdims=True),
        "ReduceProd": x.prod(axis=(0, 2), keepdims=True),
        "ReduceL1": np.abs(x).sum(axis=(0, 2), keepdims=True),
        "ReduceL2": np.sqrt((x.astype(np.float64) ** 2).sum(
            axis=(0, 2), keepdims=True)),
        "ReduceLogSum": np.log(np.abs(x).sum(axis=(0, 2), keepdims=True)),
        "ReduceLogSumExp": np.log(np.exp(x.astype(np.float64)).sum(
            axis=(0, 2), keepdims=True)),
        "ReduceSumSquare": (x.astype(np.float64) ** 2).sum(
            axis=(0, 2), keepdims=True),
    }
    nodes, outs = [], []
    for op, y in want.items():
        src = "a" if op == "ReduceLogSum" else "x"
        nodes.append(mk(op, [src, "axes"], [op + "_k"]))
        nodes.append(mk(op, [src, "axes"], [op + "_d"], keepdims=0))
        outs.append((op + "_k", y.astype(np.float32)))
        outs.append((op + "_d", y.reshape(4, 2).astype(np.float32)))
    nodes.insert(0, mk("Abs", ["x"], ["a"]))
    node_case("test_reduce_axes_input_opset18", nodes, [("x", x)], outs, 18,
              initializers=[("axes", ax)])

    # 6 values are known on the host at load, 80 are not
    small = (rng.standard_normal((2, 3)) * 5 + 1000).astype(np.float32)
    big = (rng.standard_normal((2, 40)) * 5 - 1000).astype(np.float32)

    def lse(v):
        m = v.astype(np.float64).max(axis=1, keepdims=True)
        return (m + np.log(np.exp(v - m).sum(axis=1, keepdims=True))).astype(
            np.float32)
    node_case("test_reduce_log_sum_exp_large_values",
              [mk("ReduceLogSumExp", ["s"], ["ys"], axes=[1]),
               mk("ReduceLogSumExp", ["b"], ["yb"], axes=[-1])],
              [("s", small), ("b", big)],
              [("ys", lse(small)), ("yb", lse(big))], 13)
    # a line of -inf gives -inf, one holding +inf gives +inf
    inf = big.copy()
    inf[0, :] = -np.inf
    inf[1, 7] = np.inf
    node_case("test_reduce_log_sum_exp_infinities",
              [mk("ReduceLogSumExp", ["b"], ["y"], axes=[1], keepdims=0)],
              [("b", inf)], [("y", np.array([-np.inf, np.inf], np.float32))],
              13)

    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    node_case("test_reduce_noop_and_all_axes_opset18",
              [mk("ReduceL1", ["x", "none"], ["same"],
                  noop_with_empty_axes=1),
               mk("ReduceMin", ["x"], ["all"]),
               mk("ReduceSumSquare", ["x", "none"], ["all_k"])],
              [("x", x)],
              [("same", x), ("all", x.min(keepdims=True)),
               ("all_k", np.array((x.astype(np.float64) ** 2).sum(),
                                  np.float32).reshape(1, 1, 1))],
              18, initializers=[("none", np.zeros(0, np.int64))])

    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    k = np.array([[3, -1, 4], [-2, 5, 0]], np.int64)
    node_case("test_reduce_integers_folded",
              [mk("Shape", ["x"], ["s"]),
               mk("ReduceProd", ["s"], ["n"], keepdims=1),
               mk("ReduceMin", ["s"], ["lo"], keepdims=1),
               mk("ReduceL1", ["k"], ["l1"], axes=[1], keepdims=1),
               mk("ReduceSumSquare", ["k"], ["sq"], axes=[0], keepdims=1),
               mk("Reshape", ["x", "n"], ["flat"])],
              [("x", x), ("k", k)],
              [("lo", np.array([2], np.int64)),
               ("l1", np.array([[8], [7]], np.int64)),
               ("sq", np.array([[13, 26, 16]], np.int64)),
               ("flat", x.reshape(30))], 13)



def rank_order(x, axis, largest, last):
    """Indices along axis in the order of sn_topk_desc's ranking: the
    largest (or smallest) first, ties by index (the higher first with
    last).  x has no NaN."""
    x = np.moveaxis(x, axis, -1)
    n = x.shape[-1]
    idx = np.arange(n)
    key_i = -idx if last else idx
    key_v = -x if largest else x
    flat_v = key_v.reshape(-1, n)
    order = np.stack([np.lexsort((key_i, row)) for row in flat_v])
    return np.moveaxis(order.reshape(x.shape), -1, axis)
def select_cases():
    """ArgMax, ArgMin, Hardmax and TopK on the device (more than the 64
    elements of an input known on the host) with ties (values on a coarse
    grid): keepdims and select_last_index, Hardmax's axis in both of its
    meanings (opset 11 flattens at it, opset 13 picks it), TopK's k as the
    attribute of opset 1 and as an input, smallest first; and an ArgMax of
    an int64 input folded on the host."""
    mk = helper.make_node
    rng = np.random.default_rng(1502)
    x = (np.round(rng.standard_normal((3, 6, 5)) * 2) / 2).astype(np.float32)

    def take(order, k, axis):
        sl = [slice(None)] * order.ndim
        sl[axis] = slice(0, k)
        return order[tuple(sl)]
    amax_last = take(rank_order(x, 1, True, True), 1, 1)
    amin = take(rank_order(x, 2, False, False), 1, 2)
    node_case("test_select_argmax_argmin_device",
              [mk("ArgMax", ["x"], ["a"], axis=1, keepdims=1,
                  select_last_index=1),
               mk("ArgMin", ["x"], ["b"], axis=-1, keepdims=0),
               mk("ArgMax", ["x"], ["c"])],
              [("x", x)],
              [("a", amax_last.astype(np.int64)),
               ("b", amin.reshape(3, 6).astype(np.int64)),
               ("c", take(rank_order(x, 0, True, False), 1, 0).astype(
                   np.int64))], 13)

    def hardmax(v, axis):
        o = take(rank_order(v, axis, True, False), 1, axis)
        ramp = np.arange(v.shape[axis]).reshape(
            [-1 if i == axis else 1 for i in range(v.ndim)])
        return (ramp == o).astype(np.float32)
    flat = x.reshape(3, 30)
    node_case("test_select_hardmax_flattened_opset11",
              [mk("Hardmax", ["x"], ["y"], axis=1)],
              [("x", x)], [("y", hardmax(flat, 1).reshape(x.shape))], 11)
    node_case("test_select_hardmax_axis_opset13",
              [mk("Hardmax", ["x"], ["y"], axis=1),
               mk("Hardmax", ["x"], ["z"])],
              [("x", x)], [("y", hardmax(x, 1)), ("z", hardmax(x, 2))], 13)

    o = take(rank_order(x, 1, True, False), 3, 1)
    node_case("test_select_topk_attribute_opset1",
              [mk("TopK", ["x"], ["v", "i"], axis=1, k=3)],
              [("x", x)],
              [("v", np.take_along_axis(x, o, 1)), ("i", o.astype(np.int64))],
              1)
    o = take(rank_order(x, 2, False, False), 4, 2)
    node_case("test_select_topk_smallest_input_k",
              [mk("TopK", ["x", "k"], ["v", "i"], largest=0, sorted=1)],
              [("x", x)],
              [("v", np.take_along_axis(x, o, 2)), ("i", o.astype(np.int64))],
              11, initializers=[("k", np.array([4], np.int64))])

    q = np.array([[3, 9, 9, 1], [7, 7, -2, 7]], np.int64)
    node_case("test_select_argmax_int64_folded",
              [mk("ArgMax", ["q"], ["a"], axis=1, select_last_index=1),
               mk("ArgMin", ["q"], ["b"], axis=0, keepdims=0)],
              [("q", q)],
              [("a", np.array([[2], [3]], np.int64)),
               ("b", np.array([0, 1, 1, 0], np.int64))], 13)



def cumsum_lpnorm_cases():
    """CumSum on the device (exclusive, reverse, both; a negative int32
    axis; an axis of 3000) and folded on the host (int64); LpNormalization with p 1 and 2
    along the first and the last axis, on the device and on the host."""
    mk = helper.make_node
    rng = np.random.default_rng(1503)
    x = rng.standard_normal((3, 20, 4)).astype(np.float32)
    c = np.cumsum(x.astype(np.float64), axis=1)
    r = np.flip(np.cumsum(np.flip(x.astype(np.float64), 1), axis=1), 1)
    node_case("test_cumsum_exclusive_reverse_device",
              [mk("CumSum", ["x", "ax"], ["a"]),
               mk("CumSum", ["x", "ax"], ["b"], exclusive=1),
               mk("CumSum", ["x", "ax"], ["c"], reverse=1),
               mk("CumSum", ["x", "ax"], ["d"], exclusive=1, reverse=1)],
              [("x", x)],
              [("a", c.astype(np.float32)),
               ("b", (c - x).astype(np.float32)),
               ("c", r.astype(np.float32)),
               ("d", (r - x).astype(np.float32))],
              14, initializers=[("ax", np.array(-2, np.int32))])
    long = rng.uniform(0.0, 1.0, (2, 3000)).astype(np.float32)
    node_case("test_cumsum_long_axis_device",
              [mk("CumSum", ["x", "ax"], ["y"], reverse=1)],
              [("x", long)],
              [("y", np.flip(np.cumsum(np.flip(long.astype(np.float64), 1),
                                       axis=1), 1).astype(np.float32))],
              14, initializers=[("ax", np.array(1, np.int64))])
    q = np.array([[1, -2, 3], [4, 5, -6]], np.int64)
    node_case("test_cumsum_int64_folded",
              [mk("CumSum", ["q", "ax"], ["y"], reverse=1)],
              [("q", q)],
              [("y", np.flip(np.cumsum(np.flip(q, 1), axis=1), 1))],
              11, initializers=[("ax", np.array([1], np.int64))])
    small = rng.standard_normal((2, 3)).astype(np.float32)

    def lp(v, p, axis):
        v64 = v.astype(np.float64)
        nrm = (np.abs(v64).sum(axis=axis, keepdims=True) if p == 1 else
               np.sqrt((v64 ** 2).sum(axis=axis, keepdims=True)))
        return (v64 / nrm).astype(np.float32)
    node_case("test_lp_normalization_p1_p2",
              [mk("LpNormalization", ["x"], ["a"], p=1, axis=0),
               mk("LpNormalization", ["x"], ["b"]),
               mk("LpNormalization", ["s"], ["c"], p=1)],
              [("x", x), ("s", small)],
              [("a", lp(x, 1, 0)), ("b", lp(x, 2, -1)), ("c", lp(small, 1, -1))],
              1)



def index_gather_cases():
    """GatherElements and GatherND on float data large enough to stay on
    the device (not bound by value): one gather step of a host-made map;
    GatherND with and without batch_dims."""
    rng = np.random.default_rng(1501)
    mk = helper.make_node
    data = rng.standard_normal((5, 4, 6)).astype(np.float32)
    idx = rng.integers(-4, 4, (5, 3, 6)).astype(np.int64)
    node_case("test_index_gather_elements_device",
              [mk("GatherElements", ["x", "i"], ["y"], axis=1)],
              [("x", data), ("i", idx)],
              [("y", np.take_along_axis(data, np.where(idx < 0, idx + 4,
                                                      idx), axis=1))], 13)
    d = rng.standard_normal((3, 4, 5, 2)).astype(np.float32)
    bi = rng.integers(-4, 4, (3, 2, 2)).astype(np.int64)
    bi[..., 1] = rng.integers(0, 5, (3, 2))
    y1 = np.stack([np.stack([d[b, t[0], t[1]] for t in bi[b]])
                   for b in range(3)])
    d2 = rng.standard_normal((6, 5, 3)).astype(np.float32)
    i2 = rng.integers(0, 6, (4, 1)).astype(np.int64)
    node_case("test_index_gathernd_device",
              [mk("GatherND", ["d", "bi"], ["y1"], batch_dims=1),
               mk("GatherND", ["d2", "i2"], ["y2"])],
              [("d", d), ("bi", bi), ("d2", d2), ("i2", i2)],
              [("y1", y1), ("y2", d2[i2[:, 0]])], 12)


def scatter_ref(data, targets, upd, red):
    """data with upd[j] combined into data[targets[j]] in order (targets:
    a list of index tuples into data)."""
    out = data.copy()
    for t, u in zip(targets, upd):
        if red == "none":
            out[t] = u
        elif red == "add":
            out[t] = out[t] + u
        elif red == "mul":
            out[t] = out[t] * u
        elif red == "max":
            out[t] = np.maximum(out[t], u)
        else:
            out[t] = np.minimum(out[t], u)
    return out


def index_scatter_cases():
    """ScatterElements and ScatterND on device data with every reduction,
    duplicate targets applied in order (rounds of gathers and binary
    steps), negative indices; Scatter in its opset 9 form; a cache written
    at consecutive positions (copies of runs, the last write winning)."""
    rng = np.random.default_rng(1502)
    mk = helper.make_node
    data = rng.standard_normal((6, 20)).astype(np.float32)
    idx = rng.integers(-20, 20, (6, 30)).astype(np.int64)
    upd = rng.standard_normal((6, 30)).astype(np.float32)
    perm = np.stack([rng.permutation(20)[:12] - 10
                     for _ in range(6)]).astype(np.int64)
    pu = upd[:, :12].copy()
    reds = ["add", "mul", "max", "min"]

    def targets(ix):
        return [(r, c % 20) for r in range(ix.shape[0])
                for c in ix[r]]
    outs = [("y_" + r, scatter_ref(data, targets(idx), upd.reshape(-1), r))
            for r in reds]
    node_case("test_index_scatter_elements_reductions_device",
              [mk("ScatterElements", ["x", "i", "u"], ["y_" + r], axis=1,
                  reduction=r) for r in reds] +
              [mk("ScatterElements", ["x", "p", "pu"], ["y_none"], axis=-1)],
              [("x", data), ("i", idx), ("u", upd), ("p", perm), ("pu", pu)],
              outs + [("y_none", scatter_ref(data, targets(perm),
                                             pu.reshape(-1), "none"))], 18)
    d = rng.standard_normal((8, 5, 4)).astype(np.float32)
    ti = rng.integers(-8, 8, (6, 1)).astype(np.int64)
    tu = rng.standard_normal((6, 5, 4)).astype(np.float32)
    t2 = np.array([[1, 2], [7, 0], [-1, -5]], np.int64)
    u2 = rng.standard_normal((3, 4)).astype(np.float32)
    node_case("test_index_scatternd_reductions_device",
              [mk("ScatterND", ["d", "ti", "tu"], ["ya"], reduction="add"),
               mk("ScatterND", ["d", "ti", "tu"], ["ym"], reduction="mul"),
               mk("ScatterND", ["d", "t2", "u2"], ["yn"])],
              [("d", d), ("ti", ti), ("tu", tu), ("t2", t2), ("u2", u2)],
              [("ya", scatter_ref(d, [(v % 8,) for v in ti[:, 0]], tu,
                                  "add")),
               ("ym", scatter_ref(d, [(v % 8,) for v in ti[:, 0]], tu,
                                  "mul")),
               ("yn", scatter_ref(d, [(a % 8, b % 5) for a, b in t2], u2,
                                  "none"))], 16)
    x = rng.standard_normal((10, 8)).astype(np.float32)
    si = np.stack([rng.permutation(10)[:3] for _ in range(8)], 1)
    su = rng.standard_normal((3, 8)).astype(np.float32)
    node_case("test_index_scatter_opset9",
              [mk("Scatter", ["x", "si", "su"], ["y"], axis=0)],
              [("x", x), ("si", si.astype(np.int64)), ("su", su)],
              [("y", scatter_ref(x, [(si[r, c], c) for r in range(3)
                                     for c in range(8)],
                                 su.reshape(-1), "none"))], 9)
    kv = rng.standard_normal((2, 16, 8)).astype(np.float32)
    pos = np.array([[0, 5], [0, 6], [1, 5], [1, 6], [1, 6]], np.int64)
    new = rng.standard_normal((5, 8)).astype(np.float32)
    node_case("test_index_scatternd_cache_runs_device",
              [mk("ScatterND", ["kv", "pos", "new"], ["y"])],
              [("kv", kv), ("pos", pos), ("new", new)],
              [("y", scatter_ref(kv, [tuple(p) for p in pos], new,
                                 "none"))], 13)


def index_map_cases():
    """Compress (on an axis and flattened, a condition shorter than the
    axis), Trilu (k given, above and below), ReverseSequence on device
    data; OneHot in its opset 9 form (negative indices are off)."""
    rng = np.random.default_rng(1503)
    mk = helper.make_node
    x = rng.standard_normal((6, 7, 3)).astype(np.float32)
    c1 = np.array([1, 0, 1, 1, 0, 0, 1], bool)
    c2 = rng.integers(0, 2, 100).astype(bool)
    k = np.array(-1, np.int64)
    node_case("test_index_compress_trilu_device",
              [mk("Compress", ["x", "c1"], ["y1"], axis=1),
               mk("Compress", ["x", "c2"], ["y2"]),
               mk("Trilu", ["x", "k"], ["y3"]),
               mk("Trilu", ["x", "k"], ["y4"], upper=0)],
              [("x", x), ("c1", c1), ("c2", c2)],
              [("y1", np.compress(c1, x, axis=1)),
               ("y2", np.compress(c2, x.reshape(-1))),
               ("y3", np.triu(x, -1)), ("y4", np.tril(x, -1))], 14,
              initializers=[("k", k)])
    s = rng.standard_normal((7, 6, 3)).astype(np.float32)
    lens = np.array([7, 0, 3, 1, 5, 2], np.int64)
    ys = s.copy()
    for b, n in enumerate(lens):
        ys[:n, b] = s[:n, b][::-1]
    node_case("test_index_reversesequence_device",
              [mk("ReverseSequence", ["s", "l"], ["y"], batch_axis=1,
                  time_axis=0)],
              [("s", s), ("l", lens)], [("y", ys)], 10)
    oi = np.array([[0, -1, 3], [2, 4, 1]], np.int64)
    depth = np.array(4, np.int64)
    vals = np.array([-2.0, 5.0], np.float32)
    oh = np.full((2, 4, 3), -2.0, np.float32)
    for a in range(2):
        for b in range(3):
            if 0 <= oi[a, b] < 4:
                oh[a, oi[a, b], b] = 5.0
    node_case("test_index_onehot_opset9_negative_off",
              [mk("OneHot", ["i", "d", "v"], ["y"], axis=1)],
              [("i", oi), ("v", vals)], [("y", oh)], 9,
              initializers=[("d", depth)])


def index_host_cases():
    """Unique with an axis, not sorted (all four outputs), NonZero of
    integers, Range in int64, EyeLike of another type and Size: computed
    on the host when the plan is made (scalars are initializers, or
    reshaped: node_case writes a scalar's data as rank 1)."""
    mk = helper.make_node
    u = np.array([[2, 1, 2], [0, 5, 0], [2, 1, 2], [0, 5, 0], [1, 1, 1]],
                 np.int64)
    node_case("test_index_unique_axis_unsorted",
              [mk("Unique", ["u"], ["y", "first", "inverse", "counts"],
                  axis=0, sorted=0)],
              [("u", u)],
              [("y", u[[0, 1, 4]]), ("first", np.array([0, 1, 4], np.int64)),
               ("inverse", np.array([0, 1, 0, 1, 2], np.int64)),
               ("counts", np.array([2, 2, 1], np.int64))], 11)
    nz = np.array([[0, 3, 0, -1], [7, 0, 0, 2], [0, 0, 0, 0]], np.int32)
    x = np.zeros((3, 5), np.float32)
    eye = np.eye(3, 5, k=2, dtype=np.int64)
    node_case("test_index_nonzero_range_eyelike_size",
              [mk("NonZero", ["nz"], ["y1"]),
               mk("Squeeze", ["a1", "zero"], ["a"]),
               mk("Range", ["a", "b", "c"], ["y2"]),
               mk("EyeLike", ["x"], ["y3"], dtype=TensorProto.INT64, k=2),
               mk("Size", ["x"], ["n"]),
               mk("Reshape", ["n", "one"], ["y4"])],
              [("nz", nz), ("x", x), ("a1", np.array([10], np.int64))],
              [("y1", np.array(np.nonzero(nz), np.int64)),
               ("y2", np.array([10, 6, 2, -2], np.int64)), ("y3", eye),
               ("y4", np.array([15], np.int64))], 13,
              initializers=[("one", np.array([1], np.int64)),
                            ("zero", np.array([0], np.int64)),
                            ("b", np.array(-3, np.int64)),
                            ("c", np.array(-4, np.int64))])


def ref_convtranspose(x, w, b, group, strides, dilations, pads_begin, out):
    """Plain loops over every input position and kernel tap: x (N, C, D...),
    w (C, M / group, k...), the output of spatial shape out."""
    n, c = x.shape[:2]
    cog, ks = w.shape[1], w.shape[2:]
    cig = c // group
    y = np.zeros((n, cog * group) + tuple(out), np.float64)
    for j in np.ndindex(*x.shape[2:]):
        for q in np.ndindex(*ks):
            o = tuple(j[i] * strides[i] + q[i] * dilations[i] - pads_begin[i]
                      for i in range(len(ks)))
            if any(v < 0 or v >= out[i] for i, v in enumerate(o)):
                continue
            for g in range(group):
                xs = x[(slice(None), slice(g * cig, (g + 1) * cig)) + j]
                ws = w[(slice(g * cig, (g + 1) * cig), slice(None)) + q]
                y[(slice(None), slice(g * cog, (g + 1) * cog)) + o] += xs @ ws
    if b is not None:
        y += b.reshape((1, -1) + (1,) * len(ks))
    return y.astype(np.float32)


def nn_cases():
    """The neural-network and signal operators' forms the ONNX node cases
    leave out: ConvTranspose with groups, a bias, output_padding, mixed
    strides and dilations, and an output_shape smaller than its natural
    size (opset 9); InstanceNormalization of a 1-D signal;
    MeanVarianceNormalization over a middle axis (moved last and back);
    DFT along an axis that is not the last but one, zero-padded and
    one-sided, and an inverse complex one cut short; STFT without a
    window, two-sided; a symmetric window in double."""
    rng = np.random.default_rng(1515)
    mk = helper.make_node

    def rnd(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    x, w, b = rnd(2, 4, 3, 3), rnd(4, 3, 3, 2), rnd(6)
    # natural size: s (in - 1) + output_padding + (k - 1) d + 1 - pads
    out = [2 * 2 + 1 + 2 + 1 - 1 - 0, 1 * 2 + 0 + 1 * 2 + 1 - 0 - 1]
    node_case("test_nn_convtranspose_groups_bias",
              [mk("ConvTranspose", ["x", "w", "b"], ["y"], group=2,
                  strides=[2, 1], dilations=[1, 2], pads=[1, 0, 0, 1],
                  output_padding=[1, 0])],
              [("x", x)],
              [("y", ref_convtranspose(x, w, b, 2, [2, 1], [1, 2], [1, 0],
                                       out))], 13,
              initializers=[("w", w), ("b", b)])
    x, w = rnd(1, 2, 4), rnd(2, 3, 3)
    # natural 3 * 3 + 3 = 12; output_shape 10: a total padding of 2
    node_case("test_nn_convtranspose_1d_output_shape_opset9",
              [mk("ConvTranspose", ["x", "w"], ["y"], strides=[3],
                  output_shape=[10])],
              [("x", x), ("w", w)],
              [("y", ref_convtranspose(x, w, None, 1, [3], [1], [1], [10]))],
              9)
    x, sc, bi = rnd(2, 3, 7), rnd(3), rnd(3)
    mean = x.mean(axis=2, keepdims=True)
    var = x.var(axis=2, keepdims=True)
    node_case("test_nn_instancenorm_1d",
              [mk("InstanceNormalization", ["x", "s", "b"], ["y"],
                  epsilon=1e-3)],
              [("x", x), ("s", sc), ("b", bi)],
              [("y", ((x - mean) / np.sqrt(var + 1e-3) * sc.reshape(1, 3, 1)
                      + bi.reshape(1, 3, 1)).astype(np.float32))], 6)
    x = rnd(2, 5, 3)
    mean = x.mean(axis=1, keepdims=True)
    std = np.sqrt(x.var(axis=1, keepdims=True))
    node_case("test_nn_mvn_middle_axis",
              [mk("MeanVarianceNormalization", ["x"], ["y"], axes=[1])],
              [("x", x)],
              [("y", ((x - mean) / (std + 1e-9)).astype(np.float32))], 13)
    x = rnd(2, 5, 3, 1)
    f = np.fft.rfft(x[..., 0].astype(np.float64), n=8, axis=1)
    node_case("test_nn_dft_middle_axis_onesided_padded",
              [mk("DFT", ["x", "len"], ["y"], axis=1, onesided=1)],
              [("x", x)],
              [("y", np.stack([f.real, f.imag], -1).astype(np.float32))], 17,
              initializers=[("len", np.array(8, np.int64))])
    x = rnd(3, 6, 2)
    f = np.fft.ifft(x[..., 0] + 1j * x[..., 1], n=4, axis=1)
    node_case("test_nn_dft_inverse_complex_cut",
              [mk("DFT", ["x", "len"], ["y"], axis=1, inverse=1)],
              [("x", x)],
              [("y", np.stack([f.real, f.imag], -1).astype(np.float32))], 17,
              initializers=[("len", np.array(4, np.int64))])
    x = rnd(2, 11, 1)
    frames = np.stack([x[:, i * 3:i * 3 + 4, 0] for i in range(3)], 1)
    f = np.fft.fft(frames.astype(np.float64), axis=2)
    node_case("test_nn_stft_no_window_two_sided",
              [mk("STFT", ["x", "step", "", "flen"], ["y"], onesided=0)],
              [("x", x)],
              [("y", np.stack([f.real, f.imag], -1).astype(np.float32))], 17,
              initializers=[("step", np.array(3, np.int64)),
                            ("flen", np.array(4, np.int64))])
    k = np.arange(5)
    node_case("test_nn_blackmanwindow_symmetric_double",
              [mk("BlackmanWindow", ["n"], ["y"], periodic=0,
                  output_datatype=TensorProto.DOUBLE)],
              [], [("y", 0.42 - 0.5 * np.cos(2 * np.pi * k / 4)
                    + 0.08 * np.cos(4 * np.pi * k / 4))], 17,
              initializers=[("n", np.array(5, np.int64))])


def einsum_cases():
    """Einsum forms beyond the ONNX node cases: an ellipsis broadcast
    between operands, an implicit output, three operands, a trace summed
    with another axis, an outer product, attention's scores."""
    rng = np.random.default_rng(1516)
    mk = helper.make_node

    def rnd(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    cases = [
        ("broadcast_ellipsis", "...ij,...jk->...ik",
         [rnd(2, 1, 3, 4), rnd(5, 4, 2)]),
        ("implicit_output", "ij,jk", [rnd(3, 4), rnd(4, 2)]),
        ("three_operands", "ij,jk,kl->il", [rnd(2, 3), rnd(3, 4), rnd(4, 5)]),
        ("trace_and_sum", "iij->j", [rnd(3, 3, 4)]),
        ("outer_product", "i,j->ij", [rnd(3), rnd(4)]),
        ("attention_scores", "bhqd,bhkd->bhqk",
         [rnd(2, 3, 4, 5), rnd(2, 3, 6, 5)]),
        ("sum_both_sides", "ij,kj->k", [rnd(3, 4), rnd(2, 4)]),
    ]
    for name, equation, ops in cases:
        names = ["x%d" % i for i in range(len(ops))]
        node_case("test_nn_einsum_" + name,
                  [mk("Einsum", names, ["y"], equation=equation)],
                  list(zip(names, ops)),
                  [("y", np.asarray(np.einsum(
                      equation, *[o.astype(np.float64) for o in ops]),
                      np.float32))], 12)


def det_cases():
    """Det on the device (inputs too large to be bound by value: signed
    products of 1 x 1, 2 x 2 and 3 x 3 matrices) and of 4 x 4 constants
    on the host."""
    rng = np.random.default_rng(1517)
    mk = helper.make_node
    for m, batch in ((1, 70), (2, 20), (3, 10)):
        x = rng.standard_normal((batch, m, m)).astype(np.float32)
        node_case("test_nn_det_device_%dx%d" % (m, m),
                  [mk("Det", ["x"], ["y"])], [("x", x)],
                  [("y", np.linalg.det(x.astype(np.float64))
                    .astype(np.float32))], 11)
    w = rng.standard_normal((2, 4, 4)).astype(np.float32)
    x = rng.standard_normal((2,)).astype(np.float32)
    node_case("test_nn_det_host_4x4_constant",
              [mk("Det", ["w"], ["d"]), mk("Add", ["x", "d"], ["y"])],
              [("x", x)],
              [("y", (x + np.linalg.det(w.astype(np.float64)))
                .astype(np.float32))], 11, initializers=[("w", w)])


def quant_cases():
    """QuantizeLinear and DequantizeLinear on the device (inputs too
    large to be bound by value): per axis into int8 with halves that must
    round to even, quantized then dequantized on the device; per tensor
    into uint8 without a zero point (negatives saturate to 0)."""
    rng = np.random.default_rng(1518)
    mk = helper.make_node
    scale = np.array([0.5, 0.25, 2.0], np.float32)
    zp = np.array([-3, 0, 7], np.int8)
    # halves of each channel's step, and values far out of range
    k = rng.integers(-300, 300, (2, 3, 4, 5)).astype(np.float32) + 0.5
    x = (k * scale.reshape(1, 3, 1, 1)).astype(np.float32)
    q = np.clip(np.rint(x / scale.reshape(1, 3, 1, 1))
                + zp.reshape(1, 3, 1, 1), -128, 127).astype(np.int8)
    dq = ((q.astype(np.float32) - zp.reshape(1, 3, 1, 1).astype(np.float32))
          * scale.reshape(1, 3, 1, 1)).astype(np.float32)
    node_case("test_nn_quantize_dequantize_axis_device",
              [mk("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
               mk("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
              [("x", x)], [("q", q), ("y", dq)], 13,
              initializers=[("s", scale), ("z", zp)])
    x = (rng.standard_normal((100,)) * 3).astype(np.float32)
    s1 = np.array(0.05, np.float32)
    q = np.clip(np.rint(x / s1), 0, 255).astype(np.uint8)
    node_case("test_nn_quantize_uint8_no_zero_point_device",
              [mk("QuantizeLinear", ["x", "s"], ["y"])],
              [("x", x)], [("y", q)], 10, initializers=[("s", s1)])



def loss_cases():
    """NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss on the device
    (inputs of more than 64 elements): weights, a negative ignore_index,
    every reduction, the log_prob output, a target of rank 2."""
    mk = helper.make_node
    rng = np.random.default_rng(1504)
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    t = rng.integers(0, 5, (4, 6)).astype(np.int64)
    t[0, 1] = t[2, 3] = -3
    w = rng.uniform(0.5, 2.0, 5).astype(np.float32)

    def nll(lp, red, weight, ii):
        keep = t != ii
        tc = np.where(keep, t, 0)
        picked = np.take_along_axis(lp.astype(np.float64), tc[:, None, :],
                                    1)[:, 0, :]
        wt = (weight[tc] if weight is not None else np.ones_like(picked))
        wt = np.where(keep, wt, 0.0)
        loss = -picked * wt
        if red == "none":
            return loss.astype(np.float32)
        if red == "sum":
            return np.array(loss.sum(), np.float32)
        return np.array(loss.sum() / wt.sum(), np.float32)
    node_case("test_loss_nll_weight_ignore_device",
              [mk("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["a"],
                  reduction="none", ignore_index=-3),
               mk("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["b0"],
                  reduction="sum", ignore_index=-3),
               mk("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["c0"],
                  ignore_index=-3),
               # scalars reshaped: node_case writes rank-0 data as rank 1
               mk("Reshape", ["b0", "one"], ["b"]),
               mk("Reshape", ["c0", "one"], ["c"])],
              [("x", x), ("t", t)],
              [("a", nll(x, "none", w, -3)),
               ("b", nll(x, "sum", w, -3).reshape(1)),
               ("c", nll(x, "mean", w, -3).reshape(1))],
              13, initializers=[("w", w), ("one", np.array([1], np.int64))])
    m = x.astype(np.float64).max(axis=1, keepdims=True)
    lp = x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    t = np.where(t < 0, 1, t)
    node_case("test_loss_sce_log_prob_device",
              [mk("SoftmaxCrossEntropyLoss", ["x", "t"], ["a0", "lp"]),
               mk("Reshape", ["a0", "one"], ["a"]),
               mk("SoftmaxCrossEntropyLoss", ["x", "t"], ["b"],
                  reduction="none")],
              [("x", x), ("t", t)],
              [("a", nll(lp, "mean", None, -100).reshape(1)),
               ("lp", lp.astype(np.float32)),
               ("b", nll(lp, "none", None, -100))], 13,
              initializers=[("one", np.array([1], np.int64))])


def control_cases():
    """If, Loop and Scan (lowered inline, subgraphs reading the values of
    the graphs around them): a Loop whose body holds an If, both reading
    a value computed on the device two scopes out, between nodes on the
    device (so that a layer split has places to cut around them); Scan
    along inner axes, backwards, in both opset forms; a Loop that runs no
    iterations; and, as model files of their own, the hostile forms:
    branches with different output counts, a trip count too big to unroll,
    a Scan axis out of range, a subgraph naming a value nothing
    defines."""
    rng = np.random.default_rng(1515)
    mk = helper.make_node
    f32 = TensorProto.FLOAT

    def vi(name, elem=f32, shape=None):
        return helper.make_tensor_value_info(name, elem, shape)

    def graph(nodes, name, ins, outs, inits=()):
        return helper.make_graph(nodes, name, ins, outs,
                                 initializer=list(inits))

    x = rng.standard_normal((2, 3)).astype(np.float32)
    two = np.array(2.0, np.float32)
    for flag in (True, False):
        then_g = graph([mk("Add", ["acc_in", "k"], ["t"])], "then",
                       [], [vi("t")])
        else_g = graph([mk("Sub", ["acc_in", "k"], ["e"])], "else",
                       [], [vi("e")])
        body = graph(
            [mk("Identity", ["cond_in"], ["cond_out"]),
             mk("If", ["flag"], ["acc_if"], then_branch=then_g,
                else_branch=else_g),
             mk("Mul", ["acc_if", "h"], ["acc_out"]),
             mk("Mul", ["acc_out", "two"], ["scan"])],
            "body",
            [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL,
                                                []), vi("acc_in")],
            [vi("cond_out", TensorProto.BOOL, []), vi("acc_out"),
             vi("scan")],
            [numpy_helper.from_array(two, "two")])
        nodes = [mk("Relu", ["x"], ["h"]),
                 mk("Mul", ["x", "x"], ["k"]),
                 mk("Loop", ["n", "", "x"], ["acc", "scans"], body=body),
                 mk("Add", ["acc", "h"], ["y"]),
                 mk("Sigmoid", ["scans"], ["z"])]
        h, k = np.maximum(x, 0), x * x
        acc, scans = x.copy(), []
        for _ in range(3):
            acc = ((acc + k) if flag else (acc - k)) * h
            scans.append(acc * two)
        z = 1 / (1 + np.exp(-np.stack(scans)))
        node_case("test_control_loop_if_outer_" + ("then" if flag
                                                    else "else"),
                  nodes, [("x", x), ("n", np.array(3, np.int64)),
                          ("flag", np.array(flag))],
                  [("y", (acc + h).astype(np.float32)),
                   ("z", z.astype(np.float32))], 13)

    # A Loop of no iterations: the initial values, an empty scan output.
    body = graph([mk("Identity", ["c"], ["c_out"]),
                  mk("Add", ["v", "v"], ["v_out"]),
                  mk("Identity", ["v_out"], ["s"])], "body",
                 [vi("i", TensorProto.INT64, []),
                  vi("c", TensorProto.BOOL, []), vi("v")],
                 [vi("c_out", TensorProto.BOOL, []), vi("v_out"),
                  vi("s", f32, [2, 3])])
    node_case("test_control_loop_zero_trips",
              [mk("Loop", ["n", "c", "x"], ["v", "s"], body=body)],
              [("x", x), ("n", np.array(0, np.int64)),
               ("c", np.array(True))],
              [("v", x), ("s", np.zeros((0, 2, 3), np.float32))], 11)

    # Scan 9+: a scan input cut along axis 1 read backwards, a scan output
    # stacked along axis 2, a state, and a weight of the graph outside.
    xs = rng.standard_normal((3, 4, 2)).astype(np.float32)
    s0 = rng.standard_normal((3, 2)).astype(np.float32)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    body = graph([mk("Add", ["s_in", "x_t"], ["s_out"]),
                  mk("Mul", ["s_out", "w"], ["y_t"])], "body",
                 [vi("s_in"), vi("x_t")], [vi("s_out"), vi("y_t")])
    s, ys = s0.copy(), []
    for t in reversed(range(4)):
        s = s + xs[:, t, :]
        ys.append(s * w)
    node_case("test_control_scan_axes_reverse",
              [mk("Scan", ["s0", "xs"], ["s", "ys"], body=body,
                  num_scan_inputs=1, scan_input_axes=[1],
                  scan_input_directions=[1], scan_output_axes=[2])],
              [("s0", s0), ("xs", xs)],
              [("s", s), ("ys", np.stack(ys, axis=2))], 11,
              initializers=[("w", w)])

    # Scan 8: a batch of two, each scanned on its own, backwards.
    xb = rng.standard_normal((2, 3, 4)).astype(np.float32)
    sb = rng.standard_normal((2, 4)).astype(np.float32)
    body = graph([mk("Add", ["s_in", "x_t"], ["s_out"]),
                  mk("Identity", ["s_out"], ["y_t"])], "body",
                 [vi("s_in"), vi("x_t")], [vi("s_out"), vi("y_t")])
    fin, outs = [], []
    for b in range(2):
        s, ys = sb[b].copy(), []
        for t in reversed(range(3)):
            s = s + xb[b, t]
            ys.append(s)
        fin.append(s)
        outs.append(np.stack(ys))
    node_case("test_control_scan8_batch_reverse",
              [mk("Scan", ["", "s0", "xs"], ["s", "ys"], body=body,
                  num_scan_inputs=1, directions=[1])],
              [("s0", sb), ("xs", xb)],
              [("s", np.stack(fin)), ("ys", np.stack(outs))], 8)

    # If on a condition computed on the device (a float: this branch has
    # no comparison operator to make a bool there; ONNX's checker would
    # want one): both branches planned, the run reads the condition.
    y = rng.standard_normal((2, 3)).astype(np.float32)
    for name, xc in (("then", rng.standard_normal(100).astype(np.float32)),
                     ("else", np.zeros(100, np.float32))):
        h = np.maximum(y, 0)
        res = h * two if xc.max() != 0 else -h
        node_case("test_control_if_device_condition_" + name,
                  [mk("Relu", ["y"], ["h"]),
                   mk("ReduceMax", ["x"], ["m"], keepdims=0),
                   mk("If", ["m"], ["r"],
                      then_branch=graph([mk("Mul", ["h", "two"], ["a"])],
                                        "then", [], [vi("a")],
                                        [numpy_helper.from_array(two,
                                                                 "two")]),
                      else_branch=graph([mk("Neg", ["h"], ["b"])], "else",
                                        [], [vi("b")])),
                   mk("Sigmoid", ["r"], ["z"])],
                  [("x", xc), ("y", y)],
                  [("z", (1 / (1 + np.exp(-res))).astype(np.float32))], 13)

    def save_model(name, nodes, ins, outs, inits=(), opset=13):
        model = helper.make_model(graph(nodes, name, ins, outs, inits),
                                  producer_name="make_cases",
                                  opset_imports=[helper.make_opsetid("",
                                                                     opset)])
        model.ir_version = 7
        onnx.save(model, out(name + ".onnx"))

    one = numpy_helper.from_array(np.ones((2,), np.float32), "one")
    save_model("control_if_branch_outputs_differ",
               [mk("Relu", ["x"], ["h"]),
                mk("If", ["c"], ["y"],
                   then_branch=graph([mk("Neg", ["h"], ["a"])], "then", [],
                                     [vi("a")]),
                   else_branch=graph([mk("Neg", ["h"], ["b"]),
                                      mk("Abs", ["h"], ["b2"])], "else", [],
                                     [vi("b"), vi("b2")]))],
               [vi("x", f32, [2]), vi("c", TensorProto.BOOL, [])],
               [vi("y", f32, [2])])
    body = graph([mk("Identity", ["c"], ["c_out"]),
                  mk("Add", ["v", "one"], ["v_out"])], "body",
                 [vi("i", TensorProto.INT64, []),
                  vi("c", TensorProto.BOOL, []), vi("v")],
                 [vi("c_out", TensorProto.BOOL, []), vi("v_out")])
    save_model("control_loop_huge_trip_count",
               [mk("Relu", ["x"], ["h"]),
                mk("Loop", ["n", "", "h"], ["y"], body=body)],
               [vi("x", f32, [2])], [vi("y", f32, [2])],
               [one, numpy_helper.from_array(np.array(1 << 40, np.int64),
                                             "n")])
    body = graph([mk("Add", ["s_in", "x_t"], ["s_out"])], "body",
                 [vi("s_in"), vi("x_t")], [vi("s_out")])
    save_model("control_scan_axis_out_of_range",
               [mk("Relu", ["x"], ["h"]),
                mk("Scan", ["s0", "h"], ["s"], body=body, num_scan_inputs=1,
                   scan_input_axes=[5])],
               [vi("x", f32, [3, 2]), vi("s0", f32, [2])], [vi("s", f32, [2])],
               opset=11)
    save_model("control_subgraph_reads_undefined",
               [mk("Relu", ["x"], ["h"]),
                mk("If", ["c"], ["y"],
                   then_branch=graph([mk("Neg", ["nowhere"], ["a"])],
                                     "then", [], [vi("a")]),
                   else_branch=graph([mk("Neg", ["h"], ["b"])], "else", [],
                                     [vi("b")]))],
               [vi("x", f32, [2]), vi("c", TensorProto.BOOL, [])],
               [vi("y", f32, [2])])


def spatial_cases():
    """Pad, Tile, Resize and Upsample at sizes that stay on the device (more
    than 64 floats), their older forms, sizes computed from a Shape."""
    from onnx.backend.test.case.node.resize import (
        cubic_coeffs, interpolate_nd, linear_coeffs, nearest_coeffs)
    rng = np.random.default_rng(1515)
    mk = helper.make_node

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    x = r(1, 3, 12, 16)
    sizes = np.array([1, 3, 24, 40], np.int64)
    node_case("test_spatial_resize_linear_sizes_device",
              [mk("Resize", ["x", "", "", "sizes"], ["y"], mode="linear")],
              [("x", x)],
              [("y", interpolate_nd(x, linear_coeffs, output_size=sizes)
                .astype(np.float32))], 13,
              initializers=[("sizes", sizes)])
    x = r(2, 4, 9, 11)
    scales = np.array([1, 1, 2, 0.5], np.float32)
    node_case("test_spatial_resize_nearest_floor_asymmetric_scales",
              [mk("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                  coordinate_transformation_mode="asymmetric",
                  nearest_mode="floor")],
              [("x", x)],
              [("y", interpolate_nd(
                  x, lambda t: nearest_coeffs(t, mode="floor"),
                  scale_factors=scales,
                  coordinate_transformation_mode="asymmetric")
                .astype(np.float32))], 13,
              initializers=[("scales", scales)])
    x = r(2, 10, 13)
    sizes = np.array([2, 7, 20], np.int64)
    node_case("test_spatial_resize_cubic_exclude_outside_3d",
              [mk("Resize", ["x", "roi", "scales", "sizes"], ["y"],
                  mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1)],
              [("x", x)],
              [("y", interpolate_nd(
                  x, lambda t: cubic_coeffs(t, A=-0.5), output_size=sizes,
                  exclude_outside=True).astype(np.float32))], 11,
              initializers=[("roi", np.zeros(0, np.float32)),
                            ("scales", np.zeros(0, np.float32)),
                            ("sizes", sizes)])
    x = r(1, 2, 10, 10)
    roi = np.array([0, 0, 0.1, -0.2, 1, 1, 0.9, 1.3], np.float32)
    sizes = np.array([1, 2, 6, 7], np.int64)
    node_case("test_spatial_resize_crop_and_resize_extrapolation",
              [mk("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear",
                  coordinate_transformation_mode="tf_crop_and_resize",
                  extrapolation_value=-3.0)],
              [("x", x)],
              [("y", interpolate_nd(
                  x, linear_coeffs, output_size=sizes, roi=roi,
                  coordinate_transformation_mode="tf_crop_and_resize",
                  extrapolation_value=-3.0).astype(np.float32))], 13,
              initializers=[("roi", roi), ("sizes", sizes)])
    # sizes made from the input's shape: Shape, Slice, Mul, Concat on the
    # host when the plan is made
    x = r(1, 2, 6, 8)
    node_case("test_spatial_resize_sizes_from_shape",
              [mk("Shape", ["x"], ["s"]),
               mk("Slice", ["s", "lo", "hi"], ["hw"]),
               mk("Mul", ["hw", "two"], ["hw2"]),
               mk("Slice", ["s", "zero", "lo"], ["nc"]),
               mk("Concat", ["nc", "hw2"], ["sizes"], axis=0),
               mk("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest",
                  coordinate_transformation_mode="half_pixel",
                  nearest_mode="round_prefer_ceil")],
              [("x", x)],
              [("y", interpolate_nd(
                  x, lambda t: nearest_coeffs(t, mode="round_prefer_ceil"),
                  output_size=[1, 2, 12, 16]).astype(np.float32))], 13,
              initializers=[("lo", np.array([2], np.int64)),
                            ("hi", np.array([4], np.int64)),
                            ("zero", np.array([0], np.int64)),
                            ("two", np.array([2], np.int64))])
    # Upsample-7 (scales an attribute) and Resize-10 (X, scales): the
    # asymmetric coordinates, nearest rounding down when growing
    x = r(1, 3, 5, 7)
    for name, op, opset, mode, coeffs in (
            ("test_spatial_upsample_nearest_opset7", "Upsample", 7,
             "nearest", lambda t: nearest_coeffs(t, mode="floor")),
            ("test_spatial_upsample_linear_opset7", "Upsample", 7, "linear",
             linear_coeffs)):
        node_case(name, [mk(op, ["x"], ["y"], mode=mode,
                            scales=[1.0, 1.0, 2.0, 3.0])],
                  [("x", x)],
                  [("y", interpolate_nd(
                      x, coeffs, scale_factors=np.array([1, 1, 2, 3.0]),
                      coordinate_transformation_mode="asymmetric")
                    .astype(np.float32))], opset)
    scales = np.array([1, 1, 3, 2], np.float32)
    node_case("test_spatial_resize_nearest_opset10",
              [mk("Resize", ["x", "scales"], ["y"], mode="nearest")],
              [("x", x)],
              [("y", interpolate_nd(
                  x, lambda t: nearest_coeffs(t, mode="floor"),
                  scale_factors=scales,
                  coordinate_transformation_mode="asymmetric")
                .astype(np.float32))], 10,
              initializers=[("scales", scales)])
    # Pad: the opset-2 attribute form with a crop, reflect and edge on the
    # device, Pad-1's 'paddings'
    x = r(2, 3, 6, 7)
    node_case("test_spatial_pad_constant_crop_opset2",
              [mk("Pad", ["x"], ["y"], mode="constant", value=1.5,
                  pads=[0, -1, 2, 1, 0, 1, -2, 3])],
              [("x", x)],
              [("y", np.pad(x[:, 1:, :4, :], ((0, 0), (0, 1), (2, 0), (1, 3)),
                            constant_values=1.5))], 2)
    node_case("test_spatial_pad_constant_opset1_paddings",
              [mk("Pad", ["x"], ["y"], paddings=[0, 0, 1, 2, 0, 0, 3, 0])],
              [("x", x)],
              [("y", np.pad(x, ((0, 0), (0, 0), (1, 3), (2, 0))))], 1)
    pads = np.array([0, 1, 3, 2, 1, 0, 2, -3], np.int64)
    node_case("test_spatial_pad_reflect_crop_device",
              [mk("Pad", ["x", "pads"], ["y"], mode="reflect")],
              [("x", x)],
              [("y", np.pad(x, ((0, 1), (1, 0), (3, 2), (2, 0)),
                            mode="reflect")[:, :, :, :-3])], 13,
              initializers=[("pads", pads)])
    pads = np.array([1, 0, 2, 5, 0, 2, 1, 4], np.int64)
    node_case("test_spatial_pad_edge_device",
              [mk("Pad", ["x", "pads", "v"], ["y"], mode="edge")],
              [("x", x)],
              [("y", np.pad(x, ((1, 0), (0, 2), (2, 1), (5, 4)),
                            mode="edge"))], 11,
              initializers=[("pads", pads),
                            ("v", np.array(0, np.float32))])
    pads = np.array([0, 0, 2, 1, 0, 0, 1, 2], np.int64)
    node_case("test_spatial_pad_constant_value_input_device",
              [mk("Pad", ["x", "pads", "v"], ["y"])],
              [("x", x)],
              [("y", np.pad(x, ((0, 0), (0, 0), (2, 1), (1, 2)),
                            constant_values=-0.25))], 13,
              initializers=[("pads", pads),
                            ("v", np.array(-0.25, np.float32))])
    # Tile of rank 5 (ten axes in one copy: more than a step takes)
    x = r(2, 3, 4, 2, 3)
    reps = np.array([2, 1, 2, 3, 2], np.int64)
    node_case("test_spatial_tile_rank5_device",
              [mk("Tile", ["x", "reps"], ["y"])],
              [("x", x)], [("y", np.tile(x, reps))], 13,
              initializers=[("reps", reps)])
    xi = rng.integers(-50, 50, (2, 3, 4)).astype(np.int64)
    node_case("test_spatial_tile_int64_host",
              [mk("Tile", ["x", "reps"], ["y"])],
              [("x", xi)], [("y", np.tile(xi, [1, 2, 3]))], 13,
              initializers=[("reps", np.array([1, 2, 3], np.int64))])


def spatial_lrn_unpool_cases():
    """LRN of an even size on a 3-D input; MaxUnpool with its default
    output shape and with a larger one given."""
    rng = np.random.default_rng(1516)
    mk = helper.make_node
    x = rng.standard_normal((2, 7, 13)).astype(np.float32)
    size, alpha, beta, bias = 4, 0.02, 0.6, 1.5
    sq = np.zeros_like(x)
    for c in range(x.shape[1]):
        lo = max(0, c - (size - 1) // 2)
        hi = min(x.shape[1] - 1, c + (size - 1 + 1) // 2)
        sq[:, c] = (x[:, lo:hi + 1] ** 2).sum(axis=1)
    y = (x / (bias + alpha / size * sq) ** beta).astype(np.float32)
    node_case("test_spatial_lrn_even_size_3d",
              [mk("LRN", ["x"], ["y"], size=size, alpha=alpha, beta=beta,
                  bias=bias)],
              [("x", x)], [("y", y)], 13)
    # MaxUnpool: 2 x 3 maps of 4 x 5 from a 2 x 2 pool, stride 2
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    out_shape = (2, 3, 8, 10)
    idx = np.zeros(x.shape, np.int64)
    y = np.zeros(out_shape, np.float32)
    for n in range(2):
        for c in range(3):
            for i in range(4):
                for j in range(5):
                    yy = 2 * i + rng.integers(0, 2)
                    xx = 2 * j + rng.integers(0, 2)
                    flat = ((n * 3 + c) * 8 + yy) * 10 + xx
                    idx[n, c, i, j] = flat
                    y.reshape(-1)[flat] = x[n, c, i, j]
    node_case("test_spatial_maxunpool_default_shape",
              [mk("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2],
                  strides=[2, 2])],
              [("x", x), ("i", idx)], [("y", y)], 11)
    # indices count in the pooled shape; output_shape's extra rows and
    # columns (at the end) stay zero, as ONNX's own case has it
    y2 = np.zeros((2, 3, 9, 11), np.float32)
    y2[:, :, :8, :10] = y
    node_case("test_spatial_maxunpool_output_shape_larger",
              [mk("MaxUnpool", ["x", "i", "shape"], ["y"],
                  kernel_shape=[2, 2], strides=[2, 2])],
              [("x", x), ("i", idx)], [("y", y2)], 11,
              initializers=[("shape", np.array([2, 3, 9, 11], np.int64))])



def dynamic(x):
    """DynamicQuantizeLinear in the definition's float32 steps: y (uint8),
    scale, zero point."""
    hi = np.float32(max(0.0, x.max()))
    lo = np.float32(min(0.0, x.min()))
    rng_ = np.float32(1.0) if hi == lo else np.float32(hi - lo)
    s = np.float32(rng_ / np.float32(255))
    z = np.round(np.clip(np.float32(0) - lo / s, 0, 255))
    y = np.clip(np.round(x / s) + z, 0, 255)
    return (y.astype(np.uint8), np.array(s, np.float32),
            np.array(z, np.uint8))


def quant_device_cases():
    """DynamicQuantizeLinear on the device (an input too large to be bound
    by value; one all negative), and MatMulInteger on the device fed by
    it and by QuantizeLinear, with zero points per row and per column."""
    rng = np.random.default_rng(1519)
    mk = helper.make_node
    # the scale and zero point (scalars) checked through a dequantization
    for name, x in (("", rng.standard_normal((8, 16)).astype(np.float32)),
                    ("_negative", -np.abs(rng.standard_normal((70,)))
                     .astype(np.float32))):
        y, s, z = dynamic(x)
        dq = ((y.astype(np.float32) - np.float32(z)) * s).astype(np.float32)
        node_case("test_nn_dynamicquantizelinear_device" + name,
                  [mk("DynamicQuantizeLinear", ["x"], ["y", "s", "z"]),
                   mk("DequantizeLinear", ["y", "s", "z"], ["dq"])],
                  [("x", x)], [("y", y), ("dq", dq)], 11)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.integers(-128, 128, (16, 5)).astype(np.int8)
    bz = rng.integers(-5, 5, (5,)).astype(np.int8)
    y, s, z = dynamic(x)
    ref = ((y.astype(np.int64) - int(z)) @ (b.astype(np.int64) - bz)
           ).astype(np.int32)
    node_case("test_nn_matmulinteger_after_dynamic_device",
              [mk("DynamicQuantizeLinear", ["x"], ["y", "s", "z"]),
               mk("MatMulInteger", ["y", "b", "z", "bz"], ["out"])],
              [("x", x)], [("out", ref)], 11,
              initializers=[("b", b), ("bz", bz)])
    x = rng.standard_normal((2, 4, 12)).astype(np.float32)
    sc = np.array(0.02, np.float32)
    az = np.array([3, -2, 0, 1], np.int8)
    b = rng.integers(-128, 128, (12, 3)).astype(np.int8)
    q = np.clip(np.rint(x / sc), -128, 127).astype(np.int8)
    ref = ((q.astype(np.int64) - az.reshape(4, 1)) @ b.astype(np.int64)
           ).astype(np.int32)
    node_case("test_nn_matmulinteger_per_row_device",
              [mk("QuantizeLinear", ["x", "s", "zero"], ["q"]),
               mk("MatMulInteger", ["q", "b", "az"], ["out"])],
              [("x", x)], [("out", ref)], 13,
              initializers=[("s", sc), ("zero", np.array(0, np.int8)),
                            ("b", b), ("az", az)])

def qlinear_matmul_device_cases():
    """QLinearMatMul on the device, its a computed there by QuantizeLinear
    (a QOperator model's form): uint8 by uint8 batched, uint8 by int8 with
    scales and zero points per column and K = 2000 (summed in runs of K
    that stay exact), int8 by int8 with a's scale and zero point per row;
    expected: ONNX Runtime's arithmetic, the exact integer sums as float32
    times the float32 multiplier a_scale b_scale / y_scale, rounded half to
    even, plus y_zero_point, saturated."""
    rng = np.random.default_rng(1818)
    mk = helper.make_node
    f32 = np.float32

    def quantize(x, s, z, lo, hi, axis_rows=False):
        s = s.reshape(-1, 1) if axis_rows else s
        z = z.reshape(-1, 1) if axis_rows else z
        return np.clip(np.rint(x / s) + z.astype(np.int64), lo, hi)

    def case(name, x, xs, xz, b, bs, bz, ys, yz, rows=False):
        ta, tb, ty = xz.dtype, b.dtype, yz.dtype
        alo, ahi = (-128, 127) if ta == np.int8 else (0, 255)
        ylo, yhi = (-128, 127) if ty == np.int8 else (0, 255)
        a = quantize(x, xs, xz, alo, ahi, rows).astype(np.int64)
        za = xz.astype(np.int64).reshape(-1, 1) if rows else int(xz)
        zb = bz.astype(np.int64)
        acc = (a - za) @ (b.astype(np.int64) - zb)
        mult = ((xs.reshape(-1, 1) if rows else xs) * bs / ys).astype(f32)
        v = acc.astype(f32) * mult
        y = np.clip(np.rint(v) + int(yz), ylo, yhi).astype(ty)
        node_case(name,
                  [mk("QuantizeLinear", ["x", "xs", "xz"], ["a"],
                      **({"axis": 0} if rows else {})),
                   mk("QLinearMatMul",
                      ["a", "xs", "xz", "b", "bs", "bz", "ys", "yz"], ["y"])],
                  [("x", x)], [("y", y)], 13,
                  initializers=[("xs", xs), ("xz", xz), ("b", b),
                                ("bs", bs), ("bz", bz), ("ys", ys),
                                ("yz", yz)])
        return y

    x = rng.uniform(-2.5, 2.5, (2, 5, 300)).astype(f32)
    case("test_sn_qlinearmatmul_device_u8_batched_opset13", x,
         np.array(0.02, f32), np.array(128, np.uint8),
         rng.integers(0, 256, (300, 64)).astype(np.uint8),
         np.array(0.01, f32), np.array(120, np.uint8),
         np.array(2.0, f32), np.array(100, np.uint8))
    x = rng.uniform(-0.3, 0.3, (6, 2000)).astype(f32)
    case("test_sn_qlinearmatmul_device_per_column_long_k_opset13", x,
         np.array(0.02, f32), np.array(128, np.uint8),
         rng.integers(-128, 128, (2000, 33)).astype(np.int8),
         rng.uniform(0.002, 0.02, 33).astype(f32),
         np.zeros(33, np.int8), np.array(0.3, f32), np.array(128, np.uint8))
    x = rng.uniform(-1.0, 1.0, (6, 77)).astype(f32)
    case("test_sn_qlinearmatmul_device_int8_per_row_opset13", x,
         rng.uniform(0.005, 0.01, 6).astype(f32),
         rng.integers(-5, 5, 6).astype(np.int8),
         rng.integers(-128, 128, (77, 20)).astype(np.int8),
         rng.uniform(0.002, 0.02, 20).astype(f32),
         np.zeros(20, np.int8), np.array(0.05, f32), np.array(3, np.int8),
         rows=True)


def qlinear_conv_device_cases():
    """QLinearConv and ConvInteger on the device, their input computed there
    by QuantizeLinear: 3 x 3 with int32 bias and weights' scales per
    channel; 256 channels (sums in runs of the reduced axis that stay
    exact); depthwise with stride 2; grouped and dilated uint8 weights with
    zero points per channel; ConvInteger's int32 sums.  Expected: the exact
    integer sums (float64 loops), then ONNX Runtime's requantization: the
    sum and bias as float32 times the float32 x_scale w_scale / y_scale,
    rounded half to even, plus y_zero_point, saturated."""
    rng = np.random.default_rng(1919)
    mk = helper.make_node
    f32 = np.float32

    def int_conv(a, w, group, stride, pad, dil):
        m, cg = w.shape[0], w.shape[1]
        mg = m // group
        return np.concatenate(
            [ref_conv(a[:, g * cg:(g + 1) * cg].astype(np.float64),
                      w[g * mg:(g + 1) * mg].astype(np.float64),
                      np.zeros(mg), [stride] * 2, [pad] * 4, [dil] * 2,
                      np.float64) for g in range(group)],
            axis=1).astype(np.int64)

    def case(name, shape, m, k, group=1, stride=1, pad=1, dil=1,
             wtype=np.int8, bias=True, xr=2.0, ys=0.5):
        c = shape[1]
        x = rng.uniform(-xr, xr, shape).astype(f32)
        xs, xz = np.array(0.02, f32), np.array(128, np.uint8)
        lo, hi = (-128, 127) if wtype == np.int8 else (0, 255)
        w = rng.integers(lo, hi + 1, (m, c // group, k, k)).astype(wtype)
        ws = rng.uniform(0.002, 0.02, m).astype(f32)
        wz = (np.zeros(m) if wtype == np.int8
              else rng.integers(100, 150, m)).astype(wtype)
        b = rng.integers(-5000, 5000, m).astype(np.int32)
        a = np.clip(np.rint(x / xs) + 128, 0, 255).astype(np.int64)
        acc = int_conv(a - 128, w.astype(np.int64) - wz.reshape(-1, 1, 1, 1)
                       .astype(np.int64), group, stride, pad, dil)
        if bias:
            acc = acc + b.reshape(1, m, 1, 1)
        mult = (xs * ws / np.array(ys, f32)).astype(f32).reshape(1, m, 1, 1)
        y = np.clip(np.rint(acc.astype(f32) * mult) + 100, 0, 255)
        attrs = dict(group=group, strides=[stride] * 2, pads=[pad] * 4,
                     dilations=[dil] * 2, kernel_shape=[k, k])
        ins = ["a", "xs", "xz", "w", "ws", "wz", "ys", "yz"] + \
            (["b"] if bias else [])
        node_case(name,
                  [mk("QuantizeLinear", ["x", "xs", "xz"], ["a"]),
                   mk("QLinearConv", ins, ["y"], **attrs)],
                  [("x", x)], [("y", y.astype(np.uint8))], 13,
                  initializers=[("xs", xs), ("xz", xz), ("w", w), ("ws", ws),
                                ("wz", wz), ("ys", np.array(ys, f32)),
                                ("yz", np.array(100, np.uint8))] +
                  ([("b", b)] if bias else []))

    case("test_sn_qlinearconv_device_3x3_bias_opset13", (2, 8, 10, 12), 16, 3)
    case("test_sn_qlinearconv_device_256_channels_opset13", (1, 256, 6, 6),
         20, 3, xr=2.6)
    case("test_sn_qlinearconv_device_depthwise_opset13", (2, 32, 11, 11), 32,
         3, group=32, stride=2)
    case("test_sn_qlinearconv_device_grouped_uint8_opset13", (2, 32, 8, 8),
         64, 3, group=4, pad=0, dil=2, wtype=np.uint8, bias=False, xr=0.5,
         ys=0.2)
    x = rng.uniform(-2, 2, (2, 4, 7, 7)).astype(f32)
    w = rng.integers(0, 256, (6, 4, 3, 3)).astype(np.uint8)
    a = np.clip(np.rint(x / f32(0.02)) + 128, 0, 255).astype(np.int64)
    y = int_conv(a - 128, w.astype(np.int64) - 120, 1, 1, 1, 1)
    node_case("test_sn_convinteger_device_opset13",
              [mk("QuantizeLinear", ["x", "xs", "xz"], ["a"]),
               mk("ConvInteger", ["a", "w", "xz", "wz"], ["y"],
                  pads=[1] * 4)],
              [("x", x)], [("y", y.astype(np.int32))], 13,
              initializers=[("xs", np.array(0.02, f32)),
                            ("xz", np.array(128, np.uint8)), ("w", w),
                            ("wz", np.array(120, np.uint8))])


def dynamic_float_sums_cases():
    """A dynamically quantized model's products (ONNX Runtime's
    quantize_dynamic form): DynamicQuantizeLinear of the activations, its
    zero point computed on the device, ConvInteger or MatMulInteger by
    constant int8 weights, Cast to float, Mul by the two scales' product.
    Small sums, and sums past 2^24 (which the integer product alone must
    refuse on the device, and may run when its floats are all that is
    read: passes/integer_sums.c).  Expected: the exact integer sums, as
    float32, times the float32 scale."""
    rng = np.random.default_rng(2424)
    mk = helper.make_node
    f32 = np.float32

    def scaled(sums, s, ws):
        return sums.astype(f32) * (s * ws).astype(f32)

    def conv(name, shape, m, wlo, whi, xlo, xhi):
        x = rng.uniform(xlo, xhi, shape).astype(f32)
        w = rng.integers(wlo, whi + 1, (m, shape[1], 3, 3)).astype(np.int8)
        ws = np.array(0.01, f32)
        q, s, z = dynamic(x)
        sums = ref_conv(q.astype(np.int64) - int(z), w.astype(np.float64),
                        np.zeros(m), [1, 1], [1] * 4, [1, 1], np.float64)
        node_case(name,
                  [mk("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
                   mk("Mul", ["s", "ws"], ["sc"]),
                   mk("ConvInteger", ["q", "w", "z", "wz"], ["i"],
                      pads=[1] * 4),
                   mk("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
                   mk("Mul", ["f", "sc"], ["y"])],
                  [("x", x)], [("y", scaled(sums.astype(np.int64), s, ws))],
                  13, initializers=[("w", w), ("ws", ws),
                                    ("wz", np.array(0, np.int8))])
        return np.abs(sums).max()

    def matmul(name, shape, n, wlo, whi, xlo, xhi):
        x = rng.uniform(xlo, xhi, shape).astype(f32)
        b = rng.integers(wlo, whi + 1, (shape[-1], n)).astype(np.int8)
        bz = rng.integers(-3, 4, (n,)).astype(np.int8)
        bs = np.array(0.02, f32)
        q, s, z = dynamic(x)
        sums = (q.astype(np.int64) - int(z)) @ (b.astype(np.int64) - bz)
        node_case(name,
                  [mk("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
                   mk("Mul", ["s", "bs"], ["sc"]),
                   mk("MatMulInteger", ["q", "b", "z", "bz"], ["i"]),
                   mk("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
                   mk("Mul", ["f", "sc"], ["y"])],
                  [("x", x)], [("y", scaled(sums, s, bs))], 13,
                  initializers=[("b", b), ("bs", bs), ("bz", bz)])
        return np.abs(sums).max()

    conv("test_sn_convinteger_dynamic_opset13", (2, 3, 8, 8), 4, -10, 10,
         -1.0, 2.0)
    big = conv("test_sn_convinteger_dynamic_past_2_24_opset13",
               (1, 256, 5, 5), 6, 100, 127, -0.5, 4.0)
    assert big > 2 ** 24, big
    matmul("test_sn_matmulinteger_dynamic_opset13", (2, 3, 16), 5, -128,
           127, -1.0, 1.0)
    big = matmul("test_sn_matmulinteger_dynamic_past_2_24_opset13",
                 (2, 4, 2048), 16, 60, 127, -0.2, 3.0)
    assert big > 2 ** 24, big


def bf16_round(x):
    """float32 x rounded to the nearest bfloat16 (halves to even), as
    float32."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def half_compute_cases():
    """Models that compute in float16 or bfloat16 (a Cast of the input, or
    an input of that type, then nodes of that type): a device computes in
    float and rounds each node's result to the type, as ONNX Runtime does
    on a CPU.  Expected: each node in float64 from the rounded inputs, its
    result rounded to the type (exact where the node's float arithmetic
    is: Mul, Add, MaxPool, Relu)."""
    rng = np.random.default_rng(1616)
    mk = helper.make_node
    f16, f32 = np.float16, np.float32

    def h(a):
        return np.asarray(a, np.float64).astype(f32).astype(f16)

    # x + 1024 in float16 keeps whole numbers (its spacing there is 1):
    # less 1024, a whole number again, where float would give x back
    x = rng.uniform(-3, 3, (4, 40)).astype(f32)
    big = np.array(1024, f16)
    a = (x.astype(f16).astype(f32) + f32(1024)).astype(f16)
    node_case("test_sn_half_rounds_each_node_opset13",
              [mk("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
               mk("Add", ["xh", "big"], ["a"]),
               mk("Sub", ["a", "big"], ["d"]),
               mk("Cast", ["d"], ["y"], to=TensorProto.FLOAT)],
              [("x", x)], [("y", (a.astype(f32) - f32(1024)))], 13,
              initializers=[("big", big)])

    x = rng.uniform(-2, 2, (2, 4, 10, 10)).astype(f32)
    w = (rng.standard_normal((8, 4, 3, 3)) * 0.3).astype(f16)
    b = (rng.standard_normal(8) * 0.1).astype(f16)
    sc = rng.uniform(0.5, 2.0, (8, 1, 1)).astype(f16)
    t = rng.uniform(-1, 1, (8, 1, 1)).astype(f16)
    xh = x.astype(f16)
    c = h(np.maximum(ref_conv(xh.astype(np.float64), w.astype(np.float64),
                              b.astype(np.float64), [1, 1], [1] * 4,
                              [1, 1], np.float64), 0))
    pool = c.reshape(2, 8, 5, 2, 5, 2).max(axis=(3, 5))
    m = (pool.astype(f32) * sc.astype(f32)).astype(f16)
    a = (m.astype(f32) + t.astype(f32)).astype(f16)
    g = h(1.0 / (1.0 + np.exp(-a.astype(np.float64))))
    node_case("test_sn_half_cnn_opset13",
              [mk("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
               mk("Conv", ["xh", "w", "b"], ["c"], pads=[1] * 4),
               mk("Relu", ["c"], ["r"]),
               mk("MaxPool", ["r"], ["p"], kernel_shape=[2, 2],
                  strides=[2, 2]),
               mk("Mul", ["p", "sc"], ["m"]),
               mk("Add", ["m", "t"], ["a"]),
               mk("Sigmoid", ["a"], ["g"]),
               mk("Cast", ["g"], ["y"], to=TensorProto.FLOAT)],
              [("x", x)], [("y", g.astype(f32))], 13,
              initializers=[("w", w), ("b", b), ("sc", sc), ("t", t)])

    x = rng.uniform(-1, 1, (2, 16, 32)).astype(f16)
    w = (rng.standard_normal((32, 24)) * 0.3).astype(f16)
    b = (rng.standard_normal(24) * 0.1).astype(f16)
    gm = rng.uniform(0.5, 2.0, 24).astype(f16)
    mm = h(x.astype(np.float64) @ w.astype(np.float64))
    z = (mm.astype(f32) + b.astype(f32)).astype(f16).astype(np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    sm = h(e / e.sum(axis=-1, keepdims=True))
    y = (sm.astype(f32) * gm.astype(f32)).astype(f16)
    node_case("test_sn_half_matmul_softmax_opset13",
              [mk("MatMul", ["x", "w"], ["mm"]),
               mk("Add", ["mm", "b"], ["z"]),
               mk("Softmax", ["z"], ["sm"], axis=-1),
               mk("Mul", ["sm", "gm"], ["y"])],
              [("x", x)], [("y", y)], 13,
              initializers=[("w", w), ("b", b), ("gm", gm)])

    def layernorm(x, gm, bt):
        """float16 x's LayerNormalization over its last axis in float64:
        the result rounded to float16, the mean and the variance."""
        z, mu, var = ref_standardise(x, -1, 1e-5)
        return (h(z * gm.astype(np.float64) + bt.astype(np.float64)), mu,
                var)

    x = rng.uniform(-2, 2, (4, 48)).astype(f16)
    gm = rng.uniform(0.5, 1.5, 48).astype(f16)
    bt = rng.uniform(-0.2, 0.2, 48).astype(f16)
    ln, _, _ = layernorm(x, gm, bt)
    node_case("test_sn_half_layernorm_tanh_opset17",
              [mk("LayerNormalization", ["x", "gm", "bt"], ["ln"], axis=-1),
               mk("Tanh", ["ln"], ["y"])],
              [("x", x)], [("y", h(np.tanh(ln.astype(np.float64))))], 17,
              initializers=[("gm", gm), ("bt", bt)])

    x = (rng.standard_normal((4, 40)) * 3).astype(f32)
    wb = rng.uniform(-2, 2, 40).astype(f32)
    cb = rng.uniform(-1, 1, 40).astype(f32)
    xb, wbr, cbr = bf16_round(x), bf16_round(wb), bf16_round(cb)
    y = bf16_round(bf16_round(xb * wbr) + cbr)

    def bf16(name, a):
        return helper.make_tensor(
            name, TensorProto.BFLOAT16, a.shape,
            (a.view(np.uint32) >> 16).astype(np.uint16).tobytes(), raw=True)
    node_case("test_sn_bfloat16_mul_add_opset13",
              [mk("Cast", ["x"], ["xb"], to=TensorProto.BFLOAT16),
               mk("Mul", ["xb", "wb"], ["m"]),
               mk("Add", ["m", "cb"], ["a"]),
               mk("Cast", ["a"], ["y"], to=TensorProto.FLOAT)],
              [("x", x)], [("y", y)], 13,
              initializers=[("wb", bf16("wb", wbr)), ("cb", bf16("cb", cbr))])

    # LayerNormalization's Mean and InvStdDev are of its type U (float, at
    # the default stash_type), not the input's: not rounded to float16
    x = rng.uniform(-2, 2, (4, 48)).astype(f16)
    ln, mu, var = layernorm(x, gm, bt)
    node_case("test_sn_half_layernorm_stats_opset17",
              [mk("LayerNormalization", ["x", "gm", "bt"],
                  ["y", "mean", "inv_std"], axis=-1)],
              [("x", x)],
              [("y", ln), ("mean", mu.astype(f32)),
               ("inv_std", (1.0 / np.sqrt(var + 1e-5)).astype(f32))], 17,
              initializers=[("gm", gm), ("bt", bt)])


def newer_norm_cases():
    """GroupNormalization (opset 18: scale and bias a group; 21: a
    channel), RMSNormalization (opset 23) and ONNX Runtime's
    SimplifiedLayerNormalization (its ONNX-domain entry, with the optional
    reciprocal root), none in the ONNX 1.12 node data.  Expected: float64
    from the definitions, as float32."""
    rng = np.random.default_rng(2323)
    mk = helper.make_node
    f32 = np.float32

    def r(*shape):
        return rng.standard_normal(shape).astype(f32)

    def group_norm(x, g, scale, bias, eps, per_channel):
        n, c = x.shape[:2]
        z = ref_standardise(x.reshape(n, g, -1), (2,), eps)[0].reshape(
            x.shape)
        if not per_channel:  # a value a group, over its channels
            scale, bias = np.repeat(scale, c // g), np.repeat(bias, c // g)
        b = (1, c) + (1,) * (x.ndim - 2)
        return (z * scale.astype(np.float64).reshape(b) +
                bias.astype(np.float64).reshape(b)).astype(f32)

    for name, shape, g, eps, opset in (
            ("test_sn_group_normalization_opset21", (2, 6, 4, 3), 3, 1e-5,
             21),
            ("test_sn_group_normalization_one_group_opset21", (3, 4, 5), 1,
             1e-2, 21),
            ("test_sn_group_normalization_a_group_each_opset21",
             (2, 4, 3, 2, 2), 4, 1e-5, 21),
            ("test_sn_group_normalization_opset18", (2, 6, 5), 2, 1e-3, 18)):
        x = r(*shape) * 2 + 0.5
        per = shape[1] if opset >= 21 else g
        sc, b = r(per) + 1, r(per)
        node_case(name,
                  [mk("GroupNormalization", ["x", "scale", "bias"], ["y"],
                      num_groups=g, epsilon=eps)],
                  [("x", x)],
                  [("y", group_norm(x, g, sc, b, eps, opset >= 21))], opset,
                  initializers=[("scale", sc), ("bias", b)])

    x = r(2, 3, 8)
    sc = r(8) + 1
    y, _ = ref_rms(x, -1, 1e-5)
    node_case("test_sn_rms_normalization_opset23",
              [mk("RMSNormalization", ["x", "scale"], ["y"])],
              [("x", x)], [("y", (y * sc).astype(f32))], 23,
              initializers=[("scale", sc)])
    # over the last two axes, the scale broadcast over them; a computed
    # scale of their whole shape
    y, _ = ref_rms(x, 1, 1e-3)
    node_case("test_sn_rms_normalization_axis1_opset23",
              [mk("RMSNormalization", ["x", "scale"], ["y"], axis=1,
                  epsilon=1e-3)],
              [("x", x)], [("y", (y * sc).astype(f32))], 23,
              initializers=[("scale", sc)])
    s2 = r(3, 8)
    node_case("test_sn_rms_normalization_computed_scale_opset23",
              [mk("Exp", ["s"], ["scale"]),
               mk("RMSNormalization", ["x", "scale"], ["y"], axis=-2)],
              [("x", x), ("s", s2)],
              [("y", (ref_rms(x, -2, 1e-5)[0] *
                      np.exp(s2.astype(np.float64))).astype(f32))], 23)

    x = r(2, 5, 16) * 3
    sc = r(16)
    y, inv = ref_rms(x, -1, 1e-6)
    node_case("test_sn_simplified_layer_normalization_opset17",
              [mk("SimplifiedLayerNormalization", ["x", "scale"],
                  ["y", "inv_std_var"], axis=-1, epsilon=1e-6)],
              [("x", x)],
              [("y", (y * sc).astype(f32)), ("inv_std_var", inv.astype(f32))],
              17, initializers=[("scale", sc)])


def opset19_pool_cases():
    """AveragePool's dilations (opset 19), none in the ONNX 1.12 node
    data: windows of 2 x 2 taps two apart, stride 1, no padding."""
    rng = np.random.default_rng(1919)
    x = rng.standard_normal((1, 2, 6, 7)).astype(np.float32)
    xd = x.astype(np.float64)
    y = np.zeros((1, 2, 4, 5))
    for i in range(4):
        for j in range(5):
            y[:, :, i, j] = xd[:, :, i:i + 3:2, j:j + 3:2].mean(axis=(2, 3))
    node_case("test_sn_averagepool_dilations_opset19",
              [helper.make_node("AveragePool", ["x"], ["y"],
                                kernel_shape=[2, 2], dilations=[2, 2])],
              [("x", x)], [("y", y.astype(np.float32))], 19)


def opset21_quant_cases():
    """QuantizeLinear and DequantizeLinear of opset 21: output_dtype (the
    type without a zero point) and the 16-bit types, per tensor and per
    axis, on the host (constants) and on the device (computed input)."""
    rng = np.random.default_rng(2121)
    mk = helper.make_node
    f32 = np.float32

    def quant(x, s, z, lo, hi, dtype):
        v = np.round(x.astype(f32) / s.astype(f32))  # half to even
        return np.clip(v + z, lo, hi).astype(dtype)

    x = (rng.standard_normal((3, 8)) * 40).astype(f32)
    s = np.array(0.5, f32)
    node_case("test_sn_quantize_output_dtype_int8_opset21",
              [mk("Exp", ["x"], ["e"]), mk("Log", ["e"], ["xl"]),
               mk("QuantizeLinear", ["x", "s"], ["y"], output_dtype=3),
               mk("QuantizeLinear", ["xl", "s"], ["y_device"],
                  output_dtype=3)],
              [("x", x)],
              [("y", quant(x, s, 0, -128, 127, np.int8)),
               ("y_device", quant(np.log(np.exp(x)), s, 0, -128, 127,
                                  np.int8))], 21,
              initializers=[("s", s)])
    # the device's copy goes through Exp and Log: equal to x only where
    # float's rounding gives it back, so its reference is computed so too

    x = (rng.standard_normal((2, 3, 4)) * 3000).astype(f32)
    s = np.array([0.25, 1.0, 4.0], f32)
    z = np.array([-100, 0, 300], np.int16)
    q = quant(x, s.reshape(3, 1), z.reshape(3, 1), -32768, 32767, np.int16)
    node_case("test_sn_quantize_dequantize_int16_per_axis_opset21",
              [mk("Relu", ["x"], ["r"]), mk("Sub", ["x", "r"], ["n"]),
               mk("Add", ["r", "n"], ["xd"]),
               mk("QuantizeLinear", ["xd", "s", "z"], ["q"], axis=1),
               mk("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
              [("x", x)],
              [("q", q), ("y", ((q.astype(np.float64) - z.reshape(3, 1)) *
                                s.reshape(3, 1)).astype(f32))], 21,
              initializers=[("s", s), ("z", z)])

    x = (rng.uniform(0, 40000, (5, 6))).astype(f32)
    s = np.array(2.0, f32)
    z = np.array(1000, np.uint16)
    q = quant(x, s, z, 0, 65535, np.uint16)
    node_case("test_sn_quantize_dequantize_uint16_opset21",
              [mk("QuantizeLinear", ["x", "s", "z"], ["q"]),
               mk("DequantizeLinear", ["q", "s", "z"], ["y"])],
              [("x", x)],
              [("q", q), ("y", ((q.astype(np.float64) - 1000) *
                                2.0).astype(f32))], 21,
              initializers=[("s", s), ("z", z)])


def ms_contrib_cases():
    """ONNX Runtime's com.microsoft forms that its transformer optimiser
    writes: Gelu, BiasGelu, FastGelu (with and without its bias),
    QuickGelu, SkipLayerNormalization (with beta and bias, and the sum as
    output 3; without either, skip broadcast) and
    SkipSimplifiedLayerNormalization.  Expected: float64 from ONNX Runtime's
    definitions, as float32."""
    rng = np.random.default_rng(1971)
    mk = helper.make_node
    f32 = np.float32
    ms = [("com.microsoft", 1)]

    def r(*shape):
        return rng.standard_normal(shape).astype(f32)

    def erf(v):
        return np.vectorize(math.erf)(v)

    def gelu(v):
        return 0.5 * v * (1 + erf(v / math.sqrt(2)))

    def gelu_tanh(v):
        return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                      (v + 0.044715 * v ** 3)))

    x, b = r(2, 3, 16) * 2, r(16)
    xd, bd = x.astype(np.float64), b.astype(np.float64)
    node_case("test_sn_ms_gelu_forms",
              [mk("Gelu", ["x"], ["g"], domain="com.microsoft"),
               mk("BiasGelu", ["x", "b"], ["bg"], domain="com.microsoft"),
               mk("FastGelu", ["x", "b"], ["fg"], domain="com.microsoft"),
               mk("FastGelu", ["x"], ["f"], domain="com.microsoft"),
               mk("QuickGelu", ["x"], ["q"], domain="com.microsoft"),
               mk("QuickGelu", ["x"], ["q2"], alpha=1.5,
                  domain="com.microsoft")],
              [("x", x)],
              [("g", gelu(xd).astype(f32)),
               ("bg", gelu(xd + bd).astype(f32)),
               ("fg", gelu_tanh(xd + bd).astype(f32)),
               ("f", gelu_tanh(xd).astype(f32)),
               ("q", (xd / (1 + np.exp(-1.702 * xd))).astype(f32)),
               ("q2", (xd / (1 + np.exp(-1.5 * xd))).astype(f32))], 17,
              initializers=[("b", b)], domains=ms)

    def layer_norm(v, eps):
        return ref_standardise(v, -1, eps)[0]

    x, skip = r(2, 5, 24), r(2, 5, 24)
    gm, bt, bias = r(24) + 1, r(24), r(24)
    sd = x.astype(np.float64) + skip + bias
    node_case("test_sn_ms_skip_layer_normalization",
              [mk("SkipLayerNormalization", ["x", "skip", "gamma", "beta",
                                             "bias"],
                  ["y", "", "", "sum"], epsilon=1e-6,
                  domain="com.microsoft")],
              [("x", x), ("skip", skip)],
              [("y", (layer_norm(sd, 1e-6) * gm + bt).astype(f32)),
               ("sum", sd.astype(f32))], 17,
              initializers=[("gamma", gm), ("beta", bt), ("bias", bias)],
              domains=ms)
    skip1 = r(5, 24)
    sd = x.astype(np.float64) + skip1
    node_case("test_sn_ms_skip_layer_normalization_broadcast_skip",
              [mk("SkipLayerNormalization", ["x", "skip", "gamma"], ["y"],
                  domain="com.microsoft")],
              [("x", x)],
              [("y", (layer_norm(sd, 1e-5) * gm).astype(f32))], 17,
              initializers=[("skip", skip1), ("gamma", gm)], domains=ms)
    sd = x.astype(np.float64) + skip + bias
    y, inv = ref_rms(sd, -1, 1e-6)
    node_case("test_sn_ms_skip_simplified_layer_normalization",
              [mk("SkipSimplifiedLayerNormalization",
                  ["x", "skip", "gamma", "bias"], ["y", "", "inv", "sum"],
                  epsilon=1e-6, domain="com.microsoft")],
              [("x", x), ("skip", skip)],
              [("y", (y * gm).astype(f32)), ("inv", inv.astype(f32)),
               ("sum", sd.astype(f32))], 17,
              initializers=[("gamma", gm), ("bias", bias)], domains=ms)

    # an optimised transformer's feed-forward block: a product, FastGelu
    # with its bias, a product, and the residual's SkipLayerNormalization
    # (the tensor split cuts the products' weights around the GELU)
    x = r(3, 4, 16)
    w1, b1, w2 = r(16, 64) * 0.25, r(64) * 0.1, r(64, 16) * 0.125
    xd = x.astype(np.float64)
    h = gelu_tanh(xd @ w1 + b1) @ w2
    node_case("test_sn_ms_ffn_block",
              [mk("MatMul", ["x", "w1"], ["m1"]),
               mk("FastGelu", ["m1", "b1"], ["g"], domain="com.microsoft"),
               mk("MatMul", ["g", "w2"], ["m2"]),
               mk("SkipLayerNormalization", ["m2", "x", "gamma", "beta"],
                  ["y"], domain="com.microsoft")],
              [("x", x)],
              [("y", (layer_norm(h + xd, 1e-5) * gm[:16] +
                      bt[:16]).astype(f32))], 17,
              initializers=[("w1", w1), ("b1", b1), ("w2", w2),
                            ("gamma", gm[:16]), ("beta", bt[:16])],
              domains=ms)


def elementwise_cases():
    """Issue 15's element-wise, comparison and logic operators in the forms
    the ONNX node data lacks: the opset-1..6 broadcast/axis attributes,
    comparisons and logic computed on the device (bool inputs of the node
    data are graph inputs, so known on the host), PRelu's per-channel
    slope before opset 7, Mish (opset 18), numpy's Mod of floats, and the
    integer and small constant forms folded on the host."""
    rng = np.random.default_rng(1515)
    mk = helper.make_node

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    a, b, c = r(2, 3, 4), r(3), r(4)
    g = a > b.reshape(3, 1)
    lt = a < c
    node_case("test_elem_legacy_compare_logic_broadcast_opset6",
              [mk("Greater", ["a", "b"], ["g"], broadcast=1, axis=1),
               mk("Less", ["a", "c"], ["l"], broadcast=1),
               mk("And", ["g", "l"], ["y_and"]),
               mk("Or", ["g", "l"], ["y_or"]),
               mk("Xor", ["g", "l"], ["y_xor"]),
               mk("Equal", ["g", "l"], ["y_eq"])],
              [("a", a), ("b", b), ("c", c)],
              [("y_and", g & lt), ("y_or", g | lt), ("y_xor", g ^ lt),
               ("y_eq", g == lt)], 6)

    x, y = r(2, 3, 4) * 2, r(3, 1) * 2
    x[0, 0, 0], x[1, 2, 3] = np.nan, y[1, 0]
    half = np.array(0.5, np.float32)
    with np.errstate(invalid="ignore"):
        ge, le = x >= y, x <= y
        outs = [("y_eq", np.floor(x) == np.floor(y)),
                ("y_and_not", ge & ~le),
                ("y_or_nan", np.isnan(x) | (x > half)),
                ("y_xor", ge ^ (x < 0))]
    node_case("test_elem_compare_logic_on_device_opset13",
              [mk("Floor", ["x"], ["fx"]), mk("Floor", ["y"], ["fy"]),
               mk("Equal", ["fx", "fy"], ["y_eq"]),
               mk("GreaterOrEqual", ["x", "y"], ["ge"]),
               mk("LessOrEqual", ["x", "y"], ["le"]),
               mk("Not", ["le"], ["nle"]),
               mk("And", ["ge", "nle"], ["y_and_not"]),
               mk("IsNaN", ["x"], ["nan"]),
               mk("Greater", ["x", "half"], ["big"]),
               mk("Or", ["nan", "big"], ["y_or_nan"]),
               mk("Less", ["x", "zero"], ["neg"]),
               mk("Xor", ["ge", "neg"], ["y_xor"])],
              [("x", x), ("y", y)], outs, 13,
              initializers=[("half", half),
                            ("zero", np.array(0, np.float32))])

    x, slope = r(2, 3, 4, 4), r(3)
    node_case("test_elem_legacy_prelu_channel_slope_opset6",
              [mk("PRelu", ["x", "slope"], ["y"])],
              [("x", x), ("slope", slope)],
              [("y", np.where(x < 0, slope.reshape(3, 1, 1) * x, x))], 6)
    x, slope = r(3, 5), np.array([0.25], np.float32)
    node_case("test_elem_legacy_prelu_scalar_slope_selu_ceil_opset1",
              [mk("PRelu", ["x", "slope"], ["p"], consumed_inputs=[0, 0]),
               mk("Ceil", ["p"], ["c"], consumed_inputs=[0]),
               mk("Selu", ["c"], ["y"], alpha=1.5, gamma=2.0,
                  consumed_inputs=[0])],
              [("x", x)],
              [("y", (2.0 * np.where(np.ceil(np.where(x < 0, 0.25 * x, x))
                                     <= 0,
                                     1.5 * np.expm1(np.ceil(
                                         np.where(x < 0, 0.25 * x, x))),
                                     np.ceil(np.where(x < 0, 0.25 * x, x)))
                      ).astype(np.float32))], 1,
              initializers=[("slope", slope)])

    x = r(3, 4) * 3
    x[0, 0], x[0, 1] = 30.0, -30.0
    sp = np.where(x > 0, x + np.log1p(np.exp(-x)), np.log1p(np.exp(x)))
    node_case("test_elem_mish_opset18", [mk("Mish", ["x"], ["y"])],
              [("x", x)], [("y", (x * np.tanh(sp)).astype(np.float32))], 18)

    a, b = r(2, 3) * 5, np.array([2.0, -3.0, 1.5], np.float32)
    node_case("test_elem_mod_float_numpy_sign_broadcast_opset13",
              [mk("Mod", ["a", "b"], ["y"])],
              [("a", a), ("b", b)], [("y", np.mod(a, b))], 13)

    x, k = r(2, 3, 4), r(4)
    s = np.array([2, 3, 4], np.int64)
    m = np.mod(-s, 3)
    node_case("test_elem_integer_and_constant_forms_folded_opset13",
              [mk("Shape", ["x"], ["s"]), mk("Neg", ["s"], ["n"]),
               mk("Mod", ["n", "three"], ["y_mod"]),
               mk("Mod", ["n", "three"], ["f"], fmod=1),
               mk("Sign", ["f"], ["y_sign"]),
               mk("Equal", ["y_mod", "pattern"], ["y_eq"]),
               mk("Cast", ["s"], ["u"], to=TensorProto.UINT8),
               mk("BitShift", ["u", "one"], ["y_shift"], direction="LEFT"),
               mk("Sin", ["k"], ["sk"]), mk("Add", ["x", "sk"], ["y"])],
              [("x", x)],
              [("y_mod", m), ("y_sign", np.sign(np.fmod(-s, 3))),
               ("y_eq", m == np.array([1, 1, 2], np.int64)),
               ("y_shift", (s.astype(np.uint8) << 1).astype(np.uint8)),
               ("y", x + np.sin(k))], 13,
              initializers=[("three", np.array([3], np.int64)),
                            ("pattern", np.array([1, 1, 2], np.int64)),
                            ("one", np.array(1, np.uint8)), ("k", k)])


def cast_device_cases():
    """Cast of a float tensor computed on the device (more than 64
    elements, so not bound by value) to int64 and to bool, read by a later
    node: truncation toward zero, and NaN and -0.0 as bool."""
    mk = helper.make_node
    rng = np.random.default_rng(1502)
    x = (rng.standard_normal((4, 40)) * 5).astype(np.float32)
    x[0, :6] = [2.5, -2.5, -0.0, 0.0, np.nan, -7.99]
    y = rng.standard_normal((4, 40)).astype(np.float32)
    xi = np.trunc(np.nan_to_num(x, nan=0.0))
    node_case("test_cast_device_float_to_int64_to_float",
              [mk("Mul", ["x", "one"], ["m"]),
               mk("Cast", ["m"], ["i"], to=TensorProto.INT64),
               mk("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
               mk("Add", ["f", "y"], ["z"])],
              [("x", np.nan_to_num(x, nan=0.0)), ("y", y)],
              [("z", (xi + y).astype(np.float32))], 13,
              initializers=[("one", np.ones((1,), np.float32))])
    b = (x != 0) | np.isnan(x)
    node_case("test_cast_device_float_to_bool_where",
              [mk("Mul", ["x", "one"], ["m"]),
               mk("Cast", ["m"], ["c"], to=TensorProto.BOOL),
               mk("Where", ["c", "y", "zero"], ["z"])],
              [("x", x), ("y", y)],
              [("z", np.where(b, y, np.float32(0)).astype(np.float32))], 13,
              initializers=[("one", np.ones((1,), np.float32)),
                            ("zero", np.zeros((1,), np.float32))])


RNN_ACT_ALPHA = {"LeakyRelu": 0.01, "ThresholdedRelu": 1.0, "ScaledTanh": 1.0,
                 "HardSigmoid": 0.2, "Elu": 1.0, "Affine": 1.0}
RNN_ACT_BETA = {"ScaledTanh": 1.0, "HardSigmoid": 0.5, "Affine": 0.0}


def rnn_act(name, a, b, x):
    """The RNN spec's activation functions, in float64."""
    return {
        "Sigmoid": lambda: 1.0 / (1.0 + np.exp(-x)),
        "Tanh": lambda: np.tanh(x),
        "Relu": lambda: np.maximum(x, 0.0),
        "LeakyRelu": lambda: np.where(x >= 0, x, a * x),
        "ThresholdedRelu": lambda: np.where(x >= a, x, 0.0),
        "ScaledTanh": lambda: a * np.tanh(b * x),
        "HardSigmoid": lambda: np.clip(a * x + b, 0.0, 1.0),
        "Elu": lambda: np.where(x >= 0, x, a * (np.exp(x) - 1.0)),
        "Softsign": lambda: x / (1.0 + np.abs(x)),
        "Softplus": lambda: np.log1p(np.exp(x)),
        "Affine": lambda: a * x + b,
    }[name]()


def recurrent_ref(kind, x, w, r, b=None, lens=None, h0=None, c0=None,
                  p=None, direction="forward", layout=0, acts=None,
                  alphas=(), betas=(), clip=None, lbr=0, input_forget=0):
    """RNN, GRU or LSTM from the spec's equations, one batch item and one
    step at a time in float64: (Y, Y_h, Y_c) in the layout.  An item runs
    its own sequence_lens steps (backwards from its last one in reverse);
    Y is 0 past them.  activation_alpha and _beta are consumed in order by
    the activations that take them."""
    nacts = {"RNN": 1, "GRU": 2, "LSTM": 3}[kind]
    x = x.astype(np.float64)
    if layout:
        x = x.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    seq, batch, _ = x.shape
    nd, hid = w.shape[0], r.shape[2]
    defaults = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]
    names = list(acts) if acts else defaults * nd
    alphas, betas = list(alphas), list(betas)
    funcs = []
    for name in names:
        a = alphas.pop(0) if name in RNN_ACT_ALPHA and alphas else \
            RNN_ACT_ALPHA.get(name, 1.0)
        bb = betas.pop(0) if name in RNN_ACT_BETA and betas else \
            RNN_ACT_BETA.get(name, 0.0)
        funcs.append(lambda v, n=name, a=a, bb=bb: rnn_act(n, a, bb, v))

    def cl(v):
        return v if clip is None else np.clip(v, -clip, clip)
    g = w.shape[1]
    b = np.zeros((nd, 2 * g)) if b is None else b.astype(np.float64)
    y = np.zeros((seq, nd, batch, hid))
    yh = np.zeros((nd, batch, hid))
    yc = np.zeros((nd, batch, hid))
    for d in range(nd):
        f = funcs[d * nacts:(d + 1) * nacts]
        wb, rb = b[d, :g], b[d, g:]
        back = direction == "reverse" or d == 1
        for bi in range(batch):
            n = seq if lens is None else int(lens[bi])
            h = np.zeros(hid) if h0 is None else h0[d, bi].astype(np.float64)
            c = np.zeros(hid) if c0 is None else c0[d, bi].astype(np.float64)
            for t in (range(n - 1, -1, -1) if back else range(n)):
                gx = w[d] @ x[t, bi] + wb
                if kind == "RNN":
                    h = f[0](cl(gx + r[d] @ h + rb))
                elif kind == "LSTM":
                    gs = gx + r[d] @ h + rb
                    gi, go, gf, gc = np.split(gs, 4)
                    pi, po, pf = (np.zeros(hid),) * 3 if p is None else \
                        np.split(p[d].astype(np.float64), 3)
                    i = f[0](cl(gi + pi * c))
                    ff = 1.0 - i if input_forget else f[0](cl(gf + pf * c))
                    c = ff * c + i * f[1](cl(gc))
                    o = f[0](cl(go + po * c))
                    h = o * f[2](c)
                else:
                    rz, rr, rh = np.split(r[d], 3)
                    bz, br, bh = np.split(rb, 3)
                    xz, xr, xh = np.split(gx, 3)
                    z = f[0](cl(xz + rz @ h + bz))
                    rt = f[0](cl(xr + rr @ h + br))
                    if lbr:
                        hh = f[1](cl(xh + rt * (rh @ h + bh)))
                    else:
                        hh = f[1](cl(xh + rh @ (rt * h) + bh))
                    h = (1.0 - z) * hh + z * h
                y[t, d, bi] = h
            yh[d, bi], yc[d, bi] = h, c
    if layout:
        y, yh, yc = (y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2),
                     yc.transpose(1, 0, 2))
    return [a.astype(np.float32) for a in (y, yh, yc)]


def recurrent_cases():
    """RNN, GRU and LSTM in the forms the node data lacks: reverse and
    bidirectional, sequence_lens (a graph input bound by value), layout 1,
    initial states, every activation of the spec with alpha and beta, clip,
    peepholes, input_forget, linear_before_reset, omitted outputs and an
    omitted hidden_size; expected outputs from recurrent_ref."""
    rng = np.random.default_rng(1515)
    mk = helper.make_node

    def rn(*shape):
        return (rng.standard_normal(shape) * 0.6).astype(np.float32)

    def case(name, kind, opset, seq, batch, inp, hid, direction="forward",
             layout=0, lens=None, with_b=True, with_h0=False, with_c0=False,
             with_p=False, outputs=("Y", "Y_h", "Y_c"), **attrs):
        nd = 2 if direction == "bidirectional" else 1
        g = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind] * hid
        x = rn(*((batch, seq, inp) if layout else (seq, batch, inp)))
        w, r = rn(nd, g, inp), rn(nd, g, hid)
        sdims = (batch, nd, hid) if layout else (nd, batch, hid)
        b = rn(nd, 2 * g) if with_b else None
        h0 = rn(*sdims) if with_h0 else None
        c0 = rn(*sdims) if with_c0 else None
        p = rn(nd, 3 * hid) if with_p else None
        ins = [("X", x), ("W", w), ("R", r), ("B", b),
               ("sequence_lens", None if lens is None
                else np.array(lens, np.int32)),
               ("initial_h", h0), ("initial_c", c0), ("P", p)]
        ins = ins[:3 + max([i for i, (_, v) in enumerate(ins[3:])
                            if v is not None] + [-1]) + 1]
        ref = recurrent_ref(
            kind, x, w, r, b, lens, h0, c0, p, direction, layout,
            attrs.get("activations"), attrs.get("activation_alpha", ()),
            attrs.get("activation_beta", ()), attrs.get("clip"),
            attrs.get("linear_before_reset", 0),
            attrs.get("input_forget", 0))
        names = ["Y", "Y_h", "Y_c"][:3 if kind == "LSTM" else 2]
        outs = [nm if nm in outputs else "" for nm in names]
        while outs and not outs[-1]:
            outs.pop()
        if direction != "forward":
            attrs["direction"] = direction
        if layout:
            attrs["layout"] = layout
        node = mk(kind, [n if v is not None else "" for n, v in ins], outs,
                  **attrs)
        node_case(name, [node], [(n, v) for n, v in ins if v is not None],
                  [(nm, ref[i]) for i, nm in enumerate(names) if nm in outs],
                  opset)

    case("test_rnn_bidirectional_layout1_seq_lens", "RNN", 14, 5, 3, 4, 3,
         "bidirectional", layout=1, lens=[5, 2, 0], with_h0=True,
         hidden_size=3, activations=["Tanh", "LeakyRelu"],
         activation_alpha=[0.2])
    case("test_rnn_no_hidden_size_thresholded_relu", "RNN", 7, 4, 2, 3, 5,
         with_b=False, activations=["ThresholdedRelu"],
         activation_alpha=[0.05], outputs=("Y_h",))
    case("test_gru_reverse_linear_before_reset_clip", "GRU", 14, 6, 3, 4, 5,
         "reverse", lens=[6, 3, 1], with_h0=True, hidden_size=5,
         linear_before_reset=1, clip=0.8,
         activations=["HardSigmoid", "Softsign"], activation_alpha=[0.3],
         activation_beta=[0.4])
    case("test_gru_bidirectional_layout1_activations", "GRU", 14, 4, 2, 3,
         4, "bidirectional", layout=1, lens=[2, 4], with_h0=True,
         hidden_size=4, activations=["Sigmoid", "ScaledTanh", "Sigmoid",
                                     "Elu"],
         activation_alpha=[0.7, 0.9], activation_beta=[1.3])
    case("test_gru_opset3_bidirectional", "GRU", 3, 3, 2, 3, 4,
         "bidirectional", hidden_size=4, linear_before_reset=1,
         outputs=("Y",))
    case("test_lstm_bidirectional_peepholes_seq_lens", "LSTM", 14, 5, 3, 4, 3,
         "bidirectional", lens=[1, 5, 3], with_h0=True, with_c0=True,
         with_p=True, hidden_size=3,
         activations=["Sigmoid", "Tanh", "Relu", "Sigmoid", "Tanh", "Tanh"])
    case("test_lstm_reverse_layout1_input_forget", "LSTM", 14, 4, 2, 3, 4,
         "reverse", layout=1, with_h0=True, with_c0=True, hidden_size=4,
         input_forget=1, clip=2.0,
         activations=["Sigmoid", "Softplus", "Affine"],
         activation_alpha=[0.5], activation_beta=[0.1],
         outputs=("Y_h", "Y_c"))
    case("test_lstm_opset7_reverse", "LSTM", 7, 3, 2, 2, 3, "reverse",
         hidden_size=3)
    # every item shorter than the sequence: the last steps run no item
    case("test_lstm_bidirectional_short_sequences", "LSTM", 14, 5, 2, 3, 3,
         "bidirectional", lens=[2, 3], with_h0=True, hidden_size=3)
    case("test_rnn_reverse_layout1_short_sequences", "RNN", 14, 4, 3, 2, 3,
         "reverse", layout=1, lens=[0, 2, 1], hidden_size=3)
    case("test_gru_empty_sequences", "GRU", 14, 3, 2, 2, 3, lens=[0, 0],
         with_h0=True, hidden_size=3)


def control_real_model_cases():
    """If as real exports use it (Silero VAD): a condition made from a
    shape (Not of Equal of Size), folded on the host, whose branches differ
    in shape; and an If reading 70 values of the graph around it (a node of
    72 inputs), which the layer and tensor splits must carry whole."""
    mk = helper.make_node
    rng = np.random.default_rng(1503)
    x = rng.standard_normal((3, 40)).astype(np.float32)
    then_g = helper.make_graph(
        [mk("Unsqueeze", ["x", "ax"], ["t"])], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array([0], np.int64),
                                             "ax")])
    else_g = helper.make_graph(
        [mk("Identity", ["x"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    node_case("test_control_if_on_size_of_shape",
              [mk("Relu", ["x"], ["r"]),
               mk("Shape", ["r"], ["s"]),
               mk("Size", ["s"], ["n"]),
               mk("Equal", ["n", "zero"], ["eq"]),
               mk("Not", ["eq"], ["c"]),
               mk("If", ["c"], ["y"], then_branch=then_g,
                  else_branch=else_g)],
              [("x", x)], [("y", x[None])], 13,
              initializers=[("zero", np.array(0, np.int64))])
    ks = [rng.standard_normal((40,)).astype(np.float32) for _ in range(70)]
    nodes, prev = [], "r"
    for i in range(70):
        nodes.append(mk("Add", [prev, "k%d" % i], ["a%d" % i]))
        prev = "a%d" % i
    then_g = helper.make_graph(
        nodes, "then", [],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)])
    else_g = helper.make_graph(
        [mk("Identity", ["r"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    want = np.maximum(x, 0)
    for k in ks:
        want = want + k
    node_case("test_control_if_seventy_outer_values",
              [mk("Relu", ["x"], ["r"]),
               mk("If", ["c"], ["i"], then_branch=then_g,
                  else_branch=else_g),
               mk("Sigmoid", ["i"], ["y"])],
              [("x", x)],
              [("y", (1 / (1 + np.exp(-want))).astype(np.float32))], 13,
              initializers=[("c", np.array(True))] +
              [("k%d" % i, k) for i, k in enumerate(ks)])


def spatial_hostile_cases():
    """Models whose spatial operator has a hostile parameter (x, an input
    of shape (1, 1, 2, 2), the rest constants): tests/test_hostile.c runs
    each and wants a clear error naming the node, never a crash."""
    mk = helper.make_node
    d = out("hostile_spatial")
    os.makedirs(d, exist_ok=True)
    big = 1 << 31

    def model(name, node, inits, opset=13):
        graph = helper.make_graph(
            [node], name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                           [1, 1, 2, 2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            initializer=[numpy_helper.from_array(a, n) for n, a in inits])
        m = helper.make_model(graph, producer_name="make_cases",
                              opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 7
        onnx.save(m, os.path.join(d, name + ".onnx"))

    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    # products that wrap a 64-bit size to 0 or a small number
    model("tile_product_wraps", mk("Tile", ["x", "r"], ["y"], name="n"),
          [("r", i64(big, big, big, 2))])
    model("pad_product_wraps", mk("Pad", ["x", "p"], ["y"], name="n"),
          [("p", i64(big, big, big, big, big, big, big, big))])
    model("resize_huge_size",
          mk("Resize", ["x", "", "", "s"], ["y"], name="n"),
          [("s", i64(1, 1, 2, 1 << 40))])
    model("resize_negative_scale",
          mk("Resize", ["x", "", "s"], ["y"], name="n"),
          [("s", np.array([1, 1, -2, 2], np.float32))])
    # an antialiased shrink by 2^20: two million taps per output element
    graph = helper.make_graph(
        [mk("Tile", ["x", "reps"], ["big"], name="e"),
         mk("Resize", ["big", "", "s"], ["y"], name="n", mode="linear",
            antialias=1)], "resize_antialias_tiny_scale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[
            numpy_helper.from_array(i64(1, 1, 1, 1 << 19), "reps"),
            numpy_helper.from_array(
                np.array([1, 1, 1, 2.0 ** -20], np.float32), "s")])
    m = helper.make_model(graph, producer_name="make_cases",
                          opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, "resize_antialias_tiny_scale.onnx"))
    model("depth_to_space_negative_block",
          mk("DepthToSpace", ["x"], ["y"], name="n", blocksize=-3), [])
    model("lrn_size_zero", mk("LRN", ["x"], ["y"], name="n", size=0), [])
    model("maxunpool_index_outside",
          mk("MaxUnpool", ["x", "i"], ["y"], name="n", kernel_shape=[2, 2],
             strides=[2, 2]),
          [("i", i64(0, 1, 2, 1 << 40).reshape(1, 1, 2, 2))])
    model("roialign_negative_output",
          mk("RoiAlign", ["x", "r", "b"], ["y"], name="n",
             output_height=-1),
          [("r", np.zeros((1, 4), np.float32)), ("b", i64(0))], 16)
    model("gridsample_bad_grid",
          mk("GridSample", ["x", "g"], ["y"], name="n"),
          [("g", np.zeros((1, 2, 2, 3), np.float32))], 16)


def depthwise_conv_cases():
    """Depthwise convolutions (a group per input channel), which run as a
    kernel of their own: strides, pads, dilations, a channel multiplier,
    no bias, a fused Relu, 1-D, and rows wider than a vector."""
    rng = np.random.default_rng(1504)
    mk = helper.make_node

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def ref_grouped(x, w, b, strides, pads, dilations):
        c, m = x.shape[1], w.shape[0]
        mult = m // c
        return np.concatenate(
            [ref_conv(x[:, g:g + 1], w[g * mult:(g + 1) * mult],
                      b[g * mult:(g + 1) * mult], strides, pads, dilations)
             for g in range(c)], axis=1)

    x, w, b = r(2, 4, 9, 10), r(4, 1, 3, 3), r(4)
    y = ref_grouped(x, w, b, [2, 1], [1, 1, 1, 1], [1, 1])
    node_case("test_conv_depthwise_strides_pads_relu_opset11",
              [mk("Conv", ["x", "w", "b"], ["c"], group=4, strides=[2, 1],
                  pads=[1, 1, 1, 1]),
               mk("Relu", ["c"], ["y"])],
              [("x", x)], [("y", np.maximum(y, 0))], 11,
              initializers=[("w", w), ("b", b)])
    x, w = r(1, 3, 8, 7), r(6, 1, 3, 2)
    node_case("test_conv_depthwise_multiplier_dilations_no_bias_opset11",
              [mk("Conv", ["x", "w"], ["y"], group=3, dilations=[2, 1],
                  pads=[2, 0, 1, 1])],
              [("x", x)],
              [("y", ref_grouped(x, w, np.zeros(6, np.float32), [1, 1],
                                 [2, 0, 1, 1], [2, 1]))], 11,
              initializers=[("w", w)])
    x, w, b = r(2, 3, 20), r(3, 1, 5), r(3)
    y = ref_grouped(x[:, :, None], w[:, :, None], b, [1, 3], [0, 2, 0, 2],
                    [1, 1])[:, :, 0]
    node_case("test_conv_depthwise_1d_opset11",
              [mk("Conv", ["x", "w", "b"], ["y"], group=3, strides=[3],
                  pads=[2, 2])],
              [("x", x)], [("y", y)], 11, initializers=[("w", w), ("b", b)])
    for stride in (1, 2):
        x, w, b = r(1, 2, 6, 45), r(2, 1, 5, 5), r(2)
        y = ref_grouped(x, w, b, [stride, stride], [2, 2, 2, 2], [1, 1])
        node_case("test_conv_depthwise_wide_stride%d_opset11" % stride,
                  [mk("Conv", ["x", "w", "b"], ["y"], group=2,
                      strides=[stride, stride], pads=[2, 2, 2, 2])],
                  [("x", x)], [("y", y)], 11,
                  initializers=[("w", w), ("b", b)])


def constant_output_cases():
    """A graph output that is a constant (a Constant node the loader folds
    into a value, which no stage of a layer split computes), beside one
    computed from the input: split_cases runs it under every split."""
    mk = helper.make_node
    rng = np.random.default_rng(1504)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    c = np.array([1.5, -2.5], np.float32)
    node_case("test_constant_graph_output_beside_computed",
              [mk("Relu", ["x"], ["r"]), mk("Sigmoid", ["r"], ["y"]),
               mk("Constant", [], ["c"],
                  value=numpy_helper.from_array(c, "c"))],
              [("x", x)],
              [("y", (1 / (1 + np.exp(-np.maximum(x, 0)))).astype(np.float32)),
               ("c", c)], 13)


def fused_binary_relu_cases():
    """A Relu after Add, Sub, Mul or Div, which a pass fuses into the
    binary step: a residual block (Conv, Add of its input, Relu), either
    operand order, broadcasting, the opset-6 broadcast attribute, a chain,
    integers folded on the host, an Add read twice (not fused), and the
    sum of two products a tensor split may leave partial."""
    rng = np.random.default_rng(1505)
    mk = helper.make_node

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    relu = lambda v: np.maximum(v, 0).astype(v.dtype)
    x, w, b = r(2, 4, 6, 6), r(4, 4, 1, 1), r(4)
    c = ref_conv(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1])
    node_case("test_fuse_conv_add_relu_residual_opset13",
              [mk("Conv", ["x", "w", "b"], ["c"]),
               mk("Add", ["c", "x"], ["s"]), mk("Relu", ["s"], ["h"]),
               mk("Add", ["x", "h"], ["s2"]), mk("Relu", ["s2"], ["y"])],
              [("x", x)], [("y", relu(x + relu(c + x)))], 13,
              initializers=[("w", w), ("b", b)])
    x, b = r(2, 3, 4, 5), r(3, 1, 1)
    node_case("test_fuse_sub_relu_broadcast_opset13",
              [mk("Sub", ["x", "b"], ["s"]), mk("Relu", ["s"], ["y"])],
              [("x", x), ("b", b)], [("y", relu(x - b))], 13)
    x, b = r(2, 3, 4, 5), r(3)
    node_case("test_fuse_add_relu_legacy_broadcast_opset6",
              [mk("Add", ["x", "b"], ["s"], broadcast=1, axis=1),
               mk("Relu", ["s"], ["y"])],
              [("x", x), ("b", b)], [("y", relu(x + b[:, None, None]))], 6)
    x, m, d = r(3, 70), r(1, 70), (np.abs(r(3, 1)) + 0.5).astype(np.float32)
    node_case("test_fuse_mul_div_relu_chain_opset13",
              [mk("Mul", ["x", "m"], ["p"]), mk("Relu", ["p"], ["h"]),
               mk("Div", ["h", "d"], ["q"]), mk("Relu", ["q"], ["y"])],
              [("x", x), ("m", m), ("d", d)],
              [("y", relu(relu(x * m) / d))], 13)
    xi = rng.integers(-9, 9, (3, 4)).astype(np.int32)
    yi = rng.integers(-9, 9, (3, 4)).astype(np.int32)
    node_case("test_fuse_add_relu_int32_host_opset14",
              [mk("Add", ["x", "y"], ["s"]), mk("Relu", ["s"], ["z"])],
              [("x", xi), ("y", yi)], [("z", relu(xi + yi))], 14)
    x, y = r(4, 6), r(4, 6)
    node_case("test_fuse_add_relu_sum_read_twice_opset13",
              [mk("Add", ["x", "y"], ["s"]), mk("Relu", ["s"], ["z"]),
               mk("Neg", ["s"], ["n"])],
              [("x", x), ("y", y)], [("z", relu(x + y)), ("n", -(x + y))], 13)
    # h cut along its features (column-parallel), then both products cut
    # along h's: each device holds partial sums of p1 and p2.
    x, w0, w1, w2 = r(8, 64), r(64, 64), r(64, 32), r(64, 32)
    h = x @ w0
    node_case("test_fuse_matmul_sum_relu_opset13",
              [mk("MatMul", ["x", "w0"], ["h"]),
               mk("MatMul", ["h", "w1"], ["p1"]),
               mk("MatMul", ["h", "w2"], ["p2"]),
               mk("Add", ["p1", "p2"], ["s"]), mk("Relu", ["s"], ["y"])],
              [("x", x)], [("y", relu(h @ w1 + h @ w2))], 13,
              initializers=[("w0", w0), ("w1", w1), ("w2", w2)])


def residual_conv_cases():
    """A residual Add after a Conv, which a pass moves into the Conv (its
    fourth input): the GEMM's epilogue adds it (1x1 batched, im2col per
    image, no bias, the residual first in the Add); an ADD step after the
    Conv adds it for groups, depthwise and residuals that broadcast (along
    the channels, or past the convolution's own shape); a residual made
    after the Conv in the file's order (not fused)."""
    rng = np.random.default_rng(1506)
    mk = helper.make_node

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    relu = lambda v: np.maximum(v, 0).astype(np.float32)

    def grouped(x, w, b, groups, strides, pads):
        c, m = x.shape[1] // groups, w.shape[0] // groups
        return np.concatenate(
            [ref_conv(x[:, g * c:(g + 1) * c], w[g * m:(g + 1) * m],
                      b[g * m:(g + 1) * m], strides, pads, [1, 1])
             for g in range(groups)], axis=1)

    def case(name, conv, x, w, b, res, y, add_first=False, act=True,
             extra=()):
        ins = ["x", "w"] + (["b"] if b is not None else [])
        add = ["res", "c"] if add_first else ["c", "res"]
        nodes = [mk("Conv", ins, ["c"], **conv), *extra,
                 mk("Add", add, ["s" if act else "y"])]
        if act:
            nodes.append(mk("Relu", ["s"], ["y"]))
        inits = [("w", w)] + ([("b", b)] if b is not None else [])
        inputs = [("x", x)] + ([("res", res)] if res is not None else [])
        node_case(name, nodes, inputs, [("y", y)], 13, initializers=inits)

    x, w, b, q = r(3, 8, 5, 6), r(8, 8, 1, 1), r(8), r(3, 8, 5, 6)
    c = ref_conv(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1])
    case("test_fuse_conv_residual_1x1_batched_opset13", {}, x, w, b, q,
         relu(c + q))
    x, w, b, q = r(2, 5, 9, 9), r(7, 5, 3, 3), r(7), r(2, 7, 5, 5)
    c = ref_conv(x, w, b, [2, 2], [1, 1, 1, 1], [1, 1])
    case("test_fuse_conv_residual_im2col_stride2_opset13",
         {"strides": [2, 2], "pads": [1, 1, 1, 1]}, x, w, b, q, relu(q + c),
         add_first=True)
    x, w, q = r(1, 6, 8, 8), r(6, 6, 3, 3), r(1, 6, 8, 8)
    c = ref_conv(x, w, np.zeros(6, np.float32), [1, 1], [1, 1, 1, 1], [1, 1])
    case("test_fuse_conv_residual_no_bias_no_relu_opset13",
         {"pads": [1, 1, 1, 1]}, x, w, None, q, c + q, act=False)
    x, w, b, q = r(2, 8, 6, 6), r(6, 4, 1, 1), r(6), r(2, 6, 6, 6)
    c = grouped(x, w, b, 2, [1, 1], [0, 0, 0, 0])
    case("test_fuse_conv_residual_grouped_opset13", {"group": 2}, x, w, b, q,
         relu(c + q))
    x, w, b, q = r(1, 6, 10, 12), r(6, 1, 3, 3), r(6), r(1, 6, 10, 12)
    c = grouped(x, w, b, 6, [1, 1], [1, 1, 1, 1])
    case("test_fuse_conv_residual_depthwise_opset13",
         {"group": 6, "pads": [1, 1, 1, 1]}, x, w, b, q, relu(c + q))
    x, w, b, q = r(1, 4, 7, 7), r(5, 4, 1, 1), r(5), r(1, 5, 1, 1)
    c = ref_conv(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1])
    case("test_fuse_conv_residual_broadcast_channels_opset13", {}, x, w, b, q,
         relu(c + q))
    x, w, b, q = r(1, 8, 1, 1), r(8, 8, 1, 1), r(8), r(2, 8, 5, 4)
    c = ref_conv(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1])
    case("test_fuse_conv_residual_broadcast_past_output_opset13", {}, x, w, b,
         q, relu(c + q))
    x, w, b = r(1, 4, 6, 6), r(4, 4, 1, 1), r(4)
    c = ref_conv(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1])
    sig = (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)
    case("test_fuse_conv_residual_made_after_conv_opset13", {}, x, w, b, None,
         relu(c + sig), extra=[mk("Sigmoid", ["x"], ["res"])])


def convtranspose_tile_cases():
    """Transposed convolutions whose windows tile the output (stride =
    kernel, no pads): one GEMM per group and a copy.  2-D 2 x 2 with bias
    and a batch (the segmentation heads' upsampling), one output channel,
    groups, 1-D, 3-D with a kernel of 1 on one axis, no bias; and stride 2
    with a kernel of 3 (overlapping: the general path) beside them."""
    rng = np.random.default_rng(1507)
    mk = helper.make_node

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def case(name, x, w, b, group, k):
        out = [x.shape[2 + i] * k[i] for i in range(len(k))]
        ins = ["x", "w"] + (["b"] if b is not None else [])
        inits = [("w", w)] + ([("b", b)] if b is not None else [])
        node_case(name,
                  [mk("ConvTranspose", ins, ["y"], strides=list(k),
                      group=group)],
                  [("x", x)],
                  [("y", ref_convtranspose(x, w, b, group, k, [1] * len(k),
                                           [0] * len(k), out))],
                  11, initializers=inits)

    case("test_convtranspose_tiles_2x2_bias_batch", r(2, 6, 5, 7),
         r(6, 4, 2, 2), r(4), 1, [2, 2])
    case("test_convtranspose_tiles_one_channel", r(1, 8, 9, 9), r(8, 1, 2, 2),
         r(1), 1, [2, 2])
    case("test_convtranspose_tiles_groups", r(1, 6, 4, 5), r(6, 2, 2, 2),
         r(6), 3, [2, 2])
    case("test_convtranspose_tiles_1d", r(2, 3, 11), r(3, 5, 3), r(5), 1,
         [3])
    case("test_convtranspose_tiles_3d_no_bias", r(1, 2, 3, 2, 4),
         r(2, 3, 2, 1, 2), None, 1, [2, 1, 2])
    x, w, b = r(1, 4, 5, 5), r(4, 3, 3, 3), r(3)
    node_case("test_convtranspose_overlapping_stride2",
              [mk("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2])],
              [("x", x)],
              [("y", ref_convtranspose(x, w, b, 1, [2, 2], [1, 1], [0, 0],
                                       [11, 11]))], 11,
              initializers=[("w", w), ("b", b)])


def affine_fold_cases():
    """A Mul and an Add by constants after a Conv, which a pass folds into
    its weights and bias: one value and one per channel, either operand
    order, an Add alone, a Conv without bias; a Mul whose constant varies
    along the image (not folded) and a Mul read twice (not folded)."""
    rng = np.random.default_rng(1508)
    mk = helper.make_node

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    x, w, b = r(2, 3, 6, 6), r(5, 3, 3, 3), r(5)
    s, t = r(1), r(5, 1, 1)
    c = ref_conv(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1])
    node_case("test_fold_conv_scale_shift_opset13",
              [mk("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
               mk("Mul", ["s", "c"], ["m"]), mk("Add", ["m", "t"], ["y"])],
              [("x", x)], [("y", c * s + t)], 13,
              initializers=[("w", w), ("b", b), ("s", s), ("t", t)])
    x, w = r(1, 4, 5, 5), r(4, 1, 3, 3)
    s, t = r(1, 4, 1, 1), r(1)
    c = np.concatenate([ref_conv(x[:, i:i + 1], w[i:i + 1],
                                 np.zeros(1, np.float32), [1, 1],
                                 [1, 1, 1, 1], [1, 1]) for i in range(4)],
                       axis=1)
    node_case("test_fold_depthwise_no_bias_scale_shift_opset13",
              [mk("Conv", ["x", "w"], ["c"], group=4, pads=[1, 1, 1, 1]),
               mk("Mul", ["c", "s"], ["m"]), mk("Add", ["t", "m"], ["y"])],
              [("x", x)], [("y", c * s + t)], 13,
              initializers=[("w", w), ("s", s), ("t", t)])
    x, w, b, t = r(1, 3, 4, 4), r(6, 3, 1, 1), r(6), r(6, 1, 1)
    c = ref_conv(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1])
    node_case("test_fold_conv_shift_then_relu_opset13",
              [mk("Conv", ["x", "w", "b"], ["c"]),
               mk("Add", ["c", "t"], ["a"]), mk("Relu", ["a"], ["y"])],
              [("x", x)], [("y", np.maximum(c + t, 0))], 13,
              initializers=[("w", w), ("b", b), ("t", t)])
    x, w, b, s = r(1, 3, 4, 4), r(2, 3, 1, 1), r(2), r(4, 4)
    c = ref_conv(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1])
    node_case("test_fold_conv_scale_varying_in_space_opset13",
              [mk("Conv", ["x", "w", "b"], ["c"]),
               mk("Mul", ["c", "s"], ["y"])],
              [("x", x)], [("y", c * s)], 13,
              initializers=[("w", w), ("b", b), ("s", s)])
    x, w, b, s = r(1, 3, 4, 4), r(2, 3, 1, 1), r(2), r(1)
    c = ref_conv(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1])
    node_case("test_fold_conv_read_twice_opset13",
              [mk("Conv", ["x", "w", "b"], ["c"]),
               mk("Mul", ["c", "s"], ["m"]), mk("Add", ["m", "c"], ["y"])],
              [("x", x)], [("y", c * s + c)], 13,
              initializers=[("w", w), ("b", b), ("s", s)])


def banded_conv_cases():
    """A convolution whose im2col matrix passes 4 MiB (64 channels, 7 x 7,
    20 x 20: 3136 x 400 floats), which runs in bands of output rows, with
    a fused residual and Relu; and grouped, with a batch of two.  Inputs
    and weights in [0, 1): sums of 3136 products that cancel would differ
    past the split test's tolerance when a split sums them in another
    order."""
    rng = np.random.default_rng(1509)
    mk = helper.make_node

    def r(*shape):
        return rng.random(shape, dtype=np.float32)

    x, w, b, q = r(1, 64, 20, 20), r(4, 64, 7, 7) / 8, r(4), r(1, 4, 20, 20)
    c = ref_conv(x, w, b, [1, 1], [3, 3, 3, 3], [1, 1])
    node_case("test_conv_banded_residual_relu_opset13",
              [mk("Conv", ["x", "w", "b"], ["c"], pads=[3, 3, 3, 3]),
               mk("Add", ["c", "q"], ["s"]), mk("Relu", ["s"], ["y"])],
              [("x", x), ("q", q)], [("y", np.maximum(c + q, 0))], 13,
              initializers=[("w", w), ("b", b)])
    x, w, b = r(2, 64, 20, 19), r(4, 32, 7, 7) / 8, r(4)
    y = np.concatenate(
        [ref_conv(x[:, g * 32:(g + 1) * 32], w[g * 2:(g + 1) * 2],
                  b[g * 2:(g + 1) * 2], [1, 1], [3, 3, 3, 3], [1, 1])
         for g in range(2)], axis=1)
    node_case("test_conv_banded_grouped_batch_opset13",
              [mk("Conv", ["x", "w", "b"], ["y"], group=2,
                  pads=[3, 3, 3, 3])],
              [("x", x)], [("y", y)], 13, initializers=[("w", w), ("b", b)])


def hard_swish_chain_cases():
    """A hard swish exported as Add, Clip, Mul and Div by constants, which a
    pass fuses into one step: Clip's bounds as inputs and as attributes
    (opset 10), operands either way round; one whose product is read again
    (not fused)."""
    rng = np.random.default_rng(1509)
    mk = helper.make_node
    f32 = np.float32

    def hswish(x):
        c = np.clip(x + f32(3), f32(0), f32(6))
        return (x * c) / f32(6)

    # values around the clip's corners (-3 and 3) and far outside
    x = np.concatenate([rng.uniform(-5, 5, 200),
                        [-3, 3, -3.0000002, 2.9999998, 0, -0.0, 7, -9, 1e-30,
                         -1e-30]]).astype(f32)[:210].reshape(2, 3, 5, 7)
    consts = [("three", np.array(3, f32)), ("zero", np.array(0, f32)),
              ("six", np.array(6, f32))]
    node_case("test_fuse_hard_swish_chain_opset13",
              [mk("Add", ["x", "three"], ["t"]),
               mk("Clip", ["t", "zero", "six"], ["c"]),
               mk("Mul", ["x", "c"], ["m"]), mk("Div", ["m", "six"], ["y"])],
              [("x", x)], [("y", hswish(x))], 13, initializers=consts)
    x2 = rng.uniform(-6, 6, (3, 16, 9)).astype(f32)
    node_case("test_fuse_hard_swish_chain_clip_attrs_opset10",
              [mk("Add", ["three", "x"], ["t"]),
               mk("Clip", ["t"], ["c"], min=0.0, max=6.0),
               mk("Mul", ["c", "x"], ["m"]), mk("Div", ["m", "six"], ["y"])],
              [("x", x2)], [("y", hswish(x2))], 10,
              initializers=[consts[0], consts[2]])
    node_case("test_fuse_hard_swish_product_read_twice_opset13",
              [mk("Add", ["x", "three"], ["t"]),
               mk("Clip", ["t", "zero", "six"], ["c"]),
               mk("Mul", ["x", "c"], ["m"]), mk("Div", ["m", "six"], ["y"]),
               mk("Neg", ["m"], ["n"])],
              [("x", x2)], [("y", hswish(x2)), ("n", -(x2 * np.clip(
                  x2 + f32(3), f32(0), f32(6))))], 13, initializers=consts)


def pad_fold_cases():
    """A Pad of zeros before a Conv, which a pass folds into the Conv's
    pads: TensorFlow's "SAME" stride 2 (pads after only), pads added to the
    Conv's own on a depthwise Conv with the zero given as an input, the
    opset-10 attribute form; a Pad of ones and a reflecting Pad (not
    folded)."""
    rng = np.random.default_rng(1510)
    mk = helper.make_node
    f32 = np.float32

    def r(*shape):
        return rng.standard_normal(shape).astype(f32)

    def i64(*v):
        return np.array(v, np.int64)

    x, w, b = r(1, 3, 9, 8), r(4, 3, 3, 3), r(4)
    node_case("test_fold_pad_conv_same_stride2_opset13",
              [mk("Pad", ["x", "pads"], ["p"]),
               mk("Conv", ["p", "w", "b"], ["y"], strides=[2, 2])],
              [("x", x)],
              [("y", ref_conv(x, w, b, [2, 2], [0, 0, 1, 1], [1, 1]))], 13,
              initializers=[("pads", i64(0, 0, 0, 0, 0, 0, 1, 1)),
                            ("w", w), ("b", b)])
    x, w = r(2, 3, 6, 7), r(3, 1, 3, 3)
    zb = np.zeros(1, f32)
    y = np.concatenate([ref_conv(x[:, i:i + 1], w[i:i + 1], zb, [1, 1],
                                 [2, 1, 1, 3], [1, 1]) for i in range(3)],
                       axis=1)
    node_case("test_fold_pad_depthwise_onto_its_pads_opset11",
              [mk("Pad", ["x", "pads", "zero"], ["p"]),
               mk("Conv", ["p", "w"], ["y"], group=3, pads=[1, 1, 1, 1])],
              [("x", x)], [("y", y)], 11,
              initializers=[("pads", i64(0, 0, 1, 0, 0, 0, 0, 2)),
                            ("zero", np.array(0, f32)), ("w", w)])
    x, w, b = r(1, 2, 5, 5), r(3, 2, 2, 2), r(3)
    node_case("test_fold_pad_conv_attribute_opset10",
              [mk("Pad", ["x"], ["p"], pads=[0, 0, 1, 2, 0, 0, 1, 0]),
               mk("Conv", ["p", "w", "b"], ["y"])],
              [("x", x)],
              [("y", ref_conv(x, w, b, [1, 1], [1, 2, 1, 0], [1, 1]))], 10,
              initializers=[("w", w), ("b", b)])
    x, w, b = r(1, 2, 4, 4), r(2, 2, 3, 3), r(2)
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)], constant_values=1)
    node_case("test_fold_pad_of_ones_stays_opset13",
              [mk("Pad", ["x", "pads", "one"], ["p"]),
               mk("Conv", ["p", "w", "b"], ["y"])],
              [("x", x)],
              [("y", ref_conv(xp, w, b, [1, 1], [0, 0, 0, 0], [1, 1]))], 13,
              initializers=[("pads", i64(0, 0, 1, 1, 0, 0, 1, 1)),
                            ("one", np.array(1, f32)), ("w", w), ("b", b)])
    xr = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)], mode="reflect")
    node_case("test_fold_pad_reflect_stays_opset13",
              [mk("Pad", ["x", "pads"], ["p"], mode="reflect"),
               mk("Conv", ["p", "w", "b"], ["y"])],
              [("x", x)],
              [("y", ref_conv(xr, w, b, [1, 1], [0, 0, 0, 0], [1, 1]))], 13,
              initializers=[("pads", i64(0, 0, 1, 1, 0, 0, 1, 1)),
                            ("w", w), ("b", b)])


def gate_mul_cases():
    """x times Sigmoid(x) (the SiLU) and x times HardSigmoid(x), which a pass
    fuses into the unary step; a Sigmoid read again (not fused)."""
    rng = np.random.default_rng(1511)
    mk = helper.make_node
    f32 = np.float32
    x = np.concatenate([rng.uniform(-9, 9, 1200),
                        [0, -0.0, 30, -30, 88, -88, 1e-30, -3, 3]]
                       ).astype(f32)[:1209].reshape(3, 13, 31)

    def sigmoid(v):
        return (1 / (1 + np.exp(-v.astype(np.float64)))).astype(f32)

    def hard_sigmoid(v, a, b):
        return np.clip(v * f32(a) + f32(b), 0, 1).astype(f32)

    node_case("test_fuse_silu_opset13",
              [mk("Sigmoid", ["x"], ["s"]), mk("Mul", ["x", "s"], ["y"])],
              [("x", x)], [("y", x * sigmoid(x))], 13)
    node_case("test_fuse_hard_sigmoid_gate_opset13",
              [mk("HardSigmoid", ["x"], ["s"], alpha=1 / 6, beta=0.5),
               mk("Mul", ["s", "x"], ["y"])],
              [("x", x)], [("y", x * hard_sigmoid(x, 1 / 6, 0.5))], 13)
    node_case("test_fuse_silu_sigmoid_read_twice_opset13",
              [mk("Sigmoid", ["x"], ["s"]), mk("Mul", ["x", "s"], ["y"])],
              [("x", x)], [("y", x * sigmoid(x)), ("s", sigmoid(x))], 13)


def relu6_cases():
    """A Clip with the bounds 0 and 6 (TensorFlow's Relu6) after a Conv,
    a depthwise Conv (bounds as attributes, opset 10), a Gemm, a grouped
    Conv with a bias (the Clip after the bias step) and two MatMuls whose
    second one a tensor split cuts into partial sums; a Clip to 5 stays
    apart."""
    rng = np.random.default_rng(1512)
    mk = helper.make_node
    f32 = np.float32

    def r(*shape, scale=3.0):
        return (rng.standard_normal(shape) * scale).astype(f32)

    def relu6(v):
        return np.clip(v, f32(0), f32(6))

    bounds = [("zero", np.array(0, f32)), ("six", np.array(6, f32))]
    x, w, b = r(2, 3, 7, 6), r(5, 3, 3, 3, scale=1.0), r(5)
    node_case("test_fuse_conv_relu6_opset13",
              [mk("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
               mk("Clip", ["c", "zero", "six"], ["y"])],
              [("x", x)],
              [("y", relu6(ref_conv(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1])))],
              13, initializers=[("w", w), ("b", b)] + bounds)
    x, w, b = r(1, 4, 9, 70), r(4, 1, 3, 3, scale=1.0), r(4)
    y = np.concatenate([ref_conv(x[:, i:i + 1], w[i:i + 1], b[i:i + 1],
                                 [1, 1], [1, 1, 1, 1], [1, 1])
                        for i in range(4)], axis=1)
    node_case("test_fuse_depthwise_relu6_clip_attrs_opset10",
              [mk("Conv", ["x", "w", "b"], ["c"], group=4,
                  pads=[1, 1, 1, 1]),
               mk("Clip", ["c"], ["y"], min=0.0, max=6.0)],
              [("x", x)], [("y", relu6(y))], 10,
              initializers=[("w", w), ("b", b)])
    x, w, b = r(5, 40), r(40, 24, scale=0.5), r(24)
    node_case("test_fuse_gemm_relu6_opset13",
              [mk("Gemm", ["x", "w", "b"], ["g"]),
               mk("Clip", ["g", "zero", "six"], ["y"])],
              [("x", x)], [("y", relu6(x @ w + b))], 13,
              initializers=[("w", w), ("b", b)] + bounds)
    x, w, b = r(1, 4, 5, 5), r(6, 2, 3, 3, scale=1.0), r(6)
    y = np.concatenate([ref_conv(x[:, 2 * i:2 * i + 2], w[3 * i:3 * i + 3],
                                 b[3 * i:3 * i + 3], [1, 1], [0, 0, 0, 0],
                                 [1, 1]) for i in range(2)], axis=1)
    node_case("test_fuse_grouped_conv_bias_relu6_opset13",
              [mk("Conv", ["x", "w", "b"], ["c"], group=2),
               mk("Clip", ["c", "zero", "six"], ["y"])],
              [("x", x)], [("y", relu6(y))], 13,
              initializers=[("w", w), ("b", b)] + bounds)
    x, w0, w1 = r(8, 64, scale=1.0), r(64, 64, scale=0.3), r(64, 32,
                                                             scale=0.3)
    node_case("test_fuse_matmul_sum_relu6_opset13",
              [mk("MatMul", ["x", "w0"], ["h"]),
               mk("MatMul", ["h", "w1"], ["p"]),
               mk("Clip", ["p", "zero", "six"], ["y"])],
              [("x", x)], [("y", relu6((x @ w0) @ w1))], 13,
              initializers=[("w0", w0), ("w1", w1)] + bounds)
    x, w, b = r(1, 3, 4, 4), r(2, 3, 1, 1, scale=1.0), r(2)
    node_case("test_fuse_conv_clip_to_5_stays_opset13",
              [mk("Conv", ["x", "w", "b"], ["c"]),
               mk("Clip", ["c", "zero", "five"], ["y"])],
              [("x", x)],
              [("y", np.clip(ref_conv(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1]),
                             f32(0), f32(5)))], 13,
              initializers=[("w", w), ("b", b), bounds[0],
                            ("five", np.array(5, f32))])


def empty_product_act_cases():
    """A Gemm and a MatMul over an empty reduced dimension (k = 0) with a
    Relu or a Relu6 after, which passes fuse into them: the output is the
    activated bias."""
    rng = np.random.default_rng(1513)
    mk = helper.make_node
    f32 = np.float32
    a, b = np.zeros((4, 0), f32), np.zeros((0, 5), f32)
    c = (rng.standard_normal(5) * 8).astype(f32)
    node_case("test_fuse_gemm_relu_empty_k_opset13",
              [mk("Gemm", ["a", "b", "c"], ["g"], beta=0.5),
               mk("Relu", ["g"], ["y"])],
              [("a", a)],
              [("y", np.maximum(np.broadcast_to(c * f32(0.5), (4, 5)), 0))],
              13, initializers=[("b", b), ("c", c)])
    node_case("test_fuse_matmul_bias_relu6_empty_k_opset13",
              [mk("MatMul", ["a", "b"], ["m"]), mk("Add", ["m", "c"], ["s"]),
               mk("Clip", ["s", "zero", "six"], ["y"])],
              [("a", a)],
              [("y", np.clip(np.broadcast_to(c, (4, 5)), 0, 6).astype(f32))],
              13, initializers=[("b", b), ("c", c),
                                ("zero", np.array(0, f32)),
                                ("six", np.array(6, f32))])

def quantized_weight_cases():
    """Products by a DequantizeLinear of constant integers, which a pass
    keeps as stored (QuantizedMatMul): int8 per column with zero points
    under MatMul, uint8 per tensor under Gemm (transB, bias, Relu), a
    batched MatMul whose bias Add is fused, one weight read by two
    MatMuls, and a per-row scale along K that cannot be kept (the weight
    is dequantized on the device then).  Expected: float64 products of
    the dequantized weights, rounded to float32."""
    rng = np.random.default_rng(1616)
    mk = helper.make_node
    f32 = np.float32

    def deq(q, s, z, axis):
        s64, z64 = s.astype(np.float64), z.astype(np.float64)
        if s.ndim == 1 and s.size > 1:
            shape = [1, 1]
            shape[axis] = s.size
            s64, z64 = s64.reshape(shape), z64.reshape(shape)
        return (q.astype(np.float64) - z64) * s64

    x = rng.uniform(-1, 1, (3, 40)).astype(f32)
    q = rng.integers(-128, 128, (40, 24)).astype(np.int8)
    s = rng.uniform(0.001, 0.02, 24).astype(f32)
    z = rng.integers(-5, 6, 24).astype(np.int8)
    node_case("test_sn_quantized_matmul_per_column_opset13",
              [mk("DequantizeLinear", ["q", "s", "z"], ["w"], axis=1),
               mk("MatMul", ["x", "w"], ["y"])],
              [("x", x)], [("y", (x @ deq(q, s, z, 1)).astype(f32))], 13,
              initializers=[("q", q), ("s", s), ("z", z)])
    x = rng.uniform(-1, 1, (5, 33)).astype(f32)
    q = rng.integers(0, 256, (20, 33)).astype(np.uint8)
    s, z = np.array(0.01, f32), np.array(128, np.uint8)
    b = rng.uniform(-0.5, 0.5, 20).astype(f32)
    y = np.maximum(x @ deq(q, s, z, 0).T + b, 0).astype(f32)
    node_case("test_sn_quantized_gemm_transb_bias_relu_opset13",
              [mk("DequantizeLinear", ["q", "s", "z"], ["w"]),
               mk("Gemm", ["x", "w", "b"], ["g"], transB=1),
               mk("Relu", ["g"], ["y"])],
              [("x", x)], [("y", y)], 13,
              initializers=[("q", q), ("s", s), ("z", z), ("b", b)])
    x = rng.uniform(-1, 1, (2, 3, 16)).astype(f32)
    q = rng.integers(-127, 128, (16, 8)).astype(np.int8)
    s, b = np.array(0.05, f32), rng.uniform(-1, 1, 8).astype(f32)
    y = (x.astype(np.float64) @ (q.astype(np.float64) * 0.05) + b)
    node_case("test_sn_quantized_matmul_batched_bias_opset13",
              [mk("DequantizeLinear", ["q", "s"], ["w"]),
               mk("MatMul", ["x", "w"], ["m"]),
               mk("Add", ["m", "b"], ["y"])],
              [("x", x)], [("y", y.astype(f32))], 13,
              initializers=[("q", q), ("s", s), ("b", b)])
    x1 = rng.uniform(-1, 1, (4, 12)).astype(f32)
    x2 = rng.uniform(-1, 1, (1, 12)).astype(f32)
    q = rng.integers(-128, 128, (12, 10)).astype(np.int8)
    s = rng.uniform(0.01, 0.1, 10).astype(f32)
    w = deq(q, s, np.zeros(10, np.int8), 1)
    node_case("test_sn_quantized_weight_read_twice_opset13",
              [mk("DequantizeLinear", ["q", "s"], ["w"], axis=1),
               mk("MatMul", ["x1", "w"], ["y1"]),
               mk("MatMul", ["x2", "w"], ["y2"])],
              [("x1", x1), ("x2", x2)],
              [("y1", (x1 @ w).astype(f32)), ("y2", (x2 @ w).astype(f32))],
              13, initializers=[("q", q), ("s", s)])
    x = rng.uniform(-1, 1, (3, 9)).astype(f32)
    q = rng.integers(-128, 128, (9, 6)).astype(np.int8)
    s = rng.uniform(0.01, 0.1, 9).astype(f32)
    node_case("test_sn_quantized_scale_along_k_stays_opset13",
              [mk("DequantizeLinear", ["q", "s"], ["w"], axis=0),
               mk("MatMul", ["x", "w"], ["y"])],
              [("x", x)],
              [("y", (x @ deq(q, s, np.zeros(9, np.int8), 0)).astype(f32))],
              13, initializers=[("q", q), ("s", s)])


def half_weight_cases():
    """Weights stored as float16 or bfloat16 and Cast to float for their
    product: the pass keeps them in their halves (QuantizedMatMul)."""
    rng = np.random.default_rng(1616)
    mk = helper.make_node
    f32 = np.float32
    x = rng.uniform(-1, 1, (3, 70)).astype(f32)
    w = rng.uniform(-1, 1, (20, 70)).astype(np.float16)
    b = rng.uniform(-0.5, 0.5, 20).astype(f32)
    y = np.maximum(x.astype(np.float64) @ w.astype(np.float64).T + b, 0)
    node_case("test_sn_half_gemm_transb_bias_relu_opset13",
              [mk("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
               mk("Gemm", ["x", "wf", "b"], ["g"], transB=1),
               mk("Relu", ["g"], ["y"])],
              [("x", x)], [("y", y.astype(f32))], 13,
              initializers=[("w", w), ("b", b)])
    # bfloat16: a float's top 16 bits (rounded to nearest even)
    x = rng.uniform(-1, 1, (2, 3, 33)).astype(f32)
    wf = rng.uniform(-1, 1, (33, 40)).astype(f32)
    bits = wf.view(np.uint32)
    top = ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    wq = (top.astype(np.uint32) << 16).view(f32)
    t = helper.make_tensor("w", TensorProto.BFLOAT16, wf.shape,
                           top.tobytes(), raw=True)
    y = x.astype(np.float64) @ wq.astype(np.float64)
    node_case("test_sn_bfloat16_matmul_batched_opset13",
              [mk("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
               mk("MatMul", ["x", "wf"], ["y"])],
              [("x", x)], [("y", y.astype(f32))], 13,
              initializers=[("w", t)])


def matmul_nbits_cases():
    """ONNX Runtime's MatMulNBits (com.microsoft): 4-bit weights in blocks
    of 16 with packed zero points and K not a multiple of the block, 4-bit
    in blocks of 32 with the default zero point (8) and a bias, 8-bit with
    float zero points; expected: A times the dequantized weight in float64,
    rounded to float32."""
    rng = np.random.default_rng(1717)
    f32 = np.float32

    def make(n, k, bits, bs, zp_kind):
        blocks = (k + bs - 1) // bs
        q = rng.integers(0, 1 << bits, (n, blocks * bs)).astype(np.uint8)
        q[:, k:] = 0
        s = rng.uniform(0.01, 0.1, (n, blocks)).astype(f32)
        if zp_kind == "packed":
            z = rng.integers(0, 16, (n, blocks)).astype(np.uint8)
            zp = np.zeros((n, (blocks + 1) // 2), np.uint8)
            for b in range(blocks):
                zp[:, b // 2] |= z[:, b] << (4 * (b % 2))
            zp = zp.reshape(-1)
        elif zp_kind == "float":
            z = rng.uniform(100, 150, (n, blocks)).astype(f32)
            zp = z.reshape(-1)
        else:
            z = np.full((n, blocks), 1 << (bits - 1), np.float64)
            zp = None
        w = (q.astype(np.float64) - np.repeat(z, bs, axis=1)) * \
            np.repeat(s.astype(np.float64), bs, axis=1)
        w = w[:, :k]
        if bits == 4:
            packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
        else:
            packed = q
        packed = packed.reshape(n, blocks, bs * bits // 8)
        return packed, s.reshape(-1), zp, w

    mk = helper.make_node
    for name, n, k, bits, bs, zk, rows, with_bias in (
            ("test_sn_matmul_nbits_4bit_packed_zero_opset13", 6, 40, 4, 16,
             "packed", (3,), False),
            ("test_sn_matmul_nbits_4bit_bias_opset13", 10, 64, 4, 32, None,
             (2, 5), True),
            ("test_sn_matmul_nbits_8bit_float_zero_opset13", 7, 48, 8, 16,
             "float", (4,), False)):
        packed, s, zp, w = make(n, k, bits, bs, zk)
        x = rng.uniform(-1, 1, rows + (k,)).astype(f32)
        ins = ["x", "b", "s", "z" if zp is not None else ""]
        inits = [("b", packed), ("s", s)]
        if zp is not None:
            inits.append(("z", zp))
        y = x.astype(np.float64) @ w.T
        if with_bias:
            bias = rng.uniform(-1, 1, n).astype(f32)
            ins += ["", "bias"]
            inits.append(("bias", bias))
            y = y + bias
        node_case(name,
                  [mk("MatMulNBits", ins, ["y"], domain="com.microsoft",
                      K=k, N=n, bits=bits, block_size=bs)],
                  [("x", x)], [("y", y.astype(f32))], 13,
                  initializers=inits, domains=[("com.microsoft", 1)])


if __name__ == "__main__":
    initializers_ir3()
    external()
    npy()

    huge_constant_of_shape()
    legacy_cases()
    dilation_and_softmax_cases()
    zero_size_cases()
    slice_cases()
    batchnorm_spatial0_cases()
    variadic_cases()
    tfidf_cases()
    reduce_cases()
    select_cases()
    cumsum_lpnorm_cases()
    index_gather_cases()
    index_scatter_cases()
    index_map_cases()
    index_host_cases()
    nn_cases()
    einsum_cases()
    det_cases()
    quant_cases()
    loss_cases()
    control_cases()
    spatial_cases()
    spatial_lrn_unpool_cases()
    quant_device_cases()
    qlinear_matmul_device_cases()
    qlinear_conv_device_cases()
    dynamic_float_sums_cases()
    half_compute_cases()
    newer_norm_cases()
    opset19_pool_cases()
    opset21_quant_cases()
    ms_contrib_cases()
    elementwise_cases()
    cast_device_cases()
    recurrent_cases()
    control_real_model_cases()
    spatial_hostile_cases()
    depthwise_conv_cases()
    constant_output_cases()
    fused_binary_relu_cases()
    residual_conv_cases()
    convtranspose_tile_cases()
    affine_fold_cases()
    banded_conv_cases()
    hard_swish_chain_cases()
    pad_fold_cases()
    gate_mul_cases()
    relu6_cases()
    empty_product_act_cases()
    quantized_weight_cases()
    half_weight_cases()
    matmul_nbits_cases()
