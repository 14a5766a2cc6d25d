"""The epilogue of a linear layer's product (``linear_fused``, ``gemm_packed``): bias, then
GELU (Erf or tanh form), Sigmoid or a residual, on a block of the output."""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.fastmath import gelu_erf_f32, gelu_tanh_f32, sigmoid_f32

EPI_BIAS, EPI_GELU_ERF, EPI_GELU_TANH, EPI_NONE, EPI_SIGMOID = 0, 1, 2, 3, 4
_F32 = np.dtype(np.float32)


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract", "arcp", "afn"})
def linear_epilogue(y, bias, act, res, has_res, r0, r1, c0, c1):
    """y[r0:r1, c0:c1] = act(y + bias) (+ res) in place (``EPI_NONE``: nothing); y, res
    (M, N), bias (N,). Rows are
    sliced and indexed from 0 (``range(c0, c1)`` put a negative-index check on every access,
    which kept LLVM from vectorising: 8x slower)."""
    if act == EPI_NONE:
        return
    b = bias[c0:c1]
    for r in range(r0, r1):
        row = y[r, c0:c1]
        if act == EPI_GELU_ERF:
            for c in range(c1 - c0):
                row[c] = gelu_erf_f32(row[c] + b[c])
        elif act == EPI_GELU_TANH:
            for c in range(c1 - c0):
                row[c] = gelu_tanh_f32(row[c] + b[c])
        elif act == EPI_SIGMOID:
            for c in range(c1 - c0):
                row[c] = sigmoid_f32(row[c] + b[c])
        elif has_res:
            rr = res[r, c0:c1]
            for c in range(c1 - c0):
                row[c] = (row[c] + b[c]) + rr[c]
        else:
            for c in range(c1 - c0):
                row[c] = row[c] + b[c]
