"""Compare two backends layer by layer, and read a layer's real output, from the window."""

from __future__ import annotations

import numpy as np
import pytest
from test_workbench_helpers import block_model

from engine import BackendType
from engine.compare import CPU_FLOAT64
from workbench.session import CompareResult

BLOCKS = 4


@pytest.fixture
def blocks(tmp_path):
    path = str(tmp_path / "blocks.onnx")
    block_model(path, BLOCKS)
    return path


def open_ready(qtbot, w, path):
    with qtbot.waitSignal(w.model_loaded, timeout=60_000):
        w.open_model(path)
    qtbot.waitUntil(lambda: bool(w.placement), timeout=60_000)


def test_compare_cpu_against_cpu_agrees(qtbot, window, blocks):
    open_ready(qtbot, window, blocks)
    with qtbot.waitSignal(window.compare_completed, timeout=120_000) as sig:
        assert window.compare_backends(BackendType.CPU, BackendType.CPU)
    result = sig.args[0]
    assert isinstance(result, CompareResult) and window.session.compare is result
    names = [layer.name for layer in window.loaded.model.layers]
    assert [row["name"] for row in result.layers] == names
    assert all(row["rel_l2"] == 0.0 and row["max_abs"] == 0.0 for row in result.layers)
    assert window.session.first_divergent() is None
    assert "no layer over" in window.compare_panel.status.text()
    # the graph is coloured by error: every layer in the "agrees" class
    item = window.graph.item
    assert item.errors is not None
    layer_nodes = [item.index_of[n] for n in names]
    assert set(item.node_class[layer_nodes].tolist()) == {2}
    window.compare_panel.colour.setChecked(False)
    assert window.graph.item.errors is None


def test_compare_gpu_selects_first_layer_over_threshold(qtbot, window, blocks, require_gpu):
    """Against the float64 reference every layer has a float32 rounding error above zero, so
    a threshold below the smallest one selects a known first layer."""
    open_ready(qtbot, window, blocks)
    with qtbot.waitSignal(window.compare_completed, timeout=300_000) as sig:
        assert window.compare_backends(BackendType.GPU_COMPUTE, CPU_FLOAT64)
    result = sig.args[0]
    assert result.backend is BackendType.GPU_COMPUTE and result.against == CPU_FLOAT64
    rel = [row["rel_l2"] for row in result.layers]
    assert max(rel) < 1e-3  # float32 kernels agree closely
    assert window.session.first_divergent() is None
    nonzero = [r for r in rel if r > 0]
    assert nonzero, "float32 results equal to their float64 reference on every layer"
    threshold = min(nonzero) / 2
    window.set_compare_threshold(threshold)
    first = result.first_over(threshold)
    assert first == next(row["name"] for row in result.layers if row["rel_l2"] > threshold)
    assert window.details.layer_name == first
    assert window.graph.selected_name() == first
    view = window.graph
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    assert visible.contains(view.item.rects[view.item.index_of[first]].center())
    assert window.compare_panel.first.isVisible()


def test_compare_refuses_without_model_or_value(qtbot, window):
    assert window.compare_backends(BackendType.CPU) is False
    assert "Open a model" in window.messages[-1][1]


def test_selected_layer_output_comes_from_the_backend(qtbot, window, blocks):
    open_ready(qtbot, window, blocks)
    window.select_layer("relu1")  # idle: one captured run
    qtbot.waitUntil(lambda: "read back from CPU" in window.details.text(), timeout=60_000)
    assert window.details.tensor_view.isVisible()
    assert window.details.tensor_view.channels_shown == 3  # image-like: a channel grid
    heights = window.details.tensor_view.bars.opts["height"]
    x = window.inputs.feeds()["image"]
    assert int(np.sum(heights)) == x.size
    # a running model captures the selected layer on its next run
    window.select_layer("gate2")
    qtbot.waitUntil(lambda: "output r" not in window.details.text()
                    and "read back from CPU" in window.details.text(), timeout=60_000)
    with qtbot.waitSignal(window.run_completed, timeout=60_000):
        window.start_run(False)
    assert "output g2" in window.details.text()
