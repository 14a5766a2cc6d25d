"""CPU backend. Importing it registers every CPU kernel (all ``kernels_*.py`` modules).

The kernels are defined under ``kernel_cache.kernels_cached``: their compiled code is kept
per version of this package's sources.
"""

from engine._autoload import import_submodules
from engine.backends.cpu.kernel_cache import kernels_cached

with kernels_cached():
    from engine.backends.cpu.registry import KERNELS, cpu_kernel

    import_submodules(__name__, __path__, prefix="kernels_")
    # kernels the plan imports only when a model needs them
    from engine.backends.cpu import layer_norm_channels, warmup  # noqa: F401
    from engine.backends.cpu.backend import CpuBackend

__all__ = ["KERNELS", "CpuBackend", "cpu_kernel"]
