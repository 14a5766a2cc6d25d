"""Conv and ConvTranspose kernels (shaders/pixel/conv.wgsl, conv_tap.wgsl,
conv_transpose.wgsl); 1-D runs as 2-D with H = 1."""

from __future__ import annotations

import math

from engine.backends.gpu_pixel.conv_weights import (
    depthwise_taps,
    group_span,
    grouped_blocks,
    grouped_matrix,
    tap_fit,
    tap_group_matrix,
    tap_matrix,
    transposed_fit,
    transposed_matrix,
    weight_matrix,
)
from engine.backends.gpu_pixel.registry import outputs_used, pixel_kernel
from engine.backends.gpu_pixel.targets import pixels_per_fragment, run_columns
from engine.ops.activations import UNARY_OPS, fused_params, shader_params
from engine.ops.conv_pool import causal_activation, conv_geometry, conv_transpose_geometry


def activation_reason(layer) -> str | None:
    act = layer.attr("activation")
    rec = UNARY_OPS.get(act) if act else None
    if act and (rec is None or not rec.shader):
        return f"fused activation {act} is not supported"
    return None


def activation(layer) -> tuple[str, list[float]]:
    """(op of shaders/common/activations.wgsl, parameters) of the layer's fused activation."""
    act = layer.attr("activation")
    if not act:
        return "Identity", [0.0] * 4
    return act, list(shader_params(fused_params(act, layer.attr("activation_params")), 4))


def _as_2d(shape):
    """NCHW view of a 1-D or 2-D layout (their textures are the same)."""
    return tuple(shape) if len(shape) == 4 else (shape[0], shape[1], 1, shape[2])


def _spatial_check(layer, metas):
    x = metas[0]
    if x is not None and len(x.shape) not in (3, 4):
        return f"{layer.op_type} on rank {len(x.shape)} input (only 1-D and 2-D) is not supported"
    return activation_reason(layer)


def _conv_check(layer, metas):
    why = _spatial_check(layer, metas)
    w = metas[1] if len(metas) > 1 else None
    if why is None and w is not None and len(w.shape) not in (3, 4):
        why = "Conv weights of rank other than 3 or 4 are not supported"
    return why


@pixel_kernel("Conv", check=_conv_check)
def Conv(be, layer, inputs, in_metas, out_metas):
    x, w, y = in_metas[0].shape, in_metas[1].shape, out_metas[0].shape
    geo = conv_geometry(layer, x, w).as_2d()
    pb, s, d = geo.pads_begin, geo.strides, geo.dilations
    n, c, h, wd = _as_2d(x)
    _, m, oh, ow = _as_2d(y)
    kh, kw = geo.kernel
    group = int(layer.attr("group", 1))
    cg, mg = c // group, m // group
    wmat = inputs[1].host is not None
    if group == 1 or (cg % 4 == 0 and mg % 4 == 0):
        variant = "blocked"
    elif cg == 1 and mg == 1:
        variant = "depthwise"
    else:
        variant = "grouped" if wmat else "scalar"
    bias = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    act, params = activation(layer)
    if variant in ("blocked", "grouped", "depthwise") and wmat and \
            use_taps(w, be.max_dim, mg, group):
        return [conv_tap(be, inputs, bias, geo, (n, c, h, wd), y, cg, mg, act, params,
                         variant)]
    wblocks = (cg + 3) // 4
    if wmat and variant == "depthwise":
        weights = depthwise_taps(be, inputs[1], m, kh * kw)
    elif variant == "grouped":
        wblocks = grouped_blocks(c, cg)
        weights = grouped_matrix(be, inputs[1], wblocks, mg)
    elif wmat:
        weights = weight_matrix(be, inputs[1], m, wblocks * kh * kw)
    else:
        weights = inputs[1]
    texes = [inputs[0], weights, bias if bias is not None else be.r.dummy]
    ints = [(n, c, h, wd), (m, oh, ow, group), (kh, kw, s[0], s[1]), (pb[0], pb[1], d[0], d[1]),
            ((c + 3) // 4, (m + 3) // 4, cg, mg), (int(bias is not None), wblocks)]
    floats = [(0,)] * 7 + [params]
    return [be.run("conv", y, texes, ints=ints, floats=floats, VARIANT=variant, ACT=act,
                   WMAT=str(wmat).lower(), BIAS=str(bias is not None).lower())]


def use_taps(w_shape, max_dim: int, mg: int, group: int) -> bool:
    """Whether a Conv with known weights runs as shaders/pixel/conv_tap.wgsl
    (its weight texture fits)."""
    return tap_fit(w_shape, max_dim, mg, group)


def conv_tap(be, inputs, bias, geo, xs, y, cg, mg, act, params, variant):
    """conv_tap.wgsl: kernel size, strides and dilations specialised; a fragment computes
    ``pixels_per_fragment`` pixels of a row, one per colour target."""
    n, c, h, wd = xs
    _, m, oh, ow = _as_2d(y)
    (kh, kw), (sh, sw), (dh, dw) = geo.kernel, geo.strides, geo.dilations
    pb = geo.pads_begin
    inside = all(p == 0 and (o - 1) * st + (k - 1) * dl <= size - 1 for p, o, st, k, dl, size
                 in zip(pb, (oh, ow), (sh, sw), (kh, kw), (dh, dw), (h, wd)))
    per = pixels_per_fragment(be, ow)
    q = -(-ow // per)
    masked = variant == "grouped"
    if masked:
        span = group_span(m, cg, mg)
        weights = tap_group_matrix(be, inputs[1], mg, span)
    elif variant == "depthwise":
        span, weights = 1, depthwise_taps(be, inputs[1], m, kh * kw)
    else:
        span, weights = (cg + 3) // 4, tap_matrix(be, inputs[1])
    texes = [inputs[0], weights, bias if bias is not None else be.r.dummy]
    ints = [(n, c, h, wd), (m, oh, ow, (c + 3) // 4), (pb[0], pb[1], q, cg),
            ((m + 3) // 4, span, mg, int(bias is not None))]
    consts = dict(ACT=act, KH=kh, KW=kw, SH=sh, SW=sw, DH=dh, DW=dw,
                  PAD=str(not inside).lower(), MASKED=str(masked).lower(),
                  DEPTHWISE=str(variant == "depthwise").lower())
    floats = [(0,)] * 7 + [params]
    return run_columns(be, "conv_tap", y, texes, ints, floats, per, q, **consts)


def matrix_fit_reason(layer, metas, max_dim: int) -> str | None:
    """For Conv with CPU-known weights: whether the weight matrix texture fits."""
    w = metas[1] if len(metas) > 1 else None
    if w is None or w.value is None or len(w.shape) < 3:
        return None
    cg, group = w.shape[1], int(layer.attr("group", 1) or 1)
    mg = w.shape[0] // group
    blocks = (cg + 3) // 4
    if group > 1 and not (cg % 4 == 0 and mg % 4 == 0) and not (cg == 1 and mg == 1):
        blocks = grouped_blocks(cg * group, cg)  # the grouped variant's re-laid matrix
    width = blocks * int(math.prod(w.shape[2:]))
    if w.shape[0] > max_dim or width > max_dim:
        return f"Conv weights {list(w.shape)} need a {width}x{w.shape[0]} texture, " \
               f"over the {max_dim} texel limit"
    return None


def _convt_check(layer, metas):
    x, w = metas[0], metas[1] if len(metas) > 1 else None
    if x is not None and len(x.shape) not in (3, 4):
        return f"ConvTranspose on a rank {len(x.shape)} input is not supported (1-D and 2-D are)"
    if x is not None and w is not None and len(w.shape) != len(x.shape):
        return f"ConvTranspose weight rank {len(w.shape)} differs from the input rank"
    return activation_reason(layer)


@pixel_kernel("ConvTranspose", check=_convt_check)
def ConvTranspose(be, layer, inputs, in_metas, out_metas):
    x, w = in_metas[0].shape, in_metas[1].shape
    g = conv_transpose_geometry(layer, x, w).as_2d()
    two = len(x) == 4
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = g.kernel, g.strides, g.dilations, g.pads_begin
    bias = inputs[2] if len(inputs) > 2 else None
    act, params = activation(layer)
    group = int(layer.attr("group", 1) or 1)
    known = group == 1 and inputs[1].host is not None
    if known and (dh, dw) == (1, 1) and tap_fit((w[1], w[0], *w[2:]), be.max_dim, w[1], 1):
        return [conv_transpose_tap(be, inputs, bias, g, x, out_metas[0].shape, act, params)]
    if known and transposed_fit(w, be.max_dim):
        # whole texels: 4 output channels per fragment, 4 input channels per load
        n, c, h, wd = _as_2d(x)
        y = out_metas[0].shape
        _, m, oh, ow = _as_2d(y)
        cbs = (c + 3) // 4
        texes = [inputs[0], transposed_matrix(be, inputs[1], m, cbs * kh * kw),
                 bias if bias is not None else be.r.dummy]
        ints = [(n, c, h, wd), (m, oh, ow, 1), (kh, kw, sh, sw), (ph, pw, dh, dw),
                (cbs, (m + 3) // 4, c, m), (int(bias is not None), cbs)]
        return [be.run("conv", y, texes, ints=ints, floats=[(0,)] * 7 + [params],
                       VARIANT="transposed", ACT=act, WMAT="true",
                       BIAS=str(bias is not None).lower())]
    ints = [(kh, kw, int(layer.attr("group", 1) or 1), int(two)), (sh, sw, dh, dw),
            (ph, pw, int(bias is not None), 0)]
    texes = [inputs[0], inputs[1]] + ([bias] if bias is not None else [])
    return [be.run("conv_transpose", out_metas[0].shape, texes, n_tex=3, ints=ints,
                   floats=[params], ACT=act)]


def conv_transpose_tap(be, inputs, bias, geo, xs, y, act, params):
    """shaders/pixel/conv_transpose_tap.wgsl: a fragment computes 4 output channels of up
    to 4 pixels of a row that share their taps (columns a multiple of the stride apart)."""
    n, c, h, wd = _as_2d(xs)
    _, m, oh, ow = _as_2d(y)
    (kh, kw), (sh, sw), (ph, pw) = geo.kernel, geo.strides, geo.pads_begin
    per = pixels_per_fragment(be, ow, widest=4)
    cols = -(-ow // per)                    # columns a target covers, ceil(ow / per)
    q = -(-cols // sw) * sw                 # rounded up to a multiple of the stride
    texes = [inputs[0], tap_matrix(be, inputs[1], transposed=True),
             bias if bias is not None else be.r.dummy]
    ints = [(n, c, h, wd), (m, oh, ow, (c + 3) // 4), (ph, pw, q),
            ((m + 3) // 4, 0, 0, int(bias is not None))]
    return run_columns(be, "conv_transpose_tap", y, texes, ints, [(0,)] * 7 + [params], per,
                       q, ACT=act, KH=kh, KW=kw, SH=sh, SW=sw)


def _causal_check(layer, metas):
    w = metas[1] if len(metas) > 1 else None
    if w is not None and len(w.shape) == 3 and w.shape[2] == 1 and outputs_used(layer) > 1:
        return "CausalConvWithState with kernel size 1 has an empty state, which textures " \
               "do not hold"
    try:
        causal_activation(layer)
    except ValueError as exc:
        return str(exc)
    return None


@pixel_kernel("CausalConvWithState", check=_causal_check, max_outputs=2)
def CausalConvWithState(be, layer, inputs, in_metas, out_metas):
    """The output, then the state, each one pass of shaders/pixel/causal_conv.wgsl."""
    k = in_metas[1].shape[2]
    bias = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    past = inputs[3] if len(inputs) > 3 and inputs[3] is not None else None
    texes = [inputs[0], inputs[1], bias if bias is not None else be.r.dummy,
             past if past is not None else be.r.dummy]
    flags = (k, int(bias is not None), int(past is not None))
    return [be.run("causal_conv", meta.shape, texes, ints=[(*flags, which)],
                   ACT=causal_activation(layer)) for which, meta in enumerate(out_metas)]
