"""The main window: graph in the centre, inputs / details / outputs / timing in docks.

The window is a view of a Qt-free ``workbench.session.Session`` (``self.session``): the model,
inputs, backend, placement, run state and last results live there; engine work goes through
the UI↔engine bridge, ``workbench.controller``. Its parts are mixins: widgets
(``window_ui``), backends and run results (``window_run``), files (``window_files``),
comparing (``window_compare``), placement (``window_placement``) and batches
(``window_batch``).

Scripting surface (tests, automation): ``open_model(path)``, ``set_backend(BackendType)``,
``start_run(continuous)``, ``stop_run()``, signals ``model_loaded(Model)`` and
``run_completed(Profile)``; ``loaded``, ``placement``, ``running``, ``last_profile`` and the
like read the session. Errors are shown in the window's message bar, never in a modal
dialog, and every one is kept in ``messages``.
"""

from __future__ import annotations

import os
import sys
import time

from PySide6.QtCore import QSettings, QTimer, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QMainWindow

from engine import BackendType
from workbench import theme
from workbench.controller import EngineController
from workbench.paths import DEMO_MODEL, RESOURCES
from workbench.priority import deprioritize_other_threads, native_id, restore
from workbench.session import LoadedModel, Session
from workbench.window_batch import WindowBatch
from workbench.window_compare import WindowCompare
from workbench.window_files import WindowFiles
from workbench.window_placement import WindowPlacement
from workbench.window_run import WindowRun
from workbench.window_ui import WindowUi

__all__ = ["DEMO_MODEL", "RESOURCES", "MainWindow"]

#: Delay between the stages of showing a loaded model: long enough for the repaint of one
#: stage (and any input event) to run before the next stage starts.
STAGE_DELAY_MS = 8


def _session_value(name: str, doc: str) -> property:
    """A read-only window attribute that reads ``session.<name>``."""
    return property(lambda self: getattr(self.session, name), doc=doc)


class MainWindow(WindowUi, WindowRun, WindowFiles, WindowCompare, WindowPlacement, WindowBatch,
                 QMainWindow):
    """The workbench window."""

    model_loaded = Signal(object)   # engine.Model
    run_completed = Signal(object)  # engine.profile.Profile of the run just shown
    message_shown = Signal(str, str)  # level, text

    loaded = _session_value("loaded", "The loaded model (``LoadedModel``) or None.")
    backend = _session_value("backend", "The backend selected for the next runs.")
    backend_status = _session_value("backend_status", "{backend: None | why unavailable}.")
    placement = _session_value("placement", "{layer: Placement} shown on the graph.")
    running = _session_value("running", "True while a run (once or continuous) is going on.")
    last_profile = _session_value("last_profile", "Profile of the last run shown.")
    last_outputs = _session_value("last_outputs", "{output: array} of the last run shown.")
    times = _session_value("times", "{layer: ms} of the last run shown.")
    runs_shown = _session_value("runs_shown", "Run results shown since the model loaded.")
    load_timings = _session_value("load_timings", "load_ms, layout_ms, to_graph_ms.")

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
        self.session = Session()
        self._t_open = 0.0
        self._inputs_generation = -1  # the opened model whose input cards are shown
        self._shown_generation = -1  # the opened model whose load stages have all run
        self._pending_run: bool | None = None  # a run asked for before that (continuous?)
        self._init_run_display()

        # compute threads (engine, Numba, a software GPU) yield the CPU to this UI thread;
        # threads appear as backends start, so look again now and then
        self._ui_tid = native_id()
        self._reniced: dict[int, int] = {}
        self._nice_timer = QTimer(self)
        self._nice_timer.timeout.connect(
            lambda: deprioritize_other_threads({self._ui_tid}, changed=self._reniced))
        self._nice_timer.start(1500)
        self._build_ui()
        # the run / export actions follow the session's run state and results
        self.session.subscribe(lambda topic: topic in ("model", "run", "result")
                               and self._update_actions())
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
        self.session.load_timings.clear()
        self.controller.load(os.path.abspath(path))

    def set_backend(self, kind: BackendType | str) -> bool:
        """Select the backend for the next runs; False (with a message) if it is unavailable."""
        kind = BackendType.parse(kind)
        reason = self.session.unavailable_reason(kind)
        if reason is not None:
            self.show_message("warning", f"{kind.name} is unavailable: {reason}")
            self._select_combo(self.session.backend)
            return False
        self._select_combo(kind)
        if self.session.choose_backend(kind):
            self.stop_run()
            self.graph.set_placement(None)
            self.controller.prepare(kind, self.session.overrides_for(kind))
        self._update_actions()
        return True

    def start_run(self, continuous: bool = False) -> bool:
        """Run once or until ``stop_run``; results arrive through ``run_completed``."""
        if self.running:
            self.stop_run()
        if self.loaded is not None and self._shown_generation != self.loaded.generation:
            # the model is still being shown (input cards, backend): run once that is done
            self._pending_run = continuous
            self.status_run.setText("starting once the model is shown…")
            return True
        self.session.set_feeds(self.current_feeds())
        problem = self.session.run_blocker()
        if problem is not None:
            self.show_message("warning" if self.loaded is None else "error", problem)
            return False
        self._messages_before_run = len(self.message_bar.history)
        self.session.begin_run(self.controller.run(self.session.feeds, continuous))
        self.status_run.setText("running continuously…" if continuous else "running…")
        return True

    def stop_run(self) -> None:
        """Stop at once: the run in flight finishes in the background and is not shown."""
        self._pending_run = None
        self.controller.stop()
        self._stop_display()
        if self.session.end_run():
            self.status_run.setText("stopped")
        self._update_actions()

    def select_layer(self, name: str, center_graph: bool = True) -> None:
        """Select a layer everywhere: graph, timing cursor, details (and its output, read
        back from the backend that ran it)."""
        session = self.session
        index = session.layer_index(name)
        if index < 0:
            return
        self.graph.select(name, center=center_graph)
        self.timing.select(name)
        self.details.show_layer(session.model, session.model.layers[index],
                                session.placement.get(name), session.times.get(name))
        if self.details.preview_tensor:
            self.controller.capture(self.details.preview_tensor, session.feeds)

    def show_message(self, level: str, text: str) -> None:
        self.message_bar.show_message(level, text)
        self.message_shown.emit(level, text)

    @property
    def messages(self) -> list[tuple[str, str]]:
        return self.message_bar.history

    # -- model loading ----------------------------------------------------------------------
    def _on_model_ready(self, lm: LoadedModel) -> None:
        """The graph first, then the session's new state, the inputs, the output and timing
        panels and the worker, each a few milliseconds apart: done in one go, the switch-over
        held the UI thread ~70 ms on a 900-layer model, and stages posted with no delay ran
        back to back before the repaints and timers between them."""
        if lm.generation != self.controller.generation:
            return
        self.session.load_timings.update(load_ms=lm.load_ms, layout_ms=lm.layout_ms)
        self.graph.set_graph(lm.layout, lm.model, lm.geometry)
        QTimer.singleShot(STAGE_DELAY_MS, lambda: self._show_model(lm))

    def _show_model(self, lm: LoadedModel) -> None:
        if lm.generation != self.controller.generation:
            return  # another model was opened meanwhile
        self.session.set_loaded(lm, self._saved_overrides(lm.path))
        QTimer.singleShot(STAGE_DELAY_MS, lambda: self._show_inputs(lm))

    def _show_inputs(self, lm: LoadedModel) -> None:
        if lm.generation != self.controller.generation:
            return
        self._build_inputs(lm)
        QTimer.singleShot(STAGE_DELAY_MS, lambda: self._show_results_side(lm))

    def _build_inputs(self, lm: LoadedModel) -> None:
        """The input cards of ``lm`` (once per opened model)."""
        if self._inputs_generation == lm.generation:
            return
        self._inputs_generation = lm.generation
        self.inputs.set_model(lm.model, lm.preprocess)
        self._feed_sample(lm)

    def current_feeds(self) -> dict:
        """The inputs' values for the loaded model. A run or compare started in the few
        milliseconds between a model being loaded and its input cards being shown builds the
        cards now, instead of running on the previous model's inputs."""
        if self.loaded is not None:
            self._build_inputs(self.loaded)
        return self.inputs.feeds()

    def _show_results_side(self, lm: LoadedModel) -> None:
        if lm.generation != self.controller.generation:
            return
        model = lm.model
        self.outputs.set_model(model, lm.labels)
        self.timing.reset([layer.name for layer in model.layers])
        self.details.show_nothing()
        self.search.clear()
        QTimer.singleShot(STAGE_DELAY_MS, lambda: self._start_worker(lm))

    def _start_worker(self, lm: LoadedModel) -> None:
        if lm.generation != self.controller.generation:
            return
        model = lm.model
        name = os.path.basename(lm.path)
        self.setWindowTitle(f"{name} — Inference Workbench")
        self.status_model.setText(f"{name} · {len(model.layers)} layers · "
                                  f"{len(model.inputs)} in / {len(model.outputs)} out")
        self.status_run.setText("")
        if self.message_bar.isVisible() and self.message_bar.property("level") != "error":
            self.message_bar.dismiss()
        self._add_recent(lm.path)
        pending, self._pending_run = self._pending_run, None
        self.set_backend(self.session.backend)
        self._shown_generation = lm.generation
        self._update_actions()
        self.model_loaded.emit(model)
        if pending is not None:
            self.start_run(pending)

    def _feed_sample(self, lm: LoadedModel) -> None:
        """Models that name a sample input in their metadata start with it (the demo does)."""
        sample = (lm.preprocess or {}).get("sample")
        if sample and len(self.inputs.cards) == 1:
            path = os.path.join(os.path.dirname(lm.path), sample)
            if os.path.isfile(path):
                self.inputs.cards[0].load_file(path)

    def _on_graph_drawn(self) -> None:
        # load_ms is set when this open's model arrives: a graph of the previous model that
        # finishes drawing after the new open is not the one being timed
        if self._t_open and "load_ms" in self.load_timings \
                and "to_graph_ms" not in self.load_timings:
            self.session.load_timings["to_graph_ms"] = (time.perf_counter() - self._t_open) * 1e3

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

    def _on_inputs_changed(self) -> None:
        self.session.set_feeds(self.inputs.feeds())
        name = self.details.layer_name
        if name and not self.running:
            self.select_layer(name, center_graph=False)

    # -- UI helpers -------------------------------------------------------------------------
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
