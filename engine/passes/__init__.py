"""Import-time passes, run in order by ``run_passes`` when a model is loaded."""

from __future__ import annotations

from engine.model import Model
from engine.passes.cpu_forced import mark_cpu_forced
from engine.passes.fusion import fuse


def run_passes(model: Model) -> Model:
    """Optimise ``model`` in place and mark its CPU-forced tensors."""
    for key, count in fuse(model).items():
        if count:
            model.pass_stats[f"fused {key}"] = count
    mark_cpu_forced(model)
    return model
