"""The engine thread: one long-lived thread that runs every scheduled job in order.

All backend calls happen on it, which keeps wgpu's objects on one owner thread
and Numba's parallel regions from being entered by two threads at once.
``schedule`` only puts a job in its queue, so it returns before the work is done.

A job submitted as ``stealable`` (CPU runs and CPU readbacks: nothing in them is tied to a
thread) may instead be run by a thread that blocks on its result while the engine thread
is idle and the job is next in line (``help_until``). Order and mutual exclusion are kept:
one job runs at a time, always the head of the queue. A synchronous caller then pays no
thread hand-off (two per run and read, ~50-100 us here), which is most of a tiny model's
latency. Queueing a stealable job does not wake the engine thread either: woken, it takes
the GIL while the submitter runs the job, and each such collision put one of them to sleep
for tens of microseconds (a tiny speech model: 236 -> 150 us a run). The engine thread
finds such a job when it next looks, at the latest after ``IDLE_POLL_S``, or at once when
an asynchronous read asks for it (``announce``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from engine.errors import EngineError
from engine.light_future import LightFuture

_lock = threading.Lock()
_engine: _Engine | None = None
_local = threading.local()
#: bumped by ``cancel_pending``: jobs submitted before it end at once instead of running
_epoch = 0
#: the engine thread leaves a stealable job this long to the thread that submitted it: a
#: synchronous caller reaches ``help_until`` within microseconds, and when the engine thread
#: won that race instead the caller paid two thread wake-ups (~100 us on a tiny model); an
#: asynchronous caller's job starts this much later, on the engine thread
STEAL_GRACE_S = 0.0005
#: longest an idle engine thread sleeps before it looks at its queue unasked: the latest a
#: stealable job that nobody waits for and nobody announced starts
IDLE_POLL_S = 0.05


class _Job:
    __slots__ = ("future", "fn", "args", "epoch", "stealable", "submitted")

    def __init__(self, fn: Callable[..., Any], args: tuple, stealable: bool,
                 future: LightFuture | None = None):
        self.future: Future = LightFuture() if future is None else future
        self.fn, self.args, self.epoch, self.stealable = fn, args, _epoch, stealable
        self.submitted = time.perf_counter()

    def run(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            return
        if self.epoch != _epoch:
            self.future.set_exception(EngineError(
                "cancelled: the work was still queued when the program stopped"))
            return
        try:
            result = self.fn(*self.args)
        except BaseException as exc:  # noqa: BLE001 - delivered to whoever waits
            if not self.future.done():
                self.future.set_exception(exc)
            if not isinstance(exc, Exception):
                # Ctrl-C (or exit) in a job a blocked thread took over: it stops that
                # thread's program, not just this job
                raise
        else:
            self.future.set_result(result)


class _Engine:
    def __init__(self):
        # the Condition's own (re-entrant) lock, entered directly on the hot paths: ``with
        # self.cond`` runs Condition.__enter__/__exit__ in Python (three pairs a run of a
        # small model)
        self.mutex = threading.RLock()
        self.cond = threading.Condition(self.mutex)
        self.queue: deque[_Job] = deque()
        self.busy = False
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, name="engine")
        self.thread.start()

    def submit(self, job: _Job) -> Future:
        with self.mutex:
            if self.stopping:
                raise RuntimeError("the engine thread has stopped (the program is exiting)")
            self.queue.append(job)
            if not job.stealable:  # (see the module docstring)
                self.cond.notify_all()
        return job.future

    def announce(self) -> None:
        """Wake the engine thread for queued jobs: someone waits for them without helping."""
        with self.mutex:
            if self.queue:
                self.cond.notify_all()

    def _take(self, block: bool, stealing: bool) -> _Job | None:
        with self.mutex:
            while block and not self.stopping:
                if self.busy or not self.queue:
                    self.cond.wait(IDLE_POLL_S)
                    continue
                head = self.queue[0]
                left = head.submitted + STEAL_GRACE_S - time.perf_counter() \
                    if head.stealable else 0.0
                if left <= 0.0:
                    break
                self.cond.wait(left)  # the submitter may take it over meanwhile
            if self.busy or not self.queue or (stealing and not self.queue[0].stealable):
                return None
            self.busy = True
            return self.queue.popleft()

    def _done(self) -> None:
        with self.mutex:
            self.busy = False
            self.cond.notify_all()

    def _loop(self) -> None:
        _local.engine = True
        while True:
            job = self._take(block=True, stealing=False)
            if job is None:
                if self.stopping:
                    return
                continue
            try:
                job.run()
            finally:
                self._done()

    def help_until(self, future: Future) -> None:
        was = getattr(_local, "engine", False)
        while not future.done():
            taken = False
            try:
                with self.mutex:
                    if self.busy or not self.queue or not self.queue[0].stealable:
                        return
                    job = self.queue.popleft()
                    self.busy = taken = True
                _local.engine = True
                job.run()
            finally:
                # plain stores first: a Ctrl-C landing in here must not leave the queue
                # marked busy (the engine thread would never run another job)
                if taken:
                    _local.engine = was
                    self.busy = False
                    # an empty queue has nothing to wake the engine for; a job queued after
                    # this look wakes it itself or is found by its polling, as always
                    if self.queue:
                        with self.mutex:
                            self.cond.notify_all()

    def stop(self) -> None:
        with self.mutex:
            self.stopping = True
            self.cond.notify_all()


def _get_engine() -> _Engine:
    global _engine
    engine = _engine
    if engine is not None:  # (made once; the lock is for the first call only)
        return engine
    with _lock:
        if _engine is None:
            _engine = _Engine()
            # at exit, queued jobs are dropped and the thread ends after its current job,
            # before the interpreter joins it: exiting never drains a long queue of runs
            register = getattr(threading, "_register_atexit", None)
            if register is not None:
                register(_shutdown)
        return _engine


def _shutdown() -> None:
    cancel_pending()
    if _engine is None:
        return
    with _engine.cond:
        dropped = list(_engine.queue)
        _engine.queue.clear()
    _engine.stop()
    for job in dropped:
        job.run()  # the epoch changed: each ends with its cancellation error


def on_engine_thread() -> bool:
    """True on the engine thread, and on a thread while it runs a job it took over."""
    return getattr(_local, "engine", False)


def submit(fn: Callable[..., Any], *args: Any, stealable: bool = False,
           future: LightFuture | None = None) -> Future:
    """Queue ``fn(*args)`` on the engine thread; returns its future at once (``future``, a
    new pending LightFuture the caller made, when given). A ``stealable`` job may run on a
    thread waiting for it instead (see ``help_until``)."""
    return _get_engine().submit(_Job(fn, args, stealable, future))


def help_until(future: Future) -> None:
    """Before blocking on ``future``: run queued stealable jobs on this thread while the
    engine thread is idle and such a job is next, until ``future`` is done."""
    if _engine is not None and not on_engine_thread():
        _engine.help_until(future)


def announce() -> None:
    """Wake the engine thread for jobs queued so far (a caller that will wait for one
    without running it itself: ``Tensor.readback_request`` and the like)."""
    if _engine is not None:
        _engine.announce()


def cancel_pending() -> None:
    """Jobs submitted so far and not yet started end with an EngineError instead of running
    (an exiting program drops queued runs rather than draining them)."""
    global _epoch
    with _lock:
        _epoch += 1


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` on the engine thread and wait for it (inline if already there)."""
    if on_engine_thread():
        return fn(*args)
    return submit(fn, *args).result()
