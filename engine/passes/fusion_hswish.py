"""HardSwish and HardSigmoid as exporters before opset 14 write them, fused into the Conv or
Gemm that produces their input (``fusion``'s helper).

``x * Clip(x + 3, 0, 6) / 6`` is HardSwish(x) and ``Clip(x + 3, 0, 6) / 6`` is
HardSigmoid(x; 1/6, 1/2) (a division by 6 may also be written as a multiplication by 1/6).
Left as written, each is three or four elementwise layers after the Conv: passes over the
tensor on the CPU and dispatches on the GPU backends. Recognised here, the chain becomes the
producer's fused activation, which every backend's Conv and Gemm apply in their epilogue.
Equal to the written form up to rounding (a few ulp); -Inf gives NaN in both (-Inf * 0).
"""

from __future__ import annotations

import numpy as np

#: producers whose kernels apply a fused activation
PRODUCERS = ("Conv", "Gemm")


def _scalar(fuser, name: str) -> float | None:
    value = fuser.const(name) if name else None
    if value is None or value.size != 1 or value.dtype.kind != "f":
        return None
    return float(value.reshape(-1)[0])


def _other(layer, name: str) -> str | None:
    """The input of a two-input ``layer`` that is not ``name`` (None if neither or both)."""
    ins = layer.inputs
    if len(ins) != 2 or ins[0] == ins[1] or name not in ins:
        return None
    return ins[1] if ins[0] == name else ins[0]


def _clip_0_6(fuser, clip, src: str) -> bool:
    if clip is None or clip.op_type != "Clip" or not clip.inputs or clip.inputs[0] != src:
        return False
    if len(clip.inputs) > 1:  # opset 11 and later: bounds as inputs
        ins = clip.inputs + [""] * (3 - len(clip.inputs))
        return _scalar(fuser, ins[1]) == 0.0 and _scalar(fuser, ins[2]) == 6.0
    return clip.attr("min", None) == 0.0 and clip.attr("max", None) == 6.0


def _by_six(fuser, layer, src: str) -> bool:
    """``layer`` is ``src / 6`` or ``src * (1/6)``."""
    if layer is None or layer.op_type not in ("Div", "Mul"):
        return False
    if layer.op_type == "Div":
        return len(layer.inputs) == 2 and layer.inputs[0] == src \
            and _scalar(fuser, layer.inputs[1]) == 6.0
    c = _scalar(fuser, _other(layer, src) or "")
    return c is not None and abs(c * 6.0 - 1.0) < 1e-6


def _plus_three(fuser, add, src: str) -> bool:
    return add is not None and add.op_type == "Add" and \
        _scalar(fuser, _other(add, src) or "") == 3.0


def _absorb(fuser, producer, chain: list, act: str, params: list[float]) -> None:
    """``producer`` takes ``act`` and writes the chain's last output; the chain goes."""
    fused_away = getattr(fuser.m, "fused_away", {})
    for layer in (producer, *chain[:-1]):
        fused_away[layer.outputs[0]] = producer.name
    last = chain[-1].outputs[0]
    producer.outputs[0] = last
    producer.attributes["activation"] = act
    producer.attributes["activation_params"] = params
    fuser.producer[last] = producer
    fuser.removed.update(id(layer) for layer in chain)
    fuser.counts["hard_activation"] += 1


def fuse_written_out(fuser, producer) -> bool:
    """Fuse a written-out HardSwish or HardSigmoid after ``producer`` (a Conv or Gemm with
    one output and no activation yet) into it."""
    if producer.op_type not in PRODUCERS or len(producer.outputs) != 1 \
            or producer.attr("activation"):
        return False
    t = producer.outputs[0]
    users = [u for u in fuser.users.get(t, []) if id(u) not in fuser.removed]
    if t in fuser.outputs or not users:
        return False
    add = next((u for u in users if _plus_three(fuser, u, t)), None)
    if add is None:
        return False
    clip = fuser.sole_user(add.outputs[0])
    if not _clip_0_6(fuser, clip, add.outputs[0]):
        return False
    after = fuser.sole_user(clip.outputs[0])
    if len(users) == 2:  # HardSwish: t * Clip(t + 3, 0, 6) / 6
        mul = next(u for u in users if u is not add)
        if mul is not after or mul.op_type != "Mul" or _other(mul, t) != clip.outputs[0]:
            return False
        div = fuser.sole_user(mul.outputs[0])
        if not _by_six(fuser, div, mul.outputs[0]):
            return False
        _absorb(fuser, producer, [add, clip, mul, div], "HardSwish", [])
        return True
    if len(users) == 1 and _by_six(fuser, after, clip.outputs[0]):  # HardSigmoid
        _absorb(fuser, producer, [add, clip, after], "HardSigmoid",
                [float(np.float32(1.0 / 6.0)), 0.5])
        return True
    return False
