"""LightFuture behaves as concurrent.futures.Future does, for everything the engine uses."""

import asyncio
import threading
import time
from concurrent.futures import CancelledError, Future, InvalidStateError, TimeoutError

import pytest

from engine.light_future import LightFuture


@pytest.mark.parametrize("cls", [Future, LightFuture])
def test_result_and_callbacks_match_the_standard_future(cls):
    f = cls()
    seen = []
    f.add_done_callback(lambda g: seen.append(("before", g.result())))
    assert not f.done() and not f.running() and not f.cancelled()
    assert f.set_running_or_notify_cancel() is True
    assert f.running()
    f.set_result(41)
    f.add_done_callback(lambda g: seen.append(("after", g.result())))
    assert f.done() and f.result() == 41 and f.exception() is None
    assert seen == [("before", 41), ("after", 41)]
    with pytest.raises(InvalidStateError):
        f.set_result(1)


@pytest.mark.parametrize("cls", [Future, LightFuture])
def test_exception_is_raised_by_result(cls):
    f = cls()
    f.set_exception(KeyError("k"))
    assert isinstance(f.exception(), KeyError)
    with pytest.raises(KeyError):
        f.result()


@pytest.mark.parametrize("cls", [Future, LightFuture])
def test_cancel_before_running(cls):
    f = cls()
    called = []
    f.add_done_callback(called.append)
    assert f.cancel() and f.cancelled() and f.done()
    assert called == [f]
    assert f.set_running_or_notify_cancel() is False
    with pytest.raises(CancelledError):
        f.result()
    g = cls()
    g.set_running_or_notify_cancel()
    assert g.cancel() is False


def test_a_thread_blocks_until_another_sets_the_result():
    f = LightFuture()
    with pytest.raises(TimeoutError):
        f.result(timeout=0.01)
    value = object()
    t = threading.Thread(target=lambda: (time.sleep(0.05), f.set_result(value)))
    t.start()
    assert f.result(timeout=10) is value
    t.join()


def test_many_waiters_and_a_racing_setter():
    for _ in range(50):
        f = LightFuture()
        got = []
        waiters = [threading.Thread(target=lambda f=f, got=got: got.append(f.result(timeout=10)))
                   for _ in range(4)]
        for w in waiters:
            w.start()
        f.set_result(7)
        for w in waiters:
            w.join()
        assert got == [7] * 4


def test_a_failing_callback_is_logged_not_raised(caplog):
    f = LightFuture()
    f.add_done_callback(lambda g: 1 / 0)
    f.set_result(3)
    assert f.result() == 3
    assert "callback" in caplog.text


def test_asyncio_can_await_it():
    f = LightFuture()

    async def main():
        threading.Timer(0.02, lambda: f.set_result("x")).start()
        return await asyncio.wrap_future(f)

    assert asyncio.run(main()) == "x"


def test_a_completed_future_has_its_result_and_calls_callbacks_at_once():
    f = LightFuture.completed([1, 2])
    seen = []
    f.add_done_callback(lambda g: seen.append(g.result()))
    assert f.done() and f.result() == [1, 2] and seen == [[1, 2]]
    with pytest.raises(InvalidStateError):
        f.set_result(0)
