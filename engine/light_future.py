"""A ``concurrent.futures.Future`` that makes no lock of its own until a thread blocks on it.

Every run makes a future for its job and one per output, and every read one more; the
standard Future builds a Condition (an RLock and its methods) in each, and takes it on
every ``done``/``result``. On a small streaming model that was ~10 us of a 125 us run.
Here the state changes under one module-wide lock (uncontended: tens of nanoseconds), and
an Event exists only for a thread that has to wait. It is still a ``Future``, so
``asyncio.wrap_future`` accepts it.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import CancelledError, Future, InvalidStateError, TimeoutError
from concurrent.futures._base import (
    CANCELLED,
    CANCELLED_AND_NOTIFIED,
    FINISHED,
    PENDING,
    RUNNING,
)

_lock = threading.Lock()
_DONE = (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED)
_log = logging.getLogger("engine")


class LightFuture(Future):
    """A Future with the standard interface (no ``concurrent.futures.wait`` support)."""

    def __init__(self):  # (no Future.__init__: it builds the Condition this class avoids)
        self._state = PENDING
        self._result = None
        self._exception = None
        self._callbacks: list | None = []
        self._event: threading.Event | None = None

    @classmethod
    def completed(cls, result) -> LightFuture:
        """A future already holding ``result``."""
        fut = cls()
        fut._state, fut._result, fut._callbacks = FINISHED, result, None
        return fut

    def __repr__(self) -> str:
        return f"<LightFuture at {id(self):#x} state={self._state}>"

    # -- state ----------------------------------------------------------------------------
    def done(self) -> bool:
        return self._state in _DONE

    def cancelled(self) -> bool:
        return self._state in (CANCELLED, CANCELLED_AND_NOTIFIED)

    def running(self) -> bool:
        return self._state == RUNNING

    def cancel(self) -> bool:
        with _lock:
            if self._state in (RUNNING, FINISHED):
                return False
            if self._state in (CANCELLED, CANCELLED_AND_NOTIFIED):
                return True
            self._state = CANCELLED
            callbacks, event = self._take_waiters()
        self._notify(callbacks, event)
        return True

    def set_running_or_notify_cancel(self) -> bool:
        with _lock:
            if self._state == CANCELLED:
                self._state = CANCELLED_AND_NOTIFIED
                return False
            if self._state == PENDING:
                self._state = RUNNING
                return True
        raise RuntimeError(f"future in unexpected state {self._state}")

    def set_result(self, result) -> None:
        self._finish(result, None)

    def set_exception(self, exception) -> None:
        self._finish(None, exception)

    def _finish(self, result, exception) -> None:
        with _lock:
            if self._state in _DONE:
                raise InvalidStateError(f"{self._state}: {self!r}")
            self._result, self._exception = result, exception
            self._state = FINISHED
            callbacks, event = self._take_waiters()
        self._notify(callbacks, event)

    def _take_waiters(self):
        callbacks, self._callbacks = self._callbacks, None
        return callbacks, self._event

    def _notify(self, callbacks, event) -> None:
        if event is not None:
            event.set()
        for fn in callbacks or ():
            self._call(fn)

    def _call(self, fn) -> None:
        try:
            fn(self)
        except Exception:  # as Future does: a failing callback is logged, not raised
            _log.exception("exception calling callback for %r", self)

    def add_done_callback(self, fn) -> None:
        with _lock:
            if self._callbacks is not None:
                self._callbacks.append(fn)
                return
        self._call(fn)

    # -- waiting --------------------------------------------------------------------------
    def _wait(self, timeout) -> None:
        if self._state in _DONE:
            return
        with _lock:
            if self._state in _DONE:
                return
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        event.wait(timeout)
        if self._state not in _DONE:
            raise TimeoutError()

    def result(self, timeout=None):
        self._wait(timeout)
        if self._state != FINISHED:
            raise CancelledError()
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self, timeout=None):
        self._wait(timeout)
        if self._state != FINISHED:
            raise CancelledError()
        return self._exception
