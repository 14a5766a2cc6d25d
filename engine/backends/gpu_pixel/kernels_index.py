"""Gather, GatherElements, GatherND, ScatterND, Where and TopK.

Indices and conditions arrive as host arrays (this backend keeps non-float tensors on the
host); they are uploaded once as float32 textures holding whole numbers, exact below 2^24.
TopK's indices output is such a texture too: reading it back converts it to int64, and
kernels that need integer inputs as host values decline it (the CPU then reads it back).
"""

from __future__ import annotations

import math

import numpy as np

from engine.backends.gpu_pixel.kernels_elementwise import access_mode
from engine.backends.gpu_pixel.layout import MAX_RANK as RANK
from engine.backends.gpu_pixel.layout import layout_of
from engine.backends.gpu_pixel.recording import raw_host
from engine.backends.gpu_pixel.registry import pixel_kernel
from engine.ops.reduce import topk_params

INDEX = (np.dtype(np.int32), np.dtype(np.int64))
#: largest index a float32 texture holds exactly
EXACT = 1 << 24
#: TopK finds rank r by r + 1 scans of the line; past this k the CPU is faster
TOPK_MAX_K = 64
#: ScatterND compares every output element with every index row
SCATTER_MAX_WORK = 1 << 28
#: a host condition broadcast to at most this many elements is uploaded at the output's
#: shape (once per condition array); larger ones are read with broadcasting per value
WHERE_FULL = 1 << 20
REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}


def float_texture(be, h):
    """``h`` as a float32 texture handle (host integer or bool arrays uploaded once)."""
    if h.tex is not None or be.host_dtype(h) in (None, np.float32):
        return h
    d = h.derived.get("float32")
    if d is None:
        d = h.derived["float32"] = be.as_float32(h)
    return d


def _index_reason(metas, i, what) -> str | None:
    m = metas[i] if i < len(metas) else None
    if m is None:
        return None
    if np.dtype(m.dtype) not in INDEX:
        return f"{what} must be int32 or int64, got {np.dtype(m.dtype).name}"
    if len(m.shape) > RANK:
        return f"{what} has rank {len(m.shape)} (at most {RANK})"
    if all(isinstance(d, int) for d in m.shape) and m.size == 0:
        return f"{what} is empty"
    data = metas[0]
    if data is not None and any(isinstance(d, int) and d > EXACT for d in data.shape):
        return f"a data axis is longer than {EXACT}, the largest index a float32 texture holds"
    return None


def _pad(mapping) -> list[int]:
    """Per padded axis, the padded output axis it copies (-1: none), split into 2 vec4s."""
    m = [-1] * (RANK - len(mapping)) + list(mapping)
    return [m[:4], m[4:] + [0, 0]]


def gather(be, x, idx, out_shape, data_src, idx_src, first, depth, runs):
    ints = _pad(data_src) + _pad(idx_src) + [(first, depth, runs, 0)]
    return be.run("gather", out_shape, [x, float_texture(be, idx)], ints=ints)


def _gather_check(layer, metas):
    return _index_reason(metas, 1, f"{layer.op_type} indices")


@pixel_kernel("Gather", check=_gather_check, tensors=(0,))
def Gather(be, layer, inputs, in_metas, out_metas):
    r, q = len(in_metas[0].shape), len(in_metas[1].shape)
    out = out_metas[0].shape
    a = int(layer.attr("axis", 0)) % r
    if r == 2 and a == 0 and q in (1, 2):  # rows of a table (gather_rows.wgsl)
        ints = [(in_metas[0].shape[0], in_metas[1].shape[-1], q + 1, 0)]
        return [be.run("gather_rows", out, [inputs[0], float_texture(be, inputs[1])],
                       ints=ints)]
    po = RANK - len(out)
    data_src = [po + j if j < a else -1 if j == a else po + j + q - 1 for j in range(r)]
    idx_src = [po + a + j for j in range(q)]
    return [gather(be, inputs[0], inputs[1], out, data_src, idx_src, RANK - r + a, 1, -1)]


@pixel_kernel("GatherElements", check=_gather_check, tensors=(0,))
def GatherElements(be, layer, inputs, in_metas, out_metas):
    r = len(in_metas[0].shape)
    a = int(layer.attr("axis", 0)) % r
    pd = RANK - r
    data_src = [-1 if j == a else pd + j for j in range(r)]
    idx_src = [pd + j for j in range(r)]
    return [gather(be, inputs[0], inputs[1], out_metas[0].shape, data_src, idx_src, pd + a, 1,
                   -1)]


@pixel_kernel("GatherND", check=_gather_check, tensors=(0,))
def GatherND(be, layer, inputs, in_metas, out_metas):
    r, q = len(in_metas[0].shape), len(in_metas[1].shape)
    b, t = int(layer.attr("batch_dims", 0)), in_metas[1].shape[-1]
    out = out_metas[0].shape
    po = RANK - len(out)
    data_src = [po + j if j < b else -1 if j < b + t else po + q - 1 + j - b - t
                for j in range(r)]
    idx_src = [po + j for j in range(q - 1)] + [-1]
    return [gather(be, inputs[0], inputs[1], out, data_src, idx_src, RANK - r + b, t,
                   RANK - 1)]


def _scatter_nd_check(layer, metas):
    reduction = layer.attr("reduction", "none")
    if reduction not in REDUCTIONS:
        return f"ScatterND reduction {reduction!r} is not supported"
    why = _index_reason(metas, 1, "ScatterND indices")
    if why is not None:
        return why
    data, idx = metas[0], metas[1]
    if data is None or idx is None or not all(isinstance(d, int) for d in idx.shape):
        return None
    if idx.shape[-1] > len(data.shape):
        return f"ScatterND index depth {idx.shape[-1]} exceeds the data rank {len(data.shape)}"
    if all(isinstance(d, int) for d in data.shape):
        work = idx.size * data.size
        if work > SCATTER_MAX_WORK:
            return (f"ScatterND of {idx.size // max(idx.shape[-1], 1)} index rows into "
                    f"{data.size} elements is too much work for the pixel kernel, which "
                    "compares every element with every row")
    return None


@pixel_kernel("ScatterND", check=_scatter_nd_check, tensors=(0, 2))
def ScatterND(be, layer, inputs, in_metas, out_metas):
    r, q = len(in_metas[0].shape), len(in_metas[1].shape)
    t = in_metas[1].shape[-1]
    ru = q - 1 + r - t
    rows = int(math.prod(in_metas[1].shape[:-1]))
    src = [RANK - q + j if j < q - 1 else 10 + RANK - r + t + j - q + 1 for j in range(ru)]
    src = [-1] * (RANK - ru) + src
    ints = [(rows, t, REDUCTIONS[layer.attr("reduction", "none")], RANK - r), src[:4],
            src[4:] + [0, 0]]
    return [be.run("scatter_nd", out_metas[0].shape,
                   [inputs[0], float_texture(be, inputs[1]), inputs[2]], ints=ints)]


def _where_check(layer, metas):
    c = metas[0]
    if c is not None and np.dtype(c.dtype) != np.dtype(bool):
        return f"Where's condition must be bool, got {np.dtype(c.dtype).name}"
    if c is not None and len(c.shape) > RANK:
        return f"Where's condition has rank {len(c.shape)} (at most {RANK})"
    return None


@pixel_kernel("Where", check=_where_check, tensors=(1, 2))
def Where(be, layer, inputs, in_metas, out_metas):
    out = tuple(out_metas[0].shape)
    cond = inputs[0]
    host = raw_host(cond)
    # a mask fixed by the shapes (a causal mask from shape ops) is broadcast on the host once
    # to the output's shape, then read a texel at a time like the other operands; one that
    # depends on input values (a recording names its source: ``feed``) is read per value,
    # so that a replay writes it from its source as before
    if host is not None and getattr(cond, "feed", None) is None \
            and tuple(cond.shape) != out and math.prod(out) <= WHERE_FULL:
        full = cond.derived.get(("broadcast", out))
        if full is None:
            full = cond.derived[("broadcast", out)] = be.upload(
                np.broadcast_to(np.asarray(host) != 0, out).astype(np.float32))
        cond = full
    picked = [access_mode(be, h, out) for h in (float_texture(be, cond), *inputs[1:3])]
    lay = layout_of(out)
    return [be.run("where", out, [t for _, t in picked],
                   PADDED=str(lay.dims[lay.axis] % 4 != 0).lower(),
                   **{f"M{k}": m for k, (m, _) in enumerate(picked)})]


def _topk_check(layer, metas):
    x = metas[0]
    if x is None or not all(isinstance(d, int) for d in x.shape):
        return None
    if len(layer.inputs) > 1 and layer.inputs[1] and (metas[1] is None or metas[1].value is None):
        return None  # k is CPU-forced: known when the layer is scheduled
    if not x.shape:
        return "TopK of a scalar is invalid"
    try:
        k, axis = topk_params(layer, metas)
    except ValueError as exc:
        return str(exc)
    if k > TOPK_MAX_K:
        return (f"TopK with k={k} is not supported (the pixel kernel selects at most "
                f"{TOPK_MAX_K} elements per line)")
    if x.shape[axis] > EXACT:
        return f"TopK over {x.shape[axis]} elements exceeds the {EXACT} indices floats hold"
    if k == 0:
        return "TopK with k=0 has empty outputs, which textures do not hold"
    return None


@pixel_kernel("TopK", check=_topk_check, tensors=(0,), max_outputs=2)
def TopK(be, layer, inputs, in_metas, out_metas):
    rank = len(in_metas[0].shape)
    k, axis = topk_params(layer, in_metas)
    largest = int(layer.attr("largest", 1))
    outs = []
    for which, meta in enumerate(out_metas):
        ints = [(axis + RANK - rank, largest, which, 0)]
        outs.append(be.run("topk", meta.shape, inputs[:1], ints=ints))
    return outs
