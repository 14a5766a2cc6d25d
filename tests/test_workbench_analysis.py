"""Honest timings (sync bars, GFLOP/s, bytes per layer) and the memory timeline."""

from __future__ import annotations

import numpy as np
from test_workbench_helpers import block_model

from engine import BackendType


def open_and_run(qtbot, w, path, kind=BackendType.CPU):
    with qtbot.waitSignal(w.model_loaded, timeout=60_000):
        w.open_model(path)
    w.set_backend(kind)
    qtbot.waitUntil(lambda: bool(w.placement), timeout=120_000)
    with qtbot.waitSignal(w.run_completed, timeout=120_000) as sig:
        assert w.start_run(False)
    qtbot.waitUntil(lambda: not w.running, timeout=10_000)
    return sig.args[0]


def test_per_layer_metrics_and_memory(qtbot, window, tmp_path):
    path = str(tmp_path / "blocks.onnx")
    block_model(path, 3, shape=(1, 8, 32, 32))
    profile = open_and_run(qtbot, window, path)
    timing = window.timing
    assert timing.costs and set(timing.costs) == {layer.name for layer in
                                                  window.loaded.model.layers}
    ms = timing.values(profile)
    timing.set_metric("gflops")
    rates = timing.values(profile)
    cost = timing.costs["scale0"]
    i = timing.names.index("scale0")
    assert cost.flops >= 8 * 32 * 32  # one per element at least
    assert np.isclose(rates[i], cost.flops / ms[i] / 1e6)
    assert timing.layer_plot.getAxis("left").labelText == "GFLOP/s"
    timing.set_metric("bytes")
    assert np.isclose(timing.values(profile)[i], cost.bytes_moved / 1e6)
    assert timing.bars["cpu"].opts["height"].max() > 0
    timing.set_metric("ms")
    # memory: one point per layer, the peak marked, tensors alive at it listed on demand
    mem = window.memory_panel
    assert mem.timeline is not None and len(mem.names) == len(window.loaded.model.layers)
    assert mem.peak_line.isVisible() and "peak" in mem.summary.text()
    rows = mem.show_peak_tensors()
    assert rows and mem.alive.count() == len(rows)
    assert all(where == "cpu" for _, _, where in rows)
    assert rows[0][1] >= rows[-1][1] > 0
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        window.open_model(path)
    assert mem.timeline is None


def test_sync_time_is_its_own_bar_on_gpu(qtbot, window, tmp_path, require_gpu):
    path = str(tmp_path / "blocks.onnx")
    block_model(path, 3)
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        window.open_model(path)
    window.set_backend(BackendType.GPU_COMPUTE)
    qtbot.waitUntil(lambda: bool(window.placement), timeout=120_000)
    window.set_layer_backend(["gate1"], BackendType.CPU)  # a CPU layer between GPU layers
    qtbot.waitUntil(lambda: bool(window.placement), timeout=120_000)
    with qtbot.waitSignal(window.run_completed, timeout=120_000) as sig:
        window.start_run(False)
    profile = sig.args[0]
    names = [t.name for t in profile.layers]
    assert "gate1/sync" in names
    sync = profile.layers[names.index("gate1/sync")]
    assert sync.op_type == "Sync" and sync.backend == "sync"
    assert window.timing.bars["sync"].opts["x"].size >= 1
    assert window.timing.layer_at(names.index("gate1/sync")) == "gate1"
    mem = window.memory_panel
    assert any(p.device_bytes > 0 for p in mem.timeline.points)
