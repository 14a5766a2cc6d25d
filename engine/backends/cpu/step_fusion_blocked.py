"""Blocked regions of the CPU plan: chains of depthwise and pointwise convolutions (the
inverted-residual blocks of MobileNet-style networks) kept in the channel-blocked layout
(``nchw16c``) from one layer to the next.

A step joins a region when it is a float32 Conv by constant weights that is pointwise (1x1,
stride 1, no padding, one group; maybe with a fused residual Add [+ Relu]) or depthwise
(one channel a group, no dilation), with a fused activation the vector epilogues apply,
a fused squeeze-and-excitation, or a GlobalAveragePool (which leaves the region). A
connected group of such steps with at least MIN_STEPS of them and a depthwise convolution
becomes a region; elsewhere a lone 1x1 layer would pay two layout changes for nothing.
Inside, a tensor travels as ``name + BLOCKED`` in the blocked layout; a step converts an
input that comes from outside, and writes the plain NCHW tensor as well for readers outside
the region and for the model's outputs. Runs with captures use the plan without fusions,
so every tensor stays readable there.
"""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.activation import (
    ACT_HARDSIGMOID,
    ACT_NONE,
    ACT_RELU,
    ACT_SILU,
    ACT_XHARDSIGMOID,
    act_params,
    activation_of,
)
from engine.backends.cpu.blocked_step import Depthwise, Pointwise, Scaled, step_fn
from engine.backends.cpu.nchw16c_dense import MAX_CHANNELS, Dense
from engine.errors import KernelError

#: suffix of a tensor's blocked form in the run loop's values
BLOCKED = "\x00nchw16c"
#: suffix of a squeeze-and-excitation's gates, folded into the weights of the 1x1 layer
#: that reads its output (``_folds``)
GATES = "\x00gates"
#: fewest steps a region has
MIN_STEPS = 4
#: plan blocked regions (False: the plan as before; tests and benchmarks)
ENABLED = True
#: fold squeeze-and-excitation gates into the next 1x1 layer's weights (``_folds``)
FOLD_GATES = True


def _const(constants, name: str, ndim: int):
    v = constants.get(name) if name else None
    return v if isinstance(v, np.ndarray) and v.dtype == np.float32 and v.ndim == ndim \
        else None


def _conv_member(st, constants) -> tuple | None:
    """("pw" | "dw" | "dn", a function preparing the weights, residual input name or None)
    of a Conv step (weights are packed only for the steps a region takes)."""
    layer, absorbed = st[0], [a.op_type for a in st[6]]
    if layer.op_type != "Conv" or layer.domain not in ("", "ai.onnx") or layer.captures:
        return None
    n_in = len(layer.all_inputs())
    w = _const(constants, st[2][1] if n_in > 1 else "", 4)
    b = _const(constants, st[2][2], 1) if n_in > 2 and st[2][2] else None
    if w is None or (n_in > 2 and st[2][2] and b is None):
        return None
    try:
        act = activation_of(layer)
    except KernelError:
        return None
    post, res = (ACT_NONE, 0.0, 0.0), None
    if absorbed == ["HardSwish"] and act[0] == ACT_NONE:
        act = (ACT_XHARDSIGMOID, 1.0 / 6.0, 0.5)
    elif absorbed in (["Sigmoid", "Mul"], ["HardSigmoid", "Mul"]) and act[0] == ACT_NONE:
        gate = st[6][0]  # x * gate(x), as step_fusion_conv fuses it
        act = (ACT_SILU, 0.0, 0.0) if gate.op_type == "Sigmoid" else \
            (ACT_XHARDSIGMOID, float(gate.attr("alpha", 0.2)), float(gate.attr("beta", 0.5)))
    elif absorbed in (["Add"], ["Add", "Relu"]) and len(st[2]) == n_in + 1:
        res = st[2][n_in]
        if absorbed[-1] == "Relu":
            post = (ACT_RELU, 0.0, 0.0)
    elif absorbed:
        return None
    if layer.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return None
    m, cg, kh, kw = w.shape
    group = int(layer.attr("group", 1))
    if any(d != 1 for d in layer.attr("dilations", [1, 1])):
        return None
    if (kh, kw) == (1, 1) and group == 1 and not any(layer.attr("pads", [0] * 4)) \
            and all(s == 1 for s in layer.attr("strides", [1, 1])):
        return "pw", lambda: Pointwise(w, b, act, post), res
    if cg == 1 and group == m and res is None:
        return "dw", lambda: Depthwise(w, b, act), None
    if group == 1 and cg <= MAX_CHANNELS and res is None:
        return "dn", lambda: Dense(w, b, act), None
    return None


def _se_member(st, constants) -> tuple | None:
    """The squeeze-and-excitation tuple of a ``fused_se`` step (``kernels_se``'s chain)."""
    if getattr(st[1], "__name__", "") != "fused_se":
        return None
    convs = [a for a in st[6] if a.op_type == "Conv"]
    w1, b1 = _const(constants, st[2][1], 4), _const(constants, st[2][2], 1)
    w2, b2 = _const(constants, st[2][3], 4), _const(constants, st[2][4], 1)
    if len(convs) != 2 or w1 is None or w2 is None or (st[2][2] and b1 is None) \
            or (st[2][4] and b2 is None):
        return None
    try:
        act1, act2 = activation_of(convs[0]), activation_of(convs[1])
    except KernelError:
        return None
    if any(a.op_type == "Div" for a in st[6]):  # Clip(0, c) / c: a HardSigmoid of slope 1/c
        act2 = (ACT_HARDSIGMOID, 1.0 / float(convs[1].attr("activation_params")[1]), 0.0)
    r, c = w1.shape[:2]
    b1 = np.zeros(r, np.float32) if b1 is None else b1
    b2 = np.zeros(c, np.float32) if b2 is None else b2
    return (np.ascontiguousarray(w1.reshape(r, c)), b1, act1[0], act_params(act1, np.float32),
            np.ascontiguousarray(w2.reshape(c, r)), b2, act2[0], act_params(act2, np.float32))


def _members(steps, constants) -> dict[int, tuple]:
    """step index -> (kind, weights or a function preparing them, residual name, input
    name, output channels)."""
    found: dict[int, tuple] = {}
    for k, st in enumerate(steps):
        if st[1] is None or st[3] is None:
            continue
        conv = _conv_member(st, constants)
        if conv is not None:
            kind, prepare, res = conv
            found[k] = (kind, prepare, res, st[2][0], constants[st[2][1]].shape[0])
            continue
        se = _se_member(st, constants)
        if se is not None:
            found[k] = ("se", se, None, st[2][0], se[0].shape[1])
        elif st[0].op_type == "GlobalAveragePool" and not st[6] and not st[0].captures \
                and len(st[2]) == 1:
            found[k] = ("gap", None, None, st[2][0], 0)
    return found


def _regions(steps, found: dict[int, tuple]) -> set[int]:
    """The member steps in qualifying regions (connected through the tensors they pass)."""
    producer = {steps[k][3]: k for k in found if found[k][0] != "gap"}
    parent = {k: k for k in found}

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for k, (kind, _, res, x, _) in found.items():
        for name in (x, res):
            j = producer.get(name)
            # (a dense convolution reads NCHW: it starts a region, it joins none before it)
            if j is not None and kind != "gap" and (kind != "dn" or name != x):
                parent[root(k)] = root(j)
    groups: dict[int, list[int]] = {}
    for k in found:
        if found[k][0] != "gap":
            groups.setdefault(root(k), []).append(k)
    chosen = {k for g in groups.values() if len(g) >= MIN_STEPS
              and any(found[k][0] == "dw" for k in g) for k in g}
    # a GlobalAveragePool joins when it pools a region's tensor
    chosen |= {k for k, m in found.items() if m[0] == "gap" and producer.get(m[3]) in chosen}
    return chosen


def _folds(steps, found, chosen, readers, outputs, blocked_in) -> dict[int, int]:
    """1x1 step -> the squeeze-and-excitation whose output it alone reads: the gates then
    scale the product's weights (per input channel) instead of a pass over the tensor."""
    folds: dict[int, int] = {}
    for k in chosen if FOLD_GATES else ():
        t = steps[k][3]
        if found[k][0] != "se" or t in outputs or found[k][3] not in blocked_in:
            continue
        rd = readers.get(t, [])
        if len(rd) == 1 and rd[0] in chosen and found[rd[0]][0] == "pw" \
                and steps[rd[0]][2][0] == t and found[rd[0]][2] != t:
            folds[rd[0]] = k
    return folds


def blocked_regions(steps: list[tuple], constants: dict, outputs: set[str]) -> list[tuple]:
    """``steps`` (fused, as ``fuse_steps`` makes them) with the steps of blocked regions
    replaced by ones that pass blocked tensors (see the module docstring)."""
    if not ENABLED:
        return steps
    found = _members(steps, constants)
    chosen = _regions(steps, found)
    if not chosen:
        return steps
    readers: dict[str, list[int]] = {}
    for k, st in enumerate(steps):
        for n in st[2]:
            readers.setdefault(n, []).append(k)
    blocked_in = {steps[k][3] for k in chosen if found[k][0] != "gap"}

    def reads_blocked(j: int, name: str) -> bool:
        return j in chosen and not (found[j][0] == "dn" and steps[j][2][0] == name)

    folds = _folds(steps, found, chosen, readers, outputs, blocked_in)
    gating = {k: j for j, k in folds.items()}
    preps = {k: found[k][1]() if found[k][0] in ("pw", "dw", "dn") else found[k][1]
             for k in chosen}
    # a fold's weights times the gates: written by the gates step, read by the 1x1 step
    scaled = {j: Scaled(preps[j]) for j in folds}
    out = list(steps)
    last_read: dict[str, int] = {}
    for k in sorted(chosen):
        kind, _, res, x, _ = found[k]
        prep = preps[k]
        st = steps[k]
        t = st[3]
        inside = [j for j in readers.get(t, []) if reads_blocked(j, t)]
        plain = kind == "gap" or t in outputs or len(inside) < len(readers.get(t, []))
        blocked = kind != "gap" and bool(inside)
        names = ([t + BLOCKED] if blocked else []) + ([t] if plain else [])
        ins = [x + BLOCKED if x in blocked_in and kind != "dn" else x] + list(st[2][1:])
        if k in gating:  # only the gates; the 1x1 step that reads the output scales
            kind, names = "gates", [t + GATES]
        if k in folds:  # the squeeze-and-excitation's input and gates instead of its output
            se = steps[folds[k]]
            x = se[2][0]
            ins[:1] = [x + BLOCKED, se[3] + GATES]
            last_read[se[3] + GATES] = k
        if res is not None:
            ins[-1] = res + BLOCKED if res in blocked_in else res
        for n in ins[:1] + ins[-1:]:
            if n.endswith(BLOCKED):
                last_read[n] = k
        fn = step_fn(kind, prep, st[0], res is not None, ins[0].endswith(BLOCKED),
                     ins[-1].endswith(BLOCKED), blocked, plain, found, steps, x,
                     scaled.get(k) or scaled.get(gating.get(k)))
        out[k] = (st[0], fn, tuple(ins), names[0] if len(names) == 1 else None,
                  list(enumerate(names)), st[5], st[6], None)
    gone = [list(st[5]) for st in out]
    for n, k in last_read.items():
        gone[k].append(n)
    return [st[:5] + (tuple(g),) + st[6:] for st, g in zip(out, gone)]


