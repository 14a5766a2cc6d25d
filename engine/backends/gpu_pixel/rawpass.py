"""Recording a fixed list of render passes with as little Python per pass as possible.

wgpu-py's ``begin_render_pass`` builds its C descriptor (color attachment, clear colour,
timestamp writes, label) in Python for every pass, then wraps the pass encoder in a Python
object whose methods each go through an error-capturing proxy: ~80 µs a pass on this
machine. A replayed plan draws the same passes every run, so ``PassList`` builds each pass's
``WGPURenderPassDescriptor`` once and records a pass with five direct wgpu-native calls.

Like ``gpu_common.native`` (whose ``load_native`` it uses), it touches wgpu-py's internals
(its cffi ``ffi`` and ``lib``) only for the wgpu version they were checked against
(``RAW_VERSIONS``) and when every function, constant and struct it needs is there;
otherwise, or with ``raw=False``, ``PassList`` records the same passes through the public
API with pre-built arguments. Errors of raw calls
are not captured per call: they surface at ``finish``/``submit`` (as compute replays do).
"""

from __future__ import annotations

from engine.backends.gpu_common.native import RAW_VERSIONS, load_native  # noqa: F401

_FUNCTIONS = ("wgpuCommandEncoderBeginRenderPass", "wgpuCommandEncoderCopyTextureToTexture",
              "wgpuRenderPassEncoderSetPipeline",
              "wgpuRenderPassEncoderSetBindGroup", "wgpuRenderPassEncoderDraw",
              "wgpuRenderPassEncoderEnd", "wgpuRenderPassEncoderRelease",
              "wgpuRenderPassEncoderSetScissorRect")
_CONSTANTS = ("WGPULoadOp_Clear", "WGPULoadOp_Load", "WGPUStoreOp_Store",
              "WGPU_DEPTH_SLICE_UNDEFINED")


def _native():
    """(ffi, lib) of wgpu-py's wgpu-native backend, or None when raw calls are not safe."""
    found = load_native(_FUNCTIONS, _CONSTANTS,
                        ("WGPURenderPassDescriptor *", "WGPUPassTimestampWrites *",
                         "WGPURenderPassColorAttachment[]", "WGPUTexelCopyTextureInfo *",
                         "WGPUExtent3D *"))
    return None if found is None else found[:2]


NATIVE = _native()


def raw_available() -> bool:
    return NATIVE is not None


class PassList:
    """Render passes drawing a full-screen triangle each, and texture copies between them,
    recorded the same way every time.

    ``passes``: (target view, pipeline, bind group, first timestamp index or -1[, scissor])
    for a pass, which writes two timestamps (begin, end) into ``query_set`` when ``record``
    is asked to stamp; a pass with a scissor ``(width, height)`` has a list of target views
    (several colour targets), draws only that rectangle and keeps the rest of its targets
    (load, not clear). (None, source Tex, destination Tex, (x, y), width or None) is a copy
    of the source's columns [0, width) (all of it for None), all rows, into the destination
    at (x, y)."""

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
        for view, pipeline, group, stamp, *extra in self.passes:
            if view is None:
                self._plain.append(self._raw_copy(pipeline, group, stamp, extra[0]))
                self._stamped.append(self._plain[-1])
                continue
            scissor = extra[0] if extra else None
            views = view if scissor is not None else [view]
            att = ffi.new("WGPURenderPassColorAttachment[]", len(views))
            for k, v in enumerate(views):
                att[k].view = v._internal
                att[k].resolveTarget = null
                att[k].loadOp = lib.WGPULoadOp_Clear if scissor is None else lib.WGPULoadOp_Load
                att[k].storeOp = lib.WGPUStoreOp_Store
                att[k].depthSlice = lib.WGPU_DEPTH_SLICE_UNDEFINED
                att[k].clearValue.r = att[k].clearValue.g = 0.0
                att[k].clearValue.b = att[k].clearValue.a = 0.0
            plain = ffi.new("WGPURenderPassDescriptor *")
            plain.colorAttachmentCount = len(views)
            plain.colorAttachments = att
            plain.depthStencilAttachment = null
            plain.occlusionQuerySet = null
            plain.timestampWrites = null
            self._keep.append(att)
            self._plain.append((plain, pipeline._internal, group._internal, scissor))
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
            self._stamped.append((stamped, pipeline._internal, group._internal, scissor))

    def _raw_copy(self, src, dst, at: tuple[int, int], width: int | None) -> tuple:
        ffi, _ = NATIVE
        infos = []
        for tex, (x, y) in ((src, (0, 0)), (dst, at)):
            info = ffi.new("WGPUTexelCopyTextureInfo *")
            info.texture = tex.texture._internal
            info.mipLevel = 0
            info.origin.x, info.origin.y, info.origin.z = x, y, 0
            infos.append(info)
        size = ffi.new("WGPUExtent3D *")
        size.width = src.width if width is None else width
        size.height, size.depthOrArrayLayers = src.height, 1
        self._keep += infos + [size]
        return (None, infos[0], infos[1], size)

    def record(self, encoder, stamp: bool = False) -> None:
        """Record every pass and copy into ``encoder`` (with timestamps when ``stamp``): a
        wgpu-py command encoder, or with ``raw`` also a raw wgpu-native one."""
        if not self.raw:
            self._record_public(encoder, stamp)
            return
        ffi, lib = NATIVE
        null = ffi.NULL
        enc = getattr(encoder, "_internal", encoder)
        begin = lib.wgpuCommandEncoderBeginRenderPass
        set_pipeline = lib.wgpuRenderPassEncoderSetPipeline
        set_group = lib.wgpuRenderPassEncoderSetBindGroup
        draw = lib.wgpuRenderPassEncoderDraw
        end = lib.wgpuRenderPassEncoderEnd
        release = lib.wgpuRenderPassEncoderRelease
        scissor_rect = lib.wgpuRenderPassEncoderSetScissorRect
        copy = lib.wgpuCommandEncoderCopyTextureToTexture
        for desc, pipeline, group, extra in (self._stamped if stamp else self._plain):
            if desc is None:  # a copy: (None, source info, destination info, size)
                copy(enc, pipeline, group, extra)
                continue
            p = begin(enc, desc)
            set_pipeline(p, pipeline)
            set_group(p, 0, group, 0, null)
            if extra is not None:
                scissor_rect(p, 0, 0, extra[0], extra[1])
            draw(p, 3, 1, 0, 0)
            end(p)
            release(p)

    def _record_public(self, encoder, stamp: bool) -> None:
        qs = self.query_set if stamp else None
        for view, pipeline, group, index, *extra in self.passes:
            if view is None:  # a copy: (None, source, destination, (x, y), width)
                width = pipeline.width if extra[0] is None else extra[0]
                encoder.copy_texture_to_texture(
                    {"texture": pipeline.texture, "origin": (0, 0, 0)},
                    {"texture": group.texture, "origin": (*index, 0)},
                    (width, pipeline.height, 1))
                continue
            scissor = extra[0] if extra else None
            writes = None
            if qs is not None and index >= 0:
                writes = {"query_set": qs, "beginning_of_pass_write_index": index,
                          "end_of_pass_write_index": index + 1}
            if scissor is None:
                targets = [{"view": view, "load_op": "clear", "store_op": "store",
                            "clear_value": (0.0, 0.0, 0.0, 0.0)}]
            else:
                targets = [{"view": v, "load_op": "load", "store_op": "store"} for v in view]
            rp = encoder.begin_render_pass(color_attachments=targets, timestamp_writes=writes)
            rp.set_pipeline(pipeline)
            rp.set_bind_group(0, group)
            if scissor is not None:
                rp.set_scissor_rect(0, 0, *scissor)
            rp.draw(3)
            rp.end()
