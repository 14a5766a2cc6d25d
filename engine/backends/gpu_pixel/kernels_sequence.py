"""Range, Trilu and CumSum (shaders/pixel/sequence.wgsl).

An integer Range is made on the host: this backend keeps non-float tensors as host arrays
(see the package docstring), and Range's inputs are known on the CPU anyway.
"""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_pixel.handles import PixelTensor
from engine.backends.gpu_pixel.layout import MAX_RANK
from engine.backends.gpu_pixel.registry import pixel_kernel

RANGE_DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))


def _scalar(meta):
    return np.asarray(meta.value).reshape(-1)[0]


def _range_check(layer, metas):
    m = metas[0] if metas else None
    if m is not None and np.dtype(m.dtype) not in RANGE_DTYPES:
        return f"Range of {np.dtype(m.dtype).name} is not supported (float32, int32, int64 are)"
    if all(x is not None and x.value is not None for x in metas[:3]) and _scalar(metas[2]) == 0:
        return "Range with delta 0 is invalid"
    return None


@pixel_kernel("Range", check=_range_check, tensors=())
def Range(be, layer, inputs, in_metas, out_metas):
    out = out_metas[0]
    start, delta = _scalar(in_metas[0]), _scalar(in_metas[2])
    if np.dtype(out.dtype) != np.float32:
        n = out.shape[0]
        host = (start + np.arange(n, dtype=np.int64) * delta).astype(out.dtype)
        return [PixelTensor(None, None, host)]
    return [be.run("sequence", out.shape, [], n_tex=1, floats=[(float(start), float(delta))],
                   OP="Range")]


def _trilu_check(layer, metas):
    x = metas[0]
    if x is not None and len(x.shape) < 2:
        return f"Trilu needs a tensor of rank 2 or more, got rank {len(x.shape)}"
    return None  # k is CPU-forced (Op.cpu_inputs): known when the layer is scheduled


@pixel_kernel("Trilu", check=_trilu_check, tensors=(0,))
def Trilu(be, layer, inputs, in_metas, out_metas):
    rows, cols = in_metas[0].shape[-2:]
    k = 0
    if len(in_metas) > 1 and in_metas[1] is not None:
        k = int(_scalar(in_metas[1]))
    k = max(min(k, cols + 1), -rows - 1)  # clamp: beyond it nothing changes
    return [be.run("sequence", out_metas[0].shape, inputs[:1],
                   ints=[(k, int(layer.attr("upper", 1)))], OP="Trilu")]


def _cumsum_check(layer, metas):
    x = metas[0]
    if x is not None and len(x.shape) == 0:
        return "CumSum of a scalar is not supported"
    return None  # the axis is CPU-forced (Op.cpu_inputs): known when the layer is scheduled


@pixel_kernel("CumSum", check=_cumsum_check, tensors=(0,))
def CumSum(be, layer, inputs, in_metas, out_metas):
    rank = len(in_metas[0].shape)
    axis = int(_scalar(in_metas[1])) % rank
    ints = [(axis + MAX_RANK - rank, int(layer.attr("exclusive", 0)),
             int(layer.attr("reverse", 0)))]
    return [be.run("sequence", out_metas[0].shape, inputs[:1], ints=ints, OP="CumSum")]
