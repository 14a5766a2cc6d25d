"""GPU_COMPUTE: layers as WGSL compute dispatches recorded into one encoder per schedule.

``run_layer`` only records (``encoding``); ``flush`` submits without waiting (the worker
calls it before a CPU fallback reads back and at the end of a run); reads go through
``readout``. Replayed runs record nothing: ``replay`` re-issues a run recorded once.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any

import numpy as np

from engine.backends.base import Backend, BackendType
from engine.backends.gpu_common import get_device, gpu_errors
from engine.backends.gpu_common.epilogues import EpilogueTable
from engine.backends.gpu_common.timestamps import Timestamps
from engine.backends.gpu_compute.attention import AttentionTable, Pending
from engine.backends.gpu_compute.encoding import Encoding
from engine.backends.gpu_compute.memory import BufferPool, GpuTensor, storage_bytes
from engine.backends.gpu_compute.pipelines import pipeline_cache
from engine.backends.gpu_compute.readout import Readout
from engine.backends.gpu_compute.registry import KERNELS, Limits, limits_in_force
from engine.backends.gpu_compute.replay import Replays
from engine.errors import BackendUnavailableError, GPUError, KernelError
from engine.model import Layer
from engine.ops import op_for
from engine.ops.base import Meta


class GpuComputeBackend(Encoding, Readout, Backend):
    """WGSL compute shaders on the process-wide wgpu device."""

    type = BackendType.GPU_COMPUTE
    kernels = KERNELS

    def __init__(self, adapter: str | None = None, timestamps: bool = True,
                 max_binding: int | None = None, replay: bool | None = None):
        """``adapter``: substring of the adapter name (default: ``ENGINE_GPU_ADAPTER``, else
        high-performance first); ``max_binding``: lower the storage-binding limit (to plan
        for a smaller GPU); ``timestamps``: per-layer GPU timing where the adapter has it;
        ``replay``: record a plan's dispatches once and replay them in later runs of its
        input signature (default on; ``ENGINE_GPU_REPLAY=0`` turns it off)."""
        try:
            self.gpu = get_device(adapter)
        except BackendUnavailableError as exc:
            raise BackendUnavailableError(f"GPU_COMPUTE unavailable: {exc}") from exc
        wgpu = self.gpu.wgpu
        self.device, self.queue = self.gpu.device, self.gpu.queue
        #: this backend's device limits, current while it checks and records its layers
        self.limits = Limits(max_binding=min(self.gpu.max_storage_binding,
                                             max_binding or self.gpu.max_storage_binding))
        self._storage_usage = (wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
                               | wgpu.BufferUsage.COPY_DST)
        self._uniform_usage = wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
        self.pool = BufferPool(self._new_buffer, self.limits.max_binding)
        self.pipelines = pipeline_cache(self.device)
        self._timestamps = Timestamps(self.gpu) if timestamps and self.gpu.has_timestamps \
            else None
        #: "im2col" then matmul is faster on CPU adapters (docs/PERFORMANCE.md; with few
        #: output channels there, the direct "rows" kernel); the "implicit" GEMM needs no
        #: scratch memory and suits GPUs. ENGINE_GPU_CONV overrides (also with "rows").
        self.conv_strategy = os.environ.get("ENGINE_GPU_CONV") or (
            "im2col" if self.gpu.info.get("adapter_type") == "CPU" else "implicit")
        #: "blocked" (registers only, caches serve the reuse) on every adapter: barriers are
        #: costly on CPU adapters, and on an H100 it ran the transformer families 2x faster
        #: than "tiled" (64x64 tiles in workgroup memory leave most of a big GPU idle on
        #: these sizes: 12 workgroups for ViT's 197 x 192 products); ENGINE_GPU_MATMUL
        #: picks "tiled"
        self.matmul_variant = os.environ.get("ENGINE_GPU_MATMUL") or "blocked"
        #: normalisations and softmax along rows: one "thread" per row suits CPU adapters;
        #: a "workgroup" per row (coalesced reads) suits GPUs; ENGINE_GPU_ROWS overrides
        self.row_strategy = os.environ.get("ENGINE_GPU_ROWS") or (
            "thread" if self.gpu.info.get("adapter_type") == "CPU" else "workgroup")
        #: strided copies (Transpose, Concat, Slice...): "runs" of 64 elements per invocation
        #: suit CPU adapters (fewer integer divisions); one of the "elements" per invocation
        #: (coalesced) suits GPUs; ENGINE_GPU_COPY overrides
        self.copy_strategy = os.environ.get("ENGINE_GPU_COPY") or (
            "runs" if self.gpu.info.get("adapter_type") == "CPU" else "elements")
        #: attention chains (``attention.py``): "fused" into one dispatch walking the keys
        #: with an online softmax suits CPU adapters (scores never reach memory); on an H100
        #: it ran 1.3-2.6x slower than the chain's own layers ("unfused": its few invocations,
        #: four query rows each and hundreds of registers, leave a big GPU idle);
        #: ENGINE_GPU_ATTENTION overrides
        self.attention_strategy = os.environ.get("ENGINE_GPU_ATTENTION") or (
            "fused" if self.gpu.info.get("adapter_type") == "CPU" else "unfused")
        self._encoder = None
        self._keep: list = []  # upload staging buffers alive until their encoder is submitted
        self._uniforms: OrderedDict[bytes, Any] = OrderedDict()
        self._bind_groups: OrderedDict[tuple, Any] = OrderedDict()
        self._packed: dict[tuple, tuple[Any, GpuTensor]] = {}
        self._packed_host: dict[tuple, tuple[Any, np.ndarray]] = {}
        self._constants: dict[str, np.ndarray] = {}
        self._layer: str | None = None
        self._dry = None  # a planning.DryRun while prepare() walks the plan
        self._rec = None  # a recording.Recorder while a run is recorded for replay
        self.replay = replay if replay is not None else \
            os.environ.get("ENGINE_GPU_REPLAY", "1") != "0"
        self._replays = Replays(self)
        self.epilogues = EpilogueTable()
        self.attention = AttentionTable()
        self._closed = False
        #: peak device bytes of the plan (estimated by ``prepare``, then measured by runs)
        self.peak_memory_bytes: int | None = None

    # -- memory -----------------------------------------------------------------------------
    def _new_buffer(self, size: int):
        with gpu_errors(f"allocating {size} bytes of GPU memory"):
            return self.device.create_buffer(size=size, usage=self._storage_usage)

    def tensor(self, meta: Meta) -> GpuTensor:
        """A new device tensor for ``meta`` (from the pool)."""
        pool = self.pool if self._dry is None else self._dry.pool
        alloc = pool.acquire(storage_bytes(meta))
        if self._rec is not None and self._dry is None:
            self._rec.allocated(alloc)
        return GpuTensor(alloc, tuple(meta.shape), np.dtype(meta.dtype))

    def view(self, src: GpuTensor, shape: tuple[int, ...], dtype=None) -> GpuTensor:
        """A tensor sharing ``src``'s buffer (Reshape and friends move no data)."""
        if src.alloc is not None:
            src.alloc.refs += 1
        return GpuTensor(src.alloc, tuple(shape), np.dtype(dtype or src.dtype))

    def upload(self, array: np.ndarray) -> GpuTensor:
        array = np.asarray(array)
        data = _to_storage(array)
        t = self.tensor(Meta.of(array))
        if data.nbytes == 0 or self._dry is not None:
            return t
        if self._rec is not None:
            self._rec.uploaded(t.alloc, array, data)
        with gpu_errors("uploading a tensor"):
            if self._encoder is not None:
                # keeps the order with work already recorded into the open encoder
                staging = self.device.create_buffer_with_data(
                    data=data, usage=self.gpu.wgpu.BufferUsage.COPY_SRC)
                self._encoder.copy_buffer_to_buffer(staging, 0, t.buffer, 0, data.nbytes)
                self._keep.append(staging)
            else:
                self.queue.write_buffer(t.buffer, 0, data)
        return t

    def constant(self, layer: Layer, index: int, meta: Meta, kind: str,
                 transform) -> GpuTensor | None:
        """A derived copy of a constant input (e.g. re-laid-out weights), uploaded once.

        Returns None when input ``index`` is not a model constant.
        """
        name = layer.inputs[index] if index < len(layer.inputs) else ""
        value = self._constants.get(name)
        if value is None or meta is None or meta.value is not value:
            return None
        return self.named_constant(name, kind, transform)

    def named_constant(self, name: str, kind: str, transform) -> GpuTensor:
        """``transform`` of model constant ``name`` on the device, uploaded once per kind."""
        value = self._constants[name]
        key = (name, kind)
        hit = self._packed.get(key)
        if hit is not None and hit[0] is value:
            return hit[1]
        host = self._packed_host.get(key)
        if host is None or host[0] is not value:
            host = self._packed_host[key] = (value, transform(value))
        if self._dry is not None:  # planning: account for the memory, upload at the first run
            return self.tensor(Meta.of(host[1]))
        self._packed[key] = (value, self.upload(host[1]))
        del self._packed_host[key]
        return self._packed[key][1]

    def free(self, handle: Any) -> None:
        if self._closed or not isinstance(handle, GpuTensor) or handle.alloc is None:
            return
        if isinstance(handle.alloc, Pending):  # deferred attention scores (no buffer)
            handle.alloc.release(self)
            return
        if handle.early is not None:
            handle.early, early = None, handle.early
            early.dropped(self.gpu)
        (self.pool if self._dry is None else self._dry.pool).release(handle.alloc)

    def write_inputs_now(self, sig, arrays: dict) -> dict | None:
        """Write a run's inputs from the calling thread when it will replay (see
        ``Worker._written_feeds``): the feeds that say so, or None."""
        if not self.replay:
            return None
        return self._replays.write_now(sig, arrays)

    # -- the Backend contract ---------------------------------------------------------------
    def supports(self, layer: Layer, metas: list[Meta | None]) -> str | None:
        if op_for(layer) is None:  # outputs are allocated from the op's shape logic
            return f"{layer.op_type} has no shape logic to size its GPU outputs"
        with limits_in_force(self.limits):
            return KERNELS.unsupported_reason(layer, metas)

    def run_context(self, placement: dict, keep: set[str], metas: dict | None = None) -> None:
        self.epilogues.begin_run(placement, keep)
        self.attention.begin_run(placement, keep, metas)

    def begin_run(self) -> None:
        if self._timestamps:
            self._timestamps.begin_run()

    def run_layer(self, layer: Layer, inputs: list[Any], in_metas: list[Meta | None],
                  out_metas: list[Meta]) -> list[Any]:
        kernel = KERNELS.lookup(layer)
        if kernel is None:
            raise KernelError(f"layer {layer.name!r}: GPU_COMPUTE has no {layer.op_type} kernel")
        if self._rec is not None:
            in_metas = self._rec.watch(layer, in_metas)
            self._rec.layer = layer.name
        absorbed = self.epilogues.absorbed.pop(id(layer), None)
        if absorbed is not None:  # recorded in its MatMul's epilogue (``epilogues``)
            return [self.view(inputs[absorbed], out_metas[0].shape)]
        if self.attention.absorbed:  # a deferred attention's middle layer (``attention``)
            outs = self.attention.absorb(self, layer, inputs, out_metas)
            if outs is not None:
                return outs
        self._layer = layer.name
        try:
            with limits_in_force(self.limits):
                outs = kernel.fn(self, layer, inputs, in_metas, out_metas)
        except (GPUError, KernelError):
            raise
        except Exception as exc:
            raise KernelError(f"layer {layer.name!r} ({layer.op_type}) failed on GPU_COMPUTE: "
                              f"{type(exc).__name__}: {exc}") from exc
        finally:
            self._layer = None
        if self.pool.peak_bytes > (self.peak_memory_bytes or 0):
            self.peak_memory_bytes = self.pool.peak_bytes
        return list(outs)

    def flush(self) -> None:
        if self._encoder is None:
            return
        encoder, self._encoder = self._encoder, None
        with gpu_errors("submitting GPU work"):
            resolved = self._timestamps.resolve(encoder) if self._timestamps else None
            self.queue.submit([encoder.finish()])
        self._keep.clear()
        if resolved is not None:
            self._timestamps.read(resolved)

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

    def collect_timings(self) -> Future | None:
        """A future of {layer: GPU ms} resolved when the run's timestamps are read back."""
        return self._timestamps.collect() if self._timestamps else None

    def prepare(self, model, placement, progress=None, input_metas=None) -> None:
        """Compile (and warm) the pipelines the plan needs; estimate its peak memory.

        ``input_metas`` are the concrete inputs of an input signature (None: the declared
        shapes, symbolic dims taken as 1)."""
        from engine.backends.gpu_compute.planning import prepare_plan

        self._constants = dict(model.constants)
        self.epilogues.use_model(model)
        self.attention.use_model(model)
        prepare_plan(self, model, placement, progress, input_metas)

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._rec = None
        self._replays.clear()
        self._bind_groups.clear()
        self._packed.clear()
        for buf in self._uniforms.values():
            buf.destroy()
        self._uniforms.clear()
        self.pool.destroy_all()


def _to_storage(array: np.ndarray) -> np.ndarray:
    if array.dtype == np.dtype(bool):
        return np.ascontiguousarray(array, dtype=np.uint32)
    return np.ascontiguousarray(array)
