"""The CPU run loop's per-layer thread choice (``thread_tuning``): the tuner's decisions on
timings it is given, the serial switch of the splitting helpers, and a tuned worker whose
results match NumPy in every phase of the tuning."""

from __future__ import annotations

import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import BackendType, ModelLoader, Worker
from engine.backends.cpu import thread_tuning as tt
from engine.backends.cpu import threads
from tests.test_cpu_kernels import ref_conv


def _marks(durations):
    """Run-loop marks (each step's start and end) for these step durations (s)."""
    marks, t = [], 0.0
    for d in durations:
        marks += [t, t + d]
        t += d + 1e-6
    return marks


def _drive(tuner, key, alone_us, split_us, runs=200, totals=None):
    """Run the tuner on synthetic step times: ``alone_us``/``split_us`` per step (or a
    function of the run's modes for whole-run totals); returns the modes of each run."""
    seen = []
    n = len(alone_us)
    for _ in range(runs):
        modes = tuner.modes(key, n)
        seen.append(modes)
        per = [(alone_us[k] if modes is not None and modes[k] else split_us[k]) * 1e-6
               for k in range(n)]
        if totals is not None:  # a fixed whole-run time per kind of run
            per = [totals(modes) * 1e-6 / n] * n
        tuner.record(_marks(per))
        if tuner.final is not None:
            break
    return seen


def test_tuner_chooses_the_faster_side_per_layer():
    """Step 0 is faster alone, step 1 far faster split (settled early), step 2 tiny, step 3
    a tie (stays split); the mix wins its whole-run check and is kept."""
    tuner = tt.ThreadTuner()
    seen = _drive(tuner, ("k",), [80.0, 900.0, 1.0, 50.0], [100.0, 300.0, 1.2, 50.5])
    assert tuner.final == [True, False, False, False]
    assert tuner.modes(("k",), 4) == [True, False, False, False]
    # the warm-up runs are all split; the first run alone is untimed and repeated
    assert all(m is None for m in seen[:tt.SKIP]) and seen[tt.SKIP] == [False] * 4
    assert seen[tt.SKIP + 1] == seen[tt.SKIP + 2] == seen[tt.SKIP + 3] == [True] * 4
    # after two timed runs of each kind step 1 is settled split for the rest of the tuning
    assert all(m is None or not m[1] for m in seen[tt.SKIP + 7:])
    assert tuner.summary() == {"tuned": True, "alone": 1}


def test_tuner_keeps_all_split_when_the_mix_is_not_faster():
    """Per layer one step looks faster alone, but whole runs with the mix are slower: every
    layer stays split."""
    tuner = tt.ThreadTuner()
    alone, split = [80.0, 300.0], [100.0, 300.0]
    # per-layer tuning runs see the step times; then the whole-run check sees the mix slower
    state = {"verify": False}

    def totals(modes):
        return 500.0 if modes is not None else 400.0

    for _ in range(100):
        modes = tuner.modes(("k",), 2)
        if tuner.mix is not None:
            state["verify"] = True
        if state["verify"]:
            per = [totals(modes) * 1e-6 / 2] * 2
        else:
            per = [(alone[k] if modes is not None and modes[k] else split[k]) * 1e-6
                   for k in range(2)]
        tuner.record(_marks(per))
        if tuner.final is not None:
            break
    assert state["verify"]
    assert tuner.final == [False, False]
    assert tuner.modes(("k",), 2) is None


def test_tuner_settles_without_a_check_when_nothing_runs_alone():
    tuner = tt.ThreadTuner()
    _drive(tuner, ("k",), [500.0, 2.0], [100.0, 2.1])
    assert tuner.final == [False, False] and tuner.mix is None
    assert tuner.modes(("k",), 2) is None


def test_tuner_starts_again_for_new_inputs():
    tuner = tt.ThreadTuner()
    _drive(tuner, ("a",), [80.0], [100.0])
    assert tuner.final == [True]
    assert tuner.modes(("b",), 1) is None  # a new key: warming up again, split first
    assert tuner.final is None
    _drive(tuner, ("b",), [120.0], [100.0])
    assert tuner.final == [False]


@pytest.fixture
def two_threads():
    """At least two threads, whatever the machine has (restored after the test)."""
    before = threads.threads()
    threads.set_threads(max(2, before))
    yield
    threads.set_threads(before)


def test_inputs_that_never_repeat_run_split():
    tuner = tt.ThreadTuner()
    for i in range(50):
        assert tuner.modes(("shape", i), 3) is None
        tuner.record(_marks([1e-4, 2e-4, 3e-4]))


def test_signatures_fed_in_turn_are_tuned_each():
    """Two input shapes alternating: each keeps its own tuning (a layer alone wins for one,
    loses for the other)."""
    tuner = tt.ThreadTuner()
    times = {("a",): ([80.0], [100.0]), ("b",): ([130.0], [100.0])}
    finals = {}
    for i in range(400):
        key = ("a",) if i % 2 else ("b",)
        modes = tuner.modes(key, 1)
        alone, split = times[key]
        tuner.record(_marks([(alone[0] if modes and modes[0] else split[0]) * 1e-6]))
        if tuner.final is not None:
            finals[key] = tuner.final
        if len(finals) == 2:
            break
    assert finals == {("a",): [True], ("b",): [False]}


def test_serial_switch_keeps_splits_on_the_calling_thread(two_threads):
    caller = threading.get_ident()
    seen = set()
    lock = threading.Lock()

    def chunk(lo, hi):
        with lock:
            seen.add(threading.get_ident())

    a = np.ones((512, 512), np.float32)
    out = np.empty_like(a)
    threads.set_serial(True)
    try:
        threads.parallel_for(chunk, 64)
        threads.matmul(a, a, out, after=lambda r0, r1, c0, c1: chunk(r0, r1))
    finally:
        threads.set_serial(False)
    assert seen == {caller}
    np.testing.assert_allclose(out, a @ a)


def _conv_model(path, rng):
    """Two convolutions and a Relu: layers big enough to split."""
    w1 = rng.standard_normal((32, 8, 3, 3)).astype(np.float32) * 0.2
    w2 = rng.standard_normal((16, 32, 1, 1)).astype(np.float32) * 0.2
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 40, 40])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 40, 40])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return w1, w2


def test_worker_results_hold_through_the_tuning(rng, tmp_path, monkeypatch, two_threads):
    """Every run, tuning or tuned, matches the float64 reference; with fast thresholds the
    tuning ends and its choice is applied."""
    monkeypatch.setattr(tt, "SKIP", 2)
    monkeypatch.setattr(tt, "RUNS", 8)
    monkeypatch.setattr(tt, "VERIFY", 4)
    path = str(tmp_path / "m.onnx")
    w1, w2 = _conv_model(path, rng)
    worker = Worker(ModelLoader.load(path), BackendType.CPU)
    try:
        for _ in range(30):
            x = rng.standard_normal((1, 8, 40, 40)).astype(np.float32)
            want = ref_conv(np.maximum(ref_conv(x, w1, None, [1, 1], [1, 1, 1, 1], [1, 1], 1),
                                       0), w2, None, [1, 1], [0, 0, 0, 0], [1, 1], 1)
            got = worker.schedule({"x": x}).peek_output("y").download_to_array()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        assert not worker._cpu_tuning()
        assert worker._tuner.final is not None and len(worker._tuner.final) >= 2
    finally:
        worker.close()
    assert not threads._serial  # the loop leaves the switch off


def _marks_gap(durations, gap):
    """``_marks`` with ``gap`` seconds between steps (time a run spends outside them)."""
    marks, t = [], 0.0
    for d in durations:
        marks += [t, t + d]
        t += d + gap
    return marks


def _drive_gaps(tuner, n, alone_s, split_s, gap_alone, gap_split, runs=300):
    """Each step takes ``alone_s`` alone, ``split_s`` split; a run whose layers all run
    alone spends ``gap_alone`` between steps, any other ``gap_split``. Returns the modes
    of each run."""
    seen = []
    for _ in range(runs):
        modes = tuner.modes(("k",), n)
        seen.append(modes)
        every = modes is not None and all(modes)
        per = [alone_s if modes is not None and modes[k] else split_s for k in range(n)]
        tuner.record(_marks_gap(per, gap_alone if every else gap_split))
        if tuner.final is not None:
            break
    return seen


def test_tuner_runs_every_layer_alone_when_whole_runs_are_faster_so():
    """Each layer is faster split, but runs with every layer alone are faster as a whole
    (the split layers lose more between them): the tuner keeps every layer alone."""
    tuner = tt.ThreadTuner()
    seen = _drive_gaps(tuner, 3, 110e-6, 100e-6, 10e-6, 80e-6)
    assert tuner.final == [True, True, True]
    assert tuner.modes(("k",), 3) == [True, True, True]
    # the per-layer runs alone (and the untimed first one), then half the whole-run check
    assert seen.count([True, True, True]) == tt.RUNS // 2 + 1 + tt.VERIFY // 2


def test_tuner_keeps_split_when_every_layer_alone_is_slower():
    """Runs with every layer alone are slower as a whole: no check of them, all split."""
    tuner = tt.ThreadTuner()
    seen = _drive_gaps(tuner, 3, 200e-6, 100e-6, 10e-6, 80e-6)
    assert tuner.final == [False, False, False] and tuner.modes(("k",), 3) is None
    # the untimed first run alone and two timed ones, then every layer settles split (alone
    # over CLEAR x split); no whole-run check of them all alone
    assert seen.count([True, True, True]) == 3


def test_tuner_without_the_whole_run_check(monkeypatch):
    monkeypatch.setattr(tt, "TRY_ALL_ALONE", False)
    tuner = tt.ThreadTuner()
    _drive_gaps(tuner, 3, 110e-6, 100e-6, 10e-6, 80e-6)
    assert tuner.final == [False, False, False]
