"""GPU_PIXEL's kernel table: importing this registers every kernel (no adapter needed)."""

from engine.backends.gpu_pixel import (  # noqa: F401  (imported for their registrations)
    kernels_conv,
    kernels_elementwise,
    kernels_gemm,
    kernels_layernorm_fast,
    kernels_norm,
    kernels_reduce,
    kernels_resize,
    kernels_shape,
)
from engine.backends.gpu_pixel.registry import KERNELS

__all__ = ["KERNELS"]
