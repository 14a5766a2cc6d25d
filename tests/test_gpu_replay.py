"""GPU_COMPUTE replay: a plan's recorded dispatches, replayed in later runs of its signature,
give the same results as the normal path and as onnxruntime; value-dependent plans are
detected and keep the normal path."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from modelgen import I64, F, model, ort_run
from onnx import helper
from replay_util import builders, replay_status, run_once

from engine import ModelLoader, Worker
from engine.backends import BackendType
from engine.backends.gpu_common.replayed import SAMPLED
from engine.backends.gpu_compute import replay
from engine.backends.gpu_compute.recording import Recorder
from engine.ops.base import Meta

pytestmark = pytest.mark.usefixtures("require_gpu")
GPU = BackendType.GPU_COMPUTE


@pytest.mark.parametrize("name", ["mobilenet_small", "encoder_small"])
def test_replay_matches_normal_path_and_onnxruntime(rng, name):
    proto = getattr(builders(), name)(**({"size": 32} if name == "mobilenet_small" else {}))
    m = ModelLoader.from_proto(proto)
    shape = tuple(d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim)
    with Worker(m, GPU) as fast, Worker(m, GPU, replay=False) as slow:
        for _ in range(4):
            x = rng.standard_normal(shape).astype(np.float32)
            got, want = run_once(fast, {"input": x}), run_once(slow, {"input": x})
            np.testing.assert_array_equal(got, want)
            (ref,) = ort_run(proto, {"input": x})
            np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)
        assert replay_status(fast) == "replayed", fast._backend.replay_status
        assert not slow._backend.replay_status
        profile = fast.last_profile
    # the first replayed run reads its in-pass timestamps; later ones repeat them
    gpu = [t for t in profile.layers if t.source.startswith("gpu-timestamp")]
    assert len(gpu) >= len(m.layers) // 2 and all(t.ms >= 0 for t in gpu)
    assert all(t.source == SAMPLED for t in gpu)


def test_replay_follows_changing_signatures(rng):
    proto = builders().encoder_small(seq="seq")
    m = ModelLoader.from_proto(proto)
    with Worker(m, GPU) as worker:
        for seq in (16, 32, 16, 8, 32, 16, 8, 4, 16):
            x = rng.standard_normal((1, seq, 64)).astype(np.float32)
            got = run_once(worker, {"input": x})
            (ref,) = ort_run(proto, {"input": x})
            assert got.shape == (1, seq, 64)
            np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)
        status = worker._backend.replay_status
    # recorded at a signature's second run: seq 4, seen once, has no replay
    assert len(status) == 3 and set(status.values()) == {"replayed"}, status


def test_held_outputs_keep_their_values(rng):
    """Outputs of earlier runs still held are never overwritten by later replays."""
    proto = builders().mobilenet_small(size=32)
    m = ModelLoader.from_proto(proto)
    with Worker(m, GPU) as worker:
        xs = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(5)]
        held = []
        for x in xs:
            worker.schedule({"input": x})
            held.append(worker.peek_output())
        for x, t in zip(xs, held):
            (ref,) = ort_run(proto, {"input": x})
            np.testing.assert_allclose(t.download_to_array(), ref, rtol=1e-3, atol=1e-4)


def test_value_dependent_plans_keep_the_normal_path(rng):
    """A Reshape shape given as an input changes the output shape under one signature;
    Clip bounds given as inputs put Clip on the CPU, computing on input values: neither
    plan is replayed, and every run is right."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["y"])]
    proto = model(nodes, [("x", F, [4, 6]), ("shape", I64, [2])], [("y", F, ["a", "b"])])
    m = ModelLoader.from_proto(proto)
    with Worker(m, GPU) as worker:
        for shape in ((6, 4), (3, 8), (8, 3), (6, 4)):
            feeds = {"x": rng.standard_normal((4, 6)).astype(np.float32),
                     "shape": np.array(shape, np.int64)}
            got = run_once(worker, feeds)
            assert got.shape == shape
            np.testing.assert_array_equal(got, ort_run(proto, feeds)[0])
        assert "takes its shape from the value of 'shape'" in replay_status(worker)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Clip", ["r", "lo", "hi"], ["c"]),
             helper.make_node("Tanh", ["c"], ["y"])]
    proto = model(nodes, [("x", F, [4, 6]), ("lo", F, []), ("hi", F, [])], [("y", F, [4, 6])])
    m = ModelLoader.from_proto(proto)
    with Worker(m, GPU) as worker:
        for lo, hi in ((0.1, 0.5), (0.3, 0.9), (0.0, 2.0), (0.1, 0.5)):
            feeds = {"x": rng.standard_normal((4, 6)).astype(np.float32),
                     "lo": np.array(lo, np.float32), "hi": np.array(hi, np.float32)}
            np.testing.assert_allclose(run_once(worker, feeds), ort_run(proto, feeds)[0],
                                       rtol=1e-5, atol=1e-7)  # GPU tanh: a few ulp near 0
        assert "computes on input values" in replay_status(worker), replay_status(worker)


def test_recorder_catches_kernels_reading_input_values():
    """A GPU kernel reading the value of a tensor not fixed by the signature (here an input)
    makes the recording unusable; constants and Shape results may be read."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Add", ["x", "b"], ["y"])]
    proto = model(nodes, [("x", F, [2, 3])], [("y", F, [2, 3])],
                  [("b", np.ones(3, np.float32))])
    m = ModelLoader.from_proto(proto)
    with Worker(m, GPU) as worker:
        x = np.zeros((2, 3), np.float32)
        plan = worker.plan_for({"x": (2, 3)})
        rec = Recorder(m, plan, {"x": x})
        layer = next(layer for layer in m.layers if layer.op_type == "Add")
        metas = rec.watch(layer, [Meta.of(x), Meta.of(m.constants["b"])])
        assert metas[1].value is m.constants["b"] and not rec.hits
        assert metas[0].shape == (2, 3) and metas[0].size == 6 and not rec.hits
        assert metas[0].value is x and rec.hits == ["x"]
        assert "reads the value of 'x'" in rec.problem({})


def test_captures_and_fallbacks_use_the_normal_path(rng):
    """A run with captures is not replayed; a plan with a CPU layer computing on data is
    never recorded; both still give the right values."""
    proto = builders().mobilenet_small(size=32)
    m = ModelLoader.from_proto(proto)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    (ref,) = ort_run(proto, {"input": x})
    conv = next(layer.name for layer in m.layers if layer.op_type == "Conv")
    with Worker(m, GPU) as worker:
        for _ in range(3):
            worker.schedule({"input": x}, capture=[m.layers[3].outputs[0]])
            np.testing.assert_allclose(worker.peek_output().download_to_array(), ref,
                                       rtol=1e-3, atol=1e-4)
        assert not worker._backend.replay_status
    with Worker(m, GPU, placement_overrides={conv: BackendType.CPU}) as worker:
        for _ in range(3):
            np.testing.assert_allclose(run_once(worker, {"input": x}), ref, rtol=1e-3, atol=1e-4)
        assert "computes on input values" in replay_status(worker)


def test_sampled_runs_report_in_pass_timestamps(rng, monkeypatch):
    monkeypatch.setattr(replay, "SAMPLE_EVERY", 1)
    proto = builders().encoder_small()
    m = ModelLoader.from_proto(proto)
    with Worker(m, GPU) as worker:
        for _ in range(3):
            run_once(worker, {"input": rng.standard_normal((1, 32, 64)).astype(np.float32)})
            profile = worker.last_profile
            gpu = [t for t in profile.layers if t.source == "gpu-timestamp"]
            assert gpu and all(t.ms >= 0 for t in gpu)
            assert profile.total_ms >= sum(t.ms for t in gpu) * 0.5
        assert replay_status(worker) == "replayed"


def test_copies_replay_inside_one_pass(rng):
    """Concat records buffer copies; a replay turns them into shader copies in the pass."""
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["x"], ["b"]),
             helper.make_node("Concat", ["a", "b", "x"], ["c"], axis=0),
             helper.make_node("Tanh", ["c"], ["y"])]
    proto = model(nodes, [("x", F, [5, 7])], [("y", F, [15, 7])])
    m = ModelLoader.from_proto(proto)
    with Worker(m, GPU) as worker:
        for _ in range(4):
            x = rng.standard_normal((5, 7)).astype(np.float32)
            np.testing.assert_allclose(run_once(worker, {"x": x}), ort_run(proto, {"x": x})[0],
                                       rtol=1e-5, atol=1e-7)
        (rep,) = worker._backend._replays._by_sig.values()
        assert [op[0] for op in rep.ring[0][1]] == ["pass"]


def test_bench_host_reports_host_cost(tmp_path):
    from engine.bench import bench_model, format_table

    path = str(tmp_path / "enc.onnx")
    onnx.save(builders().encoder_small(seq=8), path)
    rows = bench_model("enc", path, [GPU], repeat=3, threads=1, compare=False, host=True)
    (row,) = rows
    assert row["host_us_per_layer"] > 0 and row["gpu_ms"] > 0, row
    assert "host us/layer" in format_table(rows)
