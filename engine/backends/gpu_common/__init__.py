"""What both wgpu backends share: the device, error translation, shader loading, readback."""

from engine.backends.gpu_common.device import GpuDevice, get_device, gpu_errors
from engine.backends.gpu_common.shaders import load_shader

__all__ = ["GpuDevice", "get_device", "gpu_errors", "load_shader"]
