"""A replayed run's command encoder, input writes and submit as direct wgpu-native calls.

A replayed run records the same commands every time; through wgpu-py's public API each
encoder, pass, finish, submit and queue write builds its descriptor in Python, wraps the
result in a Python object and goes through an error-capturing proxy. On this machine that
was ~60 us of a tiny model's ~250 us host cost a run. ``RawRun`` builds the (empty)
descriptors once and makes the calls directly.

Errors: recording and writing are not checked call by call (wgpu-native reports what it
finds at finish and submit); finish and submit go through wgpu-py's error-capturing call,
so a failure is raised (inside the caller's ``gpu_errors``) as with the public API. Used only
with the wgpu version it was checked against (``RAW_VERSIONS``); otherwise ``NATIVE`` is
None and replays use the public API.
"""

from __future__ import annotations

import numpy as np

#: wgpu-py versions whose entry points and descriptor structs this module was checked against
RAW_VERSIONS = ("0.32.0",)
_FUNCTIONS = ("wgpuDeviceCreateCommandEncoder", "wgpuCommandEncoderBeginComputePass",
              "wgpuComputePassEncoderEnd", "wgpuComputePassEncoderRelease",
              "wgpuCommandEncoderFinish", "wgpuCommandEncoderRelease",
              "wgpuCommandEncoderCopyBufferToBuffer", "wgpuCommandEncoderResolveQuerySet",
              "wgpuQueueSubmit", "wgpuCommandBufferRelease", "wgpuQueueWriteBuffer",
              "wgpuQueueWriteTexture", "wgpuCommandEncoderCopyTextureToBuffer")


def load_native(functions, constants=(), structs=()):
    """(ffi, lib, error-capturing lib) of wgpu-py's wgpu-native backend when it is the
    version checked here (``RAW_VERSIONS``) and has every function, constant and struct
    named; else None (callers then use the public API)."""
    try:
        import wgpu
        from wgpu.backends.wgpu_native._api import libf
        from wgpu.backends.wgpu_native._ffi import ffi, lib
    except Exception:  # noqa: BLE001 - another backend or layout: use the public API
        return None
    if getattr(wgpu, "__version__", None) not in RAW_VERSIONS:
        return None
    if not all(hasattr(lib, n) for n in (*functions, *constants)):
        return None
    try:
        for struct in structs:
            ffi.new(struct, 1) if struct.endswith("[]") else ffi.new(struct)
    except Exception:  # noqa: BLE001 - the structs changed: use the public API
        return None
    return ffi, lib, libf


def _native():
    """``load_native`` for this module's calls, finish and submit also through the
    error-capturing lib."""
    found = load_native(_FUNCTIONS, ("WGPUTextureAspect_All",),
                        ("WGPUCommandEncoderDescriptor *", "WGPUCommandBufferDescriptor *",
                         "WGPUComputePassDescriptor *", "WGPUCommandBuffer[]",
                         "WGPUTexelCopyTextureInfo *", "WGPUTexelCopyBufferLayout *",
                         "WGPUTexelCopyBufferInfo *", "WGPUExtent3D *"))
    if found is None or not all(hasattr(found[2], n) for n in _FUNCTIONS):
        return None
    return found


NATIVE = _native()


class RawRun:
    """Encoders of one device's replayed runs: ``begin`` one, record into it (``encoder``:
    the raw handle; compute passes through ``begin_compute``/``end_compute``, render passes
    by ``rawpass.PassList``), ``submit``."""

    def __init__(self, device, queue):
        ffi, lib, _ = NATIVE
        self._device, self._queue = device._internal, queue._internal
        # zeroed descriptors: no label, no timestamp writes, no chained structs
        self._enc_desc = ffi.new("WGPUCommandEncoderDescriptor *")
        self._cb_desc = ffi.new("WGPUCommandBufferDescriptor *")
        self._pass_desc = ffi.new("WGPUComputePassDescriptor *")
        self._cbs = ffi.new("WGPUCommandBuffer[]", 1)
        self._from_buffer = ffi.from_buffer
        self.encoder = None

    def write(self, buffer, array: np.ndarray) -> None:
        """Queue a write of all of ``array`` (C-contiguous) at the start of ``buffer``."""
        _, lib, _ = NATIVE
        lib.wgpuQueueWriteBuffer(self._queue, buffer._internal, 0,
                                 self._from_buffer(array), array.nbytes)

    def texture_target(self, texture, width: int, height: int) -> tuple:
        """The descriptors of whole-texture writes to an rgba32float ``texture``
        (``write_texture``'s ``target``)."""
        ffi, lib, _ = NATIVE
        dst = ffi.new("WGPUTexelCopyTextureInfo *")
        dst.texture = texture._internal
        dst.mipLevel = 0
        dst.origin.x = dst.origin.y = dst.origin.z = 0
        dst.aspect = lib.WGPUTextureAspect_All
        layout = ffi.new("WGPUTexelCopyBufferLayout *")
        layout.offset = 0
        layout.bytesPerRow = width * 16
        layout.rowsPerImage = height
        size = ffi.new("WGPUExtent3D *")
        size.width, size.height, size.depthOrArrayLayers = width, height, 1
        return texture, dst, layout, size  # (the texture: kept alive with its descriptors)

    def write_texture(self, target: tuple, texels: np.ndarray) -> None:
        """Queue a write of ``texels`` (C-contiguous (height, width, 4) float32) into all of
        the texture of ``target`` (from ``texture_target``)."""
        _, lib, _ = NATIVE
        _, dst, layout, size = target
        lib.wgpuQueueWriteTexture(self._queue, dst, self._from_buffer(texels), texels.nbytes,
                                  layout, size)

    def begin(self):
        """A new command encoder (the raw handle, also kept as ``encoder``)."""
        _, lib, _ = NATIVE
        self.encoder = lib.wgpuDeviceCreateCommandEncoder(self._device, self._enc_desc)
        return self.encoder

    def begin_compute(self):
        _, lib, _ = NATIVE
        return lib.wgpuCommandEncoderBeginComputePass(self.encoder, self._pass_desc)

    @staticmethod
    def end_compute(cpass) -> None:
        _, lib, _ = NATIVE
        lib.wgpuComputePassEncoderEnd(cpass)
        lib.wgpuComputePassEncoderRelease(cpass)

    def copy_buffer(self, src, src_offset: int, dst, dst_offset: int, size: int) -> None:
        _, lib, _ = NATIVE
        lib.wgpuCommandEncoderCopyBufferToBuffer(self.encoder, src._internal, src_offset,
                                                 dst._internal, dst_offset, size)

    def copy_texture(self, texture, width: int, height: int, dst, bytes_per_row: int) -> None:
        """Copy all of an rgba32float ``texture`` into ``dst`` from its start, rows of
        ``bytes_per_row`` (a multiple of 256)."""
        ffi, lib, _ = NATIVE
        src = ffi.new("WGPUTexelCopyTextureInfo *")
        src.texture = texture._internal
        src.aspect = lib.WGPUTextureAspect_All  # (mip level and origin: zero)
        to = ffi.new("WGPUTexelCopyBufferInfo *")
        to.layout.bytesPerRow, to.layout.rowsPerImage = bytes_per_row, height
        to.buffer = dst._internal
        size = ffi.new("WGPUExtent3D *")
        size.width, size.height, size.depthOrArrayLayers = width, height, 1
        lib.wgpuCommandEncoderCopyTextureToBuffer(self.encoder, src, to, size)

    def resolve(self, query_set, count: int, dst) -> None:
        _, lib, _ = NATIVE
        lib.wgpuCommandEncoderResolveQuerySet(self.encoder, query_set._internal, 0, count,
                                              dst._internal, 0)

    def submit(self) -> None:
        """Finish the encoder and submit it (errors raised by wgpu-py's checked calls)."""
        _, lib, libf = NATIVE
        enc, self.encoder = self.encoder, None
        try:
            cb = libf.wgpuCommandEncoderFinish(enc, self._cb_desc)
        finally:
            lib.wgpuCommandEncoderRelease(enc)
        try:
            self._cbs[0] = cb
            libf.wgpuQueueSubmit(self._queue, 1, self._cbs)
        finally:
            lib.wgpuCommandBufferRelease(cb)

    def run(self, record, stamps: tuple | None = None, copies=()) -> None:
        """``begin`` an encoder, ``record(encoder)`` into it, resolve ``stamps`` ((query
        set, count, buffer), when given), copy ``copies`` ((source, destination, bytes):
        whole buffers from their start) and ``submit``; an error drops the encoder."""
        self.begin()
        try:
            record(self.encoder)
            if stamps:
                self.resolve(*stamps)
            for src, dst, size in copies:
                self.copy_buffer(src, 0, dst, 0, size)
        except BaseException:
            self.abandon()
            raise
        self.submit()

    def abandon(self) -> None:
        """Drop an encoder that will not be submitted (an error while recording)."""
        if self.encoder is not None:
            _, lib, _ = NATIVE
            lib.wgpuCommandEncoderRelease(self.encoder)
            self.encoder = None
