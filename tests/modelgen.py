"""Small ONNX models built in code for the import, pass, worker, error and fuzz tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL


def model(nodes, inputs, outputs, initializers=(), opset=17, value_info=(), **kw):
    """A ModelProto from nodes and (name, elem_type, shape) triples."""
    vi = [x if isinstance(x, onnx.ValueInfoProto) else helper.make_tensor_value_info(*x)
          for x in inputs]
    vo = [x if isinstance(x, onnx.ValueInfoProto) else helper.make_tensor_value_info(*x)
          for x in outputs]
    inits = [x if isinstance(x, onnx.TensorProto) else numpy_helper.from_array(x[1], x[0])
             for x in initializers]
    g = helper.make_graph(nodes, kw.pop("name", "g"), vi, vo, inits,
                          value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], **kw)
    m.ir_version = min(m.ir_version, 10)
    return m


def ort_run(proto: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """onnxruntime's outputs: the test oracle."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(proto.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def engine_run(model, feeds: dict) -> dict[str, np.ndarray]:
    """Every output of an engine Model on the CPU worker."""
    from engine import Worker

    with Worker(model, "cpu") as w:
        w.schedule(feeds)
        return {o.name: w.peek_output(o.name).download_to_array() for o in model.outputs}


def elementwise_chain(n_layers: int = 4, shape=(2, 3), opset: int = 17) -> onnx.ModelProto:
    """x -> (Relu, Sigmoid, Tanh, Abs ...) chain with an Add of a weight: a valid small model."""
    ops = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp"]
    nodes = [helper.make_node("Add", ["x", "w"], ["t0"], name="add")]
    for i in range(n_layers):
        nodes.append(helper.make_node(ops[i % len(ops)], [f"t{i}"], [f"t{i + 1}"],
                                      name=f"op{i}"))
    nodes.append(helper.make_node("Identity", [f"t{n_layers}"], ["y"], name="out"))
    w = np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    return model(nodes, [("x", F, list(shape))], [("y", F, list(shape))], [("w", w)],
                 opset=opset)


def if_model(opset: int = 17) -> onnx.ModelProto:
    """y = If(c) then x * a else x - a, where ``a = x + x`` is read from the outer scope."""
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "a"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F, [3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "a"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F, [3])])
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    return model(nodes, [("x", F, [3]), ("c", B, [])], [("y", F, [3])], opset=opset)
