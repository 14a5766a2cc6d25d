"""GPU_PIXEL: every layer is a render pass drawing a full-screen triangle into an
``rgba32float`` texture, with the op in a WGSL fragment shader (shaders/pixel/). It needs
no compute shaders; every tensor it holds is a texture.

Tensor layout (``layout.py``)
-----------------------------
A float32 tensor of rank r <= 6 is padded with leading 1s to rank 6. One axis is
*blocked*: 4 consecutive elements along it share one RGBA texel. The blocked axis is the
channel axis (axis 1) from rank 2 on, as for NCHW images, and axis 0 for rank 0 and 1.
The blocked dims (the blocked axis counted in texels, ``ceil(d / 4)``) are laid out in
row-major order: the last axis runs along the texture's x (width = its extent) and every
other axis is flattened into y (height = the product of the others). For NCHW that means
texel ``(x = w, y = (n * ceil(C / 4) + c // 4) * H + h)`` holds channels ``c..c+3`` of
pixel ``(n, h, w)``; a 1-D convolution input ``[N, C, L]`` has exactly the texture of
``[N, C, 1, L]``.

Padding: when the blocked extent is not a multiple of 4, the unused components of the
last texel of each block row are 0, and every kernel writes 0 there, so dot products over
whole texels (Conv, Gemm) need no masks. Both texture sides are limited by the adapter's
``max-texture-dimension-2d`` (16384 on lavapipe); a layer with a tensor that does not fit,
an empty tensor, or a non-float32 tensor falls back to the CPU with that reason.
Non-float tensors (shapes, axes, indices) stay host arrays, read by kernels as parameters.

Upload packs on the CPU and writes the texture through the queue; readback copies the
texture into a staging buffer and maps it asynchronously (``request_download``).
Per-layer timings come from render-pass timestamp queries.
"""

from engine.backends.gpu_pixel.backend import GpuPixelBackend, PixelTensor
from engine.backends.gpu_pixel.kernels import KERNELS

__all__ = ["KERNELS", "GpuPixelBackend", "PixelTensor"]
