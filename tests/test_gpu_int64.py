"""int64 on GPU_COMPUTE: Cast to and from int64 and comparisons of int64 tensors, against NumPy.

int64 elements are two 32-bit words on the device. Comparisons and int32/float32 -> int64
are exact over the whole range; int64 -> int32 keeps the low word (NumPy's wrap-around);
int64 -> float32 is exact up to 2^24, correctly rounded in the int32 range, and within one
float32 step beyond it.
"""

import numpy as np
import pytest
from onnx import TensorProto, helper

from engine import BackendType, ModelLoader, Worker, families

ONNX_TYPE = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32,
             np.dtype(np.int64): TensorProto.INT64, np.dtype(bool): TensorProto.BOOL,
             np.dtype(np.uint32): TensorProto.UINT32}


def _run_one(op, feeds, out_dtype, **attrs):
    """Run a one-node model on GPU_COMPUTE; assert it ran natively; return its output."""
    names = list(feeds)
    inputs = [helper.make_tensor_value_info(n, ONNX_TYPE[a.dtype], list(a.shape))
              for n, a in feeds.items()]
    shape = np.broadcast_shapes(*(a.shape for a in feeds.values()))
    out = helper.make_tensor_value_info("y", ONNX_TYPE[np.dtype(out_dtype)], list(shape))
    node = helper.make_node(op, names, ["y"], name="node", **attrs)
    graph = helper.make_graph([node], "g", inputs, [out])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model = ModelLoader.load(proto.SerializeToString())
    with Worker(model, "gpu-compute") as worker:
        worker.schedule(feeds)
        got = worker.peek_output("y").download_to_array()
        placed = worker.placement["node"]
        assert placed.backend is BackendType.GPU_COMPUTE, placed.reason
    return got


def _wide_int64(rng, shape, pool=None):
    """Negative and positive int64 around several multiples of 2^32, low words on both sides
    of 2^31 (so both words matter); ``pool`` values per word make ties likely."""
    high = rng.integers(-3, 4, size=shape) if pool is None else rng.choice(pool, size=shape)
    lows = np.array([0, 1, 7, 2**31 - 1, 2**31, 2**31 + 5, 2**32 - 1], np.int64)
    low = rng.choice(lows, size=shape) if pool is not None else \
        rng.integers(0, 2**32, size=shape)
    return (high.astype(np.int64) << 32) + low


@pytest.mark.gpu
def test_cast_int64_to_float32_and_int32(require_gpu, rng):
    small = rng.integers(-2**31, 2**31, size=(3, 50))
    tiny = rng.integers(-2**24, 2**24, size=(3, 50))
    wide = _wide_int64(rng, (3, 50))
    x = np.concatenate([small, tiny, wide, [[0, -1, 1, 2**31 - 1, -2**31] * 10]]) \
        .astype(np.int64)
    got = _run_one("Cast", {"x": x}, np.float32, to=TensorProto.FLOAT)
    want = x.astype(np.float32)
    in_i32 = (x >= -2**31) & (x < 2**31)
    np.testing.assert_array_equal(got[in_i32], want[in_i32])
    np.testing.assert_allclose(got, want, rtol=2.0**-23, atol=0)
    got = _run_one("Cast", {"x": x}, np.int32, to=TensorProto.INT32)
    np.testing.assert_array_equal(got, x.astype(np.int32))  # low word, like NumPy


@pytest.mark.gpu
def test_cast_to_int64_is_exact(require_gpu, rng):
    i = np.concatenate([rng.integers(-2**31, 2**31, size=200), [0, -1, 2**31 - 1, -2**31]])
    got = _run_one("Cast", {"x": i.astype(np.int32)}, np.int64, to=TensorProto.INT64)
    np.testing.assert_array_equal(got, i.astype(np.int64))
    # fractions truncate toward zero; beyond int32 every float32 is an integer
    f = np.concatenate([rng.normal(0, 1e3, 100), rng.normal(0, 1e9, 100),
                        rng.normal(0, 1e17, 100) * rng.choice([1, -1], 100),
                        [0.5, -0.5, -1.5, 2.0**31, -2.0**31, 2.0**32, -2.0**32 - 512,
                         2.0**62, -2.0**62]]).astype(np.float32)
    got = _run_one("Cast", {"x": f}, np.int64, to=TensorProto.INT64)
    np.testing.assert_array_equal(got, f.astype(np.int64))


@pytest.mark.gpu
def test_cast_int64_to_and_from_bool_and_uint32(require_gpu, rng):
    x = _wide_int64(rng, (5, 8), np.array([-1, 0, 0, 1], np.int64))
    x[0, :4] = 0
    for dtype in (bool, np.uint32):
        got = _run_one("Cast", {"x": x}, dtype, to=ONNX_TYPE[np.dtype(dtype)])
        np.testing.assert_array_equal(got, x.astype(dtype))
    for src in (rng.random(30) < 0.5, rng.integers(0, 2**32, 30, dtype=np.uint32)):
        got = _run_one("Cast", {"x": src}, np.int64, to=TensorProto.INT64)
        np.testing.assert_array_equal(got, src.astype(np.int64))


@pytest.mark.gpu
@pytest.mark.parametrize("op,fn", [("Equal", np.equal), ("Less", np.less),
                                   ("Greater", np.greater), ("LessOrEqual", np.less_equal),
                                   ("GreaterOrEqual", np.greater_equal)])
@pytest.mark.parametrize("shape_a,shape_b", [((4, 6), (4, 6)), ((3, 1, 5), (4, 1)),
                                             ((2, 3), ()), ((1,), (2, 5))])
def test_int64_comparisons(op, fn, shape_a, shape_b, require_gpu, rng):
    pool = np.array([-2, -1, 0, 1], np.int64)
    a = _wide_int64(rng, shape_a, pool)
    b = _wide_int64(rng, shape_b, pool)
    got = _run_one(op, {"a": a, "b": b}, bool)
    want = fn(a, b)
    assert got.dtype == np.bool_ and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
def test_bert_family_runs_every_layer_on_gpu_compute(require_gpu):
    name = "bert_encoder"
    model = ModelLoader.load(families.path(name))
    feeds = families.get(name).inputs("test", 0)
    with Worker(model, "gpu-compute") as worker:
        worker.schedule(feeds)
        for o in model.outputs:
            worker.peek_output(o.name).download_to_array()
        fallbacks = {n: p.reason for n, p in worker.placement.items()
                     if p.reason and p.reason.startswith("fallback")}
    assert not fallbacks, fallbacks
