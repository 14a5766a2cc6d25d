"""GPU_PIXEL replay: a plan's recorded render passes, replayed in later runs of its signature,
give the same results as the normal path and as onnxruntime on fresh inputs; a new
signature re-plans; value-dependent plans, captures and fallbacks keep the normal path."""

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
from engine.backends.gpu_pixel import rawpass, replay

pytestmark = pytest.mark.usefixtures("require_gpu")
PIXEL = BackendType.GPU_PIXEL


@pytest.mark.parametrize("raw", [True, False], ids=["raw-passes", "public-api"])
@pytest.mark.parametrize("name", ["mobilenet_small", "encoder_small"])
def test_replay_matches_normal_path_and_onnxruntime(rng, name, raw, monkeypatch):
    if not raw:
        monkeypatch.setattr(rawpass, "NATIVE", None)
    proto = getattr(builders(), name)(**({"size": 16} if name == "mobilenet_small" else
                                          {"seq": 8}))
    m = ModelLoader.from_proto(proto)
    shape = tuple(d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim)
    with Worker(m, PIXEL) as fast, Worker(m, PIXEL, replay=False) as slow:
        for _ in range(4):
            x = rng.standard_normal(shape).astype(np.float32)
            got, want = run_once(fast, {"input": x}), run_once(slow, {"input": x})
            np.testing.assert_array_equal(got, want)
            (ref,) = ort_run(proto, {"input": x})
            np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)
        assert replay_status(fast) == "replayed", fast._backend.replay_status
        assert not slow._backend.replay_status
        (rep,) = fast._backend._replays._by_sig.values()
        assert rep.ring[0][2].raw == raw
        profile = fast.last_profile
    # the first replayed run reads its pass timestamps; later ones repeat them
    gpu = [t for t in profile.layers if t.source.startswith("gpu-timestamp")]
    assert len(gpu) >= len(m.layers) // 2 and all(t.ms >= 0 for t in gpu)
    assert all(t.source == SAMPLED for t in gpu)


def test_a_new_signature_is_planned_and_replayed_on_its_own(rng):
    proto = builders().encoder_small(seq="seq", layers=1)
    m = ModelLoader.from_proto(proto)
    with Worker(m, PIXEL) as worker:
        for seq in (8, 16, 8, 8, 16, 4, 16, 8):
            x = rng.standard_normal((1, seq, 64)).astype(np.float32)
            got = run_once(worker, {"input": x})
            assert got.shape == (1, seq, 64)
            np.testing.assert_allclose(got, ort_run(proto, {"input": x})[0],
                                       rtol=1e-3, atol=1e-4)
        status = worker._backend.replay_status
    # recorded at a signature's second run: seq 4, seen once, has no replay
    assert len(status) == 2 and set(status.values()) == {"replayed"}, status
    assert {sig[0][1] for sig in status} == {(1, 8, 64), (1, 16, 64)}


def test_held_outputs_keep_their_values(rng):
    """Outputs of earlier runs still held are never overwritten by later replays; released
    ones are drawn into again."""
    proto = builders().mobilenet_small(size=16)
    m = ModelLoader.from_proto(proto)
    with Worker(m, PIXEL) as worker:
        xs = [rng.standard_normal((1, 3, 16, 16)).astype(np.float32) for _ in range(6)]
        held = []
        for x in xs:
            worker.schedule({"input": x})
            held.append(worker.peek_output())
        for x, t in zip(xs, held):
            (ref,) = ort_run(proto, {"input": x})
            np.testing.assert_allclose(t.download_to_array(), ref, rtol=1e-3, atol=1e-4)
        (rep,) = worker._backend._replays._by_sig.values()
        assert len(rep.ring) == replay.RING
        del held, t
        for x in xs:
            np.testing.assert_allclose(run_once(worker, {"input": x}),
                                       ort_run(proto, {"input": x})[0], rtol=1e-3, atol=1e-4)
        assert len(rep.ring) == replay.RING


def test_value_dependent_plans_keep_the_normal_path(rng):
    """Clip bounds given as inputs are read by the kernel (or computed on the CPU): the plan
    is never replayed, and every run is right."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Clip", ["r", "lo", "hi"], ["c"]),
             helper.make_node("Tanh", ["c"], ["y"])]
    proto = model(nodes, [("x", F, [4, 6]), ("lo", F, []), ("hi", F, [])], [("y", F, [4, 6])])
    m = ModelLoader.from_proto(proto)
    with Worker(m, PIXEL) as worker:
        for lo, hi in ((0.1, 0.5), (0.3, 0.9), (0.0, 2.0), (0.1, 0.5)):
            feeds = {"x": rng.standard_normal((4, 6)).astype(np.float32),
                     "lo": np.array(lo, np.float32), "hi": np.array(hi, np.float32)}
            np.testing.assert_allclose(run_once(worker, feeds), ort_run(proto, feeds)[0],
                                       rtol=1e-5, atol=1e-6)
        assert replay_status(worker) != "replayed", replay_status(worker)


def test_integer_inputs_are_converted_each_replayed_run(rng):
    """Gather's indices arrive as int64 host arrays the kernel converts to float32: the
    replay repeats the conversion with each run's indices."""
    table = rng.standard_normal((10, 8)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["g"], axis=0),
             helper.make_node("Relu", ["g"], ["y"])]
    proto = model(nodes, [("ids", I64, [2, 5])], [("y", F, [2, 5, 8])], [("table", table)])
    m = ModelLoader.from_proto(proto)
    with Worker(m, PIXEL) as worker:
        for _ in range(5):
            feeds = {"ids": rng.integers(0, 10, (2, 5)).astype(np.int64)}
            np.testing.assert_array_equal(run_once(worker, feeds), ort_run(proto, feeds)[0])
        assert replay_status(worker) == "replayed", replay_status(worker)


def test_captures_and_fallbacks_use_the_normal_path(rng):
    proto = builders().mobilenet_small(size=16)
    m = ModelLoader.from_proto(proto)
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    (ref,) = ort_run(proto, {"input": x})
    convs = [layer.name for layer in m.layers if layer.op_type == "Conv"]
    with Worker(m, PIXEL) as worker:
        for _ in range(3):
            worker.schedule({"input": x}, capture=[m.layers[3].outputs[0]])
            np.testing.assert_allclose(worker.peek_output().download_to_array(), ref,
                                       rtol=1e-3, atol=1e-4)
            assert worker.peek_output(m.layers[3].outputs[0]).download_to_array().size
        assert not worker._backend.replay_status
    # a CPU layer computing on GPU results: not replayed
    with Worker(m, PIXEL, placement_overrides={convs[1]: BackendType.CPU}) as worker:
        for _ in range(3):
            np.testing.assert_allclose(run_once(worker, {"input": x}), ref, rtol=1e-3, atol=1e-4)
        assert "computes on values made on the GPU" in replay_status(worker)
    # a CPU layer computing on the input only (the host prefix): replayed, run each time
    with Worker(m, PIXEL, placement_overrides={convs[0]: BackendType.CPU}) as worker:
        for _ in range(4):
            x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
            np.testing.assert_allclose(run_once(worker, {"input": x}),
                                       ort_run(proto, {"input": x})[0], rtol=1e-3, atol=1e-4)
        assert replay_status(worker) == "replayed"


def test_outputs_outlive_the_worker(rng):
    proto = builders().mobilenet_small(size=16)
    m = ModelLoader.from_proto(proto)
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    with Worker(m, PIXEL) as worker:
        for _ in range(3):
            run_once(worker, {"input": x})
        worker.schedule({"input": x})
        out = worker.peek_output()  # a replayed run's output, not read yet
        run_once(worker, {"input": x})
        assert replay_status(worker) == "replayed"
    np.testing.assert_allclose(out.download_to_array(), ort_run(proto, {"input": x})[0],
                               rtol=1e-3, atol=1e-4)


def test_raw_passes_are_version_checked(monkeypatch):
    import wgpu

    assert rawpass.raw_available() == (wgpu.__version__ in rawpass.RAW_VERSIONS)
    monkeypatch.setattr(wgpu, "__version__", "0.0.1")
    assert rawpass._native() is None


def test_family_with_host_prefix_and_mid_run_submit(rng):
    """bert at (1, 128): its attention mask is reshaped and cast on the CPU (the host prefix,
    run again by each replayed run), and a CPU layer reading a GPU-made index vector submits
    in the middle of the run, after which a texture is written again."""
    from engine import families

    fam = families.get("bert_encoder")
    m = ModelLoader.load(families.path("bert_encoder"))
    with Worker(m, PIXEL) as fast, Worker(m, PIXEL, replay=False) as slow:
        for _ in range(4):
            feeds = fam.inputs("bench", rng)
            feeds["attention_mask"][0, rng.integers(64, 128):] = 0  # padding changes too
            np.testing.assert_array_equal(run_once(fast, feeds), run_once(slow, feeds))
        assert replay_status(fast) == "replayed", fast._backend.replay_status
        (rep,) = fast._backend._replays._by_sig.values()
        assert rep.prefix


@pytest.mark.parametrize("raw", [True, False], ids=["raw-passes", "public-api"])
def test_lstm_copies_replay_in_order_with_the_passes(rng, raw, monkeypatch):
    """crnn's LSTM copies each step's state into its history texture between passes."""
    from engine import families

    if not raw:
        monkeypatch.setattr(rawpass, "NATIVE", None)
    fam = families.get("crnn_recognizer")
    m = ModelLoader.load(families.path("crnn_recognizer"))
    with Worker(m, PIXEL) as fast, Worker(m, PIXEL, replay=False) as slow:
        for _ in range(4):
            feeds = fam.inputs("test", rng)
            np.testing.assert_array_equal(run_once(fast, feeds), run_once(slow, feeds))
        assert replay_status(fast) == "replayed", fast._backend.replay_status
        (rep,) = fast._backend._replays._by_sig.values()
        items = rep.ring[0][2].passes
        assert any(item[0] is None for item in items) and rep.ring[0][2].raw == raw


def test_fixed_values_are_written_once(rng):
    """Resize uploads index tables fixed by the signature: a replay writes them once into
    textures of its own; a run writes its input only."""
    scales = np.array([1, 1, 2, 2], np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Resize", ["r", "", "scales"], ["z"], mode="nearest"),
             helper.make_node("Resize", ["z", "", "scales"], ["z2"], mode="linear"),
             helper.make_node("Sigmoid", ["z2"], ["y"])]
    proto = model(nodes, [("x", F, [1, 4, 5, 6])], [("y", F, [1, 4, 20, 24])],
                  [("scales", scales)])
    m = ModelLoader.from_proto(proto)
    with Worker(m, PIXEL) as worker:
        for _ in range(4):
            feeds = {"x": rng.standard_normal((1, 4, 5, 6)).astype(np.float32)}
            np.testing.assert_allclose(run_once(worker, feeds), ort_run(proto, feeds)[0],
                                       rtol=1e-5, atol=1e-6)
        assert replay_status(worker) == "replayed"
        (rep,) = worker._backend._replays._by_sig.values()
        assert [feed[0] for _, feed in rep.writes] == ["x"]


@pytest.mark.parametrize("backend", [PIXEL, BackendType.GPU_COMPUTE])
def test_if_on_an_input_replays_the_branch_it_recorded(rng, backend):
    """audio_streaming's If takes a branch from ``sr == 16000`` (computed on the CPU): runs
    taking the recorded branch are replayed, the others take the normal path."""
    from engine import families

    fam = families.get("audio_streaming")
    m = ModelLoader.load(families.path("audio_streaming"))
    proto = onnx.load(families.path("audio_streaming"))
    with Worker(m, backend) as worker:
        for sr in (16000, 16000, 16000, 32000, 16000, 32000, 32000):
            feeds = fam.inputs("bench", rng)
            feeds["sr"] = np.array(sr, np.int64)
            worker.schedule(feeds)
            got = [worker.peek_output(o.name).download_to_array() for o in m.outputs]
            want = ort_run(proto, feeds)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4)
        assert replay_status(worker) == "replayed", worker._backend.replay_status
        (rep,) = worker._backend._replays._by_sig.values()
        assert [taken for _, taken in rep.guards] == [True]


@pytest.mark.parametrize("raw", [True, False], ids=["raw-passes", "public-api"])
def test_multi_target_convolutions_replay(rng, raw, monkeypatch):
    """Convolutions whose fragments write several colour targets (and the column copies that
    assemble them) are recorded and replayed like single-target passes."""
    if not raw:
        monkeypatch.setattr(rawpass, "NATIVE", None)
    proto = builders().mobilenet_small(size=32)
    m = ModelLoader.from_proto(proto)
    shape = tuple(d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim)
    with Worker(m, PIXEL) as fast, Worker(m, PIXEL, replay=False) as slow:
        for _ in range(4):
            x = rng.standard_normal(shape).astype(np.float32)
            feeds = {"input": x}
            np.testing.assert_array_equal(run_once(fast, feeds), run_once(slow, feeds))
        assert replay_status(fast) == "replayed", fast._backend.replay_status
        played = next(iter(fast._backend._replays._by_sig.values()))
        assert any(ev[0] == "draw" and len(ev) > 6 for ev in played.events)
        assert any(ev[0] == "copy" and len(ev) > 5 for ev in played.events)
