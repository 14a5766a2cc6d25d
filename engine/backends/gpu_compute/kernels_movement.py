"""Data movement as strided copies: Transpose, Slice, Concat, Split, Expand, Tile,
DepthToSpace/SpaceToDepth. They move 32-bit words, so every dtype the GPU holds works
(64-bit ones move two words per element)."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.memory import words_per_element
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import gpu_kernel
from engine.backends.gpu_compute.util import (
    arr8,
    attr_axis,
    broadcast_strides,
    contiguous_strides,
    size_of,
    whole16,
)

WG = 256
ANY = {"dtypes": None, "inputs": (0,)}


def strided_copy(ctx, src, dst, shape, in_strides, out_strides=None, in_base=0, out_base=0,
                 mods=None) -> None:
    """dst[out_base + idx . out_strides] = src[in_base + (idx % mods) . in_strides]."""
    n = size_of(shape)
    if not n:
        return
    shape, in_strides = list(shape), list(in_strides)
    out_strides = contiguous_strides(shape) if out_strides is None else list(out_strides)
    mods = shape if mods is None else list(mods)
    shape, in_strides, out_strides, mods = _collapse(shape, in_strides, out_strides, mods)
    words = words_per_element(dst.dtype) or 1
    wide = words == 1 and _quads(shape, in_strides, out_strides, mods, in_base, out_base) \
        and whole16(src) and whole16(dst)
    if wide:  # move vec4s: every run, stride and base in units of 4 words
        shape = shape[:-1] + [shape[-1] // 4]
        mods = mods[:-1] + [mods[-1] // 4]
        in_strides = [s // 4 for s in in_strides[:-1]] + [1]
        out_strides = [s // 4 for s in out_strides[:-1]] + [1]
        in_base, out_base, n = in_base // 4, out_base // 4, n // 4
    inner = shape[-1]
    if ctx.copy_strategy == "elements":
        params = pack(n, len(shape), in_base, out_base, inner, 1, 0, 0, *arr8(shape),
                      *arr8(in_strides), *arr8(out_strides), *arr8(mods))
        ctx.dispatch(Program.of("copy_elem.wgsl", W=words, T="quad" if wide else "word"),
                     [src, dst], params, -(-n // 64))
        return
    chunks = -(-inner // 64)
    runs = n // inner * chunks
    params = pack(runs, len(shape), in_base, out_base, inner, chunks, 0, 0, *arr8(shape),
                  *arr8(in_strides), *arr8(out_strides), *arr8(mods))
    ctx.dispatch(Program.of("copy.wgsl", W=words, T="quad" if wide else "word"),
                 [src, dst], params, -(-runs // 64))


def _quads(shape, si, so, mods, in_base, out_base) -> bool:
    """Whether a collapsed copy moves whole aligned groups of 4 words: a contiguous innermost
    run of a multiple of 4 (not wrapped), other strides and both bases multiples of 4."""
    return (shape[-1] % 4 == 0 and si[-1] == 1 and so[-1] == 1 and mods[-1] == shape[-1]
            and all(s % 4 == 0 for s in si[:-1] + so[:-1]) and in_base % 4 == 0
            and out_base % 4 == 0)


def _collapse(shape, si, so, mods):
    """Merge neighbouring dims that are contiguous in both tensors (fewer index steps)."""
    out = [[shape[0], si[0], so[0], mods[0]]] if shape else []
    for d in range(1, len(shape)):
        prev = out[-1]
        plain = prev[3] == prev[0] and mods[d] == shape[d]
        if plain and prev[1] == si[d] * shape[d] and prev[2] == so[d] * shape[d]:
            prev[0] *= shape[d]
            prev[1], prev[2] = si[d], so[d]
            prev[3] = prev[0]
        elif shape[d] == 1:
            continue
        else:
            out.append([shape[d], si[d], so[d], mods[d]])
    if not out:
        return [1], [0], [0], [1]
    return [list(col) for col in zip(*out)]


#: batched 2-D transposes (NCHW <-> NHWC, K -> K^T) as 4 x 4 blocks (False: strided copies)
BLOCK_TRANSPOSE = True


def transpose(ctx, x, shape, perm, out_meta):
    y = ctx.tensor(out_meta)
    strides = contiguous_strides(shape)
    out_shape, in_strides = [shape[p] for p in perm], [strides[p] for p in perm]
    if not _block_transpose(ctx, x, y, out_shape, in_strides):
        strided_copy(ctx, x, y, out_shape, in_strides)
    return y


def _block_transpose(ctx, x, y, out_shape, in_strides) -> bool:
    """y[b, c, r] = x[b, r, c] with R and C multiples of 4, in 4 x 4 blocks
    (transpose4.wgsl), when the copy is such a transpose of one-word elements."""
    if not BLOCK_TRANSPOSE or words_per_element(y.dtype) != 1 or not (whole16(x) and
                                                                     whole16(y)):
        return False
    n = size_of(out_shape)
    dims, si, so, _ = _collapse(list(out_shape), list(in_strides),
                                contiguous_strides(list(out_shape)), list(out_shape))
    if len(dims) == 2:
        dims, si, so = [1] + dims, [n] + si, [n] + so
    if len(dims) != 3 or n == 0:
        return False
    _, C, R = dims
    if si != [R * C, 1, C] or so != [R * C, R, 1] or R % 4 or C % 4:
        return False
    blocks = n // 16
    ctx.dispatch(Program.of("transpose4.wgsl"), [x, y], pack(R // 4, C // 4, blocks, 0),
                 -(-blocks // 64))
    return True


@gpu_kernel("Transpose", **ANY)
def Transpose(ctx, layer, ins, metas, out_metas):
    shape = metas[0].shape
    perm = layer.attr("perm") or list(range(len(shape)))[::-1]
    return [transpose(ctx, ins[0], shape, [int(p) for p in perm], out_metas[0])]


def _views(op):
    @gpu_kernel(op, **ANY)
    def kernel(ctx, layer, ins, metas, out_metas):
        return [ctx.view(ins[0], out_metas[0].shape)]

    kernel.__name__ = op


for _op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
    _views(_op)


def slice_params(layer, metas):
    """(starts, steps) per dim of the input for Slice, or None if not CPU-known."""
    shape = metas[0].shape
    if layer.opset and layer.opset < 10:
        starts, ends = layer.attr("starts"), layer.attr("ends")
        axes, steps = layer.attr("axes"), None
    else:
        vals = []
        for i in range(1, 5):
            m = metas[i] if i < len(metas) else None
            if m is not None and m.value is None:
                return None
            vals.append(None if m is None else [int(v) for v in np.asarray(m.value).reshape(-1)])
        starts, ends, axes, steps = vals
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    begin, step = [0] * len(shape), [1] * len(shape)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = a + len(shape) if a < 0 else a
        begin[a], _, step[a] = slice(int(s), int(e), int(st)).indices(shape[a])
    return begin, step


def _slice_check(layer, metas):
    if slice_params(layer, metas) is None:
        return "Slice bounds computed on the device are not supported"
    return None


@gpu_kernel("Slice", **ANY, check=_slice_check)
def Slice(ctx, layer, ins, metas, out_metas):
    begin, step = slice_params(layer, metas)
    strides = contiguous_strides(metas[0].shape)
    y = ctx.tensor(out_metas[0])
    base = sum(b * s for b, s in zip(begin, strides))
    strided_copy(ctx, ins[0], y, out_metas[0].shape, [s * t for s, t in zip(strides, step)],
                 in_base=base)
    return [y]


def _concat_check(layer, metas):
    if len({np.dtype(m.dtype) for m in metas if m is not None}) > 1:
        return "Concat of different dtypes"
    return None


@gpu_kernel("Concat", dtypes=None, inputs=None, check=_concat_check)
def Concat(ctx, layer, ins, metas, out_metas):
    out = out_metas[0]
    y = ctx.tensor(out)
    axis = attr_axis(layer, len(out.shape))
    out_strides = contiguous_strides(out.shape)
    outer = size_of(out.shape[:axis])
    words = words_per_element(out.dtype)
    offset = 0
    for x, m in zip(ins, metas):
        if m is None or not size_of(m.shape):
            continue
        base = offset * out_strides[axis]
        if outer == 1:
            ctx.copy(x, 0, y, base * words * 4, size_of(m.shape) * words * 4)
        else:
            strided_copy(ctx, x, y, m.shape, contiguous_strides(m.shape), out_strides,
                         out_base=base)
        offset += m.shape[axis]
    return [y]


@gpu_kernel("Split", **ANY)
def Split(ctx, layer, ins, metas, out_metas):
    shape = metas[0].shape
    axis = attr_axis(layer, len(shape))
    strides = contiguous_strides(shape)
    outs, offset = [], 0
    for m in out_metas:
        y = ctx.tensor(m)
        strided_copy(ctx, ins[0], y, m.shape, strides, in_base=offset * strides[axis])
        offset += m.shape[axis]
        outs.append(y)
    return outs


@gpu_kernel("Expand", **ANY)
def Expand(ctx, layer, ins, metas, out_metas):
    out = out_metas[0]
    y = ctx.tensor(out)
    strided_copy(ctx, ins[0], y, out.shape, broadcast_strides(metas[0].shape, out.shape))
    return [y]


@gpu_kernel("Tile", **ANY)
def Tile(ctx, layer, ins, metas, out_metas):
    out = out_metas[0]
    y = ctx.tensor(out)
    shape = metas[0].shape
    strided_copy(ctx, ins[0], y, out.shape, contiguous_strides(shape), mods=shape)
    return [y]


def _block_check(layer, metas):
    if metas[0] is not None and len(metas[0].shape) != 4:
        return f"{layer.op_type} needs a 4-D input"
    return None


@gpu_kernel("DepthToSpace", **ANY, check=_block_check)
def DepthToSpace(ctx, layer, ins, metas, out_metas):
    n, c, h, w = metas[0].shape
    bs = int(layer.attr("blocksize"))
    if layer.attr("mode", "DCR") == "CRD":
        shape, perm = (n, c // bs // bs, bs, bs, h, w), (0, 1, 4, 2, 5, 3)
    else:
        shape, perm = (n, bs, bs, c // bs // bs, h, w), (0, 3, 4, 1, 5, 2)
    return [transpose(ctx, ins[0], shape, perm, out_metas[0])]


@gpu_kernel("SpaceToDepth", **ANY, check=_block_check)
def SpaceToDepth(ctx, layer, ins, metas, out_metas):
    n, c, h, w = metas[0].shape
    bs = int(layer.attr("blocksize"))
    shape = (n, c, h // bs, bs, w // bs, bs)
    perm = (0, 1, 3, 5, 2, 4) if layer.attr("mode", "DCR") == "CRD" else (0, 3, 5, 1, 2, 4)
    return [transpose(ctx, ins[0], shape, perm, out_metas[0])]
