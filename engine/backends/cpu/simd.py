"""Sixteen-float vectors for Numba kernels that must keep accumulators in registers.

LLVM keeps a local value in a register only when it never goes through memory; Numba's
arrays (even small ``np.zeros`` ones) are heap memory, and its auto-vectoriser here prefers
256-bit vectors. A value of type ``f32x16`` is an LLVM ``<16 x float>`` SSA value: a kernel
that holds its accumulators in such locals gets them in zmm registers across its loops, and
the operations below become single AVX-512 instructions (``vmovups``, ``vbroadcastss``,
``vfmadd231ps``). Loads and stores take a 1-D float32 array and an element index; they are
unaligned and unchecked, so callers keep every 16-value run inside the array.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

LANES = 16
_VT = ir.VectorType(ir.FloatType(), LANES)


class F32x16(types.Type):
    """Numba type of a ``<16 x float>`` register value."""

    def __init__(self):
        super().__init__(name="f32x16")


f32x16 = F32x16()


@register_model(F32x16)
class _F32x16Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VT)


def _f32_vector(arr) -> bool:
    return isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.float32


def _addr(context, builder, aryty, ary, idx):
    """Address of element ``idx`` of a 1-D array (no bounds or wraparound test)."""
    data = context.make_array(aryty)(context, builder, ary).data
    return builder.gep(data, [idx])


@intrinsic
def vzero(typingctx):
    """A vector of zeros."""
    def codegen(context, builder, sig, args):
        return ir.Constant(_VT, [0.0] * LANES)

    return f32x16(), codegen


@intrinsic
def vload(typingctx, arr, i):
    """``arr[i:i + 16]`` as a vector."""
    if not (_f32_vector(arr) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        p = _addr(context, builder, sig.args[0], args[0], args[1])
        return builder.load(builder.bitcast(p, _VT.as_pointer()), align=4)

    return f32x16(arr, i), codegen


@intrinsic
def vstore(typingctx, arr, i, v):
    """``arr[i:i + 16] = v``."""
    if not (_f32_vector(arr) and isinstance(i, types.Integer) and v == f32x16):
        return None

    def codegen(context, builder, sig, args):
        p = _addr(context, builder, sig.args[0], args[0], args[1])
        builder.store(args[2], builder.bitcast(p, _VT.as_pointer()), align=4)
        return context.get_dummy_value()

    return types.none(arr, i, v), codegen


def _prefetch(rw: int):
    def hint(typingctx, arr, i):
        if not (_f32_vector(arr) and isinstance(i, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            p = builder.bitcast(_addr(context, builder, sig.args[0], args[0], args[1]),
                                ir.IntType(8).as_pointer())
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
            builder.call(fn, [p, ir.Constant(i32, rw), ir.Constant(i32, 3),
                              ir.Constant(i32, 1)])
            return context.get_dummy_value()

        return types.none(arr, i), codegen
    return hint


#: ``prefetch(arr, i)``: ask for the cache line holding ``arr[i]`` ahead of its use
#: (``prefetcht0``); no load is made, and an address past the array is harmless (a hint
#: never faults). ``prefetchw``: the same for a line about to be written (``prefetchw``)
prefetch = intrinsic(_prefetch(0))
prefetchw = intrinsic(_prefetch(1))


@intrinsic
def vbcast(typingctx, arr, i):
    """``arr[i]`` in all 16 lanes."""
    if not (_f32_vector(arr) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        s = builder.load(_addr(context, builder, sig.args[0], args[0], args[1]), align=4)
        v = builder.insert_element(ir.Constant(_VT, None), s, ir.Constant(ir.IntType(32), 0))
        lanes0 = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES)
        return builder.shuffle_vector(v, ir.Constant(_VT, None), lanes0)

    return f32x16(arr, i), codegen


@intrinsic
def vfma(typingctx, a, b, c):
    """``a * b + c`` in every lane, rounded once (one ``vfmadd`` instruction)."""
    if not (a == f32x16 and b == f32x16 and c == f32x16):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_VT, [_VT, _VT, _VT])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.fma.v16f32")
        return builder.call(fn, args)

    return f32x16(a, b, c), codegen


@intrinsic
def vadd(typingctx, a, b):
    """``a + b`` in every lane."""
    if not (a == f32x16 and b == f32x16):
        return None

    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], args[1])

    return f32x16(a, b), codegen


@intrinsic
def vmul(typingctx, a, b):
    """``a * b`` in every lane."""
    if not (a == f32x16 and b == f32x16):
        return None

    def codegen(context, builder, sig, args):
        return builder.fmul(args[0], args[1])

    return f32x16(a, b), codegen


@intrinsic
def vsplat(typingctx, x):
    """The float32 scalar ``x`` in all 16 lanes."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        v = builder.insert_element(ir.Constant(_VT, None), args[0],
                                   ir.Constant(ir.IntType(32), 0))
        lanes0 = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES)
        return builder.shuffle_vector(v, ir.Constant(_VT, None), lanes0)

    return f32x16(x), codegen


def _select(cmp: str):
    def select(typingctx, a, b, x, y):
        if not all(v == f32x16 for v in (a, b, x, y)):
            return None

        def codegen(context, builder, sig, args):
            return builder.select(builder.fcmp_ordered(cmp, args[0], args[1]), args[2], args[3])

        return f32x16(a, b, x, y), codegen

    return select


#: ``a < b ? x : y`` and ``a <= b ? x : y`` per lane, as ordered comparisons: a NaN lane
#: fails them and takes ``y`` (the activations keep a NaN input NaN that way)
vlt_select = intrinsic(_select("<"))
vle_select = intrinsic(_select("<="))


def _interleaved(builder, a, b, first: int):
    """Every other one of the 32 values ``a`` then ``b`` from ``first`` (0: the even-numbered,
    1: the odd-numbered): lane k is ``v[2k + first]``."""
    lanes = ir.VectorType(ir.IntType(32), LANES)
    return builder.shuffle_vector(a, b, ir.Constant(lanes, [2 * k + first
                                                            for k in range(LANES)]))


def _ieee_max(builder, a, b):
    """IEEE 754-2019 ``maximum`` per lane: NaN when either lane is NaN (``pool_same._mx``)."""
    m = builder.select(builder.fcmp_ordered(">", a, b), a, b)
    return builder.select(builder.fcmp_unordered("uno", a, a), a, m)


@intrinsic
def vmax(typingctx, a, b):
    """The larger of ``a`` and ``b`` per lane, NaN where either is NaN."""
    if not (a == f32x16 and b == f32x16):
        return None

    def codegen(context, builder, sig, args):
        return _ieee_max(builder, args[0], args[1])

    return f32x16(a, b), codegen


@intrinsic
def vpairmax(typingctx, a, b):
    """The larger of each pair of neighbours in the 32 values ``a`` then ``b``: lane k is
    ``max(v[2k], v[2k + 1])`` (NaN where either is), a 2-wide pool along a row."""
    if not (a == f32x16 and b == f32x16):
        return None

    def codegen(context, builder, sig, args):
        return _ieee_max(builder, _interleaved(builder, args[0], args[1], 0),
                         _interleaved(builder, args[0], args[1], 1))

    return f32x16(a, b), codegen


@intrinsic
def vevens(typingctx, a, b):
    """The even-numbered of the 32 values ``a`` then ``b``: lane k is ``v[2k]``."""
    if not (a == f32x16 and b == f32x16):
        return None

    def codegen(context, builder, sig, args):
        return _interleaved(builder, args[0], args[1], 0)

    return f32x16(a, b), codegen


@intrinsic
def vsum(typingctx, v):
    """The float32 sum of the 16 lanes, as a tree: halves added four times."""
    if v != f32x16:
        return None

    def codegen(context, builder, sig, args):
        x, width = args[0], LANES
        i32 = ir.IntType(32)
        while width > 1:
            width //= 2
            high = builder.shuffle_vector(x, ir.Constant(_VT, None), ir.Constant(
                ir.VectorType(i32, LANES), [width + k if k < width else k
                                            for k in range(LANES)]))
            x = builder.fadd(x, high)
        return builder.extract_element(x, ir.Constant(i32, 0))

    return types.float32(v), codegen


@intrinsic
def vnext(typingctx, v, x):
    """Lanes 1 to 15 of ``v`` then the float32 ``x``: the vector one value further along."""
    if not (v == f32x16 and x == types.float32):
        return None

    def codegen(context, builder, sig, args):
        last = builder.insert_element(ir.Constant(_VT, None), args[1],
                                      ir.Constant(ir.IntType(32), 0))
        lanes = ir.VectorType(ir.IntType(32), LANES)
        return builder.shuffle_vector(args[0], last, ir.Constant(
            lanes, list(range(1, LANES + 1))))

    return f32x16(v, x), codegen


@njit(inline="always")
def vfma3(w, x0, x1, x2, a, b, c):
    """``w * x + acc`` for three vectors of one register-tile row (one weight broadcast)."""
    return vfma(w, x0, a), vfma(w, x1, b), vfma(w, x2, c)


@njit(inline="always")
def vstore8(y, o, v0, v1, v2, v3, v4, v5, v6, v7):
    """Eight vectors into ``y`` from flat offset ``o`` on, one after the other (eight
    outputs of a register tile; a loop over a tuple of vectors would put them in memory)."""
    vstore(y, o, v0)
    vstore(y, o + LANES, v1)
    vstore(y, o + 2 * LANES, v2)
    vstore(y, o + 3 * LANES, v3)
    vstore(y, o + 4 * LANES, v4)
    vstore(y, o + 5 * LANES, v5)
    vstore(y, o + 6 * LANES, v6)
    vstore(y, o + 7 * LANES, v7)


def _transpose_masks() -> list[tuple[int, list[int], list[int]]]:
    """Per stage k of a 16 x 16 transpose: (bit, mask of the new row i, mask of the new row
    i | bit) for rows i without the bit. Stage k swaps bit k of an element's row and column
    index where they differ, so after the four stages (r, c) holds what (c, r) held."""
    out = []
    for k in range(4):
        b = 1 << k
        lo = [c if not c & b else LANES + c - b for c in range(LANES)]
        hi = [c + b if not c & b else LANES + c for c in range(LANES)]
        out.append((b, lo, hi))
    return out


_MASKS = _transpose_masks()


@intrinsic
def vtranspose16(typingctx, src, s0, ss, dst, d0, ds):
    """Transpose a 16 x 16 block: ``dst[d0 + u * ds + l] = src[s0 + l * ss + u]`` for l, u <
    16 (row l of the source is 16 floats from ``s0 + l * ss``). Sixteen loads, 64 two-source
    lane shuffles (``vpermt2ps``), sixteen stores; like the loads above, unchecked."""
    ints = (s0, ss, d0, ds)
    if not (_f32_vector(src) and _f32_vector(dst)
            and all(isinstance(v, types.Integer) for v in ints)):
        return None

    def codegen(context, builder, sig, args):
        src_a, s0_v, ss_v, dst_a, d0_v, ds_v = args
        rows = []
        for r in range(LANES):
            off = builder.add(s0_v, builder.mul(ss_v, ir.Constant(s0_v.type, r)))
            p = _addr(context, builder, sig.args[0], src_a, off)
            rows.append(builder.load(builder.bitcast(p, _VT.as_pointer()), align=4))
        i32 = ir.IntType(32)
        for b, lo, hi in _MASKS:
            mlo = ir.Constant(ir.VectorType(i32, LANES), lo)
            mhi = ir.Constant(ir.VectorType(i32, LANES), hi)
            new = list(rows)
            for i in range(LANES):
                if i & b:
                    continue
                new[i] = builder.shuffle_vector(rows[i], rows[i | b], mlo)
                new[i | b] = builder.shuffle_vector(rows[i], rows[i | b], mhi)
            rows = new
        for r in range(LANES):
            off = builder.add(d0_v, builder.mul(ds_v, ir.Constant(d0_v.type, r)))
            p = _addr(context, builder, sig.args[3], dst_a, off)
            builder.store(rows[r], builder.bitcast(p, _VT.as_pointer()), align=4)
        return context.get_dummy_value()

    return types.none(src, s0, ss, dst, d0, ds), codegen


#: bytes a vector load spans: an array starting on such a boundary never splits a load
ALIGN_BYTES = 64


def empty_aligned(shape, dtype=np.float32) -> np.ndarray:
    """``np.empty(shape, dtype)`` whose data starts on a 64-byte boundary. (Called per
    layer: ``math.prod`` and the array interface cost ~2 us where ``np.prod`` and
    ``ctypes`` cost 6.)"""
    dtype = np.dtype(dtype)
    count = math.prod(shape) if isinstance(shape, tuple) else int(shape)
    pad = ALIGN_BYTES // dtype.itemsize
    buf = np.empty(count + pad, dtype)
    start = (-buf.__array_interface__["data"][0] % ALIGN_BYTES) // dtype.itemsize
    return buf[start:start + count].reshape(shape)


def aligned(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``a`` whose data starts on a 64-byte boundary. NumPy's large
    arrays start 16 bytes past one, so every 16-float load of packed weights straddled two
    cache lines; aligned, the small-plane kernel ran 8% faster."""
    out = empty_aligned(a.shape, a.dtype)
    out[...] = a
    return out
