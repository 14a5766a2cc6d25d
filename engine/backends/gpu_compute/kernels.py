"""The GPU_COMPUTE kernel table: importing this registers every ``kernels_*.py`` module.

Needs no adapter, so ``python -m engine ops`` lists GPU kernels on any machine.
"""

from engine._autoload import import_submodules
from engine.backends.gpu_compute import __path__ as _path
from engine.backends.gpu_compute.registry import KERNELS

import_submodules("engine.backends.gpu_compute", _path, prefix="kernels_")

__all__ = ["KERNELS"]
