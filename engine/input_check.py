"""Checking what a user passes to ``Worker.schedule`` against the model's input specs.

Every problem is an ``InputError`` naming the input with what it expects and what it got.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.errors import InputError
from engine.model import TensorSpec
from engine.symbols import is_fresh
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


class InputChecker:
    """``check_inputs`` for one model, remembering what the last run passed: arrays of the
    dtypes and shapes it accepted skip the checks (a streaming model's run paid ~2 us an
    input for them), not the copy."""

    def __init__(self, specs: list[TensorSpec]):
        self.specs = specs
        self._names = tuple(s.name for s in specs)
        self._accepted: tuple | None = None
        #: the (dtype, shape) key of the last call's inputs (None: not plain arrays)
        self.last_key: tuple | None = None

    def __call__(self, inputs) -> dict[str, Any]:
        key = self.last_key = self._key(inputs)
        if key is not None and key == self._accepted:
            # (``copy`` makes a C-ordered array, like check_inputs' copy)
            return {n: inputs[n].copy() for n in self._names}
        feeds = check_inputs(self.specs, inputs)
        self._accepted = key
        return feeds

    def accepted_as_is(self, inputs) -> dict[str, Any] | None:
        """The feeds without a copy when ``inputs`` are plain arrays of the dtypes and shapes
        the last checked call passed (for a caller that copies them itself, at once); else
        None (``__call__`` checks and copies)."""
        key = self._key(inputs)
        if key is None or key != self._accepted:
            return None
        self.last_key = key
        return {s.name: inputs[s.name] for s in self.specs}

    def _key(self, inputs) -> tuple | None:
        """(dtype, shape) of each input in spec order when ``inputs`` is a dict of exactly
        the model's inputs as plain non-object NumPy arrays, else None (checked in full)."""
        if type(inputs) is not dict or len(inputs) != len(self._names):
            return None
        key = []
        for n in self._names:
            v = inputs.get(n)
            if type(v) is not np.ndarray:
                return None
            dtype = v.dtype
            if dtype.hasobject:
                return None
            key.append((dtype, v.shape))
        return tuple(key)


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
        if len(spec.shape) != value.ndim:
            raise InputError(f"input {spec.name!r} expects shape {spec.shape_str()} "
                             f"({len(spec.shape)} dims), got {list(value.shape)} "
                             f"({value.ndim} dims)")
        for axis, (want, got) in enumerate(zip(spec.shape, value.shape)):
            if isinstance(want, int) and want >= 0 and want != got:
                raise InputError(f"input {spec.name!r} expects shape {spec.shape_str()}, got "
                                 f"{list(value.shape)}: dimension {axis} must be {want}, "
                                 f"not {got}")
            if isinstance(want, str) and not is_fresh(want):
                first = bound.setdefault(want, (got, spec.name, axis))
                if first[0] != got:
                    where = (f"dimension {first[2]} of the same input" if first[1] == spec.name
                             else f"input {first[1]!r} (dimension {first[2]})")
                    raise InputError(
                        f"input {spec.name!r}: dimension {axis} is named {want!r}, which is "
                        f"{first[0]} in {where}, but {got} here; dims with the same name must "
                        "have the same size")
    # the queued run must not see later changes the caller makes to its array
    return np.array(value, copy=True, order="C") if value.dtype != object else value.copy()
