"""The engine thread's queue: order, and blocked readers running stealable jobs themselves."""

from __future__ import annotations

import threading

import numpy as np
from onnx import TensorProto, helper

from engine import ModelLoader, Worker, executor


def test_blocked_reader_runs_the_next_stealable_job_itself():
    me = threading.get_ident()
    engine_id = executor.call(threading.get_ident)
    engine = executor._get_engine()
    with engine.cond:  # the engine thread cannot take a job while this thread holds its lock
        fut = executor.submit(threading.get_ident, stealable=True)
        executor.help_until(fut)
        assert fut.result(timeout=0) == me != engine_id
        # inside a taken-over job, engine calls run inline instead of waiting on the thread
        fut = executor.submit(lambda: executor.call(threading.get_ident), stealable=True)
        executor.help_until(fut)
        assert fut.result(timeout=0) == me
        bound = executor.submit(threading.get_ident)  # not stealable: left to the engine
        executor.help_until(bound)
        assert not bound.done()
    assert bound.result(timeout=10) == engine_id
    assert not executor.on_engine_thread()


def test_jobs_keep_their_order_and_the_busy_engine_is_not_overtaken():
    gate = threading.Event()
    order = []
    first = executor.submit(lambda: gate.wait(10) and order.append("first"))
    second = executor.submit(lambda: order.append("second"), stealable=True)
    executor.help_until(second)  # the engine is busy with `first`: nothing is taken
    assert not second.done()
    gate.set()
    second.result(timeout=10)
    assert first.done() and order == ["first", "second"]


def test_a_stealable_job_nobody_waits_for_runs_on_the_engine_after_the_grace():
    engine_id = executor.call(threading.get_ident)
    # an asynchronous caller (the workbench polls) never helps: the engine thread, which
    # leaves such a job to its submitter for STEAL_GRACE_S, must then run it itself
    futs = [executor.submit(threading.get_ident, stealable=True) for _ in range(3)]
    assert [f.result(timeout=10) for f in futs] == [engine_id] * 3


def test_queueing_a_stealable_job_leaves_the_idle_engine_asleep_until_announced():
    """A stealable job does not wake the engine thread (its submitter usually runs it
    next); the engine finds it by itself within IDLE_POLL_S, or at once when announced."""
    import time

    engine_id = executor.call(threading.get_ident)
    time.sleep(0.01)  # the engine thread is asleep on its queue
    t0 = time.perf_counter()
    fut = executor.submit(threading.get_ident, stealable=True)
    assert fut.result(timeout=10) == engine_id
    waited = time.perf_counter() - t0
    assert waited >= executor.STEAL_GRACE_S
    assert waited < executor.IDLE_POLL_S + 5.0  # found by the poll (generous: shared CI)
    time.sleep(0.01)
    engine = executor._get_engine()
    with engine.cond:  # queued while the engine thread sits in its untimed-looking wait
        fut = executor.submit(threading.get_ident, stealable=True)
    executor.announce()
    assert fut.result(timeout=10) == engine_id


def test_a_thread_bound_job_at_the_head_is_never_taken():
    engine_id = executor.call(threading.get_ident)
    gate = threading.Event()
    blocker = executor.submit(gate.wait, 10)
    bound = executor.submit(threading.get_ident)  # not stealable: must run on the engine
    after = executor.submit(threading.get_ident, stealable=True)
    gate.set()
    blocker.result(timeout=10)
    executor.help_until(after)
    assert bound.result(timeout=10) == engine_id
    after.result(timeout=10)


def test_cpu_runs_read_synchronously_match_numpy(rng):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "x"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])])
    model = ModelLoader.from_proto(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)]))
    with Worker(model, "cpu") as worker:
        for n in (1, 5, 3):
            x = rng.normal(size=(n, 8)).astype(np.float32)
            got = worker.schedule({"x": x}).peek_output().download_to_array()
            np.testing.assert_array_equal(got, np.maximum(x, 0) * x)
        # several runs queued before any read: each read gets its own run's values
        xs = [rng.normal(size=(2, 8)).astype(np.float32) for _ in range(4)]
        outs = [worker.schedule({"x": x}).peek_output() for x in xs]
        for x, out in zip(xs, outs):
            np.testing.assert_array_equal(out.download_to_array(), np.maximum(x, 0) * x)
