"""The layer graph: one QGraphicsItem draws every node and edge, culled and level-of-detail.

Thousands of layers stay smooth because nothing is a per-node QGraphicsItem: positions live
in NumPy arrays (from ``workbench.layout``), the paint routine picks the visible nodes with
one vectorised test against the exposed rectangle, draws boxes in one call per colour class
when zoomed out, and adds text, rounded corners and edge labels only when they are legible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QPainter, QPainterPath, QPen, QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QGraphicsItem,
    QGraphicsScene,
    QGraphicsView,
    QHBoxLayout,
    QLabel,
    QStyleOptionGraphicsItem,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from engine import BackendType
from workbench import theme
from workbench.layout import KIND_INPUT, KIND_LAYER, GraphLayout

TEXT_LOD = 0.42     # draw node text above this zoom
LABEL_LOD = 0.6     # draw edge shape labels above this zoom
ROUND_LOD = 0.25    # rounded corners above this zoom
BAND_H = 1200.0     # height of the bands edges are grouped in (scene units)


@dataclass
class GraphGeometry:
    """Everything painting needs that depends only on the layout; built off the UI thread
    (QRectF and QPainterPath are plain values, safe to make in any thread)."""

    rect: QRectF
    rects: list[QRectF]
    bands: list[tuple[float, float, QPainterPath, QPainterPath]]
    tips: np.ndarray
    tip_dirs: np.ndarray
    label_xy: np.ndarray
    forced_producer: np.ndarray
    index_of: dict[str, int]


def build_geometry(layout: GraphLayout, model) -> GraphGeometry:
    """Node rectangles, banded edge paths, arrow tips and label anchors of a layout."""
    left, top, right, bottom = layout.bounds
    n = len(layout.names)
    left_x, top_y = layout.x - layout.w / 2, layout.y - layout.h / 2
    rects = [QRectF(float(left_x[i]), float(top_y[i]), float(layout.w[i]), float(layout.h[i]))
             for i in range(n)]
    forced = set(model.cpu_forced)
    forced_producer = np.zeros(n, bool)
    for i in range(n):
        li = layout.layer_index[i]
        if li >= 0 and any(o in forced for o in model.layers[li].outputs):
            forced_producer[i] = True
    tips, dirs = _edge_tips(layout)
    # edge label anchors: just below the producer, where the tensor leaves it
    label_xy = np.array([[e.points[0, 0], e.points[0, 1] + 12] for e in layout.edges]
                        ).reshape(-1, 2)
    return GraphGeometry(QRectF(left - 40, top - 40, right - left + 80, bottom - top + 80),
                         rects, _edge_bands(layout, forced), tips, dirs, label_xy,
                         forced_producer,
                         {name: i for i, name in enumerate(layout.names)
                          if layout.kinds[i] == KIND_LAYER})


def _edge_tips(layout: GraphLayout) -> tuple[np.ndarray, np.ndarray]:
    if not layout.edges:
        return np.zeros((0, 2)), np.zeros((0, 2))
    tips = np.array([e.points[-1] for e in layout.edges])
    d = tips - np.array([e.points[-2] for e in layout.edges])
    norm = np.hypot(d[:, 0], d[:, 1])
    return tips, d / np.where(norm > 0, norm, 1.0)[:, None]


def _edge_bands(layout: GraphLayout, forced_names: set[str]):
    """Edges as paths per horizontal band, so painting touches only the visible bands."""
    if not layout.edges:
        return []
    seg = np.vstack([np.hstack([e.points[:-1], e.points[1:]]) for e in layout.edges])
    forced = np.repeat([any(t in forced_names for t in e.tensors) for e in layout.edges],
                       [len(e.points) - 1 for e in layout.edges])
    y0 = np.minimum(seg[:, 1], seg[:, 3])
    y1 = np.maximum(seg[:, 1], seg[:, 3])
    # a segment goes in every band it crosses
    first = np.floor((y0 - y0.min()) / BAND_H).astype(np.int64)
    last = np.floor((y1 - y0.min()) / BAND_H).astype(np.int64)
    order = np.argsort(first, kind="stable")
    rows = seg.tolist()
    bands = []
    long_segs = np.flatnonzero(last > first)  # few: only direct long edges
    starts = np.searchsorted(first[order], np.arange(int(last.max()) + 2))
    for b in range(int(last.max()) + 1):
        sel = order[starts[b]:starts[b + 1]]
        extra = long_segs[(first[long_segs] < b) & (last[long_segs] >= b)]
        sel = np.concatenate([sel, extra]) if len(extra) else sel
        if not len(sel):
            continue
        paths = (QPainterPath(), QPainterPath())
        for k in sel.tolist():
            path = paths[1] if forced[k] else paths[0]
            x_a, y_a, x_b, y_b = rows[k]
            path.moveTo(x_a, y_a)
            path.lineTo(x_b, y_b)
        bands.append((float(y0[sel].min()), float(y1[sel].max()), *paths))
    return bands


class GraphItem(QGraphicsItem):
    """Draws a whole ``GraphLayout``; state (placement, times, selection) is set by the view."""

    def __init__(self, layout: GraphLayout, model, geometry: GraphGeometry | None = None):
        super().__init__()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)
        self.layout = layout
        self.model = model
        geo = geometry or build_geometry(layout, model)
        self._rect = geo.rect
        self.rects, self.bands = geo.rects, geo.bands
        self.tips, self.tip_dirs, self.label_xy = geo.tips, geo.tip_dirs, geo.label_xy
        self.forced_producer, self.index_of = geo.forced_producer, geo.index_of
        self.forced = set(model.cpu_forced)
        n = len(layout.names)
        self.node_class = np.zeros(n, np.int8)  # index into self.classes
        self.classes: list[tuple[QBrush, QPen]] = []
        self.fallback = np.zeros(n, bool)
        self.times: dict[str, float] = {}
        self.selected = -1
        self.matches = np.zeros(n, bool)
        self.set_placement(None)

    # -- state ------------------------------------------------------------------------------
    def set_placement(self, placement: dict | None) -> None:
        """Colour nodes by backend; None = not known yet (pending colour)."""
        lay = self.layout
        colors = [theme.IO_COLOR, theme.PENDING_COLOR] + [theme.BACKEND_COLORS[b]
                                                          for b in BackendType]
        self.classes = [(QBrush(QColor(theme.lighten(c, 0.72))), QPen(QColor(c), 1.6))
                        for c in colors]
        cls = np.where(lay.kinds == KIND_LAYER, 1, 0).astype(np.int8)
        fallback = np.zeros(len(cls), bool)
        if placement:
            order = list(BackendType)
            for i, name in enumerate(lay.names):
                if lay.kinds[i] != KIND_LAYER:
                    continue
                p = placement.get(name)
                if p is not None:
                    cls[i] = 2 + order.index(p.backend)
                    fallback[i] = p.is_fallback
        self.node_class, self.fallback = cls, fallback
        self.update()

    def boundingRect(self) -> QRectF:
        return self._rect

    # -- painting ---------------------------------------------------------------------------
    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        lod = QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        exposed = option.exposedRect
        lay = self.layout
        if lod > 0.2:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        edge_pen = QPen(QColor(theme.EDGE_COLOR), 1.3 if lod > 0.3 else 0)
        forced_pen = QPen(QColor(theme.FORCED_COLOR), 2.0 if lod > 0.3 else 0,
                          Qt.PenStyle.DashLine)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        for lo, hi, path, forced in self.bands:
            if hi < exposed.top() or lo > exposed.bottom():
                continue
            painter.setPen(edge_pen)
            painter.drawPath(path)
            if not forced.isEmpty():
                painter.setPen(forced_pen)
                painter.drawPath(forced)

        pad = 40.0
        half_w, half_h = lay.w / 2, lay.h / 2
        vis = ((lay.x + half_w >= exposed.left() - pad) & (lay.x - half_w <= exposed.right() + pad)
               & (lay.y + half_h >= exposed.top() - pad)
               & (lay.y - half_h <= exposed.bottom() + pad))
        idx = np.flatnonzero(vis)
        if lod > ROUND_LOD and len(idx) < 1500:
            self._draw_arrows(painter, exposed, lod)
        rects = self.rects
        detailed = lod > ROUND_LOD and len(idx) < 1500
        for c, (brush, pen) in enumerate(self.classes):
            sel = idx[self.node_class[idx] == c]
            if not len(sel):
                continue
            painter.setBrush(brush)
            painter.setPen(pen if lod > 0.08 else Qt.PenStyle.NoPen)
            if detailed:
                for i in sel.tolist():
                    painter.drawRoundedRect(rects[i], 7, 7)
            else:
                painter.drawRects([rects[i] for i in sel.tolist()])
        self._draw_marks(painter, idx, lod)
        if lod > TEXT_LOD and len(idx) < 600:
            self._draw_text(painter, idx, lod)
        if lod > LABEL_LOD and len(self.label_xy):
            self._draw_edge_labels(painter, exposed)

    def _draw_marks(self, painter: QPainter, idx: np.ndarray, lod: float) -> None:
        rects = self.rects
        width = max(2.5, 1.5 / max(lod, 1e-3))
        fb = idx[self.fallback[idx]]
        if len(fb):
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(QPen(QColor(theme.FALLBACK_COLOR), min(width, 12),
                                Qt.PenStyle.DashLine))
            for i in fb.tolist():
                painter.drawRoundedRect(rects[i], 7, 7)
        fp = idx[self.forced_producer[idx]]
        if len(fp):
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(theme.FORCED_COLOR))
            for i in fp.tolist():
                r = rects[i]
                painter.drawRect(QRectF(r.left(), r.top() + 4, 5, r.height() - 8))
        mt = idx[self.matches[idx]]
        if len(mt):
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(QPen(QColor(theme.MATCH_COLOR), min(max(3.0, 4 / max(lod, 1e-3)), 40)))
            for i in mt.tolist():
                painter.drawRoundedRect(rects[i].adjusted(-4, -4, 4, 4), 9, 9)
        if self.selected >= 0:
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(QPen(QColor(theme.SELECT_COLOR), min(max(3.0, 3 / max(lod, 1e-3)), 40)))
            painter.drawRoundedRect(rects[self.selected].adjusted(-3, -3, 3, 3), 9, 9)

    def _draw_text(self, painter: QPainter, idx: np.ndarray, lod: float) -> None:
        lay = self.layout
        bold = QFont()
        bold.setPointSizeF(9.5)
        bold.setBold(True)
        small = QFont()
        small.setPointSizeF(7.5)
        painter.setPen(QColor(theme.TEXT_COLOR))
        center = Qt.AlignmentFlag.AlignHCenter
        for i in idx.tolist():
            r = self.rects[i]
            kind = lay.kinds[i]
            name = lay.names[i]
            if kind == KIND_LAYER:
                layer = self.model.layers[lay.layer_index[i]]
                title = layer.op_type
                ms = self.times.get(name)
                sub = name if ms is None else f"{name} · {ms:.3f} ms"
            else:
                title = "input" if kind == KIND_INPUT else "output"
                sub = name
            painter.setFont(bold)
            painter.drawText(r.adjusted(6, 3, -6, -r.height() / 2),
                             center | Qt.AlignmentFlag.AlignVCenter, title)
            painter.setFont(small)
            metrics = painter.fontMetrics()
            text = metrics.elidedText(sub, Qt.TextElideMode.ElideMiddle, int(r.width() - 12))
            painter.drawText(r.adjusted(6, r.height() / 2, -6, -3),
                             center | Qt.AlignmentFlag.AlignVCenter, text)

    def _draw_arrows(self, painter: QPainter, exposed: QRectF, lod: float) -> None:
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(theme.EDGE_COLOR))
        t = self.tips
        if not len(t):
            return
        vis = np.flatnonzero((t[:, 0] >= exposed.left()) & (t[:, 0] <= exposed.right())
                             & (t[:, 1] >= exposed.top()) & (t[:, 1] <= exposed.bottom()))
        for k in vis.tolist():
            tip, d = t[k], self.tip_dirs[k]
            n = np.array([-d[1], d[0]])
            base = tip - d * 8
            a, b = base + n * 4, base - n * 4
            path = QPainterPath(QPointF(float(tip[0]), float(tip[1])))
            path.lineTo(float(a[0]), float(a[1]))
            path.lineTo(float(b[0]), float(b[1]))
            path.closeSubpath()
            painter.drawPath(path)

    def _draw_edge_labels(self, painter: QPainter, exposed: QRectF) -> None:
        xy = self.label_xy
        vis = np.flatnonzero((xy[:, 0] >= exposed.left() - 80)
                             & (xy[:, 0] <= exposed.right() + 80)
                             & (xy[:, 1] >= exposed.top() - 20)
                             & (xy[:, 1] <= exposed.bottom() + 20))
        if len(vis) > 400:
            return
        font = QFont()
        font.setPointSizeF(7)
        painter.setFont(font)
        edges = self.layout.edges
        for k in vis.tolist():
            e = edges[k]
            forced = any(t in self.forced for t in e.tensors)
            painter.setPen(QColor(theme.FORCED_COLOR if forced else "#5F6B7A"))
            painter.drawText(QPointF(float(xy[k, 0]) + 5, float(xy[k, 1]) + 2), e.label)


def _swatch(color: str, style: str) -> QPixmap:
    """A small node-like sample of a placement colour or mark."""
    pm = QPixmap(26, 14)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    fill = QColor(theme.lighten(color, 0.72) if style != "stripe" else "#EEF1F5")
    pen = QPen(QColor(color if style != "stripe" else theme.PENDING_COLOR), 1.6,
               Qt.PenStyle.DashLine if style == "dash" else Qt.PenStyle.SolidLine)
    if style == "dash":
        fill = QColor(theme.lighten(theme.BACKEND_COLORS[BackendType.CPU], 0.72))
        pen.setWidthF(2.2)
    p.setBrush(fill)
    p.setPen(pen)
    p.drawRoundedRect(QRectF(1.5, 1.5, 23, 11), 3, 3)
    if style == "stripe":
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(color))
        p.drawRect(QRectF(1.5, 3, 4, 8))
    p.end()
    return pm


class Legend(QFrame):
    """Placement colours and marks, overlaid on the graph's corner."""

    def __init__(self, parent: QWidget):
        super().__init__(parent)
        self.setObjectName("Legend")
        box = QVBoxLayout(self)
        box.setContentsMargins(8, 6, 8, 6)
        box.setSpacing(2)
        rows = [(theme.BACKEND_COLORS[b], f"{theme.BACKEND_LABELS[b]}", "solid")
                for b in BackendType]
        rows += [(theme.FALLBACK_COLOR, "CPU fallback (dashed border)", "dash"),
                 (theme.FORCED_COLOR, "CPU-forced tensor / producer", "stripe"),
                 (theme.IO_COLOR, "model input / output", "solid"),
                 (theme.PENDING_COLOR, "placement not known yet", "solid")]
        for color, text, style in rows:
            row = QHBoxLayout()
            row.setSpacing(6)
            swatch = QLabel()
            swatch.setPixmap(_swatch(color, style))
            row.addWidget(swatch)
            row.addWidget(QLabel(text))
            row.addStretch(1)
            box.addLayout(row)
        self.adjustSize()


class GraphView(QGraphicsView):
    """Pan (drag), zoom (wheel), fit, search and click-to-select over a ``GraphItem``."""

    layer_clicked = Signal(str)
    drawn = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        self.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.FullViewportUpdate)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontSavePainterState, True)
        self.setBackgroundBrush(QColor(theme.BACKGROUND))
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.item: GraphItem | None = None
        self._press: QPointF | None = None
        self._pending_drawn = False
        self._match_list: list[int] = []
        self._match_pos = -1
        self.legend = Legend(self)
        self.legend.move(10, 10)
        self.setToolTip("")
        self.placement: dict = {}

    # -- content ----------------------------------------------------------------------------
    def set_graph(self, layout: GraphLayout, model, geometry: GraphGeometry | None = None
                  ) -> None:
        """Show a new model's graph; emits ``drawn`` after its first paint."""
        self.scene().clear()
        self.item = GraphItem(layout, model, geometry)
        self.scene().addItem(self.item)
        self.scene().setSceneRect(self.item.boundingRect())
        self.placement = {}
        self._match_list, self._match_pos = [], -1
        self._pending_drawn = True
        self.fit_top()
        self.viewport().update()

    def clear_graph(self) -> None:
        self.scene().clear()
        self.item = None

    def set_placement(self, placement: dict | None) -> None:
        self.placement = dict(placement or {})
        if self.item is not None:
            self.item.set_placement(placement)

    def set_times(self, times: dict[str, float]) -> None:
        if self.item is not None:
            self.item.times = times
            if self.transform().m11() > TEXT_LOD:  # times are drawn only when text is
                self.item.update()

    def select(self, name: str | None, center: bool = True) -> None:
        if self.item is None:
            return
        i = self.item.index_of.get(name, -1) if name else -1
        self.item.selected = i
        self.item.update()
        if i >= 0 and center:
            r = self.item.rects[i]
            if not self.mapToScene(self.viewport().rect()).boundingRect().contains(r):
                self.centerOn(r.center())

    def selected_name(self) -> str | None:
        if self.item is None or self.item.selected < 0:
            return None
        return self.item.layout.names[self.item.selected]

    # -- search -----------------------------------------------------------------------------
    def search(self, text: str) -> int:
        """Highlight layers whose name or op type contains ``text``; returns the match count."""
        if self.item is None:
            return 0
        lay, model = self.item.layout, self.item.model
        text = text.strip().lower()
        matches = np.zeros(len(lay.names), bool)
        if text:
            for i, name in enumerate(lay.names):
                li = lay.layer_index[i]
                op = model.layers[li].op_type.lower() if li >= 0 else ""
                if text in name.lower() or text == op or (len(text) > 2 and text in op):
                    matches[i] = True
        self.item.matches = matches
        self._match_list = np.flatnonzero(matches).tolist()
        self._match_pos = -1
        self.item.update()
        return len(self._match_list)

    def next_match(self) -> str | None:
        """Centre on the next search match and return its name."""
        if self.item is None or not self._match_list:
            return None
        self._match_pos = (self._match_pos + 1) % len(self._match_list)
        i = self._match_list[self._match_pos]
        self.centerOn(self.item.rects[i].center())
        return self.item.layout.names[i]

    @property
    def match_position(self) -> tuple[int, int]:
        return self._match_pos + 1, len(self._match_list)

    # -- view -------------------------------------------------------------------------------
    def fit_all(self) -> None:
        if self.item is not None:
            self.fitInView(self.item.boundingRect(), Qt.AspectRatioMode.KeepAspectRatio)

    def fit_top(self) -> None:
        """Readable start: fit the width (zoom at most 1:1) and show the graph's top."""
        if self.item is None:
            return
        r = self.item.boundingRect()
        vw = max(self.viewport().width(), 100)
        vh = max(self.viewport().height(), 100)
        scale = min(1.1, vw / r.width(), max(vh / r.height(), 0.7))
        self.resetTransform()
        self.scale(scale, scale)
        self.centerOn(r.center().x(), r.top() + vh / scale / 2)

    def zoom(self, factor: float) -> None:
        current = self.transform().m11()
        factor = max(0.002 / current, min(factor, 6.0 / current))
        self.scale(factor, factor)

    def wheelEvent(self, event) -> None:
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.zoom(1.2 ** steps)
        event.accept()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.legend.move(10, 10)

    def paintEvent(self, event) -> None:
        super().paintEvent(event)
        if self._pending_drawn and self.item is not None:
            self._pending_drawn = False
            self.drawn.emit()

    # -- mouse ------------------------------------------------------------------------------
    def mousePressEvent(self, event) -> None:
        self._press = event.position()
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        super().mouseReleaseEvent(event)
        if self._press is not None and self.item is not None:
            moved = (event.position() - self._press).manhattanLength()
            if moved < 5 and event.button() == Qt.MouseButton.LeftButton:
                self.click_at(self.mapToScene(event.position().toPoint()))
        self._press = None

    def click_at(self, scene_pos: QPointF) -> None:
        i = self.item.layout.node_at(scene_pos.x(), scene_pos.y()) if self.item else -1
        if i >= 0 and self.item.layout.kinds[i] == KIND_LAYER:
            name = self.item.layout.names[i]
            self.select(name, center=False)
            self.layer_clicked.emit(name)

    def viewportEvent(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip and self.item is not None:
            pos = self.mapToScene(event.pos())
            text = self.tooltip_at(pos.x(), pos.y())
            if text:
                QToolTip.showText(event.globalPos(), text, self)
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)

    def tooltip_at(self, x: float, y: float) -> str:
        """Rich-text tooltip for the node or edge label at a scene point ('' if none)."""
        item = self.item
        lay, model = item.layout, item.model
        i = lay.node_at(x, y)
        if i >= 0:
            name = lay.names[i]
            if lay.kinds[i] != KIND_LAYER:
                spec = model.spec(name)
                kind = "input" if lay.kinds[i] == KIND_INPUT else "output"
                return f"<b>{kind}</b> {name}<br>{spec if spec else ''}"
            layer = model.layers[lay.layer_index[i]]
            lines = [f"<b>{layer.op_type}</b> {name}"]
            p = self.placement.get(name)
            if p is not None:
                lines.append(f"runs on <b>{p.backend.name}</b> — {p.reason}")
            forced = [o for o in layer.outputs if o in item.forced]
            if forced:
                lines.append(f"<span style='color:{theme.FORCED_COLOR}'>CPU-forced output "
                             f"{', '.join(forced)}: its value is needed on the CPU to plan "
                             "other layers (shape/axes/sizes input)</span>")
            for o in layer.outputs:
                spec = model.spec(o)
                if spec is not None:
                    lines.append(f"→ {spec}")
            ms = item.times.get(name)
            if ms is not None:
                lines.append(f"last run: {ms:.3f} ms")
            return "<br>".join(lines)
        xy = item.label_xy
        if len(xy):
            scale = max(self.transform().m11(), 1e-3)
            d = np.hypot(xy[:, 0] + 25 - x, xy[:, 1] - y)
            k = int(np.argmin(d))
            if d[k] < 30 / scale:
                e = lay.edges[k]
                lines = [f"{t}: {model.spec(t) or '?'}" for t in e.tensors]
                for t in e.tensors:
                    if t in item.forced:
                        lines.append(f"<span style='color:{theme.FORCED_COLOR}'>{t} is "
                                     "CPU-forced: computed on the CPU whatever the backend</span>")
                return "<br>".join(lines)
        return ""
