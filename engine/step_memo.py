"""Results of the CPU run loop's small shape computations, reused while their inputs repeat.

Exported models compute shapes, index vectors and masks at run time: ``Shape`` -> ``Gather``
-> ``Unsqueeze`` -> ``Concat`` -> ``Reshape``, ``Range`` and ``ConstantOfShape`` for position
ids and masks. From one run to the next (same input shapes) those layers compute the same
few values, and each costs a kernel call of 3-30 us inside a run (BERT-style encoder: 0.4 ms
of 7.6). A step whose op is deterministic and whose every input is a small array (or, for
``Shape``/``Size``, any array: only its shape is read) keeps its last result with the exact
inputs it came from; when the next run brings the same inputs (equal shapes, dtypes and
bytes), the result is reused without calling the kernel. Only values derived from shapes
and constants take part, never a model input's values or a computed tensor's. Results are
read-only from then on: kernels never write their inputs, and steps whose outputs are model
outputs (handed to the user) are left out.
"""

from __future__ import annotations

import numpy as np

from engine.ops.traits import op_traits

#: keep results where ``eligible`` allows (False: every step runs; tests and benchmarks)
ENABLED = True
#: inputs up to this many bytes take part in a key (larger: the step runs every time)
MAX_INPUT_BYTES = 2048
#: results up to this many bytes are kept
MAX_RESULT_BYTES = 1 << 20


def eligible(steps: list[tuple], constants, output_names: set[str]) -> list[int]:
    """Per step: 0 (always run), 1 (memo on its inputs' values) or 2 (a Shape/Size: memo on
    its input's shape and dtype). Only values computed from shapes and the model's constants
    qualify (``Shape`` -> ... chains): a step that reads a model input's or a computed
    tensor's values always runs, so repeated identical inputs never skip real work."""
    derived = set(constants)
    kinds = []
    if not ENABLED:
        return [0] * len(steps)
    for layer, fn, ins, _single, out_names, _gone, absorbed, parts in steps:
        kind = 0
        if fn is not None and parts is None and not absorbed and not layer.captures \
                and not any(n in output_names for _, n in out_names):
            traits = op_traits(layer.op_type, layer.domain)
            if traits.deterministic and traits.shape_only:
                kind = 2
            elif traits.deterministic and ins and all(not n or n in derived for n in ins):
                kind = 1
        if kind:
            derived.update(n for _, n in out_names)
        kinds.append(kind)
    return kinds


def key_of(args: list, kind: int, constants: dict[int, object]):
    """The memo key of a step's inputs, or None when one is too large or not an array. A
    model constant (``constants``: id -> value, fixed for the worker's life) is keyed by its
    identity, whatever its size: an embedding table read at shape-derived positions."""
    key = []
    for a in args:
        if a is None:
            key.append(None)
        elif isinstance(a, np.generic):  # a NumPy scalar (Gather of one index): immutable
            key.append((a.dtype.str, a.tobytes()))
        elif type(a) is not np.ndarray:
            return None
        elif kind == 2:
            key.append((a.shape, a.dtype.str))
        elif constants.get(id(a)) is a:
            key.append(id(a))
        elif a.nbytes > MAX_INPUT_BYTES:
            return None
        else:
            key.append((a.shape, a.dtype.str, a.tobytes()))
    return tuple(key)


def same_objects(args: list, kept: tuple | None) -> bool:
    """Whether ``args`` are the very objects a kept result came from (a kept producer hands
    out the same object every run, so most steps are matched without building a key)."""
    return kept is not None and len(kept) == len(args) and all(
        a is b for a, b in zip(args, kept))


def keepable(result) -> bool:
    """Whether a kernel's result may be kept: arrays or NumPy scalars (or a tuple of them),
    each of bounded size."""
    outs = result if type(result) is tuple else (result,)
    return all((type(o) is np.ndarray or isinstance(o, np.generic))
               and o.nbytes <= MAX_RESULT_BYTES for o in outs)


def holdable(args: list, constants: dict[int, object]) -> bool:
    """Whether a step's inputs may be held to match the next run's by identity: model
    constants, or values no larger than a kept result."""
    return all(a is None or constants.get(id(a)) is a
               or getattr(a, "nbytes", MAX_RESULT_BYTES + 1) <= MAX_RESULT_BYTES for a in args)
