"""Live timing plots (pyqtgraph): per-layer bars, latency over time, per-op-type summary.

One ``BarGraphItem`` per colour class, updated in place with ``setOpts`` (per-bar brushes
are an order of magnitude slower for thousands of bars).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from engine import BackendType
from engine.profile import Profile
from workbench import theme
from workbench.widgets import StableLabel

pg.setConfigOptions(antialias=False, useOpenGL=False, background="w", foreground="#3A4150")

HISTORY = 300
CLASSES = [(b.value, theme.BACKEND_COLORS[b], theme.BACKEND_LABELS[b]) for b in BackendType]
CLASSES.append(("fallback", theme.FALLBACK_COLOR, "CPU fallback"))
CLASSES.append(("sync", theme.SYNC_COLOR, "sync (CPU waits for the GPU)"))
#: what the per-layer plot shows: key, combo text, axis label
METRICS = [("ms", "time per layer", "ms"), ("gflops", "GFLOP/s per layer", "GFLOP/s"),
           ("bytes", "bytes moved per layer", "MB")]


class TimingPanel(QWidget):
    """Per-layer bars (click selects the layer), total latency per run, time per op type."""

    layer_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.names: list[str] = []
        self.profile: Profile | None = None
        self.latency: list[float] = []
        self.run_numbers: list[int] = []
        self._runs = 0
        self._op_names: list[str] = []
        self.costs: dict | None = None
        #: layers the user placed on the CPU: CPU bars, not fallback ones
        self.user_layers: set[str] = set()
        self.metric = "ms"
        self.metric_combo = QComboBox()
        for key, text, _ in METRICS:
            self.metric_combo.addItem(text, key)
        self.metric_combo.currentIndexChanged.connect(
            lambda i: self.set_metric(METRICS[i][0]))

        self.layer_plot = pg.PlotWidget()
        self.layer_plot.setLabel("left", "ms")
        self.layer_plot.setLabel("bottom", "layer (execution order)")
        self.layer_plot.showGrid(y=True, alpha=0.25)
        self.layer_plot.setMouseEnabled(x=True, y=False)
        for plot_axis in ("left", "bottom"):
            self.layer_plot.getAxis(plot_axis).enableAutoSIPrefix(False)
        self.bars: dict[str, pg.BarGraphItem] = {}
        for key, color, label in CLASSES:
            item = pg.BarGraphItem(x=np.zeros(0), height=np.zeros(0), width=0.8,
                                   brush=pg.mkBrush(color), pen=pg.mkPen(None), name=label)
            self.layer_plot.addItem(item)
            self.bars[key] = item
        self.cursor = pg.InfiniteLine(angle=90, pen=pg.mkPen(theme.SELECT_COLOR, width=2))
        self.cursor.setVisible(False)
        self.layer_plot.addItem(self.cursor)
        self.layer_plot.scene().sigMouseClicked.connect(self._on_click)
        self.layer_plot.scene().sigMouseMoved.connect(self._on_hover)

        self.latency_plot = pg.PlotWidget()
        self.latency_plot.setLabel("left", "total ms")
        self.latency_plot.setLabel("bottom", "run")
        self.latency_plot.showGrid(x=True, y=True, alpha=0.25)
        self.latency_plot.getAxis("left").enableAutoSIPrefix(False)
        self.latency_curve = self.latency_plot.plot([], [], pen=pg.mkPen("#1F6FEB", width=2))
        # the newest run as a dot (a single run would draw no line at all)
        self.latency_last = pg.ScatterPlotItem(size=7, brush=pg.mkBrush("#1F6FEB"), pen=None)
        self.latency_plot.addItem(self.latency_last)

        self.op_plot = pg.PlotWidget()
        self.op_plot.setLabel("bottom", "ms per run")
        self.op_plot.setMouseEnabled(x=False, y=False)
        self.op_plot.hideButtons()
        self.op_plot.getAxis("bottom").enableAutoSIPrefix(False)
        small = QFont()
        small.setPointSizeF(7.5)
        self.op_plot.getAxis("left").setStyle(tickFont=small)
        self.op_bars = pg.BarGraphItem(x0=np.zeros(0), y=np.zeros(0), height=0.7,
                                       width=np.zeros(0), brush=pg.mkBrush("#5B8DEF"),
                                       pen=pg.mkPen(None))
        self.op_plot.addItem(self.op_bars)
        self.op_plot.getPlotItem().invertY(True)

        self.hover = StableLabel("Run the model to see per-layer timings.", 400)
        self.summary = StableLabel("", 480)
        self.summary.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        legend = QLabel("  ".join(
            f"<span style='color:{c}'>■</span> {label}" for _, c, label in CLASSES))
        legend.setTextFormat(Qt.TextFormat.RichText)

        top = QWidget()
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        head.addWidget(QLabel("<b>Per layer</b>"))
        head.addWidget(self.metric_combo)
        head.addWidget(legend)
        head.addWidget(self.summary, 1)
        tl.addLayout(head)
        tl.addWidget(self.layer_plot, 1)
        tl.addWidget(self.hover)
        bottom = QSplitter(Qt.Orientation.Horizontal)
        for title, plot in (("Total latency per run", self.latency_plot),
                            ("Time per op type (last run)", self.op_plot)):
            w = QWidget()
            wl = QVBoxLayout(w)
            wl.setContentsMargins(0, 0, 0, 0)
            wl.addWidget(QLabel(f"<b>{title}</b>"))
            wl.addWidget(plot, 1)
            bottom.addWidget(w)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(bottom)
        split.setSizes([52, 48])
        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addWidget(split)

    # -- data -------------------------------------------------------------------------------
    def reset(self, layer_names: list[str]) -> None:
        """New model: clear every plot."""
        self.names = list(layer_names)
        self.profile = None
        self.costs = None
        self.latency, self.run_numbers, self._runs = [], [], 0
        for item in self.bars.values():
            item.setOpts(x=np.zeros(0), height=np.zeros(0))
        self.latency_curve.setData([], [])
        self.latency_last.setData([], [])
        self.op_bars.setOpts(x0=np.zeros(0), y=np.zeros(0), width=np.zeros(0))
        self.op_plot.getAxis("left").setTicks([[]])
        self._op_names = []
        self.cursor.setVisible(False)
        self.hover.setText("Run the model to see per-layer timings.")
        self.summary.setText("")

    def set_costs(self, costs: dict | None) -> None:
        """Per-layer FLOPs and bytes (``engine.ops.costs.LayerCost``) for the GFLOP/s and
        bytes views."""
        self.costs = costs

    def set_metric(self, metric: str) -> None:
        """Show "ms", "gflops" or "bytes" per layer."""
        keys = [m[0] for m in METRICS]
        self.metric = metric
        self.metric_combo.blockSignals(True)
        self.metric_combo.setCurrentIndex(keys.index(metric))
        self.metric_combo.blockSignals(False)
        self.layer_plot.setLabel("left", METRICS[keys.index(metric)][2])
        if self.profile is not None:
            self.layer_plot.setYRange(0, 1, padding=0)
            self.update_bars(self.profile)

    def values(self, profile: Profile) -> np.ndarray:
        """The per-layer values the plot shows for ``profile`` (0 where unknown)."""
        ms = np.fromiter((t.ms for t in profile.layers), float, len(profile.layers))
        if self.metric == "ms":
            return ms
        costs = self.costs or {}
        out = np.zeros(len(ms))
        for i, t in enumerate(profile.layers):
            cost = costs.get(t.name)
            if cost is None:
                continue
            if self.metric == "gflops":
                out[i] = cost.flops / ms[i] / 1e6 if ms[i] > 0 else 0.0
            else:
                out[i] = cost.bytes_moved / 1e6
        return out

    def update_bars(self, profile: Profile) -> None:
        first = self.profile is None or len(self.profile.layers) != len(profile.layers)
        self.profile = profile
        self.names = [t.name for t in profile.layers]
        ms = self.values(profile)
        user = self.user_layers
        keys = np.array(["fallback" if t.fallback and t.name not in user else t.backend
                         for t in profile.layers])
        x = np.arange(len(ms), dtype=float)
        for key, item in self.bars.items():
            sel = keys == key
            item.setOpts(x=x[sel], height=ms[sel])
        if first:
            self.layer_plot.setXRange(-1, len(ms), padding=0.01)
            step = max(1, int(np.ceil(len(ms) / 12)))
            self.layer_plot.getAxis("bottom").setTickSpacing(step, step)
            self.hover.setText("Hover a bar for the layer's time; click it to select the layer.")
        _hysteresis(self.layer_plot, "y", float(ms.max()) if len(ms) else 1.0)

    def update_latency(self, profile: Profile) -> None:
        self._runs += 1
        self.latency.append(profile.total_ms)
        self.run_numbers.append(self._runs)
        if len(self.latency) > HISTORY:
            self.latency, self.run_numbers = self.latency[-HISTORY:], self.run_numbers[-HISTORY:]
        self.latency_curve.setData(self.run_numbers, self.latency)
        self.latency_last.setData([self.run_numbers[-1]], [self.latency[-1]])
        # ranges move in steps, so the axes are not re-laid out after every run
        lo, hi = self.latency_plot.getViewBox().viewRange()[0]
        if self._runs > hi or self.run_numbers[0] > lo + 50 or self._runs == 1:
            start = self.run_numbers[0]
            self.latency_plot.setXRange(start, start + max(50, (self._runs - start) // 50 * 50
                                                            + 50), padding=0)
        # the first run includes compilation: scale to the recent runs, not to it
        recent = self.latency[-30:] if len(self.latency) > 1 else self.latency
        _hysteresis(self.latency_plot, "y", max(recent[1:] if len(recent) > 3 else recent))
        med = float(np.median(self.latency[-20:]))
        self.summary.setText(f"{profile.backend}: total <b>{profile.total_ms:.2f} ms</b> "
                             f"(layers {profile.layer_ms():.2f} ms) · median of last "
                             f"{min(20, len(self.latency))}: {med:.2f} ms")

    def update_ops(self, profile: Profile) -> None:
        ops = list(profile.by_op_type().items())[:6]
        if not ops:
            return
        self.op_bars.setOpts(x0=np.zeros(len(ops)), y=np.arange(len(ops), dtype=float),
                             width=np.array([v for _, v in ops]))
        names = [k for k, _ in ops]
        if names != self._op_names:
            self._op_names = names
            self.op_plot.getAxis("left").setTicks([list(enumerate(names))])
            self.op_plot.setYRange(-0.6, len(ops) - 0.4, padding=0)
        _hysteresis(self.op_plot, "x", max(v for _, v in ops))

    def select(self, name: str | None) -> None:
        if name in self.names:
            i = self.names.index(name)
            self.cursor.setPos(i)
            self.cursor.setVisible(True)
            lo, hi = self.layer_plot.getViewBox().viewRange()[0]
            if not lo <= i <= hi:
                half = (hi - lo) / 2
                self.layer_plot.setXRange(i - half, i + half, padding=0)
        else:
            self.cursor.setVisible(False)

    def layer_at(self, x: float) -> str | None:
        """The layer of the bar at ``x`` (a sync bar belongs to the layer that waited)."""
        i = int(round(x))
        if not 0 <= i < len(self.names):
            return None
        name = self.names[i]
        return name[:-5] if name.endswith("/sync") else name

    # -- mouse ------------------------------------------------------------------------------
    def _on_click(self, event) -> None:
        vb = self.layer_plot.getViewBox()
        if not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        name = self.layer_at(vb.mapSceneToView(event.scenePos()).x())
        if name is not None:
            self.select(name)
            self.layer_clicked.emit(name)

    def _on_hover(self, pos) -> None:
        vb = self.layer_plot.getViewBox()
        if self.profile is None or not vb.sceneBoundingRect().contains(pos):
            return
        i = int(round(vb.mapSceneToView(pos).x()))
        if 0 <= i < len(self.profile.layers):
            t = self.profile.layers[i]
            fb = " <span style='color:#E8871E'>(CPU fallback)</span>" if t.fallback else ""
            cost = (self.costs or {}).get(t.name)
            extra = ""
            if cost is not None:
                rate = cost.flops / t.ms / 1e6 if t.ms > 0 else 0.0
                extra = f" · {rate:.2f} GFLOP/s · {cost.bytes_moved / 1e6:.2f} MB moved"
            what = ("waited for queued GPU work and readback" if t.op_type == "Sync"
                    else f"{t.op_type} on {t.backend}")
            self.hover.setText(f"#{i} <b>{t.name}</b> {what}: <b>{t.ms:.3f} ms</b> "
                               f"({t.source}){fb}{extra} — click to select")


def _hysteresis(plot: pg.PlotWidget, axis: str, top: float) -> None:
    """Set the value axis to [0, top*1.15] only when ``top`` leaves the current range a lot."""
    vb = plot.getViewBox()
    lo, hi = vb.viewRange()[1 if axis == "y" else 0]
    if top <= 0 or not np.isfinite(top):
        return
    if top > hi or top < 0.5 * hi or lo != 0:
        if axis == "y":
            plot.setYRange(0, top * 1.15, padding=0)
        else:
            plot.setXRange(0, top * 1.15, padding=0)
