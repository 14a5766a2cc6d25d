"""The steps of a blocked region (``step_fusion_blocked``): each layer's weights packed
once for its kernel (``nchw16c_conv``, ``nchw16c_dense``), and the run loop's function that
reads its inputs in the layout they arrive in and writes the layouts its readers want."""

from __future__ import annotations

import copy
import sys

import numpy as np

from engine.backends.cpu.activation import ACT_RELU, act_params
from engine.backends.cpu.conv_blocked import pack
from engine.backends.cpu.nchw16c import (
    L,
    blocks,
    from_blocked,
    global_average_pool,
    pad_lanes,
    scale_channels,
    se_gates,
    squeeze_excite,
    to_blocked,
)
from engine.backends.cpu.nchw16c_conv import depthwise, pointwise
from engine.backends.cpu.nchw16c_dense import dense
from engine.backends.cpu.simd import empty_aligned
from engine.errors import KernelError
from engine.ops.conv_pool import layer_geometry


class Pointwise:
    """A 1x1 convolution's packed weights [M/16][C16][16], padded bias and activations."""

    def __init__(self, w: np.ndarray, b, act, post):
        m, c = w.shape[:2]
        rows = np.zeros((m, blocks(c) * L, 1, 1), np.float32)  # (inputs padded to blocks)
        rows[:, :c] = w
        self.wp, self.bias = pack(rows, L).reshape(-1), pad_lanes(b, m)
        self.m, self.c = m, c
        self.act, self.prm = act[0], act_params(act, np.float32)
        self.post, self.pprm = post[0], act_params(post, np.float32)


class Depthwise:
    """A depthwise convolution's packed weights [CB][kh*kw][16] and activation."""

    def __init__(self, w: np.ndarray, b, act):
        c, _, kh, kw = w.shape
        self.wd, self.bias = pack(w, L).reshape(-1), pad_lanes(b, c)
        self.c, self.kernel = c, (kh, kw)
        self.act, self.prm = act[0], act_params(act, np.float32)


class Scaled:
    """A 1x1 step's weights times the gates of the squeeze-and-excitation before it (one
    image: the gates step writes them, the 1x1 step multiplies by them in place of a pass
    that scales the tensor)."""

    def __init__(self, pw: Pointwise):
        self.pw = copy.copy(pw)
        self.pw.wp = empty_aligned(pw.wp.shape)
        self.weights = pw.wp


def step_fn(kind, prep, layer, has_res, x_blocked, res_blocked, blocked, plain, found, steps,
            x_name, scaled: Scaled | None = None):
    """The step's kernel: (layer, args) -> its output(s), blocked and/or plain. With
    ``scaled``, kind "gates" is a squeeze-and-excitation that only makes the gates (and the
    scaled weights), and kind "pw" the 1x1 step that reads its input and gates (args[0],
    args[1]) and multiplies by the scaled weights."""
    src = next((found[j] for j, st in enumerate(steps) if st[3] == x_name and j in found), None)
    channels = src[4] if src is not None else None
    geos: dict[tuple, tuple] = {}
    buffers = Buffers(layer, prep)
    if scaled is not None and kind == "pw":
        buffers.weights += scaled.pw.wp.nbytes

    def checked(v, c):
        if not isinstance(v, np.ndarray) or v.dtype != np.float32 or v.ndim != 4 \
                or v.shape[1] != c:
            raise KernelError(f"layer {layer.name!r}: expected a float32 NCHW input with {c} "
                              f"channels, got {getattr(v, 'dtype', type(v))} "
                              f"{list(getattr(v, 'shape', ()))}")
        return v

    def entry(v, c):
        return to_blocked(checked(v, c))

    def geometry(shape) -> tuple:
        """((kh, kw, sh, sw, pad top, pad left), output planes) for an input shape."""
        g = geos.get(shape)
        if g is None:
            w_shape = (prep.m, prep.c, *prep.kernel) if kind == "dn" else \
                (prep.c, 1, *prep.kernel)
            g2 = layer_geometry(layer, shape, w_shape).as_2d()
            g = geos[shape] = ((*g2.kernel, *g2.strides, *g2.pads_begin), g2.out_hw)
        return g

    def finish(y, m):
        outs = ([y] if blocked else []) + ([from_blocked(y, m)] if plain else [])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run(_layer, args):
        if kind == "gap":
            return global_average_pool(args[0], channels)
        if kind in ("se", "gates"):
            c = prep[0].shape[1]
            x = args[0] if x_blocked else entry(args[0], c)
            if kind == "gates":
                return se_gates(x, c, prep, scaled.weights, scaled.pw.wp)
            return finish(squeeze_excite(x, c, prep, buffers.get), c)
        c = prep.c
        if kind == "dn":
            x = checked(args[0], c)
            return finish(dense(x, prep, *geometry(x.shape), buffers.get), prep.m)
        x = args[0] if x_blocked else entry(args[0], c)
        if kind == "dw":
            return finish(depthwise(x, prep, *geometry((x.shape[0], c, *x.shape[2:4])),
                                    buffers.get), c)
        res = args[-1] if has_res else None
        if has_res and not res_blocked:
            if not (isinstance(res, np.ndarray) and res.dtype == np.float32
                    and res.shape == (x.shape[0], prep.m, *x.shape[2:4])):
                return finish(_broadcast_residual(x, c, prep, res), prep.m)
            res = to_blocked(res)
        elif has_res and res.shape[:4] != (x.shape[0], blocks(prep.m), *x.shape[2:4]):
            raise KernelError(f"layer {layer.name!r}: residual of shape {res.shape} does "
                              "not match the output")
        if scaled is None:
            return finish(pointwise(x, c, prep, res, buffers.get), prep.m)
        if x.shape[0] > 1:  # per-image gates: scale the tensor
            return finish(pointwise(scale_channels(x, args[1]), c, prep, res, buffers.get),
                          prep.m)
        return finish(pointwise(x, c, scaled.pw, res, buffers.get), prep.m)

    return run


class Buffers:
    """A region step's blocked output arrays by shape, handed out again once nothing else
    holds them (runs in steady state allocate none; ~2.5 us a step less than a new aligned
    array). What the step keeps, weights included, is booked on the layer for the memory
    figures (``bench_memory.cpu_kept_bytes``)."""

    def __init__(self, layer, prep):
        self.layer = layer
        self.by_shape: dict[tuple, np.ndarray] = {}
        parts = vars(prep).values() if hasattr(prep, "__dict__") else (prep or ())
        self.weights = sum(getattr(v, "nbytes", 0) for v in parts)
        layer.__dict__["_cpu_blocked_bytes"] = self.weights

    def get(self, shape: tuple) -> np.ndarray:
        buf = self.by_shape.get(shape)
        # held by the dict, ``buf`` and getrefcount's argument: nobody else reads it
        if buf is not None and sys.getrefcount(buf) == 3:
            return buf
        buf = self.by_shape[shape] = empty_aligned(shape)
        self.layer.__dict__["_cpu_blocked_bytes"] = self.weights + sum(
            b.nbytes for b in self.by_shape.values())
        return buf


def _broadcast_residual(x, c, prep: Pointwise, res) -> np.ndarray:
    """The blocked output of a pointwise step whose residual broadcasts (or is not float32)
    to the output: NumPy's Add, then the activation after it (Relu or none)."""
    y = np.asarray(from_blocked(pointwise(x, c, prep, None), prep.m) + res, np.float32)
    if prep.post == ACT_RELU:
        y = np.where(y <= 0, np.float32(0), y)
    return to_blocked(np.ascontiguousarray(y))
