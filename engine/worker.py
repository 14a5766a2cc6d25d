"""Worker: plans where each layer runs, schedules layers on a backend, profiles runs.

``schedule`` validates the inputs in the caller's thread (errors surface at once),
then queues the run on the engine thread and returns. Outputs are ``Tensor`` objects
whose data may still be pending; reading them back is explicit.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine import executor
from engine.backends import BackendType, create_backend
from engine.backends.base import Backend
from engine.backends.cpu import CpuBackend
from engine.backends.cpu.interpreter import run_kernel
from engine.backends.cpu.registry import KERNELS
from engine.errors import EngineError
from engine.input_check import check_inputs
from engine.model import Layer, Model
from engine.ops import op_for
from engine.ops.base import Meta
from engine.profile import LayerTiming, Profile
from engine.tensor import Stored, Tensor, free_released

ProgressCallback = Callable[[str, float], None]


@dataclass
class Placement:
    """Which backend runs a layer and why (the reason is shown to users)."""

    backend: BackendType
    reason: str

    @property
    def is_fallback(self) -> bool:
        return self.reason.startswith("fallback")


class _Slot:
    """A tensor during a run: its CPU value and/or device handle, and its metadata."""

    __slots__ = ("cpu", "dev", "meta")

    def __init__(self, meta: Meta, cpu: Any = None, dev: Any = None):
        self.meta, self.cpu, self.dev = meta, cpu, dev


class Worker:
    """Runs a ``Model`` on one backend, falling back to the CPU layer by layer."""

    def __init__(self, model: Model, backend_type: BackendType | str = BackendType.CPU, *,
                 progress: ProgressCallback | None = None, **backend_options: Any):
        self.model = model
        self.backend_type = BackendType.parse(backend_type)
        self._cpu = CpuBackend()
        self._closed = False
        if self.backend_type is BackendType.CPU:
            self._backend: Backend = self._cpu
        else:
            self._backend = executor.call(
                functools.partial(create_backend, self.backend_type, **backend_options))
        self.placement: dict[str, Placement] = self._plan()
        self._last_use = self._liveness()
        self._const_slots = {n: _Slot(_meta_of(v), cpu=v) for n, v in model.constants.items()}
        self._cpu_steps: list[tuple] | None = None
        self._last_profile: Profile | None = None
        self._pending_profile: Future | None = None
        self._outputs: dict[str, Tensor] = {}
        prepare = getattr(self._backend, "prepare", None)
        if prepare is not None:
            executor.call(prepare, model, self.placement, progress)

    # -- planning -------------------------------------------------------------------------
    def _plan(self) -> dict[str, Placement]:
        plan = {}
        forced = self.model.cpu_forced
        for layer in self.model.layers:
            if self.backend_type is BackendType.CPU:
                plan[layer.name] = Placement(BackendType.CPU, "CPU backend")
                continue
            forced_out = [o for o in layer.outputs if o in forced]
            if forced_out:
                plan[layer.name] = Placement(
                    BackendType.CPU, f"CPU-forced: computes {forced_out[0]!r}, needed on the "
                    "CPU to plan other layers")
                continue
            reason = self._backend.supports(layer, [self._static_meta(n) for n in layer.inputs])
            if reason is None:
                plan[layer.name] = Placement(self.backend_type, "native")
            else:
                plan[layer.name] = Placement(BackendType.CPU, f"fallback: {reason}")
        return plan

    def _static_meta(self, name: str) -> Meta | None:
        if not name:
            return None
        if name in self.model.constants:
            return _meta_of(self.model.constants[name])
        spec = self.model.spec(name)
        if spec is None or spec.shape is None or spec.dtype is None:
            return None
        return Meta(tuple(spec.shape), np.dtype(spec.dtype))

    def _liveness(self) -> dict[str, int]:
        last: dict[str, int] = {}
        for i, layer in enumerate(self.model.layers):
            for n in layer.all_inputs():
                if n:
                    last[n] = i
        for o in self.model.outputs:
            last[o.name] = len(self.model.layers)
        return last

    # -- scheduling -----------------------------------------------------------------------
    def schedule(self, inputs: dict[str, Any] | np.ndarray | Tensor) -> Worker:
        """Queue a run on ``inputs`` and return at once; outputs are read with ``peek_output``."""
        feeds = self._check_inputs(inputs)
        steps, finish = self._start_run(feeds)

        def run_all():
            for _ in steps:
                pass

        job = executor.submit(run_all)
        job.add_done_callback(finish)
        return self

    def schedule_iterable(self, inputs: dict[str, Any] | np.ndarray | Tensor) -> Iterator[Layer]:
        """Schedule one layer per step; yields each layer after it has been scheduled.

        Inputs are checked at once (as in ``schedule``). Closing or dropping the iterator
        before the end fails the run's outputs with an EngineError instead of leaving them
        pending forever.
        """
        feeds = self._check_inputs(inputs)
        steps, finish = self._start_run(feeds)
        return _Steps(steps, finish)

    def peek_output(self, name: str | None = None) -> Tensor:
        """The output tensor of the last scheduled run (first output when ``name`` is None)."""
        if not self._outputs:
            raise EngineError("nothing has been scheduled yet; call schedule() first")
        if name is None:
            name = self.model.outputs[0].name
        if name not in self._outputs:
            names = ", ".join(repr(o.name) for o in self.model.outputs)
            raise EngineError(f"the model has no output {name!r}; its outputs are {names}")
        return self._outputs[name]

    def _start_run(self, feeds: dict[str, Any]):
        if self._closed:
            raise EngineError("the worker is closed")
        futures = {o.name: Future() for o in self.model.outputs}
        owns = self._backend is not self._cpu
        self._outputs = {n: Tensor(n, f, owns_handle=owns) for n, f in futures.items()}
        steps = self._run(feeds, futures)

        def finish(job: Future) -> None:
            exc = job.exception()
            for f in futures.values():
                if not f.done():
                    f.set_exception(exc or EngineError("the run produced no value for this output"))

        return steps, finish

    def _steps_on_cpu(self) -> list[tuple]:
        """Per layer: (layer, kernel fn or None, input names, output names, names whose last
        use it is): what the CPU backend's run loop needs, derived once."""
        dead: list[list[str]] = [[] for _ in self.model.layers]
        for n, i in self._last_use.items():
            if i < len(dead) and n not in self._const_slots:
                dead[i].append(n)
        steps = []
        for layer, gone in zip(self.model.layers, dead):
            kernel = KERNELS.lookup(layer)
            steps.append((layer, None if kernel is None else kernel.fn, layer.all_inputs(),
                          [(i, n) for i, n in enumerate(layer.outputs) if n], gone))
        return steps

    def _run(self, feeds: dict[str, Any], futures: dict[str, Future]) -> Iterator[Layer]:
        backend, cpu = self._backend, self._cpu
        if backend is cpu:
            return self._run_on_cpu(feeds, futures)
        return self._run_placed(feeds, futures)

    def _run_on_cpu(self, feeds: dict[str, Any], futures: dict[str, Future]) -> Iterator[Layer]:
        """The run loop of the CPU backend: plain values, no metadata or placement per layer
        (small models run hundreds of layers of a few microseconds each)."""
        cpu = self._cpu
        free_released()
        if self._cpu_steps is None:
            self._cpu_steps = self._steps_on_cpu()
        values: dict[str, Any] = dict(feeds)
        values.update((n, s.cpu) for n, s in self._const_slots.items())
        timings: list[LayerTiming] = []
        add, clock, kind = timings.append, time.perf_counter, cpu.type.value
        t_run = clock()
        cpu.begin_run()
        for layer, fn, in_names, out_names, gone in self._cpu_steps:
            args = [values[n] if n else None for n in in_names]
            t0 = clock()
            if fn is None:  # no kernel: run_layer raises the user-facing error
                outs = cpu.run_layer(layer, args, [None if a is None else _meta_of(a)
                                                   for a in args])
            else:
                outs = run_kernel(fn, layer, args)
            t1 = clock()
            for i, name in out_names:
                values[name] = outs[i]
            add(LayerTiming(layer.name, layer.op_type, kind, (t1 - t0) * 1e3, "cpu-clock",
                            False, (t0 - t_run) * 1e3))
            for n in gone:
                values.pop(n, None)
            yield layer
        cpu.flush()
        for name, fut in futures.items():
            if name not in values:
                fut.set_exception(EngineError(f"output {name!r} was not computed"))
            else:
                value = values[name]
                fut.set_result(Stored(cpu, value, _meta_of(value)))
        self._finish_profile(timings, (clock() - t_run) * 1e3)

    def _run_placed(self, feeds: dict[str, Any], futures: dict[str, Future]
                    ) -> Iterator[Layer]:
        backend, cpu = self._backend, self._cpu
        free_released()
        slots: dict[str, _Slot] = {n: _Slot(_meta_of(v), cpu=v) for n, v in feeds.items()}
        slots.update(self._const_slots)
        timings: list[LayerTiming] = []
        t_run = time.perf_counter()
        backend.begin_run()
        for index, layer in enumerate(self.model.layers):
            place = self.placement[layer.name]
            ins = [slots[n] if n else None for n in layer.all_inputs()]
            metas = [None if s is None else s.meta for s in ins]
            target = backend if place.backend is not BackendType.CPU else cpu
            if target is not cpu:
                reason = backend.supports(layer, metas)
                if reason is not None:
                    target = cpu
                    self.placement[layer.name] = Placement(BackendType.CPU, f"fallback: {reason}")
            t0 = time.perf_counter()
            if target is cpu:
                args = [None if s is None else self._on_cpu(s) for s in ins]
                outs = cpu.run_layer(layer, args, metas)
                out_metas = [_meta_of(v) for v in outs]
                new = [_Slot(m, cpu=v) for m, v in zip(out_metas, outs)]
            else:
                args = [None if s is None else self._on_device(s) for s in ins]
                out_metas = op_for(layer).infer(layer, metas)
                outs = backend.run_layer(layer, args, metas, out_metas)
                new = [_Slot(m, dev=h) for m, h in zip(out_metas, outs)]
            t1 = time.perf_counter()
            for name, slot in zip(layer.outputs, new):
                if name:
                    slots[name] = slot
            timings.append(LayerTiming(layer.name, layer.op_type, target.type.value,
                                       (t1 - t0) * 1e3, "cpu-clock", target is not backend,
                                       (t0 - t_run) * 1e3))
            self._free_dead(slots, layer, index)
            yield layer
        backend.flush()
        for name, fut in futures.items():
            slot = slots.get(name)
            if slot is None:
                fut.set_exception(EngineError(f"output {name!r} was not computed"))
            elif slot.dev is not None:
                fut.set_result(Stored(backend, slot.dev, slot.meta))
            else:
                fut.set_result(Stored(cpu, slot.cpu, slot.meta))
        total = (time.perf_counter() - t_run) * 1e3
        self._finish_profile(timings, total)

    def _finish_profile(self, timings: list[LayerTiming], total_ms: float) -> None:
        device = self._backend.collect_timings()
        profile = Profile(self.backend_type.value, timings, total_ms)
        if not isinstance(device, Future):
            _apply_device_times(profile, device)
            self._last_profile = profile
            return
        # device times resolve once the GPU has finished: the profile is published then,
        # and its total becomes the latency until the device was done
        t_start = time.perf_counter() - total_ms * 1e-3
        published: Future = Future()

        def publish(fut: Future) -> None:
            profile.total_ms = max(profile.total_ms, (time.perf_counter() - t_start) * 1e3)
            if fut.exception() is None:
                _apply_device_times(profile, fut.result())
            self._last_profile = profile
            published.set_result(None)

        self._pending_profile = published
        device.add_done_callback(publish)

    @property
    def last_profile(self) -> Profile | None:
        """Per-layer timings of the last completed run (waits for device timestamps of a run
        that has been recorded but whose GPU work is still in flight)."""
        pending = self._pending_profile
        if pending is not None:
            try:
                pending.result(timeout=60)
            except Exception:  # noqa: BLE001 - the profile keeps its CPU-clock times
                pass
        return self._last_profile

    @property
    def peak_memory_bytes(self) -> int | None:
        """Peak device memory of the plan, for backends that allocate device memory."""
        return getattr(self._backend, "peak_memory_bytes", None)

    def _on_cpu(self, slot: _Slot) -> Any:
        if slot.cpu is None and slot.dev is not None:  # (an empty optional is None on the CPU)
            self._backend.flush()
            slot.cpu = self._backend.download(slot.dev, slot.meta)
            slot.meta = Meta(slot.meta.shape, slot.meta.dtype, slot.cpu)
        return slot.cpu

    def _on_device(self, slot: _Slot) -> Any:
        if slot.dev is None:
            slot.dev = self._backend.upload(slot.cpu)
        return slot.dev

    def _free_dead(self, slots: dict[str, _Slot], layer: Layer, index: int) -> None:
        if self._backend is self._cpu:
            for n in layer.all_inputs():
                if n and self._last_use.get(n) == index and n not in self._const_slots:
                    slots.pop(n, None)
            return
        for n in set(layer.all_inputs()) | set(layer.outputs):
            if not n or self._last_use.get(n, -1) > index or n in self._const_slots:
                continue
            slot = slots.pop(n, None)
            if slot is not None and slot.dev is not None:
                self._backend.free(slot.dev)

    # -- input checking -------------------------------------------------------------------
    def _check_inputs(self, inputs) -> dict[str, Any]:
        return check_inputs(self.model.inputs, inputs)

    # -- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        """Release the backend's resources (after the queued work has run)."""
        if self._closed:
            return
        self._closed = True
        if self._backend is not self._cpu:
            executor.call(free_released)
            executor.call(self._backend.close)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _apply_device_times(profile: Profile, device: dict[str, float] | None) -> None:
    for t in profile.layers:
        if device and t.name in device and not t.fallback:
            t.ms, t.source = device[t.name], "gpu-timestamp"


class _Steps:
    """The iterator of ``schedule_iterable``: one layer per ``next``, on the engine thread."""

    def __init__(self, steps: Iterator[Layer], finish: Callable[[Future], None]):
        self._steps, self._finish, self._done = steps, finish, False

    def __iter__(self) -> _Steps:
        return self

    def __next__(self) -> Layer:
        if self._done:
            raise StopIteration
        try:
            layer = executor.call(next, self._steps, None)
        except BaseException as exc:
            self._end(exc)
            raise
        if layer is None:
            self._end(None)
            raise StopIteration
        return layer

    def close(self) -> None:
        """Stop scheduling; outputs not computed yet fail with an EngineError."""
        if not self._done:
            executor.call(self._steps.close)
            self._end(EngineError("schedule_iterable was abandoned before the end"))

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown; nothing is waiting then
            pass

    def _end(self, exc: BaseException | None) -> None:
        self._done = True
        done: Future = Future()
        if exc is None:
            done.set_result(None)
        else:
            done.set_exception(exc)
        self._finish(done)


def _meta_of(value: Any) -> Meta:
    if isinstance(value, np.ndarray):
        return Meta.of(value)
    if isinstance(value, np.generic):
        return Meta.of(np.asarray(value))
    return Meta((), np.dtype(object), value)
