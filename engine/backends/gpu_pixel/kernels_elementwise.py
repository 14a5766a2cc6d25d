"""Elementwise kernels: activations and broadcasting n-ary arithmetic."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_pixel.handles import PixelTensor
from engine.backends.gpu_pixel.layout import MAX_RANK as RANK
from engine.backends.gpu_pixel.layout import layout_of
from engine.backends.gpu_pixel.registry import pixel_kernel, value_reason
from engine.ops.activations import FLT_MAX, layer_params, shader_ops, shader_params

BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "PRelu", "Mod")
VARIADIC = ("Max", "Min", "Sum", "Mean")


def unary_params(layer) -> list[float]:
    """The float parameters of a unary op (record order, engine.ops.activations)."""
    return list(shader_params(layer_params(layer), 4))


def access_mode(be, h, out_shape):
    """(mode, texture source) of one input for elementwise.wgsl (see its header)."""
    shape, out_shape = tuple(h.shape), tuple(out_shape)
    if shape == out_shape:
        return 0, h
    if all(d == 1 for d in shape):
        # one element (attention's scale, a Div by a constant): no index arithmetic; mode 1
        # decoded the output's 6-D index per fragment (whisper's 4x1500x1500 Div: 150 ms)
        return 6, h
    out = layout_of(out_shape)
    if len(shape) > len(out_shape):
        return 1, h
    if shape and shape[-1] == out_shape[-1] and all(d == 1 for d in shape[:-1]):
        # a vector over the last axis (a bias after MatMul)
        if out.axis == RANK - 1:
            return (2, h) if len(shape) <= 2 else (1, h)
        return (4 if len(shape) <= 2 else 5), h
    if out.axis == RANK - 1:
        return 1, h
    dims = layout_of(shape).dims
    channels = out.dims[out.axis]
    rest = [d for k, d in enumerate(dims) if k != out.axis]
    if dims[out.axis] == channels and all(d == 1 for d in rest) and h.host is not None:
        vec = h.derived.get("channels")
        if vec is None:
            vec = h.derived["channels"] = be.upload(np.ascontiguousarray(h.host).reshape(-1))
        return 2, vec
    if len(shape) == len(out_shape) and dims[:out.axis + 1] == out.dims[:out.axis + 1] \
            and all(d == 1 for d in dims[out.axis + 1:]):
        return 3, h
    return 1, h


def elementwise(be, inputs, out_shape, bin_op="Add", un_op="Identity", params=(), scale=1.0):
    """One pass combining ``inputs`` (broadcast to ``out_shape``) then applying ``un_op`` (a
    function op_<un_op> of shaders/common/activations.wgsl)."""
    picked = [access_mode(be, h, out_shape) for h in inputs]
    modes = [m for m, _ in picked] + [0] * (8 - len(picked))
    padded = layout_of(tuple(out_shape)).dims[layout_of(tuple(out_shape)).axis] % 4 != 0
    consts = {f"M{k}": m for k, m in enumerate(modes)}
    return be.run("elementwise", out_shape, [t for _, t in picked], n_tex=8,
                  floats=[(scale,), list(params) + [0.0] * (4 - len(params))],
                  BIN=bin_op, ACT=un_op, N=len(inputs), PADDED=str(padded).lower(), **consts)


def _register_unary(rec):
    @pixel_kernel(rec.name, check=(lambda layer, metas: rec.unsupported(layer))
                  if rec.choices else None)
    def kernel(be, layer, inputs, in_metas, out_metas):
        return [elementwise(be, inputs[:1], out_metas[0].shape, un_op=rec.name,
                            params=unary_params(layer))]

    kernel.__name__ = rec.name


for _rec in shader_ops():
    if _rec.name != "Clip":  # bounds from inputs: below
        _register_unary(_rec)


@pixel_kernel("Identity")
def Identity(be, layer, inputs, in_metas, out_metas):
    return [elementwise(be, inputs[:1], out_metas[0].shape)]


def clip_bounds(layer, metas) -> tuple[float, float]:
    """(lower, upper) of a Clip: attributes before opset 11, CPU-known inputs after, within
    float32's finite range."""
    lo, hi = -np.inf, np.inf
    if layer.opset and layer.opset < 11:
        lo, hi = layer.attr("min", lo), layer.attr("max", hi)
    else:
        if len(metas) > 1 and metas[1] is not None:
            lo = float(np.asarray(metas[1].value).reshape(-1)[0])
        if len(metas) > 2 and metas[2] is not None:
            hi = float(np.asarray(metas[2].value).reshape(-1)[0])
    # an absent bound is float's lowest()/max() (ONNX spec), so -Inf/+Inf become FLT_MAX
    return float(np.float32(max(lo, -FLT_MAX))), float(np.float32(min(hi, FLT_MAX)))


def _clip_check(layer, metas):
    for i, what in ((1, "Clip's min"), (2, "Clip's max")):
        why = value_reason(metas, i, what)
        if why:
            return why
        m = metas[i] if i < len(metas) else None
        if m is not None and m.dtype != np.float32:
            return f"Clip on {np.dtype(m.dtype).name} is not supported"
    return None


@pixel_kernel("Clip", check=_clip_check, tensors=(0,))
def Clip(be, layer, inputs, in_metas, out_metas):
    lo, hi = clip_bounds(layer, in_metas)
    return [elementwise(be, inputs[:1], out_metas[0].shape, un_op="Clip", params=(lo, hi))]


def _dropout_check(layer, metas):
    if len(metas) > 2 and metas[2] is not None:
        if metas[2].value is None or bool(np.asarray(metas[2].value).reshape(-1)[0]):
            return "Dropout in training mode is not supported"
    return None


@pixel_kernel("Dropout", check=_dropout_check, tensors=(0,), max_outputs=2)
def Dropout(be, layer, inputs, in_metas, out_metas):
    outs = [elementwise(be, inputs[:1], out_metas[0].shape)]
    if len(out_metas) > 1:
        # inference keeps every element: the mask is all true (a host array, not a texture)
        outs.append(PixelTensor(None, None, np.ones(out_metas[1].shape, bool)))
    return outs


def _binary_check(layer, metas):
    if layer.opset and layer.opset < 7 and layer.attr("broadcast", 0):
        return "legacy axis broadcasting (opset < 7) is not supported"
    n = sum(1 for i in layer.inputs if i)
    if n > 8:
        return f"{layer.op_type} of {n} inputs is not supported (at most 8)"
    if layer.op_type == "Mod" and not layer.attr("fmod", 0):
        return "Mod with fmod=0 on floats is not supported"
    return None


def _register_binary(op):
    @pixel_kernel(op, check=_binary_check)
    def kernel(be, layer, inputs, in_metas, out_metas):
        present = [h for h in inputs if h is not None]
        scale = 1.0 / len(present) if op == "Mean" else 1.0
        return [elementwise(be, present, out_metas[0].shape, bin_op=op, scale=scale)]

    kernel.__name__ = op


for _op in BINARY:
    _register_binary(_op)
