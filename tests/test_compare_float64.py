"""The float64 reference of a comparison: the CPU backend running a widened copy of the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from test_workbench_compare import open_ready

from engine import BackendType, ModelLoader, Worker
from engine.compare import CPU_FLOAT64, compare_backends
from engine.precision import widened_feeds, widened_to_float64

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mixed_model(path: str, rng) -> dict[str, np.ndarray]:
    """x -> MatMul(w) -> Add(b) -> Relu -> Softmax, times its last dim cast to float, plus a
    ConstantOfShape (float value): float constants, a float-typed attribute and a cast to
    float, all of which the float64 copy must widen."""
    w = rng.standard_normal((16, 12)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["lin"]),
        helper.make_node("Relu", ["lin"], ["act"]),
        helper.make_node("Softmax", ["act"], ["sm"], axis=-1),
        helper.make_node("Shape", ["sm"], ["last"], start=-1),
        helper.make_node("Cast", ["last"], ["count"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["sm", "count"], ["scaled"]),
        helper.make_node("Shape", ["sm"], ["shp"]),
        helper.make_node("ConstantOfShape", ["shp"], ["third"],
                         value=numpy_helper.from_array(np.array([1 / 3], np.float32))),
        helper.make_node("Add", ["scaled", "third"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 12])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return {"w": w, "b": b}


def _reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The model in float64 with NumPy."""
    act = np.maximum(x.astype(np.float64) @ w.astype(np.float64) + b, 0.0)
    e = np.exp(act - act.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) * act.shape[-1] + np.float64(np.float32(1 / 3))


def test_widened_model_computes_in_float64(tmp_path, rng):
    path = str(tmp_path / "mixed.onnx")
    weights = _mixed_model(path, rng)
    model = ModelLoader.load(path)
    wide = widened_to_float64(model)
    assert wide.inputs[0].dtype == np.float64 and model.inputs[0].dtype == np.float32
    assert all(c.dtype != np.float32 for c in wide.constants.values())
    x = rng.standard_normal((3, 16)).astype(np.float32)
    with Worker(wide, BackendType.CPU) as worker:
        worker.schedule(widened_feeds({"x": x}), capture="all")
        y64 = worker.peek_output("y").download_to_array()
        assert worker.peek_output("sm").download_to_array().dtype == np.float64
    with Worker(model, BackendType.CPU) as worker:
        worker.schedule({"x": x})
        y32 = worker.peek_output("y").download_to_array()
    want = _reference(x, weights["w"], weights["b"])
    assert y64.dtype == np.float64 and y32.dtype == np.float32
    np.testing.assert_allclose(y64, want, rtol=1e-12, atol=1e-12)
    # the float32 run differs from the reference by float32 rounding, not more
    assert 0 < np.max(np.abs(y32 - want)) < 1e-5
    assert model.constants["w"].dtype == np.float32  # the original is not changed


def test_compare_against_float64_reports_float32_rounding(tmp_path, rng):
    path = str(tmp_path / "mixed.onnx")
    _mixed_model(path, rng)
    model = ModelLoader.load(path)
    x = rng.standard_normal((2, 16)).astype(np.float32)
    result = compare_backends(model, "cpu", CPU_FLOAT64, {"x": x})
    assert result["backend"] == "cpu" and result["against"] == CPU_FLOAT64
    rel = {row["name"]: row["rel_l2"] for row in result["layers"]}
    assert result["first_divergent"] is None
    assert 0 < max(rel.values()) < 1e-5


def test_compare_cli_against_float64(tmp_path, rng):
    path = str(tmp_path / "mixed.onnx")
    _mixed_model(path, rng)
    out = tmp_path / "c.json"
    proc = subprocess.run([sys.executable, "-m", "engine", "compare", path, "--backend", "cpu",
                           "--against", "cpu-f64", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["against"] == "cpu-f64" and result["first_divergent"] is None
    bad = subprocess.run([sys.executable, "-m", "engine", "compare", path, "--backend", "cpu",
                          "--against", "cpu-f32"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "cpu-f64" in bad.stderr


def test_window_compares_against_float64(qtbot, window, tmp_path, rng):
    path = str(tmp_path / "mixed.onnx")
    _mixed_model(path, rng)
    open_ready(qtbot, window, path)
    labels = [window.compare_panel.against.itemText(i)
              for i in range(window.compare_panel.against.count())]
    assert "CPU (float64)" in labels
    with qtbot.waitSignal(window.compare_completed, timeout=120_000) as sig:
        assert window.compare_backends(BackendType.CPU, CPU_FLOAT64)
    result = sig.args[0]
    assert result.against == CPU_FLOAT64
    assert 0 < max(row["rel_l2"] for row in result.layers) < 1e-5
    assert "CPU (float64)" in window.compare_panel.status.text()
    assert window.compare_panel.against.currentData() == CPU_FLOAT64
