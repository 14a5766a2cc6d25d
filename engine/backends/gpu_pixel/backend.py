"""GpuPixelBackend: tensors in rgba32float textures, layers as render passes."""

from __future__ import annotations

import math
import os
from concurrent.futures import Future
from typing import Any

import numpy as np

from engine.backends.base import Backend, BackendType
from engine.backends.gpu_common import get_device, gpu_errors
from engine.backends.gpu_common.epilogues import EpilogueTable
from engine.backends.gpu_pixel.handles import PixelTensor
from engine.backends.gpu_pixel.kernels import KERNELS
from engine.backends.gpu_pixel.kernels_conv import matrix_fit_reason
from engine.backends.gpu_pixel.layout import fit_reason, layout_of, pack, unpack
from engine.backends.gpu_pixel.recording import raw_host
from engine.backends.gpu_pixel.renderer import (
    MAX_INPUTS,
    Renderer,
    Tex,
    pack_params,
    texture_read_bytes,
)
from engine.backends.gpu_pixel.replay import PixelReplays
from engine.errors import EngineError, GPUError, KernelError
from engine.model import Layer
from engine.ops import op_for
from engine.ops.base import Meta


class GpuPixelBackend(Backend):
    """Runs layers as fragment shaders drawing into ``rgba32float`` textures (no compute)."""

    type = BackendType.GPU_PIXEL
    kernels = KERNELS

    def __init__(self, adapter: str | None = None, timestamps: bool = True,
                 replay: bool | None = None):
        """``replay``: record a plan's passes once and replay them in later runs of its
        input signature (``replay.py``)."""
        self.dev = get_device(adapter)
        self.device = self.dev.device
        self.r = Renderer(self.dev)
        self.r.timestamps = self.r.timestamps and timestamps
        self.max_dim = self.r.max_dim
        #: statistics of long rows (Softmax, LayerNormalization, ReduceSum/Mean over the last
        #: axis) in two levels of passes on GPUs ("workgroup"), one fragment per row on CPU
        #: adapters ("thread"); ENGINE_GPU_ROWS overrides, as for GPU_COMPUTE's rows
        rows = os.environ.get("ENGINE_GPU_ROWS") or (
            "thread" if self.dev.info.get("adapter_type") == "CPU" else "workgroup")
        self.split_rows = rows == "workgroup"
        #: convolution and MatMul passes: a fragment computes up to 8 output columns, one
        #: colour target each, the extra targets' columns copied into place after the pass
        #: ("multi"), or one ("one": no copies; on lavapipe 30-45% less host time and up to
        #: 1.6x the GPU time, see docs/PERFORMANCE.md); ENGINE_GPU_PIXEL_TARGETS overrides
        self.targets = os.environ.get("ENGINE_GPU_PIXEL_TARGETS") or "multi"
        self.label = ""
        self._closed = False
        self.replay = replay if replay is not None else \
            os.environ.get("ENGINE_GPU_REPLAY", "1") != "0"
        self._replays = PixelReplays(self)
        #: MatMul epilogues (a bias Add, an activation) drawn in the MatMul's pass
        self.epilogues = EpilogueTable()
        self._constants: dict[str, np.ndarray] = {}
        self._rows: dict[tuple, PixelTensor] = {}  # bias constants as [N] textures

    @property
    def _rec(self):
        """The recording.PixelRecorder of the run being recorded (the renderer reports to it)."""
        return self.r.rec

    @_rec.setter
    def _rec(self, rec) -> None:
        self.r.rec = rec

    # -- placement ---------------------------------------------------------------------------
    def supports(self, layer: Layer, metas: list[Meta | None]) -> str | None:
        reason = self.kernels.unsupported_reason(layer, metas)
        if reason is not None:
            return reason
        # empty parameter inputs (e.g. Resize's roi) are fine; kernels check their tensors
        skip = set()
        if layer.op_type == "Conv" and len(metas) > 1 and metas[1] is not None \
                and metas[1].value is not None:
            # CPU-known weights are re-wrapped into a matrix texture with its own limit
            skip.add(1)
            why = matrix_fit_reason(layer, metas, self.max_dim)
            if why is not None:
                return why
        # symbolic dims (at plan time) are checked when the layer is scheduled
        shapes = [m.shape for i, m in enumerate(metas) if m is not None and i not in skip
                  and m.dtype == np.float32 and _concrete(m.shape) and m.size]
        if all(m is not None for m in metas[:len(layer.inputs)] if m is not None):
            op = op_for(layer)
            try:
                outs = op.infer(layer, list(metas)) if op is not None else []
            except Exception:  # shapes not known yet at plan time: decided when scheduled
                outs = []
            shapes += [m.shape for m in outs]
        for shape in shapes:
            if not _concrete(shape):
                continue
            why = fit_reason(shape, self.max_dim)
            if why is not None:
                return why
        return None

    # -- memory ------------------------------------------------------------------------------
    def upload(self, array: np.ndarray) -> PixelTensor:
        self._check_open()
        lay = None
        if isinstance(array, np.ndarray) and array.dtype == np.float32 and \
                fit_reason(array.shape, self.max_dim) is None:
            # the texture is written on first use (tex_of): weights that kernels re-wrap
            # never need their plain layout
            lay = layout_of(array.shape)
        rec = self.r.rec
        handle = rec.feed_handle(lay, array) if rec is not None else None
        return handle if handle is not None else PixelTensor(lay, None, array)

    def host_dtype(self, handle: PixelTensor):
        """The dtype of ``handle``'s host array (None: it has none)."""
        host = raw_host(handle)
        return None if host is None else host.dtype

    def as_float32(self, handle: PixelTensor) -> PixelTensor:
        """A float32 copy of ``handle``'s host array, uploaded as a new handle."""
        array = np.ascontiguousarray(raw_host(handle), dtype=np.float32)
        if self.r.rec is not None:
            self.r.rec.converted(handle, array, np.float32)
        return self.upload(array)

    def _upload_texture(self, handle: PixelTensor) -> None:
        lay, host = handle.layout, raw_host(handle)
        rows = _rows_shape(host.shape, self.max_dim) if host.size >= ROWS_UPLOAD_MIN else None
        if rows is not None:
            # texels in memory order: no packing on the host; a GPU pass lays them out
            from engine.backends.gpu_pixel.kernels_shape import flat_copy

            flat = PixelTensor(layout_of(rows), None, host.reshape(rows))
            if self.r.rec is not None:
                self.r.rec.converted(handle, raw_host(flat), None, rows)
            self._upload_texture(flat)
            handle.tex = flat_copy(self, flat, host.shape).tex
            self.r.release(flat.tex)
            return
        tex = self.r.alloc(lay.width, lay.height, for_write=True)
        self.r.write(tex, pack(host), source=host)
        handle.tex = tex

    def tex_of(self, handle: PixelTensor) -> Tex:
        """The texture of ``handle`` (uploading its host array if it has none yet)."""
        if handle.tex is None:
            host = raw_host(handle)
            if host is None:
                raise KernelError("a tensor was used after it was freed")
            why = fit_reason(host.shape, self.max_dim)
            if host.dtype != np.float32 or why is not None:
                raise KernelError(f"cannot hold {host.dtype}{list(host.shape)} in a texture"
                                  + (f": {why}" if why else ""))
            handle.layout = layout_of(host.shape)
            self._upload_texture(handle)
        return handle.tex

    def download(self, handle: PixelTensor, meta: Meta) -> np.ndarray:
        return self.request_download(handle, meta).result()

    def download_staged(self, handle: PixelTensor | None, meta: Meta) -> np.ndarray | None:
        """A replayed output that its run already copied out (``EarlyRead``), read on the
        calling thread; None when there is no such copy (``request_download`` reads it)."""
        early = handle.early if isinstance(handle, PixelTensor) else None
        if self._closed or early is None or early.staging is None or handle.tex is None:
            return None
        handle.early = None
        staging = early.taken(self.dev, texture_read_bytes(handle.tex))
        if staging is None:
            return None
        return self.r.read_staged_texture(handle.tex, staging,
                                          _texel_converter(handle.layout.shape, meta.dtype),
                                          now=True)

    def request_download(self, handle: PixelTensor | None, meta: Meta) -> Future:
        if handle is None or handle.tex is None:
            fut: Future = Future()
            if handle is None:  # an empty optional value has no data to copy
                fut.set_result(None)
            elif raw_host(handle) is None:
                fut.set_exception(EngineError("the tensor's data was already freed"))
            else:
                fut.set_result(raw_host(handle))
            return fut
        convert = _texel_converter(handle.layout.shape, meta.dtype)
        staging = None
        if handle.early is not None:
            handle.early, early = None, handle.early
            staging = early.taken(self.dev, texture_read_bytes(handle.tex))
        if staging is not None:  # the run that wrote it also copied it out
            return self.r.read_staged_texture(handle.tex, staging, convert)
        return self.r.read_texture(handle.tex, convert)

    def free(self, handle: PixelTensor) -> None:
        if self._closed or not isinstance(handle, PixelTensor):
            return
        if handle.early is not None:
            handle.early, early = None, handle.early
            early.dropped(self.dev)
        for d in handle.derived.values():
            self.free(d)
        handle.derived = {}
        if handle.tex is not None:
            self.r.release(handle.tex)
            handle.tex = None

    # -- running -----------------------------------------------------------------------------
    def prepare(self, model, placement, progress=None, input_metas=None) -> None:
        self._constants = dict(model.constants)
        self.epilogues.use_model(model)

    def run_context(self, placement: dict, keep: set[str], metas: dict | None = None) -> None:
        self.epilogues.begin_run(placement, keep)

    def bias_row(self, name: str, n: int) -> PixelTensor:
        """The bias constant ``name`` (n values, or one for all) as an [n] texture, uploaded
        once."""
        row = self._rows.get((name, n))
        if row is None:
            values = np.asarray(self._constants[name], np.float32).reshape(-1)
            row = self._rows[(name, n)] = self.upload(np.ascontiguousarray(
                np.broadcast_to(values, (n,))))
        return row

    def begin_run(self) -> None:
        self._check_open()
        self.r.discard_timings()

    def run_layer(self, layer: Layer, inputs: list[Any], in_metas: list[Meta | None],
                  out_metas: list[Meta]) -> list[Any]:
        self._check_open()
        kernel = self.kernels.lookup(layer)
        if kernel is None:
            raise KernelError(f"layer {layer.name!r}: GPU_PIXEL has no {layer.op_type} kernel")
        self.label = layer.name
        rec = self.r.rec
        if rec is not None:
            in_metas = rec.watch(layer, in_metas)
            rec.watch_handles(layer, inputs)
            rec.layer = layer.name
        absorbed = self.epilogues.absorbed.pop(id(layer), None)
        if absorbed is not None:  # drawn in its MatMul's pass: the texture moves to its output
            src = inputs[absorbed]
            out, src.tex = PixelTensor(src.layout, src.tex), None
            return [out]
        try:
            with gpu_errors(f"layer {layer.name!r} ({layer.op_type})"):
                outs = kernel.fn(self, layer, inputs, in_metas, out_metas)
        except (EngineError, GPUError):
            raise
        except Exception as exc:
            raise KernelError(f"layer {layer.name!r} ({layer.op_type}) failed on GPU_PIXEL: "
                              f"{type(exc).__name__}: {exc}") from exc
        return list(outs)

    def run(self, shader: str, out_shape: tuple[int, ...], inputs: list[PixelTensor | Tex],
            ints=(), floats=(), n_tex: int | None = None, layouts=None,
            **params) -> PixelTensor:
        """One render pass of ``shaders/pixel/<shader>.wgsl`` producing a new tensor."""
        if len(inputs) > MAX_INPUTS:
            raise KernelError(f"{shader} takes at most {MAX_INPUTS} textures")
        out_lay = layout_of(tuple(out_shape))
        texes, lays = [], []
        for h in inputs:
            if isinstance(h, Tex):
                texes.append(h)
                lays.append(None)
            else:
                texes.append(self.tex_of(h))
                lays.append(h.layout)
        if layouts is not None:
            lays = layouts
        pipe = self.r.pipeline(shader, n_tex if n_tex is not None else len(inputs), **params)
        out = self.r.alloc(out_lay.width, out_lay.height)
        self.r.draw(self.label, pipe, out, texes, pack_params(out_lay, lays, ints, floats))
        return PixelTensor(out_lay, out)

    # -- replay -----------------------------------------------------------------------------
    @property
    def replay_status(self) -> dict:
        """{input signature: "replayed" | "recording" | why the plan is not replayed}."""
        return self._replays.status

    def replay_run(self, worker, plan, feeds: dict, futures: dict, keep: set):
        """The run loop of a replayed ``plan``, or None: the worker runs its normal loop
        (which this call may have armed to record the run for the next ones)."""
        return self._replays.start(worker, plan, feeds, futures, keep)

    def end_run(self, outputs: dict) -> None:
        """A normal run handed its outputs over (``outputs``: {name: Slot})."""
        self._replays.finish(outputs)

    def flush(self) -> None:
        if not self._closed:
            self.r.flush()

    def collect_timings(self) -> dict[str, float] | None:
        if self._closed or not self.r.timestamps:
            return None
        return self.r.take_timings() or None

    def close(self) -> None:
        if not self._closed:
            self.r.rec = None
            self._replays.clear()
            self.r.close()
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise EngineError("the GPU_PIXEL backend is closed")


#: host arrays from this many elements, of rank 3 or more (channels are not the texels'
#: memory order), are uploaded as rows of their last axis and laid out by a GPU pass:
#: packing 1x3x640x640 cost the host 1.1-2.5 ms a run, the GPU pass ~1% of db's run
ROWS_UPLOAD_MIN = 1 << 15


def _rows_shape(shape, max_dim: int) -> tuple[int, int] | None:
    """(rows, last axis) when ``shape`` can travel as rows of 4-element texels, else None."""
    if len(shape) < 3 or shape[-1] % 4 or shape[-1] // 4 > max_dim:
        return None
    rows = int(math.prod(shape[:-1]))
    return (rows, int(shape[-1])) if rows <= max_dim else None


def _concrete(shape) -> bool:
    return all(isinstance(d, int) for d in shape)


def _texel_converter(shape: tuple[int, ...], dtype):
    """Texels read back (height, width, 4) -> the tensor of ``shape`` and ``dtype``."""

    def convert(texels: np.ndarray) -> np.ndarray:
        arr = unpack(texels, shape)
        return arr if arr.dtype == dtype else arr.astype(dtype)

    return convert
