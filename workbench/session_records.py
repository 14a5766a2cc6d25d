"""What the workbench session holds about a model and its results: plain records, no Qt."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine import BackendType


@dataclass
class LoadedModel:
    """What the UI needs about a freshly loaded model."""

    path: str
    model: Any  # engine.Model
    layout: Any  # workbench.layout.GraphLayout
    preprocess: dict | None = None
    labels: list[str] | None = None
    load_ms: float = 0.0
    layout_ms: float = 0.0
    generation: int = 0
    geometry: Any = None  # workbench.graph_geometry.GraphGeometry, built off the UI thread


@dataclass
class RunResult:
    """One completed run: its profile, the outputs read back, and the placement used."""

    generation: int
    index: int
    backend: BackendType
    profile: Any  # engine.profile.Profile
    outputs: dict[str, np.ndarray]
    placement: dict[str, Any] = field(default_factory=dict)
    token: int = 0
    #: {layer: engine.ops.costs.LayerCost} and engine.analysis.MemoryTimeline of the run's
    #: shapes and placement (None where the engine could not derive them)
    costs: dict[str, Any] | None = None
    memory: Any = None


@dataclass
class CompareResult:
    """Per-layer error of one backend against another, in execution order."""

    backend: BackendType
    #: a backend, or ``engine.compare.CPU_FLOAT64`` (the CPU running the model in float64)
    against: BackendType | str
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
