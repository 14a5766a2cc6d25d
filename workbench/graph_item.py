"""The QGraphicsItem that draws a whole layer graph, culled and level-of-detail.

Nothing is a per-node QGraphicsItem: positions live in NumPy arrays, the paint routine picks
the visible nodes with one vectorised test against the exposed rectangle, draws boxes in one
call per colour class when zoomed out, and adds text, rounded corners, arrows and edge labels
only when they are legible.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

from engine import BackendType
from workbench import theme
from workbench.graph_geometry import GraphGeometry, build_geometry
from workbench.layout import KIND_INPUT, KIND_LAYER, GraphLayout

TEXT_LOD = 0.42     # draw node text above this zoom
LABEL_LOD = 0.6     # draw edge shape labels above this zoom
ROUND_LOD = 0.25    # rounded corners above this zoom


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
        self.user = np.zeros(n, bool)  # placed by the user (an override)
        self.placement: dict | None = None
        #: {layer: relative L2 error} when nodes are coloured by a comparison, else None
        self.errors: dict[str, float] | None = None
        self.threshold = 1e-3
        self.times: dict[str, float] = {}
        self.selected = -1
        self.matches = np.zeros(n, bool)
        self.set_placement(None)

    # -- state ------------------------------------------------------------------------------
    def set_placement(self, placement: dict | None) -> None:
        """Colour nodes by backend; None = not known yet (pending colour)."""
        self.placement = placement
        if self.errors is not None:
            self._mark_user(placement)
            self.update()
            return
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
        self._mark_user(placement)
        self.update()

    def _mark_user(self, placement: dict | None) -> None:
        names = self.layout.names
        self.user = np.array([bool(placement) and name in placement
                              and placement[name].is_user_choice for name in names], bool)

    def set_errors(self, errors: dict[str, float] | None, threshold: float = 1e-3) -> None:
        """Colour nodes by a comparison's error (None: back to placement colours)."""
        self.errors, self.threshold = errors, threshold
        if errors is None:
            self.set_placement(self.placement)
            return
        lay = self.layout
        colors = [theme.IO_COLOR, theme.PENDING_COLOR] + list(theme.ERROR_COLORS)
        self.classes = [(QBrush(QColor(theme.lighten(c, 0.55))), QPen(QColor(c), 1.6))
                        for c in colors]
        cls = np.where(lay.kinds == KIND_LAYER, 1, 0).astype(np.int8)
        for i, name in enumerate(lay.names):
            err = errors.get(name) if lay.kinds[i] == KIND_LAYER else None
            if err is not None:
                cls[i] = 2 + theme.error_class(err, threshold)
        self.node_class = cls
        self.fallback = np.zeros(len(cls), bool)
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
        us = idx[self.user[idx]]
        if len(us):
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(QPen(QColor(theme.USER_COLOR), min(width, 12), Qt.PenStyle.DotLine))
            for i in us.tolist():
                painter.drawRoundedRect(rects[i].adjusted(-2, -2, 2, 2), 8, 8)
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
                err = self.errors.get(name) if self.errors is not None else None
                sub = name if ms is None else f"{name} · {ms:.3f} ms"
                if err is not None:
                    sub = f"{name} · err {err:.1e}"
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
