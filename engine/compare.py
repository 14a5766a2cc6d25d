"""Per-layer comparison of two backends on the same inputs (``python -m engine compare``).

Both workers run with every intermediate captured; each layer gets the relative L2 error
and the largest absolute difference of its outputs, the worst over its outputs. The first
layer whose error passes the threshold is where the backends start to disagree.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from engine.backends import BackendType
from engine.model import Model

#: relative L2 error above which a layer diverges (float32 kernels agree far closer)
DEFAULT_REL_L2 = 1e-3
#: ... unless its largest absolute difference is below this (outputs near zero)
DEFAULT_ABS = 1e-5


def error_figures(got: Any, want: Any) -> tuple[float, float]:
    """(relative L2, max abs) of ``got`` against the reference ``want``; NaN in the same
    places counts as agreement, anywhere else as infinite error."""
    a, b = np.asarray(got), np.asarray(want)
    if a.shape != b.shape:
        return math.inf, math.inf
    if a.dtype.kind not in "fc" and b.dtype.kind not in "fc":
        if a.dtype.kind == "O" or b.dtype.kind == "O":
            return 0.0, 0.0
        same = np.array_equal(a, b)
        return (0.0, 0.0) if same else (1.0, float(np.max(np.abs(a.astype(np.float64) -
                                                                 b.astype(np.float64)))))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    if np.any(nan_a != nan_b):
        return math.inf, math.inf
    inf_a, inf_b = np.isinf(a64), np.isinf(b64)
    if np.any(inf_a != inf_b) or np.any(a64[inf_a] != b64[inf_b]):
        return math.inf, math.inf
    ok = ~(nan_a | inf_a)
    diff = a64[ok] - b64[ok]
    if diff.size == 0:
        return 0.0, 0.0
    max_abs = float(np.max(np.abs(diff)))
    norm = float(np.linalg.norm(b64[ok]))
    rel = float(np.linalg.norm(diff)) / norm if norm > 0 else (0.0 if max_abs == 0 else math.inf)
    return rel, max_abs


def compare_backends(model: Model, backend: BackendType | str, against: BackendType | str,
                     feeds: dict[str, np.ndarray], rel_l2: float = DEFAULT_REL_L2,
                     abs_tol: float = DEFAULT_ABS) -> dict[str, Any]:
    """Run ``model`` on both backends and compare every layer's outputs.

    Returns ``{"backend", "against", "layers": [{"name", "op_type", "rel_l2", "max_abs"}],
    "first_divergent"}`` in execution order.
    """
    from engine.worker import Worker

    backend, against = BackendType.parse(backend), BackendType.parse(against)
    values = []
    for kind in (backend, against):
        with Worker(model, kind) as worker:
            worker.schedule(feeds, capture="all")
            names = [o for layer in model.layers for o in layer.outputs if o]
            values.append({n: worker.peek_output(n).download_to_array() for n in names})
    got, want = values
    layers, first = [], None
    for layer in model.layers:
        worst_rel, worst_abs = 0.0, 0.0
        for name in layer.outputs:
            if not name:
                continue
            rel, mx = error_figures(got[name], want[name])
            worst_rel, worst_abs = max(worst_rel, rel), max(worst_abs, mx)
        layers.append({"name": layer.name, "op_type": layer.op_type, "rel_l2": worst_rel,
                       "max_abs": worst_abs})
        if first is None and worst_rel > rel_l2 and worst_abs > abs_tol:
            first = layer.name
    return {"backend": backend.value, "against": against.value, "layers": layers,
            "first_divergent": first}


def strict_json(value: Any) -> Any:
    """``value`` with NaN and infinities as None, so ``json.dumps(allow_nan=False)`` holds."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    return value
