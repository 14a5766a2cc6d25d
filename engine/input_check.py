"""Checking what a user passes to ``Worker.schedule`` against the model's input specs.

Every problem is an ``InputError`` naming the input with what it expects and what it got.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.errors import InputError
from engine.model import TensorSpec
from engine.tensor import Tensor


def check_inputs(input_specs: list[TensorSpec], inputs) -> dict[str, Any]:
    """The feeds by name, or an ``InputError`` for a missing, unknown or mismatched input."""
    specs = {s.name: s for s in input_specs}
    if not isinstance(inputs, dict):
        if len(specs) != 1:
            raise InputError(f"the model has {len(specs)} inputs "
                             f"({', '.join(map(repr, specs))}); pass a dict of name -> array")
        inputs = {next(iter(specs)): inputs}
    unknown = [n for n in inputs if n not in specs]
    if unknown:
        raise InputError(f"unknown input {unknown[0]!r}; the model's inputs are "
                         f"{', '.join(map(repr, specs)) or 'none'}")
    feeds, bound = {}, {}
    for name, spec in specs.items():
        if name not in inputs:
            raise InputError(f"missing input {name!r} ({_describe(spec)})")
        feeds[name] = _check_one(spec, inputs[name], bound)
    return feeds


def _describe(spec: TensorSpec) -> str:
    if spec.shape is None and spec.dtype is None:
        return "a sequence or optional value"
    dt = "any dtype" if spec.dtype is None else np.dtype(spec.dtype).name
    return f"expects {dt} {spec.shape_str()}"


def _check_one(spec: TensorSpec, value: Any, bound: dict[str, int]) -> Any:
    if isinstance(value, Tensor):
        value = value.download_to_array()
    if spec.shape is None and spec.dtype is None:
        return value  # sequence / optional / map inputs are passed through
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):
        raise InputError(f"input {spec.name!r} expects a NumPy array, got {type(value).__name__}")
    if spec.dtype is not None and value.dtype != spec.dtype:
        raise InputError(f"input {spec.name!r} expects dtype {np.dtype(spec.dtype).name}, "
                         f"got {value.dtype.name}")
    if spec.shape is not None:
        ok = len(spec.shape) == value.ndim
        for want, got in zip(spec.shape, value.shape):
            if isinstance(want, int) and want != got:
                ok = False
            elif isinstance(want, str):
                if bound.setdefault(want, got) != got:
                    raise InputError(f"input {spec.name!r}: dimension {want!r} is {bound[want]} "
                                     f"in another input but {got} here")
        if not ok:
            raise InputError(f"input {spec.name!r} expects shape {spec.shape_str()}, "
                             f"got {list(value.shape)}")
    return value
