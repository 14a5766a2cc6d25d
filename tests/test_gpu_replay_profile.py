"""The profile of a replayed GPU run: each layer's own time or an honest zero.

Layers that do no GPU work of their own in a replay (shape layers whose values the input
signature fixes, views) once each got an equal share of the run's host time, so a detector's
shape subgraph showed milliseconds per Reshape in the layer timings."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from modelgen import F, model, ort_run
from onnx import helper

from engine import ModelLoader, Worker
from engine.backends import BackendType
from engine.backends.gpu_common.replayed import FIXED, NO_STAMPS, PREFIX, REUSED, SAMPLED

pytestmark = pytest.mark.usefixtures("require_gpu")
BACKENDS = [BackendType.GPU_COMPUTE, BackendType.GPU_PIXEL]


def _sampled_profile(worker, feeds_of, outputs):
    """Run until replayed, wait for the sampled timestamps, run once more; the profile and
    the last run's outputs."""
    for _ in range(3):
        worker.schedule(feeds_of())
        [worker.peek_output(o).download_to_array() for o in outputs]
    (rep,) = worker._backend._replays._by_sig.values()
    assert rep._reading is not None, "the first replayed run should sample its timestamps"
    rep._reading.result(timeout=60)
    feeds = feeds_of()
    worker.schedule(feeds)
    got = [worker.peek_output(o).download_to_array() for o in outputs]
    return worker.last_profile, feeds, got


@pytest.mark.parametrize("backend", BACKENDS)
def test_shape_layers_and_views_take_no_time_in_a_replay(rng, backend):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape as exporters write a flatten: the
    shape layers are fixed by the signature (not run), the Reshape is a view; only the
    layers with dispatches have time, and they have their sampled GPU time."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["r", "shape"], ["flat"]),
             helper.make_node("Sigmoid", ["flat"], ["y"])]
    proto = model(nodes, [("x", F, ["batch", 3, 8, 8])], [("y", F, ["batch", 192])],
                  [("zero", np.array(0, np.int64)), ("zero1", np.array([0], np.int64)),
                   ("minus1", np.array([-1], np.int64))])
    m = ModelLoader.from_proto(proto)
    with Worker(m, backend) as worker:
        profile, feeds, (got,) = _sampled_profile(
            worker, lambda: {"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32)},
            ["y"])
    np.testing.assert_allclose(got, ort_run(proto, feeds)[0], rtol=1e-5, atol=1e-6)
    by = {t.name: t for t in profile.layers}
    shape_layers = [n.name for n in m.layers if n.op_type in ("Shape", "Gather", "Unsqueeze",
                                                             "Concat")]
    assert shape_layers, [n.op_type for n in m.layers]
    for name in shape_layers:
        assert by[name].source == FIXED and by[name].ms == 0.0, by[name]
    timed = [t for t in profile.layers if t.source == SAMPLED]
    assert {t.op_type for t in timed} >= {"Relu", "Sigmoid"}, profile.layers
    for t in profile.layers:
        assert t.source in (SAMPLED, FIXED, NO_STAMPS), t
        if t.source == NO_STAMPS:
            assert t.ms == 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_if_condition_layers_get_their_own_host_time(rng, backend):
    """audio_streaming's ``sr == 16000`` is computed on the CPU in a replayed run whose
    ``sr`` differs from the last run's (then that layer reports its own time) and kept
    otherwise (reported as not run); nothing reports a share of the run's host time."""
    from engine import families

    fam = families.get("audio_streaming")
    m = ModelLoader.load(families.path("audio_streaming"))
    proto = onnx.load(families.path("audio_streaming"))
    outputs = [o.name for o in m.outputs]
    with Worker(m, backend) as worker:
        profile, feeds, got = _sampled_profile(worker, lambda: fam.inputs("bench", rng),
                                               outputs)
        # the same sr as the run before: the condition is kept, not computed
        equal = [t for t in profile.layers if t.op_type == "Equal"]
        assert equal and all(t.source == REUSED and t.ms == 0 for t in equal), equal
        (rep,) = worker._backend._replays._by_sig.values()
        rep._memo._key = None  # (as if the last run's sr had been another)
        feeds = fam.inputs("bench", rng)
        worker.schedule(feeds)
        got = [worker.peek_output(o).download_to_array() for o in outputs]
        profile = worker.last_profile
    for g, w in zip(got, ort_run(proto, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4)
    equal = [t for t in profile.layers if t.op_type == "Equal"]
    assert equal and all(t.source == PREFIX and t.ms > 0 for t in equal), equal
    assert not [t for t in profile.layers if "host share" in t.source], profile.layers
    lstm = [t for t in profile.layers if t.op_type == "LSTM"]
    assert lstm and all(t.source == SAMPLED and t.ms > 0 for t in lstm), lstm


@pytest.mark.parametrize("backend", BACKENDS)
def test_kept_conditions_follow_the_inputs(rng, backend):
    """A replay keeps its host prefix's values only while the inputs the prefix reads repeat:
    a flag that changes from run to run (same branch, or the other one) gets its own
    condition each time, against onnxruntime."""
    nodes = [helper.make_node("Greater", ["flag", "half"], ["cond"]),
             helper.make_node("If", ["cond"], ["picked"],
                              then_branch=helper.make_graph(
                                  [helper.make_node("Relu", ["x"], ["t"])], "then", [],
                                  [helper.make_tensor_value_info("t", F, [2, 8])]),
                              else_branch=helper.make_graph(
                                  [helper.make_node("Sigmoid", ["x"], ["e"])], "else", [],
                                  [helper.make_tensor_value_info("e", F, [2, 8])])),
             helper.make_node("Mul", ["picked", "scale"], ["y"])]
    proto = model(nodes, [("x", F, [2, 8]), ("flag", F, []), ("scale", F, [])],
                  [("y", F, [2, 8])], [("half", np.array(0.5, np.float32))])
    m = ModelLoader.from_proto(proto)
    # the same flag for the recorded runs, then repeats and changes of either kind
    flags = [0.9, 0.9, 0.9, 0.9, 0.7, 0.7, 0.2, 0.9, 0.95, 0.95, 0.1, 0.9]
    with Worker(m, backend) as worker:
        for flag in flags:
            feeds = {"x": rng.standard_normal((2, 8)).astype(np.float32),
                     "flag": np.array(flag, np.float32),
                     "scale": np.array(rng.uniform(0.5, 2.0), np.float32)}
            worker.schedule(feeds)
            got = worker.peek_output("y").download_to_array()
            np.testing.assert_allclose(got, ort_run(proto, feeds)[0], rtol=1e-5, atol=1e-6,
                                       err_msg=f"flag {flag}")
        assert set(worker._backend.replay_status.values()) == {"replayed"}, \
            worker._backend.replay_status
