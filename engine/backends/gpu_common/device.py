"""The wgpu device, shared by the GPU backends of a process and used from the engine thread only.

Adapter choice: high-performance first; ``ENGINE_GPU_ADAPTER`` (a substring of the adapter's
name, e.g. ``llvmpipe``) or the ``adapter`` option picks another. Every wgpu error raised
inside ``gpu_errors()`` becomes an engine ``GPUError``; no adapter becomes
``BackendUnavailableError`` with the reason.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import Future

import numpy as np

from engine.backends.gpu_common.readback import Reader
from engine.errors import BackendUnavailableError, GPUError

#: optional features used when the adapter has them
WANTED_FEATURES = ("timestamp-query", "timestamp-query-inside-encoders",
                   "timestamp-query-inside-passes", "shader-f16", "subgroup",
                   "float32-filterable")

_lock = threading.Lock()
_devices: dict[str, GpuDevice] = {}


@contextlib.contextmanager
def gpu_errors(what: str):
    """Turn wgpu exceptions raised while doing ``what`` into ``GPUError``."""
    import wgpu

    try:
        yield
    except wgpu.GPUError as exc:
        first = str(exc).strip().splitlines()
        detail = " ".join(line.strip() for line in first[:8] if line.strip())
        if isinstance(exc, wgpu.GPUOutOfMemoryError):
            raise GPUError(f"the GPU ran out of memory {what}: {detail}; try a smaller input "
                           "or the CPU backend") from exc
        if "lost" in detail.lower():
            with _lock:  # the next worker gets a fresh device
                _devices.clear()
            raise GPUError(f"the GPU device was lost {what}: {detail}; create a new Worker "
                           "to continue") from exc
        raise GPUError(f"{what}: {type(exc).__name__}: {detail}") from exc


class GpuDevice:
    """An adapter, its device and queue, and what they can do."""

    def __init__(self, adapter_name: str | None = None):
        try:
            import wgpu
        except Exception as exc:  # wgpu-native missing or broken
            raise BackendUnavailableError(f"wgpu cannot be imported: {exc}") from exc
        self.wgpu = wgpu
        wanted = adapter_name or os.environ.get("ENGINE_GPU_ADAPTER") or ""
        try:
            adapters = wgpu.gpu.enumerate_adapters_sync()
        except Exception as exc:
            raise BackendUnavailableError(f"no GPU adapter: {exc}") from exc
        if not adapters:
            raise BackendUnavailableError(
                "no GPU adapter found (install a Vulkan driver, e.g. mesa-vulkan-drivers)")
        adapter = self._choose(adapters, wanted)
        self.adapter = adapter
        self.info = dict(adapter.info)
        self.name = f"{self.info.get('device', '?')} via {self.info.get('backend_type', '?')}"
        self.features = {f for f in WANTED_FEATURES if f in adapter.features}
        limits = adapter.limits
        self.max_storage_binding = int(limits["max-storage-buffer-binding-size"])
        self.max_buffer_size = int(limits["max-buffer-size"])
        self.max_workgroups = int(limits["max-compute-workgroups-per-dimension"])
        self.max_texture_2d = int(limits["max-texture-dimension-2d"])
        required_limits = {
            "max-storage-buffer-binding-size": self.max_storage_binding,
            "max-buffer-size": self.max_buffer_size,
            "max-storage-buffers-per-shader-stage":
                int(limits["max-storage-buffers-per-shader-stage"]),
        }
        with gpu_errors("creating the GPU device"):
            self.device = adapter.request_device_sync(
                required_features=sorted(self.features), required_limits=required_limits)
        self.queue = self.device.queue
        self.reader = Reader(wgpu, self.device)
        self.lost_reason: str | None = None

    @staticmethod
    def _choose(adapters, wanted: str):
        if wanted:
            for a in adapters:
                if wanted.lower() in a.summary.lower():
                    return a
            names = "; ".join(a.summary for a in adapters)
            raise BackendUnavailableError(f"no GPU adapter matches {wanted!r} (found: {names})")
        order = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "CPU": 3}
        backend_order = {"Vulkan": 0, "Metal": 0, "D3D12": 0, "OpenGL": 2}

        def rank(a):
            info = a.info
            return (order.get(info.get("adapter_type"), 4),
                    backend_order.get(info.get("backend_type"), 1))

        return sorted(adapters, key=rank)[0]

    @property
    def has_timestamps(self) -> bool:
        return "timestamp-query" in self.features

    # -- buffers and readback ---------------------------------------------------------------
    def map_staging_async(self, staging, convert) -> Future:
        """Map ``staging`` (a MAP_READ buffer that submitted work fills); the future gets
        ``convert(bytes)``, a copy of the buffer's data. The map is waited for off the calling
        thread (``readback.Reader``), so the caller can poll ``future.done()`` without
        blocking and without an event loop."""
        with gpu_errors("reading back from the GPU"):
            return self.reader.read(staging, convert)

    def staging_buffer(self, nbytes: int):
        """A MAP_READ | COPY_DST buffer for a read of ``nbytes`` (pooled: hand it to
        ``read_staged_async`` after work filled it, or back with ``give_back_staging``)."""
        with gpu_errors("reading a tensor back"):
            return self.reader.staging(staging_size(nbytes))

    def give_back_staging(self, staging) -> None:
        """Return a staging buffer that will not be read to the pool."""
        self.reader.give_back(staging)

    def read_staged_async(self, staging, nbytes: int, dtype: np.dtype,
                          shape: tuple[int, ...], now: bool = False) -> Future | np.ndarray:
        """Map ``staging`` (from ``staging_buffer``, filled by submitted work); the future
        gets its first ``nbytes`` as an array, and the buffer returns to the pool. ``now``:
        map and wait on the calling thread and return the array itself."""

        def convert(raw) -> np.ndarray:
            # ``raw`` is the mapped memory itself: the copy is the only one made
            return np.frombuffer(raw, dtype=np.uint8)[:nbytes].view(dtype).reshape(shape).copy()

        with gpu_errors("reading back from the GPU"):
            if now:
                return self.reader.read_now(staging, convert, reuse=True, copy=False)
            return self.reader.read(staging, convert, reuse=True, copy=False)

    def read_buffer_async(self, src, nbytes: int, dtype: np.dtype, shape: tuple[int, ...],
                          offset: int = 0) -> Future:
        """Copy ``src`` to a staging buffer now and map it; the future gets the array."""
        staging = self.staging_buffer(nbytes)
        with gpu_errors("reading a tensor back"):
            enc = self.device.create_command_encoder()
            enc.copy_buffer_to_buffer(src, offset, staging, 0, staging_size(nbytes))
            self.queue.submit([enc.finish()])
        return self.read_staged_async(staging, nbytes, dtype, shape)

    def read_buffer(self, src, nbytes: int, dtype: np.dtype, shape: tuple[int, ...],
                    offset: int = 0) -> np.ndarray:
        """Blocking readback of ``src``."""
        return self.read_buffer_async(src, nbytes, dtype, shape, offset).result()


def staging_size(nbytes: int) -> int:
    """Bytes of the staging buffer (and of the copy into it) for a read of ``nbytes``:
    copies move whole 4-byte words."""
    return max(4, (nbytes + 3) // 4 * 4)


def get_device(adapter_name: str | None = None) -> GpuDevice:
    """The process-wide device for ``adapter_name`` (created on first use)."""
    key = adapter_name or os.environ.get("ENGINE_GPU_ADAPTER") or ""
    with _lock:
        dev = _devices.get(key)
        if dev is None:
            dev = GpuDevice(adapter_name)
            _devices[key] = dev
        return dev
