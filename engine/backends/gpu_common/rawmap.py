"""Mapping staging buffers for reading with direct wgpu-native calls.

wgpu-py's ``GPUBuffer.map_async`` makes a new C callback, a callback descriptor and a
promise per map and wakes its poll thread, which then wakes the thread waiting on the
promise: on this machine ~70 us of the engine thread's time a read, and one more thread
hand-over between the GPU finishing and the reader getting the data. ``RawMapper`` makes one
callback for all maps (the map is named by its userdata), and the thread that waits for a
map polls the device itself (``wgpuDevicePoll`` with wait, the GIL released meanwhile).

Buffers mapped here are mapped and unmapped only here (wgpu-py's own record of their map
state is never used). Used only with the wgpu version ``native.RAW_VERSIONS`` names;
otherwise ``RAW_MAP`` is None and ``readback.Reader`` maps through wgpu-py's API.
"""

from __future__ import annotations

import itertools
import threading

from engine.backends.gpu_common.native import load_native
from engine.errors import GPUError

RAW_MAP = load_native(
    ("wgpuBufferMapAsync", "wgpuBufferGetConstMappedRange", "wgpuBufferUnmap",
     "wgpuDevicePoll"),
    ("WGPUCallbackMode_AllowProcessEvents", "WGPUMapMode_Read", "WGPUMapAsyncStatus_Success"),
    ("WGPUBufferMapCallbackInfo *",))


class RawMapper:
    """Read maps of one device's buffers: ``map`` starts one (any thread), ``wait`` polls
    the device until it is done, ``view`` gives the mapped bytes, ``unmap`` ends it."""

    def __init__(self, device):
        ffi, lib, _ = RAW_MAP
        self._device = device._internal
        self._ids = itertools.count(1)
        self._status: dict[int, int] = {}  # map id -> status, set by the callback
        self._lock = threading.Lock()

        def mapped(status, _message, userdata1, _userdata2) -> None:
            # called inside some thread's wgpuDevicePoll (with the GIL taken by cffi)
            self._status[int(ffi.cast("uintptr_t", userdata1))] = int(status)

        self._callback = ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, "
                                      "void *)", mapped)

    def map(self, buffer, size: int) -> int:
        """Start mapping the first ``size`` bytes of ``buffer`` for reading; returns the
        map's id for ``wait``."""
        ffi, lib, _ = RAW_MAP
        info = ffi.new("WGPUBufferMapCallbackInfo *")
        info.mode = lib.WGPUCallbackMode_AllowProcessEvents
        info.callback = self._callback
        with self._lock:
            map_id = next(self._ids)
        info.userdata1 = ffi.cast("void *", map_id)
        lib.wgpuBufferMapAsync(buffer._internal, lib.WGPUMapMode_Read, 0, size, info[0])
        return map_id

    def wait(self, map_id: int) -> None:
        """Poll the device until map ``map_id`` is done (its work and the map); raises
        GPUError when the map failed."""
        _, lib, libf = RAW_MAP
        status = self._status.pop(map_id, None)
        while status is None:
            # blocks until the queue's submitted work is done; the callback runs in this
            # poll or in another thread's (wgpu-py's poller), hence the loop
            libf.wgpuDevicePoll(self._device, True, RAW_MAP[0].NULL)
            status = self._status.pop(map_id, None)
        if status != lib.WGPUMapAsyncStatus_Success:
            raise GPUError(f"mapping the buffer for reading failed (wgpu status {status})")

    @staticmethod
    def view(buffer, size: int):
        """The mapped bytes (valid until ``unmap``)."""
        ffi, lib, _ = RAW_MAP
        return ffi.buffer(lib.wgpuBufferGetConstMappedRange(buffer._internal, 0, size), size)

    @staticmethod
    def unmap(buffer) -> None:
        _, lib, _ = RAW_MAP
        lib.wgpuBufferUnmap(buffer._internal)
