"""CPU backend. Importing it registers every CPU kernel (all ``kernels_*.py`` modules)."""

from engine._autoload import import_submodules
from engine.backends.cpu.registry import KERNELS, cpu_kernel

import_submodules(__name__, __path__, prefix="kernels_")

from engine.backends.cpu.backend import CpuBackend  # noqa: E402

__all__ = ["KERNELS", "CpuBackend", "cpu_kernel"]
