"""Recording a fixed list of render passes with as little Python per pass as possible.

wgpu-py's ``begin_render_pass`` builds its C descriptor (color attachment, clear colour,
timestamp writes, label) in Python for every pass, then wraps the pass encoder in a Python
object whose methods each go through an error-capturing proxy: ~80 µs a pass on this
machine. A replayed plan draws the same passes every run, so ``PassList`` builds each pass's
``WGPURenderPassDescriptor`` once and records a pass with five direct wgpu-native calls.

This is the only module that touches wgpu-py's internals (its cffi ``ffi`` and ``lib``). It
does so only for the wgpu version it was written against (``RAW_VERSIONS``) and when every
function and constant it needs is there; otherwise, or with ``raw=False``, ``PassList``
records the same passes through the public API with pre-built arguments. Errors of raw calls
are not captured per call: they surface at ``finish``/``submit`` (as compute replays do).
"""

from __future__ import annotations

#: wgpu-py versions whose descriptor structs and entry points this module was checked against
RAW_VERSIONS = ("0.32.0",)
_FUNCTIONS = ("wgpuCommandEncoderBeginRenderPass", "wgpuCommandEncoderCopyTextureToTexture",
              "wgpuRenderPassEncoderSetPipeline",
              "wgpuRenderPassEncoderSetBindGroup", "wgpuRenderPassEncoderDraw",
              "wgpuRenderPassEncoderEnd", "wgpuRenderPassEncoderRelease")
_CONSTANTS = ("WGPULoadOp_Clear", "WGPUStoreOp_Store", "WGPU_DEPTH_SLICE_UNDEFINED")


def _native():
    """(ffi, lib) of wgpu-py's wgpu-native backend, or None when raw calls are not safe."""
    try:
        import wgpu
        from wgpu.backends.wgpu_native._ffi import ffi, lib
    except Exception:  # noqa: BLE001 - another backend or layout: use the public API
        return None
    if getattr(wgpu, "__version__", None) not in RAW_VERSIONS:
        return None
    if not all(hasattr(lib, n) for n in _FUNCTIONS + _CONSTANTS):
        return None
    try:
        ffi.new("WGPURenderPassDescriptor *")
        ffi.new("WGPUPassTimestampWrites *")
        ffi.new("WGPURenderPassColorAttachment[]", 1)
        ffi.new("WGPUTexelCopyTextureInfo *")
        ffi.new("WGPUExtent3D *")
    except Exception:  # noqa: BLE001 - the structs changed: use the public API
        return None
    return ffi, lib


NATIVE = _native()


def raw_available() -> bool:
    return NATIVE is not None


class PassList:
    """Render passes drawing a full-screen triangle each, and texture copies between them,
    recorded the same way every time.

    ``passes``: (target view, pipeline, bind group, first timestamp index or -1) for a pass,
    which writes two timestamps (begin, end) into ``query_set`` when ``record`` is asked to
    stamp; (None, source Tex, destination Tex, row) for a copy of all of the source into the
    destination from that row on."""

    def __init__(self, passes: list[tuple], query_set=None, raw: bool = True):
        self.passes = passes
        self.query_set = query_set
        self.raw = raw and NATIVE is not None
        self._plain: list = []
        self._stamped: list = []
        self._keep: list = []  # cffi objects the descriptors point into
        if self.raw:
            self._build_raw()

    def _build_raw(self) -> None:
        ffi, lib = NATIVE
        null = ffi.NULL
        for view, pipeline, group, stamp in self.passes:
            if view is None:
                self._plain.append(self._raw_copy(pipeline, group, stamp))
                self._stamped.append(self._plain[-1])
                continue
            att = ffi.new("WGPURenderPassColorAttachment[]", 1)
            att[0].view = view._internal
            att[0].resolveTarget = null
            att[0].loadOp = lib.WGPULoadOp_Clear
            att[0].storeOp = lib.WGPUStoreOp_Store
            att[0].depthSlice = lib.WGPU_DEPTH_SLICE_UNDEFINED
            att[0].clearValue.r = att[0].clearValue.g = 0.0
            att[0].clearValue.b = att[0].clearValue.a = 0.0
            plain = ffi.new("WGPURenderPassDescriptor *")
            plain.colorAttachmentCount = 1
            plain.colorAttachments = att
            plain.depthStencilAttachment = null
            plain.occlusionQuerySet = null
            plain.timestampWrites = null
            self._keep.append(att)
            self._plain.append((plain, pipeline._internal, group._internal))
            stamped = plain
            if stamp >= 0 and self.query_set is not None:
                writes = ffi.new("WGPUPassTimestampWrites *")
                writes.querySet = self.query_set._internal
                writes.beginningOfPassWriteIndex = stamp
                writes.endOfPassWriteIndex = stamp + 1
                stamped = ffi.new("WGPURenderPassDescriptor *")
                stamped[0] = plain[0]
                stamped.timestampWrites = writes
                self._keep.append(writes)
            self._stamped.append((stamped, pipeline._internal, group._internal))

    def _raw_copy(self, src, dst, y: int) -> tuple:
        ffi, _ = NATIVE
        infos = []
        for tex, row in ((src, 0), (dst, y)):
            info = ffi.new("WGPUTexelCopyTextureInfo *")
            info.texture = tex.texture._internal
            info.mipLevel = 0
            info.origin.x, info.origin.y, info.origin.z = 0, row, 0
            infos.append(info)
        size = ffi.new("WGPUExtent3D *")
        size.width, size.height, size.depthOrArrayLayers = src.width, src.height, 1
        self._keep += infos + [size]
        return (None, infos[0], infos[1], size)

    def record(self, encoder, stamp: bool = False) -> None:
        """Record every pass into ``encoder`` (with timestamps when ``stamp``)."""
        if not self.raw:
            self._record_public(encoder, stamp)
            return
        ffi, lib = NATIVE
        null = ffi.NULL
        enc = encoder._internal
        begin = lib.wgpuCommandEncoderBeginRenderPass
        set_pipeline = lib.wgpuRenderPassEncoderSetPipeline
        set_group = lib.wgpuRenderPassEncoderSetBindGroup
        draw = lib.wgpuRenderPassEncoderDraw
        end = lib.wgpuRenderPassEncoderEnd
        release = lib.wgpuRenderPassEncoderRelease
        copy = lib.wgpuCommandEncoderCopyTextureToTexture
        for desc, pipeline, group, *size in (self._stamped if stamp else self._plain):
            if desc is None:
                copy(enc, pipeline, group, size[0])
                continue
            p = begin(enc, desc)
            set_pipeline(p, pipeline)
            set_group(p, 0, group, 0, null)
            draw(p, 3, 1, 0, 0)
            end(p)
            release(p)

    def _record_public(self, encoder, stamp: bool) -> None:
        qs = self.query_set if stamp else None
        for view, pipeline, group, index in self.passes:
            if view is None:  # a copy: (None, source, destination, row)
                encoder.copy_texture_to_texture(
                    {"texture": pipeline.texture, "origin": (0, 0, 0)},
                    {"texture": group.texture, "origin": (0, index, 0)},
                    (pipeline.width, pipeline.height, 1))
                continue
            writes = None
            if qs is not None and index >= 0:
                writes = {"query_set": qs, "beginning_of_pass_write_index": index,
                          "end_of_pass_write_index": index + 1}
            rp = encoder.begin_render_pass(
                color_attachments=[{"view": view, "load_op": "clear", "store_op": "store",
                                    "clear_value": (0.0, 0.0, 0.0, 0.0)}],
                timestamp_writes=writes)
            rp.set_pipeline(pipeline)
            rp.set_bind_group(0, group)
            rp.draw(3)
            rp.end()
