"""The UI thread never stalls: a 5 ms heartbeat timer while models run and load.

The issue's targets are 50 ms (running continuously) and 250 ms (loading densenet121), and
2 s from drop to drawn graph; the asserts here are looser because CI machines are shared and
noisy. ``scripts/measure_ui.py`` prints the real numbers.
"""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication
from test_workbench_helpers import block_model

from engine import BackendType, zoo
from workbench.diagnostics import measure_continuous, measure_load


@pytest.mark.parametrize("kind", list(BackendType), ids=lambda k: k.name)
def test_heartbeat_while_running_continuously(qtbot, window, tmp_path, kind, request):
    if kind is not BackendType.CPU:
        request.getfixturevalue("require_gpu")  # fails in CI without an adapter
    path = str(tmp_path / "blocks.onnx")
    block_model(path, 12, shape=(1, 8, 32, 32))
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        window.open_model(path)
    assert window.is_backend_available(kind), f"{kind.name} has an adapter but is disabled"
    result = measure_continuous(QApplication.instance(), window, kind, seconds=3.0)
    print(f"\n{kind.name}: {result}")
    assert "error" not in result, result
    assert result["runs_shown"] >= 1
    assert result["max_gap_ms"] < 200, result


@pytest.mark.slow
def test_heartbeat_while_loading_densenet(qtbot, window):
    path = zoo.build("densenet121")  # cached; building is not what is measured
    result = measure_load(QApplication.instance(), window, path)
    print(f"\ndensenet121 load: {result}")
    assert "error" not in result, result
    # ~900 ONNX nodes; fewer layers once the importer has folded and fused them
    assert len(window.graph.item.index_of) == len(window.loaded.model.layers) > 250
    assert result["max_gap_ms"] < 1000, result
    assert result["to_graph_ms"] < 8000, result
