"""Placement per concrete input signature.

A worker plans once from the model's declared shapes, then again for every new input
signature (input shapes and dtypes), cached: with concrete input shapes the shape logic
of ``engine.ops`` gives concrete shapes for almost every tensor, and tensors that are
CPU-forced (shape chains) are evaluated on the CPU where they are small, exactly as a run
computes them. Each layer then gets a ``Placement`` whose reason is a sentence a user can
read. Layers whose input shapes depend on input *values* are placed on the backend and
decided by the run (the worker checks every GPU layer with its real inputs).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.backends.base import Backend, BackendType
from engine.errors import EngineError
from engine.model import Layer, Model
from engine.ops import cpu_input_indices, op_for
from engine.ops.base import Meta

log = logging.getLogger(__name__)

#: CPU layers are evaluated while planning only when their inputs are this small
SMALL_ELEMENTS = 1 << 16

NATIVE = "native"
UNDECIDED = "native (its input shapes depend on input values: checked when it runs)"
SYMBOLIC = "native (its input shapes are symbolic: checked for each input signature)"
USER_CPU = "CPU: the user's choice (placement override)"
BRANCH = ("native: the condition is read on the CPU and the branch taken runs on the backend, "
          "layer by layer")
USER_GPU = "native: the user's choice (placement override)"

#: per input: name, shape, and the dtype (or the type name of a non-tensor value)
Signature = tuple[tuple[str, tuple[int, ...], np.dtype | str], ...]


@dataclass
class Placement:
    """Which backend runs a layer and why (the reason is shown to users)."""

    backend: BackendType
    reason: str

    @property
    def is_fallback(self) -> bool:
        return self.reason.startswith("fallback")

    @property
    def is_cpu_forced(self) -> bool:
        return self.reason.startswith("CPU-forced")

    @property
    def is_user_choice(self) -> bool:
        return "user's choice" in self.reason


@dataclass
class Plan:
    """Placement of every layer for one input signature (``None``: the declared shapes)."""

    signature: Signature | None
    placement: dict[str, Placement]
    #: metadata of every tensor the planner could derive (values for small CPU tensors)
    metas: dict[str, Meta] = field(default_factory=dict)
    build_ms: float = 0.0
    #: True once the GPU backend has compiled and sized this plan's work
    prepared: bool = False
    #: layer name -> (the input metadata its GPU backend accepted it with in a run of this
    #: plan, its outputs' metadata): a later run with the same inputs skips the backend's
    #: support check and the shape inference
    accepted: dict[str, tuple] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """Counts of native / CPU-forced / fallback / user-placed layers, reasons grouped."""
        counts = {"native": 0, "cpu_forced": 0, "fallback": 0, "user": 0, "cpu": 0}
        reasons: dict[str, int] = {}
        for p in self.placement.values():
            if p.is_user_choice:
                counts["user"] += 1
            elif p.is_cpu_forced:
                counts["cpu_forced"] += 1
            elif p.is_fallback:
                counts["fallback"] += 1
                reasons[p.reason] = reasons.get(p.reason, 0) + 1
            elif p.backend is BackendType.CPU:
                counts["cpu"] += 1
            else:
                counts["native"] += 1
        counts["layers"] = len(self.placement)
        counts["fallback_reasons"] = dict(sorted(reasons.items(), key=lambda kv: -kv[1]))
        return counts


def signature_of(feeds: dict[str, Any]) -> Signature:
    """The cache key of a run: each input's name, shape and dtype."""
    out = []
    for name, value in feeds.items():
        if isinstance(value, np.ndarray):
            out.append((name, tuple(value.shape), value.dtype))
        else:
            out.append((name, (), type(value).__name__))
    return tuple(out)


def build_plan(model: Model, backend: Backend, backend_type: BackendType,
               signature: Signature | None,
               overrides: dict[str, BackendType] | None = None) -> Plan:
    """Place every layer for ``signature`` (or the model's declared shapes when None)."""
    t0 = time.perf_counter()
    metas = _input_metas(model, signature)
    overrides = overrides or {}
    forced = model.cpu_forced
    placement: dict[str, Placement] = {}
    for layer in model.layers:
        names = layer.all_inputs()
        ins = [metas.get(n) if n else None for n in names]
        known = all(m is not None for n, m in zip(names, ins) if n)
        place = _place(layer, ins, known, backend, backend_type, forced, overrides,
                       SYMBOLIC if signature is None else UNDECIDED)
        placement[layer.name] = place
        if known:
            outs = _infer(layer, ins, evaluate=place.backend is BackendType.CPU)
            if outs is not None:
                metas.update((n, m) for n, m in zip(layer.outputs, outs)
                             if n and m is not None)
    return Plan(signature, placement, metas, (time.perf_counter() - t0) * 1e3)


def _place(layer: Layer, ins: list[Meta | None], known: bool, backend: Backend,
           backend_type: BackendType, forced: set[str],
           overrides: dict[str, BackendType], undecided: str) -> Placement:
    if backend_type is BackendType.CPU:
        return Placement(BackendType.CPU, "CPU backend")
    forced_out = [o for o in layer.outputs if o in forced]
    if forced_out:
        return Placement(BackendType.CPU, f"CPU-forced: computes {forced_out[0]!r}, needed on "
                         "the CPU to plan other layers")
    wanted = overrides.get(layer.name)
    if wanted is BackendType.CPU:
        return Placement(BackendType.CPU, USER_CPU)
    if layer.op_type == "If":
        return Placement(backend_type, BRANCH)
    if not known:
        return Placement(backend_type, USER_GPU if wanted else undecided)
    reason = backend.supports(layer, ins)
    if reason is None:
        return Placement(backend_type, USER_GPU if wanted else NATIVE)
    planning_inputs = cpu_input_indices(layer)
    if any(i < len(ins) and ins[i] is not None and ins[i].value is None
           for i in planning_inputs):
        # a value the check needs (a shape, axes) comes from the inputs: the run decides
        return Placement(backend_type, USER_GPU if wanted else UNDECIDED)
    return Placement(BackendType.CPU, f"fallback: {reason}")


def _input_metas(model: Model, signature: Signature | None) -> dict[str, Meta]:
    metas: dict[str, Meta] = {}
    for name, value in model.constants.items():
        if isinstance(value, np.ndarray):
            metas[name] = Meta.of(value)
    if signature is not None:
        for name, shape, dtype in signature:
            if isinstance(dtype, np.dtype):
                metas[name] = Meta(tuple(shape), dtype)
        return metas
    for spec in model.inputs:
        if spec.is_static and spec.dtype is not None:
            metas[spec.name] = Meta(tuple(int(d) for d in spec.shape), np.dtype(spec.dtype))
    return metas


def _infer(layer: Layer, ins: list[Meta | None], evaluate: bool) -> list[Meta | None] | None:
    present = [m for m in ins if m is not None]
    if evaluate and all(m.value is not None for m in present) and \
            sum(m.size for m in present) <= SMALL_ELEMENTS:
        from engine.backends.cpu.interpreter import run_layer as cpu_run_layer

        try:
            outs = cpu_run_layer(layer, [None if m is None else m.value for m in ins])
            return [Meta.of(np.asarray(v)) if isinstance(v, np.ndarray | np.generic) else None
                    for v in outs]
        except Exception as exc:  # noqa: BLE001 - the run reports it with the real data
            log.debug("planning: evaluating %s failed: %s", layer.name, exc)
    op = op_for(layer)
    if op is None:
        return None
    try:
        return list(op.infer(layer, ins))
    except Exception as exc:  # noqa: BLE001 - shapes that depend on values: known at run time
        log.debug("planning: shape logic of %s failed: %s", layer.name, exc)
        return None


def check_overrides(model: Model, backend: Backend, backend_type: BackendType,
                    overrides: dict) -> dict[str, BackendType]:
    """The user's placement overrides, checked: each names a layer and a backend that can run
    it (the CPU, or the worker's own GPU backend where it has a kernel)."""
    layers = {layer.name: layer for layer in model.layers}
    out = {}
    for name, wanted in overrides.items():
        layer = layers.get(name)
        if layer is None:
            raise EngineError(f"placement override names no layer: {name!r}")
        wanted = BackendType.parse(wanted)
        if wanted is BackendType.CPU:
            out[name] = wanted
            continue
        if wanted is not backend_type:
            raise EngineError(f"layer {name!r} cannot be placed on {wanted.name}: this "
                              f"worker runs {backend_type.name} (and the CPU)")
        if any(o in model.cpu_forced for o in layer.outputs):
            raise EngineError(f"layer {name!r} cannot run on {wanted.name}: its output is "
                              "needed on the CPU to plan other layers (CPU-forced)")
        if backend.kernels.lookup(layer) is None:
            raise EngineError(f"layer {name!r} cannot run on {wanted.name}: it has no "
                              f"{layer.op_type} kernel")
        out[name] = wanted
    return out


def liveness(model: Model) -> dict[str, int]:
    """{tensor: index of the last layer reading it}; graph outputs live past the last layer."""
    last: dict[str, int] = {}
    for i, layer in enumerate(model.layers):
        for n in layer.all_inputs():
            if n:
                last[n] = i
    for o in model.outputs:
        last[o.name] = len(model.layers)
    return last
