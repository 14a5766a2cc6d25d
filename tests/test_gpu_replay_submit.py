"""GPU_COMPUTE replays submitted with direct wgpu-native calls (gpu_common/native.py) and
through wgpu-py's public API (when the native calls are not available) give the normal
path's results, with several inputs written per run; only the native path samples
per-layer timestamps."""

from __future__ import annotations

import numpy as np
import pytest
from modelgen import ort_run
from replay_util import builders, replay_status, run_once

from engine import ModelLoader, Worker, families
from engine.backends import BackendType
from engine.backends.gpu_common.native import NATIVE, RAW_VERSIONS
from engine.backends.gpu_compute import replay_submit

pytestmark = pytest.mark.usefixtures("require_gpu")
GPU = BackendType.GPU_COMPUTE


@pytest.mark.parametrize("raw", [True, False], ids=["native", "public-api"])
def test_replay_submission_matches_normal_path(rng, raw, monkeypatch):
    if raw:
        # the native route exists exactly for the wgpu versions it was checked against;
        # with another version the public-API route (the other case) is what runs
        import wgpu

        assert (NATIVE is not None) == (wgpu.__version__ in RAW_VERSIONS)
    if not raw:
        monkeypatch.setattr(replay_submit, "NATIVE", None)
    proto = builders().mobilenet_small(size=32)
    m = ModelLoader.from_proto(proto)
    shape = tuple(d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim)
    with Worker(m, GPU) as fast, Worker(m, GPU, replay=False) as slow:
        for _ in range(4):
            x = rng.standard_normal(shape).astype(np.float32)
            got = run_once(fast, {"input": x})
            np.testing.assert_array_equal(got, run_once(slow, {"input": x}))
            np.testing.assert_allclose(got, ort_run(proto, {"input": x})[0], rtol=1e-3,
                                       atol=1e-4)
        assert replay_status(fast) == "replayed", fast._backend.replay_status
        (rep,) = fast._backend._replays._by_sig.values()
        native = raw and NATIVE is not None
        assert (rep._submitter._raw_run is not None) == native
        assert rep._submitter.stamps == native


def test_replay_writes_every_input_each_run(rng):
    """audio_streaming: four inputs (one computed on the host) and three outputs a run."""
    fam = families.get("audio_streaming")
    m = ModelLoader.load(families.path("audio_streaming"))
    with Worker(m, GPU) as fast, Worker(m, GPU, replay=False) as slow:
        for _ in range(4):
            feeds = fam.inputs("bench", rng)
            for w in (fast, slow):
                w.schedule(feeds)
            for o in m.outputs:
                np.testing.assert_array_equal(fast.peek_output(o.name).download_to_array(),
                                              slow.peek_output(o.name).download_to_array())
        assert replay_status(fast) == "replayed", fast._backend.replay_status
