"""Compute pipelines, compiled once per shader specialisation and kept per device.

A ``Program`` names a WGSL file under ``shaders/compute`` and the template parameters that
specialise it (element type, operator expression, tile sizes). Shapes are never template
parameters: they travel in a uniform buffer, so one pipeline serves every shape and the
number of pipelines a model needs stays small.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.backends.gpu_common import gpu_errors, load_shader


@dataclass(frozen=True)
class Program:
    """A shader file plus its specialisation parameters (hashable: the cache key)."""

    path: str
    params: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, path: str, **params) -> Program:
        return cls(path, tuple(sorted((k, str(v)) for k, v in params.items())))

    def source(self) -> str:
        """WGSL text, includes expanded and specialised (``load_shader``)."""
        return load_shader(f"compute/{self.path}", **dict(self.params))

    def __str__(self) -> str:
        spec = ", ".join(f"{k}={v}" for k, v in self.params if "\n" not in v and len(v) < 40)
        return f"{self.path}({spec})"


class PipelineCache:
    """``Program`` -> (pipeline, bind group layout) for one device; tracks which were warmed."""

    def __init__(self, device):
        self.device = device
        self._pipelines: dict[Program, tuple] = {}
        #: programs that have been dispatched at least once (lavapipe compiles lazily then)
        self.warmed: set[Program] = set()

    def __contains__(self, program: Program) -> bool:
        return program in self._pipelines

    def __len__(self) -> int:
        return len(self._pipelines)

    def get(self, program: Program) -> tuple:
        hit = self._pipelines.get(program)
        if hit is not None:
            return hit
        code = program.source()
        with gpu_errors(f"compiling compute shader {program}"):
            module = self.device.create_shader_module(label=program.path, code=code)
            pipeline = self.device.create_compute_pipeline(
                label=program.path, layout="auto",
                compute={"module": module, "entry_point": "main"})
            layout = pipeline.get_bind_group_layout(0)
        self._pipelines[program] = (pipeline, layout)
        return pipeline, layout


_caches: dict[int, PipelineCache] = {}


def pipeline_cache(device) -> PipelineCache:
    """The process-wide cache of ``device`` (a wgpu GPUDevice)."""
    cache = _caches.get(id(device))
    if cache is None or cache.device is not device:
        cache = _caches[id(device)] = PipelineCache(device)
    return cache
