"""Control-flow CPU kernels: If, Loop, Scan (opset 8 and 9+), SequenceMap.

Bodies are ``Graph`` attributes run with ``run_graph``. The worker passes the values
of ``layer.captures`` (outer-scope names the bodies read) after the regular inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.backends.cpu.interpreter import run_graph, run_kernel
from engine.backends.cpu.registry import KERNELS, cpu_kernel
from engine.errors import KernelError
from engine.model import Graph, Layer, TensorSpec
from engine.ops.control import taken_branch


def _split(layer: Layer, inputs: list) -> tuple[list, dict[str, Any]]:
    n = len(layer.inputs)
    return list(inputs[:n]), dict(zip(layer.captures, inputs[n:]))


def _as_spec(value: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Give a scalar the rank the body declares (some bodies take [1] for a scalar)."""
    if spec.shape is not None and len(spec.shape) == 1 and value.ndim == 0:
        return value.reshape(1)
    return value


def _scalar(value, what: str, layer: Layer):
    arr = np.asarray(value)
    if arr.size != 1:
        raise KernelError(f"layer {layer.name!r} ({layer.op_type}): {what} must have one "
                          f"element, got shape {list(arr.shape)}")
    return arr.reshape(-1)[0]


def _empty_like_spec(spec: TensorSpec, lead: int = 0) -> np.ndarray:
    """An empty stacked scan output, shaped from the body's declared output where known."""
    dtype = np.dtype(spec.dtype) if spec.dtype is not None else np.dtype(np.float32)
    rest = tuple(d if isinstance(d, int) else 0 for d in (spec.shape or ()))
    return np.zeros((lead, *rest), dtype=dtype)


def _passed_through(layer: Layer, branch: Graph) -> tuple | None:
    """For a branch made of Identity layers only (exporters write one for the side of a
    conditional step that changes nothing): per output, the index in the kernel's inputs
    of the outer value it is, or the branch constant. None for any other branch."""
    source: dict[str, str] = {}
    for inner in branch.layers:
        if inner.op_type != "Identity" or inner.domain not in ("", "ai.onnx"):
            return None
        name = inner.inputs[0]
        source[inner.outputs[0]] = source.get(name, name)
    passed = []
    for out in branch.outputs:
        name = source.get(out.name, out.name)
        if name in branch.constants:
            passed.append(branch.constants[name])
        elif name in layer.captures:
            passed.append(len(layer.inputs) + layer.captures.index(name))
        else:
            return None
    return tuple(passed)


def _branch_steps(layer: Layer, cond: bool):
    """The taken branch as (constants, [(kernel, layer, input names, output names)], output
    names, the names a pass-through branch hands on or None), made once per branch and kept
    on the If layer: a run then skips the kernel lookups and the branch's checks (a
    streaming model's resampling If: 3.2 -> ~1.5 us)."""
    memo = layer.__dict__.get("_cpu_if_steps")
    if memo is None:
        memo = layer.__dict__["_cpu_if_steps"] = {}
    steps = memo.get(cond)
    if steps is None:
        _, branch = taken_branch(layer, cond)
        body = []
        for inner in branch.layers:
            kernel = KERNELS.lookup(inner)
            if kernel is None:
                return None  # run_graph raises the user-facing error
            body.append((kernel.fn, inner, inner.all_inputs(), inner.outputs))
        steps = memo[cond] = (branch.constants, body, [o.name for o in branch.outputs],
                              _passed_through(layer, branch))
    return steps


@cpu_kernel("If")
def If(layer: Layer, inputs):
    cond = inputs[0]
    if type(cond) is np.ndarray and cond.size == 1:
        which = bool(cond.item())
    elif type(cond) is np.bool_:  # (what a comparison of two scalars gives)
        which = bool(cond)
    else:
        which = bool(_scalar(cond, "the condition", layer))
    steps = _branch_steps(layer, which)
    if steps is None:
        return tuple(run_graph(taken_branch(layer, which)[1], {}, _split(layer, inputs)[1]))
    constants, body, out_names, passed = steps
    if passed is not None:  # (a streaming model's If: 2.4 -> 0.7 us alone, 5.4 -> 3.2 in runs)
        return tuple([inputs[p] if type(p) is int else p for p in passed])
    env = _split(layer, inputs)[1]
    env.update(constants)
    for fn, inner, in_names, out_names_inner in body:
        outs = run_kernel(fn, inner, [env[n] if n else None for n in in_names])
        for name, value in zip(out_names_inner, outs):
            if name:
                env[name] = value
    return tuple(env[n] for n in out_names)


@cpu_kernel("Loop")
def Loop(layer: Layer, inputs):
    regular, outer = _split(layer, inputs)
    body: Graph = layer.attr("body")
    trip = regular[0] if regular else None
    cond = regular[1] if len(regular) > 1 else None
    carried = list(regular[2:])
    n_carried = len(carried)
    n_scan = len(body.outputs) - 1 - n_carried
    max_trip = None if trip is None else int(_scalar(trip, "the trip count M", layer))
    going = True if cond is None else bool(_scalar(cond, "the condition", layer))
    scans: list[list] = [[] for _ in range(n_scan)]
    i_spec, c_spec = body.inputs[0], body.inputs[1]
    i = 0
    while going and (max_trip is None or i < max_trip):
        feeds = {i_spec.name: _as_spec(np.array(i, dtype=np.int64), i_spec),
                 c_spec.name: _as_spec(np.array(going), c_spec)}
        for spec, value in zip(body.inputs[2:], carried):
            feeds[spec.name] = value
        outs = run_graph(body, feeds, outer)
        going = bool(_scalar(outs[0], "the loop condition", layer))
        carried = outs[1:1 + n_carried]
        for k in range(n_scan):
            scans[k].append(outs[1 + n_carried + k])
        i += 1
    stacked = []
    for k, values in enumerate(scans):
        if values:
            stacked.append(np.stack([np.asarray(v) for v in values]))
        else:
            stacked.append(_empty_like_spec(body.outputs[1 + n_carried + k]))
    return tuple(carried + stacked)


def _norm(axis: int, rank: int, layer: Layer) -> int:
    if not -rank <= axis < rank:
        raise KernelError(f"layer {layer.name!r}: axis {axis} is out of range for rank {rank}")
    return axis % rank


def _scan(layer: Layer, body: Graph, states: list, xs: list, outer: dict,
          in_axes: list[int], in_dirs: list[int], out_axes: list[int], out_dirs: list[int]):
    """Run a Scan body over ``xs``; returns (final states, stacked scan outputs)."""
    n_states = len(states)
    axes = [_norm(a, np.ndim(x), layer) for a, x in zip(in_axes, xs)]
    lengths = {x.shape[a] for x, a in zip(xs, axes)}
    if len(lengths) != 1:
        raise KernelError(f"layer {layer.name!r} (Scan): scan inputs have different sequence "
                          f"lengths {sorted(lengths)}")
    steps = lengths.pop()
    n_out = len(body.outputs) - n_states
    collected: list[list] = [[] for _ in range(n_out)]
    for t in range(steps):
        feeds = {spec.name: v for spec, v in zip(body.inputs, states)}
        for spec, x, a, d in zip(body.inputs[n_states:], xs, axes, in_dirs):
            feeds[spec.name] = np.take(x, steps - 1 - t if d else t, axis=a)
        outs = run_graph(body, feeds, outer)
        states = outs[:n_states]
        for k in range(n_out):
            collected[k].append(np.asarray(outs[n_states + k]))
    stacked = []
    for k, values in enumerate(collected):
        if not values:
            stacked.append(_empty_like_spec(body.outputs[n_states + k]))
            continue
        if out_dirs[k]:
            values = values[::-1]
        axis = _norm(out_axes[k], values[0].ndim + 1, layer)
        stacked.append(np.stack(values, axis=axis))
    return list(states), stacked


@cpu_kernel("Scan", since=9)
def Scan(layer: Layer, inputs):
    regular, outer = _split(layer, inputs)
    body: Graph = layer.attr("body")
    m = int(layer.attr("num_scan_inputs"))
    n_states = len(regular) - m
    n_out = len(body.outputs) - n_states
    in_axes = list(layer.attr("scan_input_axes") or [0] * m)
    in_dirs = list(layer.attr("scan_input_directions") or [0] * m)
    out_axes = list(layer.attr("scan_output_axes") or [0] * n_out)
    out_dirs = list(layer.attr("scan_output_directions") or [0] * n_out)
    states, stacked = _scan(layer, body, regular[:n_states], regular[n_states:], outer,
                            in_axes, in_dirs, out_axes, out_dirs)
    return tuple(states + stacked)


@cpu_kernel("Scan", since=8)
def Scan_8(layer: Layer, inputs):
    """Scan-8: a batch axis 0 on every input, optional per-batch sequence lengths."""
    regular, outer = _split(layer, inputs)
    body: Graph = layer.attr("body")
    m = int(layer.attr("num_scan_inputs"))
    lens, rest = regular[0], regular[1:]
    n_states = len(rest) - m
    states, xs = rest[:n_states], rest[n_states:]
    n_out = len(body.outputs) - n_states
    dirs = list(layer.attr("directions") or [0] * m)
    batch = (states + xs)[0].shape[0]
    finals: list[list] = [[] for _ in range(n_states)]
    outs: list[list] = [[] for _ in range(n_out)]
    for b in range(batch):
        length = xs[0].shape[1] if lens is None else int(np.asarray(lens).reshape(-1)[b])
        s, stacked = _scan(layer, body, [x[b] for x in states], [x[b, :length] for x in xs],
                           outer, [0] * m, dirs, [0] * n_out, [0] * n_out)
        for k, v in enumerate(s):
            finals[k].append(np.asarray(v))
        for k, v in enumerate(stacked):
            pad = xs[0].shape[1] - v.shape[0]
            outs[k].append(np.concatenate([v, np.zeros((pad, *v.shape[1:]), v.dtype)])
                           if pad > 0 else v)
    return tuple([np.stack(f) for f in finals] + [np.stack(o) for o in outs])


@cpu_kernel("SequenceMap", since=17)
def SequenceMap(layer: Layer, inputs):
    regular, outer = _split(layer, inputs)
    body: Graph = layer.attr("body")
    seq = regular[0]
    if not isinstance(seq, list):
        raise KernelError(f"layer {layer.name!r} (SequenceMap): input 0 must be a sequence")
    results: list[list] = [[] for _ in body.outputs]
    for i in range(len(seq)):
        feeds = {}
        for spec, value in zip(body.inputs, regular):
            if isinstance(value, list):
                if len(value) != len(seq):
                    raise KernelError(f"layer {layer.name!r} (SequenceMap): sequences have "
                                      f"different lengths {len(seq)} and {len(value)}")
                value = value[i]
            feeds[spec.name] = value
        for k, v in enumerate(run_graph(body, feeds, outer)):
            results[k].append(v)
    return tuple(results)
