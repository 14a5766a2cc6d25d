"""ConvTranspose, 1-D and 2-D: a matmul and a strided copy when the kernel equals the strides,
else the phase-enumerating or the general gather shader; bias and fused activation applied
in the epilogue."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.kernels_conv import _conv_check, _hw, _pad_rows, _params
from engine.backends.gpu_compute.kernels_matmul import Operand, fused_activation, matmul
from engine.backends.gpu_compute.kernels_movement import strided_copy
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, gpu_kernel
from engine.backends.gpu_compute.util import size_of
from engine.ops.base import Meta
from engine.ops.conv_pool import layer_geometry


def _convt_check(layer, metas):
    reason = _conv_check(layer, metas)
    if reason is None and metas[0] is not None and len(metas[0].shape) == 4 and \
            layer.attr("output_shape") and layer.attr("auto_pad", "NOTSET") == "NOTSET" and \
            layer.attr("pads"):
        return "ConvTranspose with both output_shape and pads runs on the CPU"
    return reason


@gpu_kernel("ConvTranspose", dtypes=F32, inputs=(0, 1, 2), check=_convt_check)
def ConvTranspose(ctx, layer, ins, metas, out_metas):
    x, w, out = metas[0], metas[1], out_metas[0]
    groups = int(layer.attr("group", 1))
    geo = layer_geometry(layer, x.shape, w.shape).as_2d()
    act = fused_activation(layer)
    bias = ins[2] if len(ins) > 2 else None
    y = ctx.tensor(out)
    n = size_of(out.shape)
    if n and _convt_blocks(ctx, layer, ins, metas, out, geo, groups, act, y):
        return [y]
    if n:
        params = _params(x, out, geo, groups, bias is not None, act, n)
        if geo.dilations == (1, 1):
            (kh, kw), (sh, sw) = geo.kernel, geo.strides
            program = Program.of("conv_transpose_phase.wgsl", act=act[0], KH=kh, KW=kw, SH=sh,
                                 SW=sw)
        else:
            program = Program.of("conv_transpose.wgsl", act=act[0])
        ctx.dispatch(program,
                     [ins[0], ins[1], bias if bias is not None else ins[0], y], params,
                     -(-n // 256))
    return [y]


def _convt_blocks(ctx, layer, ins, metas, out, geo, groups, act, y) -> bool:
    """A transposed convolution whose kernel equals its strides (no pads) maps every input
    pixel to its own block of outputs: one matmul [M*KH*KW, C] x [C, H*W] per image, then a
    strided copy interleaves the blocks. Needs constant weights (and bias), packed once.
    Returns False where this does not apply."""
    x, w = metas[0], metas[1]
    (H, W), (OH, OW) = _hw(x.shape), _hw(out.shape)
    (kh, kw), (sh, sw) = geo.kernel, geo.strides
    if groups != 1 or (kh, kw) != (sh, sw) or geo.pads_begin != (0, 0) or \
            geo.dilations != (1, 1) or (OH, OW) != (H * sh, W * sw):
        return False
    N, C, M = x.shape[0], x.shape[1], out.shape[1]
    rows, hw = M * kh * kw, H * W
    a = ctx.constant(layer, 1, w, "convt-blocks", _blocks_weights)
    has_bias = len(ins) > 2 and ins[2] is not None
    bias = ctx.constant(layer, 2, metas[2], "convt-blocks-bias",
                        lambda b: np.repeat(b, kh * kw)) if has_bias else None
    if a is None or (has_bias and bias is None):
        return False
    c4 = -(-C // 4) * 4
    temp = ctx.tensor(Meta((N, rows, hw), np.dtype(np.float32)))
    matmul(ctx, Operand(a, c4, 1), Operand(ins[0], hw, 1, batch=C * hw), temp, rows, hw, C, N,
           None if bias is None else Operand(bias, 1, 0), act=act)
    strided_copy(ctx, temp, y, [N * M, kh, kw, H, W], [kh * kw * hw, kw * hw, hw, W, 1],
                 [OH * OW, OW, 1, sh * OW, sw])
    ctx.free(temp)
    return True


def _blocks_weights(w: np.ndarray) -> np.ndarray:
    """ConvTranspose weights [C][M][KH][KW] as the matmul's A [M*KH*KW][C4] (rows padded to
    a multiple of 4 for vec4 loads)."""
    return _pad_rows(np.ascontiguousarray(w.reshape(w.shape[0], -1).T))
