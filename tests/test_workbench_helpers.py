"""Models and helpers for the workbench tests (no tests here).

The synthetic models use elementwise and data-movement ops only, so the app's mechanics are
tested whatever kernels a backend has; ``reference_*`` compute the same graphs in float64.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def block_model(path: str, blocks: int, shape=(1, 3, 32, 32), seed: int = 0) -> dict:
    """A residual chain: per block y = x + sigmoid(relu(x * a + b)); returns the constants."""
    rng = np.random.default_rng(seed)
    nodes, inits, consts = [], [], {}
    x = "image"
    c = shape[1]
    for k in range(blocks):
        a = rng.uniform(0.5, 1.5, (1, c, 1, 1)).astype(np.float32)
        b = rng.normal(0, 0.2, (1, c, 1, 1)).astype(np.float32)
        consts[f"a{k}"], consts[f"b{k}"] = a, b
        inits += [numpy_helper.from_array(a, f"a{k}"), numpy_helper.from_array(b, f"b{k}")]
        nodes += [
            helper.make_node("Mul", [x, f"a{k}"], [f"m{k}"], name=f"scale{k}"),
            helper.make_node("Add", [f"m{k}", f"b{k}"], [f"s{k}"], name=f"shift{k}"),
            helper.make_node("Relu", [f"s{k}"], [f"r{k}"], name=f"relu{k}"),
            helper.make_node("Sigmoid", [f"r{k}"], [f"g{k}"], name=f"gate{k}"),
            helper.make_node("Add", [x, f"g{k}"], [f"y{k}"], name=f"residual{k}"),
        ]
        x = f"y{k}"
    nodes.append(helper.make_node("Relu", [x], ["out"], name="final_relu"))
    graph = helper.make_graph(
        nodes, "blocks", [helper.make_tensor_value_info("image", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, list(shape))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return consts


def reference_blocks(x: np.ndarray, consts: dict, blocks: int) -> np.ndarray:
    y = x.astype(np.float64)
    for k in range(blocks):
        s = np.maximum(y * consts[f"a{k}"] + consts[f"b{k}"], 0)
        y = y + 1 / (1 + np.exp(-s))
    return np.maximum(y, 0)


def failing_model(path: str) -> None:
    """Reshape to a shape given at run time: random shapes make the kernel fail mid-run."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape"], ["y"], name="reshape")]
    graph = helper.make_graph(
        nodes, "failing",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def unknown_op_model(path: str) -> None:
    node = helper.make_node("FrobnicateTensor", ["x"], ["y"], name="mystery")
    graph = helper.make_graph(
        [node], "unknown", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
