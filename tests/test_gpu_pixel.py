"""GPU_PIXEL: texture layout, deferred results and readback, timings, the zoo vs onnxruntime."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import onnx
import pytest
from onnx import helper

from engine import BackendType, ModelLoader, Worker, zoo
from engine.backends.gpu_pixel.layout import fit_reason, layout_of, pack, unpack
from tests.modelgen import F, model, ort_run


@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (2, 5, 3, 7), (1, 3, 1, 2, 5),
                                   (1, 2, 3, 4, 5, 6)])
def test_pack_unpack_roundtrip_and_zero_padding(shape, rng):
    a = np.asarray(rng.standard_normal(shape), dtype=np.float32)
    texels = pack(a)
    lay = layout_of(shape)
    assert texels.shape == (lay.height, lay.width, 4)
    np.testing.assert_array_equal(unpack(texels, shape), a)
    # every component beyond the real elements is zero (kernels rely on it)
    assert np.count_nonzero(texels) == np.count_nonzero(a)


def test_nchw_texel_address(rng):
    a = rng.standard_normal((2, 6, 3, 5)).astype(np.float32)
    texels = pack(a)
    n, c, h, w = 1, 5, 2, 4
    # texel (x = w, y = (n * ceil(C / 4) + c // 4) * H + h), component c % 4
    assert texels[(n * 2 + c // 4) * 3 + h, w, c % 4] == a[n, c, h, w]


def test_fit_reason_limits():
    assert fit_reason((1, 64, 112, 112), 16384) is None
    assert "texel limit" in fit_reason((100000,), 16384)
    assert "empty" in fit_reason((3, 0), 16384)
    assert "rank" in fit_reason((1,) * 7, 16384)


def _chain(shape):
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["b"]),
             helper.make_node("Mul", ["b", "x"], ["y"])]
    return model(nodes, [("x", F, list(shape))], [("y", F, list(shape))])


def _expected(x):
    return (1 / (1 + np.exp(-np.maximum(x, 0)))) * x


@pytest.mark.usefixtures("require_gpu")
def test_deferred_results_poll_and_readback(rng):
    m = ModelLoader.from_proto(_chain((2, 5, 9, 7)))
    x1 = rng.standard_normal((2, 5, 9, 7)).astype(np.float32)
    with Worker(m, BackendType.GPU_PIXEL) as w:
        assert all(p.backend is BackendType.GPU_PIXEL for p in w.placement.values())
        w.schedule(x1)
        out = w.peek_output()
        out.readback_request()
        deadline = time.time() + 60
        while not out.is_readback_request_done():
            assert time.time() < deadline, "readback never completed"
            time.sleep(0.001)
        t0 = time.perf_counter()
        cpu = out.readback_and_clone()
        assert time.perf_counter() - t0 < 0.5  # already there: no wait
        np.testing.assert_allclose(cpu.download_to_array(), _expected(x1), rtol=1e-5, atol=1e-6)
        assert cpu.backend_type is BackendType.CPU


@pytest.mark.usefixtures("require_gpu")
def test_back_to_back_schedules_and_async_readback(rng):
    m = ModelLoader.from_proto(_chain((3, 7)))
    xs = [rng.standard_normal((3, 7)).astype(np.float32) for _ in range(3)]
    with Worker(m, BackendType.GPU_PIXEL) as w:
        outs = []
        for x in xs:  # nothing waits between schedules
            w.schedule(x)
            outs.append(w.peek_output())

        async def read_all():
            return [await o.readback_and_clone_async() for o in outs]

        got = asyncio.run(read_all())
        for x, t in zip(xs, got):
            np.testing.assert_allclose(t.download_to_array(), _expected(x), rtol=1e-5, atol=1e-6)
        assert outs[0].backend_type is BackendType.GPU_PIXEL


@pytest.mark.usefixtures("require_gpu")
def test_profile_uses_render_pass_timestamps(rng):
    m = ModelLoader.from_proto(_chain((1, 8, 16, 16)))
    with Worker(m, BackendType.GPU_PIXEL) as w:
        w.schedule(rng.standard_normal((1, 8, 16, 16)).astype(np.float32))
        w.peek_output().download_to_array()
        prof = w.last_profile
    assert prof is not None and len(prof.layers) == 3
    assert {t.source for t in prof.layers} == {"gpu-timestamp"}
    assert all(t.ms >= 0 for t in prof.layers) and prof.total_ms > 0


@pytest.mark.usefixtures("require_gpu")
def test_fallback_layer_between_gpu_layers(rng):
    # Cast is not a GPU_PIXEL kernel: its input is read back, its output uploaded again
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Cast", ["a"], ["b"], to=onnx.TensorProto.DOUBLE),
             helper.make_node("Cast", ["b"], ["c"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Neg", ["c"], ["y"])]
    m = ModelLoader.from_proto(model(nodes, [("x", F, [2, 7])], [("y", F, [2, 7])]))
    x = rng.standard_normal((2, 7)).astype(np.float32)
    with Worker(m, BackendType.GPU_PIXEL) as w:
        reasons = {n: p.reason for n, p in w.placement.items()}
        w.schedule(x)
        np.testing.assert_array_equal(w.peek_output().download_to_array(), -np.maximum(x, 0))
    assert sum(r.startswith("fallback") for r in reasons.values()) == 2


@pytest.mark.usefixtures("require_gpu")
@pytest.mark.parametrize("name", zoo.ZOO)
def test_zoo_matches_onnxruntime(name):
    path = zoo.build(name)
    m = ModelLoader.load(path)
    feeds = zoo.sample_input(m)
    expected = ort_run(onnx.load(path), feeds)[0]
    with Worker(m, BackendType.GPU_PIXEL) as w:
        native = sum(p.backend is BackendType.GPU_PIXEL for p in w.placement.values())
        w.schedule(feeds)
        got = w.peek_output().download_to_array()
    assert native >= 0.9 * len(m.layers), f"only {native} of {len(m.layers)} layers native"
    rel = np.linalg.norm(got - expected) / np.linalg.norm(expected)
    assert rel <= 1e-3, f"{name}: relative L2 {rel:.2e}"
