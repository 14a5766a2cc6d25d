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

from engine.backends.cpu import gemm_packed, threads
from engine.backends.cpu.linear_epilogue import (  # noqa: F401 - the codes, re-exported
    EPI_BIAS,
    EPI_GELU_ERF,
    EPI_GELU_TANH,
    linear_epilogue,
)

_F32 = np.dtype(np.float32)
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
    x2 = np.ascontiguousarray(x).reshape(-1, w.shape[0])
    if gemm_packed.packable(w, rows=x2.shape[0]):
        gemm_packed.matmul_packed(x2, w, y, bias, act, r2 if has_res else None)
        return out

    def after(r0, r1, c0, c1):
        linear_epilogue(y, bias, act, r2, has_res, r0, r1, c0, c1)

    threads.matmul(x2, w, y, after=after)
    return out
