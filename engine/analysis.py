"""What a planned run costs: FLOPs and bytes per layer, live memory along the execution order.

Both come from a ``Plan`` (concrete shapes for an input signature) and the worker's liveness:
a tensor is live from the layer that makes it to its last reader, on the CPU or the device
where its producer ran; a GPU layer reading a CPU tensor adds a device copy, a CPU layer
reading a device tensor a CPU copy. Model weights are not counted (they live all run long).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.backends.base import BackendType
from engine.model import Model
from engine.ops.costs import LayerCost, layer_cost, nbytes
from engine.plan import Plan


@dataclass
class MemoryPoint:
    """Live tensor bytes while ``layer`` runs (its inputs and outputs included)."""

    layer: str
    cpu_bytes: int
    device_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.cpu_bytes + self.device_bytes


@dataclass
class MemoryTimeline:
    """Live bytes per layer, the peak, and the tensors alive at the peak (largest first)."""

    points: list[MemoryPoint] = field(default_factory=list)
    peak_index: int = -1
    #: (tensor name, bytes, "cpu" | "device") alive at the peak
    alive_at_peak: list[tuple[str, int, str]] = field(default_factory=list)

    @property
    def peak_bytes(self) -> int:
        return self.points[self.peak_index].total_bytes if self.points else 0


def layer_costs(model: Model, plan: Plan) -> dict[str, LayerCost]:
    """FLOPs and bytes of every layer whose shapes the plan knows."""
    out = {}
    for layer in model.layers:
        ins = [plan.metas.get(n) if n else None for n in layer.inputs]
        outs = [plan.metas.get(n) if n else None for n in layer.outputs]
        if any(m is None for n, m in zip(layer.outputs, outs) if n):
            continue
        out[layer.name] = layer_cost(layer, ins, outs)
    return out


def memory_timeline(model: Model, plan: Plan, last_use: dict[str, int]) -> MemoryTimeline:
    """Simulate where each tensor lives during a run of ``plan``."""
    live: dict[tuple[str, str], int] = {}
    for spec in model.inputs:
        live[(spec.name, "cpu")] = nbytes(plan.metas.get(spec.name))
    timeline = MemoryTimeline()
    peak = -1
    for index, layer in enumerate(model.layers):
        place = plan.placement.get(layer.name)
        where = "cpu" if place is None or place.backend is BackendType.CPU else "device"
        for n in layer.all_inputs():
            if n and n not in model.constants and (n, where) not in live:
                live[(n, where)] = nbytes(plan.metas.get(n))
        for n in layer.outputs:
            if n:
                live[(n, where)] = nbytes(plan.metas.get(n))
        cpu = sum(b for (_, w), b in live.items() if w == "cpu")
        dev = sum(b for (_, w), b in live.items() if w == "device")
        timeline.points.append(MemoryPoint(layer.name, cpu, dev))
        if cpu + dev > peak:
            peak = cpu + dev
            timeline.peak_index = index
            timeline.alive_at_peak = sorted(((n, b, w) for (n, w), b in live.items()),
                                            key=lambda t: -t[1])
        for key in [k for k in live if last_use.get(k[0], -1) <= index]:
            del live[key]
    return timeline
