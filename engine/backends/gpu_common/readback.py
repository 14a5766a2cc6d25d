"""Readback of GPU buffers without a thread or a buffer per read.

A readback maps a staging buffer that submitted work has filled and hands its data to a
future. Waiting for the map blocks, so it happens off the engine thread. A thread started
per read cost ~130 us of CPU and a staging buffer created per read ~35 us on the machine of
``docs/PERFORMANCE.md`` (a 4 KB read took 1.5 ms all in): here one long-lived thread per
device waits for the maps in submission order (which is the order wgpu completes them in),
and staging buffers of a size already read are reused.

A wait started from the reader thread itself (a done-callback of one readback that reads
again and blocks) would wait for its own thread; such reads get a thread of their own.
A blocking read that will wait anyway maps and waits on its own thread (``read_now``).
Maps go through direct wgpu-native calls where available (``rawmap``: the waiting thread
polls the device), else through wgpu-py's ``map_async``.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

from engine.backends.gpu_common.rawmap import RAW_MAP, RawMapper
from engine.errors import GPUError

#: staging buffers kept per size for reuse
KEEP_PER_SIZE = 2
#: most bytes of idle staging buffers kept
KEEP_BYTES = 64 << 20


class Reader:
    """Maps staging buffers and completes futures with their converted data."""

    def __init__(self, wgpu, device, raw: bool | None = None):
        self._wgpu, self._device = wgpu, device
        #: maps through direct wgpu-native calls (``rawmap``) where available
        self._raw = RawMapper(device) if RAW_MAP is not None and raw is not False else None
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._free: dict[int, list] = {}
        self._free_bytes = 0
        # mapping for reading submits an empty command buffer first unless told it need
        # not (the data was copied in by work we submitted ourselves)
        self._mode = "READ_NOSYNC"

    # -- staging buffers ------------------------------------------------------------------
    def staging(self, size: int):
        """A MAP_READ | COPY_DST buffer of ``size`` bytes: an idle one of that size, or new."""
        with self._lock:
            free = self._free.get(size)
            if free:
                self._free_bytes -= size
                return free.pop()
        usage = self._wgpu.BufferUsage.MAP_READ | self._wgpu.BufferUsage.COPY_DST
        return self._device.create_buffer(size=size, usage=usage)

    def give_back(self, buf) -> None:
        """Keep ``buf`` (unmapped) for a later read of its size, or destroy it."""
        size = int(buf.size)
        with self._lock:
            free = self._free.setdefault(size, [])
            if len(free) < KEEP_PER_SIZE and self._free_bytes + size <= KEEP_BYTES:
                free.append(buf)
                self._free_bytes += size
                return
        buf.destroy()

    # -- mapping ----------------------------------------------------------------------------
    def _map(self, staging):
        if self._raw is not None:
            return self._raw.map(staging, int(staging.size))
        try:
            return staging.map_async(self._mode)
        except (ValueError, KeyError, TypeError):
            # a wgpu without the no-sync mode: the documented one
            self._mode = self._wgpu.MapMode.READ
            return staging.map_async(self._mode)

    def read(self, staging, convert, reuse: bool = False, copy: bool = True) -> Future:
        """Map ``staging`` (already filled by submitted work); the future gets
        ``convert(data)``. ``copy=False`` hands ``convert`` the mapped memory itself, valid
        during the call only (``convert`` must copy what it keeps). ``reuse``: the buffer
        returns to the idle ones afterwards (else it is left to its owner)."""
        fut: Future = Future()
        promise = self._map(staging)
        job = (promise, staging, convert, reuse, copy, fut)
        if threading.current_thread() is self._thread:
            threading.Thread(target=self._finish, args=job, name="gpu-readback-nested",
                             daemon=True).start()
            return fut
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name="gpu-readback",
                                                    daemon=True)
                    self._thread.start()
        self._jobs.put(job)
        return fut

    def read_now(self, staging, convert, reuse: bool = False, copy: bool = True):
        """``read``, mapped and waited for on the calling thread: returns ``convert``'s
        result (a blocking read saves the hand-overs to and from the reader thread)."""
        fut: Future = Future()
        self._finish(self._map(staging), staging, convert, reuse, copy, fut)
        return fut.result()

    def _finish_raw(self, map_id: int, staging, convert, copy: bool):
        mapper, size = self._raw, int(staging.size)
        mapper.wait(map_id)
        try:
            view = mapper.view(staging, size)
            return convert(bytes(view) if copy else view)
        finally:
            mapper.unmap(staging)

    def _loop(self) -> None:
        while True:
            self._finish(*self._jobs.get())

    def _finish(self, promise, staging, convert, reuse, copy, fut: Future) -> None:
        try:
            if self._raw is not None:  # ``promise``: the raw map's id
                result = self._finish_raw(promise, staging, convert, copy)
            else:
                promise.sync_wait()
                raw = staging.read_mapped(copy=copy)
                try:
                    result = convert(raw)
                finally:
                    del raw
                    staging.unmap()
        except Exception as exc:  # delivered to whoever waits on the readback
            fut.set_exception(GPUError(f"GPU readback failed: {exc}"))
            return
        if reuse:
            try:
                self.give_back(staging)
            except Exception:  # a buffer that cannot be kept is simply not reused
                pass
        fut.set_result(result)
