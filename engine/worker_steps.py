"""Helpers of the worker: the ``schedule_iterable`` iterator and device-time profiles."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future

from engine import executor
from engine.errors import EngineError
from engine.model import Layer
from engine.profile import Profile


def apply_device_times(profile: Profile, device: dict[str, float] | None) -> None:
    """Replace CPU-clock times of GPU layers by the device's timestamps where it has them."""
    for t in profile.layers:
        if device and t.name in device and not t.fallback:
            t.ms, t.source = device[t.name], "gpu-timestamp"


class Steps:
    """The iterator of ``schedule_iterable``: one layer per ``next``, on the engine thread."""

    def __init__(self, steps: Iterator[Layer], finish: Callable[[Future], None]):
        self._steps, self._finish, self._done = steps, finish, False

    def __iter__(self) -> Steps:
        return self

    def __next__(self) -> Layer:
        if self._done:
            raise StopIteration
        try:
            layer = executor.call(next, self._steps, None)
        except BaseException as exc:
            self._end(exc)
            raise
        if layer is None:
            self._end(None)
            raise StopIteration
        return layer

    def close(self) -> None:
        """Stop scheduling; outputs not computed yet fail with an EngineError."""
        if not self._done:
            executor.call(self._steps.close)
            self._end(EngineError("schedule_iterable was abandoned before the end"))

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown; nothing is waiting then
            pass

    def _end(self, exc: BaseException | None) -> None:
        self._done = True
        done: Future = Future()
        if exc is None:
            done.set_result(None)
        else:
            done.set_exception(exc)
        self._finish(done)
