"""The placement legend above the graph: backend colours and the marks for fallback,
CPU-forced and user-placed layers."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QWidget

from engine import BackendType
from workbench import theme


def _swatch(color: str, style: str) -> QPixmap:
    """A small node-like sample of a placement colour or mark."""
    pm = QPixmap(26, 14)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    fill = QColor(theme.lighten(color, 0.72) if style != "stripe" else "#EEF1F5")
    pen = QPen(QColor(color if style != "stripe" else theme.PENDING_COLOR), 1.6,
               {"dash": Qt.PenStyle.DashLine, "dot": Qt.PenStyle.DotLine}.get(
                   style, Qt.PenStyle.SolidLine))
    if style == "dot":
        fill = QColor("#FFFFFF")
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
    """Placement colours and marks, one row above the graph (never covering a node)."""

    ROWS = [(theme.BACKEND_COLORS[b], theme.BACKEND_LABELS[b], "solid",
             f"layer runs natively on {theme.BACKEND_LABELS[b]}") for b in BackendType]
    ROWS += [(theme.FALLBACK_COLOR, "CPU fallback", "dash",
              "dashed orange border: the selected GPU backend cannot run this layer, the CPU "
              "does (the reason is in the tooltip and the details)"),
             (theme.FORCED_COLOR, "CPU-forced", "stripe",
              "red stripe / dashed red edge: the tensor must be known on the CPU to plan "
              "other layers (shape, axes, sizes inputs)"),
             (theme.USER_COLOR, "moved by you", "dot",
              "dotted outline: you chose this layer's backend (right-click a layer)"),
             (theme.IO_COLOR, "input / output", "solid", "model inputs and outputs"),
             (theme.PENDING_COLOR, "not placed yet", "solid",
              "placement is known once the backend is prepared")]

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("Legend")
        box = QHBoxLayout(self)
        box.setContentsMargins(8, 3, 8, 3)
        box.setSpacing(4)
        for color, text, style, tip in self.ROWS:
            swatch = QLabel()
            swatch.setPixmap(_swatch(color, style))
            swatch.setToolTip(tip)
            label = QLabel(text)
            label.setToolTip(tip)
            box.addWidget(swatch)
            box.addWidget(label)
            box.addSpacing(8)
        box.addStretch(1)
