"""Symbolic dimensions: which dims are anonymous, and concrete defaults for symbolic inputs.

Exporters write unknown dims in many ways: ``?``, an empty ``dim_param``, ``-1`` (as a
parameter or a negative value) and ``unk__N`` (tf2onnx). Each such occurrence is its own
unknown, so at import every one becomes a fresh symbol (``?1``, ``?2``...) that never binds
with another. Meaningful names (``batch``, ``seq``) bind: the same name in two places must
have the same size.
"""

from __future__ import annotations

import re

import onnx

_ANONYMOUS = re.compile(r"^(|\?|-\d+|unk__\d+)$")


def is_anonymous(dim_param: str) -> bool:
    """True for the spellings exporters use for 'unknown, unrelated to any other dim'."""
    return bool(_ANONYMOUS.match(dim_param.strip()))


def is_fresh(dim) -> bool:
    """True for a symbol made by ``freshen_anonymous_dims`` (it never binds)."""
    return isinstance(dim, str) and dim.startswith("?") and dim[1:].isdigit()


def freshen_anonymous_dims(graph: onnx.GraphProto) -> int:
    """Give every anonymous dim of the graph's inputs, outputs and value infos its own symbol.

    Returns how many dims were renamed. Runs before ONNX shape inference, so inferred
    shapes carry the fresh symbols along.
    """
    used = set()
    infos = list(graph.input) + list(graph.output) + list(graph.value_info)
    for vi in infos:
        for d in _dims(vi):
            if d.HasField("dim_param"):
                used.add(d.dim_param)
    counter = 0
    renamed = 0
    for vi in infos:
        for d in _dims(vi):
            if d.HasField("dim_value"):
                anonymous = d.dim_value < 0
            else:  # no value: an anonymous parameter, or nothing at all
                anonymous = not d.HasField("dim_param") or is_anonymous(d.dim_param)
            if not anonymous:
                continue
            counter += 1
            while f"?{counter}" in used:
                counter += 1
            d.Clear()
            d.dim_param = f"?{counter}"
            renamed += 1
    return renamed


def _dims(vi: onnx.ValueInfoProto):
    if not vi.type.HasField("tensor_type"):
        return []
    tt = vi.type.tensor_type
    return tt.shape.dim if tt.HasField("shape") else []


def default_shape(shape, dtype=None) -> tuple[int, ...]:
    """A concrete shape for a declared one: symbolic dims become plausible sizes.

    The first axis (a batch, almost always) becomes 1; the spatial axes of a float
    image-like input (rank 4) become 224; any other symbolic dim becomes 16.
    """
    import numpy as np

    rank = len(shape)
    image = rank == 4 and dtype is not None and np.dtype(dtype).kind == "f"
    out = []
    for axis, d in enumerate(shape):
        if isinstance(d, int) and d >= 0:
            out.append(d)
        elif axis == 0:
            out.append(1)
        elif image and axis >= 2:
            out.append(224)
        else:
            out.append(16)
    return tuple(out)
