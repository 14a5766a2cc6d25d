"""Inference engine: ONNX import, a Worker that schedules layers on CPU or GPU backends."""

from engine.backends import BackendType
from engine.errors import (
                           BackendUnavailableError,
                           EngineError,
                           GPUError,
                           InputError,
                           KernelError,
                           ModelLoadError,
                           UnsupportedOpError,
)
from engine.model import Graph, Layer, Model, TensorSpec
from engine.onnx_import import ModelLoader
from engine.profile import LayerTiming, Profile
from engine.tensor import Tensor
from engine.worker import Placement, Worker

__all__ = [
    "BackendType", "BackendUnavailableError", "EngineError", "GPUError", "Graph", "InputError",
    "KernelError", "Layer", "LayerTiming", "Model", "ModelLoadError", "ModelLoader", "Placement",
    "Profile", "Tensor", "TensorSpec", "UnsupportedOpError", "Worker",
]
