"""Linear layers the CPU plan fuses (called by ``step_fusion.fuse_steps`` for a MatMul that
is not the start of an attention chain):

MatMul(x, W) -> Add(bias) [-> GELU (Erf or tanh form) | -> Sigmoid | -> Add(residual)]

with W a constant float32 [K, N] and bias a constant [N] (either Add operand order), run by
``linear_fused.linear``. Same matcher contract as ``step_fusion_nlp``.
"""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.activation import carr
from engine.backends.cpu.linear_fused import (
    EPI_BIAS,
    EPI_GELU_ERF,
    EPI_GELU_TANH,
    EPI_SIGMOID,
    linear,
)
from engine.backends.cpu.step_fusion_nlp import _Chain, match_gelu, match_gelu_tanh


def _const_f32(constants: dict, name: str, ndim: int) -> np.ndarray | None:
    value = constants.get(name)
    if value is None or not isinstance(value, np.ndarray) or value.dtype != np.float32:
        return None
    if ndim == 1 and value.ndim >= 1 and all(d == 1 for d in value.shape[:-1]):
        value = value.reshape(-1)
    return value if value.ndim == ndim and value.size else None


def match_linear(i, steps, t, only_users, constants):
    chain = _Chain(steps, only_users)
    ins = steps[i][2]
    if len(ins) != 2 or not ins[0] or ins[0] in constants:
        return None
    x, w = ins[0], _const_f32(constants, ins[1], 2)
    if w is None:
        return None
    add = chain.next(t, "Add")
    if add is None or not add[2]:
        return None
    bias = _const_f32(constants, add[2][0], 1)
    if bias is None or bias.shape != (w.shape[1],):
        return None
    # the weight is not copied here (a read-only or memory-mapped weight stays shared; up to
    # gemm_packed.MAX_WEIGHT_BYTES it gets a packed copy at first use); the small bias goes
    # to the Numba epilogue as the writable type it is built for
    w, bias = np.ascontiguousarray(w), carr(bias)
    parts, out, act, res = [add[0]], steps[add[0]][3], EPI_BIAS, None
    gelu = _gelu_after(steps, out, only_users, constants)
    sigmoid = _sigmoid_after(steps, out, only_users)
    if gelu is not None:
        act, more, out = gelu
        parts += more
    elif sigmoid is not None:  # a detector's or a speech model's probability head
        act, out = EPI_SIGMOID, steps[sigmoid][3]
        parts.append(sigmoid)
    else:
        nxt = chain.next(out, "Add")
        if nxt is not None and nxt[2] and nxt[2][0] not in constants:
            res, out = nxt[2][0], steps[nxt[0]][3]
            parts.append(nxt[0])

    def fused_linear(layer, args):
        return linear(args[0], w, bias, act, args[1] if res is not None else None)

    fused_linear.wants = (x, res) if res is not None else (x,)
    return fused_linear, parts, out


def _sigmoid_after(steps, y, only_users) -> int | None:
    """The step of a Sigmoid that is the only reader of ``y``, else None."""
    users = only_users(y, 1)
    if users is None:
        return None
    st = steps[users[0]]
    ok = st[0].op_type == "Sigmoid" and st[3] is not None and tuple(st[2]) == (y,)
    return users[0] if ok else None


def _gelu_after(steps, y, only_users, constants):
    """(epilogue code, steps, output) of a GELU (a Gelu layer, or the chain written out when
    the model was loaded without the import passes) whose input is ``y`` and that reads it
    alone (every reader of ``y`` is part of the chain), else None."""
    users = only_users(y, 1)
    if users is not None:
        st = steps[users[0]]
        if st[0].op_type == "Gelu" and st[3] is not None and tuple(st[2]) == (y,):
            approximate = st[0].attr("approximate", "none")
            if isinstance(approximate, bytes):
                approximate = approximate.decode()
            code = EPI_GELU_TANH if approximate == "tanh" else EPI_GELU_ERF
            return code, [users[0]], st[3]
    for count, code, start_ops in ((2, EPI_GELU_ERF, ("Div", "Mul")),
                                   (3, EPI_GELU_TANH, ("Pow",))):
        users = only_users(y, count)
        if users is None:
            continue
        for j in sorted(users):
            st = steps[j]
            if st[0].op_type not in start_ops or st[3] is None:
                continue
            matcher = match_gelu if code == EPI_GELU_ERF else match_gelu_tanh
            found = matcher(j, steps, st[3], only_users, constants)
            if found is None or found[0].wants != (y,):
                continue
            _, parts, out = found
            chain_steps = {j, *parts}
            if set(users) <= chain_steps:
                return code, sorted(chain_steps), out
    return None
