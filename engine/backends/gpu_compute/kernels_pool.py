"""Pooling (MaxPool, AveragePool, LpPool; 1-D and 2-D) and Resize (nearest, bilinear)."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.encoding import MAX_GROUPS, pack
from engine.backends.gpu_compute.kernels_movement import strided_copy
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, gpu_kernel
from engine.backends.gpu_compute.util import size_of
from engine.ops.conv_pool import conv_geometry
from engine.ops.resize import axis_weights, resize_plan, source_coords

MODES = {"MaxPool": 0, "AveragePool": 1, "LpPool": 2}


def _pool_check(layer, metas):
    x = metas[0]
    if layer.op_type == "MaxPool" and len([o for o in layer.outputs if o]) > 1:
        return "MaxPool's Indices output is computed on the CPU"
    if x is not None and len(x.shape) not in (3, 4):
        return f"{len(x.shape) - 2}-D pooling runs on the CPU (the GPU does 1-D and 2-D)"
    return None


def _register_pool(op):
    @gpu_kernel(op, dtypes=F32, check=_pool_check)
    def kernel(ctx, layer, ins, metas, out_metas):
        shape, out = metas[0].shape, out_metas[0]
        geo = conv_geometry(layer, shape).as_2d()
        y = ctx.tensor(out)
        n = size_of(out.shape)
        if n:
            H, W = (1, shape[2]) if len(shape) == 3 else shape[2:]
            OH, OW = (1, out.shape[2]) if len(shape) == 3 else out.shape[2:]
            planes = shape[0] * shape[1]
            rows = op != "LpPool" and geo.dilations == (1, 1) and planes <= MAX_GROUPS
            runs = -(-OW // 8)
            params = pack(shape[1], H, W, runs if rows else n, OH, OW, *geo.kernel,
                          *geo.strides, *geo.pads_begin, *geo.dilations, MODES[op],
                          int(layer.attr("count_include_pad", 0)), *geo.pads_end,
                          float(layer.attr("p", 2)), 0)
            if rows:  # 8 outputs along a row per invocation, window and strides specialised
                (kh, kw), (sh, sw) = geo.kernel, geo.strides
                ctx.dispatch(Program.of("pool_rows.wgsl", KH=kh, KW=kw, SH=sh, SW=sw,
                                        MODE=MODES[op]),
                             [ins[0], y], params, (-(-runs * OH // 64), planes, 1))
            else:
                ctx.dispatch(Program.of("pool2d.wgsl"), [ins[0], y], params, -(-n // 256))
        return [y]

    kernel.__name__ = op


for _op in MODES:
    _register_pool(_op)

COORD = {"half_pixel": 0, "pytorch_half_pixel": 1, "align_corners": 2, "asymmetric": 3,
         "tf_half_pixel_for_nearest": 4, "half_pixel_symmetric": 5}
NEAREST = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3}


def _resize_scales(layer, metas):
    """Scales of the last two dims (from the shared ``resize_plan``), or a reason string."""
    metas = list(metas)
    if not (layer.opset and layer.opset < 11) and len(metas) > 1:
        metas[1] = None  # roi: only tf_crop_and_resize reads it, and that runs on the CPU
    if any(m is not None and m.value is None for m in metas[1:]):
        return "Resize scales computed on the device are not supported"
    try:
        scales = resize_plan(layer, metas).scales
    except ValueError as e:
        return f"Resize runs on the CPU: {e}"
    if any(s != 1.0 for s in scales[:-2]):
        return "Resize of dims other than the two innermost runs on the CPU"
    return scales[-2:]


def _resize_check(layer, metas):
    if metas[0] is None:
        return None
    mode = layer.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        return f"Resize mode {mode!r} runs on the CPU"
    if layer.attr("coordinate_transformation_mode", "half_pixel") not in COORD:
        return "this coordinate transformation runs on the CPU"
    if layer.attr("nearest_mode", "round_prefer_floor") not in NEAREST:
        return "this nearest mode runs on the CPU"
    if layer.attr("antialias", 0) or layer.attr("axes") or \
            layer.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        return "Resize with antialias, axes or aspect-ratio policy runs on the CPU"
    if len(metas[0].shape) < 2:
        return "Resize of a 1-D tensor runs on the CPU"
    scales = _resize_scales(layer, metas)
    return scales if isinstance(scales, str) else None


def _nearest_indices(layer, n_in: int, n_out: int, scale: float) -> np.ndarray:
    """Source index of each output index of a nearest Resize along one axis, from the
    sampling geometry the CPU backend shares (so exactly the reference's)."""
    mode = layer.attr("coordinate_transformation_mode", "half_pixel")
    if mode == "tf_half_pixel_for_nearest":
        mode = "tf_half_pixel_for_nn"
    coords = source_coords(mode, n_out, n_in, float(scale), (0.0, 1.0))
    return axis_weights(coords, n_in, float(scale), layer).argmax(axis=1)


def _repeats(layer, shape, out_shape, scales) -> bool:
    """Whether a nearest Resize maps output index o to input o // f along both innermost
    dims (integer factors f; e.g. half_pixel with round_prefer_floor), checked on the host
    with the shared sampling geometry."""
    if layer.attr("mode", "nearest") != "nearest" or len(shape) < 2:
        return False
    for n_in, n_out, scale in zip(shape[-2:], out_shape[-2:], scales, strict=True):
        if not n_in or n_out % n_in:
            return False
        idx = _nearest_indices(layer, n_in, n_out, scale)
        if not np.array_equal(idx, np.arange(n_out) // (n_out // n_in)):
            return False
    return True


@gpu_kernel("Resize", 11, dtypes=F32, check=_resize_check)
def Resize(ctx, layer, ins, metas, out_metas):
    shape, out = metas[0].shape, out_metas[0]
    sh, sw = _resize_scales(layer, metas)
    y = ctx.tensor(out)
    n = size_of(out.shape)
    if n and _repeats(layer, shape, out.shape, (sh, sw)):
        # every input pixel becomes a block of fh x fw copies: one strided copy, in runs
        # along the input rows (no coordinate arithmetic per output)
        H, W, OH, OW = shape[-2], shape[-1], out.shape[-2], out.shape[-1]
        fh, fw = OH // H, OW // W
        strided_copy(ctx, ins[0], y, [n // (OH * OW), H, fh, fw, W], [H * W, W, 0, 0, 1],
                     [OH * OW, fh * OW, OW, 1, fw])
        return [y]
    if n and layer.attr("mode", "nearest") == "nearest":
        # source indices from the host: a coordinate on a rounding boundary must not move
        # with the GPU's division (NVIDIA's Vulkan driver divides up to 2 ulp off)
        H, W, OH, OW = shape[-2], shape[-1], out.shape[-2], out.shape[-1]
        table = ctx.upload(np.concatenate([_nearest_indices(layer, H, OH, sh),
                                           _nearest_indices(layer, W, OW, sw)]).astype(np.int32))
        ctx.dispatch(Program.of("resize_nearest.wgsl"), [ins[0], table, y],
                     pack(n, H, W, OH, OW, 0, 0, 0), -(-n // 256))
        ctx.free(table)
        return [y]
    if n:
        coord = COORD[layer.attr("coordinate_transformation_mode", "half_pixel")]
        params = pack(n, shape[-2], shape[-1], out.shape[-2], out.shape[-1], 0, coord, 0,
                      float(sh), float(sw), 0, 0)
        ctx.dispatch(Program.of("resize.wgsl"), [ins[0], y], params, -(-n // 256))
    return [y]
