"""A transformer's linear layer as one CPU step: MatMul by a constant [K, N] weight, the bias
Add, then GELU (Erf or tanh form) or a residual Add, matched in the CPU plan
(``step_fusion``) and run as one product whose epilogue adds the bias, applies GELU and
adds the residual on each block of the output right after that block's sgemm, on the thread
that computed it (the block is still in cache, and the epilogue is split over the threads
with the product).

The epilogue computes exactly what the layers would, in the same order ((y + b) then GELU,
or (y + b) + r), so NaN and Inf go where they would unfused. A kernel that cannot take its
inputs (other dtype, a residual that broadcasts) returns None and the layers run one by one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import threads
from engine.backends.cpu.fastmath import erf_f32, tanh_f32

EPI_BIAS, EPI_GELU_ERF, EPI_GELU_TANH = 0, 1, 2
_F32 = np.dtype(np.float32)
_HALF, _ONE = np.float32(0.5), np.float32(1.0)
_SQRT_HALF = np.float32(0.7071067811865476)
_TANH_K, _TANH_C = np.float32(0.7978845608028654), np.float32(0.044715)


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract", "arcp", "afn"})
def linear_epilogue(y, bias, act, res, has_res, r0, r1, c0, c1):
    """y[r0:r1, c0:c1] = act(y + bias) (+ res) in place; y, res (M, N), bias (N,). Rows are
    sliced and indexed from 0 (``range(c0, c1)`` put a negative-index check on every access,
    which kept LLVM from vectorising: 8x slower)."""
    b = bias[c0:c1]
    for r in range(r0, r1):
        row = y[r, c0:c1]
        if act == EPI_GELU_ERF:
            for c in range(c1 - c0):
                v = row[c] + b[c]
                row[c] = _HALF * v * (_ONE + erf_f32(v * _SQRT_HALF))
        elif act == EPI_GELU_TANH:
            for c in range(c1 - c0):
                v = row[c] + b[c]
                row[c] = _HALF * v * (_ONE + tanh_f32(_TANH_K * (v + _TANH_C * v * v * v)))
        elif has_res:
            rr = res[r, c0:c1]
            for c in range(c1 - c0):
                row[c] = (row[c] + b[c]) + rr[c]
        else:
            for c in range(c1 - c0):
                row[c] = row[c] + b[c]


_NO_RES = np.zeros((1, 1), np.float32)


def linear(x: np.ndarray, w: np.ndarray, bias: np.ndarray, act: int = EPI_BIAS,
           res: np.ndarray | None = None) -> np.ndarray | None:
    """act(x @ w + bias) (+ res) for x [..., K], w [K, N], bias [N], res of the output's
    shape; None for inputs it does not take (the layers then run unfused)."""
    if x.dtype != _F32 or w.dtype != _F32 or bias.dtype != _F32 or x.ndim < 1 \
            or w.ndim != 2 or x.shape[-1] != w.shape[0] or bias.shape != (w.shape[1],):
        return None
    n = w.shape[1]
    out = np.empty(x.shape[:-1] + (n,), np.float32)
    if res is not None and (res.dtype != _F32 or res.shape != out.shape):
        return None
    y = out.reshape(-1, n)
    r2 = _NO_RES if res is None else np.ascontiguousarray(res).reshape(-1, n)
    has_res = res is not None

    def after(r0, r1, c0, c1):
        linear_epilogue(y, bias, act, r2, has_res, r0, r1, c0, c1)

    threads.matmul(np.ascontiguousarray(x).reshape(-1, w.shape[0]), w, y, after=after)
    return out
