"""``If`` on a GPU backend: the condition is read on the CPU, then the branch taken runs
layer by layer on the backend (each branch layer falls back to the CPU on its own)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from engine.errors import KernelError
from engine.model import Graph, Layer
from engine.ops.control import taken_branch
from engine.passes.cpu_forced import forced_names
from engine.plan import Placement
from engine.profile import LayerTiming


def run_if(worker, layer: Layer, ins: list, timings: list[LayerTiming], t_run: float) -> list:
    """Run the taken branch of ``layer``; returns one Slot per output of the If."""
    from engine.run_loops import Slot, _run_layer, meta_of

    backend, cpu = worker._backend, worker._cpu
    cond = np.asarray(worker._on_cpu(ins[0]))
    if cond.size != 1:
        raise KernelError(f"layer {layer.name!r} (If): the condition must have one element, "
                          f"it has {cond.size}")
    which, branch = taken_branch(layer, bool(cond.reshape(-1)[0]))
    outer = {n: s for n, s in zip(layer.captures, ins[len(layer.inputs):]) if s is not None}
    env: dict[str, Any] = dict(outer)
    env.update((n, Slot(meta_of(v), cpu=v)) for n, v in branch.constants.items())
    last = _last_use(branch)
    forced = forced_names(branch)
    on_gpu, counted, reasons = 0, 0, []
    try:
        for index, inner in enumerate(branch.layers):
            slots = [env[n] if n else None for n in inner.all_inputs()]
            metas = [None if s is None else s.meta for s in slots]
            if any(o in forced for o in inner.outputs if o):
                reason = None
                target = cpu  # needed on the CPU to plan other branch layers
            else:
                reason = backend.supports(inner, metas)
                target = backend if reason is None else cpu
            if reason is not None:
                reasons.append(reason)
            t0 = time.perf_counter()
            made = _run_layer(worker, inner, target, slots, metas)
            timings.append(LayerTiming(inner.name, inner.op_type, target.type.value,
                                       (time.perf_counter() - t0) * 1e3, "cpu-clock",
                                       target is not backend, (t0 - t_run) * 1e3))
            on_gpu += target is backend
            counted += target is backend or reason is not None
            env.update((n, s) for n, s in zip(inner.outputs, made) if n)
            for n in [n for n in inner.all_inputs() if n and last.get(n) == index]:
                _drop(backend, env, n, outer)
        outs, handed = [], {}
        for spec in branch.outputs:
            slot = handed.get(spec.name) or env[spec.name]
            if spec.name in outer or spec.name in branch.constants or spec.name in handed:
                # a pass-through or a repeated output: the If's output must not share a
                # device handle that something else frees
                slot = Slot(slot.meta, cpu=worker._on_cpu(slot))
            else:
                handed[spec.name] = env.pop(spec.name)
            outs.append(slot)
    finally:
        for n in list(env):
            _drop(backend, env, n, outer)
    note = f"native: took the {which} branch, {on_gpu} of {counted} layers on " \
           f"{worker.backend_type.name} (not counting CPU-forced ones)"
    if reasons:
        note += f" (the rest on the CPU: {reasons[0]})"
    worker._plan.placement[layer.name] = Placement(worker.backend_type, note)
    return outs


def _last_use(graph: Graph) -> dict[str, int]:
    last: dict[str, int] = {}
    for i, inner in enumerate(graph.layers):
        for n in inner.all_inputs():
            if n:
                last[n] = i
    for spec in graph.outputs:
        last[spec.name] = len(graph.layers)
    return last


def _drop(backend, env: dict, name: str, outer: dict) -> None:
    if name in outer:
        return
    slot = env.pop(name, None)
    if slot is not None and slot.dev is not None:
        backend.free(slot.dev)

