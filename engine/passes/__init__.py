"""Import-time passes, run in order by ``run_passes`` when a model is loaded.

Order matters: function expansion first (its layers can then fold), constant folding,
inlining of Ifs whose condition folded, no-op removal, folding again (what the inlined
branches and removed no-ops expose), fusion (needs folded weights), LayerNorm and GELU
chains as single layers (``patterns``), dead-code removal,
shape inference for tensors still unknown, and last the CPU-forced analysis on the final graph.
Every pass preserves results (the fusions up to float rounding); ``Model.pass_stats``
records what each did.
"""

from __future__ import annotations

import importlib

from engine.model import Model
from engine.passes.cpu_forced import mark_cpu_forced
from engine.passes.dce import remove_dead
from engine.passes.expand import expand_functions
from engine.passes.fold import fold_constants
from engine.passes.inline_if import inline_constant_ifs
from engine.passes.noop import remove_noops
from engine.passes.patterns import fuse_patterns
from engine.passes.shapes import infer_shapes


def _fusion():
    try:
        return importlib.import_module("engine.passes.fusion").fuse
    except ModuleNotFoundError as exc:
        if exc.name != "engine.passes.fusion":
            raise
        return None


def run_passes(model: Model, optimize: bool = True) -> Model:
    """Optimise ``model`` in place (if ``optimize``) and mark its CPU-forced tensors."""
    stats: dict[str, int] = {}
    if optimize:
        stats["expanded"] = expand_functions(model)
        stats["folded"] = fold_constants(model)
        stats["inlined_ifs"] = inline_constant_ifs(model)
        stats["removed"] = remove_noops(model)
        stats["folded"] += fold_constants(model)
        fuse = _fusion()
        if fuse is not None:
            for key, value in (fuse(model) or {}).items():
                stats[key] = stats.get(key, 0) + int(value)
        for key, value in fuse_patterns(model).items():
            stats[key] = stats.get(key, 0) + value
        dead_layers, dead_constants = remove_dead(model)
        stats["dead"] = dead_layers
        stats["unused_constants"] = dead_constants
        stats["shapes_inferred"] = infer_shapes(model)
    stats["cpu_forced"] = len(mark_cpu_forced(model))
    model.pass_stats = stats
    return model
