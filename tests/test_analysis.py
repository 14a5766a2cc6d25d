"""Layer costs (FLOPs, bytes), the memory timeline and sync bars of a run."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import BackendType, ModelLoader, Worker


def _model(rng):
    w = numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), "w")
    fc = numpy_helper.from_array(rng.normal(size=(8 * 6 * 6, 5)).astype(np.float32), "fc")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Exp", ["c"], ["s"], name="exp"),
        helper.make_node("Flatten", ["s"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "fc"], ["y"], name="matmul"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5])], [w, fc])
    return ModelLoader.load(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


def test_layer_costs_follow_the_shapes_of_the_last_run(rng):
    model = _model(rng)
    with Worker(model, "cpu") as worker:
        worker.schedule(rng.normal(size=(2, 3, 8, 8)).astype(np.float32))
        costs = worker.layer_costs()
    # Conv: 2 * outputs * (C_in * kh * kw); MatMul: 2 * M * N * K
    assert costs["conv"].flops == 2 * (2 * 8 * 6 * 6) * (3 * 3 * 3)
    assert costs["matmul"].flops == 2 * 2 * 5 * (8 * 6 * 6)
    assert costs["conv"].bytes_in == 4 * (2 * 3 * 8 * 8 + 8 * 3 * 3 * 3)
    assert costs["flatten"].flops == 0 and costs["flatten"].bytes_out == 4 * 2 * 288


def test_memory_timeline_peak_and_alive_tensors(rng):
    model = _model(rng)
    with Worker(model, "cpu") as worker:
        worker.schedule(rng.normal(size=(4, 3, 8, 8)).astype(np.float32))
        timeline = worker.memory_timeline()
    by_layer = {p.layer: p for p in timeline.points}
    x, c = 4 * 3 * 8 * 8 * 4, 4 * 8 * 6 * 6 * 4
    # while the conv runs: its input and its output
    assert by_layer["conv"].cpu_bytes == x + c and by_layer["conv"].device_bytes == 0
    # x is dead after the conv; exp holds c and s
    assert by_layer["exp"].cpu_bytes == 2 * c
    assert timeline.peak_bytes == 2 * c
    names = {n for n, _, _ in timeline.alive_at_peak}
    assert names == {"c", "s"}


@pytest.mark.gpu
def test_sync_is_its_own_bar_on_gpu_runs(require_gpu, rng):
    model = _model(rng)
    with Worker(model, "gpu-compute", placement_overrides={"flatten": "cpu"}) as worker:
        worker.schedule(rng.normal(size=(2, 3, 8, 8)).astype(np.float32))
        worker.peek_output().download_to_array()
        profile = worker.last_profile
        timeline = worker.memory_timeline()
    names = [t.name for t in profile.layers]
    assert "flatten/sync" in names and names.index("flatten/sync") < names.index("flatten")
    sync = profile.layers[names.index("flatten/sync")]
    assert sync.op_type == "Sync" and sync.backend == "sync" and not sync.fallback
    assert worker.placement["conv"].backend is BackendType.GPU_COMPUTE
    assert any(p.device_bytes > 0 for p in timeline.points)
