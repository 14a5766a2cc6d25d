"""Elementwise kernels: unary maths and activations, broadcasting binary ops, Where, variadics."""

from __future__ import annotations

import math

import numpy as np

from engine.backends.gpu_compute.backend import pack
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, NUMERIC, gpu_kernel
from engine.backends.gpu_compute.util import arr8, broadcast_strides, f32_value, size_of

WG = 256
I32 = (np.dtype(np.int32),)
F32_I32 = F32 + I32
INTS = (np.dtype(np.int32), np.dtype(np.uint32))
BOOL = (np.dtype(bool),)
WGSL_TYPE = {"float32": "f32", "int32": "i32", "uint32": "u32", "bool": "u32"}

#: activation expressions over ``x`` with float parameters A, B, C (also used by fused layers)
ACTIVATIONS = {
    "Relu": "max(x, 0.0)",
    "Sigmoid": "sigmoid_f(x)",
    "Tanh": "tanh_f(x)",
    "LeakyRelu": "select(A * x, x, x >= 0.0)",
    "Clip": "min(max(x, A), B)",
    "Elu": "select(A * (exp(x) - 1.0), x, x > 0.0)",
    "HardSigmoid": "clamp(A * x + B, 0.0, 1.0)",
    "HardSwish": "x * clamp(x / 6.0 + 0.5, 0.0, 1.0)",
    "Selu": "select(B * A * (exp(x) - 1.0), B * x, x > 0.0)",
    "ThresholdedRelu": "select(0.0, x, x > A)",
    "Softplus": "softplus_f(x)",
    "Softsign": "x / (1.0 + abs(x))",
    "Mish": "x * tanh_f(softplus_f(x))",
    "Celu": "max(0.0, x) + min(0.0, A * (exp(x / A) - 1.0))",
    "Shrink": "select(select(0.0, x + A, x < -B), x - A, x > B)",
}

#: float-only maths
FLOAT_MATH = {
    "Exp": "exp(x)", "Log": "log(x)", "Sqrt": "sqrt(x)", "Reciprocal": "1.0 / x",
    "Sin": "sin(x)", "Cos": "cos(x)", "Tan": "tan(x)", "Asin": "asin(x)", "Acos": "acos(x)",
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
    p = [max(min(v, 3.4e38), -3.4e38) for v in p]  # uniforms hold finite f32
    return tuple((p + [0.0, 0.0, 0.0])[:3])


def run_unary(ctx, x, out_meta, expr: str, t: str, u: str, params=(0.0, 0.0, 0.0)):
    y = ctx.tensor(out_meta)
    n = size_of(out_meta.shape)
    if n:
        a, b, c = (float(v) for v in (tuple(params) + (0.0, 0.0, 0.0))[:3])
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
    return [run_unary(ctx, ins[0], out_metas[0], "max(x, 0.0)" if t == "f32" else "max(x, 0)",
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
        return float(layer.attr("min", -3.4e38)), float(layer.attr("max", 3.4e38))
    lo = f32_value(metas[1] if len(metas) > 1 else None, -3.4e38)
    hi = f32_value(metas[2] if len(metas) > 2 else None, 3.4e38)
    return lo, hi


def _clip_check(layer, metas):
    lo, hi = _clip_bounds(layer, metas)
    if lo is None or hi is None:
        return "Clip bounds computed on the device are not supported (need CPU-known min/max)"
    return None


@gpu_kernel("Clip", dtypes=F32, check=_clip_check)
def Clip(ctx, layer, ins, metas, out_metas):
    lo, hi = _clip_bounds(layer, metas)
    lo, hi = max(lo, -3.4e38), min(hi, 3.4e38)
    return [run_unary(ctx, ins[0], out_metas[0], ACTIVATIONS["Clip"], "f32", "f32", (lo, hi, 0))]


def _identity(ctx, layer, ins, metas, out_metas):
    return [ctx.view(ins[0], out_metas[0].shape)]


gpu_kernel("Identity", dtypes=None, inputs=None)(_identity)


def _dropout_check(layer, metas):
    if len(layer.outputs) > 1 and layer.outputs[1]:
        return "Dropout's mask output is computed on the CPU"
    if len(metas) > 2 and metas[2] is not None and (metas[2].value is None or
                                                    bool(np.asarray(metas[2].value))):
        return "Dropout in training mode runs on the CPU"
    return None


gpu_kernel("Dropout", dtypes=None, inputs=(0,), check=_dropout_check)(_identity)

# -- binary ----------------------------------------------------------------------------------
_INT_MOD = "select(a % b, a % b + b, (a % b != a - a) && ((a % b < a - a) != (b < a - a)))"
BINARY = {
    "Add": ("a + b", NUMERIC), "Sub": ("a - b", NUMERIC), "Mul": ("a * b", NUMERIC),
    "Div": ("a / b", NUMERIC),
    "Pow": ("pow_f(a, b)", F32), "PRelu": ("select(a * b, a, a >= 0.0)", F32),
    "BitwiseAnd": ("a & b", INTS), "BitwiseOr": ("a | b", INTS),
    "BitwiseXor": ("a ^ b", INTS),
}
COMPARE = {"Equal": "==", "Greater": ">", "Less": "<", "GreaterOrEqual": ">=",
           "LessOrEqual": "<="}
LOGIC = {"And": "a & b", "Or": "a | b", "Xor": "a ^ b"}


def run_binary(ctx, a, b, ma, mb, out_meta, expr: str, t: str, u: str, attr: int = 0):
    y = ctx.tensor(out_meta)
    shape = tuple(out_meta.shape)
    n = size_of(shape)
    if not n:
        return y
    same = int(tuple(ma.shape) == shape and tuple(mb.shape) == shape)
    params = pack(n, len(shape), same, attr, *arr8(shape), *arr8(broadcast_strides(ma.shape, shape)),
                  *arr8(broadcast_strides(mb.shape, shape)))
    ctx.dispatch(Program.of("binary.wgsl", T=t, U=u, expr=expr), [a, b, y], params, -(-n // WG))
    return y


def _same_dtype(layer, metas):
    present = [m for m in metas if m is not None]
    if len({np.dtype(m.dtype) for m in present}) > 1:
        return "inputs of different dtypes run on the CPU"
    return None


def _register_binary(op: str, expr: str, dtypes, out: str | None = None, attr=None):
    @gpu_kernel(op, dtypes=dtypes, inputs=(0, 1), check=_same_dtype)
    def kernel(ctx, layer, ins, metas, out_metas):
        t = _wgsl(metas[0])
        e = expr(layer, t) if callable(expr) else expr
        return [run_binary(ctx, ins[0], ins[1], metas[0], metas[1], out_metas[0], e, t,
                           out or t, attr(layer) if attr else 0)]

    kernel.__name__ = op


for _op, (_expr, _dtypes) in BINARY.items():
    _register_binary(_op, _expr, _dtypes)
for _op, _cmp in COMPARE.items():
    _register_binary(_op, f"u32(a {_cmp} b)", NUMERIC + BOOL if _op == "Equal" else NUMERIC,
                     out="u32")
for _op, _expr in LOGIC.items():
    _register_binary(_op, _expr, BOOL)


def _mod_expr(layer, t):
    if t == "f32" or layer.attr("fmod", 0):
        return "a % b"
    return _INT_MOD if t == "i32" else "a % b"


def _mod_check(layer, metas):
    reason = _same_dtype(layer, metas)
    if reason is None and metas[0] is not None and metas[0].dtype == np.float32 and \
            not layer.attr("fmod", 0):
        return "Mod with fmod=0 is undefined for floats"
    return reason


@gpu_kernel("Mod", dtypes=NUMERIC, inputs=(0, 1), check=_mod_check)
def Mod(ctx, layer, ins, metas, out_metas):
    t = _wgsl(metas[0])
    return [run_binary(ctx, ins[0], ins[1], metas[0], metas[1], out_metas[0],
                       _mod_expr(layer, t), t, t)]


@gpu_kernel("BitShift", dtypes=(np.dtype(np.uint32),), inputs=(0, 1))
def BitShift(ctx, layer, ins, metas, out_metas):
    expr = "select(0u, select(a >> b, a << b, attr == 0), b < 32u)"
    left = 0 if layer.attr("direction", "LEFT") == "LEFT" else 1
    return [run_binary(ctx, ins[0], ins[1], metas[0], metas[1], out_metas[0], expr, "u32", "u32",
                       left)]


# -- variadic --------------------------------------------------------------------------------
VARIADIC = {"Sum": "a + b", "Mean": "a + b", "Max": "max(a, b)", "Min": "min(a, b)"}


def _mean_check(layer, metas):
    reason = _same_dtype(layer, metas)
    if reason is None and any(m is not None and m.dtype != np.float32 for m in metas):
        return "Mean runs on float32 on the GPU"
    return reason


def _register_variadic(op: str, expr: str):
    @gpu_kernel(op, dtypes=NUMERIC, inputs=None,
                check=_mean_check if op == "Mean" else _same_dtype)
    def kernel(ctx, layer, ins, metas, out_metas):
        t = _wgsl(metas[0])
        pairs = [(h, m) for h, m in zip(ins, metas) if m is not None]
        if len(pairs) == 1:
            acc = ctx.view(pairs[0][0], out_metas[0].shape)
            acc_meta = pairs[0][1]
        else:
            acc, acc_meta = pairs[0]
            for k, (h, m) in enumerate(pairs[1:], 1):
                shape = np.broadcast_shapes(acc_meta.shape, m.shape)
                meta = type(m)(tuple(shape), m.dtype)
                new = run_binary(ctx, acc, h, acc_meta, m, meta, expr, t, t)
                if k > 1:
                    ctx.free(acc)
                acc, acc_meta = new, meta
        if op == "Mean" and len(pairs) > 1:
            mean = run_unary(ctx, acc, out_metas[0], "x * A", t, t, (1.0 / len(pairs), 0, 0))
            ctx.free(acc)
            acc = mean
        return [acc]

    kernel.__name__ = op


for _op, _expr in VARIADIC.items():
    _register_variadic(_op, _expr)


def _where_check(layer, metas):
    if metas[0] is not None and metas[0].dtype != np.dtype(bool):
        return "Where's condition must be bool"
    if metas[1] is not None and metas[2] is not None and metas[1].dtype != metas[2].dtype:
        return "Where's branches have different dtypes"
    if any(m is not None and m.dtype.itemsize == 8 for m in metas[1:]):
        return "Where on 64-bit values runs on the CPU"
    return None


@gpu_kernel("Where", dtypes=None, inputs=None, check=_where_check)
def Where(ctx, layer, ins, metas, out_metas):
    out = out_metas[0]
    y = ctx.tensor(out)
    shape = tuple(out.shape)
    n = size_of(shape)
    if n:
        params = pack(n, len(shape), 0, 0, *arr8(shape),
                      *(v for m in metas for v in arr8(broadcast_strides(m.shape, shape))))
        ctx.dispatch(Program.of("where.wgsl"), [ins[0], ins[1], ins[2], y], params, -(-n // WG))
    return [y]
