"""GPU_COMPUTE's two strided copies: runs of 64 elements per invocation (CPU adapters) and
one element per invocation (GPUs), each forced with ENGINE_GPU_COPY, through the movement
ops built on them, against NumPy; run twice so the second run replays its recording (where
plain buffer copies become copy dispatches too)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker

pytestmark = pytest.mark.usefixtures("require_gpu")


def _graph(x, nodes, inits, out_shape, elem=TensorProto.FLOAT):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", elem, list(x.shape))],
        [helper.make_tensor_value_info("y", elem, list(out_shape))],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _cases(x):
    starts = np.array([1, 0, 7], np.int64)
    ends = np.array([3, 5, 1], np.int64)
    axes = np.array([0, 1, 3], np.int64)
    steps = np.array([1, 2, -2], np.int64)
    return [
        ("transpose_nhwc", [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])],
         {}, x.transpose(0, 2, 3, 1)),
        ("transpose_all", [helper.make_node("Transpose", ["x"], ["y"], perm=[3, 1, 0, 2])],
         {}, x.transpose(3, 1, 0, 2)),
        ("concat", [helper.make_node("Concat", ["x", "c"], ["y"], axis=1)],
         {"c": np.arange(np.prod(x.shape), dtype=x.dtype).reshape(x.shape) * 0.5},
         np.concatenate([x, np.arange(np.prod(x.shape), dtype=x.dtype)
                         .reshape(x.shape) * 0.5], axis=1)),
        ("slice", [helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])],
         {"s": starts, "e": ends, "a": axes, "t": steps}, x[1:3, 0:5:2, :, 7:1:-2]),
        ("tile", [helper.make_node("Tile", ["x", "r"], ["y"])],
         {"r": np.array([1, 2, 1, 3], np.int64)}, np.tile(x, (1, 2, 1, 3))),
        ("expand", [helper.make_node("Slice", ["x", "s1", "e1", "a1"], ["t"]),
                    helper.make_node("Expand", ["t", "shp"], ["y"])],
         {"s1": np.array([0], np.int64), "e1": np.array([1], np.int64),
          "a1": np.array([1], np.int64), "shp": np.array([3, 4, 1, 1], np.int64)},
         np.broadcast_to(x[:, :1], (3, 4) + x.shape[2:])),
    ]


@pytest.mark.parametrize("strategy", ["runs", "elements"])
@pytest.mark.parametrize("case", range(6))
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_movement_ops(case, strategy, dtype, rng, monkeypatch):
    monkeypatch.setenv("ENGINE_GPU_COPY", strategy)  # read when the backend is created
    x = (rng.standard_normal((3, 5, 6, 9)) * 100).astype(dtype)
    name, nodes, inits, want = _cases(x)[case]
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.INT64
    proto = _graph(x, nodes, {k: (v.astype(dtype) if k == "c" else v)
                              for k, v in inits.items()}, want.shape, elem)
    with Worker(ModelLoader.from_proto(proto), "gpu-compute") as worker:
        for _ in range(2):
            x = (rng.standard_normal(x.shape) * 100).astype(dtype)
            _, _, _, want = _cases(x)[case]
            if name == "concat":
                want = np.concatenate([x, inits["c"].astype(dtype)], axis=1)
            got = worker.schedule({"x": x}).peek_output("y").download_to_array()
            np.testing.assert_array_equal(got, want, err_msg=name)
        assert {t.backend for t in worker.last_profile.layers} == {"gpu-compute"}


@pytest.mark.parametrize("shape,perm,blocks", [
    ((2, 8, 12, 4), (0, 2, 3, 1), True),     # NCHW -> NHWC: [8, 48] per image
    ((2, 12, 4, 8), (0, 3, 1, 2), True),     # NHWC -> NCHW
    ((1, 3, 20, 16), (0, 1, 3, 2), True),    # K -> K^T per head
    ((12, 8), (1, 0), True),                 # one matrix
    ((1, 3, 19, 16), (0, 1, 3, 2), False),   # 19 rows: the strided copy
    ((2, 4, 6, 8), (0, 2, 1, 3), False),     # whole rows move: not a matrix transpose
])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, bool])
def test_matrix_transposes_move_4x4_blocks(shape, perm, blocks, dtype, rng):
    """Batched transposes of matrices whose sides are multiples of 4 go through
    transpose4.wgsl, bit-exactly; other shapes and 64-bit elements keep the strided copy."""
    elem = {np.float32: TensorProto.FLOAT, np.int32: TensorProto.INT32,
            bool: TensorProto.BOOL}[dtype]
    x = rng.standard_normal(shape) * 100
    want_shape = np.transpose(x, perm).shape
    proto = _graph(x, [helper.make_node("Transpose", ["x"], ["y"], perm=list(perm))], {},
                   want_shape, elem)
    with Worker(ModelLoader.from_proto(proto), "gpu-compute") as worker:
        backend, programs = worker._backend, []
        original = backend.dispatch
        backend.dispatch = lambda program, *a, **k: (programs.append(program.path),
                                                     original(program, *a, **k))
        for _ in range(2):  # the second run replays the first
            x = rng.standard_normal(shape) * 100
            x = (x > 0) if dtype is bool else x.astype(dtype)
            got = worker.schedule({"x": x}).peek_output("y").download_to_array()
            np.testing.assert_array_equal(got, np.transpose(x, perm))
    assert ("transpose4.wgsl" in programs) == blocks, programs
