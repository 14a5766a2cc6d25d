"""Comparing two backends from the main window (a mixin of MainWindow).

Scripting surface: ``compare_backends(backend, against)``, ``set_compare_threshold(value)``,
signal ``compare_completed(CompareResult)``. The work runs in the controller thread; the
result lands in ``session.compare``, the graph is coloured by error, the compare panel plots
the error along the execution order, and the first layer over the threshold is selected and
centred.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDockWidget

from engine import BackendType
from engine.compare import CPU_FLOAT64, parse_side, side_label
from workbench.compare_view import ComparePanel
from workbench.session import CompareResult


class WindowCompare:
    """Compare dock, its controller job and what a result does to the graph."""

    compare_completed = Signal(object)  # CompareResult
    compare_failed = Signal(str)

    def _build_compare(self) -> None:
        self.compare_panel = ComparePanel()
        dock = QDockWidget("Compare backends", self)
        dock.setObjectName("dock_compare")
        dock.setWidget(self.compare_panel)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
        self.tabifyDockWidget(self.docks["timing"], dock)
        self.docks["timing"].raise_()
        self.docks["compare"] = dock
        panel = self.compare_panel
        panel.compare_requested.connect(self.compare_backends)
        panel.threshold_changed.connect(self.set_compare_threshold)
        panel.layer_clicked.connect(self.select_layer)
        panel.graph_colouring.connect(lambda _on: self._colour_graph_by_error())
        self.controller.compare_done.connect(self._on_compare_done)
        self.controller.compare_failed.connect(self._on_compare_failed)

    def compare_backends(self, backend: BackendType | str | None = None,
                         against: BackendType | str = BackendType.CPU) -> bool:
        """Run the current inputs on ``backend`` (default: the selected one) and ``against``
        (a backend, or ``"cpu-f64"``: the CPU backend running the model in float64) with
        every layer captured; ``compare_completed`` fires with the per-layer errors."""
        if self.loaded is None:
            self.show_message("warning", "Open a model first, then compare backends")
            return False
        kinds = [parse_side(backend or self.backend), parse_side(against)]
        for kind in kinds:
            backend_kind = BackendType.CPU if kind == CPU_FLOAT64 else kind
            if not self.is_backend_available(backend_kind):
                self.show_message("warning", f"Cannot compare on {side_label(kind)}: "
                                  f"{self.backend_status.get(backend_kind)}")
                return False
        self.session.set_feeds(self.current_feeds())
        feeds = self.session.feeds
        if self.session.missing_inputs():
            self.show_message("error", "Every input needs a value before comparing")
            return False
        self.stop_run()
        self.session.start_compare()
        self.compare_panel.set_busy(f"Comparing {side_label(kinds[0])} against "
                                    f"{side_label(kinds[1])}…", *kinds)
        self.docks["compare"].raise_()
        self.controller.compare(kinds[0], kinds[1], feeds)
        return True

    def set_compare_threshold(self, value: float) -> None:
        """Set the divergence threshold (relative L2); the first layer over it is selected."""
        self.session.set_threshold(value)
        self.compare_panel.set_threshold(value)
        self._show_compare(select=True)

    def _on_compare_done(self, result: CompareResult) -> None:
        self.session.set_compare(result)
        self._show_compare(select=True)
        self.compare_completed.emit(result)

    def _on_compare_failed(self, message: str) -> None:
        self.session.drop_compare()
        self.compare_panel.set_idle(message)
        self.show_message("error", message)
        self.compare_failed.emit(message)

    def _show_compare(self, select: bool) -> None:
        result = self.session.compare
        first = self.session.first_divergent()
        self.compare_panel.show_result(result, self.session.threshold, first)
        self._colour_graph_by_error()
        if select and first is not None:
            self.select_layer(first, center_graph=True)
            self.graph.center_on(first)

    def _colour_graph_by_error(self) -> None:
        result = self.session.compare
        if result is None or not self.compare_panel.colour.isChecked():
            self.graph.set_errors(None)
        else:
            self.graph.set_errors(result.rel_l2(), self.session.threshold)
