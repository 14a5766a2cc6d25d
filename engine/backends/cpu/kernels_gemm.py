"""Gemm and MatMul on the CPU: BLAS (through NumPy, which releases the GIL) plus a Numba
epilogue for Gemm's bias and fused activation."""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

from engine.backends.cpu import gemm_packed, threads
from engine.backends.cpu.activation import ACT_NONE, activation_of, epilogue
from engine.backends.cpu.registry import cpu_kernel
from engine.errors import KernelError

#: computed in float32 and rounded back once (BLAS has no half-precision products)
_HALF = {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)}


def _float(layer, *arrays) -> None:
    for a in arrays:
        if a.dtype.kind not in "fiu" and a.dtype not in _HALF:
            raise KernelError(f"layer {layer.name!r}: {layer.op_type} does not take {a.dtype}")


_F32 = np.dtype(np.float32)


def _row_bias(c, n: int, beta: float):
    """Gemm's C as a float32 bias of the n output columns (times beta), None when there is
    none, False when it has another shape (per-row, full matrix)."""
    if c is None or beta == 0.0 or not c.size:
        return None
    if c.dtype != _F32 or c.size not in (1, n) or (c.ndim == 2 and c.shape[0] != 1):
        return False
    bias = np.broadcast_to(c.reshape(-1), (n,))
    return np.ascontiguousarray(bias * np.float32(beta) if beta != 1.0 else bias)


def _widen(*arrays):
    return [a.astype(np.float32) if a is not None and a.dtype in _HALF else a for a in arrays]


class _KeptGemm(NamedTuple):
    """What a float32 Gemm call decided, kept on the layer for calls with the same weight
    and bias objects (``_gemm_again``)."""

    weight: np.ndarray  # the layer's input B, as passed
    c: np.ndarray | None  # its input C, as passed
    packed: bool  # through gemm_packed (else sgemm)
    w: np.ndarray  # B for sgemm (transposed view with transB), or B itself when packed
    bias: np.ndarray | None  # C as a row bias, times beta
    act: tuple
    trans_b: bool
    n: int


def _gemm_again(a: np.ndarray, kept: _KeptGemm) -> np.ndarray:
    """A Gemm call repeating the kept one's weights and bias (``Gemm``): the product, the
    row bias and the activation without the attribute and operand checks (a classifier
    head's Gemm spent more in them than in its product)."""
    y = np.empty((a.shape[0], kept.n), np.float32)
    if kept.packed:
        gemm_packed.matmul_packed(np.ascontiguousarray(a), kept.w, y, kept.bias,
                                  trans=kept.trans_b)
    else:
        threads.matmul(a, kept.w, y)
        if kept.bias is not None:
            y += kept.bias
    if kept.act[0] != ACT_NONE:
        epilogue(y.reshape(1, -1), None, kept.act)
    return y


@cpu_kernel("Gemm")
def Gemm(layer, inputs):
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    kept = layer.__dict__.get("_cpu_gemm")
    if kept is not None and kept.weight is b and kept.c is c and a.dtype == _F32 \
            and a.ndim == 2 and a.shape[1] == (b.shape[1] if kept.trans_b else b.shape[0]):
        return _gemm_again(a, kept)
    _float(layer, a, b)
    if a.dtype in _HALF:
        half = a.dtype
        return Gemm(layer, _widen(a, b, c)).astype(half)
    if layer.attr("transA", 0):
        a = a.T
    trans_b = bool(layer.attr("transB", 0))
    if trans_b:
        b = b.T
    alpha = float(layer.attr("alpha", 1.0))
    beta = float(layer.attr("beta", 1.0))
    m, n = a.shape[0], b.shape[1]
    bias = _row_bias(c, n, beta)
    if alpha == 1.0 and bias is not False and a.dtype == _F32 \
            and gemm_packed.worth_packing(layer, inputs[1], trans_b, m):
        # a linear layer by constant weights (a classifier's): the packed product, bias in
        # its epilogue, then the fused activation
        y = np.empty((m, n), np.float32)
        gemm_packed.matmul_packed(np.ascontiguousarray(a), inputs[1], y, bias, trans=trans_b)
        act = activation_of(layer)
        if act[0] != ACT_NONE:
            epilogue(y.reshape(1, -1), None, act)
        if not layer.attr("transA", 0):
            layer.__dict__["_cpu_gemm"] = _KeptGemm(inputs[1], c, True, inputs[1], bias, act,
                                                    trans_b, n)
        return y
    if alpha == 1.0 and bias is not False and a.dtype == _F32 and b.dtype == _F32 \
            and not layer.attr("transA", 0) and not gemm_packed.packable(inputs[1], trans_b, m):
        # kept for the next call (unless the next may pack the weight): the same weight and
        # bias objects skip the checks
        layer.__dict__["_cpu_gemm"] = _KeptGemm(inputs[1], c, False, b, bias,
                                                activation_of(layer), trans_b, n)
    y = np.empty((m, n), np.result_type(a.dtype, b.dtype))
    threads.matmul(a, b, y)
    if alpha != 1.0:
        y *= y.dtype.type(alpha)
    act = activation_of(layer)
    if c is not None and beta != 0.0 and c.size:
        if c.ndim == 2 and c.shape[0] == m and c.shape[1] == 1 and y.dtype.kind == "f":
            epilogue(y, c.reshape(m) * y.dtype.type(beta), act)  # per-row bias: one pass
            return y
        y += c.astype(y.dtype, copy=False) * y.dtype.type(beta) if beta != 1.0 else c
    if act[0] != ACT_NONE:
        epilogue(y.reshape(1, -1), None, act)
    return y


@cpu_kernel("MatMul")
def MatMul(layer, inputs):
    a, b = inputs
    _float(layer, a, b)
    if a.dtype != b.dtype:
        raise KernelError(f"layer {layer.name!r}: MatMul of {a.dtype} and {b.dtype}")
    if a.dtype in _HALF:
        return np.matmul(*_widen(a, b)).astype(a.dtype)
    if b.ndim == 2 and a.ndim >= 2 and a.dtype.kind == "f" and a.shape[-1] == b.shape[0]:
        # [..., K] @ [K, N] (a transformer's linear layers): one 2-D product over all rows,
        # split over the backend's threads (np.matmul would run it on one)
        out = np.empty(a.shape[:-1] + (b.shape[1],), a.dtype)
        a2 = np.ascontiguousarray(a).reshape(-1, a.shape[-1])
        if a.dtype == _F32 and gemm_packed.worth_packing(layer, b, rows=a2.shape[0]):
            gemm_packed.matmul_packed(a2, b, out.reshape(-1, b.shape[1]))
            return out
        threads.matmul(a2, b, out.reshape(-1, b.shape[1]))
        return out
    return np.matmul(a, b)
