"""Preparing a plan: walk it with static shapes, compile what it needs, estimate its memory.

The walk runs every GPU layer's kernel in *dry* mode: kernels allocate from a simulated pool
and report the programs they would dispatch without touching the device. The simulated pool
frees tensors at their last use exactly as the worker does, so its peak is the plan's peak.
Pipelines are then compiled and warmed with a one-workgroup dispatch on zeroed parameters
(lavapipe compiles at the first dispatch), with progress reported per pipeline.
"""

from __future__ import annotations

import numpy as np

from engine.backends.base import BackendType
from engine.backends.cpu.interpreter import run_layer as cpu_run_layer
from engine.backends.gpu_common import gpu_errors
from engine.backends.gpu_compute.memory import BufferPool, GpuTensor
from engine.backends.gpu_compute.pipelines import Program
from engine.ops import op_for
from engine.ops.base import Meta

#: CPU layers are evaluated during the walk only when their inputs are this small
SMALL = 1 << 16


class _Fake:
    def __init__(self, size: int):
        self.size = size


class DryRun:
    """State of a dry walk: the simulated pool and the programs seen."""

    def __init__(self):
        self.pool = BufferPool(_Fake, 1 << 62)
        self.programs: list[Program] = []


def _static_inputs(model, input_metas=None) -> dict[str, Meta]:
    metas = {}
    for spec in model.inputs if input_metas is None else ():
        if spec.shape is None or spec.dtype is None:
            continue
        shape = tuple(d if isinstance(d, int) else 1 for d in spec.shape)
        metas[spec.name] = Meta(shape, np.dtype(spec.dtype))
    metas.update(input_metas or {})
    for name, value in model.constants.items():
        if isinstance(value, np.ndarray):
            metas[name] = Meta.of(value)
    return metas


def _infer(model, layer, ins: list[Meta | None], on_cpu: bool) -> list[Meta] | None:
    present = [m for m in ins if m is not None]
    if on_cpu and all(m.value is not None for m in present) and \
            sum(m.size for m in present) <= SMALL:
        try:
            outs = cpu_run_layer(layer, [None if m is None else m.value for m in ins])
            return [Meta.of(np.asarray(v)) if isinstance(v, np.ndarray | np.generic) else None
                    for v in outs]
        except Exception:  # an estimate: fall through to shape logic
            pass
    op = op_for(layer)
    if op is not None:
        try:
            return op.infer(layer, ins)
        except Exception:
            pass
    outs = []
    for name in layer.outputs:
        spec = model.value_info.get(name)
        if spec is None or not spec.is_static or spec.dtype is None:
            return None
        outs.append(Meta(tuple(spec.shape), np.dtype(spec.dtype)))
    return outs


def _derive(model, placement, metas: dict[str, Meta]) -> dict[int, list]:
    """Add to ``metas`` (the inputs' and constants') those of every tensor the plan derives;
    returns each derived layer's output metas by its index."""
    outs_of: dict[int, list] = {}
    for index, layer in enumerate(model.layers):
        names = layer.all_inputs()
        if any(n and n not in metas for n in names):
            continue
        ins = [metas.get(n) if n else None for n in names]
        outs = _infer(model, layer, ins, placement[layer.name].backend is BackendType.CPU)
        if outs is None:
            continue
        outs_of[index] = outs
        metas.update({n: m for n, m in zip(layer.outputs, outs) if n and m is not None})
    return outs_of


def walk(backend, model, placement, input_metas=None) -> DryRun:
    """Dry-run the plan on static shapes; returns the simulated pool and programs."""
    dry = DryRun()
    metas = _static_inputs(model, input_metas)
    last: dict[str, int] = {}
    for i, layer in enumerate(model.layers):
        for n in layer.all_inputs():
            if n:
                last[n] = i
    for o in model.outputs:
        last[o.name] = len(model.layers)
    on_device: dict[str, GpuTensor] = {}
    backend._dry = dry
    # every shape is derived before the walk: a run fuses layers (epilogues, attention) on
    # the shapes of tensors made later in the plan, and the walk fuses what a run would
    outs_of = _derive(model, placement, metas)
    backend.run_context(placement, set(), metas)
    try:
        for index, layer in enumerate(model.layers):
            outs = outs_of.get(index)
            if outs is None:
                continue
            names = layer.all_inputs()
            ins = [metas.get(n) if n else None for n in names]
            gpu = placement[layer.name].backend is not BackendType.CPU
            if gpu and backend.supports(layer, ins) is None:
                handles = [None if not n else on_device.get(n) for n in names]
                for k, n in enumerate(names):
                    if n and handles[k] is None:
                        handles[k] = on_device[n] = backend.tensor(ins[k])
                try:
                    results = backend.run_layer(layer, handles, ins, outs)
                    on_device.update({n: h for n, h in zip(layer.outputs, results) if n})
                except Exception:  # noqa: BLE001 - the real run reports it properly
                    pass
            for n in set(names) | set(layer.outputs):
                if n and last.get(n, -1) <= index and n not in model.constants:
                    handle = on_device.pop(n, None)
                    if handle is not None:
                        backend.free(handle)
    finally:
        backend._dry = None
    return dry


def prepare_plan(backend, model, placement, progress=None, input_metas=None) -> None:
    """Compile and warm the plan's pipelines; set ``backend.peak_memory_bytes``."""
    dry = walk(backend, model, placement, input_metas)
    backend.peak_memory_bytes = dry.pool.peak_bytes
    todo = [p for p in dry.programs if p not in backend.pipelines.warmed]
    if not todo:
        if progress:
            progress("pipelines ready", 1.0)
        return
    wgpu = backend.gpu.wgpu
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
    dummies = [backend.device.create_buffer(size=256, usage=usage) for _ in range(8)]
    zeros = bytes(256)
    for i, program in enumerate(todo):
        if progress:
            progress(f"compiling {program}", i / len(todo))
        pipeline, layout = backend.pipelines.get(program)
        with gpu_errors(f"warming {program}"):
            ubuf = backend._uniform(zeros)
            entries = [{"binding": 0, "resource": {"buffer": ubuf, "offset": 0, "size": 256}}]
            bindings = _binding_count(program)
            entries += [{"binding": b, "resource": {"buffer": dummies[b - 1], "offset": 0,
                                                    "size": 256}}
                        for b in range(1, bindings + 1)]
            group = backend.device.create_bind_group(layout=layout, entries=entries)
            enc = backend.device.create_command_encoder()
            cpass = enc.begin_compute_pass()
            cpass.set_pipeline(pipeline)
            cpass.set_bind_group(0, group)
            cpass.dispatch_workgroups(1, 1, 1)
            cpass.end()
            backend.queue.submit([enc.finish()])
        backend.pipelines.warmed.add(program)
        # wait, so progress follows the compile lavapipe does at the first dispatch
        backend.gpu.read_buffer(dummies[0], 4, np.dtype(np.uint32), (1,))
    for d in dummies:
        d.destroy()
    if progress:
        progress("pipelines ready", 1.0)


def _binding_count(program: Program) -> int:
    """Storage bindings a shader declares (counted in its source)."""
    src = program.source()
    return src.count("var<storage")
