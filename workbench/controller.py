"""The run controller: one long-lived thread that loads models, lays them out, builds workers
and runs them; results come back to the UI thread through Qt signals.

Nothing here blocks the UI thread: every public method only queues a job. Runs are waited
for in this controller thread (``download_to_array`` after ``readback_request``), never in
the UI. Continuous runs publish into a one-slot mailbox: the UI takes the newest result when
it is ready for one, so a fast model cannot flood the event loop.
"""

from __future__ import annotations

import gc
import json
import os
import queue
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, Signal

from engine import BackendType, BackendUnavailableError, EngineError, ModelLoader, Worker, executor
from engine.backends import create_backend
from engine.profile import Profile
from workbench.graph_view import build_geometry
from workbench.layout import GraphLayout, compute_layout


@dataclass
class LoadedModel:
    """What the UI needs about a freshly loaded model."""

    path: str
    model: Any  # engine.Model
    layout: GraphLayout
    preprocess: dict | None = None
    labels: list[str] | None = None
    load_ms: float = 0.0
    layout_ms: float = 0.0
    generation: int = 0
    geometry: Any = None  # workbench.graph_view.GraphGeometry, built off the UI thread


@dataclass
class RunResult:
    """One completed run: its profile, the outputs read back, and the placement used."""

    generation: int
    index: int
    backend: BackendType
    profile: Profile
    outputs: dict[str, np.ndarray]
    placement: dict[str, Any] = field(default_factory=dict)
    token: int = 0


def describe_error(exc: BaseException) -> str:
    """A message for the user: engine errors speak for themselves; others get their type."""
    if isinstance(exc, EngineError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "out of memory"
    return f"{type(exc).__name__}: {exc}"


def read_model_metadata(path: str) -> tuple[dict | None, list[str] | None]:
    """Preprocessing recipe and class labels stored in the model's metadata (small files)."""
    try:
        if os.path.getsize(path) > 32 * 2**20:
            return None, None
        import onnx

        proto = onnx.load(path, load_external_data=False)
        props = {p.key: p.value for p in proto.metadata_props}
        pre = json.loads(props["workbench.preprocess"]) if "workbench.preprocess" in props else None
        labels = json.loads(props["workbench.labels"]) if "workbench.labels" in props else None
        return pre, labels
    except Exception:  # metadata is optional; the model loader reports real problems
        return None, None


class EngineController(QObject):
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
    preview_ready = Signal(str, object)     # tensor name, ndarray | str (why not)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._jobs: queue.Queue = queue.Queue()
        #: bumped by stop()/run(); a run loop keeps going only while it holds the newest token
        self._token = 0
        self._lock = threading.Lock()
        self._mailbox: RunResult | None = None
        self._generation = 0
        self.model = None
        self.worker: Worker | None = None
        self._preview_cache: dict[str, np.ndarray] = {}
        self._preview_key: object = None
        self._thread = threading.Thread(target=self._loop, name="workbench-controller",
                                        daemon=True)
        self._thread.start()
        self._preview_request: tuple | None = None
        self._preview_wake = threading.Event()
        self._closing = False
        self._preview_thread = threading.Thread(target=self._preview_loop,
                                                name="workbench-preview", daemon=True)
        self._preview_thread.start()

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
        threading.Thread(target=self._do_probe, name="workbench-probe", daemon=True).start()

    def prepare(self, backend: BackendType) -> None:
        self.stop()
        self._jobs.put((self._do_prepare, (backend, self._generation)))

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

    def preview(self, layer_index: int, tensor: str, feeds: dict[str, np.ndarray],
                feeds_key: object) -> None:
        """Compute one layer's output for the details panel, beside any runs in progress;
        only the newest request is served."""
        with self._lock:
            self._preview_request = (layer_index, tensor, feeds, feeds_key, self._generation,
                                     self.model)
        self._preview_wake.set()

    def take_result(self) -> RunResult | None:
        with self._lock:
            result, self._mailbox = self._mailbox, None
        return result

    @property
    def generation(self) -> int:
        return self._generation

    def shutdown(self, timeout: float = 5.0) -> None:
        self.stop()
        self._closing = True
        self._preview_wake.set()
        self._jobs.put(None)
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
            model = ModelLoader.load(path)
            t1 = time.perf_counter()
            self.progress.emit("Laying out the graph…", -1.0)
            layout = compute_layout(model)
            geometry = build_geometry(layout, model)
            t2 = time.perf_counter()
            pre, labels = read_model_metadata(path)
        except Exception as exc:
            self.progress.emit("", 0.0)
            self.load_failed.emit(path, describe_error(exc))
            return
        if not self._current(gen):
            return
        # only a model that loaded replaces the current one (a bad file leaves it working)
        self._close_worker()
        self._preview_cache, self._preview_key = {}, None
        self.model = model
        # the model's objects live long: keep them out of the cyclic collector's full passes,
        # which would otherwise stop every thread (the UI too) for long moments during runs
        gc.freeze()
        self.progress.emit("", 1.0)
        self.model_ready.emit(LoadedModel(path, model, layout, pre, labels,
                                          (t1 - t0) * 1e3, (t2 - t1) * 1e3, gen, geometry))

    def _do_probe(self) -> None:
        status: dict[BackendType, str | None] = {BackendType.CPU: None}
        for kind in (BackendType.GPU_COMPUTE, BackendType.GPU_PIXEL):
            try:
                backend = executor.call(create_backend, kind)
                executor.call(backend.close)
                status[kind] = None
            except Exception as exc:
                status[kind] = describe_error(exc)
        self.backends_probed.emit(status)

    def _do_prepare(self, backend: BackendType, gen: int) -> None:
        if not self._current(gen) or self.model is None:
            return
        self._close_worker()
        label = backend.name
        self.progress.emit(f"Preparing {label} (compiling kernels)…", -1.0)

        def on_progress(stage: str, fraction: float) -> None:
            self.progress.emit(f"{label}: {stage}", float(fraction))

        try:
            self.worker = Worker(self.model, backend, progress=on_progress)
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
            first = worker.last_profile is None
            try:
                if first and not self._first_run(worker, feeds, token):
                    return
                if not first:
                    worker.schedule(feeds)
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
            self._publish(RunResult(gen, index, worker.backend_type, profile, outputs,
                                    dict(worker.placement), token))
            if not continuous:
                return
            time.sleep(0.001)  # let the UI thread take the interpreter between runs

    def _first_run(self, worker: Worker, feeds, token: int) -> bool:
        """The first run compiles kernels: step through it layer by layer with progress."""
        n = len(self.model.layers)
        label = worker.backend_type.name
        last = 0.0
        steps = worker.schedule_iterable(feeds)
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

    def _preview_loop(self) -> None:
        while True:
            self._preview_wake.wait()
            self._preview_wake.clear()
            if self._closing:
                return
            with self._lock:
                request, self._preview_request = self._preview_request, None
            if request is None:
                continue
            try:
                self._do_preview(*request)
            except Exception as exc:  # a preview must never kill its thread
                self.preview_ready.emit(request[1], f"preview failed: {describe_error(exc)}")

    def _do_preview(self, layer_index: int, tensor: str, feeds, feeds_key, gen: int,
                    model) -> None:
        """Compute one layer's output on the CPU interpreter from the current inputs."""
        if not self._current(gen) or model is None:
            return
        from engine.backends.cpu.interpreter import run_layer

        if (gen, feeds_key) != self._preview_key:
            self._preview_cache, self._preview_key = {}, (gen, feeds_key)
        env = self._preview_cache
        if tensor not in env:
            if not env:
                env.update(model.constants)
                env.update(feeds)
            layers = [layer for layer in model.layers[:layer_index + 1]
                      if not all(o in env for o in layer.outputs if o)]

            def compute() -> None:
                for layer in layers:
                    args = [env.get(n) if n else None for n in layer.all_inputs()]
                    for name, value in zip(layer.outputs, run_layer(layer, args)):
                        if name:
                            env[name] = value

            try:
                executor.call(compute)
            except Exception as exc:
                self.preview_ready.emit(tensor, f"preview unavailable: {describe_error(exc)}")
                return
            nbytes = sum(getattr(v, "nbytes", 0) for v in env.values())
            if nbytes > 512 * 2**20:  # keep memory bounded on big models
                keep = env.get(tensor)
                self._preview_cache, self._preview_key = {}, None
                env = {tensor: keep}
        if self._current(gen):
            self.preview_ready.emit(tensor, env.get(tensor))
