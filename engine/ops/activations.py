"""One record per unary elementwise op (maths and activations), read by every backend.

A record names the ONNX op, its attributes with their defaults in order, and its traits:

* ``attrs``: the attributes and their ONNX defaults, in the order in which they become the
  shader parameters ``A, B, C`` of ``op_<Name>`` in ``shaders/common/activations.wgsl`` and
  the ``activation_params`` of a fused activation. A string attribute is passed as the index
  of its value in ``choices`` (Gelu's ``approximate``: "none" -> 0, "tanh" -> 1).
* ``activation``: fusable into the epilogue of Conv/Gemm by ``engine.passes.fusion``; every
  backend's Conv/Gemm kernels then apply it (the CPU through a code in its epilogue table).
* ``ints``: also defined on signed integers (int32 on the GPU: ``op_<Name>_i32``).
* ``shader``: has its float function ``op_<Name>(x, A, B, C) -> f32`` in
  ``shaders/common/activations.wgsl``; every GPU backend then registers a float32 kernel for
  it from this table (and can apply it as a fused activation).

The shaders hold the maths, these records hold everything else: adding an elementwise op is
its record here, its function in the .wgsl, and its CPU kernel (see docs/ADDING_AN_OP.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: float32's largest finite value: shader parameters live in float32 uniforms, and Clip's
#: absent bounds are the spec's lowest()/max()
FLT_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class UnaryOp:
    """The record of one unary elementwise op."""

    name: str
    attrs: tuple[tuple[str, object], ...] = ()
    activation: bool = False
    ints: bool = False
    shader: bool = True
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def defaults(self) -> list[object]:
        return [d for _, d in self.attrs]

    def attr_values(self, layer) -> list[object]:
        """The layer's attribute values in record order, defaults filled in."""
        out = []
        for name, default in self.attrs:
            v = layer.attr(name, default)
            out.append(v.decode() if isinstance(v, bytes) else v)
        return out

    def encode(self, values) -> list[float]:
        """Attribute values (record order) as float shader parameters."""
        out = []
        for (name, _), v in zip(self.attrs, values):
            if name in self.choices:
                v = v.decode() if isinstance(v, bytes) else v
                out.append(float(self.choices[name].index(v)))
            else:
                out.append(float(v))
        return out

    def unsupported(self, layer) -> str | None:
        """Why a layer's string attribute has no shader form, or None."""
        for name, allowed in self.choices.items():
            v = layer.attr(name, dict(self.attrs)[name])
            v = v.decode() if isinstance(v, bytes) else v
            if v not in allowed:
                return f"{self.name} {name}={v!r} is not supported"
        return None


# Selu's constants as the ONNX spec writes them: float32-exact
SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875

_RECORDS = (
    # activations fusable into Conv/Gemm epilogues (engine.passes.fusion)
    UnaryOp("Relu", activation=True, ints=True),
    UnaryOp("LeakyRelu", (("alpha", 0.01),), activation=True),
    UnaryOp("Clip", (("min", -math.inf), ("max", math.inf)), activation=True),
    UnaryOp("Sigmoid", activation=True),
    UnaryOp("HardSigmoid", (("alpha", 0.2), ("beta", 0.5)), activation=True),
    UnaryOp("Tanh", activation=True),
    # other activations
    UnaryOp("Elu", (("alpha", 1.0),)),
    UnaryOp("Selu", (("alpha", SELU_ALPHA), ("gamma", SELU_GAMMA))),
    UnaryOp("Celu", (("alpha", 1.0),)),
    UnaryOp("ThresholdedRelu", (("alpha", 1.0),)),
    UnaryOp("Softplus"),
    UnaryOp("Softsign"),
    UnaryOp("Mish"),
    UnaryOp("HardSwish", activation=True),
    UnaryOp("Shrink", (("bias", 0.0), ("lambd", 0.5))),
    UnaryOp("Gelu", (("approximate", "none"),), choices={"approximate": ("none", "tanh")}),
    UnaryOp("Swish", (("alpha", 1.0),), activation=True),
    # maths
    UnaryOp("Exp"), UnaryOp("Log"), UnaryOp("Sqrt"), UnaryOp("Reciprocal"),
    UnaryOp("Sin"), UnaryOp("Cos"), UnaryOp("Tan"), UnaryOp("Asin"), UnaryOp("Acos"),
    UnaryOp("Atan"), UnaryOp("Sinh"), UnaryOp("Cosh"), UnaryOp("Asinh"), UnaryOp("Acosh"),
    UnaryOp("Atanh"), UnaryOp("Ceil"), UnaryOp("Floor"), UnaryOp("Round"), UnaryOp("Erf"),
    UnaryOp("Abs", ints=True), UnaryOp("Neg", ints=True), UnaryOp("Sign", ints=True),
    # no float -> float form: bool results (IsNaN, IsInf) or integer/bool operands
    UnaryOp("IsNaN", shader=False),
    UnaryOp("IsInf", (("detect_negative", 1), ("detect_positive", 1)), shader=False),
    UnaryOp("Not", shader=False),
    UnaryOp("BitwiseNot", shader=False),
)

UNARY_OPS: dict[str, UnaryOp] = {r.name: r for r in _RECORDS}
#: fusable activations -> their record (``activation_params`` follow ``attrs``)
ACTIVATIONS: dict[str, UnaryOp] = {r.name: r for r in _RECORDS if r.activation}


def record(name: str) -> UnaryOp | None:
    return UNARY_OPS.get(name)


def shader_ops() -> list[UnaryOp]:
    """Ops with a float function ``op_<Name>`` in activations.wgsl (float in and out)."""
    return [r for r in _RECORDS if r.shader]


def layer_params(layer) -> list[float]:
    """Float parameters (record order) of a layer running unary op ``layer.op_type``."""
    rec = UNARY_OPS[layer.op_type]
    return rec.encode(rec.attr_values(layer))


def fused_params(name: str, params) -> list[float]:
    """Parameters of fused activation ``name`` from its ``activation_params`` (defaults when
    the list is empty)."""
    p = [float(v) for v in (params or [])]
    return p or UNARY_OPS[name].encode(UNARY_OPS[name].defaults())


def shader_params(values, n: int = 3) -> tuple[float, ...]:
    """``values`` padded with zeros to ``n`` and limited to float32's finite range (uniforms
    hold finite float32; an infinite Clip bound is float's lowest()/max() by the spec)."""
    p = [max(min(float(v), FLT_MAX), -FLT_MAX) for v in values][:n]
    return tuple(p + [0.0] * (n - len(p)))
