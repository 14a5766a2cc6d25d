"""Tensor: data on a backend that may still be being computed, with readback requests."""

from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine import executor
from engine.errors import EngineError
from engine.light_future import LightFuture
from engine.ops.base import Meta, meta_of


@dataclass(slots=True)
class Stored:
    """Where a tensor's data lives once scheduled: a backend's handle and its metadata."""

    backend: Any  # engine.backends.base.Backend
    handle: Any
    meta: Meta


class HostStored:
    """``Stored`` for a CPU run's array, its metadata made only when asked (most runs' outputs
    are read as arrays and never asked for it)."""

    __slots__ = ("backend", "handle", "_meta")

    def __init__(self, backend: Any, handle: np.ndarray):
        self.backend, self.handle, self._meta = backend, handle, None

    @property
    def meta(self) -> Meta:
        if self._meta is None:
            self._meta = meta_of(self.handle)
        return self._meta


class RunOutput:
    """One output of a CPU run as the Future of its ``Stored`` that a ``Tensor`` reads: a
    view of the run's one future, whose result maps the names the run kept to their values.
    A run's outputs share that future, set once, instead of a future each made, set and
    checked (~1.5 us an output of every run of a tiny model)."""

    __slots__ = ("run", "name", "backend")

    def __init__(self, run: LightFuture, name: str, backend: Any):
        self.run, self.name, self.backend = run, name, backend

    def done(self) -> bool:
        return self.run.done()

    def result(self, timeout=None) -> HostStored:
        values = self.run.result(timeout)
        if self.name not in values:
            raise self._missing()
        return HostStored(self.backend, values[self.name])

    def exception(self, timeout=None) -> BaseException | None:
        exc = self.run.exception(timeout)
        if exc is None and self.name not in self.run.result():
            return self._missing()
        return exc

    def add_done_callback(self, fn) -> None:
        self.run.add_done_callback(lambda _run: fn(self))

    def _missing(self) -> EngineError:
        return EngineError(f"tensor {self.name!r} was not computed")


#: outputs whose Tensor was garbage-collected; their handles are freed on the engine thread
_released: deque[Future] = deque()


def _release(stored_future: Future) -> None:
    # A finalizer may run inside any lock of any thread (even the executor's own), so it
    # only records the handle; ``free_released`` frees it on the engine thread later.
    _released.append(stored_future)


def free_released() -> None:
    """Free the device handles of collected output tensors (call on the engine thread)."""
    while _released:
        _released.popleft().add_done_callback(_free_stored)


def _free_stored(fut: Future) -> None:
    if fut.exception() is None:
        stored: Stored = fut.result()
        stored.backend.free(stored.handle)


class Tensor:
    """A worker's output (or a CPU tensor). Reading it back is explicit, as in the reference API.

    ``readback_request`` starts a non-blocking copy to the CPU; ``is_readback_request_done``
    polls it; ``readback_and_clone`` blocks; ``readback_and_clone_async`` awaits.
    """

    def __init__(self, name: str, stored: Future):
        self.name = name
        self._stored = stored
        self._readback: Future | None = None

    @classmethod
    def from_array(cls, array: np.ndarray | list, name: str = "") -> Tensor:
        """A CPU tensor holding ``array`` (already complete)."""
        fut: Future = Future()
        if isinstance(array, np.ndarray):
            meta = Meta.of(array)
        else:
            meta = Meta((), np.dtype(object), array)
        fut.set_result(Stored(_CPU, array, meta))
        t = cls(name, fut)
        t._readback = Future()
        t._readback.set_result(array)
        return t

    # -- metadata -------------------------------------------------------------------------
    @property
    def is_scheduled(self) -> bool:
        """True once the worker has run or recorded the layer producing this tensor."""
        return self._stored.done()

    def _meta(self) -> Meta:
        executor.help_until(self._stored)
        return self._stored.result().meta

    @property
    def shape(self) -> tuple[int, ...]:
        """Concrete shape (waits for scheduling, not for the device to finish)."""
        return self._meta().shape

    @property
    def dtype(self) -> np.dtype:
        return self._meta().dtype

    @property
    def backend_type(self):
        executor.help_until(self._stored)
        return self._stored.result().backend.type

    # -- readback -------------------------------------------------------------------------
    def readback_request(self) -> None:
        """Start copying the data to the CPU without blocking."""
        if self._readback is not None:
            return
        result: Future = Future()
        self._readback = result
        name = self.name  # (the callbacks must not hold the tensor: a cycle delays its free)

        def start(stored_future: Future) -> None:
            exc = stored_future.exception()
            if exc is not None:
                result.set_exception(exc)
                return
            stored: Stored = stored_future.result()
            if getattr(stored.backend, "closed", False):
                result.set_exception(EngineError(
                    f"tensor {name!r} cannot be read: the worker that computed it is "
                    "closed and its data was released"))
                return
            try:
                inner = stored.backend.request_download(stored.handle, stored.meta)
            except BaseException as e:  # noqa: BLE001 - delivered to the reader
                result.set_exception(e)
                return
            inner.add_done_callback(lambda f: _copy_future(f, result))

        def queue_start(stored_future: Future) -> None:
            stored = None if stored_future.exception() else stored_future.result()
            on_host = stored is not None and getattr(stored.backend, "host_memory", False)
            if on_host:
                # CPU data is complete once stored: no job to queue (and no thread to wake)
                start(stored_future)
                return
            try:
                executor.submit(start, stored_future, stealable=on_host)
            except RuntimeError as exc:  # the interpreter is shutting down
                if not result.done():
                    result.set_exception(EngineError(f"readback abandoned: {exc}"))

        self._stored.add_done_callback(queue_start)
        executor.announce()  # the run may still be queued, with no thread waiting to run it

    def keep_on_cpu(self, timeout: float = 300.0) -> None:
        """Read the data back now and keep it: the backend holding it is about to close."""
        if not self._stored.done() or self._stored.exception() is not None:
            return
        try:
            self.readback_request()
            self._readback.exception(timeout=timeout)
        except Exception:  # noqa: BLE001 - a later read reports that the data is gone
            pass

    def is_readback_request_done(self) -> bool:
        """Non-blocking: True when ``readback_and_clone`` will return immediately."""
        if self._readback is None:
            return False
        if not self._readback.done():
            stored = self._stored.result() if self._stored.done() and \
                self._stored.exception() is None else None
            if stored is not None and getattr(stored.backend, "closed", False):
                stored = None
            if stored is not None:
                stored.backend.poll()
        return self._readback.done()

    def readback_and_clone(self) -> Tensor:
        """Blocking: a CPU copy of this tensor."""
        return Tensor.from_array(_copy(self._wait()), self.name)

    async def readback_and_clone_async(self) -> Tensor:
        """Await the CPU copy without blocking the event loop."""
        self.readback_request()
        data = await asyncio.wrap_future(self._readback)
        return Tensor.from_array(_copy(data), self.name)

    def download_to_array(self) -> np.ndarray:
        """Blocking: the data as a NumPy array in the model's shape and dtype."""
        return _copy(self._wait())

    def numpy(self) -> np.ndarray:
        return self.download_to_array()

    def _wait(self):
        if self._readback is None:
            executor.help_until(self._stored)  # a CPU run still queued runs here, now
            if not self._stored.done() and not executor.on_engine_thread():
                # a GPU run: the engine thread records it; its outputs may then be read here
                try:
                    self._stored.exception()
                except CancelledError:
                    pass  # (reported by the readback below)
        if self._readback is None and self._stored.done() and self._stored.exception() is None:
            stored: Stored = self._stored.result()
            backend = stored.backend
            if getattr(backend, "host_memory", False) and not getattr(backend, "closed", False):
                # host data is complete once stored: read it here, without the readback
                # request's chain of futures and callbacks (~15 us an output on small models)
                data = backend.download(stored.handle, stored.meta)
                self._readback = LightFuture.completed(data)
                return data
            direct = getattr(backend, "download_staged", None)
            data = direct(stored.handle, stored.meta) if direct is not None else None
            if data is not None:
                # a GPU output its run already copied out: mapped and waited for here, not
                # through the engine and reader threads (two hand-overs less)
                self._readback = LightFuture.completed(data)
                return data
        self.readback_request()
        executor.help_until(self._readback)
        return self._readback.result()

    def __repr__(self) -> str:
        if self._stored.done() and self._stored.exception() is None:
            m = self._meta()
            return f"Tensor({self.name!r}, {m.dtype}{list(m.shape)}, {self.backend_type.name})"
        if self._stored.done():
            return f"Tensor({self.name!r}, failed: {type(self._stored.exception()).__name__})"
        return f"Tensor({self.name!r}, pending)"


class DeviceTensor(Tensor):
    """A GPU worker's output: the device memory it holds is freed once it is collected (a
    CPU output's array is freed by Python alone, without a finalizer to run)."""

    def __del__(self) -> None:
        # (a method, not weakref.finalize: ~1.4 us less per GPU output of every run)
        try:
            _release(self._stored)
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing to free
            pass


def _copy(data):
    if isinstance(data, np.ndarray):
        return data.copy()
    if isinstance(data, list):
        return [_copy(x) for x in data]
    return data


def _copy_future(src: Future, dst: Future) -> None:
    if src.exception() is not None:
        dst.set_exception(src.exception())
    else:
        dst.set_result(src.result())


class _CpuHolder:
    """Stands in for the CPU backend on tensors made from arrays (no import cycle)."""

    @property
    def type(self):
        from engine.backends.base import BackendType

        return BackendType.CPU

    def request_download(self, handle, meta):
        f: Future = Future()
        f.set_result(handle)
        return f

    def free(self, handle):
        pass

    def poll(self):
        pass


_CPU = _CpuHolder()
