"""Per-layer comparison of two backends on the same inputs (``python -m engine compare``).

Both workers run with every intermediate captured; each layer gets the relative L2 error
and the largest absolute difference of its outputs, the worst over its outputs. The first
layer whose error passes the threshold is where the backends start to disagree. The
reference may also be ``CPU_FLOAT64``: the CPU backend running a float64 copy of the model
(``engine.precision``), which shows each backend's own float32 error rather than its
distance from another float32 backend.
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
#: the comparison side that runs the model in float64 on the CPU backend
CPU_FLOAT64 = "cpu-f64"

Side = BackendType | str


def parse_side(value: Side) -> Side:
    """A backend (any name ``BackendType.parse`` takes) or ``CPU_FLOAT64``."""
    if isinstance(value, str) and value.strip().lower() in (CPU_FLOAT64, "cpu-float64"):
        return CPU_FLOAT64
    return BackendType.parse(value)


def side_label(side: Side) -> str:
    """How a side is named to users: the backend's name, or ``CPU (float64)``."""
    return "CPU (float64)" if side == CPU_FLOAT64 else BackendType.parse(side).name


def side_value(side: Side) -> str:
    """The side as the CLI and the JSON name it (``gpu-pixel``, ``cpu-f64``)."""
    return CPU_FLOAT64 if side == CPU_FLOAT64 else BackendType.parse(side).value


def side_worker(model: Model, side: Side, feeds: dict[str, Any], **worker_args):
    """``(worker, feeds)`` that run ``model`` on ``side``: for ``CPU_FLOAT64`` a CPU worker
    of the float64 copy of the model, with the float inputs widened."""
    from engine.precision import widened_feeds, widened_to_float64
    from engine.worker import Worker

    if side == CPU_FLOAT64:
        return (Worker(widened_to_float64(model), BackendType.CPU, **worker_args),
                widened_feeds(feeds))
    return Worker(model, BackendType.parse(side), **worker_args), feeds


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


def compare_backends(model: Model, backend: Side, against: Side,
                     feeds: dict[str, np.ndarray], rel_l2: float = DEFAULT_REL_L2,
                     abs_tol: float = DEFAULT_ABS) -> dict[str, Any]:
    """Run ``model`` on both backends and compare every layer's outputs.

    Either side may be ``CPU_FLOAT64``. Returns ``{"backend", "against", "layers": [{"name",
    "op_type", "rel_l2", "max_abs"}], "first_divergent"}`` in execution order.
    """
    backend, against = parse_side(backend), parse_side(against)
    values = []
    for side in (backend, against):
        worker, side_feeds = side_worker(model, side, feeds)
        with worker:
            worker.schedule(side_feeds, capture="all")
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
    return {"backend": side_value(backend), "against": side_value(against), "layers": layers,
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
