"""The worker's two run loops, as generators yielding each layer once it is scheduled.

``run_on_cpu`` is the CPU backend's lean loop: plain values, no metadata per layer (small
models run hundreds of layers of a few microseconds each). ``run_placed`` runs a plan on a
GPU backend, falling back to the CPU layer by layer, and frees everything it allocated
when the run fails or is abandoned.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np

from engine.backends import BackendType
from engine.backends.cpu import threads
from engine.backends.cpu.interpreter import call_kernel, kernel_failure
from engine.errors import EngineError, KernelError, UnsupportedOpError
from engine.model import Layer
from engine.ops import op_for
from engine.ops.base import Meta, meta_of
from engine.plan import NATIVE, SYMBOLIC, UNDECIDED, Placement, Plan
from engine.profile import LayerTiming
from engine.run_branch import run_if as _run_if
from engine.step_memo import holdable as memo_holdable
from engine.step_memo import keepable as memo_keepable
from engine.step_memo import key_of as memo_key
from engine.step_memo import same_objects as memo_same
from engine.tensor import Stored, free_released

#: CPU kernels that read only their input's shape (a device input is not read back for them)
META_ONLY = frozenset({"Shape", "Size"})


class Slot:
    """A tensor during a placed run: its CPU value and/or device handle, and its metadata."""

    __slots__ = ("cpu", "dev", "meta")

    def __init__(self, meta: Meta, cpu: Any = None, dev: Any = None):
        self.meta, self.cpu, self.dev = meta, cpu, dev


def run_on_cpu(worker, feeds: dict[str, Any], names: list[str], results: dict[str, Any],
               keep: set[str], tuner=None, key=None) -> Iterator[Layer]:
    """Run every layer with the CPU kernels; at the end, ``results`` maps those of ``names``
    (outputs and captures) the run computed to their values. ``keep`` names tensors never
    freed (captures). ``tuner``: the worker's ``ThreadTuner`` (None: no tuning for this
    run), which chooses the layers that run on one thread for inputs of ``key`` (their
    dtypes and shapes).

    The loop body is what every layer pays: look up the inputs, call the kernel, store the
    outputs, drop dead tensors, take two clock readings. Profile records are built after the
    outputs have been handed over, off the latency path.
    """
    cpu = worker._cpu
    free_released()
    steps = worker._cpu_steps(fused=not keep)
    memo_kinds, memo = worker._cpu_memo(fused=not keep)
    values: dict[str, Any] = dict(feeds)
    values.update(worker._constants)
    marks: list[float] = []
    mark, clock = marks.append, time.perf_counter
    # per step, whether it runs on one thread (``thread_tuning``; None: all split)
    alone = None if tuner is None else tuner.modes(key, len(steps))
    serial = False
    t_run = clock()
    cpu.begin_run()
    try:
        for k, (layer, fn, in_names, single, out_names, gone, absorbed, parts) in enumerate(steps):
            if alone is not None and alone[k] is not serial:
                serial = alone[k]
                threads.set_serial(serial)
            args = [values[n] if n else None for n in in_names]
            t0 = clock()
            if fn is None:  # no kernel: run_layer raises the user-facing error
                cpu.run_layer(layer, args, [None if a is None else meta_of(a) for a in args])
            if memo_kinds[k]:
                result = _memo_step(memo, k, memo_kinds[k], fn, layer, args,
                                    worker._const_values)
            else:
                try:
                    result = fn(layer, args)
                except (KernelError, UnsupportedOpError):
                    raise
                except Exception as exc:
                    raise kernel_failure(layer, exc) from exc
            if parts is not None and result is None:  # the fused kernel declined these inputs
                for part in parts:
                    _run_step(cpu, part, values)
            elif single is not None:
                if type(result) is tuple:
                    if not result:
                        raise KernelError(f"layer {layer.name!r} ({layer.op_type}) made no output")
                    result = result[0]
                values[single] = result
            else:
                outs = result if type(result) is tuple else (result,)
                for i, name in out_names:
                    values[name] = outs[i] if i < len(outs) else None
            mark(t0)
            mark(clock())
            if keep:
                gone = [n for n in gone if n not in keep]
            for n in gone:
                values.pop(n, None)
            yield layer
            if absorbed:
                yield from absorbed
    finally:
        if serial:
            threads.set_serial(False)
    if tuner is not None and len(marks) == 2 * len(steps):
        tuner.record(marks)
    cpu.flush()
    # the profile first (its records are built when read), so a caller that has the outputs
    # reads this run's profile, not the previous one's
    total_ms = (clock() - t_run) * 1e3
    kind = cpu.type.value
    worker._finish_profile(lambda: _cpu_timings(worker, steps, marks, t_run, kind), total_ms)
    for name in names:
        if name in values:
            results[name] = values[name]


def _memo_step(memo: list, k: int, kind: int, fn, layer: Layer, args: list, constants):
    """Step ``k``'s result: the kept one when its inputs repeat (``step_memo``), else the
    kernel's (kept for the next run when small). A slot holds (key, result, the input
    objects themselves unless the step is a Shape of a data tensor)."""
    hit = memo[k]
    if hit is not None and kind == 1 and memo_same(args, hit[2]):
        return hit[1]
    key = memo_key(args, kind, constants)
    if key is not None and hit is not None and hit[0] is not None and hit[0] == key:
        if kind == 1:
            memo[k] = (key, hit[1], tuple(args))
        return hit[1]
    result = call_kernel(fn, layer, args)
    if memo_keepable(result) and (key is not None or kind == 1 and memo_holdable(args,
                                                                                constants)):
        # inputs too large for a key (a kept mask, say) are matched by identity alone: a
        # kept producer hands out the same object every run, and holding it here keeps
        # its id from being reused
        memo[k] = (key, result, tuple(args) if kind == 1 else None)
    return result


#: CPU values up to this many elements take part in a support check's cache key (shapes,
#: axes, scalars); a layer with a larger CPU input is checked on every run
SUPPORT_KEY_VALUES = 64


def _support_key(metas: list[Meta | None], constants: dict[int, Any]) -> tuple | None:
    """What a backend's support check of a layer depends on: shapes, dtypes, small CPU values
    and which model constants (by identity: they never change); None: not cacheable."""
    key = []
    for m in metas:
        if m is None:
            key.append(None)
            continue
        v = m.value
        if v is None:
            key.append((m.shape, m.dtype))
        elif constants.get(id(v)) is v:
            key.append((m.shape, m.dtype, id(v)))
        elif isinstance(v, np.ndarray) and v.size <= SUPPORT_KEY_VALUES:
            key.append((m.shape, m.dtype, v.tobytes()))
        else:
            return None
    return tuple(key)


def _run_step(cpu, step, values: dict[str, Any]) -> None:
    """One unfused step (of a fused one whose kernel declined), outside the timed loop."""
    layer, fn = step[0], step[1]
    args = [values[n] if n else None for n in step[2]]
    result = call_kernel(fn, layer, args)
    outs = result if type(result) is tuple else (result,)
    for i, name in step[4]:
        values[name] = outs[i] if i < len(outs) else None


def _cpu_timings(worker, steps, marks: list[float], t_run: float, kind: str
                 ) -> list[LayerTiming]:
    """Per layer of the model, in its order: a fused step's time goes to its first layer,
    the layers it absorbed are listed with 0 ms."""
    timings = []
    for step, t0, t1 in zip(steps, marks[::2], marks[1::2]):
        timings.append(LayerTiming(step[0].name, step[0].op_type, kind, (t1 - t0) * 1e3,
                                   "cpu-clock", False, (t0 - t_run) * 1e3))
        for layer in step[6]:
            timings.append(LayerTiming(layer.name, layer.op_type, kind, 0.0, "cpu-clock",
                                       False, (t1 - t_run) * 1e3))
    if any(step[6] for step in steps):
        order = {layer.name: k for k, layer in enumerate(worker.model.layers)}
        timings.sort(key=lambda t: order.get(t.name, 0))
    return timings


def run_placed(worker, plan: Plan, feeds: dict[str, Any], futures: dict[str, Future],
               keep: set[str]) -> Iterator[Layer]:
    """Run ``plan`` on the worker's GPU backend with CPU fallback per layer (or the
    backend's replay of the plan, where it has one)."""
    backend, cpu = worker._backend, worker._cpu
    fast = backend.replay_run(worker, plan, feeds, futures, keep)
    if fast is not None:
        yield from fast
        return
    free_released()
    slots: dict[str, Slot] = {n: Slot(meta_of(v), cpu=v) for n, v in feeds.items()}
    consts = worker._const_slots
    slots.update(consts)
    timings: list[LayerTiming] = []
    last_use = worker._last_use
    placement, accepted = plan.placement, plan.accepted
    const_values = worker._const_values
    t_run = time.perf_counter()
    handed_over = False
    backend.run_context(placement, keep, plan.metas)
    backend.begin_run()
    try:
        for index, layer in enumerate(worker.model.layers):
            place = placement[layer.name]
            ins = [slots[n] if n else None for n in layer.all_inputs()]
            metas = [None if s is None else s.meta for s in ins]
            target = backend if place.backend is not BackendType.CPU else cpu
            key = known = None
            if target is not cpu and layer.op_type != "If":
                key = _support_key(metas, const_values)
                seen = accepted.get(layer.name) if key is not None else None
                if seen is not None and seen[0] == key:
                    reason, known = None, seen[1]
                else:
                    reason = backend.supports(layer, metas)
                if reason is not None:
                    target = cpu
                    placement[layer.name] = Placement(BackendType.CPU, f"fallback: {reason}")
                elif place.reason in (UNDECIDED, SYMBOLIC):
                    placement[layer.name] = Placement(place.backend, NATIVE)
            if target is cpu and layer.op_type in META_ONLY and layer.domain in ("", "ai.onnx"):
                # only the shape is read: a stand-in of it, no readback and no wait for the
                # GPU (which stalled the host's recording of every recorded run)
                ins = [s if s is None or s.cpu is not None or s.dev is None else
                       Slot(s.meta, cpu=np.broadcast_to(np.zeros((), s.meta.dtype), s.meta.shape))
                       for s in ins]
            elif target is cpu and any(s is not None and s.cpu is None and s.dev is not None
                                       for s in ins):
                # waiting for queued GPU work and the readback is its own bar, not the layer's
                ts = time.perf_counter()
                for s in ins:
                    if s is not None:
                        worker._on_cpu(s)
                metas = [None if s is None else s.meta for s in ins]
                timings.append(LayerTiming(f"{layer.name}/sync", "Sync", "sync",
                                           (time.perf_counter() - ts) * 1e3, "cpu-clock",
                                           False, (ts - t_run) * 1e3))
            t0 = time.perf_counter()
            if layer.op_type == "If" and target is backend:
                new = _run_if(worker, layer, ins, timings, t_run)
            else:
                new = _run_layer(worker, layer, target, ins, metas, known)
                if key is not None and known is None and target is backend:
                    accepted[layer.name] = (key, [slot.meta for slot in new])
            t1 = time.perf_counter()
            for name, slot in zip(layer.outputs, new):
                if name:
                    slots[name] = slot
            timings.append(LayerTiming(layer.name, layer.op_type, target.type.value,
                                       (t1 - t0) * 1e3, "cpu-clock", target is not backend,
                                       (t0 - t_run) * 1e3))
            _free_dead(backend, slots, layer, index, last_use, consts, keep)
            yield layer
        backend.flush()
        for name, fut in futures.items():
            slot = slots.get(name)
            if slot is None:
                fut.set_exception(EngineError(f"tensor {name!r} was not computed"))
            elif slot.dev is not None:
                fut.set_result(Stored(backend, slot.dev, slot.meta))
            else:
                fut.set_result(Stored(cpu, slot.cpu, slot.meta))
        handed_over = True
        backend.end_run({n: slots.get(n) for n in futures})
    finally:
        if not handed_over:  # failed or abandoned: free what this run allocated
            _free_all(backend, slots, consts)
            try:
                backend.flush()  # what was recorded still runs; its buffers are pooled
            except Exception:  # noqa: BLE001 - the run's own error is the one to report
                pass
    worker._finish_profile(timings, (time.perf_counter() - t_run) * 1e3)


def _run_layer(worker, layer: Layer, target, ins: list[Slot | None],
               metas: list[Meta | None], out_metas: list[Meta] | None = None) -> list[Slot]:
    """Run one layer on ``target``; ``out_metas``: its outputs' metadata when already known
    (a GPU layer accepted with the same inputs before), else inferred here."""
    cpu = worker._cpu
    try:
        if target is cpu:
            args = [None if s is None else worker._on_cpu(s) for s in ins]
            outs = cpu.run_layer(layer, args, metas)
            return [Slot(meta_of(v), cpu=v) for v in outs]
        args = [None if s is None else worker._on_device(s) for s in ins]
        if out_metas is None:
            out_metas = op_for(layer).infer(layer, metas)
        outs = target.run_layer(layer, args, metas, out_metas)
        return [Slot(m, dev=h) for m, h in zip(out_metas, outs)]
    except EngineError:
        raise
    except Exception as exc:  # shape logic or upload rejecting these inputs
        shapes = ", ".join("none" if m is None else f"{m.dtype.name}{list(m.shape)}"
                           for m in metas)
        raise KernelError(f"layer {layer.name!r} ({layer.op_type}) cannot run on inputs "
                          f"{shapes}: {exc}") from exc


def _free_dead(backend, slots: dict[str, Slot], layer: Layer, index: int,
               last_use: dict[str, int], consts: dict, keep: set[str]) -> None:
    for n in set(layer.all_inputs()) | set(layer.outputs):
        if not n or last_use.get(n, -1) > index or n in consts or n in keep:
            continue
        slot = slots.pop(n, None)
        if slot is not None and slot.dev is not None:
            backend.free(slot.dev)


def _free_all(backend, slots: dict[str, Slot], consts: dict) -> None:
    for name, slot in slots.items():
        if name not in consts and slot.dev is not None:
            try:
                backend.free(slot.dev)
            except Exception:  # noqa: BLE001 - freeing after a failure is best effort
                pass
    slots.clear()
