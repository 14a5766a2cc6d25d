"""Backends. ``create_backend`` builds one by type; GPU ones raise BackendUnavailableError."""

from __future__ import annotations

from engine.backends.base import Backend, BackendType, KernelTable
from engine.errors import BackendUnavailableError


def create_backend(kind: BackendType, **options) -> Backend:
    """A ready backend of ``kind``; raises BackendUnavailableError saying why it cannot be had."""
    kind = BackendType.parse(kind)
    if kind is BackendType.CPU:
        from engine.backends.cpu import CpuBackend

        return CpuBackend()
    if kind is BackendType.GPU_COMPUTE:
        try:
            from engine.backends.gpu_compute import GpuComputeBackend
        except ImportError as exc:
            raise BackendUnavailableError(f"GPU_COMPUTE unavailable: {exc}") from exc
        return GpuComputeBackend(**options)
    if kind is BackendType.GPU_PIXEL:
        try:
            from engine.backends.gpu_pixel import GpuPixelBackend
        except ImportError as exc:
            raise BackendUnavailableError(f"GPU_PIXEL unavailable: {exc}") from exc
        return GpuPixelBackend(**options)
    raise BackendUnavailableError(f"unknown backend {kind}")


def kernel_tables() -> dict[BackendType, KernelTable]:
    """Every backend's kernel table (importing a GPU backend's kernels needs no adapter)."""
    from engine.backends.cpu import KERNELS as cpu

    tables = {BackendType.CPU: cpu}
    for kind, module in ((BackendType.GPU_COMPUTE, "engine.backends.gpu_compute.kernels"),
                         (BackendType.GPU_PIXEL, "engine.backends.gpu_pixel.kernels")):
        try:
            mod = __import__(module, fromlist=["KERNELS"])
            tables[kind] = mod.KERNELS
        except ImportError:
            tables[kind] = KernelTable(kind.name)
    return tables


__all__ = ["Backend", "BackendType", "KernelTable", "create_backend", "kernel_tables"]
