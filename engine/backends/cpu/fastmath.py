"""float32 exp, tanh, sigmoid and erf written as arithmetic that LLVM vectorises.

Numba calls libm one value at a time for ``np.exp``/``np.tanh`` (9–20 ns each here, no
SVML), which made Softmax, Erf-form GELU and LSTM gates the slowest layers of transformer
and speech models. These versions are a handful of multiply-adds plus a bit cast, inlined
into the caller's loop, so a loop over a row runs 8 lanes at a time.

Callers compile with ``error_model="numpy"``: Python's error model puts a zero-division
check on every ``/``, and that branch alone stops vectorisation (10x slower).

Accuracy (checked against float64 in tests/test_cpu_fastmath.py): exp within 2 ulp,
tanh/sigmoid/erf within 3e-7 absolute. NaN stays NaN, ±Inf go where IEEE says. The
polynomial coefficients come from ``scripts/fit_fastmath.py`` (Taylor terms for exp and
small tanh, a least-squares Chebyshev fit for erfc).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from engine.backends.cpu.threads import SPLIT_MIN_ELEMENTS, parallel_for

F = np.float32
_LOG2E = F(1.4426950408889634)
_LN2_HI = F(0.693145751953125)  # ln 2 split so n * _LN2_HI is exact for |n| < 2**11
_LN2_LO = F(1.4286068203094173e-06)
_EXP_LO, _EXP_HI = F(-104.0), F(89.0)
_EXP_NORMAL = F(-87.3)  # e**x is a normal float32 from here up
_HALF, _ONE, _TWO = F(0.5), F(1.0), F(2.0)
#: 1/k! for k = 7..2: exp(r) = 1 + r + r^2 (1/2 + r (1/6 + ...)) on |r| <= ln2/2
_E7, _E6, _E5 = F(1 / 5040), F(1 / 720), F(1 / 120)
_E4, _E3, _E2 = F(1 / 24), F(1 / 6), F(1 / 2)
#: tanh's odd Taylor terms x^3..x^11, used for |x| < 0.3 where 1 - 2/(e^2x + 1) cancels
_T3, _T5, _T7 = F(-1 / 3), F(2 / 15), F(-17 / 315)
_T9, _T11 = F(62 / 2835), F(-1382 / 155925)
_TANH_SMALL = F(0.3)
#: SiLU's exponent range: e**88 is finite in float32, e**-87 normal
_SILU_HI, _SILU_LO = F(88.0), F(-87.0)
_TEN = F(10.0)


@intrinsic
def _bits_to_f32(typingctx, bits):
    """The float32 whose IEEE bits are the int32 ``bits`` (an LLVM bitcast: free, and
    vectorisable, unlike a view of a scalar)."""
    sig = types.float32(types.int32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return sig, codegen


@njit(inline="always", nogil=True, cache=True)
def _pow2(n):
    """2**n for an integer-valued float32 n in [-126, 127]."""
    return _bits_to_f32(np.int32(n + F(127.0)) << 23)


@njit(inline="always", nogil=True, cache=True)
def _exp_parts(c):
    """(p, n) with e**c = p * 2**n for a clamped float32 c: range reduction c = n ln2 + r
    and a degree-7 polynomial p = e**r."""
    n = np.floor(c * _LOG2E + _HALF)
    r = (c - n * _LN2_HI) - n * _LN2_LO
    p = _E7
    p = p * r + _E6
    p = p * r + _E5
    p = p * r + _E4
    p = p * r + _E3
    p = p * r + _E2
    return (p * r) * r + r + _ONE, n


@njit(inline="always", nogil=True, cache=True)
def exp_f32(x):
    """e**x in float32, with 2**n applied as two halves so results near overflow and
    underflow come out right."""
    p, n = _exp_parts(_EXP_LO if x < _EXP_LO else (_EXP_HI if x > _EXP_HI else x))
    half = np.floor(n * _HALF)
    y = p * _pow2(half) * _pow2(n - half)
    return y if x == x else x  # NaN fails every comparison above and is clamped: undo


@njit(inline="always", nogil=True, cache=True)
def exp_le0(x):
    """e**x for x <= 0 (or NaN) in float32, with results below float32's normal range
    (x < -87.3) set to 0: softmax, erf and sigmoid need no more, and arithmetic on
    subnormal floats runs ~100x slower on x86 (a Softmax row half masked with -1e9 took
    2.4x as long with ``exp_f32``)."""
    p, n = _exp_parts(x if x > _EXP_NORMAL else _EXP_NORMAL)
    y = p * _pow2(n)
    y = y if x >= _EXP_NORMAL else F(0.0)
    return y if x == x else x


@njit(inline="always", nogil=True, cache=True)
def sigmoid_f32(x):
    """1 / (1 + e**-x) in float32; the exponent is never positive, so nothing overflows."""
    e = exp_le0(-abs(x))
    s = _ONE / (_ONE + e)
    return s if x >= 0 else (e * s if x == x else x)


@njit(inline="always", nogil=True, cache=True)
def tanh_f32(x):
    """tanh in float32: an odd polynomial near 0, 1 - 2/(e**2|x| + 1) elsewhere."""
    # both forms are computed and one selected: a branch would stop the loop vectorising
    a = abs(x)
    x2 = x * x
    p = _T11
    p = p * x2 + _T9
    p = p * x2 + _T7
    p = p * x2 + _T5
    p = p * x2 + _T3
    small = x + x * x2 * p
    # tanh rounds to 1 in float32 from |x| = 9.01; a larger exponent only made 2 / (e + 1)
    # subnormal (slow arithmetic) from |x| = 44
    t = _ONE - _TWO / (exp_f32(_TWO * min(a, _TEN)) + _ONE)
    big = t if x > 0 else -t
    return small if a < _TANH_SMALL else (big if a == a else x)


#: erf(x) = x * P(x^2) on |x| < 1 (Taylor), and 1 - e**-x^2 * Q(t), t = 1 / (1 + |x|/2)
#: on 1 <= |x| < 4 (fit); erf is 1 in float32 beyond 4
_ERF_SMALL = tuple(F(c) for c in (
    1.1283791670955126, -0.37612638903183754, 0.11283791670955126, -0.026866170645131252,
    0.005223977625442188, -8.548327023450853e-4, 1.2055332981789664e-4,
    -1.4925650358406251e-5, 1.6462114365889246e-6, -1.6365844691234924e-7,
    1.4807192815879218e-8))
_ERFC_FIT = tuple(F(c) for c in (
    0.0005351084453569815, 0.27453172829714356, 0.32602200727399244, 0.11466113665816144,
    0.38314751702833466, -0.04048771364109626, -0.05919458169907075))
_FOUR = F(4.0)


@njit(inline="always", nogil=True, cache=True)
def erf_f32(x):
    """erf in float32: odd Taylor series below 1, exp times a fitted curve up to 4, then 1.
    Both forms are computed and one selected, so the caller's loop vectorises."""
    a = abs(x)
    x2 = x * x
    c = _ERF_SMALL
    p = c[10]
    p = p * x2 + c[9]
    p = p * x2 + c[8]
    p = p * x2 + c[7]
    p = p * x2 + c[6]
    p = p * x2 + c[5]
    p = p * x2 + c[4]
    p = p * x2 + c[3]
    p = p * x2 + c[2]
    p = p * x2 + c[1]
    p = p * x2 + c[0]
    small = x * p
    t = _ONE / (_ONE + _HALF * min(a, _FOUR))
    q = _ERFC_FIT
    p = q[6]
    p = p * t + q[5]
    p = p * t + q[4]
    p = p * t + q[3]
    p = p * t + q[2]
    p = p * t + q[1]
    p = p * t + q[0]
    e = _ONE - exp_le0(-x2) * p if a < _FOUR else _ONE
    big = e if x > 0 else -e
    return small if a < _ONE else (big if a == a else x)


#: GELU's erf: x P(x^2) / Q(x^2) on |x| <= 4 (Q's constant term 1), fitted for the largest
#: absolute error (``scripts/fit_fastmath.py``: 1.5e-9 in float64, 3.5e-7 evaluated in
#: float32); one division and no exponential, half the arithmetic of ``erf_f32``
_ERF_P = tuple(F(c) for c in (
    1.128379182084614, 0.1847107278355475, 0.05433278237084061, 0.0038395640659121253,
    0.000382698591225154, 4.780690146945004e-06, -1.3667552983415092e-08))
_ERF_Q = tuple(F(c) for c in (
    0.49702916580320755, 0.11382658541696784, 0.015453605186086142, 0.0013095950443480443,
    6.401074105194522e-05))
_GELU_SQRT_HALF = F(0.7071067811865476)
#: tanh-form GELU as v * sigmoid(u), u = 2 sqrt(2/pi) (v + 0.044715 v^3)
_GELU_U1, _GELU_U3 = F(1.5957691216057308), F(1.5957691216057308 * 0.044715)


@njit(inline="always", nogil=True, cache=True)
def gelu_erf_f32(v):
    """v/2 (1 + erf(v / sqrt 2)) in float32, erf from the rational ``_ERF_P / _ERF_Q``
    (the input clamped to |x| <= 4, where erf is 1 in float32). Within 1e-6 relative or
    7e-7 absolute of the exact value (the absolute error where 1 + erf cancels, below
    v = -3); NaN stays NaN."""
    x = v * _GELU_SQRT_HALF
    x = _FOUR if x > _FOUR else (-_FOUR if x < -_FOUR else x)
    z = x * x
    c, d = _ERF_P, _ERF_Q
    p = c[6]
    p = p * z + c[5]
    p = p * z + c[4]
    p = p * z + c[3]
    p = p * z + c[2]
    p = p * z + c[1]
    p = p * z + c[0]
    q = d[4]
    q = q * z + d[3]
    q = q * z + d[2]
    q = q * z + d[1]
    q = q * z + d[0]
    q = q * z + _ONE
    y = _HALF * v * (_ONE + x * p / q)
    return y if v == v else v


@njit(inline="always", nogil=True, cache=True)
def gelu_tanh_f32(v):
    """The tanh-form GELU, v/2 (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), in float32 as
    v / (1 + e**-u) with u twice tanh's argument: one exponential and one division (the
    tanh form computed both of ``tanh_f32``'s branches). Edges as ``silu_f32``."""
    u = v * (_GELU_U1 + _GELU_U3 * v * v)
    c = -u
    c = _SILU_HI if c > _SILU_HI else (_SILU_LO if c < _SILU_LO else c)
    p, n = _exp_parts(c)
    y = v / (_ONE + p * _pow2(n))
    return y if u >= -_SILU_HI else v * (_ONE - _ONE)


@njit(inline="always", nogil=True, cache=True)
def silu_f32(x):
    """x * sigmoid(x) in float32 as x / (1 + e**-x): one exponential and one division, no
    selects between two forms (YOLO-style epilogues: 0.80 -> 0.40 ns a value with FMAs).
    As the two layers give: -0 below x = -88 (the true value is subnormal), NaN for -Inf
    (-Inf * 0) and NaN."""
    c = -x
    c = _SILU_HI if c > _SILU_HI else (_SILU_LO if c < _SILU_LO else c)
    p, n = _exp_parts(c)
    y = x / (_ONE + p * _pow2(n))
    return y if x >= -_SILU_HI else x * (_ONE - _ONE)


def sigmoid_any(v):
    """sigmoid of a scalar of any float type inside Numba code: the fast form for float32,
    libm for others (float64 keeps its precision)."""


def silu_any(v):
    """v * sigmoid(v) of a scalar of any float type inside Numba code (fast for float32)."""


def tanh_any(v):
    """tanh of a scalar of any float type inside Numba code (fast for float32)."""


def exp_any(v):
    """e**v of a scalar of any float type inside Numba code (fast for float32)."""


@overload(exp_any)
def _exp_any(v):
    if v == types.float32:
        return lambda v: exp_f32(v)
    return lambda v: np.exp(v)


@overload(sigmoid_any)
def _sigmoid_any(v):
    if v == types.float32:
        return lambda v: sigmoid_f32(v)

    def precise(v):
        if v >= 0:
            return 1 / (1 + np.exp(-v))
        e = np.exp(v)
        return e / (1 + e)
    return precise


@overload(silu_any)
def _silu_any(v):
    if v == types.float32:
        return lambda v: silu_f32(v)
    return lambda v: v * sigmoid_any(v)


@overload(tanh_any)
def _tanh_any(v):
    if v == types.float32:
        return lambda v: tanh_f32(v)
    return lambda v: np.tanh(v)


#: the row loops index slices from 0: with ``range(lo, hi)`` Numba's negative-index
#: wraparound check on every access stopped LLVM vectorising them (1.9-8 ns a value -> 1.1)
_LOOP = dict(nogil=True, cache=True, error_model="numpy", fastmath={"contract", "arcp", "afn"})


@njit(**_LOOP)
def _erf_rows(x, out, lo, hi):
    src, dst = x[lo:hi], out[lo:hi]
    for i in range(hi - lo):
        dst[i] = erf_f32(src[i])


@njit(**_LOOP)
def _gelu_erf_rows(x, out, lo, hi):
    src, dst = x[lo:hi], out[lo:hi]
    for i in range(hi - lo):
        v = src[i]
        dst[i] = gelu_erf_f32(v)


@njit(**_LOOP)
def _gelu_tanh_rows(x, out, lo, hi):
    src, dst = x[lo:hi], out[lo:hi]
    for i in range(hi - lo):
        v = src[i]
        dst[i] = gelu_tanh_f32(v)


@njit(**_LOOP)
def _sigmoid_rows(x, out, lo, hi):
    src, dst = x[lo:hi], out[lo:hi]
    for i in range(hi - lo):
        dst[i] = sigmoid_f32(src[i])


@njit(**_LOOP)
def _tanh_rows(x, out, lo, hi):
    src, dst = x[lo:hi], out[lo:hi]
    for i in range(hi - lo):
        dst[i] = tanh_f32(src[i])


def _map(rows, x: np.ndarray) -> np.ndarray:
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    parallel_for(lambda lo, hi: rows(flat, out, lo, hi), flat.size, grain=SPLIT_MIN_ELEMENTS // 4)
    return out.reshape(x.shape)


def erf(x: np.ndarray) -> np.ndarray:
    """erf of a float32 array, over the CPU threads."""
    return _map(_erf_rows, x)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic sigmoid of a float32 array, over the CPU threads."""
    return _map(_sigmoid_rows, x)


def tanh(x: np.ndarray) -> np.ndarray:
    """tanh of a float32 array, over the CPU threads."""
    return _map(_tanh_rows, x)


def gelu(x: np.ndarray, tanh_form: bool) -> np.ndarray:
    """GELU of a float32 array: x/2 (1 + erf(x/sqrt 2)), or its tanh approximation."""
    return _map(_gelu_tanh_rows if tanh_form else _gelu_erf_rows, x)
