"""Per-op shape logic shared by every backend.

An ``Op`` subclass is named after the ONNX operator, with the opset version it
was introduced in as a suffix when several versions differ (``Slice_10``), as
the ONNX reference evaluator names its classes. ``infer`` maps input metadata
to output metadata at schedule time, when every shape is concrete; the GPU
backends use it to allocate outputs before the kernel runs. ``cpu_inputs`` lists
the inputs whose *values* are needed to plan the work (Reshape's shape, Slice's starts...).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from engine.errors import KernelError
from engine.model import Layer


@dataclass(slots=True)
class Meta:
    """What the scheduler knows of a tensor: concrete shape, dtype and, if on the CPU, its value."""

    shape: tuple[int, ...]
    dtype: np.dtype
    value: np.ndarray | None = None

    @classmethod
    def of(cls, array: np.ndarray) -> Meta:
        return cls(tuple(array.shape), array.dtype, array)

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))  # (np.prod costs microseconds on short tuples)


def meta_of(value) -> Meta:
    """The Meta of a CPU value: an array, a NumPy scalar, or anything else (a sequence or an
    optional's None: an object 'tensor' of shape ())."""
    if type(value) is np.ndarray:  # the common case first: every output of every run
        return Meta(value.shape, value.dtype, value)
    if isinstance(value, np.ndarray):
        return Meta.of(value)
    if isinstance(value, np.generic):
        return Meta.of(np.asarray(value))
    return Meta((), np.dtype(object), value)


class Op:
    """Shape/attribute logic of one ONNX operator (one version range)."""

    op_type: ClassVar[str]
    domain: ClassVar[str] = ""
    since_version: ClassVar[int] = 1
    #: indices of inputs whose values must be known on the CPU to schedule the op
    cpu_inputs: ClassVar[tuple[int, ...]] = ()
    # traits read through ``engine.ops.traits.op_traits`` (see OpTraits for their meaning)
    deterministic: ClassVar[bool] = True
    may_expand: ClassVar[bool] = False
    shape_only: ClassVar[bool] = False
    moves_only: ClassVar[bool] = False

    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        """Output metadata for concrete input metadata. ``None`` stands for an omitted input."""
        raise KernelError(f"{self.op_type} has no shape logic")


# (domain, op_type) -> list of Op classes sorted by since_version
_OPS: dict[tuple[str, str], list[type[Op]]] = {}
_NAME = re.compile(r"^([A-Za-z][A-Za-z0-9]*?)(?:_(\d+))?$")


def register_op(cls: type[Op]) -> type[Op]:
    """Class decorator: registers an ``Op``; op type and version come from the class name."""
    m = _NAME.match(cls.__name__)
    if "op_type" not in cls.__dict__:
        cls.op_type = m.group(1) if m else cls.__name__
    if "since_version" not in cls.__dict__ and m and m.group(2):
        cls.since_version = int(m.group(2))
    versions = _OPS.setdefault((cls.domain, cls.op_type), [])
    if any(v.since_version == cls.since_version for v in versions):
        raise RuntimeError(f"shape logic of {cls.op_type} v{cls.since_version} registered twice")
    versions.append(cls)
    versions.sort(key=lambda c: c.since_version)
    return cls


def find_op(op_type: str, domain: str = "", opset: int = 10**9) -> Op | None:
    """The newest Op whose since_version is <= ``opset``, or None if the op has no shape logic."""
    versions = _OPS.get((_canon(domain), op_type))
    if not versions:
        return None
    chosen = None
    for cls in versions:
        if cls.since_version <= opset:
            chosen = cls
    return (chosen or versions[0])()


def op_for(layer: Layer) -> Op | None:
    return find_op(layer.op_type, layer.domain, layer.opset or 10**9)


def cpu_input_indices(layer: Layer) -> tuple[int, ...]:
    op = op_for(layer)
    return op.cpu_inputs if op else ()


def registered_ops() -> list[tuple[str, str]]:
    return sorted(_OPS)


def _canon(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain
