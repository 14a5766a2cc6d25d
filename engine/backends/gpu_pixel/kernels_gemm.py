"""Gemm and MatMul kernels (shaders/pixel/gemm.wgsl, matmul.wgsl)."""

from __future__ import annotations

from engine.backends.gpu_pixel.kernels_conv import activation, activation_reason
from engine.backends.gpu_pixel.registry import pixel_kernel


def gemm(be, a, b, c, out_shape, k, trans_a=0, trans_b=0, alpha=1.0, beta=1.0,
         act="Identity", params=(0.0,)):
    m, n = out_shape
    texes = [a, b, c if c is not None else be.r.dummy]
    layouts = [None, None, c.layout if c is not None else None]
    ints = [(m, n, k, trans_a), (trans_b, int(c is not None))]
    floats = [(alpha, beta)] + [(0,)] * 6 + [params]
    return be.run("gemm", out_shape, texes, ints=ints, floats=floats, layouts=layouts, ACT=act)


def _gemm_check(layer, metas):
    for i in (0, 1):
        m = metas[i] if i < len(metas) else None
        if m is not None and len(m.shape) != 2:
            return "Gemm inputs must be 2-D"
    return activation_reason(layer)


@pixel_kernel("Gemm", check=_gemm_check)
def Gemm(be, layer, inputs, in_metas, out_metas):
    ta, tb = int(layer.attr("transA", 0)), int(layer.attr("transB", 0))
    a = in_metas[0].shape
    k = a[0] if ta else a[1]
    c = inputs[2] if len(inputs) > 2 else None
    act, params = activation(layer)
    return [gemm(be, inputs[0], inputs[1], c, out_metas[0].shape, k, ta, tb,
                 float(layer.attr("alpha", 1.0)), float(layer.attr("beta", 1.0)), act, params)]


def _matmul_check(layer, metas):
    for m in metas[:2]:
        if m is not None and len(m.shape) < 2:
            return "MatMul with 1-D operands is not supported"
        if m is not None and len(m.shape) > 2 and layer.attr("activation"):
            return "a fused activation on batched MatMul is not supported"
    return activation_reason(layer)


@pixel_kernel("MatMul", check=_matmul_check)
def MatMul(be, layer, inputs, in_metas, out_metas):
    a, b, y = in_metas[0].shape, in_metas[1].shape, out_metas[0].shape
    act, params = activation(layer)
    if len(a) == 2 and len(b) == 2:
        return [gemm(be, inputs[0], inputs[1], None, y, a[1], act=act, params=params)]
    return [be.run("matmul", y, inputs[:2], ints=[(a[-2], b[-1], a[-1])])]
