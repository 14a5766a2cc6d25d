"""bench warms each side up before every timed block, for WARM_S and at least once."""

import time

from engine import bench


def test_warm_runs_for_its_time_and_at_least_once(monkeypatch):
    calls = []
    monkeypatch.setattr(bench, "WARM_S", 0.03)
    t0 = time.perf_counter()
    bench._warm(lambda: (calls.append(1), time.sleep(0.005)))
    assert time.perf_counter() - t0 >= 0.03 and len(calls) >= 4
    monkeypatch.setattr(bench, "WARM_S", 0.0)
    calls.clear()
    bench._warm(lambda: calls.append(1))
    assert calls == [1]


def _tiny_model(tmp_path):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    w = np.random.default_rng(3).standard_normal((8, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(w, "w")])
    path = str(tmp_path / "tiny.onnx")
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_gpu_backends_are_warmed_when_their_runs_are_short(tmp_path, monkeypatch,
                                                          require_gpu):
    """A GPU clocks down while idle (an H100 ran BERT 3x slower right after onnxruntime's
    block): a backend whose runs are shorter than WARM_S is warmed before each timed block;
    one whose runs are longer is not (its run keeps the device busy)."""
    from engine.backends.base import BackendType

    warmed = []
    real_warm = bench._warm
    monkeypatch.setattr(bench, "_warm", lambda run: (warmed.append(1), real_warm(run)))
    path = _tiny_model(tmp_path)
    monkeypatch.setattr(bench, "WARM_S", 0.5)  # far above a tiny run, even on a loaded machine
    bench.bench_model("tiny", path, [BackendType.GPU_COMPUTE], repeat=4, threads=1,
                      compare=False, progress=lambda *a: None)
    assert len(warmed) == 4  # one per timed block
    warmed.clear()
    monkeypatch.setattr(bench, "WARM_S", 0.0)  # every run is "longer" than the warm time
    bench.bench_model("tiny", path, [BackendType.GPU_COMPUTE], repeat=4, threads=1,
                      compare=False, progress=lambda *a: None)
    assert warmed == []
