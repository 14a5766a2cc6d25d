"""Sequence and Optional CPU kernels. A sequence is a Python list of arrays; an empty
optional is ``None``."""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.kernel_util import axis_of
from engine.backends.cpu.registry import cpu_kernel


def _pos(position, n: int, insert: bool = False) -> int:
    p = int(np.asarray(position).reshape(-1)[0])
    hi = n if insert else n - 1
    if not -n <= p <= hi:
        raise IndexError(f"sequence position {p} out of range for length {n}")
    return p + n if p < 0 else p


@cpu_kernel("SequenceConstruct")
def SequenceConstruct(layer, inputs):
    return list(inputs)


@cpu_kernel("SequenceEmpty")
def SequenceEmpty(layer, inputs):
    return []


@cpu_kernel("SequenceAt")
def SequenceAt(layer, inputs):
    seq, position = inputs
    return seq[_pos(position, len(seq))]


@cpu_kernel("SequenceInsert")
def SequenceInsert(layer, inputs):
    seq, tensor = inputs[0], inputs[1]
    position = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    out = list(seq)
    out.insert(len(out) if position is None else _pos(position, len(out), True), tensor)
    return out


@cpu_kernel("SequenceErase")
def SequenceErase(layer, inputs):
    seq = list(inputs[0])
    position = inputs[1] if len(inputs) > 1 and inputs[1] is not None else -1
    del seq[_pos(position, len(seq))]
    return seq


@cpu_kernel("SequenceLength")
def SequenceLength(layer, inputs):
    return np.array(len(inputs[0]), dtype=np.int64)


@cpu_kernel("SplitToSequence")
def SplitToSequence(layer, inputs):
    x = inputs[0]
    split = inputs[1] if len(inputs) > 1 else None
    axis = axis_of(layer, x.ndim)
    dim = x.shape[axis]
    if split is None:
        parts = np.split(x, dim, axis=axis)
        if not layer.attr("keepdims", 1):
            parts = [np.squeeze(p, axis=axis) for p in parts]
        return parts
    split = np.asarray(split)
    if split.ndim == 0:
        size = int(split)
        cuts = list(range(size, dim, size))
    else:
        cuts = list(np.cumsum(split.astype(np.int64))[:-1])
    return np.split(x, cuts, axis=axis)


@cpu_kernel("ConcatFromSequence")
def ConcatFromSequence(layer, inputs):
    seq = inputs[0]
    axis = layer.attr("axis")
    if layer.attr("new_axis", 0):
        rank = seq[0].ndim + 1
        return np.stack(seq, axis=axis + rank if axis < 0 else axis)
    return np.concatenate(seq, axis=axis)


@cpu_kernel("Optional")
def Optional(layer, inputs):
    return inputs[0] if inputs and inputs[0] is not None else None


@cpu_kernel("OptionalHasElement")
def OptionalHasElement(layer, inputs):
    return np.array(bool(inputs) and inputs[0] is not None)


@cpu_kernel("OptionalGetElement")
def OptionalGetElement(layer, inputs):
    if not inputs or inputs[0] is None:
        raise ValueError("OptionalGetElement on an empty optional")
    return inputs[0]
