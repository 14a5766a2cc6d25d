"""The workbench's session state, without Qt: what the user chose and what came back.

Widgets observe a ``Session`` (``subscribe(fn)``; ``fn(topic)`` is called after a change with
one of ``TOPICS``) instead of keeping state in the main window. Nothing here imports Qt, so a
script or another front end can drive the same state.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import BackendType

TOPICS = ("model", "overrides", "shapes", "compare", "batch")
DEFAULT_THRESHOLD = 1e-3


@dataclass
class CompareResult:
    """Per-layer error of one backend against another, in execution order."""

    backend: BackendType
    against: BackendType
    layers: list[dict[str, Any]]  # {"name", "op_type", "rel_l2", "max_abs"}
    seconds: float = 0.0

    def rel_l2(self) -> dict[str, float]:
        """{layer name: relative L2 error}."""
        return {row["name"]: row["rel_l2"] for row in self.layers}

    def first_over(self, threshold: float) -> str | None:
        """The first layer (execution order) whose relative L2 error exceeds ``threshold``."""
        for row in self.layers:
            rel = row["rel_l2"]
            if rel is None or math.isnan(rel) or rel > threshold:
                return row["name"]
        return None


@dataclass
class BatchRow:
    """One input of a batch: where it came from, its top-k and latency, or why it failed."""

    source: str
    top: list[tuple[int, float]] = field(default_factory=list)  # (class index, score)
    labels: list[str] = field(default_factory=list)
    ms: float = math.nan
    error: str = ""


class Session:
    """Per-model choices (placement overrides, input shapes) and results (compare, batch)."""

    def __init__(self) -> None:
        self.model_path: str | None = None
        self.overrides: dict[str, BackendType] = {}
        self.input_shapes: dict[str, tuple[int, ...]] = {}
        self.compare: CompareResult | None = None
        self.threshold = DEFAULT_THRESHOLD
        self.batch: list[BatchRow] = []
        self.batch_total = 0
        self._observers: list[Callable[[str], None]] = []

    # -- observers --------------------------------------------------------------------------
    def subscribe(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(topic)`` after every change."""
        self._observers.append(fn)

    def _notify(self, topic: str) -> None:
        for fn in list(self._observers):
            fn(topic)

    # -- model ------------------------------------------------------------------------------
    def set_model(self, path: str, overrides: dict[str, BackendType] | None = None) -> None:
        """A new model: forget results; start from the overrides saved for it."""
        self.model_path = path
        self.overrides = dict(overrides or {})
        self.input_shapes = {}
        self.compare = None
        self.batch, self.batch_total = [], 0
        self._notify("model")

    # -- placement overrides ----------------------------------------------------------------
    def set_overrides(self, overrides: dict[str, BackendType]) -> None:
        """Replace every override."""
        self.overrides = dict(overrides)
        self._notify("overrides")

    def with_override(self, names: list[str], backend: BackendType | None
                      ) -> dict[str, BackendType]:
        """The overrides as they would be after moving ``names`` (None: back to automatic)."""
        out = dict(self.overrides)
        for name in names:
            if backend is None:
                out.pop(name, None)
            else:
                out[name] = backend
        return out

    def overrides_for(self, backend: BackendType) -> dict[str, BackendType]:
        """The overrides a worker of ``backend`` can take (the CPU, or that backend)."""
        return self.overrides_of(self.overrides, backend)

    @staticmethod
    def overrides_of(overrides: dict[str, BackendType], backend: BackendType
                     ) -> dict[str, BackendType]:
        """The part of ``overrides`` a worker of ``backend`` can take."""
        return {n: b for n, b in overrides.items() if b is BackendType.CPU or b is backend}

    @staticmethod
    def overrides_to_json(overrides: dict[str, BackendType]) -> str:
        """Overrides as JSON text (for settings and traces)."""
        return json.dumps({n: b.value for n, b in sorted(overrides.items())})

    @staticmethod
    def overrides_from_json(text: str | None) -> dict[str, BackendType]:
        """Overrides read back from ``overrides_to_json`` (bad text gives none)."""
        try:
            data = json.loads(text or "{}")
            return {str(n): BackendType.parse(v) for n, v in data.items()}
        except (ValueError, TypeError, AttributeError):
            return {}

    # -- input shapes -----------------------------------------------------------------------
    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> None:
        """The concrete shape the user chose for a symbolic input."""
        self.input_shapes[name] = tuple(int(d) for d in shape)
        self._notify("shapes")

    # -- compare ----------------------------------------------------------------------------
    def set_compare(self, result: CompareResult | None) -> None:
        """A finished comparison (or None to clear it)."""
        self.compare = result
        self._notify("compare")

    def set_threshold(self, threshold: float) -> None:
        """The relative L2 error above which a layer counts as divergent."""
        self.threshold = float(threshold)
        self._notify("compare")

    def first_divergent(self) -> str | None:
        """The first layer over the threshold in the current comparison."""
        return None if self.compare is None else self.compare.first_over(self.threshold)

    # -- batch ------------------------------------------------------------------------------
    def start_batch(self, total: int) -> None:
        """A batch of ``total`` single runs begins."""
        self.batch, self.batch_total = [], int(total)
        self._notify("batch")

    def add_batch_row(self, row: BatchRow) -> None:
        """One input of the batch is done."""
        self.batch.append(row)
        self._notify("batch")

    def batch_csv(self) -> str:
        """The batch results as CSV: source, latency, error, then top-k class / label / score."""
        buf = io.StringIO()
        k = max((len(r.top) for r in self.batch), default=0)
        w = csv.writer(buf)
        head = ["source", "ms", "error"]
        for i in range(1, k + 1):
            head += [f"top{i}_class", f"top{i}_label", f"top{i}_score"]
        w.writerow(head)
        for r in self.batch:
            row = [r.source, "" if math.isnan(r.ms) else f"{r.ms:.3f}", r.error]
            for i, (cls, score) in enumerate(r.top):
                label = r.labels[i] if i < len(r.labels) else ""
                row += [cls, label, f"{score:.6g}"]
            w.writerow(row)
        return buf.getvalue()
