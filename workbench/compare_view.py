"""The compare panel: pick two backends, run the same inputs on both, and see each layer's
error along the execution order (log scale) against an editable threshold. A click on the
plot selects that layer. The plot items are made once and updated with ``setData``."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine import BackendType
from engine.compare import CPU_FLOAT64, side_label
from workbench import theme
from workbench.session import CompareResult
from workbench.widgets import StableLabel

FLOOR = 1e-12  # errors of exactly zero are drawn here on the log axis


class ComparePanel(QWidget):
    """Controls and the error-along-execution plot of a comparison."""

    compare_requested = Signal(object, object)  # backend, against
    threshold_changed = Signal(float)
    layer_clicked = Signal(str)
    graph_colouring = Signal(bool)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.names: list[str] = []
        self.backend = QComboBox()
        self.against = QComboBox()
        for kind in BackendType:
            self.backend.addItem(theme.BACKEND_LABELS[kind], kind)
            self.against.addItem(theme.BACKEND_LABELS[kind], kind)
        self.against.addItem(side_label(CPU_FLOAT64), CPU_FLOAT64)
        self.against.setToolTip("the reference: another backend, or the CPU backend running "
                                "the model in float64 (each backend's own float32 error)")
        self.backend.setCurrentIndex(list(BackendType).index(BackendType.GPU_COMPUTE))
        self.threshold = QLineEdit("1e-3")
        self.threshold.setFixedWidth(70)
        self.threshold.setToolTip("relative L2 error above which a layer diverges")
        self.threshold.editingFinished.connect(self._threshold_edited)
        self.button = QPushButton("Compare")
        self.button.clicked.connect(lambda: self.compare_requested.emit(
            self.backend.currentData(), self.against.currentData()))
        self.colour = QCheckBox("colour graph by error")
        self.colour.setChecked(True)
        self.colour.toggled.connect(self.graph_colouring)
        row = QHBoxLayout()
        for w in (QLabel("Run"), self.backend, QLabel("against"), self.against,
                  QLabel("threshold"), self.threshold, self.button, self.colour):
            row.addWidget(w)
        row.addStretch(1)
        self.status = StableLabel("Compare runs the current inputs on two backends with every "
                                  "layer's output captured.", 600)

        self.plot = pg.PlotWidget()
        self.plot.setLogMode(y=True)
        self.plot.setLabel("left", "relative L2 error")
        self.plot.setLabel("bottom", "layer (execution order)")
        self.plot.showGrid(x=False, y=True, alpha=0.25)
        self.plot.setMouseEnabled(x=True, y=False)
        self.curve = self.plot.plot([], [], pen=pg.mkPen("#8A94A6", width=1))
        # one scatter item per error class with a single brush (per-point brushes are slow)
        self.points = [pg.ScatterPlotItem(size=5, pen=None, brush=pg.mkBrush(c))
                       for c in theme.ERROR_COLORS]
        for item in self.points:
            self.plot.addItem(item)
        self.limit = pg.InfiniteLine(angle=0, pen=pg.mkPen(theme.ERROR_COLORS[3], width=1.5,
                                                           style=Qt.PenStyle.DashLine))
        self.plot.addItem(self.limit)
        self.first = pg.InfiniteLine(angle=90, pen=pg.mkPen(theme.SELECT_COLOR, width=2))
        self.first.setVisible(False)
        self.plot.addItem(self.first)
        self.plot.scene().sigMouseClicked.connect(self._on_click)
        self._set_limit(1e-3)

        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addLayout(row)
        box.addWidget(self.status)
        box.addWidget(self.plot, 1)

    def set_threshold(self, value: float) -> None:
        """Show ``value`` as the threshold (does not emit)."""
        self.threshold.setText(f"{value:g}")
        self._set_limit(value)

    def _set_limit(self, value: float) -> None:
        self._threshold = value
        self.limit.setPos(math.log10(value))

    def _threshold_edited(self) -> None:
        try:
            value = float(self.threshold.text())
        except ValueError:
            value = -1.0
        if not value > 0:
            self.threshold.setText(f"{self._threshold:g}")
            return
        if value != self._threshold:
            self._set_limit(value)
            self.threshold_changed.emit(value)

    def set_busy(self, text: str, backend=None, against=None) -> None:
        """A comparison is running (of ``backend`` against ``against``, shown in the pickers
        when given: a scripted comparison shows what it compares)."""
        for combo, side in ((self.backend, backend), (self.against, against)):
            index = -1 if side is None else combo.findData(side)
            if index >= 0:
                combo.setCurrentIndex(index)
        self.button.setEnabled(False)
        self.status.setText(text)

    def set_idle(self, text: str | None = None) -> None:
        """No comparison is running."""
        self.button.setEnabled(True)
        if text is not None:
            self.status.setText(text)

    def show_result(self, result: CompareResult | None, threshold: float,
                    first: str | None) -> None:
        """Plot a comparison (None clears the plot)."""
        self._set_limit(threshold)
        if result is None:
            if self.names:  # (clearing an empty plot still costs pyqtgraph milliseconds)
                self.names = []
                self.curve.setData([], [])
                for item in self.points:
                    item.setData([], [])
            self.first.setVisible(False)
            return
        self.names = [row["name"] for row in result.layers]
        rel = np.array([row["rel_l2"] if row["rel_l2"] is not None else np.inf
                        for row in result.layers], float)
        shown = np.where(np.isfinite(rel), np.maximum(rel, FLOOR), 1e3)
        x = np.arange(len(rel), dtype=float)
        self.curve.setData(x, shown)
        classes = np.array([theme.error_class(r, threshold) for r in rel], int)
        y = np.log10(shown)
        for c, item in enumerate(self.points):
            sel = classes == c
            item.setData(x[sel], y[sel])
        if first in self.names:
            self.first.setPos(self.names.index(first))
            self.first.setVisible(True)
        else:
            self.first.setVisible(False)
        worst = int(np.nanargmax(np.where(np.isnan(rel), np.inf, rel))) if len(rel) else -1
        text = (f"{side_label(result.backend)} against {side_label(result.against)}: "
                f"{len(rel)} layers in "
                f"{result.seconds:.1f} s · ")
        text += (f"first over {threshold:g}: <b>{first}</b>" if first
                 else f"no layer over {threshold:g}")
        if worst >= 0:
            text += f" · worst {self.names[worst]} ({rel[worst]:.2e})"
        self.set_idle(text)

    def _on_click(self, event) -> None:
        vb = self.plot.getViewBox()
        if not self.names or not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        i = int(round(vb.mapSceneToView(event.scenePos()).x()))
        if 0 <= i < len(self.names):
            self.layer_clicked.emit(self.names[i])
