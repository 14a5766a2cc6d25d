"""Cast, CastLike and BitCast on the CPU, including float16/bfloat16, the float8 and float4
formats, 2/4-bit integers (ml_dtypes) and strings."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from engine.backends.cpu.kernel_util import onnx_dtype
from engine.backends.cpu.registry import cpu_kernel

_FLOAT8 = {np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                                 ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz,
                                 ml_dtypes.float4_e2m1fn)}
_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
_SMALL_INT = {np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2,
                                    ml_dtypes.uint2)}


def _to_string(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f" or x.dtype.kind == "V":
        vals = x.astype(np.float32) if x.dtype.kind == "V" else x
        conv = lambda v: "NaN" if np.isnan(v) else ("INF" if v == np.inf else (
            "-INF" if v == -np.inf else repr(float(v)) if x.dtype == np.float64 else str(v)))
        return np.array([conv(v) for v in vals.reshape(-1)], dtype=object).reshape(x.shape)
    return np.array([str(v) for v in x.reshape(-1)], dtype=object).reshape(x.shape)


def _from_string(x: np.ndarray, to: np.dtype) -> np.ndarray:
    flat = [s.decode() if isinstance(s, bytes) else str(s) for s in x.reshape(-1)]
    if to.kind == "b":
        return np.array([s.strip().lower() not in ("", "0", "false") for s in flat],
                        dtype=bool).reshape(x.shape)
    if to.kind in "iu":
        return np.array([int(float(s)) if "." in s or "e" in s.lower() else int(s)
                         for s in flat]).astype(to).reshape(x.shape)
    return np.array([float(s) for s in flat], dtype=np.float64).astype(to).reshape(x.shape)


def _to_e8m0(x: np.ndarray, saturate: bool, mode: str) -> np.ndarray:
    """Powers of two 2^-127 .. 2^127 (NaN for NaN/negatives unless saturating)."""
    v = x.astype(np.float64)
    out = np.full(v.shape, np.nan)
    ok = np.isfinite(v) & (v >= 0)
    mant, exp = np.frexp(np.where(ok & (v > 0), v, 1.0))  # v = mant * 2^exp, mant in [0.5, 1)
    e = exp - 1  # v = (2 * mant) * 2^e with 2 * mant in [1, 2)
    m2 = 2 * mant
    if mode == "up":
        e = e + (m2 > 1)
    elif mode == "nearest":
        e = e + (m2 >= 1.5)
    e = np.where(v == 0, -127, e)
    hi = np.isposinf(v)
    if saturate:
        e = np.clip(e, -127, 127)
        ok = ok | hi
        e = np.where(hi, 127, e)
    else:
        ok = ok & (e <= 127)
        e = np.maximum(e, -127)
    out = np.where(ok, np.ldexp(1.0, e.astype(np.int64)), out)
    return out.astype(_E8M0)


def cast(x: np.ndarray, to: np.dtype, saturate: bool = True, round_mode: str = "up"
         ) -> np.ndarray:
    """ONNX Cast of ``x`` to ``to``."""
    to = np.dtype(to)
    if x.dtype == to:
        return x
    if to.kind == "O":
        return _to_string(x)
    if x.dtype.kind in "OUS":
        return _from_string(x, to)
    if to == _E8M0:
        return _to_e8m0(x, saturate, round_mode)
    if to in _FLOAT8:
        v = x.astype(np.float32)
        if saturate:  # out-of-range values and infinities go to the largest finite value
            big = float(ml_dtypes.finfo(to).max)
            v = np.clip(v, -big, big)
        return v.astype(to)
    if to in _SMALL_INT and x.dtype.kind in "fV":
        return x.astype(np.float64).astype(np.int64).astype(to)
    if x.dtype in _SMALL_INT or x.dtype in _FLOAT8 or x.dtype == _E8M0:
        wide = np.float32 if to.kind in "fV" else np.int64
        if x.dtype in _SMALL_INT:
            wide = np.int64 if to.kind in "iub" else np.float32
        return x.astype(wide).astype(to)
    if x.dtype.kind == "V" or to.kind == "V":  # bfloat16
        return x.astype(np.float32).astype(to) if to.kind == "V" and x.dtype.kind in "iub" \
            else x.astype(to)
    return x.astype(to)


@cpu_kernel("Cast")
def Cast(layer, inputs):
    return cast(inputs[0], onnx_dtype(layer.attr("to")), bool(layer.attr("saturate", 1)),
                layer.attr("round_mode", "up"))


@cpu_kernel("CastLike")
def CastLike(layer, inputs):
    return cast(inputs[0], inputs[1].dtype, bool(layer.attr("saturate", 1)),
                layer.attr("round_mode", "up"))


@cpu_kernel("BitCast")
def BitCast(layer, inputs):
    x = np.ascontiguousarray(inputs[0])
    to = onnx_dtype(layer.attr("to"))
    if x.dtype.itemsize != to.itemsize:
        raise ValueError(f"BitCast: {x.dtype} and {to} differ in size")
    return x.view(to).reshape(inputs[0].shape)
