"""GPU_PIXEL's kernel table: importing this registers every kernel (no adapter needed)."""

from engine.backends.gpu_pixel import (  # noqa: F401  (imported for their registrations)
    kernels_conv,
    kernels_einsum,
    kernels_elementwise,
    kernels_gemm,
    kernels_index,
    kernels_norm,
    kernels_pool,
    kernels_reduce,
    kernels_resize,
    kernels_rnn,
    kernels_sequence,
    kernels_shape,
)
from engine.backends.gpu_pixel.registry import KERNELS

__all__ = ["KERNELS"]
