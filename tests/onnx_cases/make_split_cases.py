#!/usr/bin/python3
"""Make the models, inputs and expected outputs that tests/test_api.c and
tests/test_cli.sh run whole, split and from several threads.

Run from anywhere with Debian's python3-onnx and python3-numpy:
    /usr/bin/python3 tests/onnx_cases/make_split_cases.py
The outputs are committed; rerun only to change them.  The expected
outputs are computed here with numpy, independently of shardnet.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def out(name):
    return os.path.join(HERE, name)


def multi_io():
    """Two inputs (float rows, int64 indices into an embedding table, one
    per row) and two outputs of different shapes:
        e  = Gather(table, idx)            # (N, 8)
        h  = Relu((x + e) W1 + b1)         # (N, 6)
        y1 = h W2                          # (N, 4)
        y2 = x W3                          # (N, 3)
    """
    rng = np.random.default_rng(13)
    table = rng.standard_normal((10, 8)).astype(np.float32)
    w1 = rng.standard_normal((8, 6)).astype(np.float32)
    b1 = rng.standard_normal((6,)).astype(np.float32)
    w2 = rng.standard_normal((6, 4)).astype(np.float32)
    w3 = rng.standard_normal((8, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", "idx"], ["e"], name="embed",
                         axis=0),
        helper.make_node("Add", ["x", "e"], ["xe"], name="add"),
        helper.make_node("Gemm", ["xe", "w1", "b1"], ["g"], name="fc1"),
        helper.make_node("Relu", ["g"], ["h"], name="relu"),
        helper.make_node("MatMul", ["h", "w2"], ["y1"], name="fc2"),
        helper.make_node("MatMul", ["x", "w3"], ["y2"], name="side"),
    ]
    graph = helper.make_graph(
        nodes, "multi_io",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8]),
         helper.make_tensor_value_info("idx", TensorProto.INT64, ["N"])],
        [helper.make_tensor_value_info("y1", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["N", 3])],
        initializer=[numpy_helper.from_array(table, "table"),
                     numpy_helper.from_array(w1, "w1"),
                     numpy_helper.from_array(b1, "b1"),
                     numpy_helper.from_array(w2, "w2"),
                     numpy_helper.from_array(w3, "w3")])
    model = helper.make_model(graph, producer_name="make_split_cases",
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, out("multi_io.onnx"))

    n = 12
    x = rng.standard_normal((n, 8)).astype(np.float32)
    idx = rng.integers(0, 10, size=n).astype(np.int64)
    idx[3] = -1  # Gather counts a negative index from the end
    e = table[idx]
    h = np.maximum((x + e) @ w1 + b1, 0).astype(np.float32)
    np.save(out("multi_io_x.npy"), x)
    np.save(out("multi_io_idx.npy"), idx)
    np.save(out("multi_io_y1.npy"), (h @ w2).astype(np.float32))
    np.save(out("multi_io_y2.npy"), (x @ w3).astype(np.float32))


def external_io():
    """An input and the expected output for external/model.onnx (made by
    make_cases.py: y = x W, W = arange(12) as 3 x 4, in weights.bin)."""
    x = np.array([[0.5, -1.0, 2.0]], dtype=np.float32)
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.save(out("external_x.npy"), x)
    np.save(out("external_y.npy"), (x @ w).astype(np.float32))


if __name__ == "__main__":
    multi_io()
    external_io()
