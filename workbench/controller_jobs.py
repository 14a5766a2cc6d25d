"""Analysis jobs of the run controller (a mixin of ``EngineController``): compare two
backends layer by layer, plan for edited input shapes, read a layer's real output from the
backend that ran it, and run a batch of inputs. Every job runs in the controller thread and
reports by signal; the UI thread only queues them.
"""

from __future__ import annotations

import time
import traceback
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PySide6.QtCore import Signal

from engine import BackendType, EngineError, Worker
from engine.compare import CPU_FLOAT64, error_figures, side_label, side_worker
from workbench.kernel_process import compile_ahead
from workbench.session import BatchRow, CompareResult

TOP_K = 5


@dataclass
class Intermediate:
    """A layer's output read back from the backend that ran it."""

    tensor: str
    array: np.ndarray | None
    backend: str = ""
    reason: str = ""  # why there is no array


class AnalysisJobs:
    """Compare, plan, capture and batch jobs; needs the controller's queue and worker."""

    compare_done = Signal(object)           # CompareResult
    compare_failed = Signal(str)
    plan_ready = Signal(object, object, object)  # BackendType, {input: shape}, {layer: Placement}
    overrides_refused = Signal(str)
    intermediate_ready = Signal(object)     # Intermediate
    batch_row = Signal(object, int, int)    # BatchRow, done, total
    batch_finished = Signal(int)            # rows done

    # -- queued from the UI thread ----------------------------------------------------------
    def compare(self, backend: BackendType, against: BackendType,
                feeds: dict[str, np.ndarray]) -> None:
        """Run ``feeds`` on both backends with every intermediate captured; per-layer error."""
        self.stop()
        self._jobs.put((self._do_compare, (backend, against, feeds, self._generation)))

    def plan_for(self, shapes: dict[str, tuple[int, ...]]) -> None:
        """Placement of the current worker for concrete input shapes (``plan_ready``)."""
        self._jobs.put((self._do_plan, (dict(shapes), self._generation)))

    def capture(self, tensor: str, feeds: dict[str, np.ndarray]) -> None:
        """Read ``tensor`` from the backend that computes it (``intermediate_ready``).

        A run loop going on captures it on its next run (so a continuous run shows it within
        one run). Otherwise one captured run is queued in the controller thread like every
        other job: it waits behind a job in progress (a compare, a batch, a worker being
        built) and is skipped when the last run already captured it for these very inputs."""
        self.capture_target = tensor
        self._capture_feeds = feeds
        if not getattr(self, "_capture_queued", False):  # one queued request serves them all
            self._capture_queued = True
            self._jobs.put((self._do_capture, (self._generation,)))

    def run_batch(self, sources: list[str], convert: Callable[[str], dict],
                  labels: list[str] | None) -> int:
        """Run each source (converted to feeds in this thread) once; ``batch_row`` per input."""
        with self._lock:
            self._token += 1
            token = self._token
        self._jobs.put((self._do_batch, (list(sources), convert, labels, self._generation,
                                         token)))
        return token

    # -- controller thread ------------------------------------------------------------------
    def _analysis(self, worker: Worker, feeds) -> tuple[dict | None, Any]:
        """Layer costs and memory timeline of the worker's last run, kept per worker and
        input shapes (they do not change from run to run)."""
        shapes = tuple((n, getattr(v, "shape", ())) for n, v in feeds.items())
        cached = getattr(self, "_analysis_cache", None)
        if cached is not None and cached[0]() is worker and cached[1] == shapes:
            return cached[2], cached[3]
        try:
            costs = worker.layer_costs()
        except Exception:  # an analysis the engine cannot make leaves the plots without it
            traceback.print_exc()
            costs = None
        try:
            memory = worker.memory_timeline()
        except Exception:
            traceback.print_exc()
            memory = None
        self._analysis_cache = (weakref.ref(worker), shapes, costs, memory)
        return costs, memory

    def _make_worker(self, backend: BackendType, overrides: dict | None,
                     fallback: dict | None) -> Worker:
        """A worker with ``overrides``; a refused override is reported and ``fallback`` used."""
        label = backend.name

        def on_progress(stage: str, fraction: float) -> None:
            self.progress.emit(f"{label}: {stage}", float(fraction))

        try:
            return Worker(self.model, backend, progress=on_progress,
                          placement_overrides=overrides or None)
        except EngineError as exc:
            if not overrides or type(exc) is not EngineError:
                raise
            self.overrides_refused.emit(str(exc))
            return Worker(self.model, backend, progress=on_progress,
                          placement_overrides=fallback or None)

    def _do_compare(self, backend, against, feeds, gen: int) -> None:
        if not self._current(gen) or self.model is None:
            return
        t0 = time.perf_counter()
        if BackendType.CPU in (backend, against) or CPU_FLOAT64 in (backend, against):
            compile_ahead(self.model_path, self.model, self.progress.emit)
        produced = [o for layer in self.model.layers for o in layer.outputs if o]
        values = []
        try:
            for step, kind in enumerate((backend, against)):
                values.append(self._captured_run(kind, feeds, produced, gen, step))
                if values[-1] is None:  # another model was opened meanwhile
                    self.progress.emit("", 0.0)
                    return
        except Exception as exc:
            self.progress.emit("", 0.0)
            self.compare_failed.emit(f"compare failed: {_describe(exc)}")
            return
        got, want = values
        rows = []
        for layer in self.model.layers:
            rel, mx = 0.0, 0.0
            for name in layer.outputs:
                if name:
                    r, m = error_figures(got[name], want[name])
                    rel, mx = max(rel, r), max(mx, m)
            rows.append({"name": layer.name, "op_type": layer.op_type, "rel_l2": rel,
                         "max_abs": mx})
        self.progress.emit("", 1.0)
        if self._current(gen):
            self.compare_done.emit(CompareResult(backend, against, rows,
                                                 time.perf_counter() - t0))

    def _captured_run(self, kind: BackendType, feeds, produced: list[str], gen: int,
                      step: int) -> dict[str, np.ndarray] | None:
        """Every produced tensor of one run on ``kind`` (a backend or ``CPU_FLOAT64``); the
        current worker is reused."""
        own = self.worker if (self.worker is not None and kind != CPU_FLOAT64
                              and self.worker.backend_type is kind) else None
        if own is None:
            worker, feeds = side_worker(self.model, kind, feeds)
        else:
            worker = own
        label = side_label(kind)
        try:
            n = len(self.model.layers)
            last = 0.0
            steps = worker.schedule_iterable(feeds, capture="all")
            try:
                for i, layer in enumerate(steps):
                    if not self._current(gen):
                        return None
                    now = time.perf_counter()
                    if now - last > 0.1:
                        last = now
                        self.progress.emit(f"Compare: running {label}, layer {i + 1}/{n} "
                                           f"({layer.op_type})", (step + (i + 1) / n) / 2)
            finally:
                steps.close()
            self.progress.emit(f"Compare: reading {len(produced)} tensors back from "
                               f"{label}…", (step + 1) / 2)
            tensors = [worker.peek_output(name) for name in produced]
            for t in tensors:
                t.readback_request()
            return {name: t.download_to_array() for name, t in zip(produced, tensors)}
        finally:
            if own is None:
                worker.close()

    def _do_plan(self, shapes, gen: int) -> None:
        worker = self.worker
        if not self._current(gen) or worker is None:
            return
        try:
            plan = worker.plan_for(shapes)
        except Exception as exc:
            self.progress.emit("", 0.0)
            self.run_failed.emit(f"cannot plan for {_shapes_text(shapes)}: {_describe(exc)}",
                                 -1)
            return
        self.progress.emit("", 1.0)
        self.plan_ready.emit(worker.backend_type, shapes, dict(plan.placement))

    def _do_capture(self, gen: int) -> None:
        self._capture_queued = False
        worker, tensor, feeds = self.worker, self.capture_target, self._capture_feeds
        if (not self._current(gen) or worker is None or tensor not in self._produced
                or self._already_captured(tensor, feeds)):
            return
        try:
            worker.schedule(feeds, capture=[tensor])
            self._emit_captured(worker, tensor, feeds)
        except Exception as exc:
            self.intermediate_ready.emit(Intermediate(tensor, None, reason=_describe(exc)))

    def _already_captured(self, tensor: str, feeds: dict) -> bool:
        """True when the current worker's last capture was ``tensor`` on the very same input
        arrays (new input values are new arrays), so the panel already has it."""
        captured = getattr(self, "_captured", None)
        if captured is None:
            return False
        worker, name, old = captured
        return (worker is self.worker and name == tensor and old.keys() == feeds.keys()
                and all(old[k] is feeds[k] for k in feeds))

    def _emit_captured(self, worker: Worker, tensor: str, feeds) -> None:
        """Send ``tensor`` of the worker's last run on ``feeds`` to the UI (after its
        readback); a later request for the same tensor and inputs is not run again."""
        self._captured = (worker, tensor, dict(feeds))
        try:
            arr = worker.peek_output(tensor).download_to_array()
        except Exception as exc:
            self.intermediate_ready.emit(Intermediate(tensor, None, reason=_describe(exc)))
            return
        layer = next((la for la in self.model.layers if tensor in la.outputs), None)
        placement = worker.placement.get(layer.name) if layer is not None else None
        backend = placement.backend.name if placement is not None else worker.backend_type.name
        self.intermediate_ready.emit(Intermediate(tensor, arr, backend))

    def _do_batch(self, sources, convert, labels, gen: int, token: int) -> None:
        worker = self.worker
        total = len(sources)
        done = 0
        try:
            for i, source in enumerate(sources):
                if not self._current(gen) or token != self._token or worker is None:
                    return
                self.progress.emit(f"Batch: input {i + 1}/{total}", i / max(total, 1))
                row = self._batch_one(worker, source, convert, labels)
                done += 1
                self.batch_row.emit(row, done, total)
        finally:
            self.progress.emit("", 1.0)
            self.batch_finished.emit(done)

    def _batch_one(self, worker: Worker, source: str, convert, labels) -> BatchRow:
        row = BatchRow(source)
        try:
            feeds = convert(source)
            t0 = time.perf_counter()
            worker.schedule(feeds)
            out = worker.peek_output().download_to_array()
            row.ms = (time.perf_counter() - t0) * 1e3
        except Exception as exc:
            row.error = _describe(exc)
            return row
        flat = np.asarray(out, np.float64).reshape(-1)
        if flat.size > 1:
            top = np.argsort(-flat, kind="stable")[:TOP_K]
            row.top = [(int(k), float(flat[k])) for k in top]
            if labels:
                row.labels = [labels[k] if k < len(labels) else "" for k, _ in row.top]
        elif flat.size == 1:
            row.top = [(0, float(flat[0]))]
        return row


def _describe(exc: BaseException) -> str:
    if isinstance(exc, EngineError):
        return str(exc)
    traceback.print_exc()
    return f"{type(exc).__name__}: {exc}"


def _shapes_text(shapes: dict[str, Any]) -> str:
    return ", ".join(f"{n}={'x'.join(str(d) for d in s)}" for n, s in shapes.items())
