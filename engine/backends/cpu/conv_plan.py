"""What a CPU Conv layer derives once from its attributes, input shape and weights
(``kernels_conv``): the geometry, reshaped weights, the kind of kernel that runs it
(depthwise, register-blocked, direct, pointwise, Winograd, shifted rows or im2col) and its
tiling."""

from __future__ import annotations

import numpy as np

from engine.backends.cpu import (
    conv_blocked,
    conv_direct,
    conv_dw16,
    conv_pointwise,
    conv_row,
    conv_shift,
    conv_smallplane,
    nchw16c_dense,
    threads,
)
from engine.backends.cpu import kernels_winograd as winograd
from engine.backends.cpu.activation import act_params, activation_of, carr
from engine.errors import KernelError
from engine.ops.conv_pool import ConvGeometry, conv_geometry

#: fewest multiply-adds per parallel chunk of a depthwise Conv
DW_CHUNK_MACS = 1_000_000
#: fewest output positions per im2col tile (rounded down to whole output rows)
TILE_COLS = 512
#: fewest patch-matrix elements per im2col tile
TILE_ELEMENTS = 65536
#: fewest multiply-adds per im2col tile: thin products (a stem's 3 -> 16 channels, K = 27)
#: get wider tiles, so the per-tile calls (im2col, sgemm, epilogue) are amortised
TILE_MACS = 2_000_000


def as3d(shape) -> tuple[int, ...]:
    return (1,) * (3 - len(shape)) + tuple(shape)


def geom15(g: ConvGeometry, last) -> tuple[int, ...]:
    """The 15 ints im2col/col2im take: kernel, strides, dilations, pads_begin, ``last``."""
    one, zero = (1,) * (3 - g.rank), (0,) * (3 - g.rank)
    return (*one, *g.kernel, *one, *g.strides, *one, *g.dilations, *zero, *g.pads_begin,
            *one, *(int(v) for v in last))


def check_conv(layer, x: np.ndarray, w: np.ndarray) -> None:
    if x.ndim < 3 or x.ndim > 5:
        raise KernelError(f"layer {layer.name!r}: the CPU runs {layer.op_type} on 1-D, 2-D and "
                          f"3-D inputs only (got rank {x.ndim})")
    if x.dtype.kind != "f" or w.dtype != x.dtype:
        raise KernelError(f"layer {layer.name!r}: {layer.op_type} needs float input and weight "
                          f"of one dtype, got {x.dtype} and {w.dtype}")


class ConvPlan:
    """What a Conv layer derives from its attributes, input shape and weights: computed at
    its first run and kept on the layer while the weights (model constants) stay the same
    objects, so later runs skip the geometry, weight reshapes and epilogue set-up."""

    __slots__ = ("key", "w", "bias", "kind", "out_shape", "group", "Cg", "Mg", "P", "act",
                 "params", "gd", "w3", "b", "grain", "K", "w2", "gi", "ow", "rows", "per",
                 "ntiles", "tiled", "bg", "wino", "sg", "blk", "sp", "dw", "alone", "dn",
                 "patch", "pwp", "b_shuffled")


#: patchify convolutions with few input channels on the blocked dense kernel (``nchw16c_dense``),
#: up to this many taps
DENSE_PATCHES = True
DENSE_MAX_TAPS = 64
#: patchify convolutions of at least PATCH_MIN_TAPS taps and PATCH_MIN_DEPTH values a patch
#: (ViT's 16 x 16 x 3) copy their patches as rows and run one sgemm ("patches"); False: the
#: register-blocked kernel, which walks one stride phase per tap
PATCH_ROWS = True
PATCH_MIN_TAPS = 64
PATCH_MIN_DEPTH = 256


def plan(layer, x: np.ndarray, w: np.ndarray, bias) -> ConvPlan:
    key = (x.shape, x.dtype, threads.threads())
    plan = layer.__dict__.get("_cpu_conv_plan")
    if plan is not None and plan.key == key and plan.w is w and plan.bias is bias:
        return plan
    check_conv(layer, x, w)
    g = conv_geometry(layer, x.shape, w.shape)
    group = int(layer.attr("group", 1) or 1)
    C, M = x.shape[1], w.shape[0]
    if C != w.shape[1] * group or M % group:
        raise KernelError(f"layer {layer.name!r}: Conv channels {C}/{M} do not fit group {group}")
    plan = ConvPlan()
    plan.key, plan.w, plan.bias = key, w, bias
    plan.out_shape, plan.group = tuple(g.out_shape), group
    plan.Cg, plan.Mg = C // group, M // group
    plan.P = P = int(np.prod(g.out_shape))
    plan.act = act = activation_of(layer)
    plan.params = act_params(act, x.dtype)
    plan.alone = plan.pwp = plan.b_shuffled = None
    b = np.zeros(0, x.dtype) if bias is None else carr(bias.reshape(-1), x.dtype)
    if g.rank == 2 and group == C and w.shape[1] == 1:
        plan.kind = "depthwise"
        plan.gd = (*g.kernel, *g.strides, *g.dilations, *g.pads_begin)
        plan.w3 = carr(w.reshape(M, *g.kernel))
        plan.b = b
        plan.grain = max(1, DW_CHUNK_MACS // max(1, P * plan.w3[0].size))
        if x.dtype == np.float32 and conv_dw16.wanted(C, M, g.out_shape, g.kernel,
                                                       g.strides):
            plan.kind = "dw16"
            plan.dw = conv_dw16.DW16Plan(plan.gd[:6] + tuple(g.pads_begin), w, bias)
        layer.__dict__["_cpu_conv_plan"] = plan
        return plan
    plan.K = K = int(np.prod(g.kernel))
    plan.w2 = carr(w.reshape(M, plan.Cg * K))
    plan.b = b
    plan.bg = [b[k * plan.Mg:(k + 1) * plan.Mg] if b.size else b for k in range(group)]
    pointwise = K == 1 and all(s == 1 for s in g.strides) and not any(g.pads)
    plan.kind = "pointwise" if pointwise else "im2col"
    plan.gi = gi = geom15(g, g.out_shape)
    plan.ow, plan.rows = gi[-1], gi[-3] * gi[-2]
    # Large outputs: im2col + sgemm tile by tile (whole output rows), so a tile's patch matrix
    # is still in the core's cache for its product and tiles spread over the threads. A tile
    # has at least as many columns as the weights have rows (else re-reading the weights per
    # tile costs more than the patch traffic saved) and at least 64K patch elements. Small
    # outputs: one patch matrix, with the product's rows split over the threads.
    plan.per = max(1, max(TILE_COLS, plan.Mg, TILE_ELEMENTS // (plan.Cg * K),
                          TILE_MACS // (plan.Mg * plan.Cg * K)) // plan.ow)
    plan.ntiles = -(-plan.rows // plan.per)
    plan.tiled = plan.ntiles >= 2 * key[2]
    plan.wino = plan.blk = plan.sp = None
    wino_ok = (plan.kind == "im2col" and g.rank == 2 and group == 1
               and tuple(g.kernel) == (3, 3) and tuple(g.strides) == (1, 1)
               and tuple(g.dilations) == (1, 1) and x.dtype == np.float32
               and min(g.out_shape) >= 1)
    m = winograd.choose(C, M, *g.out_shape) if wino_ok else 0
    # a forced Winograd tile (tests, benchmarks) means Winograd or the kinds without it
    if (plan.kind == "im2col" and g.rank == 2 and group == 1 and x.dtype == np.float32
            and winograd.FORCE is None
            and conv_blocked.wanted(C, M, g.kernel, g.out_shape, m)):
        plan.kind = "blocked"
        gd = (*g.kernel, *g.strides, *g.dilations, *g.pads_begin)
        plan.blk = conv_blocked.BlockedPlan(gd, w, x.shape[2:], g.out_shape)
    if (plan.kind == "im2col" and g.rank == 1 and group == 1 and x.dtype == np.float32
            and winograd.FORCE is None and conv_blocked.ENABLED and g.kernel[0] > 1):
        # a 1-D convolution is the 2-D one of a single row: 1.0-1.25x faster than im2col +
        # sgemm, from a speech model's framing layer (1 -> 32 channels, 32 taps, stride 16:
        # 12.3 -> 11.8 us, fixed costs either way) to 80 -> 128 channels over 3000 steps
        plan.kind = "blocked"
        gd = (1, *g.kernel, 1, *g.strides, 1, *g.dilations, 0, *g.pads_begin)
        plan.blk = conv_blocked.BlockedPlan(gd, w.reshape(M, plan.Cg, 1, -1),
                                            (1, *x.shape[2:]), (1, *g.out_shape))
    if (plan.kind in ("im2col", "pointwise", "blocked") and g.rank == 2 and group == 1
            and x.dtype == np.float32 and winograd.FORCE is None
            and conv_smallplane.wanted(C, M, g.kernel, g.out_shape, m)):
        plan.kind = "smallplane"
        gd = (*g.kernel, *g.strides, *g.dilations, *g.pads_begin)
        plan.sp = conv_smallplane.SmallPlanePlan(gd, w, x.shape[2:], g.out_shape)
    if plan.kind == "im2col" and m:
        wp = winograd.WinoPlan(w, g.out_shape, g.pads_begin, m, key[2], x.shape[0])
        if wp.finite():  # else NaN/Inf weights would spread over whole tiles
            plan.kind, plan.wino = "winograd", wp
    if (plan.kind == "im2col" and g.rank == 2 and group == 1 and x.dtype == np.float32
            and conv_direct.wanted(C, M, g.kernel, g.strides, g.out_shape)):
        plan.kind = "direct"
        plan.gd = (*g.kernel, *g.strides, *g.dilations, *g.pads_begin)
        plan.w3 = carr(w.reshape(M * C, *g.kernel))
    if (plan.kind == "im2col" and not plan.tiled and g.rank == 2 and group == 1
            and tuple(g.strides) == (1, 1) and conv_shift.wanted(M)):
        # small stride-1 outputs with few output channels: patch rows as whole shifted runs
        # (``conv_shift``); with more channels the product's extra columns cost more than
        # the cheaper patch matrix saves
        (pt, pl), (pb, pr) = g.pads_begin, g.pads_end
        Hp, Wp = x.shape[2] + pt + pb, x.shape[3] + pl + pr
        plan.kind = "shift"
        plan.sg = (*g.kernel, *g.dilations, pt, pl, Hp, Wp, g.out_shape[0] * Wp)
    if (plan.kind in ("blocked", "smallplane", "im2col") and g.rank == 2 and conv_pointwise.PATCHES
            and tuple(g.kernel) == tuple(g.strides) and tuple(g.dilations) == (1, 1)
            and not any(g.pads) and x.dtype == np.float32 and C > nchw16c_dense.MAX_CHANNELS
            and conv_pointwise.wanted(C * K, M, P)):
        # a patchify convolution (ConvNeXt's 2 x 2 downsampling layers) as a 1x1 convolution
        # of its patches: one strided copy of the input puts each patch's values in a
        # column, then the pixel-vectorised kernel (in the model, 64 -> 96 channels on
        # 28 x 28: 187 -> 135 us; 32 -> 64 on 56 x 56: 188 -> 172). Stems of a few
        # channels stay with the dense kernel (3 -> 32 at 4 x 4: 192 against 203 here)
        plan.kind, plan.blk, plan.sp = "patch_rows", None, None
        plan.patch = tuple(g.kernel)
        plan.pwp = conv_pointwise.pack(plan.w2)
    if (plan.kind == "blocked" and g.rank == 2 and DENSE_PATCHES
            and C <= nchw16c_dense.MAX_CHANNELS and tuple(g.kernel) == tuple(g.strides)
            and g.kernel[0] * g.kernel[1] <= DENSE_MAX_TAPS and tuple(g.dilations) == (1, 1)):
        # a patchify stem (kernel = stride, few input channels: ConvNeXt's 3 -> 32 at 4 x 4)
        # on the channel-blocked dense kernel, 16 outputs a vector, then back to NCHW:
        # 159-197 -> 59-74 us alone (3 -> 96: 266 -> 197; ViT's 16 x 16 taps, 3 -> 192:
        # 725 -> 769, so not there); with a fused epilogue, the register-blocked kernel
        plan.kind, plan.dn = "dense", nchw16c_dense.Dense(w, bias, act)
        plan.gd = (*g.kernel, *g.strides, *g.pads_begin)
    if (plan.kind == "blocked" and g.rank == 2 and PATCH_ROWS
            and tuple(g.kernel) == tuple(g.strides) and tuple(g.dilations) == (1, 1)
            and not any(g.pads) and g.kernel[0] * g.kernel[1] >= PATCH_MIN_TAPS
            and C * g.kernel[0] * g.kernel[1] >= PATCH_MIN_DEPTH):
        # kernel = stride, no padding: each output's patch is kh runs of kw input values per
        # channel, so im2col is one strided copy (no overlap) into a (pixels, C kh kw) matrix
        # and the product reads it transposed; the blocked kernel walked 256 stride phases
        plan.kind, plan.blk, plan.patch = "patches", None, tuple(g.kernel)
    if plan.kind == "blocked" and g.rank == 1 and conv_row.wanted(
            group, M * C * K * g.out_shape[0], x.shape[0]):
        plan.alone = conv_row.row_call(w, b, act[0], plan.params, g.strides, g.dilations,
                                       g.pads_begin, g.pads_end, x.shape, g.out_shape[0])
    elif plan.kind == "blocked":
        plan.alone = conv_blocked.alone_call(plan.blk, b, act[0], plan.params, x.shape, M)
    if plan.kind == "pointwise" and group == 1 and x.dtype == np.float32 \
            and conv_pointwise.wanted(C, M, P):
        plan.pwp = conv_pointwise.pack(plan.w2)
    layer.__dict__["_cpu_conv_plan"] = plan
    return plan


def kept_bytes(layer) -> int:
    """Bytes a Conv layer's plan keeps between calls besides its weights: the phase planes
    of the blocked and small-plane kernels (``conv_blocked.kept_planes``)."""
    plan = layer.__dict__.get("_cpu_conv_plan")
    kept = 0
    for kernel_plan in (getattr(plan, "blk", None), getattr(plan, "sp", None)):
        planes = getattr(kernel_plan, "xf", None)
        if planes is not None:
            kept += planes.nbytes
    return kept
