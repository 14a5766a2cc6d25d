"""Data-movement CPU kernels (NumPy). Output shapes follow ``engine.ops`` shape logic."""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.concat_grow import concat_grow
from engine.backends.cpu.registry import cpu_kernel
from engine.model import Layer
from engine.ops import find_op
from engine.ops.base import Meta


def _infer(layer: Layer, inputs) -> Meta:
    op = find_op(layer.op_type, layer.domain, layer.opset or 10**9)
    metas = [None if x is None else Meta.of(np.asarray(x)) for x in inputs]
    return op.infer(layer, metas)[0]


@cpu_kernel("Identity")
def Identity(layer, inputs):
    return inputs[0]


@cpu_kernel("Constant")
def Constant(layer, inputs):
    for key in ("value", "value_float", "value_int", "value_floats", "value_ints",
                "value_string", "value_strings", "sparse_value"):
        if key in layer.attributes:
            v = layer.attributes[key]
            if key in ("value_float", "value_floats"):
                return np.array(v, dtype=np.float32)
            if key in ("value_int", "value_ints"):
                return np.array(v, dtype=np.int64)
            if key in ("value_string", "value_strings"):
                return np.array(v, dtype=object)
            return np.asarray(v)
    raise ValueError("Constant has no value attribute")


@cpu_kernel("Shape")
def Shape(layer, inputs):
    x = inputs[0]
    if not isinstance(x, np.ndarray):
        return _infer(layer, inputs).value
    # Python's slice clamps negative and out-of-range start/end as ONNX says; this skips the
    # generic shape inference (11 us a call, a dozen calls a run in a traced transformer)
    end = layer.attr("end", None)
    return np.array(x.shape[layer.attr("start", 0):end], dtype=np.int64)


def _out_shape(layer: Layer, inputs) -> tuple[int, ...]:
    """The output shape of a shape-only op, kept on the layer: a model runs the same reshape
    every time. A hit needs the same input shape and the very same objects (model
    constants) or equal values as the other inputs; the objects are kept, so ids stay valid."""
    x = inputs[0]
    known = layer.__dict__.get("_cpu_shape")
    if known is not None and known[0] == x.shape and len(known[1]) == len(inputs) - 1:
        for a, b in zip(known[1], inputs[1:]):
            if a is not b and (a is None or b is None or a.shape != b.shape
                               or a.dtype != b.dtype or not np.array_equal(a, b)):
                break
        else:
            return known[2]
    shape = tuple(_infer(layer, inputs).shape)
    layer.__dict__["_cpu_shape"] = (x.shape, tuple(inputs[1:]), shape)
    return shape


@cpu_kernel("Reshape")
def Reshape(layer, inputs):
    return inputs[0].reshape(_out_shape(layer, inputs))


@cpu_kernel("Flatten")
def Flatten(layer, inputs):
    return inputs[0].reshape(_out_shape(layer, inputs))


@cpu_kernel("Squeeze")
def Squeeze(layer, inputs):
    return inputs[0].reshape(_out_shape(layer, inputs))


@cpu_kernel("Unsqueeze")
def Unsqueeze(layer, inputs):
    return inputs[0].reshape(_out_shape(layer, inputs))


@cpu_kernel("Concat")
def Concat(layer, inputs):
    parts = [x for x in inputs if x is not None]
    axis = layer.attr("axis")
    if parts and isinstance(parts[0], np.ndarray) and parts[0].ndim:
        out = concat_grow(layer, parts, axis + parts[0].ndim if axis < 0 else axis)
        if out is not None:
            return out
    return np.concatenate(parts, axis=axis)


@cpu_kernel("Transpose")
def Transpose(layer, inputs):
    x, perm = inputs[0], layer.attr("perm")
    # (the method, with the permutation as a tuple: np.transpose's wrapper and the list's
    # conversion were half of a small transpose's 2 us)
    t = x.transpose(tuple(perm)) if perm else x.transpose()
    return t if t.flags.c_contiguous else t.copy()


@cpu_kernel("Expand")
def Expand(layer, inputs):
    return np.ascontiguousarray(np.broadcast_to(inputs[0], _infer(layer, inputs).shape))


@cpu_kernel("ConstantOfShape")
def ConstantOfShape(layer, inputs):
    value = layer.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return np.full(tuple(int(v) for v in inputs[0]), value[0], dtype=value.dtype)


@cpu_kernel("Tile")
def Tile(layer, inputs):
    return np.tile(inputs[0], [int(r) for r in inputs[1]])


@cpu_kernel("Gather")
def Gather(layer, inputs):
    data, idx = inputs
    axis = layer.attr("axis", 0)
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    return np.take(data, idx, axis=axis)
