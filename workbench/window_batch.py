"""Many inputs from the main window (a mixin of MainWindow): several images or .npy files
(or a folder) run as a batch of single runs in the controller thread, with a progress bar
and a results table that exports as CSV.

Scripting surface: ``run_batch(paths)``, ``export_batch_csv(path)``, signal
``batch_completed(list[BatchRow])``; the rows live in ``session.batch``.
"""

from __future__ import annotations

import os

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDockWidget, QFileDialog

from workbench.batch_view import BatchPanel
from workbench.inputs_view import IMAGE_EXT
from workbench.preprocess import InputFileError, image_to_input, npy_to_input
from workbench.widgets import load_image_rgb

MAX_BATCH = 5000


def batch_files(paths: list[str]) -> list[str]:
    """Images and .npy files among ``paths``, folders expanded (sorted, not recursive)."""
    out = []
    for path in paths:
        if os.path.isdir(path):
            out += [os.path.join(path, n) for n in sorted(os.listdir(path))]
        else:
            out.append(path)
    return [p for p in out if os.path.isfile(p)
            and os.path.splitext(p)[1].lower() in IMAGE_EXT | {".npy"}][:MAX_BATCH]


class WindowBatch:
    """Batch dock, its controller job and CSV export."""

    batch_completed = Signal(object)  # list[BatchRow]

    def _build_batch(self) -> None:
        self.batch_panel = BatchPanel()
        dock = QDockWidget("Batch", self)
        dock.setObjectName("dock_batch")
        dock.setWidget(self.batch_panel)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
        self.tabifyDockWidget(self.docks["timing"], dock)
        self.docks["timing"].raise_()
        self.docks["batch"] = dock
        self.batch_panel.export_requested.connect(self._export_batch_dialog)
        self.batch_panel.stop_requested.connect(self.stop_run)
        self.controller.batch_row.connect(self._on_batch_row)
        self.controller.batch_finished.connect(self._on_batch_finished)

    def run_batch(self, paths: list[str]) -> bool:
        """Run every image / .npy in ``paths`` (folders expanded) once; False, with a message,
        when there is nothing to run or the model has no single input to feed."""
        if self.loaded is None:
            self.show_message("warning", "Open a model before dropping inputs on it")
            return False
        files = batch_files(paths)
        if not files:
            self.show_message("error", "No image or .npy file among the dropped paths")
            return False
        card = self.inputs.card()
        if card is None:
            self.show_message("error", "A batch feeds the model's only input; this model has "
                              f"{len(self.inputs.cards)} inputs")
            return False
        spec, pre = card.spec, card.current_preprocess()

        def convert(path: str) -> dict[str, np.ndarray]:
            if path.lower().endswith(".npy"):
                try:
                    arr = np.load(path, allow_pickle=False)
                except Exception as exc:
                    raise InputFileError(f"cannot read {os.path.basename(path)}: {exc}"
                                         ) from exc
                return {spec.name: npy_to_input(arr, spec)}
            return {spec.name: image_to_input(load_image_rgb(path), spec, pre)}

        self.stop_run()
        self.session.start_batch(len(files))
        self.batch_panel.start(self.session.batch_total)
        self.docks["batch"].raise_()
        self.controller.run_batch(files, convert, self.loaded.labels)
        return True

    def export_batch_csv(self, path: str) -> bool:
        """Write the batch results as CSV; False, with a message, if there are none."""
        if not self.session.batch:
            self.show_message("warning", "Run a batch first: there are no results to export")
            return False
        try:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(self.session.batch_csv())
        except OSError as exc:
            self.show_message("error", f"Cannot write {path}: {exc.strerror or exc}")
            return False
        self.show_message("info", f"Exported {len(self.session.batch)} batch results: {path}")
        return True

    def _on_batch_row(self, row, done: int, total: int) -> None:
        self.session.add_batch_row(row)
        self.batch_panel.add_row(row, done)

    def _on_batch_finished(self, done: int) -> None:
        self.batch_panel.finish(self.session.batch)
        self.batch_completed.emit(list(self.session.batch))

    def _export_batch_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export batch results", "batch.csv",
                                              "CSV (*.csv)")
        if path:
            self.export_batch_csv(path)
