"""Reading GPU_COMPUTE tensors back: through a staging buffer the run already filled (an
output its replayed run copied out early, ``replayed.EarlyRead``) or one filled now, mapped
without blocking the engine thread (``gpu_common.readback``). ``Readout`` is a part of
``GpuComputeBackend`` and works on its state.
"""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np

from engine.backends.gpu_compute.attention import Pending
from engine.backends.gpu_compute.memory import GpuTensor
from engine.errors import KernelError
from engine.ops.base import Meta


class Readout:
    """Downloads of ``GpuComputeBackend`` (see the module docstring)."""

    def download(self, handle: GpuTensor, meta: Meta) -> np.ndarray:
        return self.request_download(handle, meta).result()

    def download_staged(self, handle: GpuTensor, meta: Meta) -> np.ndarray | None:
        """A replayed output that its run already copied out (``EarlyRead``), read on the
        calling thread (any thread: no backend state but the handle's is touched); None
        when there is no such copy (``request_download`` then reads it)."""
        early = handle.early if isinstance(handle, GpuTensor) else None
        if self._closed or early is None or early.staging is None or meta.size == 0:
            return None
        dtype = np.dtype(meta.dtype)
        raw_dtype = np.dtype(np.uint32) if dtype == np.dtype(bool) else dtype
        nbytes = meta.size * raw_dtype.itemsize
        handle.early = None
        staging = early.taken(self.gpu, nbytes)
        if staging is None:
            return None
        raw = self.gpu.read_staged_async(staging, nbytes, raw_dtype, tuple(meta.shape),
                                         now=True)
        return raw if dtype == raw_dtype else raw != 0

    def request_download(self, handle: GpuTensor, meta: Meta) -> Future:
        shape, dtype = tuple(meta.shape), np.dtype(meta.dtype)
        if isinstance(handle.alloc, Pending):
            raise KernelError("attention scores computed inside a fused attention dispatch "
                              "cannot be read back")
        if meta.size == 0:
            fut: Future = Future()
            fut.set_result(np.zeros(shape, dtype))
            return fut
        self.flush()
        raw_dtype = np.dtype(np.uint32) if dtype == np.dtype(bool) else dtype
        nbytes = meta.size * raw_dtype.itemsize
        staging = None
        if handle.early is not None:
            handle.early, early = None, handle.early
            staging = early.taken(self.gpu, nbytes)
        if staging is not None:  # the run that wrote it also copied it out
            raw = self.gpu.read_staged_async(staging, nbytes, raw_dtype, shape)
        else:
            raw = self.gpu.read_buffer_async(handle.buffer, nbytes, raw_dtype, shape)
        if dtype != np.dtype(bool):
            return raw
        out: Future = Future()
        raw.add_done_callback(lambda f: _convert(f, out, lambda a: a != 0))
        return out


def _convert(src: Future, dst: Future, fn) -> None:
    if src.exception() is not None:
        dst.set_exception(src.exception())
    else:
        dst.set_result(fn(src.result()))
