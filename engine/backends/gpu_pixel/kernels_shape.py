"""Data-movement kernels: reshapes, Transpose, Slice, Split, Pad, Expand, Tile, Concat.

Shapes live in textures, so even a Reshape moves data (the layout depends on the shape):
reshape.wgsl and permute.wgsl shuffle texels, shaders/pixel/copy.wgsl gathers one element
per component (padding modes), concat.wgsl copies whole texels where it can.
"""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_pixel.kernels_permute import affine_terms, linear_copy, reshape_terms
from engine.backends.gpu_pixel.kernels_reshape import ANY, reshape_copy, reshape_plan
from engine.backends.gpu_pixel.registry import pixel_kernel, value_reason

RANK = 6
PAD_MODES = {"constant": 2, "reflect": 3, "edge": 4, "wrap": 1}


def flat_copy(be, x, out_shape):
    """Same elements in row-major order, new shape."""
    in_shape, out_shape = tuple(x.shape), tuple(out_shape)
    if reshape_plan(in_shape, out_shape)[0] == ANY:
        terms = reshape_terms(in_shape, out_shape)
        if terms is not None:  # only splits axes: a linear texel shuffle
            return linear_copy(be, x, out_shape, terms)
    # the same texels, texels a fixed step apart, or merged axes: found per output texel
    return reshape_copy(be, x, out_shape)


def affine_copy(be, x, out_shape, src, start, step, mode, const=0.0):
    """Gather with input index ``start[j] + step[j] * out[src[j]]`` for each input axis j."""
    r_in, r_out = len(x.shape), len(out_shape)
    s, st, sp, md = [-1] * RANK, [0] * RANK, [0] * RANK, [0] * RANK
    for j in range(r_in):
        k = j + RANK - r_in
        s[k] = src[j] + RANK - r_out if src[j] >= 0 else -1
        st[k], sp[k], md[k] = int(start[j]), int(step[j]), int(mode[j])
    if not any(md):
        # no wrapping or padding: a linear texel shuffle (kernels_permute.py)
        return linear_copy(be, x, out_shape, affine_terms(src, step), start)
    ints = [s[:4], s[4:], st[:4], st[4:], sp[:4], sp[4:], md[:4], md[4:]]
    return be.run("copy", out_shape, [x], ints=ints, floats=[(const,)], MAP="affine")


def _register_reshape(op, cpu_params=()):
    def check(layer, metas):
        for i in cpu_params:
            if i < len(layer.inputs) and layer.inputs[i]:
                why = value_reason(metas, i, f"{op}'s input {i}")
                if why:
                    return why
        return None

    @pixel_kernel(op, check=check, tensors=(0,))
    def kernel(be, layer, inputs, in_metas, out_metas):
        return [flat_copy(be, inputs[0], out_metas[0].shape)]

    kernel.__name__ = op


_register_reshape("Reshape", (1,))
_register_reshape("Flatten")
_register_reshape("Squeeze", (1,))
_register_reshape("Unsqueeze", (1,))


@pixel_kernel("Transpose")
def Transpose(be, layer, inputs, in_metas, out_metas):
    rank = len(in_metas[0].shape)
    perm = list(layer.attr("perm") or range(rank)[::-1])
    src = [0] * rank
    for j, p in enumerate(perm):
        src[p] = j
    return [affine_copy(be, inputs[0], out_metas[0].shape, src, [0] * rank, [1] * rank,
                        [0] * rank)]


def _slice_check(layer, metas):
    if layer.opset and layer.opset < 10:
        return None
    for i in range(1, len(layer.inputs)):
        if layer.inputs[i]:
            why = value_reason(metas, i, f"Slice's input {i}")
            if why:
                return why
    return None


def slice_params(layer, metas, shape):
    """Per-axis (start, step) of a Slice, clamped as NumPy slicing does."""
    rank = len(shape)
    if layer.opset and layer.opset < 10:
        starts, ends = layer.attr("starts"), layer.attr("ends")
        axes, steps = layer.attr("axes"), None
    else:
        vals = [None if i >= len(metas) or metas[i] is None else
                [int(v) for v in np.asarray(metas[i].value).reshape(-1)] for i in range(1, 5)]
        starts, ends, axes, steps = vals
    axes = list(axes) if axes is not None else list(range(len(starts)))
    steps = list(steps) if steps is not None else [1] * len(starts)
    start, step = [0] * rank, [1] * rank
    for s, e, a, st in zip(starts, ends, axes, steps):
        a %= rank
        begin, _, stride = slice(int(s), int(e), int(st)).indices(shape[a])
        start[a], step[a] = begin, stride
    return start, step


@pixel_kernel("Slice", check=_slice_check, tensors=(0,))
def Slice(be, layer, inputs, in_metas, out_metas):
    shape = in_metas[0].shape
    start, step = slice_params(layer, in_metas, shape)
    rank = len(shape)
    return [affine_copy(be, inputs[0], out_metas[0].shape, list(range(rank)), start, step,
                        [0] * rank)]


def _split_check(layer, metas):
    return value_reason(metas, 1, "Split's sizes") if len(layer.inputs) > 1 and \
        layer.inputs[1] else None


@pixel_kernel("Split", check=_split_check, tensors=(0,), max_outputs=64)
def Split(be, layer, inputs, in_metas, out_metas):
    shape = in_metas[0].shape
    rank = len(shape)
    axis = int(layer.attr("axis", 0)) % rank
    outs, offset = [], 0
    for meta in out_metas:
        start = [0] * rank
        start[axis] = offset
        outs.append(affine_copy(be, inputs[0], meta.shape, list(range(rank)), start,
                                [1] * rank, [0] * rank))
        offset += meta.shape[axis]
    return outs


@pixel_kernel("Expand", check=lambda layer, metas: value_reason(metas, 1, "Expand's shape"),
              tensors=(0,))
def Expand(be, layer, inputs, in_metas, out_metas):
    shape = in_metas[0].shape
    r_in, r_out = len(shape), len(out_metas[0].shape)
    src = [j + r_out - r_in for j in range(r_in)]
    # each input axis is 1 (index 0 everywhere: step 0) or the output's: a linear texel
    # shuffle, not copy.wgsl's wrapping per element (BERT's mask: 4.3 -> 0.56 ms)
    step = [0 if d == 1 else 1 for d in shape]
    return [affine_copy(be, inputs[0], out_metas[0].shape, src, [0] * r_in, step, [0] * r_in)]


@pixel_kernel("Tile", check=lambda layer, metas: value_reason(metas, 1, "Tile's repeats"),
              tensors=(0,))
def Tile(be, layer, inputs, in_metas, out_metas):
    rank = len(in_metas[0].shape)
    return [affine_copy(be, inputs[0], out_metas[0].shape, list(range(rank)), [0] * rank,
                        [1] * rank, [1] * rank)]


def _pad_check(layer, metas):
    mode = layer.attr("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in PAD_MODES:
        return f"Pad mode {mode!r} is not supported"
    for i, what in ((1, "Pad's pads"), (2, "Pad's constant"), (3, "Pad's axes")):
        if i < len(layer.inputs) and layer.inputs[i]:
            why = value_reason(metas, i, what)
            if why:
                return why
            if i == 2 and metas[i] is not None and metas[i].dtype != np.float32:
                return "Pad's constant is not float32"
    return None


@pixel_kernel("Pad", check=_pad_check, tensors=(0,))
def Pad(be, layer, inputs, in_metas, out_metas):
    shape = in_metas[0].shape
    rank = len(shape)
    mode = layer.attr("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if layer.opset and layer.opset < 11:
        pads, value, axes = list(layer.attr("pads")), float(layer.attr("value", 0.0)), None
    else:
        pads = [int(v) for v in np.asarray(in_metas[1].value).reshape(-1)]
        value = 0.0
        if len(in_metas) > 2 and in_metas[2] is not None:
            value = float(np.asarray(in_metas[2].value).reshape(-1)[0])
        axes = None
        if len(in_metas) > 3 and in_metas[3] is not None:
            axes = [int(a) % rank for a in np.asarray(in_metas[3].value).reshape(-1)]
    axes = axes if axes is not None else list(range(rank))
    begin = [0] * rank
    for i, a in enumerate(axes):
        begin[a] = pads[i]
    return [affine_copy(be, inputs[0], out_metas[0].shape, list(range(rank)),
                        [-b for b in begin], [1] * rank, [PAD_MODES[mode]] * rank, value)]


def concat(be, inputs, shapes, axis, out_shape):
    """Concat of any number of inputs, 8 per pass (a longer one concatenates partial results)."""
    rank = len(out_shape)
    blocked = 1 if rank >= 2 else 0
    acc, acc_shape = None, None
    rest = list(zip(inputs, shapes))
    while rest:
        take = 8 if acc is None else 7
        group, rest = rest[:take], rest[take:]
        if acc is not None:
            group = [(acc, acc_shape)] + group
        starts, total = [], 0
        for _, s in group:
            starts.append(total)
            total += s[axis]
        shape = list(out_shape)
        shape[axis] = total
        aligned = all(s % 4 == 0 for s in starts)
        whole = 2 if axis == blocked and aligned and rank >= 3 else \
            int(axis != blocked or aligned)
        if axis == blocked and not aligned and rank >= 3:
            whole = 3  # (the blocked axis does not run along x from rank 3 on)
        starts += [0] * (8 - len(starts))
        ints = [(len(group), axis + RANK - rank, int(whole)), starts[:4], starts[4:]]
        out = be.run("concat", tuple(shape), [h for h, _ in group], n_tex=8, ints=ints,
                     MODE=int(whole))
        if acc is not None:
            be.free(acc)
        acc, acc_shape = out, tuple(shape)
    return acc


@pixel_kernel("Concat")
def Concat(be, layer, inputs, in_metas, out_metas):
    out_shape = out_metas[0].shape
    axis = int(layer.attr("axis")) % len(out_shape)
    pairs = [(h, m.shape) for h, m in zip(inputs, in_metas) if h is not None]
    return [concat(be, [h for h, _ in pairs], [s for _, s in pairs], axis, out_shape)]
