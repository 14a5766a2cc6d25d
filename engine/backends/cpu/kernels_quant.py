"""Quantisation CPU kernels (NumPy): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv (per-tensor, per-axis and blocked;
integer, float8 and 4/2-bit types)."""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.kernel_util import onnx_dtype
from engine.backends.cpu.kernels_cast import cast
from engine.backends.cpu.registry import cpu_kernel
from engine.ops.conv_pool import conv_geometry


def _opt(inputs, i):
    return inputs[i] if len(inputs) > i and inputs[i] is not None else None


def _broadcast_param(p: np.ndarray, x: np.ndarray, axis: int, block: int) -> np.ndarray:
    """A scale/zero point shaped to broadcast against ``x`` (per tensor, axis or block)."""
    p = np.asarray(p)
    if p.size == 1 and (p.ndim <= 1):
        return p.reshape(())
    axis = axis + x.ndim if axis < 0 else axis
    if p.ndim == 1 and not block:
        shape = [1] * x.ndim
        shape[axis] = p.shape[0]
        return p.reshape(shape)
    # blocked: repeat each entry `block` times along the axis, then cut to the axis length
    return np.repeat(p, block, axis=axis).take(np.arange(x.shape[axis]), axis=axis)


def _int_limits(dtype: np.dtype):
    import ml_dtypes

    return ml_dtypes.iinfo(dtype) if dtype.kind == "V" else np.iinfo(dtype)


def quantize(x: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, to: np.dtype,
             saturate: bool = True, precision: np.dtype | None = None) -> np.ndarray:
    work = precision or np.promote_types(np.asarray(scale).dtype, np.float32)
    if np.dtype(work).kind == "V":
        work = np.float32
    v = x.astype(work) / np.asarray(scale).astype(work)
    is_int = to.kind in "iu" or (to.kind == "V" and "int" in to.name)
    if is_int:
        q = np.rint(v.astype(np.float64))
        if zp is not None:
            q = q + np.asarray(zp).astype(np.float64)
        info = _int_limits(to)
        return np.clip(q, int(info.min), int(info.max)).astype(np.int64).astype(to)
    if zp is not None:
        v = v.astype(np.float32) + np.asarray(zp).astype(np.float32)
    return cast(v.astype(np.float32), to, saturate)


@cpu_kernel("QuantizeLinear", since=10)
def QuantizeLinear(layer, inputs):
    x, scale = inputs[0], inputs[1]
    zp = _opt(inputs, 2)
    out_code = layer.attr("output_dtype", 0)
    to = onnx_dtype(out_code) if out_code else (zp.dtype if zp is not None
                                                else np.dtype(np.uint8))
    axis, block = layer.attr("axis", 1), int(layer.attr("block_size", 0) or 0)
    s = _broadcast_param(scale, x, axis, block)
    z = None if zp is None else _broadcast_param(zp, x, axis, block)
    prec = layer.attr("precision", 0)
    return quantize(x, s, z, to, bool(layer.attr("saturate", 1)),
                    onnx_dtype(prec) if prec else None)


@cpu_kernel("DequantizeLinear", since=10)
def DequantizeLinear(layer, inputs):
    x, scale = inputs[0], inputs[1]
    zp = _opt(inputs, 2)
    out_code = layer.attr("output_dtype", 0)
    to = onnx_dtype(out_code) if out_code else scale.dtype
    axis, block = layer.attr("axis", 1), int(layer.attr("block_size", 0) or 0)
    s = _broadcast_param(scale, x, axis, block).astype(np.float32)
    xv = x.astype(np.float32)
    if zp is not None:
        xv = xv - _broadcast_param(zp, x, axis, block).astype(np.float32)
    return (xv * s).astype(to)


@cpu_kernel("DynamicQuantizeLinear", since=11)
def DynamicQuantizeLinear(layer, inputs):
    x = inputs[0].astype(np.float32)
    lo = min(float(x.min()) if x.size else 0.0, 0.0)
    hi = max(float(x.max()) if x.size else 0.0, 0.0)
    scale = np.float32((hi - lo) / 255.0)
    zp = np.clip(np.rint(-lo / scale) if scale else 0.0, 0, 255)
    y = np.clip(np.rint(x / scale) + zp if scale else np.full(x.shape, zp), 0, 255)
    return y.astype(np.uint8), np.array(scale, np.float32), np.array(zp, np.uint8)


def _zp_rows(zp, n: int, axis_len: int, row: bool):
    """Zero points of MatMulInteger: scalar, or per row of A / per column of B."""
    z = np.asarray(zp).astype(np.int64)
    if z.size <= 1:
        return z.reshape(())
    return z.reshape(-1, 1) if row else z.reshape(1, -1)


@cpu_kernel("MatMulInteger", since=10)
def MatMulInteger(layer, inputs):
    a, b = inputs[0].astype(np.int64), inputs[1].astype(np.int64)
    azp, bzp = _opt(inputs, 2), _opt(inputs, 3)
    if azp is not None:
        a = a - _zp_rows(azp, a.ndim, a.shape[-2] if a.ndim > 1 else 1, True)
    if bzp is not None:
        b = b - _zp_rows(bzp, b.ndim, b.shape[-1], False)
    return np.matmul(a, b).astype(np.int32)


def _per(p, ndim_shape_len: int, row: bool):
    p = np.asarray(p)
    if p.size <= 1:
        return p.reshape(())
    return p.reshape(-1, 1) if row else p.reshape(1, -1)


@cpu_kernel("QLinearMatMul", since=10)
def QLinearMatMul(layer, inputs):
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = inputs
    av = (a.astype(np.float64) - _per(a_zp, a.ndim, True)) * _per(a_s, a.ndim, True)
    bv = (b.astype(np.float64) - _per(b_zp, b.ndim, False)) * _per(b_s, b.ndim, False)
    prod = np.matmul(av, bv)
    return quantize(prod, np.asarray(y_s), np.asarray(y_zp), y_zp.dtype)


def conv_nd(x: np.ndarray, w: np.ndarray, layer) -> np.ndarray:
    """Direct N-D convolution in the input dtype (float64 or int64), for the quantised convs."""
    r = x.ndim - 2
    g = conv_geometry(layer, x.shape, w.shape)
    ks, strides, dil, pads = g.kernel, g.strides, g.dilations, g.pads
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + r]) for i in range(r)])
    group = int(layer.attr("group", 1))
    n, c = x.shape[:2]
    m = w.shape[0]
    span = [dil[i] * (ks[i] - 1) + 1 for i in range(r)]
    win = np.lib.stride_tricks.sliding_window_view(xp, span, axis=tuple(range(2, 2 + r)))
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)
              + tuple(slice(None, None, d) for d in dil)]
    out_sp = win.shape[2:2 + r]
    cg, mg = c // group, m // group
    outs = []
    for g in range(group):
        wg = w[g * mg:(g + 1) * mg].reshape(mg, -1)
        xg = win[:, g * cg:(g + 1) * cg]  # (N, cg, out..., k...)
        xg = np.moveaxis(xg, 1, 1 + r).reshape(n, *out_sp, -1)
        outs.append(np.moveaxis(xg @ wg.T, -1, 1))
    return np.concatenate(outs, axis=1)


@cpu_kernel("ConvInteger", since=10)
def ConvInteger(layer, inputs):
    x, w = inputs[0].astype(np.int64), inputs[1].astype(np.int64)
    xzp, wzp = _opt(inputs, 2), _opt(inputs, 3)
    if xzp is not None:
        x = x - np.asarray(xzp).astype(np.int64).reshape(())
    if wzp is not None:
        wz = np.asarray(wzp).astype(np.int64)
        w = w - (wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.size > 1 else wz.reshape(()))
    return conv_nd(x, w, layer).astype(np.int32)


@cpu_kernel("QLinearConv", since=10)
def QLinearConv(layer, inputs):
    x, xs, xzp, w, ws, wzp, ys, yzp = inputs[:8]
    bias = _opt(inputs, 8)
    xv = (x.astype(np.float64) - np.asarray(xzp).astype(np.float64)) * np.asarray(xs)
    per = (lambda p: np.asarray(p, np.float64).reshape((-1,) + (1,) * (w.ndim - 1))
           if np.asarray(p).size > 1 else np.asarray(p, np.float64).reshape(()))
    wv = (w.astype(np.float64) - per(wzp)) * per(ws)
    y = conv_nd(xv, wv, layer)
    if bias is not None:
        # the int32 bias is in units of x_scale * w_scale
        bscale = np.asarray(xs, np.float64) * np.asarray(ws, np.float64).reshape(-1)
        y = y + (bias.astype(np.float64) * bscale).reshape((1, -1) + (1,) * (y.ndim - 2))
    return quantize(y, np.asarray(ys), np.asarray(yzp), yzp.dtype)
