"""GPU_COMPUTE runs that will replay, scheduled while no earlier run of the worker is
pending, write large inputs from the caller's arrays at once instead of copying them first
(``Worker._written_feeds``). Each run must still compute on the values its caller passed:
whatever the caller does with its arrays after ``schedule`` returns, and whether the earlier
runs' GPU work is still executing."""

from __future__ import annotations

import time

import numpy as np
import pytest
from modelgen import F, model
from onnx import helper

from engine import ModelLoader, Worker
from engine.backends import BackendType
from engine.backends.gpu_compute import replay as compute_replay
from engine.backends.gpu_compute import replay_submit

pytestmark = pytest.mark.usefixtures("require_gpu")
GPU = BackendType.GPU_COMPUTE
SHAPE = (512, 260)  # two inputs of 532 KB: above DIRECT_WRITE_BYTES together


def _two_inputs(shape=SHAPE):
    """y = a * b + a (intermediate ``ab``) on inputs of ``shape`` (dims may be named)."""
    nodes = [helper.make_node("Mul", ["a", "b"], ["ab"]),
             helper.make_node("Add", ["ab", "a"], ["y"])]
    return ModelLoader.from_proto(model(nodes, [("a", F, list(shape)), ("b", F, list(shape))],
                                        [("y", F, list(shape))]))


def _until_replayed(worker, rng) -> None:
    """Three runs read back: recorded at the second, replayed from the third."""
    for _ in range(3):
        worker.schedule({"a": rng.standard_normal(SHAPE).astype(np.float32),
                         "b": rng.standard_normal(SHAPE).astype(np.float32)})
        worker.peek_output("y").download_to_array()


def _want(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) * b + a).astype(np.float32)


@pytest.fixture
def direct(monkeypatch):
    """How many runs had their inputs written from the caller's thread."""
    count = [0]
    real = compute_replay.Replays.write_now

    def counted(self, sig, arrays):
        got = real(self, sig, arrays)
        count[0] += got is not None
        return got

    monkeypatch.setattr(compute_replay.Replays, "write_now", counted)
    return count


@pytest.mark.parametrize("raw", [True, False], ids=["native", "public-api"])
def test_arrays_changed_after_schedule_do_not_change_the_run(rng, direct, raw, monkeypatch):
    if not raw:
        monkeypatch.setattr(replay_submit, "NATIVE", None)
    m = _two_inputs()
    with Worker(m, GPU) as worker:
        for run in range(8):
            a = rng.standard_normal(SHAPE).astype(np.float32)
            b = rng.standard_normal(SHAPE).astype(np.float32)
            want = _want(a, b)
            worker.schedule({"a": a, "b": b})
            tensor = worker.peek_output("y")
            a[...], b[...] = rng.standard_normal(SHAPE), np.nan  # the caller reuses them
            np.testing.assert_allclose(tensor.download_to_array(), want, rtol=1e-5, atol=1e-6,
                                       err_msg=f"run {run}")
    # recorded at the second run, replayed from the third: the later runs wrote directly
    assert direct[0] >= 4, direct


def test_runs_back_to_back_each_see_their_own_inputs(rng, direct):
    """Runs scheduled without reading, some right after the last (its job still pending:
    copied), some after a pause (the engine idle, the GPU maybe still busy: written at
    once); all outputs read at the end."""
    m = _two_inputs()
    with Worker(m, GPU) as worker:
        _until_replayed(worker, rng)
        held = []
        for k in range(24):
            if k % 3 == 0:
                time.sleep(0.02)
            a = rng.standard_normal(SHAPE).astype(np.float32)
            b = rng.standard_normal(SHAPE).astype(np.float32)
            worker.schedule({"a": a, "b": b})
            held.append((_want(a, b), worker.peek_output("y")))
            a[...] = 0.0
        for k, (want, tensor) in enumerate(held):
            np.testing.assert_allclose(tensor.download_to_array(), want, rtol=1e-5, atol=1e-6,
                                       err_msg=f"run {k}")
    assert direct[0] >= 1, direct


def test_new_shapes_and_captures_take_the_checked_copy(rng, direct):
    """A signature without a replay yet, or a run capturing intermediates, copies its
    inputs as before; the values are right either way."""
    m = _two_inputs(("n", 4160))
    with Worker(m, GPU) as worker:
        for n in (64, 64, 64, 64, 70, 64, 70):
            a = rng.standard_normal((n, 4160)).astype(np.float32)
            b = rng.standard_normal((n, 4160)).astype(np.float32)
            want, before = _want(a, b), direct[0]
            capture = ["ab"] if n == 70 else None
            worker.schedule({"a": a, "b": b}, capture=capture)
            if n == 70:  # (never replayed: captured runs take the normal path)
                assert direct[0] == before
                np.testing.assert_allclose(worker.peek_output("ab").download_to_array(),
                                           a * b, rtol=1e-6)
            a[...] = np.nan
            np.testing.assert_allclose(worker.peek_output("y").download_to_array(), want,
                                       rtol=1e-5, atol=1e-6)
        assert direct[0] >= 1, direct


def test_a_run_scheduled_layer_by_layer_keeps_its_inputs(rng, direct):
    """A schedule_iterable run not yet at its end: a schedule meanwhile copies its inputs
    (the iterated run has yet to use the input buffers); both runs get their own values."""
    m = _two_inputs()
    with Worker(m, GPU) as worker:
        _until_replayed(worker, rng)
        a1, b1 = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
        steps = worker.schedule_iterable({"a": a1, "b": b1})
        first = worker.peek_output("y")
        before = direct[0]
        a2, b2 = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
        worker.schedule({"a": a2, "b": b2})
        assert direct[0] == before
        second = worker.peek_output("y")
        for _ in steps:
            pass
        np.testing.assert_allclose(first.download_to_array(), _want(a1, b1), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(second.download_to_array(), _want(a2, b2), rtol=1e-5,
                                   atol=1e-6)


def test_small_inputs_are_copied(rng, direct):
    """Below DIRECT_WRITE_BYTES the inputs are checked and copied (cheaper than the
    direct path's calls); the values are right."""
    from engine.worker import DIRECT_WRITE_BYTES

    small = (8, 40)
    assert 2 * 4 * small[0] * small[1] < DIRECT_WRITE_BYTES
    m = _two_inputs(small)
    with Worker(m, GPU) as worker:
        for _ in range(6):
            a = rng.standard_normal(small).astype(np.float32)
            b = rng.standard_normal(small).astype(np.float32)
            want = _want(a, b)
            worker.schedule({"a": a, "b": b})
            a[...] = np.nan
            np.testing.assert_allclose(worker.peek_output("y").download_to_array(), want,
                                       rtol=1e-5, atol=1e-6)
    assert direct[0] == 0
