"""Many inputs dropped at once run as a batch: progress, results table, CSV export."""

from __future__ import annotations

import csv
import io
import os

import numpy as np
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QImage
from test_workbench_helpers import block_model

from workbench.main_window import DEMO_MODEL, RESOURCES


def drop(widget, paths):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(p) for p in paths])
    widget.dropEvent(QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                                Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))


def test_folder_of_digits_runs_as_a_batch(qtbot, window, tmp_path):
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        window.open_model(DEMO_MODEL)
    qtbot.waitUntil(lambda: bool(window.placement), timeout=60_000)
    folder = tmp_path / "inputs"
    folder.mkdir()
    sample = QImage(os.path.join(RESOURCES, "samples", "digit_3.png"))
    for k in range(3):
        assert sample.save(str(folder / f"digit_{k}.png"))
    np.save(folder / "zeros.npy", np.zeros((1, 1, 28, 28), np.float32))
    np.save(folder / "wrong.npy", np.zeros((5, 5), np.float32))
    (folder / "notes.txt").write_text("not an input")
    with qtbot.waitSignal(window.batch_completed, timeout=120_000) as sig:
        drop(window, [str(folder)])
    rows = sig.args[0]
    assert [os.path.basename(r.source) for r in rows] == [
        "digit_0.png", "digit_1.png", "digit_2.png", "wrong.npy", "zeros.npy"]
    for r in rows[:3]:
        assert not r.error and r.top[0][0] == 3 and r.ms > 0 and len(r.top) == 5
    assert "wrong.npy" in rows[3].source and rows[3].error
    assert window.batch_panel.table.rowCount() == 5
    assert window.batch_panel.progress.value() == 5
    assert window.batch_panel.table.item(0, 1).text() in ("3", window.loaded.labels[3]
                                                          if window.loaded.labels else "3")
    out = tmp_path / "batch.csv"
    assert window.export_batch_csv(str(out))
    table = list(csv.reader(io.StringIO(out.read_text())))
    assert table[0][:4] == ["source", "ms", "error", "top1_class"]
    assert len(table) == 6 and table[1][3] == "3"


def test_several_npy_files_and_refusals(qtbot, window, tmp_path):
    assert window.run_batch([str(tmp_path)]) is False  # no model yet
    path = str(tmp_path / "blocks.onnx")
    block_model(path, 2)
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        window.open_model(path)
    qtbot.waitUntil(lambda: bool(window.placement), timeout=60_000)
    assert window.run_batch([str(tmp_path / "nothing.png")]) is False
    assert "No image or .npy" in window.messages[-1][1]
    files = []
    for k in range(4):
        files.append(str(tmp_path / f"x{k}.npy"))
        np.save(files[-1], np.full((1, 3, 32, 32), k, np.float32))
    with qtbot.waitSignal(window.batch_completed, timeout=120_000) as sig:
        drop(window, files)
    rows = sig.args[0]
    assert len(rows) == 4 and not any(r.error for r in rows)
    assert window.session.batch == rows
    assert "4 inputs run" in window.batch_panel.status.text()
