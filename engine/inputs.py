"""Seeded random inputs for a model: the one recipe the CLI, ``bench``, the zoo and the
workbench use.

Values are made directly in each input's dtype (float32 is never drawn as float64 and
cast), input ``i`` draws from its own generator seeded ``seed + i`` (so one input's values
do not depend on the others, and the workbench can redraw one input alone), and symbolic
dims come from the shapes the caller gives, else 1. An input that would need an absurd
amount of random data is an ``EngineError`` that names it, not a MemoryError.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from engine.errors import EngineError

#: the most random data made for one input; bigger ones must be given
MAX_RANDOM_BYTES = 2 << 30


def size_text(nbytes: int) -> str:
    """``nbytes`` in the largest unit that keeps it at least 1 (``4.0 GB``)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


def input_shape(spec, shapes: Mapping | None = None) -> tuple[int, ...]:
    """The concrete shape of input ``spec``: ``shapes[spec.name]`` when given; else its
    declared shape with each symbolic (or unknown) dim taken from ``shapes[symbol]``, or 1."""
    shapes = shapes or {}
    given = shapes.get(spec.name)
    if given is not None:
        return tuple(int(d) for d in given)
    out = []
    for d in spec.shape or ():
        if isinstance(d, int) and d >= 0:
            out.append(d)
        else:
            value = shapes.get(d) if isinstance(d, str) else None
            out.append(int(value) if isinstance(value, int) else 1)
    return tuple(out)


def random_array(spec, seed: int = 0, shape: Sequence[int] | None = None,
                 limit: int = MAX_RANDOM_BYTES) -> np.ndarray:
    """Seeded random values for one input (``shape`` overrides ``input_shape(spec)``):
    standard normal floats, integers in [0, 10), booleans half true."""
    shape = tuple(shape) if shape is not None else input_shape(spec)
    dtype = np.dtype(spec.dtype or np.float32)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > limit:
        raise EngineError(
            f"input {spec.name!r} of shape {list(shape)} ({dtype}) would need "
            f"{size_text(nbytes)} of random data (the limit is {size_text(limit)}); give it "
            f"a value (on the command line: --input {spec.name}=FILE.npy)")
    rng = np.random.default_rng(seed)
    if dtype in (np.float32, np.float64):
        return rng.standard_normal(shape, dtype=dtype)
    if dtype.kind == "f" or (dtype.kind == "V" and dtype.itemsize <= 2):  # float16, ml_dtypes
        return rng.standard_normal(shape, dtype=np.float32).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 10, shape, dtype=dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape, dtype=np.uint8).view(np.bool_)
    raise EngineError(f"cannot make a random value for input {spec.name!r} ({dtype}); give "
                      f"it a value (on the command line: --input {spec.name}=FILE.npy)")


def random_feeds(model_or_inputs, shapes: Mapping | None = None, seed: int = 0,
                 skip: Iterable[str] = (), limit: int = MAX_RANDOM_BYTES
                 ) -> dict[str, np.ndarray]:
    """Random values for a model's inputs (or a list of ``TensorSpec``s) not named in
    ``skip``. ``shapes`` maps input names to shapes and/or symbolic dims to sizes (see
    ``input_shape``); input ``i`` is seeded ``seed + i``."""
    specs = getattr(model_or_inputs, "inputs", model_or_inputs)
    skip = set(skip)
    return {spec.name: random_array(spec, seed + i, input_shape(spec, shapes), limit)
            for i, spec in enumerate(specs) if spec.name not in skip}
