"""Unary elementwise kernels: maths, activations (also fused into Conv/Gemm), Identity, Dropout."""

from __future__ import annotations

import math

import numpy as np

from engine.backends.gpu_compute.backend import pack
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, gpu_kernel
from engine.backends.gpu_compute.util import f32_value, size_of

WG = 256
I32 = (np.dtype(np.int32),)
F32_I32 = F32 + I32
INTS = (np.dtype(np.int32), np.dtype(np.uint32))
BOOL = (np.dtype(bool),)
#: float32's largest finite value: Clip's absent bounds (the spec's lowest()/max())
FLT_MAX = float(np.finfo(np.float32).max)
WGSL_TYPE = {"float32": "f32", "int32": "i32", "uint32": "u32", "bool": "u32"}

#: activation expressions over ``x`` with float parameters A, B, C (also used by fused layers);
#: bounds go through the NaN-propagating helpers of math.wgsl (relu_f, clamp_f), never a bare
#: max/min/clamp, whose result for a NaN is the implementation's choice
ACTIVATIONS = {
    "Relu": "relu_f(x)",
    "Sigmoid": "sigmoid_f(x)",
    "Tanh": "tanh_f(x)",
    "LeakyRelu": "select(A * x, x, x >= 0.0)",
    "Clip": "clamp_f(x, A, B)",
    "Elu": "select(A * (exp(x) - 1.0), x, x > 0.0)",
    "HardSigmoid": "clamp_f(A * x + B, 0.0, 1.0)",
    "HardSwish": "x * clamp_f(x / 6.0 + 0.5, 0.0, 1.0)",
    "Selu": "select(B * A * (exp(x) - 1.0), B * x, x > 0.0)",
    "ThresholdedRelu": "select(0.0, x, x > A)",
    "Softplus": "softplus_f(x)",
    "Softsign": "x / (1.0 + abs(x))",
    "Mish": "x * tanh_f(softplus_f(x))",
    "Celu": "relu_f(x) + min(0.0, A * (exp(x / A) - 1.0))",
    "Shrink": "select(select(0.0, x + A, x < -B), x - A, x > B)",
}

#: float-only maths
FLOAT_MATH = {
    "Exp": "exp(x)", "Log": "log(x)", "Sqrt": "sqrt(x)", "Reciprocal": "1.0 / x",
    "Sin": "sin(x)", "Cos": "cos(x)", "Tan": "tan(x)",
    # via atan2: lavapipe's asin/acos lose ~3 digits near +-1
    "Asin": "atan2(x, sqrt((1.0 - x) * (1.0 + x)))",
    "Acos": "atan2(sqrt((1.0 - x) * (1.0 + x)), x)",
    "Atan": "atan(x)", "Sinh": "sinh(x)", "Cosh": "cosh(x)", "Asinh": "asinh(x)",
    "Acosh": "acosh(x)", "Atanh": "atanh(x)", "Ceil": "ceil(x)", "Floor": "floor(x)",
    "Round": "round(x)", "Erf": "erf_f(x)",
}

#: ops that also run on i32 (expressions valid for f32 and i32)
SIGNED_MATH = {"Abs": "abs(x)", "Neg": "-x", "Sign": "sign(x)"}

#: default attribute values -> (A, B, C)
PARAMS = {
    "LeakyRelu": lambda l: (l.attr("alpha", 0.01),),
    "Elu": lambda l: (l.attr("alpha", 1.0),),
    "HardSigmoid": lambda l: (l.attr("alpha", 0.2), l.attr("beta", 0.5)),
    "Selu": lambda l: (l.attr("alpha", 1.67326319217681884765625),
                       l.attr("gamma", 1.05070102214813232421875)),
    "ThresholdedRelu": lambda l: (l.attr("alpha", 1.0),),
    "Celu": lambda l: (l.attr("alpha", 1.0),),
    "Shrink": lambda l: (l.attr("bias", 0.0), l.attr("lambd", 0.5)),
}


def activation_params(op: str, params) -> tuple[float, float, float]:
    """(A, B, C) for a fused activation given its ``activation_params`` list."""
    p = [float(v) for v in (params or [])]
    if not p:
        defaults = {"LeakyRelu": [0.01], "Elu": [1.0], "HardSigmoid": [0.2, 0.5],
                    "Selu": [1.67326319217681884765625, 1.05070102214813232421875],
                    "ThresholdedRelu": [1.0], "Celu": [1.0], "Clip": [-math.inf, math.inf],
                    "Shrink": [0.0, 0.5]}
        p = defaults.get(op, [])
    p = [max(min(v, FLT_MAX), -FLT_MAX) for v in p]  # uniforms hold finite f32
    return tuple((p + [0.0, 0.0, 0.0])[:3])


def run_unary(ctx, x, out_meta, expr: str, t: str, u: str, params=(0.0, 0.0, 0.0)):
    y = ctx.tensor(out_meta)
    n = size_of(out_meta.shape)
    if n:
        a, b, c = (float(v) for v in (tuple(params) + (0.0, 0.0, 0.0))[:3])
        if n % 4 == 0 and t == u == "f32":
            ctx.dispatch(Program.of("unary_vec4.wgsl", expr=expr), [x, y], pack(n, a, b, c),
                         -(-n // 256))
        else:
            ctx.dispatch(Program.of("unary.wgsl", T=t, U=u, expr=expr), [x, y],
                         pack(n, a, b, c), -(-n // WG))
    return y


def _wgsl(meta) -> str:
    return WGSL_TYPE[np.dtype(meta.dtype).name]


def _register_unary(op: str, expr: str, dtypes, params=None, out: str | None = None):
    @gpu_kernel(op, dtypes=dtypes)
    def kernel(ctx, layer, ins, metas, out_metas):
        t = _wgsl(metas[0])
        p = params(layer) if params else (0.0, 0.0, 0.0)
        return [run_unary(ctx, ins[0], out_metas[0], expr, t, out or t, p)]

    kernel.__name__ = op


for _op, _expr in ACTIVATIONS.items():
    if _op not in ("Clip", "Tanh", "Relu"):
        _register_unary(_op, _expr, F32, lambda layer, _o=_op: activation_params(
            _o, PARAMS[_o](layer) if _o in PARAMS else None))
for _op, _expr in FLOAT_MATH.items():
    _register_unary(_op, _expr, F32)
for _op, _expr in SIGNED_MATH.items():
    _register_unary(_op, _expr, F32_I32)
_register_unary("Tanh", ACTIVATIONS["Tanh"], F32)


@gpu_kernel("Relu", dtypes=F32_I32)
def Relu(ctx, layer, ins, metas, out_metas):
    t = _wgsl(metas[0])
    return [run_unary(ctx, ins[0], out_metas[0], "relu_f(x)" if t == "f32" else "max(x, 0)",
                      t, t)]



_register_unary("Not", "x ^ 1u", BOOL)
_register_unary("BitwiseNot", "~x", INTS)
_register_unary("IsNaN", "u32(is_nan_f(x))", F32, out="u32")
_register_unary("IsInf", "u32(is_inf_f(x) && ((x > 0.0 && B != 0.0) || (x < 0.0 && A != 0.0)))",
                F32, lambda l: (float(l.attr("detect_negative", 1)),
                                float(l.attr("detect_positive", 1))), out="u32")


def _gelu_expr(layer) -> str:
    if layer.attr("approximate", "none") == "tanh":
        return "0.5 * x * (1.0 + tanh_f(0.7978845608 * (x + 0.044715 * x * x * x)))"
    return "0.5 * x * (1.0 + erf_f(x * 0.70710678118654752))"


@gpu_kernel("Gelu", dtypes=F32)
def Gelu(ctx, layer, ins, metas, out_metas):
    return [run_unary(ctx, ins[0], out_metas[0], _gelu_expr(layer), "f32", "f32")]


def _clip_bounds(layer, metas):
    if layer.opset and layer.opset < 11:
        return float(layer.attr("min", -FLT_MAX)), float(layer.attr("max", FLT_MAX))
    lo = f32_value(metas[1] if len(metas) > 1 else None, -FLT_MAX)
    hi = f32_value(metas[2] if len(metas) > 2 else None, FLT_MAX)
    return lo, hi


def _clip_check(layer, metas):
    lo, hi = _clip_bounds(layer, metas)
    if lo is None or hi is None:
        return "Clip bounds computed on the device are not supported (need CPU-known min/max)"
    return None


@gpu_kernel("Clip", dtypes=F32, check=_clip_check)
def Clip(ctx, layer, ins, metas, out_metas):
    lo, hi = _clip_bounds(layer, metas)
    lo, hi = max(lo, -FLT_MAX), min(hi, FLT_MAX)
    return [run_unary(ctx, ins[0], out_metas[0], ACTIVATIONS["Clip"], "f32", "f32", (lo, hi, 0))]


def _identity(ctx, layer, ins, metas, out_metas):
    return [ctx.view(ins[0], out_metas[0].shape)]


def _identity_check(layer, metas):
    if not metas or metas[0] is None:
        return "Identity of an empty optional or unknown value runs on the CPU"
    return None


gpu_kernel("Identity", dtypes=None, inputs=None, check=_identity_check)(_identity)


def _dropout_check(layer, metas):
    training = metas[2] if len(metas) > 2 else None
    if training is not None and (training.value is None or bool(np.asarray(training.value))):
        return "Dropout in training mode runs on the CPU"
    if layer.attr("is_test", 1) == 0:
        return "Dropout in training mode runs on the CPU"
    return None


@gpu_kernel("Dropout", dtypes=None, inputs=(0,), check=_dropout_check)
def Dropout(ctx, layer, ins, metas, out_metas):
    """Inference: the identity, and a mask of all True when one is asked for."""
    outs = [ctx.view(ins[0], out_metas[0].shape)]
    if len(out_metas) > 1:
        from engine.backends.gpu_compute.kernels_shape import fill

        mask = ctx.tensor(out_metas[1])
        fill(ctx, mask, out_metas[1], True)
        outs.append(mask)
    return outs
