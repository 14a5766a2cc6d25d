"""bench's throughput and memory figures against what the model must do and hold."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker
from engine.bench_memory import engine_peak_bytes, model_flops, onnxruntime_peak_bytes


def _wide_model(rng, n=256, k=256, m=2048):
    """x[n, k] @ w[k, m] (a 2 MiB intermediate) reduced to [n, 1]."""
    w = rng.normal(size=(k, m)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("ReduceSum", ["h", "axes"], ["y"], keepdims=1)],
        "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, 1])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([1]), "axes")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), w


def test_flops_and_peak_of_a_run(rng):
    proto, w = _wide_model(rng)
    feeds = {"x": rng.normal(size=(256, 256)).astype(np.float32)}
    with Worker(ModelLoader.from_proto(proto), "cpu") as worker:
        worker.schedule(feeds).peek_output().download_to_array()
        flops = model_flops(worker)
        peak = engine_peak_bytes(worker, feeds, "y")
    assert 2 * 256 * 256 * 2048 <= flops <= 2 * 256 * 256 * 2048 + 3 * 256 * 2048
    intermediate = 256 * 2048 * 4
    assert w.nbytes + intermediate <= peak <= w.nbytes + 4 * intermediate


def test_onnxruntime_peak_is_measured_in_a_fresh_process(rng, tmp_path):
    proto, w = _wide_model(rng)
    path = str(tmp_path / "wide.onnx")
    onnx.save(proto, path)
    peak = onnxruntime_peak_bytes(path, {"x": rng.normal(size=(256, 256)).astype(np.float32)}, 1)
    assert peak is not None and peak >= w.nbytes


def test_peak_counts_what_kernels_keep_between_runs(rng):
    """A convolution's kept phase planes and a linear layer's packed weights are part of
    the reported memory, not only the heap peak of one run."""
    from engine.backends.cpu import conv_blocked
    from engine.bench_memory import cpu_kept_bytes

    wc = rng.normal(size=(32, 8, 3, 3)).astype(np.float32)
    wl = rng.normal(size=(40, 64)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "wc"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Reshape", ["c", "shape"], ["r"]),
         helper.make_node("MatMul", ["r", "wl"], ["y"])],
        "kept", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 40, 40])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1280, 64])],
        [numpy_helper.from_array(wc, "wc"), numpy_helper.from_array(wl, "wl"),
         numpy_helper.from_array(np.array([1280, 40], np.int64), "shape")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": rng.normal(size=(1, 8, 40, 40)).astype(np.float32)}
    with Worker(ModelLoader.from_proto(proto), "cpu") as worker:
        for _ in range(3):
            y = worker.schedule(feeds).peek_output().download_to_array()
        kept = cpu_kept_bytes(worker.model)
        plan = worker.model.layers[0]._cpu_conv_plan
        assert plan.kind == "blocked"
        planes = plan.blk.xf.nbytes
        assert planes >= 8 * 42 * 42 * 4
        # the planes and the weights packed into 32-column panels (64 columns: two)
        assert kept == planes + 40 * 64 * 4
        peak = engine_peak_bytes(worker, feeds, "y")
    weights = wc.nbytes + wl.nbytes + 16
    assert weights + kept + y.nbytes <= peak
    assert conv_blocked.REUSE_PLANES
