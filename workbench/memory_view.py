"""The memory panel: live tensor bytes along the execution order, on the CPU and on the
device, with the peak marked; a click on the peak lists the tensors alive there, a click
elsewhere selects that layer. Plot items are made once and updated with ``setData``."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QListWidget, QSplitter, QVBoxLayout, QWidget

from engine import BackendType
from workbench import theme

MB = 1e6


class MemoryPanel(QWidget):
    """Shows an ``engine.analysis.MemoryTimeline``."""

    layer_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.timeline = None
        self.names: list[str] = []
        self.plot = pg.PlotWidget()
        self.plot.setLabel("left", "live MB")
        self.plot.setLabel("bottom", "layer (execution order)")
        self.plot.showGrid(y=True, alpha=0.25)
        self.plot.setMouseEnabled(x=True, y=False)
        self.plot.addLegend(offset=(10, 5))
        self.cpu = self.plot.plot([], [], name="CPU", pen=pg.mkPen(
            theme.BACKEND_COLORS[BackendType.CPU], width=2))
        self.device = self.plot.plot([], [], name="device", pen=pg.mkPen(
            theme.BACKEND_COLORS[BackendType.GPU_COMPUTE], width=2))
        self.total = self.plot.plot([], [], name="total", pen=pg.mkPen(
            "#6B7280", width=1, style=Qt.PenStyle.DashLine))
        self.peak_line = pg.InfiniteLine(angle=90, pen=pg.mkPen(theme.FORCED_COLOR, width=1.5))
        self.peak_line.setVisible(False)
        self.plot.addItem(self.peak_line)
        self.peak = pg.ScatterPlotItem(size=12, symbol="t", brush=pg.mkBrush(theme.FORCED_COLOR),
                                       pen=None)
        self.peak.setToolTip("peak: click to list the tensors alive here")
        self.plot.addItem(self.peak)
        self.plot.scene().sigMouseClicked.connect(self._on_click)
        self.summary = QLabel("Run the model to see live tensor memory along the run.")
        self.alive = QListWidget()
        self.alive.setToolTip("tensors alive at the peak, largest first")
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.plot)
        split.addWidget(self.alive)
        split.setSizes([700, 260])
        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addWidget(self.summary)
        box.addWidget(split, 1)

    def update_timeline(self, timeline) -> None:
        """Show ``timeline`` (None clears; the same object again does nothing)."""
        if timeline is self.timeline:
            return
        self.timeline = timeline
        self.alive.clear()
        if timeline is None or not timeline.points:
            self.names = []
            for curve in (self.cpu, self.device, self.total):
                curve.setData([], [])
            self.peak.setData([], [])
            self.peak_line.setVisible(False)
            self.summary.setText("No memory timeline for this run.")
            return
        pts = timeline.points
        self.names = [p.layer for p in pts]
        x = np.arange(len(pts), dtype=float)
        cpu = np.array([p.cpu_bytes for p in pts], float) / MB
        dev = np.array([p.device_bytes for p in pts], float) / MB
        self.cpu.setData(x, cpu)
        self.device.setData(x, dev)
        self.total.setData(x, cpu + dev)
        k = timeline.peak_index
        self.peak.setData([float(k)], [float(cpu[k] + dev[k])])
        self.peak_line.setPos(k)
        self.peak_line.setVisible(True)
        self.plot.setYRange(0, float((cpu + dev).max()) * 1.15 or 1.0, padding=0)
        self.summary.setText(
            f"peak {timeline.peak_bytes / MB:.1f} MB at layer #{k} <b>{pts[k].layer}</b> "
            f"(CPU {cpu[k]:.1f} MB, device {dev[k]:.1f} MB; weights not counted) — click the "
            "peak to list the tensors alive there")

    def show_peak_tensors(self) -> list[tuple[str, int, str]]:
        """List the tensors alive at the peak (largest first) and return them."""
        self.alive.clear()
        if self.timeline is None:
            return []
        rows = list(self.timeline.alive_at_peak)
        for name, nbytes, where in rows:
            self.alive.addItem(f"{nbytes / MB:8.2f} MB  {where:<6}  {name}")
        return rows

    def _on_click(self, event) -> None:
        vb = self.plot.getViewBox()
        if not self.names or not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        i = int(round(vb.mapSceneToView(event.scenePos()).x()))
        if self.timeline is not None and abs(i - self.timeline.peak_index) <= max(
                1, int((vb.viewRange()[0][1] - vb.viewRange()[0][0]) / 100)):
            self.show_peak_tensors()
        if 0 <= i < len(self.names):
            self.layer_clicked.emit(self.names[i])
