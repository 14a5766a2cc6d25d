"""Pooling (MaxPool, AveragePool, LpPool; 1-D and 2-D) and Resize (nearest, bilinear)."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.backend import pack
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, gpu_kernel
from engine.backends.gpu_compute.util import size_of

MODES = {"MaxPool": 0, "AveragePool": 1, "LpPool": 2}


def pool_geometry(layer, x_shape, out_shape) -> dict:
    """Window, strides, dilations, begin and end pads of a 1-D/2-D pool, as 2-D."""
    nsp = len(x_shape) - 2
    kernel = list(layer.attr("kernel_shape"))
    strides = list(layer.attr("strides") or [1] * nsp)
    dil = list(layer.attr("dilations") or [1] * nsp)
    pads = list(layer.attr("pads") or [0] * (2 * nsp))
    auto = layer.attr("auto_pad", "NOTSET")
    begin, end = pads[:nsp], pads[nsp:]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(nsp):
            span = (kernel[i] - 1) * dil[i] + 1
            total = max(0, (out_shape[2 + i] - 1) * strides[i] + span - x_shape[2 + i])
            b = total // 2 if auto == "SAME_UPPER" else total - total // 2
            begin.append(b)
            end.append(total - b)
    elif auto == "VALID":
        begin, end = [0] * nsp, [0] * nsp
    if nsp == 1:
        kernel, strides, dil = [1] + kernel, [1] + strides, [1] + dil
        begin, end = [0] + begin, [0] + end
    return {"k": kernel, "s": strides, "d": dil, "b": begin, "e": end}


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
        geo = pool_geometry(layer, shape, out.shape)
        y = ctx.tensor(out)
        n = size_of(out.shape)
        if n:
            H, W = (1, shape[2]) if len(shape) == 3 else shape[2:]
            OH, OW = (1, out.shape[2]) if len(shape) == 3 else out.shape[2:]
            params = pack(shape[1], H, W, n, OH, OW, *geo["k"], *geo["s"], *geo["b"],
                          *geo["d"], MODES[op], int(layer.attr("count_include_pad", 0)),
                          *geo["e"], float(layer.attr("p", 2)), 0)
            ctx.dispatch(Program.of("pool2d.wgsl"), [ins[0], y], params, -(-n // 256))
        return [y]

    kernel.__name__ = op


for _op in MODES:
    _register_pool(_op)

COORD = {"half_pixel": 0, "pytorch_half_pixel": 1, "align_corners": 2, "asymmetric": 3,
         "tf_half_pixel_for_nearest": 4, "half_pixel_symmetric": 5}
NEAREST = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3}


def _resize_scales(layer, metas, out_shape=None):
    """Scales of the last two dims, or a reason string."""
    x = metas[0]
    if layer.opset and layer.opset < 11:
        sm = metas[1] if len(metas) > 1 else None
        if sm is None or sm.value is None:
            return "Resize scales computed on the device are not supported"
        scales = [float(v) for v in np.asarray(sm.value).reshape(-1)]
    else:
        sm = metas[2] if len(metas) > 2 else None
        zm = metas[3] if len(metas) > 3 else None
        if sm is not None and sm.value is not None and sm.value.size:
            scales = [float(v) for v in np.asarray(sm.value).reshape(-1)]
        elif zm is not None and zm.value is not None:
            sizes = [int(v) for v in np.asarray(zm.value).reshape(-1)]
            if len(sizes) != len(x.shape):
                return "Resize with axes runs on the CPU"
            scales = [o / i if i else 1.0 for o, i in zip(sizes, x.shape)]
        else:
            return "Resize scales computed on the device are not supported"
    if len(scales) != len(x.shape) or any(s != 1.0 for s in scales[:-2]):
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


@gpu_kernel("Resize", 11, dtypes=F32, check=_resize_check)
def Resize(ctx, layer, ins, metas, out_metas):
    shape, out = metas[0].shape, out_metas[0]
    sh, sw = _resize_scales(layer, metas)
    y = ctx.tensor(out)
    n = size_of(out.shape)
    if n:
        coord = COORD[layer.attr("coordinate_transformation_mode", "half_pixel")]
        params = pack(n, shape[-2], shape[-1], out.shape[-2], out.shape[-1],
                      int(layer.attr("mode", "nearest") == "linear"), coord,
                      NEAREST[layer.attr("nearest_mode", "round_prefer_floor")], float(sh),
                      float(sw), 0, 0)
        ctx.dispatch(Program.of("resize.wgsl"), [ins[0], y], params, -(-n // 256))
    return [y]
