"""Tensors that outlive their worker, failed runs that must not leak, captures, overrides."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from engine import BackendType, EngineError, KernelError, ModelLoader, Worker
from engine.compare import error_figures

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU = ["gpu-compute", "gpu-pixel"]


def _reshaping_model() -> onnx.ModelProto:
    """x -> Relu -> Add(x) -> Reshape(shape input) -> Sigmoid: the Reshape fails at run time
    when ``shape`` does not fit, after GPU layers have allocated their outputs."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "x"], ["a"], name="add"),
        helper.make_node("Reshape", ["a", "shape"], ["s"], name="reshape"),
        helper.make_node("Sigmoid", ["s"], ["y"], name="sigmoid"),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    graph.output[0].type.tensor_type.shape.dim.add().dim_param = "?"
    graph.output[0].type.tensor_type.shape.dim.add().dim_param = "?"
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ort(proto, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, feeds)


def _device_in_use(worker) -> int:
    backend = worker._backend
    if worker.backend_type is BackendType.GPU_COMPUTE:
        return backend.pool.live_bytes
    r = backend.r
    return len(r._all) - len(r._dirty) - sum(len(v) for v in r._clean.values())


@pytest.mark.gpu
@pytest.mark.parametrize("backend", GPU)
def test_outputs_stay_readable_after_close_in_a_subprocess(backend, require_gpu, tmp_path):
    """The README's own pattern, then reads after the ``with`` block: never a native panic."""
    model_path = tmp_path / "m.onnx"
    onnx.save(_reshaping_model(), model_path)
    script = textwrap.dedent(f"""
        import numpy as np
        from engine import ModelLoader, Worker, EngineError
        model = ModelLoader.load({str(model_path)!r})
        rng = np.random.default_rng(1)
        x = rng.normal(size=(4, 64)).astype(np.float32)
        shape = np.array([8, 32], np.int64)
        with Worker(model, {backend!r}) as worker:
            first = worker.schedule({{"x": x, "shape": shape}}).peek_output()
            second = worker.schedule({{"x": -x, "shape": shape}}).peek_output()
            pending = second
        a = first.download_to_array()
        b = second.readback_and_clone().download_to_array()
        want = 1 / (1 + np.exp(-(np.maximum(x, 0) + x).reshape(8, 32)))
        assert np.allclose(a, want, atol=1e-5), "first run's output changed"
        assert np.allclose(b, 1 / (1 + np.exp(-(np.maximum(-x, 0) - x).reshape(8, 32))),
                           atol=1e-5)
        assert pending.is_readback_request_done()
        try:
            worker.schedule({{"x": x, "shape": shape}})
        except EngineError as exc:
            print("closed:", exc)
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ok" in proc.stdout and "closed: the worker is closed" in proc.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("backend", GPU)
def test_failed_runs_free_what_they_allocated(backend, require_gpu, rng):
    model = ModelLoader.load(_reshaping_model().SerializeToString())
    x = rng.normal(size=(4, 64)).astype(np.float32)
    bad = {"x": x, "shape": np.array([3, 7], np.int64)}
    with Worker(model, backend) as worker:
        with pytest.raises(KernelError, match="reshape"):
            worker.schedule(bad).peek_output().download_to_array()
        baseline = _device_in_use(worker)
        for _ in range(25):
            with pytest.raises(EngineError):
                worker.schedule(bad).peek_output().download_to_array()
        assert _device_in_use(worker) <= baseline
        good = {"x": x, "shape": np.array([16, 16], np.int64)}
        got = worker.schedule(good).peek_output().download_to_array()
    np.testing.assert_allclose(got, _ort(_reshaping_model(), good)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["cpu"] + GPU)
def test_capture_returns_the_engines_intermediates(backend, rng, request):
    if backend != "cpu":
        request.getfixturevalue("require_gpu")
    proto = _reshaping_model()
    model = ModelLoader.load(proto.SerializeToString())
    feeds = {"x": rng.normal(size=(4, 64)).astype(np.float32),
             "shape": np.array([32, 8], np.int64)}
    with Worker(model, backend) as worker:
        worker.schedule(feeds, capture=["r", "a"])
        r = worker.peek_output("r").download_to_array()
        a = worker.peek_output("a").download_to_array()
        np.testing.assert_allclose(r, np.maximum(feeds["x"], 0), rtol=1e-6)
        np.testing.assert_allclose(a, np.maximum(feeds["x"], 0) + feeds["x"], rtol=1e-6)
        worker.schedule(feeds)  # without capture, intermediates are not kept
        with pytest.raises(EngineError, match="capture"):
            worker.peek_output("r")
        with pytest.raises(EngineError, match="no such tensor"):
            worker.schedule(feeds, capture=["nope"])
        with pytest.raises(EngineError, match="list of tensor names or 'all'"):
            worker.schedule(feeds, capture=True)


def test_capture_reports_tensors_removed_by_fusion(rng):
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3],
                           rng.normal(size=108).astype(np.float32))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    model = ModelLoader.load(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    assert model.fused_away.get("c") == "conv"
    with Worker(model, "cpu") as worker, \
            pytest.raises(EngineError, match="fusion removed it.*'conv'"):
        worker.schedule(rng.normal(size=(1, 3, 8, 8)).astype(np.float32), capture=["c"])


@pytest.mark.gpu
def test_placement_overrides(require_gpu, rng):
    proto = _reshaping_model()
    model = ModelLoader.load(proto.SerializeToString())
    feeds = {"x": rng.normal(size=(4, 64)).astype(np.float32),
             "shape": np.array([64, 4], np.int64)}
    with Worker(model, "gpu-compute", placement_overrides={"add": "cpu"}) as worker:
        got = worker.schedule(feeds).peek_output().download_to_array()
        placed = worker.placement
        assert placed["add"].backend is BackendType.CPU and placed["add"].is_user_choice
        assert "user's choice" in placed["add"].reason
        assert placed["relu"].backend is BackendType.GPU_COMPUTE
        timings = {t.name: t for t in worker.last_profile.layers}
        assert timings["add"].backend == "cpu"
    np.testing.assert_allclose(got, _ort(proto, feeds)[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(EngineError, match="no layer"):
        Worker(model, "cpu", placement_overrides={"missing": "cpu"})
    with pytest.raises(EngineError, match="GPU_PIXEL"):
        Worker(model, "gpu-compute", placement_overrides={"add": "gpu-pixel"})


def test_error_figures_handle_nan_and_zero():
    a = np.array([1.0, np.nan, 0.0], np.float32)
    assert error_figures(a, a.copy()) == (0.0, 0.0)
    assert error_figures(a, np.array([1.0, 0.0, 0.0], np.float32))[0] == float("inf")
    rel, mx = error_figures(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
    assert rel == pytest.approx(0.5 / np.sqrt(1 + 2.5**2)) and mx == pytest.approx(0.5)


@pytest.mark.gpu
def test_compare_cli_agrees_and_writes_strict_json(require_gpu, tmp_path):
    out = tmp_path / "c.json"
    proc = subprocess.run([sys.executable, "-m", "engine", "compare",
                           os.path.join(ROOT, "workbench", "resources", "digits_cnn.onnx"),
                           "--backend", "gpu-compute", "--against", "cpu", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert set(result) == {"backend", "against", "layers", "first_divergent"}
    assert result["first_divergent"] is None and len(result["layers"]) >= 5
    assert all(set(r) == {"name", "op_type", "rel_l2", "max_abs"} for r in result["layers"])
