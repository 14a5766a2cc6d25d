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

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_thread_id: int | None = None


def _mark_thread() -> None:
    global _thread_id
    _thread_id = threading.get_ident()


def _get_pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(1, thread_name_prefix="engine", initializer=_mark_thread)
        return _pool


def on_engine_thread() -> bool:
    return threading.get_ident() == _thread_id


def submit(fn: Callable[..., Any], *args: Any) -> Future:
    """Queue ``fn(*args)`` on the engine thread; returns its future at once."""
    return _get_pool().submit(fn, *args)


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` on the engine thread and wait for it (inline if already there)."""
    if on_engine_thread():
        return fn(*args)
    return _get_pool().submit(fn, *args).result()
