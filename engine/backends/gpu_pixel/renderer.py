"""Render-pass machinery: pipelines, a texture pool, one command encoder per batch, timestamps
(pipeline cache and timestamp queries are gpu_common's, shared with GPU_COMPUTE).

Every layer is one or more render passes that draw a full-screen triangle into an
``rgba32float`` target; the op is the fragment shader. Nothing here creates a compute
pipeline. All methods run on the engine thread.
"""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np

from engine.backends.gpu_common import gpu_errors
from engine.backends.gpu_common.pipelines import pipeline_cache
from engine.backends.gpu_common.timestamps import Timestamps
from engine.backends.gpu_pixel.programs import (  # noqa: F401 - re-exported
    FORMAT,
    MAX_CACHED_UNIFORMS,
    PARAM_WORDS,
    RenderProgram,
    pack_params,
)

MAX_INPUTS = 8


class Tex:
    """A texture of the pool with its default view."""

    __slots__ = ("texture", "view", "width", "height")

    def __init__(self, texture, width: int, height: int):
        self.texture, self.width, self.height = texture, width, height
        self.view = texture.create_view()


class Renderer:
    """Records render passes into a command encoder and submits them on ``flush``."""

    def __init__(self, dev):
        import wgpu

        self.wgpu = wgpu
        self.dev = dev
        self.device = dev.device
        self.queue = dev.queue
        self.max_dim = dev.max_texture_2d
        # textures free since before the last submit (safe for queue writes) and free
        # since then (still read by recorded passes: fine for later passes, not for writes)
        self._clean: dict[tuple[int, int], list[Tex]] = {}
        self._dirty: list[Tex] = []
        self._all: list[Tex] = []
        self._encoder = None
        self.timestamps = dev.has_timestamps
        self._stamps = Timestamps(dev) if dev.has_timestamps else None
        self.pipelines = pipeline_cache(self.device)
        self.dummy = self._new_texture(1, 1)
        # A run of a plan draws the same passes as the run before it: same parameters, and
        # the pool hands out the same textures. Uniform buffers (immutable, keyed by their
        # bytes) and bind groups (keyed by layout, uniform buffer and textures, which live
        # until close) are therefore made once, and a repeated run records passes only.
        self._uniforms: dict[bytes, object] = {}
        self._groups: dict[tuple, object] = {}
        #: a recording.PixelRecorder while a run is recorded for replay
        self.rec = None
        #: textures a replay holds for its outputs: {id: called when a tensor releases it}
        self.owned: dict[int, object] = {}

    # -- textures ----------------------------------------------------------------------------
    def _new_texture(self, width: int, height: int) -> Tex:
        usage = self.wgpu.TextureUsage
        with gpu_errors(f"allocating a {width}x{height} texture"):
            tex = self.device.create_texture(
                size=(width, height, 1), format=FORMAT, dimension="2d",
                usage=usage.RENDER_ATTACHMENT | usage.TEXTURE_BINDING | usage.COPY_SRC
                | usage.COPY_DST)
        t = Tex(tex, width, height)
        self._all.append(t)
        return t

    def alloc(self, width: int, height: int, for_write: bool = False) -> Tex:
        """A texture of this size; ``for_write`` ones get queue writes, so never a dirty one."""
        key = (width, height)
        tex = None
        if not for_write:
            for i, t in enumerate(self._dirty):
                if (t.width, t.height) == key:
                    tex = self._dirty.pop(i)
                    break
        if tex is None:
            free = self._clean.get(key)
            tex = free.pop() if free else self._new_texture(width, height)
        if self.rec is not None:
            self.rec.took(tex)
        return tex

    def release(self, tex: Tex) -> None:
        back = self.owned.get(id(tex))
        if back is not None:  # a replay's output texture: the replay reuses it
            back(tex)
            return
        self._dirty.append(tex)

    # -- textures held by replays ------------------------------------------------------------
    def take_out(self, textures: list[Tex]) -> None:
        """Remove ``textures`` from the free lists: a replay keeps them."""
        ids = {id(t) for t in textures}
        self._dirty = [t for t in self._dirty if id(t) not in ids]
        for key, free in self._clean.items():
            self._clean[key] = [t for t in free if id(t) not in ids]

    def give_back(self, textures: list[Tex]) -> None:
        """Textures a dropped replay held (free once the work submitted so far is done)."""
        self._dirty.extend(textures)

    def new_owned(self, width: int, height: int) -> Tex:
        """A new texture outside the pool (for a replay's outputs)."""
        return self._new_texture(width, height)

    def write(self, tex: Tex, texels: np.ndarray, source=None) -> None:
        """Queue a write of all of ``tex`` (``source``: the host array it was packed from)."""
        if self.rec is not None:
            self.rec.wrote(tex, texels, source)
        with gpu_errors("uploading a tensor"):
            self.queue.write_texture({"texture": tex.texture, "origin": (0, 0, 0)}, texels,
                                     {"offset": 0, "bytes_per_row": tex.width * 16},
                                     (tex.width, tex.height, 1))

    # -- pipelines ---------------------------------------------------------------------------
    def pipeline(self, shader: str, n_tex: int, targets: int = 1, **params):
        """The render pipeline of ``shaders/pixel/<shader>.wgsl`` specialised by ``params``
        (writing ``targets`` colour targets)."""
        return self.pipelines.get(RenderProgram(shader, n_tex, tuple(sorted(params.items())),
                                                targets))

    # -- passes ------------------------------------------------------------------------------
    def _enc(self):
        if self._encoder is None:
            self._encoder = self.device.create_command_encoder()
        return self._encoder

    def _timestamp_writes(self, label: str):
        return self._stamps.writes(label) if self.timestamps else None

    def draw(self, label: str, pipe, out: Tex, textures: list[Tex], params: bytes) -> None:
        """Record one render pass: ``pipe``'s fragment shader over all of ``out``."""
        pipeline, bgl, n_tex = pipe
        if self.rec is not None:
            self.rec.drew(label, pipe, out, textures, params)
        with gpu_errors(f"recording {label}"):
            group = self.bind_group(bgl, n_tex, textures, params)
            rp = self._enc().begin_render_pass(
                color_attachments=[{"view": out.view, "load_op": "clear", "store_op": "store",
                                    "clear_value": (0.0, 0.0, 0.0, 0.0)}],
                timestamp_writes=self._timestamp_writes(label))
            rp.set_pipeline(pipeline)
            rp.set_bind_group(0, group)
            rp.draw(3)
            rp.end()

    def bind_group(self, bgl, n_tex: int, textures: list[Tex], params: bytes):
        ubuf = self._uniforms.get(params)
        if ubuf is None:
            if len(self._uniforms) >= MAX_CACHED_UNIFORMS:
                self._uniforms.clear()
                self._groups.clear()
            ubuf = self.device.create_buffer_with_data(data=params,
                                                       usage=self.wgpu.BufferUsage.UNIFORM)
            self._uniforms[params] = ubuf
        key = (id(bgl), id(ubuf), *(id(t) for t in textures))
        group = self._groups.get(key)
        if group is None:
            views = [t.view for t in textures] + [self.dummy.view] * (n_tex - len(textures))
            entries = [{"binding": 0, "resource": {"buffer": ubuf, "offset": 0,
                                                   "size": len(params)}}]
            entries += [{"binding": 1 + k, "resource": v} for k, v in enumerate(views)]
            group = self._groups[key] = self.device.create_bind_group(layout=bgl,
                                                                      entries=entries)
        return group

    def copy_rows(self, src: Tex, dst: Tex, y: int) -> None:
        """Record a copy of all of ``src`` into ``dst`` from row ``y`` on (a transfer, not a
        pass: it keeps the rest of ``dst``, in order with the passes around it)."""
        if self.rec is not None:
            self.rec.copied(src, dst, y)
        with gpu_errors("copying a texture"):
            self.record_copy(self._enc(), src, dst, y)

    @staticmethod
    def record_copy(encoder, src: Tex, dst: Tex, y: int) -> None:
        encoder.copy_texture_to_texture({"texture": src.texture, "origin": (0, 0, 0)},
                                        {"texture": dst.texture, "origin": (0, y, 0)},
                                        (src.width, src.height, 1))

    def flush(self) -> None:
        """Submit what was recorded; start reading its timestamps back."""
        if self._encoder is None:
            return
        enc, self._encoder = self._encoder, None
        with gpu_errors("submitting GPU work"):
            resolved = self._stamps.resolve(enc) if self._stamps else None
            self.queue.submit([enc.finish()])
        for t in self._dirty:
            self._clean.setdefault((t.width, t.height), []).append(t)
        self._dirty = []
        if resolved is not None:
            self._stamps.read(resolved)

    def read_texture(self, tex: Tex, convert) -> Future:
        """Copy ``tex`` to a staging buffer and map it; ``convert`` gets (height, width, 4)."""
        self.flush()
        staging = self.dev.staging_buffer(texture_read_bytes(tex))
        with gpu_errors("reading a tensor back"):
            enc = self.device.create_command_encoder()
            enc.copy_texture_to_buffer(
                {"texture": tex.texture, "origin": (0, 0, 0)},
                {"buffer": staging, "offset": 0, "bytes_per_row": padded_row(tex),
                 "rows_per_image": tex.height},
                (tex.width, tex.height, 1))
            self.queue.submit([enc.finish()])
        return self.read_staged_texture(tex, staging, convert)

    def read_staged_texture(self, tex: Tex, staging, convert, now: bool = False):
        """Map ``staging`` (from ``dev.staging_buffer``, filled with ``tex`` by submitted
        work, rows padded to ``padded_row``); ``convert`` gets (height, width, 4) float32,
        and the buffer returns to the pool. A future of the result, or with ``now`` the
        result itself (mapped and waited for on the calling thread)."""
        row, padded = tex.width * 16, padded_row(tex)
        nbytes = texture_read_bytes(tex)

        def unpad(raw) -> np.ndarray:
            # ``raw`` is the mapped memory itself: the copy here is the only one made
            rows = np.frombuffer(raw, dtype=np.uint8)[:nbytes].reshape(tex.height, padded)
            texels = np.array(rows[:, :row], copy=True)
            return convert(texels.view(np.float32).reshape(tex.height, tex.width, 4))

        with gpu_errors("reading back from the GPU"):
            if now:
                return self.dev.reader.read_now(staging, unpad, reuse=True, copy=False)
            return self.dev.reader.read(staging, unpad, reuse=True, copy=False)

    # -- timings -----------------------------------------------------------------------------
    def take_timings(self) -> dict[str, float]:
        """Milliseconds per label of everything flushed since the last call (waits for it)."""
        times = self._stamps.collect() if self._stamps else None
        return times.result() if times is not None else {}

    def add_timings(self, times: Future) -> None:
        """Merge a future of {layer: GPU ms} (a replay's stamps) into this run's."""
        if self._stamps:
            self._stamps.add(times)

    def discard_timings(self) -> None:
        if self._stamps:
            self._stamps.begin_run()

    def close(self) -> None:
        self.flush()
        for t in self._all:
            try:
                t.texture.destroy()
            except Exception:  # already gone with the device
                pass
        self._all, self._clean, self._dirty = [], {}, []
        self.owned, self.rec = {}, None
        self._uniforms, self._groups = {}, {}


def padded_row(tex: Tex) -> int:
    """Bytes a row of ``tex`` takes in a buffer it is copied to (a multiple of 256)."""
    return (tex.width * 16 + 255) // 256 * 256


def texture_read_bytes(tex: Tex) -> int:
    """Bytes of a buffer that all of ``tex`` is copied to."""
    return padded_row(tex) * tex.height
