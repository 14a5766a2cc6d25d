"""Transformer chains the CPU plan fuses (called by ``step_fusion.fuse_steps``).

* Attention: MatMul(Q, K) [-> Div or Mul by a scalar constant] [-> Add(mask) or
  Where(keep, ., scalar)] -> Softmax(axis=-1) -> MatMul(., V), run block by block
  (``kernels_attention_fused.attention``).
* GELU written out with Erf, as exporters do: Div(x, sqrt 2) or Mul(x, 1/sqrt 2) -> Erf ->
  Add 1 -> Mul x (or Mul x/2) [-> Mul 0.5], one vectorised pass;
* GELU's tanh form as GPT-2 exports it: Pow(x, 3) -> Mul 0.044715 -> Add x ->
  Mul sqrt(2/pi) -> Tanh -> Add 1 -> Mul x -> Mul 0.5;
* LayerNorm written out over the last axis: ReduceMean -> Sub -> Pow 2 -> ReduceMean ->
  Add eps -> Sqrt -> Div [-> Mul gamma [-> Add beta]], the LayerNormalization kernel.

A matcher gets the step index of the chain's first layer, and returns (fn, parts, output
name) with ``fn.wants`` naming the tensors ``fn`` reads, or None.
"""

from __future__ import annotations

import math

import numpy as np

from engine.backends.cpu import fastmath
from engine.backends.cpu.kernels_attention_fused import (
    MASK_ADD,
    MASK_KEEP,
    MASK_NONE,
    attention,
)
from engine.backends.cpu.kernels_norm import layer_norm_rows

#: attention absorbs the Transposes around it (False: they run as layers; benchmarks)
ABSORB_TRANSPOSES = True


def _plain(layer) -> bool:
    return layer.domain in ("", "ai.onnx") and not layer.captures


def _scalar(constants: dict, name: str) -> float | None:
    value = constants.get(name)
    if value is None or np.size(value) != 1 or np.asarray(value).dtype.kind != "f":
        return None
    return float(np.asarray(value).reshape(-1)[0])


def _near(value: float | None, target: float) -> bool:
    return value is not None and abs(value - target) <= 1e-5 * abs(target)


class _Chain:
    """Walks a chain of single-user steps from one output name."""

    def __init__(self, steps, only_users):
        self.steps, self.only_users = steps, only_users

    def next(self, name: str, *op_types: str):
        """(step index, layer, other input names) of the only reader of ``name`` when it is
        a plain single-output layer of one of ``op_types``, else None."""
        u = self.only_users(name, 1)
        if u is None:
            return None
        st = self.steps[u[0]]
        if st[0].op_type not in op_types or not _plain(st[0]) or st[3] is None \
                or st[1] is None:
            return None
        return u[0], st[0], [n for n in st[2] if n != name] if st[2].count(name) == 1 else None


def match_attention(i, steps, t, only_users, constants):
    chain, parts = _Chain(steps, only_users), []
    q, k = steps[i][2][:2]
    if len(steps[i][2]) != 2 or not q or not k:
        return None
    scale, mask, mode, fill = 1.0, None, MASK_NONE, 0.0
    nxt = chain.next(t, "Div", "Mul", "Add", "Where", "Softmax")
    if nxt is not None and nxt[1].op_type in ("Div", "Mul") and nxt[2] is not None:
        c = _scalar(constants, nxt[2][0])
        if c is None or c == 0.0 or (nxt[1].op_type == "Div" and steps[nxt[0]][2][0] != t):
            return None
        scale = 1.0 / c if nxt[1].op_type == "Div" else c
        parts.append(nxt[0])
        t = steps[nxt[0]][3]
        nxt = chain.next(t, "Add", "Where", "Softmax")
    if nxt is not None and nxt[1].op_type == "Add" and nxt[2]:
        mask, mode = nxt[2][0], MASK_ADD
    elif nxt is not None and nxt[1].op_type == "Where" and nxt[2] is not None:
        ins = steps[nxt[0]][2]
        fill_value = _scalar(constants, ins[2])
        if ins[1] != t or fill_value is None:
            return None
        mask, mode, fill = ins[0], MASK_KEEP, fill_value
    if mode != MASK_NONE:
        parts.append(nxt[0])
        t = steps[nxt[0]][3]
        nxt = chain.next(t, "Softmax")
    if nxt is None or nxt[1].op_type != "Softmax" or nxt[1].attr("axis", None) != -1:
        return None
    parts.append(nxt[0])
    nxt = chain.next(steps[nxt[0]][3], "MatMul")
    if nxt is None or steps[nxt[0]][2][0] != steps[parts[-1]][3] or not nxt[2]:
        return None
    parts.append(nxt[0])
    v = nxt[2][0]
    # Q, K^T and V as exporters make them, Transposes of [B, L, H, D] read by nothing else:
    # the kernel reads them as strided views instead (BLAS takes the strides), so the three
    # copies and their layers go (0.05 ms a BERT layer alone, 3x that inside a run)
    perms = []
    for name, reader in ((q, i), (k, i), (v, nxt[0])):
        j = _transposed_for(steps, only_users, name, reader) if ABSORB_TRANSPOSES else None
        if j is None:
            perms.append(None)
            continue
        perms.append(tuple(int(a) for a in steps[j][0].attr("perm")))
        parts.append(j)
        if name == q:
            q = steps[j][2][0]
        elif name == k:
            k = steps[j][2][0]
        else:
            v = steps[j][2][0]
    pq, pk, pv = perms
    # ... and the Transpose back to [B, L, H, D] after it: the result is written that way
    out_name = steps[nxt[0]][3]
    after = chain.next(out_name, "Transpose")
    heads_last = ABSORB_TRANSPOSES and after is not None \
        and tuple(after[1].attr("perm") or ()) == (0, 2, 1, 3)
    if heads_last:
        parts.append(after[0])
        out_name = steps[after[0]][3]

    def fused_attention(layer, args):
        m = args[2] if mode != MASK_NONE else None
        qa, ka, va = args[0], args[1], args[-1]
        if pq is not None:
            qa = np.transpose(qa, pq)
        if pk is not None:
            ka = np.transpose(ka, pk)
        if pv is not None:
            va = np.transpose(va, pv)
        if heads_last and qa.ndim != 4:
            return None  # the Transpose's permutation is for 4-D: the layers run as they are
        return attention(qa, ka, va, scale, m, mode, fill, heads_last)

    fused_attention.wants = (q, k, mask, v) if mode != MASK_NONE else (q, k, v)
    fused_attention.reports = i  # the profile shows the fused time on the Q K MatMul
    return fused_attention, parts, out_name


def _transposed_for(steps, only_users, name: str, reader: int) -> int | None:
    """The step making ``name`` when it is a plain Transpose with an explicit permutation
    and ``reader`` is its only reader."""
    if only_users(name, 1) != [reader]:
        return None
    j = next((j for j, st in enumerate(steps) if st[3] == name), None)
    if j is None:
        return None
    st = steps[j]
    if st[0].op_type != "Transpose" or not _plain(st[0]) or st[1] is None \
            or not st[0].attr("perm") or len(st[2]) != 1:
        return None
    return j


def match_gelu(i, steps, t, only_users, constants):
    chain = _Chain(steps, only_users)
    layer, ins = steps[i][0], steps[i][2]
    if len(ins) != 2:
        return None
    if layer.op_type == "Div" and _near(_scalar(constants, ins[1]), math.sqrt(2.0)):
        x = ins[0]
    elif layer.op_type == "Mul" and _near(_scalar(constants, ins[1]), math.sqrt(0.5)):
        x = ins[0]
    elif layer.op_type == "Mul" and _near(_scalar(constants, ins[0]), math.sqrt(0.5)):
        x = ins[1]
    else:
        return None
    erf = chain.next(t, "Erf")
    if erf is None:
        return None
    one = chain.next(steps[erf[0]][3], "Add")
    if one is None or not one[2] or not _near(_scalar(constants, one[2][0]), 1.0):
        return None
    mul = chain.next(steps[one[0]][3], "Mul")
    if mul is None or not mul[2]:
        return None
    parts = [erf[0], one[0], mul[0]]
    other = mul[2][0]
    if other != x:  # torch's form: (x * 0.5) * (1 + erf(...)), the half computed first
        half = next((j for j, st in enumerate(steps) if st[3] == other), None)
        if half is None or steps[half][0].op_type != "Mul" or not _plain(steps[half][0]) \
                or only_users(other, 1) != [mul[0]] or steps[half][1] is None \
                or sorted(steps[half][2], key=str) != sorted([x, _const_of(steps[half], x)],
                                                             key=str) \
                or not _near(_scalar(constants, _const_of(steps[half], x)), 0.5):
            return None
        parts.append(half)
        out = steps[mul[0]][3]
    else:
        last = chain.next(steps[mul[0]][3], "Mul")
        if last is None or not last[2] or not _near(_scalar(constants, last[2][0]), 0.5):
            return None
        parts.append(last[0])
        out = steps[last[0]][3]

    def fused_gelu(layer, args):
        x_value = args[0]
        return fastmath.gelu(x_value, False) if x_value.dtype == np.float32 else None

    fused_gelu.wants = (x,)
    return fused_gelu, parts, out


def match_gelu_tanh(i, steps, t, only_users, constants):
    chain = _Chain(steps, only_users)
    ins = steps[i][2]
    if len(ins) != 2 or not _near(_scalar(constants, ins[1]), 3.0):
        return None
    x, parts = ins[0], []

    def step(name, op_type, want):
        nxt = chain.next(name, op_type)
        if nxt is None or not nxt[2] or (want is not None and (
                nxt[2][0] != want if isinstance(want, str)
                else not _near(_scalar(constants, nxt[2][0]), want))):
            return None
        parts.append(nxt[0])
        return steps[nxt[0]][3]

    t = step(t, "Mul", 0.044715)
    t = t and step(t, "Add", x)
    t = t and step(t, "Mul", math.sqrt(2 / math.pi))
    if t is None:
        return None
    nxt = chain.next(t, "Tanh")
    if nxt is None:
        return None
    parts.append(nxt[0])
    t = step(steps[nxt[0]][3], "Add", 1.0)
    t = t and step(t, "Mul", x)
    t = t and step(t, "Mul", 0.5)
    if t is None:
        return None

    def fused_gelu_tanh(layer, args):
        x_value = args[0]
        return fastmath.gelu(x_value, True) if x_value.dtype == np.float32 else None

    fused_gelu_tanh.wants = (x,)
    return fused_gelu_tanh, parts, t


def _last_axis_mean(layer, ins, constants) -> bool:
    if layer.op_type != "ReduceMean" or not layer.attr("keepdims", 1):
        return False
    axes = layer.attr("axes")
    if axes is None and len(ins) > 1 and ins[1]:
        axes = constants.get(ins[1])
    return axes is not None and [int(a) for a in np.asarray(axes).reshape(-1)] == [-1]


def match_layer_norm(i, steps, t, only_users, constants):
    chain = _Chain(steps, only_users)
    layer, ins = steps[i][0], steps[i][2]
    if not _last_axis_mean(layer, ins, constants):
        return None
    x = ins[0]
    sub = chain.next(t, "Sub")
    if sub is None or steps[sub[0]][2] != (x, t):
        return None
    diff = steps[sub[0]][3]
    users = only_users(diff, 2)
    if users is None:
        return None
    pow_j, div_j = sorted(users, key=lambda j: steps[j][0].op_type != "Pow")
    if steps[pow_j][0].op_type != "Pow" or steps[div_j][0].op_type != "Div" \
            or steps[pow_j][2][0] != diff or steps[div_j][2][0] != diff \
            or not _near(_scalar(constants, steps[pow_j][2][1]), 2.0) \
            or not all(_plain(steps[j][0]) and steps[j][1] is not None for j in users):
        return None
    var = chain.next(steps[pow_j][3], "ReduceMean")
    if var is None or not _last_axis_mean(var[1], steps[var[0]][2], constants):
        return None
    add = chain.next(steps[var[0]][3], "Add")
    eps = None if add is None or not add[2] else _scalar(constants, add[2][0])
    sqrt = None if eps is None else chain.next(steps[add[0]][3], "Sqrt")
    if sqrt is None or steps[div_j][2][1] != steps[sqrt[0]][3] \
            or only_users(steps[sqrt[0]][3], 1) != [div_j]:
        return None
    parts = [sub[0], pow_j, var[0], add[0], sqrt[0], div_j]
    out, gamma, beta = steps[div_j][3], None, None
    mul = chain.next(out, "Mul")
    if mul is not None and mul[2] and mul[2][0] in constants:
        gamma, out = mul[2][0], steps[mul[0]][3]
        parts.append(mul[0])
        plus = chain.next(out, "Add")
        if plus is not None and plus[2] and plus[2][0] in constants:
            beta, out = plus[2][0], steps[plus[0]][3]
            parts.append(plus[0])

    def fused_layer_norm(layer, args):
        value = args[0]
        size = value.shape[-1] if value.ndim else 0
        scale = constants[gamma] if gamma else np.ones(size, value.dtype)
        shift = constants[beta] if beta else np.zeros(0, value.dtype)
        if value.dtype not in (np.float32, np.float64) or not size \
                or any(a.dtype != value.dtype or a.shape not in ((size,), (0,))
                       for a in (scale, shift)):
            return None
        return layer_norm_rows(value, scale, shift, float(eps))

    fused_layer_norm.wants = (x,)
    return fused_layer_norm, parts, out


def _const_of(step, x: str) -> str:
    """The input of a two-input step that is not ``x``."""
    a, b = (step[2] + ("", ""))[:2]
    return b if a == x else a

