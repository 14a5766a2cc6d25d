"""Helpers that write ONNX graphs the way PyTorch/Paddle exporters write them.

Exporters rarely emit constant shapes: a reshape target is assembled at run time from
``Shape -> Gather -> Unsqueeze -> Concat`` chains, with ``-1`` where a size is implied, and
inputs carry symbolic (often anonymous) dims. :class:`GraphBuilder` keeps node/initializer
bookkeeping out of the family modules and offers those idioms as one-line calls.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64


class GraphBuilder:
    """Accumulates nodes, seeded initializers, inputs and outputs of one graph."""

    def __init__(self, name: str, seed: int):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._count = 0
        self._consts: dict[tuple, str] = {}

    # -- names, constants, weights -------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """A unique value name derived from ``hint``."""
        self._count += 1
        return f"{hint}_{self._count}"

    def tensor(self, hint: str, value) -> str:
        """Add ``value`` (any array) as an initializer and return its name."""
        name = self.fresh(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def ints(self, values, scalar: bool = False) -> str:
        """An int64 constant (1-D, or 0-D when ``scalar``); identical ones are shared."""
        arr = np.asarray(values, np.int64).reshape(() if scalar else (-1,))
        key = ("i", arr.shape, arr.tobytes())
        if key not in self._consts:
            self._consts[key] = self.tensor("const", arr)
        return self._consts[key]

    def scalar(self, value: float) -> str:
        """A float32 0-D constant (shared)."""
        key = ("f", float(value))
        if key not in self._consts:
            self._consts[key] = self.tensor("const", np.float32(value))
        return self._consts[key]

    def weight(self, hint: str, shape, std: float) -> str:
        """A seeded normal float32 initializer."""
        return self.tensor(hint, self.rng.normal(0.0, std, shape).astype(np.float32))

    def uniform(self, hint: str, shape, low: float, high: float) -> str:
        """A seeded uniform float32 initializer (norm gains, layer scales)."""
        return self.tensor(hint, self.rng.uniform(low, high, shape).astype(np.float32))

    # -- nodes -----------------------------------------------------------------------------
    def op(self, op_type: str, inputs, n_out: int = 1, **attrs):
        """Append a node; returns its output name (or a list when ``n_out`` > 1)."""
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs,
                                           name=self.fresh(op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def input(self, name: str, elem_type: int, dims) -> str:
        """Declare a graph input; a dim is an int, a name (``''`` too) or None (unset)."""
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, dims))
        return name

    def output(self, value: str, name: str, elem_type: int = FLOAT, dims=None) -> str:
        """Expose ``value`` as graph output ``name`` (through an Identity, as exporters do)."""
        self.nodes.append(helper.make_node("Identity", [value], [name], name=self.fresh("out")))
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, dims))
        return name

    def model(self) -> onnx.ModelProto:
        """The finished, checked model (opset 17)."""
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="inference-workbench-families", ir_version=8)
        onnx.checker.check_model(model, full_check=True)
        return model

    # -- exporter shape idioms -------------------------------------------------------------
    def dim(self, x: str, axis: int) -> str:
        """Size of ``x`` along ``axis`` as a 0-D int64 (Shape -> Gather)."""
        return self.op("Gather", [self.op("Shape", [x]), self.ints(axis, scalar=True)], axis=0)

    def unsqueeze(self, x: str, axes) -> str:
        """Unsqueeze with the axes as an input (opset 13+)."""
        return self.op("Unsqueeze", [x, self.ints(axes)])

    def shape_of(self, parts) -> str:
        """A 1-D shape tensor from parts: ints become constants, names are 0-D dims."""
        pieces = [self.ints([p]) if isinstance(p, int) else self.unsqueeze(p, [0])
                  for p in parts]
        return self.op("Concat", pieces, axis=0)

    def reshape(self, x: str, parts) -> str:
        """Reshape to a target assembled at run time (see :meth:`shape_of`)."""
        return self.op("Reshape", [x, self.shape_of(parts)])

    # -- layers ----------------------------------------------------------------------------
    def conv(self, x: str, cin: int, cout: int, k, stride=1, pad=None, group: int = 1,
             gain: float = 2.0, bias: bool = True, dims: int = 2) -> str:
        """Conv (BatchNorm already folded in, as exported) with He-scaled weights."""
        ks = [k] * dims if isinstance(k, int) else list(k)
        st = [stride] * dims if isinstance(stride, int) else list(stride)
        pads = [kk // 2 for kk in ks] * 2 if pad is None else (
            [pad] * (2 * dims) if isinstance(pad, int) else list(pad))
        fan_in = cin // group * math.prod(ks)
        w = self.weight("conv_w", [cout, cin // group, *ks], math.sqrt(gain / fan_in))
        ins = [x, w] + ([self.weight("conv_b", [cout], 0.05)] if bias else [])
        return self.op("Conv", ins, kernel_shape=ks, strides=st, pads=pads, group=group)

    def linear(self, x: str, din: int, dout: int, gain: float = 1.0) -> str:
        """MatMul by a [din, dout] weight plus a bias Add (a traced nn.Linear)."""
        w = self.weight("linear_w", [din, dout], math.sqrt(gain / din))
        y = self.op("MatMul", [x, w])
        return self.op("Add", [y, self.weight("linear_b", [dout], 0.02)])

    def silu(self, x: str) -> str:
        """SiLU as exporters write it: x * Sigmoid(x)."""
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def gelu_erf(self, x: str) -> str:
        """Exact GELU: 0.5 * x * (1 + erf(x / sqrt 2))."""
        e = self.op("Erf", [self.op("Div", [x, self.scalar(math.sqrt(2.0))])])
        y = self.op("Mul", [x, self.op("Add", [e, self.scalar(1.0)])])
        return self.op("Mul", [y, self.scalar(0.5)])

    def gelu_tanh(self, x: str) -> str:
        """GELU's tanh approximation spelled with Pow/Mul/Tanh (GPT-2 style)."""
        cube = self.op("Mul", [self.op("Pow", [x, self.scalar(3.0)]), self.scalar(0.044715)])
        inner = self.op("Mul", [self.op("Add", [x, cube]), self.scalar(math.sqrt(2 / math.pi))])
        y = self.op("Mul", [x, self.op("Add", [self.op("Tanh", [inner]), self.scalar(1.0)])])
        return self.op("Mul", [y, self.scalar(0.5)])

    def layer_norm(self, x: str, d: int, decomposed: bool = False, eps: float = 1e-5) -> str:
        """LayerNorm over the last axis: the opset-17 op, or the older decomposed chain."""
        gamma = self.uniform("ln_g", [d], 0.8, 1.2)
        beta = self.weight("ln_b", [d], 0.05)
        if not decomposed:
            return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)
        mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        diff = self.op("Sub", [x, mean])
        var = self.op("ReduceMean", [self.op("Pow", [diff, self.scalar(2.0)])], axes=[-1],
                      keepdims=1)
        std = self.op("Sqrt", [self.op("Add", [var, self.scalar(eps)])])
        return self.op("Add", [self.op("Mul", [self.op("Div", [diff, std]), gamma]), beta])
