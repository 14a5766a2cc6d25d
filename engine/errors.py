"""Exceptions raised by the engine. Every error a user can cause is one of these."""


class EngineError(Exception):
    """Base class of all engine errors."""


class ModelLoadError(EngineError):
    """The file is not a usable ONNX model (not ONNX, truncated, unknown op, invalid graph)."""


class InputError(EngineError, ValueError):
    """An input given to ``Worker.schedule`` is missing, unknown, or of the wrong shape or dtype."""


class UnsupportedOpError(EngineError):
    """No backend (not even the CPU) can run a layer."""


class BackendUnavailableError(EngineError):
    """The requested backend cannot be used on this machine (for example: no GPU adapter)."""


class KernelError(EngineError):
    """A kernel failed while running a layer; the message names the layer."""


class GPUError(EngineError):
    """wgpu reported a validation, out-of-memory or device-lost error."""
