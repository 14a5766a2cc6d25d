"""Broadcasting binary kernels, comparisons and logic, Mod, BitShift, variadics, Where."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.kernels_elementwise import BOOL, INTS, WG, _wgsl, run_unary
from engine.backends.gpu_compute.memory import words_per_element
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, NUMERIC, gpu_kernel
from engine.backends.gpu_compute.util import (
    arr8,
    broadcast_strides,
    collapse_broadcast,
    size_of,
)

#: op -> dtypes; the maths is op_<name> in shaders/compute/binary_ops_<type>.wgsl
BINARY = {
    "Add": NUMERIC, "Sub": NUMERIC, "Mul": NUMERIC, "Div": NUMERIC, "Pow": F32, "PRelu": F32,
    "BitwiseAnd": INTS, "BitwiseOr": INTS, "BitwiseXor": INTS,
}
COMPARE = ("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual")
LOGIC = ("And", "Or", "Xor")
#: int64 elements are two u32 words; the shaders name that type I64 (compute/int64.wgsl)
I64 = (np.dtype(np.int64),)
#: ops of shaders/compute/binary_arith.wgsl: valid on vec4<f32> operands as written
VEC4_OPS = {"Add", "Sub", "Mul", "Div"}


def element_type(meta) -> str:
    """The element type's name in the shaders (f32, i32, u32, I64; bool is u32)."""
    return "I64" if np.dtype(meta.dtype) in I64 else _wgsl(meta)


def run_binary(ctx, a, b, ma, mb, out_meta, op: str, t: str, u: str):
    """Record y = op_<op>(a, b) (shaders/compute/binary_ops_<t>.wgsl) with broadcasting."""
    y = ctx.tensor(out_meta)
    shape = tuple(out_meta.shape)
    n = size_of(shape)
    if not n:
        return y
    same = int(tuple(ma.shape) == shape and tuple(mb.shape) == shape)
    if same and n % 4 == 0 and t == u == "f32" and op in VEC4_OPS:
        ctx.dispatch(Program.of("binary_vec4.wgsl", OP=op), [a, b, y], pack(n),
                     -(-n // 256))
        return y
    sa, sb = broadcast_strides(ma.shape, shape), broadcast_strides(mb.shape, shape)
    sizes, (ca, cb) = collapse_broadcast(shape, sa, sb)
    if len(sizes) <= 3:
        # (n0, n1, n2) with fixed index maths: binary.wgsl's loop over the dims with a
        # division per dim ran 10-20x slower on bias and scalar broadcasts
        pad = 3 - len(sizes)
        sizes, ca, cb = [1] * pad + sizes, [0] * pad + ca, [0] * pad + cb
        params = pack(n, sizes[1], sizes[2], 0, *ca, 0, *cb, 0)
        loads = [_vec4_load(c, sizes[2]) for c in (ca, cb)]
        if t == u == "f32" and op in VEC4_OPS and None not in loads:
            ctx.dispatch(Program.of("binary_bcast_vec4.wgsl", OP=op, A_LOAD=loads[0],
                                    B_LOAD=loads[1]), [a, b, y], params, -(-n // 256))
        else:
            ctx.dispatch(Program.of("binary_bcast.wgsl", T=t, U=u, OP=op), [a, b, y], params,
                         -(-n // WG))
        return y
    params = pack(n, len(shape), same, 0, *arr8(shape), *arr8(sa), *arr8(sb))
    ctx.dispatch(Program.of("binary.wgsl", T=t, U=u, OP=op), [a, b, y], params, -(-n // WG))
    return y


def _vec4_load(strides: list[int], inner: int) -> str | None:
    """How binary_bcast_vec4.wgsl loads an operand with these collapsed strides: "vec" when
    it steps along the inner dim (its other strides then multiples of 4), "splat" when it is
    constant along it, None when neither fits (or the inner dim is not a multiple of 4)."""
    if inner % 4:
        return None
    if strides[2] == 0:
        return "splat"
    if strides[2] == 1 and strides[0] % 4 == 0 and strides[1] % 4 == 0:
        return "vec"
    return None


def _same_dtype(layer, metas):
    present = [m for m in metas if m is not None]
    if len({np.dtype(m.dtype) for m in present}) > 1:
        return "inputs of different dtypes run on the CPU"
    return None


def _register_binary(op: str, dtypes, out: str | None = None):
    @gpu_kernel(op, dtypes=dtypes, inputs=(0, 1), check=_same_dtype)
    def kernel(ctx, layer, ins, metas, out_metas):
        t = element_type(metas[0])
        return [run_binary(ctx, ins[0], ins[1], metas[0], metas[1], out_metas[0], op, t,
                           out or t)]

    kernel.__name__ = op


for _op, _dtypes in BINARY.items():
    _register_binary(_op, _dtypes)
for _op in COMPARE:
    _register_binary(_op, NUMERIC + I64 + (BOOL if _op == "Equal" else ()), out="u32")
for _op in LOGIC:
    _register_binary(_op, BOOL)


def _mod_check(layer, metas):
    reason = _same_dtype(layer, metas)
    if reason is None and metas[0] is not None and metas[0].dtype == np.float32 and \
            not layer.attr("fmod", 0):
        return "Mod with fmod=0 is undefined for floats"
    return reason


@gpu_kernel("Mod", dtypes=NUMERIC, inputs=(0, 1), check=_mod_check)
def Mod(ctx, layer, ins, metas, out_metas):
    # fmod=1 truncates (the sign of the dividend); fmod=0 floors (the sign of the divisor)
    t = _wgsl(metas[0])
    op = "Fmod" if layer.attr("fmod", 0) else "Mod"
    return [run_binary(ctx, ins[0], ins[1], metas[0], metas[1], out_metas[0], op, t, t)]


@gpu_kernel("BitShift", dtypes=(np.dtype(np.uint32),), inputs=(0, 1))
def BitShift(ctx, layer, ins, metas, out_metas):
    left = layer.attr("direction", "LEFT") == "LEFT"
    op = "BitShiftLeft" if left else "BitShiftRight"
    return [run_binary(ctx, ins[0], ins[1], metas[0], metas[1], out_metas[0], op, "u32", "u32")]


# -- variadic --------------------------------------------------------------------------------
#: op -> the binary op (binary_ops_<type>.wgsl) that folds its inputs pairwise; Sum and Mean
#: share Add's pipelines (Mean scales after); Max/Min keep NaNs on floats
VARIADIC = {"Sum": "Add", "Mean": "Add", "Max": "Max", "Min": "Min"}


def _mean_check(layer, metas):
    reason = _same_dtype(layer, metas)
    if reason is None and any(m is not None and m.dtype != np.float32 for m in metas):
        return "Mean runs on float32 on the GPU"
    return reason


def _register_variadic(op: str, pairwise: str):
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
                new = run_binary(ctx, acc, h, acc_meta, m, meta, pairwise, t, t)
                if k > 1:
                    ctx.free(acc)
                acc, acc_meta = new, meta
        if op == "Mean" and len(pairs) > 1:
            mean = run_unary(ctx, acc, out_metas[0], "Scale", t, t, (1.0 / len(pairs), 0, 0))
            ctx.free(acc)
            acc = mean
        return [acc]

    kernel.__name__ = op


for _op, _pairwise in VARIADIC.items():
    _register_variadic(_op, _pairwise)


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
