"""GPU_COMPUTE backend: WGSL compute shaders on wgpu (see backend.py for the design)."""

from engine.backends.gpu_compute.kernels import KERNELS
from engine.backends.gpu_compute.backend import GpuComputeBackend  # noqa: E402

__all__ = ["KERNELS", "GpuComputeBackend"]
