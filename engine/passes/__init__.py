"""Import-time passes, run in order by ``run_passes`` when a model is loaded."""

from __future__ import annotations

from engine.model import Model
from engine.passes.cpu_forced import mark_cpu_forced


def run_passes(model: Model) -> Model:
    """Optimise ``model`` in place and mark its CPU-forced tensors."""
    mark_cpu_forced(model)
    return model
