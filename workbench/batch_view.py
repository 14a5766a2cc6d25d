"""The batch panel: many inputs run one by one, a progress bar, and a results table (top-k
per input, latency) that exports as CSV."""

from __future__ import annotations

import math
import os

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.session import BatchRow

COLUMNS = ["input", "top-1", "score", "top-k", "ms"]


class BatchPanel(QWidget):
    """Rows appear as the inputs finish; ``export_requested`` asks for a CSV file."""

    export_requested = Signal()
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(0, 220)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.setFormat("%v / %m")
        self.status = QLabel("Drop several images or .npy files (or a folder) on the window "
                             "to run them one by one.")
        self.status.setWordWrap(True)
        self.export = QPushButton("Export CSV…")
        self.export.setEnabled(False)
        self.export.clicked.connect(self.export_requested)
        self.stop = QPushButton("Stop")
        self.stop.setEnabled(False)
        self.stop.clicked.connect(self.stop_requested)
        row = QHBoxLayout()
        row.addWidget(self.progress, 1)
        row.addWidget(self.stop)
        row.addWidget(self.export)
        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addWidget(self.status)
        box.addLayout(row)
        box.addWidget(self.table, 1)

    def start(self, total: int) -> None:
        """A batch of ``total`` inputs begins: clear the table."""
        self.table.setRowCount(0)
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(0)
        self.export.setEnabled(False)
        self.stop.setEnabled(True)
        self.status.setText(f"Running {total} inputs one by one…")

    def add_row(self, row: BatchRow, done: int) -> None:
        """Append one finished input."""
        r = self.table.rowCount()
        self.table.insertRow(r)
        if row.error:
            cells = [os.path.basename(row.source), "error", "", row.error, ""]
        else:
            names = [row.labels[i] if i < len(row.labels) and row.labels[i] else str(k)
                     for i, (k, _) in enumerate(row.top)]
            cells = [os.path.basename(row.source), names[0] if names else "",
                     f"{row.top[0][1]:.4g}" if row.top else "",
                     ", ".join(f"{n} ({s:.3g})" for n, (_, s) in zip(names, row.top)),
                     "" if math.isnan(row.ms) else f"{row.ms:.2f}"]
        for c, text in enumerate(cells):
            item = QTableWidgetItem(text)
            item.setToolTip(row.source if c == 0 else text)
            self.table.setItem(r, c, item)
        self.progress.setValue(done)

    def finish(self, rows: list[BatchRow]) -> None:
        """The batch ended (all done, or stopped)."""
        self.stop.setEnabled(False)
        self.export.setEnabled(bool(rows))
        ok = [r for r in rows if not r.error]
        failed = len(rows) - len(ok)
        ms = sorted(r.ms for r in ok)
        text = f"{len(rows)} inputs run"
        if ms:
            text += f" · median {ms[len(ms) // 2]:.2f} ms"
        if failed:
            text += f" · {failed} failed"
        self.status.setText(text)
