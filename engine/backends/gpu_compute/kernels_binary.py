"""Broadcasting binary kernels, comparisons and logic, Mod, BitShift, variadics, Where."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.backend import pack
from engine.backends.gpu_compute.kernels_elementwise import BOOL, INTS, WG, _wgsl, run_unary
from engine.backends.gpu_compute.memory import words_per_element
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, NUMERIC, gpu_kernel
from engine.backends.gpu_compute.util import arr8, broadcast_strides, size_of

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
#: int64 elements are vec2<u32> (low, high words); shaders/compute/int64.wgsl compares them
I64 = (np.dtype(np.int64),)
I64_WGSL = "vec2<u32>"
COMPARE_I64 = {"Equal": "i64_eq(a, b)", "Greater": "i64_lt(b, a)", "Less": "i64_lt(a, b)",
               "GreaterOrEqual": "!i64_lt(a, b)", "LessOrEqual": "!i64_lt(b, a)"}
LOGIC = {"And": "a & b", "Or": "a | b", "Xor": "a ^ b"}


#: binary expressions that are valid on vec4<f32> operands as written
VEC4_SAFE = {"a + b", "a - b", "a * b", "a / b", "max(a, b)", "min(a, b)"}


def run_binary(ctx, a, b, ma, mb, out_meta, expr: str, t: str, u: str, attr: int = 0):
    y = ctx.tensor(out_meta)
    shape = tuple(out_meta.shape)
    n = size_of(shape)
    if not n:
        return y
    same = int(tuple(ma.shape) == shape and tuple(mb.shape) == shape)
    if same and n % 4 == 0 and t == u == "f32" and expr in VEC4_SAFE:
        ctx.dispatch(Program.of("binary_vec4.wgsl", expr=expr), [a, b, y], pack(n),
                     -(-n // 256))
        return y
    params = pack(n, len(shape), same, attr, *arr8(shape),
                  *arr8(broadcast_strides(ma.shape, shape)),
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
        t = I64_WGSL if np.dtype(metas[0].dtype) in I64 else _wgsl(metas[0])
        e = expr(layer, t) if callable(expr) else expr
        return [run_binary(ctx, ins[0], ins[1], metas[0], metas[1], out_metas[0], e, t,
                           out or t, attr(layer) if attr else 0)]

    kernel.__name__ = op


for _op, (_expr, _dtypes) in BINARY.items():
    _register_binary(_op, _expr, _dtypes)


def _compare_expr(op: str):
    def expr(layer, t):
        return f"u32({COMPARE_I64[op]})" if t == I64_WGSL else f"u32(a {COMPARE[op]} b)"

    return expr


for _op in COMPARE:
    _register_binary(_op, _compare_expr(_op), NUMERIC + I64 + (BOOL if _op == "Equal" else ()),
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
#: (float expression, integer expression); max_f/min_f (math.wgsl) keep NaNs like np.maximum
VARIADIC = {"Sum": ("a + b", "a + b"), "Mean": ("a + b", "a + b"),
            "Max": ("max_f(a, b)", "max(a, b)"), "Min": ("min_f(a, b)", "min(a, b)")}


def _mean_check(layer, metas):
    reason = _same_dtype(layer, metas)
    if reason is None and any(m is not None and m.dtype != np.float32 for m in metas):
        return "Mean runs on float32 on the GPU"
    return reason


def _register_variadic(op: str, exprs: tuple[str, str]):
    @gpu_kernel(op, dtypes=NUMERIC, inputs=None,
                check=_mean_check if op == "Mean" else _same_dtype)
    def kernel(ctx, layer, ins, metas, out_metas):
        t = _wgsl(metas[0])
        expr = exprs[0] if t == "f32" else exprs[1]
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
            mean = run_unary(ctx, acc, out_metas[0], "Scale", t, t, (1.0 / len(pairs), 0, 0))
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
        ctx.dispatch(Program.of("where.wgsl", W=words_per_element(out.dtype)),
                     [ins[0], ins[1], ins[2], y], params, -(-n // WG))
    return [y]
