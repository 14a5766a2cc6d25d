"""The UI↔engine bridge: the one place where the window's actions become engine work.

One long-lived controller thread loads models, lays them out, builds workers and runs them;
results come back to the UI thread through Qt signals, and the window records them in its
``workbench.session.Session``. ``controller_jobs.py`` is part of this bridge (its analysis
jobs, as a mixin of ``EngineController``). Nothing else in the window calls the engine's
``Worker`` (the headless mode of ``python -m workbench`` and the model-loading helper process
run without a window).

Nothing here blocks the UI thread: every public method only queues a job. Runs are waited
for in this controller thread (``download_to_array`` after ``readback_request``), never in
the UI. Continuous runs publish into a one-slot mailbox: the UI takes the newest result when
it is ready for one, so a fast model cannot flood the event loop.
"""

from __future__ import annotations

import gc
import os
import queue
import threading
import time
import traceback

import numpy as np
from PySide6.QtCore import QObject, Signal

from engine import BackendType, BackendUnavailableError, EngineError, Worker, executor
from engine.backends import create_backend
from workbench.controller_jobs import AnalysisJobs
from workbench.graph_geometry import build_geometry
from workbench.kernel_process import compile_ahead
from workbench.model_process import ModelProcess
from workbench.session import LoadedModel, RunResult

MIN_PERIOD_S = 0.01  # continuous runs start at most this often
UI_WAIT_S = 0.2      # longest a continuous run waits for the window to finish showing one


def describe_error(exc: BaseException) -> str:
    """A message for the user: engine errors speak for themselves; others get their type."""
    if isinstance(exc, EngineError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "out of memory"
    return f"{type(exc).__name__}: {exc}"


class EngineController(AnalysisJobs, QObject):
    """Owns the engine objects (model, worker) and the controller thread."""

    load_started = Signal(str)
    model_ready = Signal(object)            # LoadedModel
    load_failed = Signal(str, str)          # path, message
    progress = Signal(str, float)           # stage text, fraction 0..1 or -1 for busy; "" = done
    backends_probed = Signal(object)        # {BackendType: None | reason}
    worker_ready = Signal(object, object)   # BackendType, {layer: Placement}
    worker_failed = Signal(object, str, bool)  # BackendType, message, backend unavailable
    result_ready = Signal()                 # take_result() has something
    run_failed = Signal(str, int)           # message, run token
    run_finished = Signal(int)              # run token: a run-once or continuous loop ended

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._jobs: queue.Queue = queue.Queue()
        #: bumped by stop()/run(); a run loop keeps going only while it holds the newest token
        self._token = 0
        #: cleared by the window while it shows a result; continuous runs wait for it
        self.ui_idle = threading.Event()
        self.ui_idle.set()
        self._lock = threading.Lock()
        self._mailbox: RunResult | None = None
        self._generation = 0
        self.model = None
        self.model_path: str | None = None
        self.worker: Worker | None = None
        #: the tensor the details panel shows: captured by the runs while one is selected
        self.capture_target: str | None = None
        self._produced: set[str] = set()
        #: loads models in a helper process (parsing and checking hold the GIL for long)
        self._models = ModelProcess()
        self._jobs.put((self._models.start, ()))
        self._thread = threading.Thread(target=self._loop, name="workbench-controller",
                                        daemon=True)
        self._thread.start()
        self._probe: threading.Thread | None = None

    # -- public, called on the UI thread; each only queues work ---------------------------
    def load(self, path: str) -> int:
        """Load ``path`` in the background; returns the generation number of that model."""
        self.stop()
        with self._lock:
            self._generation += 1
            gen = self._generation
        self._jobs.put((self._do_load, (path, gen)))
        return gen

    def probe_backends(self) -> None:
        """Find out which backends work, on a thread of its own (a GPU adapter can take a
        while to open, and loading a model must not wait for it)."""
        self._probe = threading.Thread(target=self._do_probe, name="workbench-probe",
                                       daemon=True)
        self._probe.start()

    def prepare(self, backend: BackendType, overrides: dict | None = None,
                fallback: dict | None = None) -> None:
        """Build the worker for ``backend`` with placement ``overrides``; if the engine refuses
        them, ``overrides_refused`` tells why and ``fallback`` overrides are used instead."""
        self.stop()
        self._jobs.put((self._do_prepare, (backend, self._generation, overrides, fallback)))

    def run(self, feeds: dict[str, np.ndarray], continuous: bool) -> int:
        """Queue a run (once or until stopped); returns its token (results carry it)."""
        with self._lock:
            self._token += 1
            token = self._token
        self._jobs.put((self._do_run, (feeds, continuous, self._generation, token)))
        return token

    def stop(self) -> None:
        """Stop after the run in flight (its result is dropped); returns at once."""
        with self._lock:
            self._token += 1

    def take_result(self) -> RunResult | None:
        with self._lock:
            result, self._mailbox = self._mailbox, None
        return result

    @property
    def generation(self) -> int:
        return self._generation

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop: queued jobs and queued engine work are dropped, not run (exit is prompt)."""
        self.stop()
        while True:
            try:
                self._jobs.get_nowait()
            except queue.Empty:
                break
        executor.cancel_pending()
        self._jobs.put(None)
        self._models.close()
        if self._probe is not None:  # a GPU device half made at exit crashes in wgpu
            self._probe.join(timeout)
        self._thread.join(timeout)

    # -- controller thread -----------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            fn, args = job
            try:
                fn(*args)
            except Exception as exc:  # a job must never kill the controller thread
                traceback.print_exc()
                self.run_failed.emit(f"internal error: {describe_error(exc)}", -1)
        self._close_worker()

    def _current(self, gen: int) -> bool:
        return gen == self._generation

    def _close_worker(self) -> None:
        self._captured = None  # what the details panel holds came from this worker
        if self.worker is not None:
            try:
                self.worker.close()
            except Exception:  # closing a broken backend must not stop the next model
                traceback.print_exc()
            self.worker = None

    def _do_load(self, path: str, gen: int) -> None:
        if not self._current(gen):
            return
        self.load_started.emit(path)
        self.progress.emit(f"Loading {os.path.basename(path)}…", -1.0)
        t0 = time.perf_counter()
        try:
            if not os.path.isfile(path):
                raise EngineError(f"no such file: {path}")
            # no cyclic-GC passes while the loader builds thousands of objects: a full pass
            # holds the interpreter (and so the UI thread) for a long moment
            gc.disable()
            try:
                # the helper process lays the graph out too
                model, layout, layout_ms, pre, labels = self._models.load_with_layout(path)
            finally:
                gc.enable()
            t1 = time.perf_counter()
            self.progress.emit("Preparing the graph for drawing…", -1.0)
            geometry = build_geometry(layout, model)
            t2 = time.perf_counter()
        except Exception as exc:
            self.progress.emit("", 0.0)
            self.load_failed.emit(path, describe_error(exc))
            return
        if not self._current(gen):
            return
        # only a model that loaded replaces the current one (a bad file leaves it working)
        self._close_worker()
        self.model, self.model_path = model, path
        self.capture_target = None
        self._produced = {o for layer in model.layers for o in layer.outputs if o}
        # the model's objects live long: keep them out of the cyclic collector's full passes,
        # which would otherwise stop every thread (the UI too) for long moments during runs
        gc.freeze()
        self.progress.emit("", 1.0)
        self.model_ready.emit(LoadedModel(path, model, layout, pre, labels,
                                          (t1 - t0) * 1e3 - layout_ms, layout_ms + (t2 - t1) * 1e3,
                                          gen, geometry))

    def _do_probe(self) -> None:
        status: dict[BackendType, str | None] = {BackendType.CPU: None}
        for kind in (BackendType.GPU_COMPUTE, BackendType.GPU_PIXEL):
            try:
                backend = executor.call(create_backend, kind)
                executor.call(backend.close)
                status[kind] = None
            except Exception as exc:
                status[kind] = describe_error(exc)
        try:
            self.backends_probed.emit(status)
        except RuntimeError:  # the window closed (and deleted us) while the probe ran
            pass

    def _do_prepare(self, backend: BackendType, gen: int, overrides: dict | None = None,
                    fallback: dict | None = None) -> None:
        if not self._current(gen) or self.model is None:
            return
        self._close_worker()
        if backend is BackendType.CPU:
            compile_ahead(self.model_path, self.model, self.progress.emit)
        self.progress.emit(f"Preparing {backend.name} (compiling kernels)…", -1.0)
        try:
            self.worker = self._make_worker(backend, overrides, fallback)
        except Exception as exc:
            self.progress.emit("", 0.0)
            self.worker_failed.emit(backend, describe_error(exc),
                                    isinstance(exc, BackendUnavailableError))
            return
        self.progress.emit("", 1.0)
        self.worker_ready.emit(backend, dict(self.worker.placement))

    def _do_run(self, feeds, continuous: bool, gen: int, token: int) -> None:
        try:
            self._run_loop(feeds, continuous, gen, token)
        finally:
            self.progress.emit("", 1.0)
            self.run_finished.emit(token)

    def _run_loop(self, feeds, continuous: bool, gen: int, token: int) -> None:
        worker = self.worker
        if not self._current(gen) or token != self._token:
            return
        if worker is None or self.model is None:
            self.run_failed.emit("no backend is ready to run this model (see the message "
                                 "above)", token)
            return
        names = [o.name for o in self.model.outputs]
        index = 0
        while True:
            started = time.perf_counter()
            first = worker.last_profile is None
            target = self.capture_target
            capture = [target] if target in self._produced else None
            try:
                if first and not self._first_run(worker, feeds, token, capture):
                    return
                if not first:
                    worker.schedule(feeds, capture=capture)
                tensors = [worker.peek_output(n) for n in names]
                for t in tensors:
                    t.readback_request()
                # wait here, in the controller thread: the UI never blocks on a readback
                outputs = {n: t.download_to_array() for n, t in zip(names, tensors)}
                profile = worker.last_profile
            except Exception as exc:
                self.run_failed.emit(f"{worker.backend_type.name} run failed: "
                                     f"{describe_error(exc)}", token)
                return
            if first:
                self.progress.emit("", 1.0)
            if profile is None:
                self.run_failed.emit("the run finished without a profile", token)
                return
            index += 1
            if not self._current(gen) or token != self._token:
                return
            if capture:
                self._emit_captured(worker, capture[0], feeds)
            costs, memory = self._analysis(worker, feeds)
            self._publish(RunResult(gen, index, worker.backend_type, profile, outputs,
                                    dict(worker.placement), token, costs, memory))
            if not continuous:
                return
            # leave the interpreter to the UI thread while it shows a result, and pace tiny
            # models: the window shows a few runs a second, thousands would only compete
            self.ui_idle.wait(UI_WAIT_S)
            time.sleep(max(0.001, MIN_PERIOD_S - (time.perf_counter() - started)))

    def _first_run(self, worker: Worker, feeds, token: int, capture=None) -> bool:
        """The first run compiles kernels: step through it layer by layer with progress."""
        n = len(self.model.layers)
        label = worker.backend_type.name
        last = 0.0
        steps = worker.schedule_iterable(feeds, capture=capture)
        try:
            for i, layer in enumerate(steps):
                if token != self._token:
                    return False
                now = time.perf_counter()
                if now - last > 0.05:
                    last = now
                    self.progress.emit(f"First {label} run, compiling kernels: layer {i + 1}/{n}"
                                       f" ({layer.op_type})", (i + 1) / max(n, 1))
        finally:
            steps.close()
        return True

    def _publish(self, result: RunResult) -> None:
        with self._lock:
            # a result left over from a stopped run must not swallow this run's signal
            had = self._mailbox is not None and self._mailbox.token == result.token
            self._mailbox = result
        if not had:
            self.result_ready.emit()
