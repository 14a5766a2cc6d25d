"""The one cache of compiled pipelines: per device, keyed by a hashable program.

A program is a shader file plus the template parameters that specialise it (GPU_COMPUTE's
``Program``, GPU_PIXEL's ``RenderProgram``); it knows how to ``build(device)`` its pipeline.
Shapes are never template parameters, so the number of pipelines a model needs stays small.
The cache is process-wide per device: workers and backends come and go, pipelines stay.
"""

from __future__ import annotations

from typing import Any, Protocol


class BuildsPipeline(Protocol):
    def build(self, device) -> Any: ...


class PipelineCache:
    """program -> what its ``build(device)`` returned, for one device; tracks which programs
    have been dispatched (lavapipe compiles lazily at the first dispatch)."""

    def __init__(self, device):
        self.device = device
        self._pipelines: dict[BuildsPipeline, Any] = {}
        #: programs that have been dispatched at least once
        self.warmed: set = set()

    def __contains__(self, program) -> bool:
        return program in self._pipelines

    def __len__(self) -> int:
        return len(self._pipelines)

    def get(self, program: BuildsPipeline):
        hit = self._pipelines.get(program)
        if hit is None:
            hit = self._pipelines[program] = program.build(self.device)
        return hit


_caches: dict[int, PipelineCache] = {}


def pipeline_cache(device) -> PipelineCache:
    """The process-wide cache of ``device`` (a wgpu GPUDevice)."""
    cache = _caches.get(id(device))
    if cache is None or cache.device is not device:
        cache = _caches[id(device)] = PipelineCache(device)
    return cache
