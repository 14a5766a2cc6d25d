"""Moving layers between backends, and placement for edited symbolic input shapes."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import QSettings
from test_workbench_helpers import block_model

from engine import BackendType
from workbench.main_window import MainWindow


def open_ready(qtbot, w, path):
    with qtbot.waitSignal(w.model_loaded, timeout=60_000):
        w.open_model(path)
    qtbot.waitUntil(lambda: bool(w.placement), timeout=120_000)


def run_once(qtbot, w):
    with qtbot.waitSignal(w.run_completed, timeout=120_000) as sig:
        assert w.start_run(False)
    qtbot.waitUntil(lambda: not w.running, timeout=10_000)
    return sig.args[0]


@pytest.fixture
def blocks(tmp_path):
    path = str(tmp_path / "blocks.onnx")
    block_model(path, 3)
    return path


def test_move_layer_to_cpu_on_gpu_and_back(qtbot, window, blocks, tmp_path, require_gpu):
    open_ready(qtbot, window, blocks)
    window.set_backend(BackendType.GPU_COMPUTE)
    qtbot.waitUntil(lambda: bool(window.placement), timeout=120_000)
    assert window.placement["gate1"].backend is BackendType.GPU_COMPUTE
    before = {t.name: t for t in run_once(qtbot, window).layers}
    assert before["gate1"].backend == "gpu-compute"
    menu = window.build_layer_menu(["gate1"])
    labels = [a.text() for a in menu.actions()]
    assert "Run on CPU" in labels and "Run on GPU compute" in labels
    next(a for a in menu.actions() if a.text() == "Run on CPU").trigger()
    assert window.layer_overrides == {"gate1": BackendType.CPU}
    qtbot.waitUntil(lambda: bool(window.placement), timeout=120_000)
    p = window.placement["gate1"]
    assert p.backend is BackendType.CPU and p.is_user_choice
    assert window.graph.item.user[window.graph.item.index_of["gate1"]]
    after = {t.name: t for t in run_once(qtbot, window).layers}
    assert after["gate1"].backend == "cpu"  # the timing view shows the move
    assert after["shift1"].backend == "gpu-compute"
    i = window.timing.names.index("gate1")  # a CPU bar, not a fallback one
    assert i in window.timing.bars["cpu"].opts["x"]
    assert i not in window.timing.bars["fallback"].opts["x"]
    # the exported trace records the choice
    out = tmp_path / "trace.json"
    assert window.export_chrome_trace(str(out))
    trace = json.loads(out.read_text())
    assert trace["otherData"]["placement_overrides"] == {"gate1": "cpu"}
    event = next(e for e in trace["traceEvents"] if e.get("name") == "gate1")
    assert event["args"]["user_choice"] is True
    window.set_layer_backend(["gate1"], None)
    assert window.layer_overrides == {}
    qtbot.waitUntil(lambda: bool(window.placement), timeout=120_000)
    assert window.placement["gate1"].backend is BackendType.GPU_COMPUTE


def test_overrides_are_saved_per_model_and_refusals_explained(qtbot, window, blocks, tmp_path):
    open_ready(qtbot, window, blocks)
    # a right-click on a search match acts on every match
    window.graph.search("Sigmoid")
    assert window.graph.layers_for_menu("gate1") == ["gate0", "gate1", "gate2"]
    assert window.graph.layers_for_menu("relu0") == ["relu0"]
    menu = window.build_layer_menu(["gate0", "gate1", "gate2"])
    assert "3 layers" in menu.actions()[0].text()
    window.graph.search("")
    # a GPU backend that is not selected cannot take a layer
    assert window.set_layer_backend("relu0", BackendType.GPU_PIXEL) is False
    assert "Select GPU_PIXEL" in window.messages[-1][1]
    # the engine refuses a name that is no layer: the message says why, nothing changes
    with qtbot.waitSignal(window.overrides_refused, timeout=60_000) as sig:
        window.set_layer_backend(["no_such_layer"], BackendType.CPU)
    assert "no layer" in sig.args[0]
    assert window.layer_overrides == {}
    qtbot.waitUntil(lambda: bool(window.placement), timeout=60_000)
    assert window.set_layer_backend(["relu0", "gate0"], BackendType.CPU)
    qtbot.waitUntil(lambda: bool(window.placement), timeout=60_000)
    assert window.placement["relu0"].backend is BackendType.CPU  # on the CPU anyway
    # a new window with the same settings opens the model with the same choices
    other = str(tmp_path / "other.onnx")
    block_model(other, 2)
    open_ready(qtbot, window, other)
    assert window.layer_overrides == {}
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    second = MainWindow(settings=settings, probe_backends=False)
    qtbot.addWidget(second)
    try:
        open_ready(qtbot, second, blocks)
        assert second.layer_overrides == {"relu0": BackendType.CPU, "gate0": BackendType.CPU}
        assert second.placement["gate0"].backend is BackendType.CPU
    finally:
        second.controller.shutdown()


def test_symbolic_dims_are_editable_and_placement_follows(qtbot, window, tmp_path):
    path = str(tmp_path / "dynamic.onnx")
    block_model(path, 2, shape=("batch", 3, "height", "width"))
    open_ready(qtbot, window, path)
    card = window.inputs.cards[0]
    assert set(card.dim_edits) == {0, 2, 3}
    assert card.shape == (1, 3, 224, 224)  # the engine's defaults for an image input
    with qtbot.waitSignal(window.placement_shown, timeout=60_000):
        assert window.set_input_shape("image", (2, 3, 16, 24))
    assert window.session.input_shapes["image"] == (2, 3, 16, 24)
    assert window.inputs.feeds()["image"].shape == (2, 3, 16, 24)
    assert card.dim_edits[3].value() == 24
    profile = run_once(qtbot, window)
    assert len(profile.layers) == len(window.loaded.model.layers)
    assert window.last_outputs["out"].shape == (2, 3, 16, 24)
    # a fixed dim cannot change
    assert window.set_input_shape("image", (2, 4, 16, 24)) is False
    assert "cannot take shape" in window.messages[-1][1]
    # the spin boxes drive the same path
    with qtbot.waitSignal(window.placement_shown, timeout=60_000):
        card.dim_edits[2].setValue(8)
    assert window.inputs.feeds()["image"].shape == (2, 3, 8, 24)
