"""GPU_COMPUTE behaviour: deferred results, readback, fallback with reasons, limits and
splitting, timestamps, memory reuse and peak, pipeline preparation, errors."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import onnx
import pytest
from gpu_compute_util import Const, one_node
from onnx import helper, numpy_helper

from engine import ModelLoader, Worker
from engine.backends import BackendType
from engine.errors import BackendUnavailableError, GPUError

pytestmark = pytest.mark.usefixtures("require_gpu")
GPU = BackendType.GPU_COMPUTE


def _chain(rng, ops, shape=(3, 37, 29)):
    """x -> op0 -> op1 -> ... (each op unary, or binary with a random constant)."""
    nodes, inits, prev = [], [], "x"
    for i, op in enumerate(ops):
        out = f"t{i}" if i < len(ops) - 1 else "y"
        if op in ("Add", "Mul", "Sub"):
            c = rng.standard_normal(shape[-1:]).astype(np.float32)
            inits.append(numpy_helper.from_array(c, f"c{i}"))
            nodes.append(helper.make_node(op, [prev, f"c{i}"], [out]))
        else:
            nodes.append(helper.make_node(op, [prev], [out]))
        prev = out
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info(
        "x", onnx.TensorProto.FLOAT, shape)], [onnx.ValueInfoProto(name="y")], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return ModelLoader.from_proto(onnx.shape_inference.infer_shapes(proto))


def test_deferred_results_on_resnet50():
    """schedule() returns long before the run ends; polling says not-done before done; the
    result after done is immediate."""
    from engine.zoo import build, sample_input

    model = ModelLoader.load(build("resnet50"))
    feeds = sample_input(model)
    with Worker(model, GPU) as worker:
        worker.schedule(feeds)
        worker.peek_output().download_to_array()  # warm: pipelines, packed weights, pool
        t0 = time.perf_counter()
        worker.schedule(feeds)
        t_schedule = time.perf_counter() - t0
        out = worker.peek_output()
        out.readback_request()
        polls_before_done = 0
        while not out.is_readback_request_done():
            polls_before_done += 1
            time.sleep(0.002)
        t_total = time.perf_counter() - t0
        t1 = time.perf_counter()
        arr = out.readback_and_clone().download_to_array()
        t_after = time.perf_counter() - t1
    assert polls_before_done > 0
    assert t_schedule < 0.3 * t_total, (t_schedule, t_total)
    assert t_after < 0.05, t_after
    assert arr.shape == (1, 1000) and np.isfinite(arr).all()


def test_async_readback_and_two_runs_in_flight(rng):
    model = _chain(rng, ["Relu", "Add", "Sigmoid", "Mul"])
    xs = [rng.standard_normal((3, 37, 29)).astype(np.float32) for _ in range(2)]
    with Worker(model, GPU) as worker, Worker(model, BackendType.CPU) as cpu:
        worker.schedule(xs[0])
        first = worker.peek_output()
        worker.schedule(xs[1])  # reuses pooled buffers while the first output is alive
        second = worker.peek_output()

        async def read():
            return await second.readback_and_clone_async()

        got2 = asyncio.run(read()).download_to_array()
        got1 = first.download_to_array()
        for x, got in ((xs[0], got1), (xs[1], got2)):
            cpu.schedule(x)
            np.testing.assert_allclose(got, cpu.peek_output().download_to_array(), rtol=1e-5,
                                       atol=1e-6)


def test_fallback_mixes_backends_with_reasons(rng):
    """An op the GPU lacks (LpNormalization), a dtype it lacks (float64) and a CPU-forced
    shape chain run on the CPU; the result still matches the CPU backend."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ("batch", 5, 7))
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("LpNormalization", ["r"], ["c"], axis=1, p=2),
        helper.make_node("Cast", ["c"], ["d"], to=onnx.TensorProto.DOUBLE),
        helper.make_node("Add", ["d", "d"], ["e"]),
        helper.make_node("Cast", ["e"], ["f"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Reshape", ["f", "s"], ["g"]),
        helper.make_node("Sigmoid", ["g"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "mixed", [x], [onnx.ValueInfoProto(name="y")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model = ModelLoader.from_proto(onnx.shape_inference.infer_shapes(proto))
    feed = rng.standard_normal((2, 5, 7)).astype(np.float32)
    with Worker(model, GPU) as worker, Worker(model, BackendType.CPU) as cpu:
        worker.schedule(feed)
        got = worker.peek_output().download_to_array()
        cpu.schedule(feed)
        np.testing.assert_allclose(got, cpu.peek_output().download_to_array(), rtol=1e-5)
        reasons = {layer.op_type: worker.placement[layer.name] for layer in model.layers}
    assert reasons["Relu"].backend is GPU and reasons["Sigmoid"].backend is GPU
    assert reasons["LpNormalization"].is_fallback
    assert "LpNormalization" in reasons["LpNormalization"].reason
    add = reasons["Add"]
    assert add.is_fallback and "float64" in add.reason, add
    assert reasons["Shape"].backend is BackendType.CPU and "CPU-forced" in reasons["Shape"].reason


def test_oversized_tensors_split_or_fall_back(rng):
    """With the binding limit lowered to 64 KiB: Gemm splits its B along N; an elementwise op
    on a larger tensor falls back with the limit in the reason."""
    m, k, n = 3, 96, 300  # B is 115 KiB
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    c = rng.standard_normal((n,)).astype(np.float32)
    proto, feeds = one_node("Gemm", [a, Const(b), Const(c)], {"transB": 1})
    with Worker(ModelLoader.from_proto(proto), GPU, max_binding=64 << 10) as worker:
        assert all(p.backend is GPU for p in worker.placement.values()), worker.placement
        worker.schedule(feeds)
        np.testing.assert_allclose(worker.peek_output().download_to_array(), a @ b.T + c,
                                   rtol=1e-4, atol=1e-4)
    big = rng.standard_normal((64, 300)).astype(np.float32)
    proto, feeds = one_node("Relu", [big])
    with Worker(ModelLoader.from_proto(proto), GPU, max_binding=64 << 10) as worker:
        (place,) = worker.placement.values()
        assert place.is_fallback and "binding limit" in place.reason, place
        worker.schedule(feeds)
        np.testing.assert_array_equal(worker.peek_output().download_to_array(),
                                      np.maximum(big, 0))


def test_two_backends_keep_their_own_binding_limits(rng):
    """Limits belong to a backend: a worker planning for a 64 KiB binding keeps falling back
    after a second worker with the device's full limit was made, and the second runs the
    same layer natively, whichever plans or runs first."""
    big = rng.standard_normal((64, 300)).astype(np.float32)  # 75 KiB
    proto, feeds = one_node("Relu", [big])
    model = ModelLoader.from_proto(proto)
    with Worker(model, GPU, max_binding=64 << 10) as small, Worker(model, GPU) as full:
        for first, second in ((small, full), (full, small)):
            first.schedule(feeds)
            second.schedule(feeds)
            (p_small,) = small.placement.values()
            (p_full,) = full.placement.values()
            assert p_small.is_fallback and "binding limit" in p_small.reason, p_small
            assert p_full.backend is GPU and not p_full.is_fallback, p_full
            for w in (small, full):
                np.testing.assert_array_equal(w.peek_output().download_to_array(),
                                              np.maximum(big, 0))
        assert small._backend.limits.max_binding == 64 << 10
        assert full._backend.limits.max_binding > 64 << 10


def test_gpu_timestamps_in_profile(rng):
    model = _chain(rng, ["Relu", "Add", "Tanh"])
    with Worker(model, GPU) as worker:
        worker.schedule(rng.standard_normal((3, 37, 29)).astype(np.float32))
        worker.peek_output().download_to_array()
        profile = worker.last_profile
    assert profile is not None and len(profile.layers) == 3
    assert all(t.source == "gpu-timestamp" and t.ms > 0 for t in profile.layers), profile.layers
    assert profile.total_ms >= max(t.ms for t in profile.layers)


def test_memory_reuse_and_planned_peak(rng):
    """Twelve chained ops on a 1.2 MB tensor: lifetimes let intermediates share buffers, so
    the planned and the measured peak stay near three tensors, not twelve."""
    shape = (4, 300, 256)
    model = _chain(rng, ["Relu", "Sigmoid", "Add", "Tanh", "Mul", "Abs"] * 2, shape)
    nbytes = 4 * int(np.prod(shape))
    with Worker(model, GPU) as worker:
        planned = worker.peak_memory_bytes
        for _ in range(2):
            worker.schedule(rng.standard_normal(shape).astype(np.float32))
            worker.peek_output().download_to_array()
        backend = worker._backend
        measured, created = backend.pool.peak_bytes, backend.pool.device_bytes
    assert planned is not None and nbytes <= planned <= 4 * nbytes, (planned, nbytes)
    assert measured <= 4 * nbytes and created <= 5 * nbytes, (measured, created)


def test_prepare_reports_progress_and_inspect_prints_peak(rng, capsys, tmp_path):
    seen = []
    model = _chain(rng, ["Erf", "Softsign", "Add"])
    with Worker(model, GPU, progress=lambda msg, frac: seen.append((msg, frac))):
        pass
    assert seen and seen[-1][1] == 1.0
    assert all(0.0 <= f <= 1.0 for _, f in seen)
    from engine.cli import main

    proto, _ = one_node("Relu", [rng.standard_normal((5, 7)).astype(np.float32)])
    path = tmp_path / "relu.onnx"
    onnx.save(proto, path)
    assert main(["inspect", str(path), "--backend", "gpu-compute"]) == 0
    assert "peak device memory of the plan" in capsys.readouterr().out


def test_errors_are_engine_errors(monkeypatch, rng):
    with pytest.raises(BackendUnavailableError, match="GPU_COMPUTE unavailable"):
        Worker(_chain(rng, ["Relu"]), GPU, adapter="no-such-adapter-anywhere")
    from engine.backends.gpu_compute import GpuComputeBackend
    from engine.backends.gpu_compute.pipelines import Program

    backend = GpuComputeBackend()
    monkeypatch.setattr(Program, "source", lambda self: "fn main( {")  # invalid WGSL
    with pytest.raises(GPUError, match="compiling compute shader"):
        backend.pipelines.get(Program.of("unary.wgsl", T="f32", U="f32", expr="x + 123.0"))
    backend.close()


def test_wgpu_errors_become_actionable_engine_errors():
    import wgpu

    from engine.backends.gpu_common import gpu_errors

    with pytest.raises(GPUError, match="ran out of memory allocating.*CPU backend"):
        with gpu_errors("allocating 1 TiB"):
            raise wgpu.GPUOutOfMemoryError("Out of memory")
    with pytest.raises(GPUError, match="device was lost submitting.*new Worker"):
        with gpu_errors("submitting"):
            raise wgpu.GPUValidationError("Parent device is lost")
