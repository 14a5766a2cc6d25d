"""Softmax rows on explicit sixteen-float vectors (``simd.f32x16``), for long rows.

``kernels_attention_fused.softmax_block`` leaves vectorisation to LLVM, which picks 8-float
vectors here and keeps a scalar chain in the maximum; on whisper's 1500-key rows it spent
0.70 ns a value, and a long-sequence encoder spends about half of its attention there. This
version scales (and masks) and takes the running maximum in one pass of 16-value vectors,
then exponentiates and sums in a second: 0.54 ns a value on such rows. On short rows (under
a few hundred keys) the per-row set-up makes it no faster, so ``softmax_rows`` keeps the
plain loops there. The exponential is ``fastmath.exp_le0``'s polynomial, written lane-wise.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from engine.backends.cpu import fastmath as fm
from engine.backends.cpu.fastmath import exp_le0
from engine.backends.cpu.simd import LANES, f32x16, vadd, vload, vstore, vzero

_VT = ir.VectorType(ir.FloatType(), LANES)
_IT = ir.VectorType(ir.IntType(32), LANES)
#: rows at least this long take the vector loops
MIN_VECTOR_ROW = 256


def _splat(value: float) -> ir.Constant:
    return ir.Constant(_VT, [float(np.float32(value))] * LANES)


def _vector_fn(builder, name: str, nargs: int):
    fnty = ir.FunctionType(_VT, [_VT] * nargs)
    return cgutils.get_or_insert_function(builder.module, fnty, f"llvm.{name}.v16f32")


def _broadcast(builder, scalar):
    v = builder.insert_element(ir.Constant(_VT, None), scalar, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(v, ir.Constant(_VT, None), ir.Constant(_IT, [0] * LANES))


@intrinsic
def _vsplat(typingctx, s):
    """``s`` in all lanes."""
    if s != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return _broadcast(builder, args[0])

    return f32x16(s), codegen


@intrinsic
def _vmax(typingctx, a, b):
    """Lane-wise maximum; a NaN lane gives the other operand (as the scalar loops do)."""
    if a != f32x16 or b != f32x16:
        return None

    def codegen(context, builder, sig, args):
        return builder.call(_vector_fn(builder, "maxnum", 2), args)

    return f32x16(a, b), codegen


@intrinsic
def _vscale_add(typingctx, a, s, b):
    """``a * s + b`` for a float32 scalar ``s``."""
    if a != f32x16 or s != types.float32 or b != f32x16:
        return None

    def codegen(context, builder, sig, args):
        return builder.call(_vector_fn(builder, "fma", 3),
                            [args[0], _broadcast(builder, args[1]), args[2]])

    return f32x16(a, s, b), codegen


@intrinsic
def _vscale(typingctx, a, s):
    """``a * s`` for a float32 scalar ``s``."""
    if a != f32x16 or s != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.fmul(args[0], _broadcast(builder, args[1]))

    return f32x16(a, s), codegen


@intrinsic
def _vhmax(typingctx, a):
    """The largest lane."""
    if a != f32x16:
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.FloatType(), [_VT])
        fn = cgutils.get_or_insert_function(builder.module, fnty,
                                            "llvm.vector.reduce.fmax.v16f32")
        return builder.call(fn, args)

    return types.float32(a), codegen


@intrinsic
def _vhsum(typingctx, a):
    """The sum of the lanes (pairwise)."""
    if a != f32x16:
        return None

    def codegen(context, builder, sig, args):
        x = args[0]
        for width in (8, 4, 2, 1):
            upper = ir.Constant(_IT, [i + width if i < width else 0 for i in range(LANES)])
            x = builder.fadd(x, builder.shuffle_vector(x, ir.Constant(_VT, None), upper))
        return builder.extract_element(x, ir.Constant(ir.IntType(32), 0))

    return types.float32(a), codegen


@intrinsic
def _vexp_below(typingctx, a, m):
    """``exp_le0(a - m)`` in every lane (``a - m <= 0``; under float32's normal range: 0;
    NaN stays NaN)."""
    if a != f32x16 or m != types.float32:
        return None

    def codegen(context, builder, sig, args):
        fma, floor = _vector_fn(builder, "fma", 3), _vector_fn(builder, "floor", 1)
        x = builder.fsub(args[0], _broadcast(builder, args[1]))
        lo = _splat(fm._EXP_NORMAL)
        c = builder.select(builder.fcmp_ordered(">", x, lo), x, lo)
        n = builder.call(floor, [builder.call(fma, [c, _splat(fm._LOG2E), _splat(fm._HALF)])])
        r = builder.call(fma, [n, _splat(-fm._LN2_HI), c])
        r = builder.call(fma, [n, _splat(-fm._LN2_LO), r])
        p = _splat(fm._E7)
        for coefficient in (fm._E6, fm._E5, fm._E4, fm._E3, fm._E2):
            p = builder.call(fma, [p, r, _splat(coefficient)])
        p = builder.call(fma, [builder.fmul(p, r), r, builder.fadd(r, _splat(fm._ONE))])
        bits = builder.shl(builder.add(builder.fptosi(n, _IT), ir.Constant(_IT, [127] * LANES)),
                           ir.Constant(_IT, [23] * LANES))
        e = builder.fmul(p, builder.bitcast(bits, _VT))
        e = builder.select(builder.fcmp_ordered(">=", x, lo), e, _splat(0.0))
        return builder.select(builder.fcmp_unordered("uno", x, x), x, e)

    return f32x16(a, m), codegen


@njit(nogil=True, cache=True, error_model="numpy")
def softmax_rows(s, scale, add, keep, fill, mode, inv):
    """As ``kernels_attention_fused.softmax_block`` (``s`` (R, M) C-contiguous: replaced by
    exp(s * scale [+ add | keep ? . : fill] - row max), ``inv[r]`` = 1 / the row's sum;
    ``add``/``keep`` (R, M) when ``mode`` is 1/2), on vectors for rows of at least
    ``MIN_VECTOR_ROW`` keys."""
    R, M = s.shape
    whole = M - M % LANES
    for r in range(R):
        row = s[r]
        if mode == 2:
            kr = keep[r]
            for j in range(M):
                row[j] = row[j] * scale if kr[j] else fill
        big = _vsplat(np.float32(-np.inf))
        j = 0
        if mode == 1:
            ar = add[r]
            while j < whole:
                v = _vscale_add(vload(row, j), scale, vload(ar, j))
                vstore(row, j, v)
                big = _vmax(big, v)
                j += LANES
            for t in range(whole, M):
                row[t] = row[t] * scale + ar[t]
        elif mode == 0:
            while j < whole:
                v = _vscale(vload(row, j), scale)
                vstore(row, j, v)
                big = _vmax(big, v)
                j += LANES
            for t in range(whole, M):
                row[t] = row[t] * scale
        else:
            while j < whole:
                big = _vmax(big, vload(row, j))
                j += LANES
        m = _vhmax(big)
        for t in range(whole, M):
            m = row[t] if row[t] > m else m
        acc = vzero()
        j = 0
        while j < whole:
            e = _vexp_below(vload(row, j), m)
            vstore(row, j, e)
            acc = vadd(acc, e)
            j += LANES
        total = _vhsum(acc)
        for t in range(whole, M):
            e = exp_le0(row[t] - m)
            row[t] = e
            total += e
        inv[r] = np.float32(1.0) / total
