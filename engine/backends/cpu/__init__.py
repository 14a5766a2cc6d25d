"""CPU backend. Importing it registers every CPU kernel."""

from engine.backends.cpu.registry import KERNELS, cpu_kernel
from engine.backends.cpu import kernels_elementwise, kernels_shape  # noqa: F401
from engine.backends.cpu.backend import CpuBackend

__all__ = ["KERNELS", "CpuBackend", "cpu_kernel"]
