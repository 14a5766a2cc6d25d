"""The workbench window: open, drop, run on each backend, stop, export, bad input."""

from __future__ import annotations

import csv
import io
import json
import os

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtTest import QTest
from test_workbench_helpers import block_model, failing_model, reference_blocks, unknown_op_model

from engine import BackendType
from workbench.main_window import DEMO_MODEL, RESOURCES

BLOCKS = 6


@pytest.fixture
def blocks(tmp_path):
    path = str(tmp_path / "blocks.onnx")
    consts = block_model(path, BLOCKS)
    return path, consts


def open_and_wait(qtbot, w, path, ready=True):
    with qtbot.waitSignal(w.model_loaded, timeout=60_000):
        w.open_model(path)
    if ready:
        qtbot.waitUntil(lambda: bool(w.placement), timeout=60_000)


def drop(widget, paths):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(p) for p in paths])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    widget.dropEvent(event)


def last_error(w):
    errors = [text for level, text in w.messages if level == "error"]
    return errors[-1] if errors else ""


def test_opens_demo_model_with_graph_and_placement(qtbot, window):
    open_and_wait(qtbot, window, DEMO_MODEL)
    model = window.loaded.model
    assert {"Conv", "MaxPool", "Gemm"} <= {layer.op_type for layer in model.layers}
    item = window.graph.item
    assert set(item.index_of) == {layer.name for layer in model.layers}
    assert all(p.backend is BackendType.CPU for p in window.placement.values())
    # the demo names a sample digit in its metadata: the input starts from it
    card = window.inputs.cards[0]
    assert card.source.endswith("digit_3.png")
    expected = np.load(os.path.join(RESOURCES, "samples", "digit_3.npy"))
    np.testing.assert_allclose(card.value.reshape(expected.shape), expected, atol=1 / 255 + 1e-6)
    assert window.load_timings["to_graph_ms"] > 0


def test_drop_onnx_opens_it_and_recent_files(qtbot, window, blocks):
    path, _ = blocks
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        drop(window, [path])
    assert window.loaded.path == os.path.abspath(path)
    assert len(window.loaded.model.layers) == BLOCKS * 5 + 1
    assert window.recent_files()[0] == os.path.abspath(path)
    actions = window.recent_menu.actions()
    assert actions and actions[0].data() == os.path.abspath(path)
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        window.open_model(DEMO_MODEL)
    actions = window.recent_menu.actions()
    assert [a.data() for a in actions[:2]] == [os.path.abspath(DEMO_MODEL), os.path.abspath(path)]
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        actions[1].trigger()
    assert window.loaded.path == os.path.abspath(path)


@pytest.mark.parametrize("kind", list(BackendType), ids=lambda k: k.name)
def test_run_once_on_each_backend(qtbot, window, blocks, kind):
    path, consts = blocks
    open_and_wait(qtbot, window, path)
    if not window.is_backend_available(kind):
        # an unavailable backend is shown disabled with its reason, and cannot be selected
        item = window.backend_combo.model().item(list(BackendType).index(kind))
        assert not item.isEnabled()
        assert "unavailable" in item.toolTip() and len(item.toolTip()) > 30
        assert window.set_backend(kind) is False
        assert window.backend is BackendType.CPU
        return
    window.set_backend(kind)
    qtbot.waitUntil(lambda: bool(window.placement), timeout=120_000)
    with qtbot.waitSignal(window.run_completed, timeout=120_000) as sig:
        assert window.start_run(False)
    profile = sig.args[0]
    assert profile.backend == kind.value
    assert len(profile.layers) == len(window.loaded.model.layers)
    x = window.inputs.feeds()["image"]
    np.testing.assert_allclose(window.last_outputs["out"], reference_blocks(x, consts, BLOCKS),
                               rtol=1e-4, atol=1e-5)
    assert window.timing.bars[profile.layers[0].backend if not profile.layers[0].fallback
                              else "fallback"].opts["x"].size > 0
    assert "float32[1, 3, 32, 32]" in window.outputs.text()
    card = window.outputs.cards["out"]
    assert card.image.isVisible() and not card.image.pixmap().isNull()  # image-shaped output
    qtbot.waitUntil(lambda: not window.running, timeout=10_000)


def test_run_continuously_and_stop(qtbot, window, blocks):
    path, _ = blocks
    open_and_wait(qtbot, window, path)
    seen = []
    window.run_completed.connect(seen.append)
    window.start_run(True)
    qtbot.waitUntil(lambda: len(seen) >= 3, timeout=60_000)
    assert window.running and window.act_stop.isEnabled()
    window.stop_run()
    assert not window.running and not window.act_stop.isEnabled()
    count = len(seen)
    qtbot.wait(400)
    assert len(seen) == count  # nothing is shown after stop
    assert len(window.timing.latency) == count
    # and it runs again afterwards
    with qtbot.waitSignal(window.run_completed, timeout=60_000):
        window.start_run(False)


def test_export_chrome_trace_and_csv(qtbot, window, blocks, tmp_path):
    path, _ = blocks
    open_and_wait(qtbot, window, path)
    assert not window.export_csv(str(tmp_path / "none.csv"))  # nothing to export yet
    with qtbot.waitSignal(window.run_completed, timeout=60_000) as sig:
        window.start_run(False)
    profile = sig.args[0]
    trace_path, csv_path = tmp_path / "run.json", tmp_path / "run.csv"
    assert window.export_chrome_trace(str(trace_path))
    assert window.export_csv(str(csv_path))
    events = json.loads(trace_path.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert [e["name"] for e in spans] == [t.name for t in profile.layers]
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert len(rows) == len(profile.layers)
    assert abs(float(rows[0]["ms"]) - profile.layers[0].ms) < 1e-3
    assert not window.export_csv(str(tmp_path / "missing-dir" / "x.csv"))
    assert "Cannot write" in last_error(window)


def test_drop_image_and_npy_onto_input(qtbot, window):
    open_and_wait(qtbot, window, DEMO_MODEL)
    card = window.inputs.cards[0]
    samples = os.path.join(RESOURCES, "samples")
    drop(card, [os.path.join(samples, "digit_7.png")])
    expected = np.load(os.path.join(samples, "digit_7.npy"))
    # the PNG is dark ink on white, 4x upscaled: grey, invert, /255 and area-resize undo it
    np.testing.assert_allclose(card.value.reshape(expected.shape), expected, atol=1 / 255 + 1e-6)
    # editing the preprocessing re-applies it to the same image
    card.invert.setChecked(False)
    np.testing.assert_allclose(card.value.reshape(expected.shape), 1 - expected,
                               atol=1 / 255 + 1e-6)
    drop(card, [os.path.join(samples, "digit_2.npy")])
    np.testing.assert_array_equal(card.value.reshape(-1),
                                  np.load(os.path.join(samples, "digit_2.npy")).reshape(-1))
    # a dropped image on the window feeds the single input too
    drop(window, [os.path.join(samples, "digit_5.png")])
    assert card.source.endswith("digit_5.png")


def test_wrong_input_files_keep_old_value(qtbot, window, tmp_path):
    open_and_wait(qtbot, window, DEMO_MODEL)
    card = window.inputs.cards[0]
    before = card.value.copy()
    bad_npy = tmp_path / "wrong.npy"
    np.save(bad_npy, np.zeros((3, 5), np.float32))
    drop(card, [str(bad_npy)])
    assert "expects shape [1, 1, 8, 8]" in last_error(window)
    fake_png = tmp_path / "fake.png"
    fake_png.write_text("not really an image")
    drop(card, [str(fake_png)])
    assert "not an image" in last_error(window)
    np.testing.assert_array_equal(card.value, before)
    card.std.setText("0")
    card.std.editingFinished.emit()
    assert "std" in last_error(window)


def test_seed_controls_random_inputs(qtbot, window, blocks):
    path, _ = blocks
    open_and_wait(qtbot, window, path)
    card = window.inputs.cards[0]
    first = card.value.copy()
    window.inputs.seed.setValue(7)
    assert not np.array_equal(first, card.value)
    window.inputs.seed.setValue(0)
    np.testing.assert_array_equal(first, card.value)
    assert first.std() > 0.5  # real random data, not zeros


def test_bad_files_give_messages_and_app_keeps_working(qtbot, window, blocks, tmp_path):
    path, consts = blocks
    open_and_wait(qtbot, window, path)
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    drop(window, [str(notes)])
    assert "not something the workbench can open" in last_error(window)
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(os.urandom(2000))
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(open(DEMO_MODEL, "rb").read()[:3000])
    unknown = tmp_path / "unknown.onnx"
    unknown_op_model(str(unknown))
    for bad in (corrupt, truncated, unknown, tmp_path / "missing.onnx"):
        n = len(window.messages)
        window.open_model(str(bad))
        qtbot.waitUntil(lambda n=n: len(window.messages) > n, timeout=30_000)
        assert f"Cannot open {bad.name}" in last_error(window)
        assert window.loaded.path == os.path.abspath(path)  # the old model stays
    assert "FrobnicateTensor" in [t for lv, t in window.messages if "unknown" in t][-1]
    with qtbot.waitSignal(window.run_completed, timeout=60_000):
        window.start_run(False)


def test_backend_failing_mid_run_is_reported(qtbot, window, tmp_path, blocks):
    bad = str(tmp_path / "failing.onnx")
    failing_model(bad)
    open_and_wait(qtbot, window, bad)
    n = len(window.messages)
    window.start_run(True)
    qtbot.waitUntil(lambda: len(window.messages) > n, timeout=60_000)
    assert "run failed" in last_error(window) and "reshape" in last_error(window).lower()
    assert not window.running
    open_and_wait(qtbot, window, blocks[0])
    assert not window.message_bar.isHidden()  # the old error stays until a run succeeds
    with qtbot.waitSignal(window.run_completed, timeout=60_000):
        window.start_run(False)
    assert window.message_bar.isHidden()  # the new model ran: the old error is gone


def test_search_select_and_tooltips(qtbot, window, blocks):
    path, _ = blocks
    open_and_wait(qtbot, window, path)
    with qtbot.waitSignal(window.run_completed, timeout=60_000):
        window.start_run(False)
    window.search.setText("Sigmoid")
    assert window.graph.search("Sigmoid") == BLOCKS
    window.search.returnPressed.emit()
    assert window.details.layer_name == "gate0"
    # click a node in the graph: details, timing cursor and output preview follow
    view = window.graph
    rect = view.item.rects[view.item.index_of["relu2"]]
    view.centerOn(rect.center())
    pos = view.mapFromScene(rect.center())
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos))
    assert window.details.layer_name == "relu2"
    # the output preview (statistics) arrives from the preview thread
    qtbot.waitUntil(lambda: "mean" in window.details.text(), timeout=30_000)
    assert window.timing.cursor.isVisible()
    assert window.timing.cursor.value() == [t.name for t in window.last_profile.layers].index(
        "relu2")
    text = window.details.text()
    assert "Relu" in text and "runs on CPU" in text and "[1, 3, 32, 32]" in text
    tip = view.tooltip_at(rect.center().x(), rect.center().y())
    assert "relu2" in tip and "CPU" in tip and "ms" in tip
    # a click on a timing bar selects that layer in the graph
    window.timing.layer_clicked.emit("shift1")
    assert view.selected_name() == "shift1"


def test_demo_model_classifies_its_sample(qtbot, window):
    open_and_wait(qtbot, window, DEMO_MODEL)
    with qtbot.waitSignal(window.run_completed, timeout=120_000):
        window.start_run(False)
    from onnx.reference import ReferenceEvaluator

    x = window.inputs.feeds()["digit"]
    want = ReferenceEvaluator(DEMO_MODEL).run(None, {"digit": x})[0]
    got = window.last_outputs["probabilities"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert int(got.argmax()) == 3
    top = window.outputs.cards["probabilities"].topk.text()
    assert "top-5" in top and top.index(">3<") < top.index("%")


def test_run_started_while_a_model_is_shown_runs_once_it_is(qtbot, window, blocks):
    """The input cards and the backend follow a few stages after the model is set as loaded:
    a run started in between starts once they are there, on the new model's inputs (it was
    an error about the new model's input missing from the previous model's cards)."""
    path, consts = blocks
    open_and_wait(qtbot, window, path)
    seen: list = []
    show_model = window._show_model

    def show_then_start(lm):
        show_model(lm)  # the model is loaded, its input cards not built yet
        seen.append(sorted(window.current_feeds()))
        seen.append(window.start_run(False))

    window._show_model = show_then_start
    with qtbot.waitSignal(window.run_completed, timeout=120_000):
        window.open_model(DEMO_MODEL)
    assert seen == [["digit"], True]
    assert window.last_outputs and not last_error(window)
    qtbot.waitUntil(lambda: not window.running, timeout=10_000)
    assert [c.spec.name for c in window.inputs.cards] == ["digit"]
