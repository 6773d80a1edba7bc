#!/usr/bin/python3
"""Make the small valid model and tensor files that tests/test_onnx.c loads.

Run from anywhere with Debian's python3-onnx and python3-numpy:
    /usr/bin/python3 tests/onnx_cases/make_cases.py
The outputs are committed; rerun only to change them.  Hostile inputs are
built by the test itself (tests/test_onnx.c), byte by byte.
"""
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
              batch=False):
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
        initializer=[numpy_helper.from_array(a, n) for n, a in initializers])
    model = helper.make_model(graph, producer_name="make_cases",
                              opset_imports=[helper.make_opsetid("", opset)])
    # Old opsets want an IR version of their time.
    model.ir_version = 3 if opset < 7 else 7
    d = out(os.path.join("node", name))
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for kind, items in (("input", inputs), ("output", outputs)):
        for i, (n, a) in enumerate(items):
            t = numpy_helper.from_array(np.ascontiguousarray(a), n)
            with open(os.path.join(d, "test_data_set_0",
                                   "%s_%d.pb" % (kind, i)), "wb") as f:
                f.write(t.SerializeToString())


def ref_conv(x, w, b, strides, pads, dilations):
    """Plain loops: x (N, C, H, W), w (M, C, kh, kw), pads (t, l, b, r)."""
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
    return (y + b.reshape(1, m, 1, 1)).astype(np.float32)


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
    depthwise_conv_cases()
