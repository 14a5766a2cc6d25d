"""The workbench's session state, without Qt: what the user chose and what came back.

The window is a view of a ``Session``: the model loaded, its inputs, the backend chosen (and
which backends work), placement overrides and input shapes, the placement shown, the run
state machine (running, the token of the run whose results are shown) and the last results
(profile, outputs, per-layer times), compare and batch results. Widgets observe it
(``subscribe(fn)``; ``fn(topic)`` is called after a change with one of ``TOPICS``) instead
of keeping state in the main window. Nothing here imports Qt or runs engine work, so a
script, a test or another front end can drive the same state; the engine work itself goes
through the UI↔engine bridge, ``workbench.controller``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from engine import BackendType
from workbench.session_records import BatchRow, CompareResult, LoadedModel, RunResult

TOPICS = ("model", "overrides", "shapes", "compare", "batch", "backends", "placement", "inputs",
          "run", "result")
#: a backend whose availability is still being checked
PENDING = "checking…"
DEFAULT_THRESHOLD = 1e-3

__all__ = ["BatchRow", "CompareResult", "LoadedModel", "RunResult", "Session", "PENDING",
           "TOPICS", "DEFAULT_THRESHOLD"]


class Session:
    """The model, its inputs, the backend, per-model choices (placement overrides, input
    shapes), the run state and results (last run, compare, batch)."""

    def __init__(self) -> None:
        self.loaded: LoadedModel | None = None
        self.feeds: dict[str, np.ndarray] = {}
        self.backend = BackendType.CPU
        #: {backend: None (works) | PENDING | why it is unavailable}
        self.backend_status: dict[BackendType, str | None] = {
            BackendType.CPU: None, BackendType.GPU_COMPUTE: PENDING, BackendType.GPU_PIXEL: PENDING}
        #: the backend a worker was last asked for (None: none yet, or it failed)
        self.prepared_for: BackendType | None = None
        self.placement: dict[str, Any] = {}  # {layer: engine Placement} shown on the graph
        self.running = False
        self.token: int | None = None  # the run whose results are shown; None: none
        self.last_profile = None
        self.last_outputs: dict[str, np.ndarray] = {}
        self.times: dict[str, float] = {}  # {layer: ms} of the last run shown
        self.runs_shown = 0
        self.load_timings: dict[str, float] = {}
        self.model_path: str | None = None
        self.overrides: dict[str, BackendType] = {}
        #: the overrides before the last move, restored if the engine refuses it
        self.previous_overrides: dict[str, BackendType] = {}
        self.input_shapes: dict[str, tuple[int, ...]] = {}
        self.compare: CompareResult | None = None
        self.comparing = False  # a comparison is running in the bridge
        self.threshold = DEFAULT_THRESHOLD
        self.batch: list[BatchRow] = []
        self.batch_total = 0
        self._observers: list[Callable[[str], None]] = []

    # -- observers --------------------------------------------------------------------------
    def subscribe(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(topic)`` after every change."""
        self._observers.append(fn)

    def _notify(self, topic: str) -> None:
        for fn in list(self._observers):
            fn(topic)

    # -- model ------------------------------------------------------------------------------
    @property
    def model(self):
        """The loaded ``engine.Model`` (None before the first load)."""
        return None if self.loaded is None else self.loaded.model

    def set_loaded(self, lm: LoadedModel, overrides: dict[str, BackendType] | None = None
                   ) -> None:
        """A model finished loading: it replaces the current one and its results; the backend
        falls back to the CPU if the chosen one turned out unavailable; a worker is needed."""
        self.loaded = lm
        self.placement, self.times, self.last_profile, self.last_outputs = {}, {}, None, {}
        self.runs_shown = 0
        self.feeds = {}
        self.load_timings.update(load_ms=lm.load_ms, layout_ms=lm.layout_ms)
        if not self.is_backend_available(self.backend) and \
                self.backend_status.get(self.backend) != PENDING:
            self.backend = BackendType.CPU
        self.prepared_for = None
        self.set_model(lm.path, overrides)

    def layer_index(self, name: str) -> int:
        """Position of layer ``name`` in the model (-1: no such layer, or no model)."""
        model = self.model
        if model is None:
            return -1
        return next((i for i, layer in enumerate(model.layers) if layer.name == name), -1)

    # -- inputs -----------------------------------------------------------------------------
    def set_feeds(self, feeds: dict[str, np.ndarray]) -> None:
        """The current value of every input that has one."""
        self.feeds = dict(feeds)
        self._notify("inputs")

    def missing_inputs(self) -> list[str]:
        """Inputs of the model that have no value yet."""
        model = self.model
        return [] if model is None else [s.name for s in model.inputs if s.name not in self.feeds]

    # -- backends ---------------------------------------------------------------------------
    def set_backend_status(self, status: dict[BackendType, str | None]) -> None:
        """What a probe (or a failed preparation) found out about backends."""
        self.backend_status.update(status)
        self._notify("backends")

    def is_backend_available(self, kind: BackendType) -> bool:
        return self.backend_status.get(kind) is None

    def unavailable_reason(self, kind: BackendType) -> str | None:
        """Why ``kind`` cannot be chosen (None: it works, or is still being checked)."""
        reason = self.backend_status.get(kind)
        return None if reason == PENDING else reason

    def choose_backend(self, kind: BackendType) -> bool:
        """Select ``kind`` for the next runs; True when a worker for it must be built now
        (the placement shown is then unknown until it is ready)."""
        rebuild = (kind is not self.backend or self.prepared_for is not kind) and \
            self.loaded is not None
        self.backend = kind
        if rebuild:
            self.prepared_for = kind
            self.placement = {}
        self._notify("backends")
        return rebuild

    def rebuild_worker(self) -> None:
        """The overrides changed: the selected backend's worker is built again."""
        self.prepared_for = self.backend
        self.placement = {}  # known again when the rebuilt worker is ready

    def worker_failed(self, kind: BackendType, message: str, unavailable: bool) -> bool:
        """Building a worker for ``kind`` failed; True when the window should go back to the
        CPU (the selected GPU backend turned out not to work here)."""
        if unavailable:
            self.set_backend_status({kind: message})
        self.prepared_for = None
        return kind is self.backend and kind is not BackendType.CPU and unavailable

    def set_placement(self, kind: BackendType, placement: dict[str, Any]) -> bool:
        """A worker (or a plan for new shapes) of ``kind`` places layers so; False, and
        nothing changes, when another backend is selected by now."""
        if kind is not self.backend:
            return False
        self.placement = dict(placement)
        self._notify("placement")
        return True

    # -- runs -------------------------------------------------------------------------------
    def run_blocker(self) -> str | None:
        """Why a run cannot start now (None: it can)."""
        if self.loaded is None:
            return "Open a model first (File ▸ Open, or drop an .onnx file)"
        missing = self.missing_inputs()
        if missing:
            return f"No value for input(s) {', '.join(missing)}"
        return None

    def begin_run(self, token: int) -> None:
        """A run (once or continuous) with ``token`` was queued: only its results are shown."""
        self.running, self.token = True, token
        self._notify("run")

    def end_run(self) -> bool:
        """Stopped: a result still coming is not shown. True when a run was going on."""
        was, self.running, self.token = self.running, False, None
        if was:
            self._notify("run")
        return was

    def run_failed(self, token: int) -> bool:
        """A run failed; True when it concerns the session (its own run, or a job's -1)."""
        if token not in (-1, self.token):
            return False
        self.running, self.token = False, None
        self._notify("run")
        return True

    def run_finished(self, token: int) -> bool:
        """A run-once or continuous loop ended; True when it was the session's run."""
        if token != self.token or not self.running:
            return False
        self.running = False
        self._notify("run")
        return True

    def accepts(self, result: RunResult | None, generation: int) -> bool:
        """True when ``result`` belongs to the current run and to the bridge's current
        ``generation`` (a load started since makes older results stale; a load that failed
        does not change the model, yet runs after it carry its generation)."""
        return (result is not None and self.loaded is not None and result.token == self.token
                and result.generation == generation)

    def record_result(self, result: RunResult) -> None:
        """A run result is shown: it becomes the last profile, outputs and times."""
        self.last_profile, self.last_outputs = result.profile, result.outputs
        self.times = {t.name: t.ms for t in result.profile.layers}
        self.runs_shown += 1
        self._notify("result")

    def set_model(self, path: str, overrides: dict[str, BackendType] | None = None) -> None:
        """A new model: forget results; start from the overrides saved for it."""
        self.model_path = path
        self.overrides = dict(overrides or {})
        self.previous_overrides = dict(self.overrides)
        self.input_shapes = {}
        self.compare = None
        self.batch, self.batch_total = [], 0
        self._notify("model")

    # -- placement overrides ----------------------------------------------------------------
    def set_overrides(self, overrides: dict[str, BackendType]) -> None:
        """Replace every override."""
        self.overrides = dict(overrides)
        self._notify("overrides")

    def move_layers(self, names: list[str], backend: BackendType | None) -> None:
        """Run ``names`` on ``backend`` (None: the engine's choice), remembering the overrides
        before the move in case the engine refuses it."""
        self.previous_overrides = dict(self.overrides)
        self.set_overrides(self.with_override(names, backend))

    def move_refused(self) -> None:
        """The engine refused the last move: the overrides before it are back."""
        self.set_overrides(self.previous_overrides)

    def fallback_overrides(self, backend: BackendType) -> dict[str, BackendType]:
        """What a worker of ``backend`` takes if the current overrides are refused."""
        return self.overrides_of(self.previous_overrides, backend)

    def with_override(self, names: list[str], backend: BackendType | None
                      ) -> dict[str, BackendType]:
        """The overrides as they would be after moving ``names`` (None: back to automatic)."""
        out = dict(self.overrides)
        for name in names:
            if backend is None:
                out.pop(name, None)
            else:
                out[name] = backend
        return out

    def overrides_for(self, backend: BackendType) -> dict[str, BackendType]:
        """The overrides a worker of ``backend`` can take (the CPU, or that backend)."""
        return self.overrides_of(self.overrides, backend)

    @staticmethod
    def overrides_of(overrides: dict[str, BackendType], backend: BackendType
                     ) -> dict[str, BackendType]:
        """The part of ``overrides`` a worker of ``backend`` can take."""
        return {n: b for n, b in overrides.items() if b is BackendType.CPU or b is backend}

    @staticmethod
    def overrides_to_json(overrides: dict[str, BackendType]) -> str:
        """Overrides as JSON text (for settings and traces)."""
        return json.dumps({n: b.value for n, b in sorted(overrides.items())})

    @staticmethod
    def overrides_from_json(text: str | None) -> dict[str, BackendType]:
        """Overrides read back from ``overrides_to_json`` (bad text gives none)."""
        try:
            data = json.loads(text or "{}")
            return {str(n): BackendType.parse(v) for n, v in data.items()}
        except (ValueError, TypeError, AttributeError):
            return {}

    # -- input shapes -----------------------------------------------------------------------
    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> None:
        """The concrete shape the user chose for a symbolic input."""
        self.input_shapes[name] = tuple(int(d) for d in shape)
        self._notify("shapes")

    # -- compare ----------------------------------------------------------------------------
    def start_compare(self) -> None:
        """A comparison was queued; its result replaces the current one."""
        self.comparing = True

    def drop_compare(self) -> bool:
        """A comparison going on no longer matters (it failed, or another model was opened);
        True when one was going on."""
        was, self.comparing = self.comparing, False
        return was

    def set_compare(self, result: CompareResult | None) -> None:
        """A finished comparison (or None to clear it)."""
        self.comparing = False
        self.compare = result
        self._notify("compare")

    def set_threshold(self, threshold: float) -> None:
        """The relative L2 error above which a layer counts as divergent."""
        self.threshold = float(threshold)
        self._notify("compare")

    def first_divergent(self) -> str | None:
        """The first layer over the threshold in the current comparison."""
        return None if self.compare is None else self.compare.first_over(self.threshold)

    # -- batch ------------------------------------------------------------------------------
    def start_batch(self, total: int) -> None:
        """A batch of ``total`` single runs begins."""
        self.batch, self.batch_total = [], int(total)
        self._notify("batch")

    def add_batch_row(self, row: BatchRow) -> None:
        """One input of the batch is done."""
        self.batch.append(row)
        self._notify("batch")

    def batch_csv(self) -> str:
        """The batch results as CSV: source, latency, error, then top-k class / label / score."""
        buf = io.StringIO()
        k = max((len(r.top) for r in self.batch), default=0)
        w = csv.writer(buf)
        head = ["source", "ms", "error"]
        for i in range(1, k + 1):
            head += [f"top{i}_class", f"top{i}_label", f"top{i}_score"]
        w.writerow(head)
        for r in self.batch:
            row = [r.source, "" if math.isnan(r.ms) else f"{r.ms:.3f}", r.error]
            for i, (cls, score) in enumerate(r.top):
                label = r.labels[i] if i < len(r.labels) else ""
                row += [cls, label, f"{score:.6g}"]
            w.writerow(row)
        return buf.getvalue()
