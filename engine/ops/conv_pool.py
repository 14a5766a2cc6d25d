"""Shape logic of convolutions and pools, and the window geometry every backend's kernels use.

``conv_geometry`` resolves ``auto_pad``/``pads``/``strides``/``dilations``/``ceil_mode`` of a
Conv or pool layer into concrete per-axis numbers; ``conv_transpose_geometry`` does the same
for ConvTranspose (``output_shape``/``output_padding``). Kernels read these instead of the raw
attributes so that every backend pads and strides identically.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.model import Layer
from engine.ops.base import Meta, Op, register_op


@dataclass(frozen=True)
class ConvGeometry:
    """Resolved window geometry over the spatial axes of an N, C, D1..Dn tensor.

    Output element ``o`` on axis ``i`` reads input positions
    ``o * strides[i] - pads_begin[i] + k * dilations[i]`` for ``k < kernel[i]``; positions
    outside ``[0, in_shape[i])`` are padding. For ConvTranspose the roles swap: input element
    ``j`` scatters to output position ``j * strides[i] - pads_begin[i] + k * dilations[i]``.
    ``pads_end`` may exceed the attribute's value when ``ceil_mode`` adds a partial window
    (``ceil_extra`` says by how much), and may be negative for ConvTranspose ``output_shape``.
    """

    in_shape: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out_shape: tuple[int, ...]
    ceil_extra: tuple[int, ...] = ()
    output_padding: tuple[int, ...] = ()

    @property
    def rank(self) -> int:
        return len(self.in_shape)

    @property
    def pads(self) -> tuple[int, ...]:
        """ONNX layout: all begins, then all ends."""
        return self.pads_begin + self.pads_end

    @property
    def effective_kernel(self) -> tuple[int, ...]:
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations))

    @property
    def pads_end_attr(self) -> tuple[int, ...]:
        """End pads without the partial window ``ceil_mode`` adds: what bounds an average
        pool's ``count_include_pad`` divisor (as onnxruntime counts it)."""
        extra = self.ceil_extra or (0,) * self.rank
        return tuple(e - x for e, x in zip(self.pads_end, extra))

    def as_2d(self) -> Geometry2D:
        """The geometry of a 1-D or 2-D layer as 2-D: a 1-D layer gets a leading H axis of
        size 1 (kernel 1, stride 1, dilation 1, no padding), which is how the GPU kernels,
        written for NCHW, run 1-D convolutions and pools."""
        if self.rank not in (1, 2):
            raise ValueError(f"a {self.rank}-D window has no 2-D form")
        lead = 2 - self.rank

        def two(values, fill):
            return (fill,) * lead + tuple(values)

        return Geometry2D(two(self.in_shape, 1), two(self.out_shape, 1), two(self.kernel, 1),
                          two(self.strides, 1), two(self.dilations, 1),
                          two(self.pads_begin, 0), two(self.pads_end_attr, 0))


@dataclass(frozen=True)
class Geometry2D:
    """A 1-D or 2-D ``ConvGeometry`` over (H, W); ``pads_end`` excludes ``ceil_mode``'s extra."""

    in_hw: tuple[int, int]
    out_hw: tuple[int, int]
    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads_begin: tuple[int, int]
    pads_end: tuple[int, int]


def _ints(value, n: int, default: int, name: str) -> tuple[int, ...]:
    if value is None or len(value) == 0:
        return (default,) * n
    out = tuple(int(v) for v in value)
    if len(out) != n:
        raise ValueError(f"{name} has {len(out)} values; expected {n} (one per spatial axis)")
    return out


def _auto_pad(layer: Layer) -> str:
    mode = layer.attr("auto_pad", "NOTSET")
    if isinstance(mode, bytes):
        mode = mode.decode()
    mode = mode or "NOTSET"
    if mode not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise ValueError(f"unknown auto_pad {mode!r}")
    return mode


def conv_geometry(layer: Layer, x_shape, w_shape=None) -> ConvGeometry:
    """Geometry of a Conv (``w_shape`` given) or pooling layer (kernel from ``kernel_shape``).

    Pools honour ``ceil_mode``: the last window may hang over the end (it must start inside
    the input or the begin padding, as ONNX and onnxruntime define it).
    """
    spatial = tuple(int(d) for d in x_shape[2:])
    n = len(spatial)
    if n == 0:
        raise ValueError(f"{layer.op_type} needs an input of rank >= 3 (N, C, spatial...); "
                         f"got shape {list(x_shape)}")
    kernel_attr = layer.attr("kernel_shape")
    if kernel_attr:
        kernel = _ints(kernel_attr, n, 1, "kernel_shape")
    elif w_shape is not None:
        kernel = tuple(int(d) for d in w_shape[2:])
    else:
        raise ValueError(f"{layer.op_type} needs the kernel_shape attribute")
    if len(kernel) != n:
        raise ValueError(f"kernel has {len(kernel)} spatial axes but the input has {n}")
    strides = _ints(layer.attr("strides"), n, 1, "strides")
    dilations = _ints(layer.attr("dilations"), n, 1, "dilations")
    if min(strides + dilations + kernel, default=1) < 1:
        raise ValueError("strides, dilations and kernel_shape must be positive")
    eff = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations))
    mode = _auto_pad(layer)
    ceil_mode = bool(layer.attr("ceil_mode", 0)) and w_shape is None
    extra = (0,) * n
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        out = tuple(-(-s // st) for s, st in zip(spatial, strides))
        total = [max(0, (o - 1) * st + e - s) for o, st, e, s in zip(out, strides, eff, spatial)]
        small = [t // 2 for t in total]
        big = [t - t // 2 for t in total]
        begin, end = (small, big) if mode == "SAME_UPPER" else (big, small)
    else:
        # VALID is explicit zero padding (pools still honour ceil_mode, as onnxruntime does)
        pads = _ints(layer.attr("pads") if mode == "NOTSET" else None, 2 * n, 0, "pads")
        begin, end = list(pads[:n]), list(pads[n:])
        if min(pads, default=0) < 0:
            raise ValueError(f"pads must not be negative, got {list(pads)}")
        out_l, extra_l = [], []
        for s, e, st, b, en in zip(spatial, eff, strides, begin, end):
            span = s + b + en - e
            o = (-(-span // st) if ceil_mode else span // st) + 1
            if ceil_mode and (o - 1) * st >= s + b:
                o -= 1  # the last window would start in the end padding only
            out_l.append(o)
            extra_l.append(max(0, (o - 1) * st + e - (s + b + en)))
        out, extra = tuple(out_l), tuple(extra_l)
    if min(out, default=1) < 1:
        raise ValueError(f"{layer.op_type}: input spatial shape {list(spatial)} is smaller than "
                         f"the (dilated) kernel {list(eff)} after padding")
    end = [en + x for en, x in zip(end, extra)]
    return ConvGeometry(spatial, kernel, strides, dilations, tuple(begin), tuple(end), out, extra)


def conv_transpose_geometry(layer: Layer, x_shape, w_shape) -> ConvGeometry:
    """Geometry of a ConvTranspose: output size from ``output_shape`` or pads/output_padding."""
    spatial = tuple(int(d) for d in x_shape[2:])
    n = len(spatial)
    kernel = _ints(layer.attr("kernel_shape"), n, 1, "kernel_shape") \
        if layer.attr("kernel_shape") else tuple(int(d) for d in w_shape[2:])
    strides = _ints(layer.attr("strides"), n, 1, "strides")
    dilations = _ints(layer.attr("dilations"), n, 1, "dilations")
    out_pad = _ints(layer.attr("output_padding"), n, 0, "output_padding")
    full = tuple(st * (s - 1) + op + (k - 1) * d + 1
                 for st, s, op, k, d in zip(strides, spatial, out_pad, kernel, dilations))
    mode = _auto_pad(layer)
    out_attr = layer.attr("output_shape")
    if out_attr is not None and len(out_attr):
        target = [int(v) for v in out_attr]
        if len(target) == n + 2:
            target = target[2:]
        if len(target) != n:
            raise ValueError(f"output_shape {list(out_attr)} does not match {n} spatial axes")
    elif mode in ("SAME_UPPER", "SAME_LOWER"):
        target = [s * st for s, st in zip(spatial, strides)]
        target = [min(t, f) for t, f in zip(target, full)]  # kernel < stride: no negative pads
    else:
        target = None
    if target is not None:
        total = [f - t for f, t in zip(full, target)]
        if mode == "SAME_UPPER":
            begin = [t // 2 for t in total]
        else:
            begin = [t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin)]
        out = tuple(target)
    else:
        pads = _ints(layer.attr("pads"), 2 * n, 0, "pads") if mode != "VALID" else (0,) * 2 * n
        begin, end = list(pads[:n]), list(pads[n:])
        out = tuple(f - b - e for f, b, e in zip(full, begin, end))
    if min(out, default=1) < 1:
        raise ValueError(f"ConvTranspose output spatial shape {list(out)} is empty")
    return ConvGeometry(spatial, kernel, strides, dilations, tuple(begin), tuple(end), out,
                        (0,) * n, out_pad)


def layer_geometry(layer: Layer, x_shape, w_shape=None) -> ConvGeometry:
    """The geometry of any windowed layer: ConvTranspose's, or a Conv's or a pool's."""
    if layer.op_type == "ConvTranspose":
        return conv_transpose_geometry(layer, x_shape, w_shape)
    return conv_geometry(layer, x_shape, w_shape)


def _check_rank(layer: Layer, x: Meta) -> None:
    if len(x.shape) < 3:
        raise ValueError(f"{layer.op_type} needs an input of rank >= 3 (N, C, spatial...); "
                         f"got shape {list(x.shape)}")


@register_op
class Conv(Op):
    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        x, w = inputs[0], inputs[1]
        _check_rank(layer, x)
        group = int(layer.attr("group", 1) or 1)
        if len(w.shape) != len(x.shape):
            raise ValueError(f"Conv weight rank {len(w.shape)} != input rank {len(x.shape)}")
        if x.shape[1] != w.shape[1] * group:
            raise ValueError(f"Conv input has {x.shape[1]} channels but the weight expects "
                             f"{w.shape[1]} x group {group}")
        if w.shape[0] % group:
            raise ValueError(f"Conv output channels {w.shape[0]} not divisible by group {group}")
        g = conv_geometry(layer, x.shape, w.shape)
        return [Meta((x.shape[0], w.shape[0], *g.out_shape), x.dtype)]


@register_op
class ConvTranspose(Op):
    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        x, w = inputs[0], inputs[1]
        _check_rank(layer, x)
        group = int(layer.attr("group", 1) or 1)
        if x.shape[1] != w.shape[0]:
            raise ValueError(f"ConvTranspose input has {x.shape[1]} channels but the weight "
                             f"has {w.shape[0]}")
        g = conv_transpose_geometry(layer, x.shape, w.shape)
        return [Meta((x.shape[0], w.shape[1] * group, *g.out_shape), x.dtype)]


class _Pool(Op):
    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        x = inputs[0]
        _check_rank(layer, x)
        g = conv_geometry(layer, x.shape)
        return [Meta((*x.shape[:2], *g.out_shape), x.dtype)]


@register_op
class MaxPool(_Pool):
    """Y and, when requested, Indices (int64, flattened NCHW offsets as onnxruntime gives)."""

    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        y = super().infer(layer, inputs)[0]
        if len(layer.outputs) > 1 and layer.outputs[1]:
            return [y, Meta(y.shape, np.dtype(np.int64))]
        return [y]


@register_op
class AveragePool(_Pool):
    pass


@register_op
class LpPool(_Pool):
    pass


class _GlobalPool(Op):
    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        x = inputs[0]
        _check_rank(layer, x)
        return [Meta((*x.shape[:2], *([1] * (len(x.shape) - 2))), x.dtype)]


@register_op
class GlobalAveragePool(_GlobalPool):
    pass


@register_op
class GlobalMaxPool(_GlobalPool):
    pass


@register_op
class GlobalLpPool(_GlobalPool):
    pass



#: CausalConvWithState's ``activation`` values and the unary op each stands for
CAUSAL_ACTIVATIONS = {"none": "Identity", "silu": "Swish", "swish": "Swish"}


def causal_activation(layer: Layer) -> str:
    """The unary op (``Identity`` or ``Swish`` with alpha 1) that CausalConvWithState's
    ``activation`` attribute names; an unknown value is an error."""
    act = layer.attr("activation", "none") or "none"
    if isinstance(act, bytes):
        act = act.decode()
    if act not in CAUSAL_ACTIVATIONS:
        raise ValueError(f"CausalConvWithState: unknown activation {act!r} "
                         f"(one of {', '.join(CAUSAL_ACTIVATIONS)})")
    return CAUSAL_ACTIVATIONS[act]


@register_op
class CausalConvWithState(Op):
    """Stateful causal depthwise 1-D convolution (opset 27).

    input (B, C, L), weight (C, 1, k), optional bias (C) and past_state (B, C, k - 1) ->
    output (B, C, L): a depthwise conv of [past_state, input] along L (zeros for a missing
    past_state), and present_state (B, C, k - 1): the last k - 1 positions of that
    concatenation, the state of the next decoding step."""

    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        past = inputs[3] if len(inputs) > 3 else None
        if len(x.shape) != 3 or len(w.shape) != 3:
            raise ValueError(f"CausalConvWithState needs rank-3 input and weight; got "
                             f"{list(x.shape)} and {list(w.shape)}")
        b, c, _ = x.shape
        k = w.shape[2]
        if w.shape[:2] != (c, 1) or k < 1:
            raise ValueError(f"CausalConvWithState weight {list(w.shape)} must be ({c}, 1, k)")
        if bias is not None and tuple(bias.shape) != (c,):
            raise ValueError(f"CausalConvWithState bias {list(bias.shape)} must be ({c},)")
        if past is not None and tuple(past.shape) != (b, c, k - 1):
            raise ValueError(f"CausalConvWithState past_state {list(past.shape)} must be "
                             f"{[b, c, k - 1]}")
        causal_activation(layer)
        out = [Meta(tuple(x.shape), x.dtype)]
        if len(layer.outputs) > 1 and layer.outputs[1]:
            out.append(Meta((b, c, k - 1), x.dtype))
        return out
