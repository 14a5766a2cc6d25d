"""Fusions the CPU run loop makes in its own plan (the model is left as imported, so the GPU
backends and captures see every layer).

A fused step runs one kernel call in place of a short chain whose intermediates nobody else
reads, saving a pass over memory and a layer's dispatch:

* Conv -> Add or two-input Sum (a residual of the output's shape) [-> Relu]: the residual
  (and the Relu) are applied in the Conv's epilogue, block by block, while the block is
  still in cache;
* Conv -> Sigmoid + Mul (SiLU), Conv -> HardSigmoid + Mul, Conv -> HardSwish: the
  activation becomes the Conv's epilogue (when the Conv has no fused activation yet);
  ``Clip(0, c) / c`` likewise (``step_fusion_conv``; HardSwish and HardSigmoid written out
  with ``+ 3`` become fused activations at import, ``passes.fusion_hswish``);
* Convs whose outputs are all of a channel Concat's inputs write into its output
  (``step_fusion_concat``);
* Conv -> MaxPool with kernel = stride and no padding: the pool runs in the Conv's
  epilogue (``conv_pool_fused``);
* a grouped 1x1 Conv -> channel shuffle (Reshape, Transpose, Reshape): the Conv writes the
  shuffled order (``step_fusion_shuffle``);
* squeeze-and-excitation (GlobalAveragePool, two 1x1 Convs, Mul) as one step
  (``step_fusion_conv``, ``kernels_se``);
* BatchNormalization -> Relu: one scale, shift and clamp pass;
* attention (MatMul, scale, mask, Softmax, MatMul) and Erf-form GELU: ``step_fusion_nlp``;
* ConvNeXt's channels-last LayerNorm and layer scale between Transposes, and the Transpose
  back with the residual: ``step_fusion_channels``;
* MatMul by a constant weight + bias Add [+ GELU | + residual Add]: ``step_fusion_linear``.

The fused step runs where the last absorbed layer was (every input it reads exists by
then). When a kernel cannot take the fused form at run time (other dtype, a residual that
broadcasts), it returns None and the absorbed layers run one by one.
"""

from __future__ import annotations

from engine.backends.cpu.activation import (
    ACT_NONE,
    ACT_RELU,
    ACT_SILU,
    ACT_XHARDSIGMOID,
)
from engine.backends.cpu.conv_pool_fused import match_conv_maxpool
from engine.backends.cpu.kernels_conv import conv
from engine.backends.cpu.kernels_norm import batch_norm
from engine.backends.cpu.step_fusion_channels import (
    match_layer_norm_channels,
    match_scale_to_nchw_add,
    match_to_nchw_add,
)
from engine.backends.cpu.step_fusion_concat import match_concat_of_convs
from engine.backends.cpu.step_fusion_conv import (
    match_clip_div,
    match_squeeze_excite,
)
from engine.backends.cpu.step_fusion_linear import match_linear
from engine.backends.cpu.step_fusion_nlp import (
    match_attention,
    match_gelu,
    match_gelu_tanh,
    match_layer_norm,
)
from engine.backends.cpu.step_fusion_shuffle import match_conv_shuffle

NO_POST = (ACT_NONE, 0.0, 0.0)


def _plain(layer) -> bool:
    return layer.domain in ("", "ai.onnx") and not layer.captures


def fuse_steps(steps: list[tuple], constants: dict | None = None) -> list[tuple]:
    """``steps`` as ``Worker._cpu_steps`` makes them (their ``gone`` lists say which names
    may be dropped) -> steps with fused chains, and two more fields: the layers a step
    absorbed (timed as 0 ms, yielded after it) and the original steps it replaces (run one
    by one when the fused kernel declines), or None. ``constants`` (the model's) let
    matchers check scalar factors such as an attention scale."""
    constants = constants or {}
    users: dict[str, list[int]] = {}
    for i, st in enumerate(steps):
        for n in st[2]:
            if n:
                users.setdefault(n, []).append(i)
    droppable = {n: i for i, st in enumerate(steps) for n in st[5]}

    def only_users(name: str, count: int) -> list[int] | None:
        u = users.get(name, [])
        if name not in droppable or len(u) != count or len(set(u)) != count:
            return None
        return u

    at: dict[int, tuple] = {}
    owner: dict[int, int] = {}  # original step -> step that runs it
    for i, st in enumerate(steps):
        layer = st[0]
        if i in owner or st[3] is None or st[1] is None or not _plain(layer):
            continue
        if layer.op_type == "Conv":
            fused = _conv_chain(i, steps, st[3], only_users, constants) \
                or match_concat_of_convs(i, steps, st[3], only_users, constants) \
                or match_conv_maxpool(i, steps, st[3], only_users, constants) \
                or match_conv_shuffle(i, steps, st[3], only_users, constants)
        elif layer.op_type == "GlobalAveragePool":
            fused = match_squeeze_excite(i, steps, st[3], only_users, constants)
        elif layer.op_type == "BatchNormalization" and len(layer.outputs) == 1:
            fused = _bn_relu(i, steps, st[3], only_users)
        elif layer.op_type == "MatMul":
            fused = match_attention(i, steps, st[3], only_users, constants) \
                or match_linear(i, steps, st[3], only_users, constants)
        elif layer.op_type in ("Div", "Mul"):
            fused = match_gelu(i, steps, st[3], only_users, constants) \
                or match_scale_to_nchw_add(i, steps, st[3], only_users, constants)
        elif layer.op_type == "Pow":
            fused = match_gelu_tanh(i, steps, st[3], only_users, constants)
        elif layer.op_type == "ReduceMean":
            fused = match_layer_norm(i, steps, st[3], only_users, constants)
        elif layer.op_type == "Transpose":
            fused = match_layer_norm_channels(i, steps, st[3], only_users, constants) \
                or match_to_nchw_add(i, steps, st[3], only_users, constants)
        else:
            fused = None
        if fused is None:
            continue
        fn, parts, out_name = fused
        if any(j in owner or steps[j][1] is None for j in parts):
            continue
        inside = {n for j in (i, *parts) for _, n in steps[j][4]}
        ins = getattr(fn, "wants", None) or \
            st[2] + tuple(n for j in parts for n in steps[j][2] if n and n not in inside)
        order = sorted((i, *parts))  # torch's GELU computes x/2 before the chain's Div
        last = order[-1]
        # the layer the profile shows the step's time on: the first, unless the matcher
        # names another (attention's Q K product rather than a Transpose it absorbed)
        lead = getattr(fn, "reports", order[0])
        at[last] = (steps[lead][0], fn, ins, out_name, [(0, out_name)], (),
                    tuple(steps[j][0] for j in order if j != lead),
                    [steps[j] + ((), None) for j in order])
        for j in (i, *parts):
            owner[j] = last
    out: list[tuple] = []
    where: dict[int, int] = {}  # original step -> index in ``out``
    for i, st in enumerate(steps):
        if i in at:
            where.update({j: len(out) for j, o in owner.items() if o == i})
            out.append(at[i])
        elif i not in owner:
            where[i] = len(out)
            out.append(st + ((), None))
    # names are dropped after their last reader in the new order (a fused step runs later
    # than its first layer did), or where their original step now runs
    last_read: dict[str, int] = {}
    for k, st in enumerate(out):
        for n in st[2]:
            if n in droppable:
                last_read[n] = k
    gone: list[list[str]] = [[] for _ in out]
    for n, i in droppable.items():
        gone[max(last_read.get(n, -1), where[i])].append(n)
    return [st[:5] + (tuple(g),) + st[6:] for st, g in zip(out, gone)]


def _conv_chain(i, steps, t, only_users, constants):
    fused = match_clip_div(i, steps, t, only_users, constants)
    if fused is not None:
        return fused
    conv_layer = steps[i][0]
    n_in = len(steps[i][2])
    u = only_users(t, 1)
    if u is not None:
        j = u[0]
        nxt = steps[j][0]
        if not _plain(nxt) or steps[j][3] is None:
            return None
        if nxt.op_type in ("Add", "Sum") and len(steps[j][2]) == 2 and t in steps[j][2]:
            other = steps[j][2][1] if steps[j][2][0] == t else steps[j][2][0]
            if not other or other == t:
                return None
            parts, out_name, post = [j], steps[j][3], NO_POST
            v = only_users(out_name, 1)
            if v is not None and steps[v[0]][0].op_type == "Relu" and _plain(steps[v[0]][0]) \
                    and steps[v[0]][3] is not None:
                parts.append(v[0])
                out_name, post = steps[v[0]][3], (ACT_RELU, 0.0, 0.0)

            def residual(layer, args, n_in=n_in, post=post):
                return conv(layer, args[:n_in], res=args[n_in], post=post)

            return residual, parts, out_name
        if nxt.op_type == "HardSwish" and not conv_layer.attr("activation"):
            act = (ACT_XHARDSIGMOID, 1.0 / 6.0, 0.5)
            return (lambda layer, args: conv(layer, args, act=act)), [j], steps[j][3]
        return None
    u = only_users(t, 2)
    if u is None or conv_layer.attr("activation"):
        return None
    gate, mul = u if steps[u[0]][0].op_type in ("Sigmoid", "HardSigmoid") else u[::-1]
    g, m = steps[gate][0], steps[mul][0]
    if g.op_type not in ("Sigmoid", "HardSigmoid") or m.op_type != "Mul" or gate > mul:
        return None
    s = steps[gate][3]
    if not (_plain(g) and _plain(m)) or s is None or only_users(s, 1) != [mul] \
            or sorted(steps[mul][2]) != sorted([t, s]) or steps[mul][3] is None:
        return None
    if g.op_type == "Sigmoid":
        act = (ACT_SILU, 0.0, 0.0)
    else:
        act = (ACT_XHARDSIGMOID, float(g.attr("alpha", 0.2)), float(g.attr("beta", 0.5)))
    return (lambda layer, args: conv(layer, args, act=act)), [gate, mul], steps[mul][3]


def _bn_relu(i, steps, t, only_users):
    if steps[i][0].attr("training_mode", 0):
        return None
    u = only_users(t, 1)
    if u is None or steps[u[0]][0].op_type != "Relu" or not _plain(steps[u[0]][0]) \
            or steps[u[0]][3] is None:
        return None
    return (lambda layer, args: batch_norm(layer, args, relu=True)), [u[0]], steps[u[0]][3]
