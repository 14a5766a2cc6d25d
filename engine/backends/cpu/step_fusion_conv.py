"""Conv chains of exported MobileNet-style models that the CPU plan fuses into the Conv's
epilogue (called by ``step_fusion._conv_chain``):

* ``Clip(x, 0, c) / c``: Conv with a fused Clip(0, c) -> Div c becomes
  ``HardSigmoid(x; 1/c, 0)`` (HardSwish and HardSigmoid written out with ``+ 3`` are taken
  by the import pass, ``passes.fusion_hswish``, for every backend);
* squeeze-and-excitation as one step.

The rewritten forms equal the exported ones up to rounding (a few ulp), NaN and +-Inf
included.
"""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.activation import ACT_HARDSIGMOID


def _plain(layer) -> bool:
    return layer.domain in ("", "ai.onnx") and not layer.captures


def _scalar(constants: dict, name: str) -> float | None:
    value = constants.get(name)
    if value is None or np.size(value) != 1 or np.asarray(value).dtype.kind != "f":
        return None
    return float(np.asarray(value).reshape(-1)[0])


def _ok(steps, j) -> bool:
    st = steps[j]
    return _plain(st[0]) and st[1] is not None and st[3] is not None


def _only(steps, only_users, name: str, op_type: str) -> int | None:
    u = only_users(name, 1)
    if u is None or steps[u[0]][0].op_type != op_type or not _ok(steps, u[0]):
        return None
    return u[0]


def match_clip_div(i, steps, t, only_users, constants):
    """Conv with a fused Clip(0, c), its output's only reader Div by the constant c."""
    layer = steps[i][0]
    act = layer.attr("activation")
    act = act.decode() if isinstance(act, bytes) else act
    params = list(layer.attr("activation_params") or [])
    if act != "Clip" or len(params) != 2 or params[0] != 0.0 or not params[1] > 0.0:
        return None
    div = _only(steps, only_users, t, "Div")
    if div is None or steps[div][2][0] != t or len(steps[div][2]) != 2 \
            or _scalar(constants, steps[div][2][1]) != float(np.float32(params[1])):
        return None
    return _fused(steps[i], (ACT_HARDSIGMOID, 1.0 / params[1], 0.0)), [div], steps[div][3]


def _fused(conv_step, act):
    from engine.backends.cpu.kernels_conv import conv

    n_in = len(conv_step[2])
    return lambda layer, args: conv(layer, args[:n_in], act=act)


def _pointwise_on_pooled(layer) -> bool:
    """A 1x1, ungrouped, unpadded Conv (it runs on a [N, C, 1, 1] pooled tensor)."""
    k = layer.attr("kernel_shape", None)
    pads = layer.attr("pads", None) or []
    return (k is not None and all(v == 1 for v in k) and not any(pads)
            and int(layer.attr("group", 1) or 1) == 1
            and layer.attr("auto_pad", "NOTSET") in ("NOTSET", b"NOTSET", "VALID", b"VALID"))


def match_squeeze_excite(i, steps, t, only_users, constants):
    """Squeeze-and-excitation: GlobalAveragePool(x) -> Conv 1x1 [act] -> Conv 1x1 [act]
    [-> Div c after a Clip(0, c)] -> Mul(x, gate), as one step (``squeeze_excite``): the
    pooled vector and the two tiny products stay in NumPy arrays of a few hundred values,
    and the gate is applied to ``x`` in one pass."""
    x = steps[i][2][0] if len(steps[i][2]) == 1 else None
    c1 = _only(steps, only_users, t, "Conv")
    if x is None or c1 is None or steps[c1][2][0] != t \
            or not _pointwise_on_pooled(steps[c1][0]):
        return None
    c2 = _only(steps, only_users, steps[c1][3], "Conv")
    if c2 is None or steps[c2][2][0] != steps[c1][3] \
            or not _pointwise_on_pooled(steps[c2][0]):
        return None
    parts, gate, act2 = [c1, c2], steps[c2][3], None
    div = match_clip_div(c2, steps, gate, only_users, constants)
    if div is not None:
        parts.append(div[1][0])
        gate = div[2]
        act2 = (ACT_HARDSIGMOID, 1.0 / float(steps[c2][0].attr("activation_params")[1]), 0.0)
    mul = _only(steps, only_users, gate, "Mul")
    if mul is None or sorted(steps[mul][2]) != sorted([x, gate]) or x == gate:
        return None
    parts.append(mul)
    l1, l2 = steps[c1][0], steps[c2][0]
    w1, b1 = steps[c1][2][1], (steps[c1][2][2:3] or ("",))[0]
    w2, b2 = steps[c2][2][1], (steps[c2][2][2:3] or ("",))[0]
    if not w1 or not w2 or len(steps[c1][2]) > 3 or len(steps[c2][2]) > 3:
        return None

    def fused_se(layer, args):
        from engine.backends.cpu.kernels_se import squeeze_excite

        return squeeze_excite(args[0], l1, args[1], args[2], l2, args[3], args[4], act2)

    fused_se.wants = (x, w1, b1, w2, b2)
    return fused_se, parts, steps[mul][3]
