"""The engine thread: one long-lived thread that runs every scheduled job in order.

All backend calls happen on it, which keeps wgpu's objects on one owner thread
and Numba's parallel regions from being entered by two threads at once.
``schedule`` only puts a job in its queue, so it returns before the work is done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from engine.errors import EngineError

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_thread_id: int | None = None
#: bumped by ``cancel_pending``: jobs submitted before it end at once instead of running
_epoch = 0


def _mark_thread() -> None:
    global _thread_id
    _thread_id = threading.get_ident()


def _get_pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(1, thread_name_prefix="engine", initializer=_mark_thread)
            # at exit, queued jobs are dropped before the pool's own exit hook waits for them
            # (hooks run newest first): exiting never drains a long queue of runs
            register = getattr(threading, "_register_atexit", None)
            if register is not None:
                register(cancel_pending)
        return _pool


def on_engine_thread() -> bool:
    return threading.get_ident() == _thread_id


def submit(fn: Callable[..., Any], *args: Any) -> Future:
    """Queue ``fn(*args)`` on the engine thread; returns its future at once."""
    return _get_pool().submit(_unless_cancelled, _epoch, fn, args)


def _unless_cancelled(epoch: int, fn: Callable[..., Any], args: tuple) -> Any:
    if epoch != _epoch:
        raise EngineError("cancelled: the work was still queued when the program stopped")
    return fn(*args)


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
    return _get_pool().submit(fn, *args).result()
