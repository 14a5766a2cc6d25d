"""Backends and runs in the main window (a mixin of MainWindow): the backend menu, workers
becoming ready or failing, and run results shown in short stages so the UI thread is never
held long. The state (backend, placement, running, last results) lives in ``self.session``;
this module only shows it.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer

from engine import BackendType
from workbench import theme
from workbench.session import PENDING, RunResult

UI_INTERVAL_MS = 200  # newest run result shown at most this often while running continuously
STAGE_MS = 15  # a result is shown in steps, so no single repaint holds the UI thread long
GRAPH_TIMES_MS = 1000  # node labels with times refresh at most this often while running


class WindowRun:
    """Backend combo box, worker events and the staged display of run results."""

    def _init_run_display(self) -> None:
        self._messages_before_run = 0
        self._last_ui = 0.0
        self._result_timer = self._single_shot(self._consume_result)
        self._stage_timer = self._single_shot(self._next_stage)
        self._stages: list = []
        self._shown: RunResult | None = None
        self._last_graph_times = 0.0

    def _single_shot(self, fn) -> QTimer:
        timer = QTimer(self)
        timer.setSingleShot(True)
        timer.timeout.connect(fn)
        return timer

    def _stop_display(self) -> None:
        """Drop pending results; finish showing the run on screen (panels stay consistent)."""
        self._result_timer.stop()
        self._stage_timer.stop()
        while self._stages:
            self._stages.pop(0)(self._shown)
        self.controller.ui_idle.set()

    # -- backends ---------------------------------------------------------------------------
    def is_backend_available(self, kind: BackendType) -> bool:
        return self.session.is_backend_available(kind)

    def _refresh_backends(self) -> None:
        model = self.backend_combo.model()
        for row, kind in enumerate(BackendType):
            item = model.item(row)
            reason = self.session.backend_status.get(kind)
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
        self._select_combo(self.session.backend)

    def _select_combo(self, kind: BackendType) -> None:
        self.backend_combo.blockSignals(True)
        self.backend_combo.setCurrentIndex(list(BackendType).index(kind))
        self.backend_combo.blockSignals(False)

    def _on_combo(self, row: int) -> None:
        self.set_backend(list(BackendType)[row])

    def _on_backends_probed(self, status: dict) -> None:
        self.session.set_backend_status(status)
        self._refresh_backends()

    def _on_worker_ready(self, kind: BackendType, placement: dict) -> None:
        if not self.session.set_placement(kind, placement):
            return
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
        back_to_cpu = self.session.worker_failed(kind, message, unavailable)
        if unavailable:
            self._refresh_backends()
        self.show_message("error", f"Cannot prepare {kind.name}: {message}")
        if back_to_cpu:
            self.set_backend(BackendType.CPU)

    # -- results ----------------------------------------------------------------------------
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
        if not self.session.accepts(result, self.controller.generation):
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
        if result.placement != self.session.placement and \
                self.session.set_placement(result.backend, result.placement):
            self.graph.set_placement(result.placement)
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
        session = self.session
        session.record_result(result)
        now = time.perf_counter()
        if now - self._last_graph_times > GRAPH_TIMES_MS / 1e3 or not session.running:
            self._last_graph_times = now
            self.graph.set_times(session.times)
        self.outputs.update_outputs(result.outputs)
        bar = self.message_bar
        if not bar.isHidden() and bar.property("level") == "error" and \
                len(bar.history) <= self._messages_before_run:
            bar.dismiss()  # an error shown before this run succeeded is stale now
        self.status_run.setText(f"{result.backend.name} · run {result.index} · "
                                f"{result.profile.total_ms:.2f} ms")
        name = self.details.layer_name
        index = session.layer_index(name) if name else -1
        if index >= 0:
            self.details.show_layer(session.model, session.model.layers[index],
                                    session.placement.get(name), session.times.get(name))
            self.controller.capture(self.details.preview_tensor or "", session.feeds)
        self.run_completed.emit(result.profile)

    def _on_run_failed(self, message: str, token: int) -> None:
        if not self.session.run_failed(token):
            return
        self.show_message("error", message)
        self.status_run.setText("run failed")

    def _on_run_finished(self, token: int) -> None:
        if self.session.run_finished(token):
            if self.status_run.text().startswith("running"):
                self.status_run.setText("done")
