"""The Worker/Tensor contract of the README on the CPU backend: deferred results, readback,
schedule_iterable, profiles, outputs by name, lifetime and input errors.

Pending states are shown deterministically by holding the engine thread with a gate
(a job that waits on an Event): while it is closed no layer can run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest
from modelgen import I64, F, model
from onnx import helper

from engine import EngineError, InputError, KernelError, ModelLoader, Tensor, Worker, executor

UNARY = ["Sin", "Cos", "Tanh", "Abs", "Sigmoid"]
NP = {"Sin": np.sin, "Cos": np.cos, "Tanh": np.tanh, "Abs": np.abs,
      "Sigmoid": lambda v: 1 / (1 + np.exp(-v))}


def chain_model(n: int = 30, shape=(256, 1024)):
    """x -> n unary layers -> y, plus a second output ``shape_of_x`` (int64)."""
    nodes = [helper.make_node(UNARY[i % 5], ["x" if i == 0 else f"t{i}"], [f"t{i + 1}"],
                              name=f"l{i}") for i in range(n)]
    nodes += [helper.make_node("Identity", [f"t{n}"], ["y"], name="out"),
              helper.make_node("Shape", ["x"], ["shape_of_x"], name="shape")]
    proto = model(nodes, [("x", F, ["N", shape[1]])],
                  [("y", F, ["N", shape[1]]), ("shape_of_x", I64, [2])])
    return ModelLoader.load(proto.SerializeToString()), n


def chain_ref(x: np.ndarray, n: int) -> np.ndarray:
    for i in range(n):
        x = NP[UNARY[i % 5]](x).astype(np.float32)
    return x


@contextmanager
def engine_gate():
    """Hold the engine thread until the block exits (or ``gate.set()`` is called)."""
    gate = threading.Event()
    started = threading.Event()

    def hold():
        started.set()
        gate.wait(30)

    executor.submit(hold)
    started.wait(30)
    try:
        yield gate
    finally:
        gate.set()


def _wait(pred, timeout=30.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.002)


@pytest.fixture(scope="module")
def chain():
    return chain_model()


def test_schedule_returns_before_the_work_is_done(chain, rng):
    m, n = chain
    x = rng.standard_normal((256, 1024)).astype(np.float32)
    with Worker(m) as w, engine_gate() as gate:
        assert w.schedule(x) is w
        out = w.peek_output()
        assert not out.is_scheduled and "pending" in repr(out)
        out.readback_request()
        for _ in range(5):
            assert not out.is_readback_request_done()
        gate.set()
        _wait(out.is_readback_request_done)
        np.testing.assert_allclose(out.download_to_array(), chain_ref(x, n), rtol=1e-5,
                                   atol=1e-6)


def test_polling_sees_pending_then_done_on_a_big_model(chain, rng):
    m, n = chain
    x = rng.standard_normal((256, 1024)).astype(np.float32)
    with Worker(m) as w:
        w.schedule({"x": x})
        out = w.peek_output("y")
        out.readback_request()
        pending_polls = 0
        while not out.is_readback_request_done():
            pending_polls += 1
            time.sleep(0.001)
        assert pending_polls >= 1
        np.testing.assert_allclose(out.readback_and_clone().download_to_array(),
                                   chain_ref(x, n), rtol=1e-5, atol=1e-6)


def test_readback_after_done_needs_no_engine_work(chain, rng):
    m, n = chain
    x = rng.standard_normal((3, 1024)).astype(np.float32)
    with Worker(m) as w:
        out = w.schedule(x).peek_output()
        out.readback_request()
        _wait(out.is_readback_request_done)
        with engine_gate():  # the engine thread is busy: a blocking readback would hang
            clone = out.readback_and_clone()
            arr = out.download_to_array()
        assert isinstance(clone, Tensor) and clone.is_readback_request_done()
        np.testing.assert_array_equal(clone.download_to_array(), arr)
        arr[...] = 0  # a copy: the tensor keeps its data
        assert np.any(out.download_to_array() != 0)


def test_readback_and_clone_async_does_not_block_the_loop(chain, rng):
    m, n = chain
    x = rng.standard_normal((8, 1024)).astype(np.float32)

    async def main(w):
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        with engine_gate() as gate:
            out = w.schedule(x).peek_output()
            task = asyncio.ensure_future(out.readback_and_clone_async())
            t = asyncio.ensure_future(ticker())
            await asyncio.sleep(0.05)
            assert not task.done() and ticks > 3
            gate.set()
            clone = await asyncio.wait_for(task, 30)
            t.cancel()
        return clone

    with Worker(m) as w:
        clone = asyncio.run(main(w))
    np.testing.assert_allclose(clone.download_to_array(), chain_ref(x, n), rtol=1e-5, atol=1e-6)


def test_download_to_array_shape_and_dtype(chain, rng):
    m, _ = chain
    x = rng.standard_normal((5, 1024)).astype(np.float32)
    with Worker(m) as w:
        w.schedule(x)
        y = w.peek_output("y").download_to_array()
        s = w.peek_output("shape_of_x").download_to_array()
    assert isinstance(y, np.ndarray) and y.shape == (5, 1024) and y.dtype == np.float32
    assert s.dtype == np.int64 and s.tolist() == [5, 1024]
    assert w.peek_output("y").shape == (5, 1024) and w.peek_output("y").dtype == np.float32


def test_schedule_iterable_yields_each_layer_in_order(chain, rng):
    m, n = chain
    x = rng.standard_normal((4, 1024)).astype(np.float32)
    with Worker(m) as w:
        it = w.schedule_iterable(x)
        first = [next(it) for _ in range(3)]
        out = w.peek_output()
        out.readback_request()
        assert not out.is_readback_request_done()  # only three layers have run
        rest = list(it)
        assert [layer.name for layer in first + rest] == [layer.name for layer in m.layers]
        np.testing.assert_allclose(out.download_to_array(), chain_ref(x, n), rtol=1e-5,
                                   atol=1e-6)
        # an abandoned iteration fails its outputs instead of leaving them pending forever
        it = w.schedule_iterable(x)
        next(it)
        it.close()
        with pytest.raises(EngineError, match="abandoned"):
            w.peek_output().download_to_array()


def test_last_profile(chain, rng):
    m, _ = chain
    with Worker(m) as w:
        assert w.last_profile is None
        w.schedule(rng.standard_normal((2, 1024)).astype(np.float32))
        w.peek_output().download_to_array()
        prof = w.last_profile
    assert [t.name for t in prof.layers] == [layer.name for layer in m.layers]
    assert all(t.ms >= 0 and t.backend == "cpu" for t in prof.layers)
    assert prof.total_ms >= prof.layer_ms() > 0
    assert set(prof.by_op_type()) == {layer.op_type for layer in m.layers}


def test_last_profile_is_the_run_whose_outputs_were_read(chain, rng):
    """The profile is published before the outputs, so reading it right after a run's
    outputs gives that run's; its records are built once, when first read."""
    m, _ = chain
    with Worker(m) as w:
        totals = []
        for rows in (1, 64, 1, 64):
            w.schedule(rng.standard_normal((rows, 1024)).astype(np.float32))
            w.peek_output().download_to_array()
            prof = w.last_profile
            assert prof is w.last_profile
            assert [t.name for t in prof.layers] == [layer.name for layer in m.layers]
            totals.append(prof)
        assert len({id(p) for p in totals}) == 4


def test_peek_output_by_name_and_errors(chain, rng):
    m, _ = chain
    with Worker(m) as w:
        with pytest.raises(EngineError, match="nothing has been scheduled"):
            w.peek_output()
        w.schedule(rng.standard_normal((2, 1024)).astype(np.float32))
        assert w.peek_output().name == "y" and w.peek_output("shape_of_x").name == "shape_of_x"
        with pytest.raises(EngineError, match="'nope'.*'y', 'shape_of_x'"):
            w.peek_output("nope")


def test_queued_runs_keep_their_own_outputs(chain, rng):
    m, n = chain
    xs = [rng.standard_normal((2, 1024)).astype(np.float32) for _ in range(3)]
    with Worker(m) as w, engine_gate():
        outs = [w.schedule(x).peek_output() for x in xs]
    for x, out in zip(xs, outs):
        np.testing.assert_allclose(out.download_to_array(), chain_ref(x, n), rtol=1e-5,
                                   atol=1e-6)


def test_tensor_output_feeds_another_worker(chain, rng):
    m, n = chain
    x = rng.standard_normal((2, 1024)).astype(np.float32)
    with Worker(m) as a, Worker(m) as b:
        y = a.schedule(x).peek_output()
        z = b.schedule(y).peek_output().download_to_array()
    np.testing.assert_allclose(z, chain_ref(chain_ref(x, n), n), rtol=1e-5, atol=1e-6)


def test_context_manager_closes(chain, rng):
    m, _ = chain
    with Worker(m) as w:
        pass
    with pytest.raises(EngineError, match="closed"):
        w.schedule(rng.standard_normal((2, 1024)).astype(np.float32))


def test_kernel_failure_names_the_layer_and_the_worker_goes_on(rng):
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshaper")]
    m = ModelLoader.load(model(nodes, [("x", F, [6]), ("s", I64, [2])],
                               [("y", F, [None, None])]).SerializeToString())
    x = rng.standard_normal(6).astype(np.float32)
    with Worker(m) as w:
        w.schedule({"x": x, "s": np.array([4, 4], np.int64)})
        with pytest.raises(KernelError, match="reshaper"):
            w.peek_output().download_to_array()
        w.schedule({"x": x, "s": np.array([2, 3], np.int64)})
        np.testing.assert_array_equal(w.peek_output().download_to_array(), x.reshape(2, 3))


def test_a_failed_run_fails_every_output_and_its_shape_queries(rng):
    """A CPU run's outputs share the run's one future: each output, read as data or asked
    for its shape, raises the layer's error; the next run's outputs are whole again."""
    nodes = [helper.make_node("Shape", ["x"], ["n"], name="shape"),
             helper.make_node("Reshape", ["x", "s"], ["y"], name="reshaper"),
             helper.make_node("Neg", ["x"], ["z"], name="neg")]
    m = ModelLoader.load(model(nodes, [("x", F, [6]), ("s", I64, [2])],
                               [("n", I64, [1]), ("y", F, [None, None]), ("z", F, [6])])
                         .SerializeToString())
    x = rng.standard_normal(6).astype(np.float32)
    with Worker(m) as w:
        w.schedule({"x": x, "s": np.array([4, 4], np.int64)})
        outs = [w.peek_output(name) for name in ("n", "y", "z")]
        for out in outs:
            with pytest.raises(KernelError, match="reshaper"):
                out.download_to_array()
            with pytest.raises(KernelError, match="reshaper"):
                _ = out.shape
            assert out.is_scheduled and "failed: KernelError" in repr(out)
        w.schedule({"x": x, "s": np.array([3, 2], np.int64)})
        assert w.peek_output("y").shape == (3, 2)
        np.testing.assert_array_equal(w.peek_output("n").download_to_array(), [6])
        np.testing.assert_array_equal(w.peek_output("y").download_to_array(), x.reshape(3, 2))
        np.testing.assert_array_equal(w.peek_output("z").download_to_array(), -x)
        with pytest.raises(KernelError):
            outs[2].download_to_array()  # the failed run's tensors keep their error


def test_inputs_accepted_before_are_still_copied_and_new_ones_checked(chain, rng):
    """A run on arrays of the dtypes and shapes the last run accepted skips the checks, not
    the copy; other arrays are checked in full again."""
    m, n = chain
    x = rng.standard_normal((3, 1024)).astype(np.float32)
    with Worker(m) as w:
        w.schedule({"x": x}).peek_output("y").download_to_array()
        with engine_gate():
            w.schedule({"x": x})  # accepted before: the fast path
            want = chain_ref(x.copy(), n)
            x[:] = 7.0  # after schedule: the queued run must not see it
        np.testing.assert_allclose(w.peek_output("y").download_to_array(), want, rtol=1e-5,
                                   atol=1e-6)
        with pytest.raises(InputError, match="'x' expects dtype float32, got float64"):
            w.schedule({"x": x.astype(np.float64)})
        with pytest.raises(InputError, match="unknown input 'z'"):
            w.schedule({"z": x})
        with pytest.raises(InputError, match="expects a NumPy array"):
            w.schedule({"x": x.tolist()})


def test_input_errors_name_input_expected_and_given(chain):
    m, _ = chain
    with Worker(m) as w:
        with pytest.raises(InputError, match=r"'x' expects shape \[N, 1024\], got \[2, 5\]"):
            w.schedule(np.zeros((2, 5), np.float32))
        with pytest.raises(InputError, match="'x' expects dtype float32, got float16"):
            w.schedule(np.zeros((2, 1024), np.float16))
        with pytest.raises(InputError, match="missing input 'x'"):
            w.schedule({})
        with pytest.raises(InputError, match="unknown input 'z'"):
            w.schedule({"x": np.zeros((2, 1024), np.float32), "z": np.zeros(1)})
        with pytest.raises(InputError, match="'x' expects shape"):
            w.schedule_iterable(np.zeros((2, 5), np.float32))  # checked before iterating
