"""A transformer's linear layer as one CPU step: MatMul by a constant [K, N] weight, the bias
Add, then GELU (Erf or tanh form) or a residual Add, matched in the CPU plan
(``step_fusion``) and run as one product (``gemm_packed``, on weights packed once) whose
epilogue adds the bias, applies GELU and adds the residual on each block of the output right
after that block is computed, on the thread that computed it (the block is still in cache,
and the epilogue is split over the threads with the product).

The epilogue computes exactly what the layers would, in the same order ((y + b) then GELU,
or (y + b) + r), so NaN and Inf go where they would unfused. A kernel that cannot take its
inputs (other dtype, a residual that broadcasts) returns None and the layers run one by one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import gemm_packed, threads
from engine.backends.cpu.linear_epilogue import (  # noqa: F401 - the codes, re-exported
    EPI_BIAS,
    EPI_GELU_ERF,
    EPI_GELU_TANH,
    EPI_SIGMOID,
    linear_epilogue,
)

_F32 = np.dtype(np.float32)
_NO_RES = np.zeros((1, 1), np.float32)
#: products with fewer output columns and at most this many multiply-adds run in one Numba
#: call, epilogue included: a speech model's 16 x 32 x 1 output layer paid 4.8 us for
#: sgemm's call, the epilogue's and the Python between them, 2.7 us here (with 16 columns
#: or more, sgemm's vector loops win from a few thousand multiply-adds)
SMALL_COLUMNS, SMALL_MACS = 16, 32768


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def linear_small(x, w, y, bias, act, res, has_res):
    """y = act(x @ w + bias) (+ res) for x (M, K), w (K, N), y (M, N), N small."""
    M, K = x.shape
    N = w.shape[1]
    # dot products, four partial sums each (one running sum in memory was a chain of
    # dependent loads and stores, ~4 ns a multiply-add)
    for i in range(M):
        for j in range(N):
            s0 = s1 = s2 = s3 = np.float32(0.0)
            k = 0
            while k + 4 <= K:
                s0 += x[i, k] * w[k, j]
                s1 += x[i, k + 1] * w[k + 1, j]
                s2 += x[i, k + 2] * w[k + 2, j]
                s3 += x[i, k + 3] * w[k + 3, j]
                k += 4
            while k < K:
                s0 += x[i, k] * w[k, j]
                k += 1
            y[i, j] = (s0 + s1) + (s2 + s3)
    linear_epilogue(y, bias, act, res, has_res, 0, M, 0, N)


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
    x2 = np.ascontiguousarray(x).reshape(-1, w.shape[0])
    if n < SMALL_COLUMNS and x2.shape[0] * w.size <= SMALL_MACS:
        linear_small(x2, w, y, bias, act, r2, has_res)
        return out
    if gemm_packed.packable(w, rows=x2.shape[0]):
        gemm_packed.matmul_packed(x2, w, y, bias, act, r2 if has_res else None)
        return out

    def after(r0, r1, c0, c1):
        linear_epilogue(y, bias, act, r2, has_res, r0, r1, c0, c1)

    threads.matmul(x2, w, y, after=after)
    return out
