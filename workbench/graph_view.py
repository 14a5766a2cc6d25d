"""The layer graph view: pan, zoom, fit, search, click and tooltips over a ``GraphItem``,
and the placement legend. Thousands of layers stay smooth (see ``graph_item``)."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QEvent, QPointF, Qt, Signal
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import (
    QFrame,
    QGraphicsScene,
    QGraphicsView,
    QToolTip,
    QWidget,
)

from workbench import theme
from workbench.graph_geometry import GraphGeometry
from workbench.graph_item import TEXT_LOD, GraphItem
from workbench.graph_legend import Legend
from workbench.layout import KIND_INPUT, KIND_LAYER, GraphLayout


class GraphView(QGraphicsView):
    """Pan (drag), zoom (wheel), fit, search and click-to-select over a ``GraphItem``."""

    layer_clicked = Signal(str)
    drawn = Signal()
    #: right-click on a layer: (the layers it applies to, global position)
    layer_menu_requested = Signal(object, object)

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
        self.legend = Legend()
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

    def set_placement(self, placement: dict | None) -> None:
        self.placement = dict(placement or {})
        if self.item is not None:
            self.item.set_placement(placement)

    def set_errors(self, errors: dict[str, float] | None, threshold: float = 1e-3) -> None:
        """Colour layers by a comparison's relative L2 error (None: by placement again)."""
        if self.item is not None:
            self.item.set_errors(errors, threshold)

    def layers_for_menu(self, name: str) -> list[str]:
        """The layers a right-click on ``name`` acts on: every search match when ``name`` is
        one of them, else just ``name``."""
        if self.item is None:
            return [name]
        names = [self.item.layout.names[i] for i in self._match_list]
        return names if name in names else [name]

    def contextMenuEvent(self, event) -> None:
        if self.item is None:
            return
        pos = self.mapToScene(event.pos())
        i = self.item.layout.node_at(pos.x(), pos.y())
        if i >= 0 and self.item.layout.kinds[i] == KIND_LAYER:
            name = self.item.layout.names[i]
            self.layer_menu_requested.emit(self.layers_for_menu(name), event.globalPos())
            event.accept()

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

    def center_on(self, name: str) -> None:
        """Centre the view on layer ``name``."""
        i = self.item.index_of.get(name, -1) if self.item is not None else -1
        if i >= 0:
            self.centerOn(self.item.rects[i].center())

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
            if item.errors is not None and name in item.errors:
                lines.append(f"compare: relative L2 error {item.errors[name]:.3g}")
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
