"""Pad, Gather, GatherElements, Cast, Shape, Size, ConstantOfShape."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.kernels_elementwise import WGSL_TYPE, run_unary
from engine.backends.gpu_compute.memory import words_per_element
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import gpu_kernel
from engine.backends.gpu_compute.util import arr8, attr_axis, contiguous_strides, size_of
from engine.dtypes import onnx_dtype

WG = 256
MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}
INDEX = (np.dtype(np.int32), np.dtype(np.int64))


def value_words(value, dtype) -> tuple[int, int]:
    """The one or two 32-bit words holding scalar ``value`` as ``dtype``."""
    dtype = np.dtype(dtype)
    raw = np.asarray(value).astype(np.uint32 if dtype == np.dtype(bool) else dtype).reshape(1)
    words = raw.view(np.uint32)
    return int(words[0]), int(words[1]) if len(words) > 1 else 0


def fill(ctx, y, meta, value) -> None:
    n = size_of(meta.shape)
    if n:
        v0, v1 = value_words(value, meta.dtype)
        ctx.dispatch(Program.of("fill.wgsl"), [y],
                     pack(n, words_per_element(meta.dtype), v0, v1), -(-n // WG))


def _pad_args(layer, metas):
    rank = len(metas[0].shape)
    if layer.opset and layer.opset < 11:
        pads, value, axes = layer.attr("pads"), layer.attr("value", 0.0), None
    else:
        pm = metas[1]
        if pm is None or pm.value is None:
            return None
        pads = [int(v) for v in np.asarray(pm.value).reshape(-1)]
        vm = metas[2] if len(metas) > 2 else None
        if vm is not None and vm.value is None:
            return None
        value = 0 if vm is None or vm.value.size == 0 else np.asarray(vm.value).reshape(-1)[0]
        am = metas[3] if len(metas) > 3 else None
        if am is not None and am.value is None:
            return None
        axes = None if am is None else [int(a) for a in np.asarray(am.value).reshape(-1)]
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    before, after = [0] * rank, [0] * rank
    k = len(axes)
    for j, a in enumerate(axes):
        before[a], after[a] = pads[j], pads[j + k]
    return before, after, value


def _pad_check(layer, metas):
    if metas[0] is None:
        return None
    if _pad_args(layer, metas) is None:
        return "Pad amounts computed on the device are not supported"
    mode = layer.attr("mode", "constant")
    if mode not in MODES:
        return f"Pad mode {mode!r} is not supported on the GPU"
    return None


@gpu_kernel("Pad", dtypes=None, inputs=(0,), check=_pad_check)
def Pad(ctx, layer, ins, metas, out_metas):
    before, _, value = _pad_args(layer, metas)
    out = out_metas[0]
    y = ctx.tensor(out)
    n = size_of(out.shape)
    if not n:
        return [y]
    shape = metas[0].shape
    mode = MODES[layer.attr("mode", "constant")]
    if size_of(shape) == 0:
        mode = 0
    v0, v1 = value_words(value, out.dtype)
    params = pack(n, len(shape), words_per_element(out.dtype), mode, v0, v1, 0, 0,
                  *arr8(out.shape), *arr8(shape), *arr8(before),
                  *arr8(contiguous_strides(shape)))
    ctx.dispatch(Program.of("pad.wgsl"), [ins[0], y], params, -(-n // WG))
    return [y]


def _gather_check(layer, metas):
    if len(metas) > 1 and metas[1] is not None and np.dtype(metas[1].dtype) not in INDEX:
        return "Gather indices must be int32 or int64"
    return None


@gpu_kernel("Gather", dtypes=None, inputs=None, check=_gather_check)
def Gather(ctx, layer, ins, metas, out_metas):
    data, ind = metas[0], metas[1]
    axis = attr_axis(layer, len(data.shape))
    out = out_metas[0]
    y = ctx.tensor(out)
    n = size_of(out.shape)
    if n:
        inner = size_of(data.shape[axis + 1:])
        params = pack(n, max(inner, 1), max(size_of(ind.shape), 1), data.shape[axis],
                      words_per_element(data.dtype), words_per_element(ind.dtype), 0, 0)
        ctx.dispatch(Program.of("gather.wgsl"), [ins[0], ins[1], y], params, -(-n // WG))
    return [y]


@gpu_kernel("GatherElements", dtypes=None, inputs=None, check=_gather_check)
def GatherElements(ctx, layer, ins, metas, out_metas):
    data, ind = metas[0], metas[1]
    axis = attr_axis(layer, len(data.shape))
    out = out_metas[0]
    y = ctx.tensor(out)
    n = size_of(out.shape)
    if n:
        params = pack(n, len(ind.shape), axis, words_per_element(data.dtype),
                      words_per_element(ind.dtype), data.shape[axis], 0, 0, *arr8(ind.shape),
                      *arr8(contiguous_strides(data.shape)))
        ctx.dispatch(Program.of("gather_elements.wgsl"), [ins[0], ins[1], y], params,
                     -(-n // WG))
    return [y]


#: (source kind, target kind) pairs with a function op_Cast_<from>_<to> in compute/cast.wgsl
CAST = {(s, d) for s in ("f32", "i32", "u32", "bool", "i64")
        for d in ("f32", "i32", "u32", "bool", "i64") if s != d}
#: element type of each kind in the unary shader (I64: compute/int64.wgsl names vec2<u32>)
KIND_WGSL = {"f32": "f32", "i32": "i32", "u32": "u32", "bool": "u32", "i64": "I64"}


def _kind(dtype) -> str:
    name = np.dtype(dtype).name
    if name == "int64":
        return "i64"
    return "bool" if name == "bool" else WGSL_TYPE.get(name, name)


def _cast_check(layer, metas):
    if metas[0] is None:
        return None
    src = np.dtype(metas[0].dtype)
    dst = _cast_target(layer, metas)
    if dst is None:
        return None
    if src == dst:
        return None
    if (_kind(src), _kind(dst)) not in CAST:
        return f"Cast {src} -> {dst} runs on the CPU"
    return None


def _cast_target(layer, metas):
    if layer.op_type == "CastLike":
        return None if metas[1] is None else np.dtype(metas[1].dtype)
    return onnx_dtype(int(layer.attr("to")))


def _cast(ctx, layer, ins, metas, out_metas):
    src, dst = np.dtype(metas[0].dtype), np.dtype(out_metas[0].dtype)
    if src == dst:
        return [ctx.view(ins[0], out_metas[0].shape)]
    s, d = _kind(src), _kind(dst)
    return [run_unary(ctx, ins[0], out_metas[0], f"Cast_{s}_{d}", KIND_WGSL[s], KIND_WGSL[d])]


gpu_kernel("Cast", dtypes=None, inputs=(0,), check=_cast_check)(_cast)
gpu_kernel("CastLike", dtypes=None, inputs=(0,), check=_cast_check)(_cast)


@gpu_kernel("Shape", dtypes=None, inputs=(0,))
def Shape(ctx, layer, ins, metas, out_metas):
    rank = len(metas[0].shape)
    start, end = (int(v) for v in (layer.attr("start", 0), layer.attr("end", rank)))
    start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
    return [ctx.upload(np.array(metas[0].shape[start:end], dtype=np.int64))]


@gpu_kernel("Size", dtypes=None, inputs=(0,))
def Size(ctx, layer, ins, metas, out_metas):
    return [ctx.upload(np.array(size_of(metas[0].shape), dtype=np.int64))]


def _cos_check(layer, metas):
    value = layer.attr("value")
    if value is not None and words_per_element(np.asarray(value).dtype) is None:
        return f"ConstantOfShape of {np.asarray(value).dtype} runs on the CPU"
    return None


@gpu_kernel("ConstantOfShape", dtypes=None, inputs=(), check=_cos_check)
def ConstantOfShape(ctx, layer, ins, metas, out_metas):
    out = out_metas[0]
    value = layer.attr("value")
    y = ctx.tensor(out)
    fill(ctx, y, out, 0.0 if value is None else np.asarray(value).reshape(-1)[0])
    return [y]
