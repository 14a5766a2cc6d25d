"""GPU_PIXEL replay: recorded passes (multi-target convolutions and their column copies
included), replayed in later runs of a signature, give the normal path's results."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from modelgen import ort_run

from engine import ModelLoader, Worker
from engine.backends import BackendType

pytestmark = pytest.mark.usefixtures("require_gpu")
PIXEL = BackendType.GPU_PIXEL


def _builders():
    path = os.path.join(os.path.dirname(__file__), "..", "scripts", "host_cost_models.py")
    spec = importlib.util.spec_from_file_location("host_cost_models", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(worker, feeds):
    worker.schedule(feeds)
    return worker.peek_output().download_to_array()


@pytest.mark.parametrize("name", ["mobilenet_small", "encoder_small"])
def test_pixel_replay_matches_normal_path_and_onnxruntime(rng, name):
    proto = getattr(_builders(), name)(**({"size": 32} if name == "mobilenet_small" else {}))
    m = ModelLoader.from_proto(proto)
    shape = tuple(d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim)
    with Worker(m, PIXEL) as fast, Worker(m, PIXEL, replay=False) as slow:
        for _ in range(4):
            x = rng.standard_normal(shape).astype(np.float32)
            got, want = _run(fast, {"input": x}), _run(slow, {"input": x})
            np.testing.assert_array_equal(got, want)
            (ref,) = ort_run(proto, {"input": x})
            np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)
        assert list(fast._backend.replay_status.values()) == ["replayed"], \
            fast._backend.replay_status
        if name == "mobilenet_small":  # convolutions writing several targets were replayed
            replay = next(iter(fast._backend._replays._by_sig.values()))
            assert any(ev[0] == "draw" and len(ev) > 6 for ev in replay.events)
