"""Compute programs: a WGSL file under ``shaders/compute`` and the template parameters that
specialise it (element type, op name, tile sizes). Shapes are never template parameters:
they travel in a uniform buffer, so one pipeline serves every shape. Pipelines are compiled
once per device and kept in the shared ``PipelineCache`` of ``gpu_common``.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.backends.gpu_common import gpu_errors, load_shader
from engine.backends.gpu_common.arith_probe import division_constants
from engine.backends.gpu_common.pipelines import PipelineCache, pipeline_cache

__all__ = ["PipelineCache", "Program", "pipeline_cache"]


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

    def build(self, device) -> tuple:
        """(compute pipeline, bind group layout) of this program (``PipelineCache`` calls
        it once per device)."""
        code = self.source()
        with gpu_errors(f"compiling compute shader {self}"):
            stage = {"entry_point": "main"}
            constants = division_constants(device, code)
            if constants:
                stage["constants"] = constants
            module = device.create_shader_module(label=self.path, code=code)
            pipeline = device.create_compute_pipeline(
                label=self.path, layout="auto", compute={"module": module, **stage})
            return pipeline, pipeline.get_bind_group_layout(0)

    def __str__(self) -> str:
        spec = ", ".join(f"{k}={v}" for k, v in self.params)  # names and constants only
        return f"{self.path}({spec})"
