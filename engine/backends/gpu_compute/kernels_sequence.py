"""Range, Trilu and CumSum: index-generated and running-sum kernels."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.kernels_elementwise import WGSL_TYPE
from engine.backends.gpu_compute.memory import words_per_element
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import gpu_kernel
from engine.backends.gpu_compute.util import size_of
from engine.ops.tensor_ops import range_length

WG = 256
I32_MAX = 2**31 - 1
RANGE_DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))
CUMSUM_DTYPES = (np.dtype(np.float32), np.dtype(np.int32))


def _scalar(meta):
    return np.asarray(meta.value).reshape(-1)[0]


def _range_check(layer, metas):
    if any(m is None for m in metas[:3]):
        return None
    dtype = np.dtype(metas[0].dtype)
    if dtype not in RANGE_DTYPES:
        return f"Range of {dtype.name} runs on the CPU (the GPU kernel makes float32/int32/int64)"
    if any(m.value is None for m in metas[:3]):
        return None  # CPU-forced inputs: their values are known when the layer is scheduled
    start, limit, delta = (_scalar(m) for m in metas[:3])
    if delta == 0:
        return "Range with delta 0 is invalid"
    if dtype.kind == "i":
        n = range_length(start, limit, delta)
        last = int(start) + (n - 1) * int(delta) if n else int(start)
        if max(abs(int(start)), abs(last)) > I32_MAX:
            return (f"Range from {int(start)} to {last} exceeds the 32-bit integers the GPU "
                    "kernel computes with")
    return None


@gpu_kernel("Range", dtypes=None, inputs=(), check=_range_check)
def Range(ctx, layer, ins, metas, out_metas):
    out = out_metas[0]
    y = ctx.tensor(out)
    n = size_of(out.shape)
    if n:
        start, delta = _scalar(metas[0]), _scalar(metas[2])
        is_int = int(np.dtype(out.dtype).kind == "i")
        ints = (int(start), int(delta)) if is_int else (0, 0)
        floats = (0.0, 0.0) if is_int else (float(start), float(delta))
        params = pack(n, words_per_element(out.dtype), is_int, *ints, *floats, 0)
        ctx.dispatch(Program.of("range.wgsl"), [y], params, -(-n // WG))
    return [y]


def _trilu_k(metas) -> int | None:
    km = metas[1] if len(metas) > 1 else None
    if km is None:
        return 0
    if km.value is None:
        return None
    return int(_scalar(km))


def _trilu_check(layer, metas):
    x = metas[0]
    if x is not None and len(x.shape) < 2:
        return f"Trilu needs a tensor of rank 2 or more, got rank {len(x.shape)}"
    return None


@gpu_kernel("Trilu", dtypes=None, inputs=(0,), check=_trilu_check)
def Trilu(ctx, layer, ins, metas, out_metas):
    out = out_metas[0]
    y = ctx.tensor(out)
    n = size_of(out.shape)
    if n:
        rows, cols = out.shape[-2:]
        k = max(min(_trilu_k(metas), cols + 1), -rows - 1)  # clamp: beyond it nothing changes
        params = pack(n, rows, cols, k, int(layer.attr("upper", 1)),
                      words_per_element(out.dtype), 0, 0)
        ctx.dispatch(Program.of("trilu.wgsl"), [ins[0], y], params, -(-n // WG))
    return [y]


def _cumsum_axis(metas) -> int | None:
    am = metas[1] if len(metas) > 1 else None
    if am is None or am.value is None:
        return None
    axis = int(_scalar(am))
    rank = len(metas[0].shape)
    return axis + rank if axis < 0 else axis


def _cumsum_check(layer, metas):
    x = metas[0]
    if x is not None and len(x.shape) == 0:
        return "CumSum of a scalar runs on the CPU"
    return None


@gpu_kernel("CumSum", dtypes=CUMSUM_DTYPES, inputs=(0,), check=_cumsum_check)
def CumSum(ctx, layer, ins, metas, out_metas):
    out = out_metas[0]
    y = ctx.tensor(out)
    shape = metas[0].shape
    if size_of(shape):
        axis = _cumsum_axis(metas)
        inner = size_of(shape[axis + 1:])
        lines = size_of(shape) // shape[axis]
        params = pack(lines, shape[axis], max(inner, 1), int(layer.attr("reverse", 0)),
                      int(layer.attr("exclusive", 0)), 0, 0, 0)
        t = WGSL_TYPE[np.dtype(out.dtype).name]
        ctx.dispatch(Program.of("cumsum.wgsl", T=t), [ins[0], y], params, -(-lines // 64))
    return [y]
