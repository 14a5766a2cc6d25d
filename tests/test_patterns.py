"""LayerNorm and GELU written out op by op become one layer at import, and still match
onnxruntime running the original graph."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker


class _Net:
    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.k = rng, [], [], 0

    def const(self, value) -> str:
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def op(self, op_type, inputs, **attrs) -> str:
        self.k += 1
        out = f"t{self.k}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def model(self, outs, shape, opset=17) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
            [onnx.ValueInfoProto(name=o) for o in outs],
            self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return onnx.shape_inference.infer_shapes(model)


def layer_norm(n: _Net, x, c, square="pow", gamma_shape=None, beta=True):
    mean = n.op("ReduceMean", [x], axes=[-1], keepdims=1)
    d = n.op("Sub", [x, mean])
    sq = n.op("Pow", [d, n.const(2.0)]) if square == "pow" else n.op("Mul", [d, d])
    var = n.op("ReduceMean", [sq], axes=[-1], keepdims=1)
    std = n.op("Sqrt", [n.op("Add", [var, n.const(1e-5)])])
    gamma = n.rng.uniform(0.5, 1.5, gamma_shape or (c,))
    y = n.op("Mul", [n.op("Div", [d, std]), n.const(gamma)])
    return n.op("Add", [y, n.const(n.rng.normal(0, 0.1, (c,)))]) if beta else y


def gelu_erf(n: _Net, x, form):
    if form == "div":
        e = n.op("Erf", [n.op("Div", [x, n.const(math.sqrt(2))])])
    else:
        e = n.op("Erf", [n.op("Mul", [n.const(1 / math.sqrt(2)), x])])
    one = n.op("Add", [e, n.const(1.0)])
    if form == "torch":  # (x * 0.5) * (1 + erf)
        return n.op("Mul", [n.op("Mul", [x, n.const(0.5)]), one])
    return n.op("Mul", [n.op("Mul", [x, one]), n.const(0.5)])


def gelu_tanh(n: _Net, x):
    cube = n.op("Mul", [n.op("Pow", [x, n.const(3.0)]), n.const(0.044715)])
    inner = n.op("Mul", [n.op("Add", [x, cube]), n.const(math.sqrt(2 / math.pi))])
    y = n.op("Mul", [x, n.op("Add", [n.op("Tanh", [inner]), n.const(1.0)])])
    return n.op("Mul", [y, n.const(0.5)])


def _check(proto, x, want_ops, backend="cpu"):
    model = ModelLoader.from_proto(proto)
    ops = [layer.op_type for layer in model.layers]
    for op, count in want_ops.items():
        assert ops.count(op) == count, ops
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})
    with Worker(model, backend) as w:
        w.schedule({"x": x})
        for spec, ref in zip(model.outputs, want):
            got = w.peek_output(spec.name).numpy()
            np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("square,gamma_shape,beta", [("pow", None, True), ("mul", None, True),
                                                     ("pow", (1, 1, 24), False)])
def test_written_out_layer_norm_becomes_one_layer(square, gamma_shape, beta, rng):
    n = _Net(rng)
    y = layer_norm(n, "x", 24, square, gamma_shape, beta)
    x = (rng.standard_normal((2, 7, 24)) * 3 + 1).astype(np.float32)
    _check(n.model([y], [2, 7, 24]), x, {"LayerNormalization": 1, "ReduceMean": 0, "Sqrt": 0})


@pytest.mark.parametrize("form", ["div", "mul", "torch"])
def test_written_out_gelu_becomes_one_layer(form, rng):
    n = _Net(rng)
    y = gelu_erf(n, n.op("Relu", ["x"]) if form == "torch" else "x", form)
    x = (rng.standard_normal((3, 40)) * 2).astype(np.float32)
    _check(n.model([y], [3, 40], opset=13), x, {"Gelu": 1, "Erf": 0})


def test_gelu_tanh_and_layer_norm_in_one_block(rng):
    n = _Net(rng)
    y = gelu_tanh(n, layer_norm(n, "x", 16))
    x = rng.standard_normal((5, 16)).astype(np.float32)
    _check(n.model([y], [5, 16]), x, {"Gelu": 1, "LayerNormalization": 1, "Tanh": 0})


@pytest.mark.parametrize("backend", ["gpu-compute", "gpu-pixel"])
def test_rewritten_chains_run_on_the_gpu(backend, rng, require_gpu):
    n = _Net(rng)
    y = gelu_erf(n, layer_norm(n, "x", 32), "div")
    x = rng.standard_normal((1, 9, 32)).astype(np.float32)
    _check(n.model([y], [1, 9, 32]), x, {"Gelu": 1, "LayerNormalization": 1}, backend)


def test_chains_read_elsewhere_are_left_alone(rng):
    n = _Net(rng)
    mean = n.op("ReduceMean", ["x"], axes=[-1], keepdims=1)
    d = n.op("Sub", ["x", mean])
    var = n.op("ReduceMean", [n.op("Pow", [d, n.const(2.0)])], axes=[-1], keepdims=1)
    std = n.op("Sqrt", [n.op("Add", [var, n.const(1e-5)])])
    ln = n.op("Add", [n.op("Mul", [n.op("Div", [d, std]), n.const(np.ones(8))]),
                      n.const(np.zeros(8))])
    erf = n.op("Erf", [n.op("Div", [ln, n.const(math.sqrt(2))])])
    g = n.op("Mul", [n.op("Mul", [ln, n.op("Add", [erf, n.const(1.0)])]), n.const(0.5)])
    # the variance and the Erf are also graph outputs: neither chain may disappear
    x = rng.standard_normal((4, 8)).astype(np.float32)
    _check(n.model([g, var, erf], [4, 8]), x, {"Gelu": 0, "LayerNormalization": 0})
