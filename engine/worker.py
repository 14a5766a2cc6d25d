"""Worker: plans where each layer runs, schedules layers on a backend, profiles runs.

``schedule`` validates the inputs in the caller's thread (errors surface at once),
then queues the run on the engine thread and returns. Outputs are ``Tensor`` objects
whose data may still be pending; reading them back is explicit.

Placement is planned per input signature (shapes and dtypes), cached: a new signature is
planned on the engine thread before its first run, a repeated one costs a dict lookup.
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np

from engine import executor
from engine.analysis import MemoryTimeline, layer_costs, memory_timeline
from engine.backends import BackendType, create_backend
from engine.backends.base import Backend
from engine.backends.cpu import CpuBackend, thread_tuning, threads
from engine.backends.cpu.thread_tuning import ThreadTuner
from engine.errors import EngineError
from engine.input_check import InputChecker
from engine.light_future import LightFuture
from engine.model import Layer, Model
from engine.ops.base import Meta
from engine.ops.costs import LayerCost
from engine.plan import (
    Placement,
    Plan,
    Signature,
    build_plan,
    check_overrides,
    liveness,
    signature_of,
)
from engine.profile import Profile
from engine.run_loops import Slot, meta_of, run_on_cpu, run_placed
from engine.step_memo import eligible
from engine.tensor import DeviceTensor, RunOutput, Tensor, free_released
from engine.worker_steps import RunProfiles, Steps, build_cpu_steps

ProgressCallback = Callable[[str, float], None]
Capture = None | str | Iterable[str]

__all__ = ["Placement", "Worker"]

#: fewest bytes of a run's inputs written from the caller's arrays (``_written_feeds``):
#: a 184 KB image measured no better that way, a 4.9 MB one 18% less host time
DIRECT_WRITE_BYTES = 1 << 20


class Worker:
    """Runs a ``Model`` on one backend, falling back to the CPU layer by layer.

    ``placement_overrides`` maps layer names to the backend a user wants them on: the CPU,
    or the worker's GPU backend where it has a kernel for the layer (refused otherwise).
    """

    def __init__(self, model: Model, backend_type: BackendType | str = BackendType.CPU, *,
                 progress: ProgressCallback | None = None,
                 placement_overrides: dict[str, BackendType | str] | None = None,
                 **backend_options: Any):
        self.model = model
        self._input_checker = InputChecker(model.inputs)
        self.backend_type = BackendType.parse(backend_type)
        self._cpu = CpuBackend()
        self._closed = False
        self._progress = progress
        if self.backend_type is BackendType.CPU:
            self._backend: Backend = self._cpu
        else:
            self._backend = executor.call(
                functools.partial(create_backend, self.backend_type, **backend_options))
        self.placement_overrides = check_overrides(model, self._backend, self.backend_type,
                                                   placement_overrides or {})
        self._plans: dict[Signature | None, Plan] = {}
        self._plan = self._plans[None] = build_plan(
            model, self._backend, self.backend_type, None, self.placement_overrides)
        self._pending_plan: Future | None = None
        self._last_signature: Signature | None = None
        #: the last CPU run's feeds, whose signature is made only when asked for
        self._last_feeds: dict[str, Any] | None = None
        self._last_use = liveness(model)
        self._constants = {n: v for n, v in model.constants.items()}
        self._const_slots = {n: Slot(meta_of(v), cpu=v) for n, v in model.constants.items()}
        #: id -> value of the model's constant arrays (fixed for the worker's life)
        self._const_values = {id(s.cpu): s.cpu for s in self._const_slots.values()}
        self._cpu_plan: dict[bool, list[tuple]] | None = None
        self._memos: dict[bool, tuple[list[int], list]] = {}
        self._tuner = ThreadTuner()
        self._profiles = RunProfiles(self.backend_type.value)
        self._outputs: dict[str, Tensor] = {}
        self._live: weakref.WeakSet[Tensor] = weakref.WeakSet()
        #: the last scheduled run's job (or a weak reference to its Steps)
        self._last_job: Future | weakref.ref | None = None
        self._writing = threading.Lock()  # held while inputs are written from a caller
        if self._backend is not self._cpu:
            executor.call(self._prepare, self._plan)

    # -- planning -------------------------------------------------------------------------
    @property
    def placement(self) -> dict[str, Placement]:
        """{layer name: Placement} for the last scheduled input signature (the declared
        shapes before the first ``schedule``)."""
        pending = self._pending_plan
        if pending is not None:
            executor.help_until(pending)
            pending.result()
        return self._plan.placement

    @property
    def plan(self) -> Plan:
        """The plan of the last scheduled input signature (placement, metas, summary)."""
        self.placement  # noqa: B018 - waits for a plan still being made
        return self._plan

    def plan_for(self, shapes: dict[str, tuple[int, ...]]) -> Plan:
        """The plan for concrete input shapes, without running (``inspect --input``)."""
        specs = {s.name: s for s in self.model.inputs}
        unknown = [n for n in shapes if n not in specs]
        if unknown:
            raise EngineError(f"the model has no input {unknown[0]!r}")
        sig = tuple((name, tuple(int(d) for d in shapes[name]),
                     np.dtype(specs[name].dtype) if specs[name].dtype is not None
                     else "NoneType") for name in specs if name in shapes)
        return executor.call(self._get_plan, sig)

    def _get_plan(self, sig: Signature) -> Plan:
        plan = self._plans.get(sig)
        if plan is None:
            plan = build_plan(self.model, self._backend, self.backend_type, sig,
                              self.placement_overrides)
            if len(self._plans) > 64:  # a stream of new shapes must not grow without end
                self._plans.pop(next(k for k in self._plans if k is not None))
            self._plans[sig] = plan
        if not plan.prepared and self._backend is not self._cpu:
            t0 = time.perf_counter()
            self._prepare(plan)
            plan.build_ms += (time.perf_counter() - t0) * 1e3
        return plan

    def _prepare(self, plan: Plan) -> None:
        inputs = None if plan.signature is None else {
            n: m for n, m in plan.metas.items() if any(n == s[0] for s in plan.signature)}
        self._backend.prepare(self.model, plan.placement, self._progress, inputs)
        plan.prepared = True

    def _analysis_plan(self) -> Plan:
        if self._last_signature is None and self._last_feeds is not None:
            self._last_signature = signature_of(self._last_feeds)
        sig = self._last_signature
        if sig is None:
            return self.plan
        if self._backend is not self._cpu:
            self.placement  # noqa: B018 - the run's own plan, once it is made
            return self._plans.get(sig) or self._plan
        plan = self._plans.get(sig)
        if plan is None:  # the CPU backend runs without plans: make one for the analysis
            plan = executor.call(self._get_plan, sig)
        return plan

    def layer_costs(self) -> dict[str, LayerCost]:
        """{layer: LayerCost(flops, bytes_in, bytes_out)} for the last scheduled shapes."""
        return layer_costs(self.model, self._analysis_plan())

    def memory_timeline(self) -> MemoryTimeline:
        """Live tensor bytes on the CPU and the device along the execution order, for the
        last scheduled shapes, with the peak and the tensors alive at it."""
        return memory_timeline(self.model, self._analysis_plan(), self._last_use)

    def _cpu_memo(self, fused: bool = True) -> tuple[list[int], list]:
        """Which CPU steps keep their results while their inputs repeat (``step_memo``),
        and the kept (key, result) per step."""
        if self._memos.get(fused) is None:
            kinds = eligible(self._cpu_steps(fused), self._constants,
                             {o.name for o in self.model.outputs})
            self._memos[fused] = (kinds, [None] * len(kinds))
        return self._memos[fused]

    def _thread_tuner(self) -> ThreadTuner | None:
        """The per-layer thread choice of fused CPU runs (``thread_tuning``), or None when
        every layer just uses the backend's threads."""
        if not thread_tuning.ENABLED or threads.threads() <= 1:
            return None
        return self._tuner

    def _cpu_tuning(self) -> bool:
        """Whether the thread tuner is still timing runs for the last inputs (benchmarks
        warm up until it is done)."""
        tuner = self._thread_tuner()
        return tuner is not None and tuner.key is not None and tuner.final is None

    def _cpu_steps(self, fused: bool = True) -> list[tuple]:
        """The CPU run loop's steps (``build_cpu_steps``), derived once. ``fused`` plans
        include the CPU's own fusions; runs that capture intermediates use the unfused plan."""
        if self._cpu_plan is None:
            self._cpu_plan = build_cpu_steps(self.model, self._last_use, self._constants)
        return self._cpu_plan[fused]

    # -- scheduling -----------------------------------------------------------------------
    def schedule(self, inputs: dict[str, Any] | Any, capture: Capture = None) -> Worker:
        """Queue a run on ``inputs`` and return at once; outputs are read with ``peek_output``.

        ``capture`` (a list of tensor names, or ``"all"``) keeps those intermediate tensors
        for ``peek_output(name)`` after the run. The inputs are copied: changing an array
        after ``schedule`` returns does not change the run.
        """
        writing = capture is None and self._backend is not self._cpu and \
            self._writing.acquire(blocking=False)
        try:
            feeds = self._written_feeds(inputs) if writing else None
            if feeds is None:
                feeds = self._check_inputs(inputs)
            steps, finish, run, results = self._start_run(feeds, capture)

            def run_all():
                for _ in steps:
                    pass
                return results

            job = self._last_job = executor.submit(
                run_all, stealable=self._backend.host_memory, future=run)
        finally:
            if writing:
                self._writing.release()
        if run is None:  # (a CPU run's job sets the outputs' future itself)
            job.add_done_callback(finish)
        return self

    def _written_feeds(self, inputs) -> dict[str, Any] | None:
        """GPU backends: the inputs written into the device now, from the caller's arrays
        without a copy (the write copies them), when the run will replay a recording and no
        earlier run of this worker is queued or running (nothing else writes those input
        buffers before the run uses them). None: check and copy them as usual. A large
        input was copied twice (here, then by the write on the engine thread): a 640x640
        detector's host time 1.15 -> 0.94 ms a run on lavapipe. Below
        ``DIRECT_WRITE_BYTES`` the copy is cheaper than the calls this path makes."""
        if type(inputs) is not dict or sum(getattr(v, "nbytes", 0) for v in inputs.values()) \
                < DIRECT_WRITE_BYTES:
            return None
        job = self._last_job
        if isinstance(job, weakref.ref):
            job = job()  # (None: the iterator was dropped, which closed its run)
        write = getattr(self._backend, "write_inputs_now", None)
        if write is None or (job is not None and not job.done()):
            return None
        arrays = self._input_checker.accepted_as_is(inputs)
        return None if arrays is None else write(signature_of(arrays), arrays)

    def schedule_iterable(self, inputs: dict[str, Any] | Any, capture: Capture = None
                          ) -> Iterator[Layer]:
        """Schedule one layer per step; yields each layer after it has been scheduled.

        Inputs are checked at once (as in ``schedule``). Closing or dropping the iterator
        before the end fails the run's outputs with an EngineError instead of leaving them
        pending forever.
        """
        feeds = self._check_inputs(inputs)
        steps, finish, _, _ = self._start_run(feeds, capture)
        run = Steps(steps, finish)
        self._last_job = weakref.ref(run)  # (dropping the iterator must still close it)
        return run

    def peek_output(self, name: str | None = None) -> Tensor:
        """An output (the first when ``name`` is None) or a captured tensor of the last run."""
        if not self._outputs:
            raise EngineError("nothing has been scheduled yet; call schedule() first")
        if name is None:
            name = self.model.outputs[0].name
        if name not in self._outputs:
            names = ", ".join(repr(o.name) for o in self.model.outputs)
            if name in self.model.fused_away:
                raise EngineError(f"tensor {name!r} does not exist at run time: it was fused "
                                  f"into layer {self.model.fused_away[name]!r}")
            raise EngineError(f"{name!r} is neither an output nor a captured tensor of the "
                              f"last run; the model's outputs are {names} (pass "
                              f"capture=[...] to schedule to keep intermediates)")
        return self._outputs[name]

    def _capture_names(self, capture: Capture) -> list[str]:
        if capture is None:
            return []
        produced = [o for layer in self.model.layers for o in layer.outputs if o]
        if isinstance(capture, str):
            if capture != "all":
                raise EngineError(f"capture must be a list of tensor names or 'all', "
                                  f"not {capture!r}")
            return produced
        if isinstance(capture, (bytes, bool, int, float)) or not hasattr(capture, "__iter__"):
            raise EngineError(f"capture must be a list of tensor names or 'all', "
                              f"not {capture!r}")
        known = set(produced) | {s.name for s in self.model.inputs}
        names = list(dict.fromkeys(capture))
        for n in names:
            if n in self.model.fused_away:
                raise EngineError(f"cannot capture {n!r}: fusion removed it (it is computed "
                                  f"inside layer {self.model.fused_away[n]!r})")
            if n not in known:
                raise EngineError(f"cannot capture {n!r}: the model has no such tensor")
        return names

    def _start_run(self, feeds: dict[str, Any], capture: Capture):
        if self._closed:
            raise EngineError("the worker is closed")
        outputs = [o.name for o in self.model.outputs]
        if capture is None:
            names, keep = outputs, set()
        else:
            captured = self._capture_names(capture)
            names = outputs + [n for n in captured if n not in set(outputs)]
            keep = set(captured)
        if self._backend is self._cpu:
            # one future for all outputs: its result maps names to values (``RunOutput``)
            run, results, cpu = LightFuture(), {}, self._cpu
            self._outputs = {n: Tensor(n, RunOutput(run, n, cpu)) for n in names}
            self._last_feeds, self._last_signature = feeds, None  # (made when asked)
            key = self._input_checker.last_key  # None: inputs not plain arrays, no tuning
            tuner = None if keep or key is None else self._thread_tuner()
            steps = run_on_cpu(self, feeds, names, results, keep, tuner, key)

            def end(job: Future) -> None:  # schedule_iterable's end
                if not run.done():
                    exc = job.exception()
                    if exc is None:
                        run.set_result(results)
                    else:
                        run.set_exception(exc)

            return steps, end, run, results
        futures = {n: LightFuture() for n in names}
        self._outputs = {n: DeviceTensor(n, f) for n, f in futures.items()}
        self._live.update(self._outputs.values())
        self._last_signature = signature_of(feeds)
        steps = self._placed_steps(feeds, futures, keep)

        def finish(job: Future) -> None:
            exc = job.exception()
            for f in futures.values():
                if not f.done():
                    f.set_exception(exc or EngineError("the run produced no value for this "
                                                       "tensor"))

        return steps, finish, None, None

    def _placed_steps(self, feeds, futures, keep) -> Iterator[Layer]:
        sig = self._last_signature
        plan = self._plans.get(sig)
        if plan is not None and plan.prepared:
            self._plan, self._pending_plan = plan, None
            return run_placed(self, plan, feeds, futures, keep)
        made: Future = Future()
        self._pending_plan = made

        def steps() -> Iterator[Layer]:
            try:
                new_plan = self._get_plan(sig)
            except BaseException as exc:
                made.set_exception(exc)
                raise
            self._plan = new_plan
            made.set_result(new_plan)
            yield from run_placed(self, new_plan, feeds, futures, keep)

        return steps()

    def _finish_profile(self, timings, total_ms: float) -> None:
        """Publish a run's profile (see ``RunProfiles.publish``)."""
        self._profiles.publish(timings, total_ms, self._backend.collect_timings())

    @property
    def last_profile(self) -> Profile | None:
        """Per-layer timings of the last completed run (waits for device timestamps of a run
        that has been recorded but whose GPU work is still in flight)."""
        return self._profiles.latest()

    @property
    def peak_memory_bytes(self) -> int | None:
        """Peak device memory of the plan, for backends that allocate device memory."""
        return self._backend.peak_memory_bytes

    def _on_cpu(self, slot: Slot) -> Any:
        if slot.cpu is None and slot.dev is not None:  # (an empty optional is None on the CPU)
            self._backend.flush()
            slot.cpu = self._backend.download(slot.dev, slot.meta)
            slot.meta = Meta(slot.meta.shape, slot.meta.dtype, slot.cpu)
        return slot.cpu

    def _on_device(self, slot: Slot) -> Any:
        if slot.dev is None:
            slot.dev = self._backend.upload(slot.cpu)
        return slot.dev

    # -- input checking -------------------------------------------------------------------
    def _check_inputs(self, inputs) -> dict[str, Any]:
        return self._input_checker(inputs)

    # -- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        """Release the backend's resources (after the queued work has run).

        Output and captured tensors that are still referenced are read back to the CPU
        first, so they stay readable after the worker is gone.
        """
        if self._closed:
            return
        self._closed = True
        if self._backend is self._cpu:
            return
        executor.call(lambda: None)  # the queued runs finish first
        for tensor in list(self._live):
            tensor.keep_on_cpu()
        self._live = weakref.WeakSet()
        executor.call(free_released)
        executor.call(self._backend.close)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

