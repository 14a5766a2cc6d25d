"""The main window: graph in the centre, inputs / details / outputs / timing in docks.

Scripting surface (tests, automation): ``open_model(path)``, ``set_backend(BackendType)``,
``start_run(continuous)``, ``stop_run()``, signals ``model_loaded(Model)`` and
``run_completed(Profile)``. Errors are shown in the window's message bar, never in a modal
dialog, and every one is kept in ``messages``.
"""

from __future__ import annotations

import os
import sys
import time

from PySide6.QtCore import QSettings, QTimer, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QMainWindow,
)

from engine import BackendType
from workbench import theme
from workbench.controller import EngineController, LoadedModel, RunResult
from workbench.paths import DEMO_MODEL, RESOURCES
from workbench.priority import deprioritize_other_threads, native_id, restore
from workbench.session import Session
from workbench.window_batch import WindowBatch
from workbench.window_compare import WindowCompare
from workbench.window_files import WindowFiles
from workbench.window_placement import WindowPlacement
from workbench.window_ui import WindowUi

__all__ = ["DEMO_MODEL", "RESOURCES", "MainWindow"]

PENDING = "checking…"
UI_INTERVAL_MS = 200  # newest run result shown at most this often while running continuously
STAGE_MS = 15  # a result is shown in steps, so no single repaint holds the UI thread long
GRAPH_TIMES_MS = 1000  # node labels with times refresh at most this often while running


class MainWindow(WindowUi, WindowFiles, WindowCompare, WindowPlacement, WindowBatch,
                 QMainWindow):
    """The workbench window."""

    model_loaded = Signal(object)   # engine.Model
    run_completed = Signal(object)  # engine.profile.Profile of the run just shown
    message_shown = Signal(str, str)  # level, text

    def __init__(self, settings: QSettings | None = None, probe_backends: bool = True):
        super().__init__()
        # the controller and engine threads run Python too: hand the interpreter back to the
        # UI thread every millisecond instead of every 5 (keeps the window's stalls short)
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.001))
        self.setWindowTitle("Inference Workbench")
        self.setWindowIcon(QIcon(os.path.join(RESOURCES, "icons", "workbench.svg")))
        self.resize(1440, 900)
        self.setStyleSheet(theme.STYLESHEET)
        self.setAcceptDrops(True)
        self.settings = settings or QSettings("inference-workbench", "workbench")
        self.controller = EngineController(self)
        self.session = Session()  # overrides, shapes, compare and batch results (no Qt)
        self.backend = BackendType.CPU
        self.backend_status: dict[BackendType, str | None] = {
            BackendType.CPU: None, BackendType.GPU_COMPUTE: PENDING, BackendType.GPU_PIXEL: PENDING}
        self.loaded: LoadedModel | None = None
        self._messages_before_run = 0
        self.placement: dict = {}
        self.last_profile = None
        self.last_outputs: dict = {}
        self.times: dict[str, float] = {}
        self.running = False
        self._token: int | None = None
        self._prepared_for: BackendType | None = None
        self._t_open = 0.0
        self.load_timings: dict[str, float] = {}
        self.runs_shown = 0
        self._last_ui = 0.0
        self._result_timer = QTimer(self)
        self._result_timer.setSingleShot(True)
        self._result_timer.timeout.connect(self._consume_result)
        self._stage_timer = QTimer(self)
        self._stage_timer.setSingleShot(True)
        self._stage_timer.timeout.connect(self._next_stage)
        self._stages: list = []
        self._shown: RunResult | None = None
        self._last_graph_times = 0.0

        # compute threads (engine, Numba, a software GPU) yield the CPU to this UI thread;
        # threads appear as backends start, so look again now and then
        self._ui_tid = native_id()
        self._reniced: dict[int, int] = {}
        self._nice_timer = QTimer(self)
        self._nice_timer.timeout.connect(
            lambda: deprioritize_other_threads({self._ui_tid}, changed=self._reniced))
        self._nice_timer.start(1500)
        self._build_ui()
        self._connect()
        self._build_compare()
        self._build_batch()
        self._connect_placement()
        self._rebuild_recent()
        self._refresh_backends()
        self._update_actions()
        if probe_backends:
            self.controller.probe_backends()

    # -- scripting surface ------------------------------------------------------------------
    def open_model(self, path: str) -> None:
        """Load ``path`` in the background; ``model_loaded`` fires when the graph is shown."""
        self.stop_run()
        self._t_open = time.perf_counter()
        self.load_timings = {}
        self.controller.load(os.path.abspath(path))

    def set_backend(self, kind: BackendType | str) -> bool:
        """Select the backend for the next runs; False (with a message) if it is unavailable."""
        kind = BackendType.parse(kind)
        reason = self.backend_status.get(kind)
        if reason is not None and reason != PENDING:
            self.show_message("warning", f"{kind.name} is unavailable: {reason}")
            self._select_combo(self.backend)
            return False
        changed = kind is not self.backend or self._prepared_for is not kind
        self.backend = kind
        self._select_combo(kind)
        if changed and self.loaded is not None:
            self.stop_run()
            self._prepared_for = kind
            self.placement = {}
            self.graph.set_placement(None)
            self.controller.prepare(kind, self.session.overrides_for(kind))
        self._update_actions()
        return True

    def start_run(self, continuous: bool = False) -> bool:
        """Run once or until ``stop_run``; results arrive through ``run_completed``."""
        if self.loaded is None:
            self.show_message("warning", "Open a model first (File ▸ Open, or drop an .onnx file)")
            return False
        if self.running:
            self.stop_run()
        feeds = self.inputs.feeds()
        missing = [c.spec.name for c in self.inputs.cards if c.value is None]
        if missing:
            self.show_message("error", f"No value for input(s) {', '.join(missing)}")
            return False
        self.running = True
        self._messages_before_run = len(self.message_bar.history)
        self._token = self.controller.run(feeds, continuous)
        self.status_run.setText("running continuously…" if continuous else "running…")
        self._update_actions()
        return True

    def stop_run(self) -> None:
        """Stop at once: the run in flight finishes in the background and is not shown."""
        self.controller.stop()
        self._token = None
        self._result_timer.stop()
        self._stage_timer.stop()
        while self._stages:  # finish showing the run already on screen: panels stay consistent
            self._stages.pop(0)(self._shown)
        self.controller.ui_idle.set()
        if self.running:
            self.running = False
            self.status_run.setText("stopped")
        self._update_actions()

    def select_layer(self, name: str, center_graph: bool = True) -> None:
        """Select a layer everywhere: graph, timing cursor, details (and its output preview)."""
        if self.loaded is None:
            return
        model = self.loaded.model
        index = next((i for i, layer in enumerate(model.layers) if layer.name == name), -1)
        if index < 0:
            return
        layer = model.layers[index]
        self.graph.select(name, center=center_graph)
        self.timing.select(name)
        self.details.show_layer(model, layer, self.placement.get(name), self.times.get(name))
        if self.details.preview_tensor:
            self.controller.capture(self.details.preview_tensor, self.inputs.feeds())

    def show_message(self, level: str, text: str) -> None:
        self.message_bar.show_message(level, text)
        self.message_shown.emit(level, text)

    @property
    def messages(self) -> list[tuple[str, str]]:
        return self.message_bar.history

    # -- controller events ------------------------------------------------------------------
    def _on_model_ready(self, lm: LoadedModel) -> None:
        if lm.generation != self.controller.generation:
            return
        self.loaded = lm
        model = lm.model
        self.placement, self.times, self.last_profile, self.last_outputs = {}, {}, None, {}
        self.runs_shown = 0
        self.load_timings.update(load_ms=lm.load_ms, layout_ms=lm.layout_ms)
        self.graph.set_graph(lm.layout, model, lm.geometry)
        self.inputs.set_model(model, lm.preprocess)
        self._feed_sample(lm)
        self.outputs.set_model(model, lm.labels)
        self.timing.reset([layer.name for layer in model.layers])
        self.details.show_nothing()
        self.search.clear()
        name = os.path.basename(lm.path)
        self.setWindowTitle(f"{name} — Inference Workbench")
        self.status_model.setText(f"{name} · {len(model.layers)} layers · "
                                  f"{len(model.inputs)} in / {len(model.outputs)} out")
        self.status_run.setText("")
        if self.message_bar.isVisible() and self.message_bar.property("level") != "error":
            self.message_bar.dismiss()
        self._add_recent(lm.path)
        self._load_overrides(lm.path)
        if self.backend_status.get(self.backend) not in (None, PENDING):
            self.backend = BackendType.CPU
        self._prepared_for = None
        self.set_backend(self.backend)
        self._update_actions()
        self.model_loaded.emit(model)

    def _feed_sample(self, lm: LoadedModel) -> None:
        """Models that name a sample input in their metadata start with it (the demo does)."""
        sample = (lm.preprocess or {}).get("sample")
        if sample and len(self.inputs.cards) == 1:
            path = os.path.join(os.path.dirname(lm.path), sample)
            if os.path.isfile(path):
                self.inputs.cards[0].load_file(path)

    def _on_graph_drawn(self) -> None:
        if self._t_open and "to_graph_ms" not in self.load_timings:
            self.load_timings["to_graph_ms"] = (time.perf_counter() - self._t_open) * 1e3

    def _on_load_failed(self, path: str, message: str) -> None:
        self.show_message("error", f"Cannot open {os.path.basename(path)}: {message}")
        self._update_actions()

    def _on_progress(self, stage: str, fraction: float) -> None:
        if not stage:
            self.progress_bar.hide()
            self.progress_label.setText("")
            return
        self.progress_label.setText(stage)
        if fraction < 0:
            self.progress_bar.setRange(0, 0)
        else:
            self.progress_bar.setRange(0, 100)
            self.progress_bar.setValue(int(100 * max(0.0, min(1.0, fraction))))
        self.progress_bar.show()

    def _on_backends_probed(self, status: dict) -> None:
        self.backend_status.update(status)
        self._refresh_backends()

    def _on_worker_ready(self, kind: BackendType, placement: dict) -> None:
        if kind is not self.backend:
            return
        self.placement = placement
        self.graph.set_placement(placement)
        fallback = sum(p.is_fallback for p in placement.values())
        text = f"{kind.name} ready"
        if fallback:
            text += f" · {fallback} layer(s) fall back to the CPU (dashed orange)"
        self.status_run.setText(text)
        self.placement_shown.emit(placement)
        self._plan_current_shapes()
        name = self.details.layer_name
        if name:
            self.select_layer(name, center_graph=False)
        self._update_actions()

    def _on_worker_failed(self, kind: BackendType, message: str, unavailable: bool) -> None:
        if unavailable:
            self.backend_status[kind] = message
            self._refresh_backends()
        self.show_message("error", f"Cannot prepare {kind.name}: {message}")
        self._prepared_for = None
        if kind is self.backend and kind is not BackendType.CPU and unavailable:
            self.set_backend(BackendType.CPU)

    def _on_result_ready(self) -> None:
        if self._result_timer.isActive():
            return
        wait = UI_INTERVAL_MS - (time.perf_counter() - self._last_ui) * 1e3
        if wait <= 0:
            self._consume_result()
        else:
            self._result_timer.start(int(wait) + 1)

    def _consume_result(self) -> None:
        if self._stages:  # the previous result is still being shown: take the next after it
            self._result_timer.start(STAGE_MS)
            return
        result: RunResult | None = self.controller.take_result()
        if result is None or result.token != self._token:
            return
        if result.generation != self.controller.generation or self.loaded is None:
            return
        self._last_ui = time.perf_counter()
        self._shown = result
        # one widget group per event-loop turn: each repaint stays short
        self._stages = [self._show_bars, self._show_latency, self._show_ops, self._show_rest]
        self.controller.ui_idle.clear()
        self._next_stage()

    def _next_stage(self) -> None:
        if not self._stages or self._shown is None:
            return
        self._stages.pop(0)(self._shown)
        if self._stages:
            self._stage_timer.start(STAGE_MS)
        else:
            self.controller.ui_idle.set()

    def _show_bars(self, result: RunResult) -> None:
        if result.placement != self.placement and result.backend is self.backend:
            self.placement = result.placement
            self.graph.set_placement(self.placement)
        self.timing.set_costs(result.costs)
        self.timing.user_layers = {n for n, p in result.placement.items() if p.is_user_choice}
        self.timing.update_bars(result.profile)
        # paint now, alone: left to the event loop, several plots would repaint together
        self.timing.layer_plot.viewport().repaint()

    def _show_latency(self, result: RunResult) -> None:
        self.timing.update_latency(result.profile)
        self.timing.latency_plot.viewport().repaint()

    def _show_ops(self, result: RunResult) -> None:
        self.timing.update_ops(result.profile)
        self.timing.op_plot.viewport().repaint()
        self.memory_panel.update_timeline(result.memory)

    def _show_rest(self, result: RunResult) -> None:
        profile = result.profile
        self.last_profile, self.last_outputs = profile, result.outputs
        self.times = {t.name: t.ms for t in profile.layers}
        now = time.perf_counter()
        if now - self._last_graph_times > GRAPH_TIMES_MS / 1e3 or not self.running:
            self._last_graph_times = now
            self.graph.set_times(self.times)
        self.outputs.update_outputs(result.outputs)
        self.runs_shown += 1
        bar = self.message_bar
        if not bar.isHidden() and bar.property("level") == "error" and \
                len(bar.history) <= self._messages_before_run:
            bar.dismiss()  # an error shown before this run succeeded is stale now
        self.status_run.setText(f"{result.backend.name} · run {result.index} · "
                                f"{profile.total_ms:.2f} ms")
        name = self.details.layer_name
        if name and self.loaded is not None:
            layers = self.loaded.model.layers
            index = next(i for i, la in enumerate(layers) if la.name == name)
            self.details.show_layer(self.loaded.model, layers[index],
                                    self.placement.get(name), self.times.get(name))
            self.controller.capture(self.details.preview_tensor or "", self.inputs.feeds())
        self._update_actions()
        self.run_completed.emit(profile)

    def _on_run_failed(self, message: str, token: int) -> None:
        if token not in (-1, self._token):
            return
        self.show_message("error", message)
        self.running = False
        self._token = None
        self.status_run.setText("run failed")
        self._update_actions()

    def _on_run_finished(self, token: int) -> None:
        if token == self._token and self.running:
            self.running = False
            if self.status_run.text().startswith("running"):
                self.status_run.setText("done")
            self._update_actions()

    def _on_inputs_changed(self) -> None:
        name = self.details.layer_name
        if name and not self.running:
            self.select_layer(name, center_graph=False)

    # -- UI helpers -------------------------------------------------------------------------
    def _refresh_backends(self) -> None:
        model = self.backend_combo.model()
        for row, kind in enumerate(BackendType):
            item = model.item(row)
            reason = self.backend_status.get(kind)
            label = theme.BACKEND_LABELS[kind]
            if reason is None:
                item.setEnabled(True)
                item.setText(label)
                item.setToolTip(f"{kind.name}: available")
            elif reason == PENDING:
                item.setEnabled(True)
                item.setText(f"{label} (checking…)")
                item.setToolTip("checking whether this backend works on this machine")
            else:
                item.setEnabled(False)
                item.setText(f"{label} — unavailable")
                item.setToolTip(f"{kind.name} unavailable: {reason}")
        self._select_combo(self.backend)

    def is_backend_available(self, kind: BackendType) -> bool:
        return self.backend_status.get(kind) is None

    def _select_combo(self, kind: BackendType) -> None:
        self.backend_combo.blockSignals(True)
        self.backend_combo.setCurrentIndex(list(BackendType).index(kind))
        self.backend_combo.blockSignals(False)

    def _on_combo(self, row: int) -> None:
        self.set_backend(list(BackendType)[row])

    def _update_actions(self) -> None:
        have = self.loaded is not None
        self.act_run.setEnabled(have)
        self.act_loop.setEnabled(have)
        self.act_stop.setEnabled(self.running)
        self.act_trace.setEnabled(self.last_profile is not None)
        self.act_csv.setEnabled(self.last_profile is not None)

    def _on_search(self, text: str) -> None:
        n = self.graph.search(text)
        self.search_count.setText(f"{n} match{'es' if n != 1 else ''}" if text.strip() else "")

    def _next_match(self) -> None:
        name = self.graph.next_match()
        if name is not None:
            pos, total = self.graph.match_position
            self.search_count.setText(f"{pos} of {total}")
            self.select_layer(name, center_graph=False)

    def closeEvent(self, event) -> None:
        self.stop_run()
        self.controller.shutdown(timeout=3.0)
        self._nice_timer.stop()
        restore(self._reniced)
        super().closeEvent(event)
