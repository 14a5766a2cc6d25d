"""Small shared widgets: the in-window message bar and NumPy <-> QImage helpers."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QImage, QPainter, QPixmap, QTextDocument
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QWidget

from workbench.preprocess import InputFileError


class MessageBar(QFrame):
    """A non-modal message strip inside the window (errors never open blocking dialogs).

    Every message is also kept in ``history`` as (level, text) so tests and scripts can
    check what the user was told.
    """

    closed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("MessageBar")
        self.history: list[tuple[str, str]] = []
        box = QHBoxLayout(self)
        box.setContentsMargins(10, 6, 6, 6)
        self.icon = QLabel()
        self.text = QLabel()
        self.text.setObjectName("MessageBarText")
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.clicked.connect(self.dismiss)
        box.addWidget(self.icon)
        box.addWidget(self.text, 1)
        box.addWidget(close)
        self.hide()

    def show_message(self, level: str, text: str) -> None:
        """Show ``text``; level is 'error', 'warning' or 'info'."""
        self.history.append((level, text))
        self.icon.setText({"error": "<b style='color:#B42318'>Error</b>",
                          "warning": "<b style='color:#8A5A00'>Warning</b>",
                          "info": "<b style='color:#1F4FA0'>Info</b>"}.get(level, ""))
        self.text.setText(text)
        self.setProperty("level", level)
        self.style().unpolish(self)
        self.style().polish(self)
        self.show()

    def dismiss(self) -> None:
        self.hide()
        self.closed.emit()

    @property
    def current(self) -> str:
        return self.text.text() if self.isVisible() else ""


class StableLabel(QWidget):
    """Rich text that can change after every run without relayouting the window.

    A QLabel asks its layout to recompute on every ``setText``; the relayout travels up to
    the main window and repaints whole docks. This widget keeps a fixed height and only
    repaints itself.
    """

    def __init__(self, text: str = "", width: int = 200, lines: int = 1,
                 parent: QWidget | None = None):
        super().__init__(parent)
        self._doc = QTextDocument(self)
        self._doc.setDocumentMargin(2)
        self._doc.setDefaultFont(self.font())
        self._align = Qt.AlignmentFlag.AlignLeft
        self._text = ""
        self._hint = QSize(width, self.fontMetrics().lineSpacing() * lines + 8)
        self.setFixedHeight(self._hint.height())
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setText(text)

    def setAlignment(self, align) -> None:
        self._align = align
        self.setText(self._text)

    def setText(self, text: str) -> None:
        self._text = text
        option = self._doc.defaultTextOption()
        option.setAlignment(self._align)
        self._doc.setDefaultTextOption(option)
        if "<" in text:
            self._doc.setHtml(text)
        else:
            self._doc.setPlainText(text)
        self.update()

    def text(self) -> str:
        return self._text

    def sizeHint(self) -> QSize:
        return self._hint

    def minimumSizeHint(self) -> QSize:
        return QSize(60, self._hint.height())

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        self._doc.setTextWidth(self.width())
        self._doc.drawContents(painter)
        painter.end()


def image_from_array(img: np.ndarray) -> QImage:
    """(H, W) or (H, W, 3) uint8 -> QImage (a deep copy, safe after ``img`` is gone)."""
    img = np.ascontiguousarray(img)
    h, w = img.shape[:2]
    if img.ndim == 2:
        q = QImage(img.data, w, h, w, QImage.Format.Format_Grayscale8)
    else:
        q = QImage(img.data, w, h, 3 * w, QImage.Format.Format_RGB888)
    return q.copy()


def pixmap_from_array(img: np.ndarray, size: int) -> QPixmap:
    """A crisp (nearest-neighbour) pixmap of at most ``size`` pixels on its longer side."""
    q = image_from_array(img)
    return QPixmap.fromImage(q.scaled(size, size, Qt.AspectRatioMode.KeepAspectRatio,
                                      Qt.TransformationMode.FastTransformation))


def load_image_rgb(path: str) -> np.ndarray:
    """Decode an image file into an (H, W, 3) uint8 array; raises InputFileError."""
    img = QImage(path)
    if img.isNull():
        raise InputFileError(f"{path!r} is not an image this application can read")
    img = img.convertToFormat(QImage.Format.Format_RGB888)
    h, w, bpl = img.height(), img.width(), img.bytesPerLine()
    buf = np.frombuffer(img.constBits(), np.uint8, count=h * bpl)
    return buf.reshape(h, bpl)[:, :w * 3].reshape(h, w, 3).copy()
