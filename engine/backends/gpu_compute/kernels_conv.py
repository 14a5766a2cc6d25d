"""Conv (implicit GEMM, im2col + matmul, direct rows, 1x1 as batched matmul, depthwise), 1-D
and 2-D, and CausalConvWithState, with the fusion pass's bias and activation applied in the
epilogue. ConvTranspose is in kernels_conv_transpose.py."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.kernels_matmul import (
    Operand,
    activation_reason,
    fused_activation,
    matmul,
)
from engine.backends.gpu_compute.kernels_movement import strided_copy
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, gpu_kernel, out_size_reason
from engine.backends.gpu_compute.util import size_of
from engine.ops.base import Meta
from engine.ops.conv_pool import Geometry2D, causal_activation, layer_geometry


def _hw(shape):
    return (1, shape[2]) if len(shape) == 3 else (shape[2], shape[3])


def _conv_check(layer, metas):
    reason = activation_reason(layer)
    if reason:
        return reason
    x, w = metas[0], metas[1]
    if x is None or w is None:
        return None
    if len(x.shape) not in (3, 4):
        return f"{len(x.shape) - 2}-D {layer.op_type} runs on the CPU (the GPU does 1-D and 2-D)"
    if any(m is not None and m.dtype != np.float32 for m in metas):
        return f"{layer.op_type} runs on float32 on the GPU"
    if all(isinstance(d, int) for d in x.shape) and isinstance(w.shape[0], int):
        # estimate: the output plane is about the input plane (strides only shrink it)
        return out_size_reason(x.shape[0] * w.shape[0] * size_of(x.shape[2:]) * 4)
    return None


def _params(x, out, geo: Geometry2D, groups, has_bias, act, last=0):
    """The conv shaders' parameter block (shaders/compute/conv_params.wgsl); ``last`` is M4
    (conv2d) or the output size."""
    H, W = _hw(x.shape)
    OH, OW = _hw(out.shape)
    C, M = x.shape[1], out.shape[1]
    _, (pa, pb, _) = act
    return pack(C, H, W, M, OH, OW, *geo.kernel, *geo.strides, *geo.pads_begin,
                *geo.dilations, C // groups, M // groups, last, int(has_bias), float(pa), float(pb))


def _pack_weights(w: np.ndarray) -> np.ndarray:
    m = w.shape[0]
    k = size_of(w.shape[1:])
    m4 = -(-m // 4) * 4
    packed = np.zeros((m4, k), np.float32)
    packed[:m] = w.reshape(m, k)
    # [M4/4][K][4]: the 4 channels of a quad side by side for each tap
    return np.ascontiguousarray(packed.reshape(m4 // 4, 4, k).transpose(0, 2, 1))


def _pad_rows(w: np.ndarray) -> np.ndarray:
    """Weights [M][K] with each row zero-padded to a multiple of 4: the matmul's A operand
    then loads 4 taps at once (vec4) instead of one."""
    m, k = w.shape[0], size_of(w.shape[1:])
    padded = np.zeros((m, -(-k // 4) * 4), np.float32)
    padded[:, :k] = w.reshape(m, k)
    return padded


def _weights_operand(ctx, layer, ins, w, k: int, off_rows: int, batch_rows: int = 0) -> Operand:
    """The weights as a matmul A operand [rows][k]: rows padded to a multiple of 4 when the
    weights are a model constant and k is not (``_pad_rows``), as they are otherwise."""
    if k % 4:
        padded = ctx.constant(layer, 1, w, "conv-pad4", _pad_rows)
        if padded is not None:
            k4 = -(-k // 4) * 4
            return Operand(padded, k4, 1, batch=batch_rows * k4, off=off_rows * k4)
    return Operand(ins[1], k, 1, batch=batch_rows * k, off=off_rows * k)


@gpu_kernel("Conv", dtypes=F32, inputs=(0, 1, 2), check=_conv_check)
def Conv(ctx, layer, ins, metas, out_metas):
    x, w, out = metas[0], metas[1], out_metas[0]
    groups = int(layer.attr("group", 1))
    geo = layer_geometry(layer, x.shape, w.shape).as_2d()
    act = fused_activation(layer)
    bias = ins[2] if len(ins) > 2 else None
    y = ctx.tensor(out)
    N, C, M = x.shape[0], x.shape[1], out.shape[1]
    P = size_of(out.shape[2:])
    if not P or not N or not M:
        return [y]
    pointwise = (geo.kernel == geo.strides == (1, 1) and geo.pads_begin == (0, 0)
                 and P == size_of(x.shape[2:]))
    mg, cg = M // groups, C // groups
    if pointwise and groups == 1:  # one batched matmul over the images
        xp, p4 = _padded_rows(ctx, ins[0], N * C, P) if P % 4 and C >= PAD_MIN_K else \
            (ins[0], P)
        matmul(ctx, _weights_operand(ctx, layer, ins, w, C, 0),
               Operand(xp, p4, 1, batch=C * p4), y, M, P, C, N,
               None if bias is None else Operand(bias, 1, 0), act=act)
        if xp is not ins[0]:
            ctx.free(xp)
        return [y]
    if pointwise and cg > 1:  # per image, one matmul batched over the groups
        xp, p4 = _padded_rows(ctx, ins[0], N * C, P) if P % 4 and cg >= PAD_MIN_K else \
            (ins[0], P)
        for n in range(N):
            matmul(ctx, _weights_operand(ctx, layer, ins, w, cg, 0, mg),
                   Operand(xp, p4, 1, batch=cg * p4, off=n * C * p4), y, mg, P, cg, groups,
                   None if bias is None else Operand(bias, 1, 0, batch=mg), act=act,
                   c_off=n * M * P, c_batch=mg * P)
        if xp is not ins[0]:
            ctx.free(xp)
        return [y]
    if cg > 1 and geo.dilations[1] == 1 and (groups == 1 or mg % 4 == 0) and \
            (ctx.conv_strategy == "rows" or ctx.conv_strategy == "im2col" and _rows_pay(geo, M)):
        _conv_rows(ctx, layer, ins, metas, out, geo, groups, act, y)
        return [y]
    if cg > 1 and (ctx.conv_strategy != "implicit" or mg % 4):
        _conv_im2col(ctx, layer, ins, metas, out, geo, groups, act, y)
        return [y]
    if mg % 4 == 0:
        packed, temp = _quad_weights(ctx, layer, ins, w, M)
        m4 = -(-M // 4) * 4
        (kh, kw), (sh, sw), (dh, dw) = geo.kernel, geo.strides, geo.dilations
        ctx.dispatch(Program.of("conv2d.wgsl", act=act[0], KH=kh, KW=kw, SH=sh, SW=sw, DH=dh,
                                DW=dw),
                     [ins[0], packed, bias if bias is not None else ins[0], y],
                     _params(x, out, geo, groups, bias is not None, act, m4),
                     (-(-P // 64), -(-M // 16), N))
        if temp is not None:
            ctx.free(temp)
        return [y]
    if cg == 1 and geo.dilations == (1, 1):
        _conv_depthwise(ctx, ins, x, out, geo, groups, act, y)
        return [y]
    ctx.dispatch(Program.of("conv_direct.wgsl", act=act[0]),
                 [ins[0], ins[1], bias if bias is not None else ins[0], y],
                 _params(x, out, geo, groups, bias is not None, act),
                 (-(-P // 256), M, N))
    return [y]


#: input channels from which a pointwise conv over a map whose size is not a multiple of 4
#: copies the map into rows padded to 4 first: the matmul then loads B as aligned vec4s
PAD_MIN_K = 16


def _padded_rows(ctx, x, rows: int, n: int):
    """(a copy of ``rows`` rows of ``n`` values with each row padded to a multiple of 4, its
    row stride)."""
    n4 = -(-n // 4) * 4
    xp = ctx.tensor(Meta((rows, n4), np.dtype(np.float32)))
    strided_copy(ctx, x, xp, [rows, n], [n, 1], [n4, 1])
    return xp, n4


def _rows_pay(geo: Geometry2D, M: int) -> bool:
    """Where conv_rows.wgsl beats im2col + matmul on CPU adapters: im2col writes and reads
    back K*P values for 2*M*K*P FLOPs, which weighs most with few output channels. Measured
    on lavapipe (GPU ms, im2col -> rows, 8 outputs a row): 16->64 @55 k3 13.0 -> 11.6,
    48->32 @40 8.7 -> 8.4, 24->6 @160 17.4 -> 17.2; slower from 128 channels (32->128 @27
    11.6 -> 13.0) and at strides > 1 (16->32 @160 s2 15.6 -> 20.4), except with at most 8
    output channels, where the matmul has one or two rows of tiles (3x3/2, two runs each:
    3->8 @640 22.5/21.3 -> 13.9/11.9, 8->8 @160 3.5/3.4 -> 1.7/1.4, 4->4 @320 5.7/6.2 ->
    2.1/2.3, 32->8 @80 3.2/2.9 -> 2.0/2.0)."""
    return M <= 64 and geo.strides[1] == 1 or M <= 8


def _quad_weights(ctx, layer, ins, w, M: int):
    """(weights packed as [M4/4][K][4] (``_pack_weights``), a scratch tensor to free after
    the dispatch or None). Constant weights are packed once on the host."""
    k = size_of(w.shape[1:])
    packed = ctx.constant(layer, 1, w, "conv-pack", _pack_weights)
    if packed is not None:
        return packed, None
    # weights computed at run time: re-lay them out on the GPU (M % 4 == 0 here)
    m4 = -(-M // 4) * 4
    packed = ctx.tensor(Meta((m4, k), np.dtype(np.float32)))
    strided_copy(ctx, ins[1], packed, [M // 4, k, 4], [4 * k, 1, k], [4 * k, 4, 1])
    return packed, packed


def _conv_rows(ctx, layer, ins, metas, out, geo, groups, act, y) -> None:
    """Runs of 8 outputs along rows x quads of output channels, without im2col
    (conv_rows.wgsl)."""
    x, w = metas[0], metas[1]
    N, M = x.shape[0], out.shape[1]
    OH, OW = _hw(out.shape)
    runs = -(-OW // 8)
    bias = ins[2] if len(ins) > 2 else None
    if M % 4 and ctx.constant(layer, 1, w, "conv-pack", _pack_weights) is None:
        _conv_im2col(ctx, layer, ins, metas, out, geo, groups, act, y)  # no GPU re-layout
        return
    packed, temp = _quad_weights(ctx, layer, ins, w, M)
    (kh, kw), (sh, sw), dh = geo.kernel, geo.strides, geo.dilations[0]
    ctx.dispatch(Program.of("conv_rows.wgsl", act=act[0], KH=kh, KW=kw, SH=sh, SW=sw, DH=dh),
                 [ins[0], packed, bias if bias is not None else ins[0], y],
                 _params(x, out, geo, groups, bias is not None, act, runs),
                 (-(-runs * OH // 64), -(-M // 4), N))
    if temp is not None:
        ctx.free(temp)


def _conv_depthwise(ctx, ins, x, out, geo, groups, act, y) -> None:
    """One input channel per group: runs of 8 outputs along rows with a sliding window of
    inputs (conv_depthwise.wgsl)."""
    N, M = x.shape[0], out.shape[1]
    OH, OW = _hw(out.shape)
    runs = -(-OW // 8)
    bias = ins[2] if len(ins) > 2 else None
    (kh, kw), (sh, sw) = geo.kernel, geo.strides
    ctx.dispatch(Program.of("conv_depthwise.wgsl", act=act[0], KH=kh, KW=kw, SH=sh, SW=sw),
                 [ins[0], ins[1], bias if bias is not None else ins[0], y],
                 _params(x, out, geo, groups, bias is not None, act, runs),
                 (-(-runs * OH // 64), M, N))


def _conv_im2col(ctx, layer, ins, metas, out, geo, groups, act, y) -> None:
    """Per image, group and chunk of output pixels: im2col into a scratch buffer, then matmul."""
    x = metas[0]
    N, C, M = x.shape[0], x.shape[1], out.shape[1]
    H, W = _hw(x.shape)
    OH, OW = _hw(out.shape)
    P, cg, mg = OH * OW, C // groups, M // groups
    K = cg * geo.kernel[0] * geo.kernel[1]
    chunk = max(4, min(P, ctx.limits.max_binding // 8 // K) // 4 * 4)
    bias = ins[2] if len(ins) > 2 else None
    for n in range(N):
        for g in range(groups):
            for p0 in range(0, P, chunk):
                cols = min(chunk, P - p0)
                ld = -(-cols // 4) * 4  # rows padded: the matmul loads them as vec4s
                col = ctx.tensor(Meta((K, ld), np.dtype(np.float32)))
                runs = -(-cols // 64)
                params = pack(K * runs, cols, p0, (n * C + g * cg) * H * W, H, W, OW,
                              *geo.kernel, *geo.strides, *geo.pads_begin, *geo.dilations, runs,
                              ld, 0, 0, 0)
                ctx.dispatch(Program.of("im2col.wgsl"), [ins[0], col], params,
                             -(-K * runs // 64))
                matmul(ctx, _weights_operand(ctx, layer, ins, metas[1], K, g * mg),
                       Operand(col, ld, 1), y,
                       mg, cols, K, 1, None if bias is None else Operand(bias, 1, 0, off=g * mg),
                       act=act, ldc=P, c_off=(n * M + g * mg) * P + p0)
                ctx.free(col)


def _causal_check(layer, metas):
    if any(m is not None and m.dtype != np.float32 for m in metas):
        return "CausalConvWithState runs on float32 on the GPU"
    try:
        causal_activation(layer)
    except ValueError as exc:
        return str(exc)
    return None


@gpu_kernel("CausalConvWithState", dtypes=F32, inputs=(0, 1, 2, 3), check=_causal_check)
def CausalConvWithState(ctx, layer, ins, metas, out_metas):
    """Both outputs in one dispatch (shaders/compute/causal_conv.wgsl)."""
    b, c, length = metas[0].shape
    k = metas[1].shape[2]
    bias = ins[2] if len(ins) > 2 and ins[2] is not None else None
    past = ins[3] if len(ins) > 3 and ins[3] is not None else None
    y = ctx.tensor(out_metas[0])
    # the state is always computed (a 4-byte scratch when K = 1 or the graph drops it)
    state_meta = out_metas[1] if len(out_metas) > 1 else Meta((b, c, k - 1), np.dtype(np.float32))
    state = ctx.tensor(state_meta)
    n_out, n_state = b * c * length, b * c * (k - 1)
    if n_out + n_state:
        params = pack(c, length, k, n_out, n_state, int(bias is not None), int(past is not None), 0)
        ctx.dispatch(Program.of("causal_conv.wgsl", act=causal_activation(layer)),
                     [ins[0], ins[1], bias if bias is not None else ins[0],
                      past if past is not None else ins[0], y, state], params,
                     -(-(n_out + n_state) // 256))
    if len(out_metas) > 1:
        return [y, state]
    ctx.free(state)
    return [y]
