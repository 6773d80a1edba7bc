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


if __name__ == "__main__":
    initializers_ir3()
    external()
    npy()

    huge_constant_of_shape()
