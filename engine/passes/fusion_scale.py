"""A constant per-column scale after a MatMul folded into its weights (``fusion``'s helper).

ConvNeXt-style blocks end in ``MatMul(x, W) + b`` then ``* gamma`` (layer scale: one factor
per output feature); other exporters write ``MatMul * scale`` with a scalar. With W and the
factors constant, ``(x W + b) * g = x (W g) + b g``: the Mul becomes new weights and a new
bias at load time, and every backend runs one layer less (on GPU_COMPUTE the MatMul's bias
epilogue then covers the whole chain).
"""

from __future__ import annotations

import numpy as np


def _row(value: np.ndarray | None, n: int, rank: int) -> bool:
    """Whether ``value`` scales or shifts whole columns of a rank-``rank`` product with ``n``
    columns without changing its shape: float, at most ``rank`` dims, all 1 but the last,
    which is 1 or ``n``."""
    if value is None or value.dtype.kind != "f" or value.ndim > rank:
        return False
    return all(d == 1 for d in value.shape[:-1]) and (value.ndim == 0
                                                     or value.shape[-1] in (1, n))


def fold_column_scale(fuser, mm) -> bool:
    """MatMul with constant 2-D weights, optionally an Add of a constant row, then a Mul by
    a constant row or scalar: the Mul folded into the weights (and the row). ``fuser`` is
    ``fusion._Fuser`` (its graph index and constant helpers)."""
    if len(mm.inputs) != 2 or len(mm.outputs) != 1:
        return False
    w = fuser.const(mm.inputs[1])
    spec = fuser.m.spec(mm.inputs[0])
    if w is None or w.ndim != 2 or w.dtype.kind != "f" or spec is None or spec.shape is None:
        return False
    rank, n = max(len(spec.shape), 2), w.shape[1]
    nxt = fuser.sole_user(mm.outputs[0])
    add = None
    if nxt is not None and nxt.op_type == "Add" and mm.outputs[0] in nxt.inputs[:2]:
        add, nxt = nxt, fuser.sole_user(nxt.outputs[0])
    last = add if add is not None else mm
    if nxt is None or nxt.op_type != "Mul" or last.outputs[0] not in nxt.inputs[:2] \
            or nxt.inputs[0] == nxt.inputs[1]:
        return False
    g = fuser.const(nxt.inputs[1] if nxt.inputs[0] == last.outputs[0] else nxt.inputs[0])
    if not _row(g, n, rank) or g.dtype != w.dtype:
        return False
    c_name = c = None
    if add is not None:
        c_name = add.inputs[1] if add.inputs[0] == mm.outputs[0] else add.inputs[0]
        c = fuser.const(c_name)
        if not _row(c, n, rank) or c.dtype != w.dtype:
            return False
    g64 = g.astype(np.float64)
    cols = np.broadcast_to(g64.reshape(-1), (n,)) if g64.size > 1 else g64.reshape(())
    mm.inputs[1] = fuser.new_const(mm.inputs[1], (w.astype(np.float64) * cols).astype(w.dtype))
    if add is not None:
        scaled = (c.astype(np.float64) * g64).astype(c.dtype)
        add.inputs[:] = [mm.outputs[0], fuser.new_const(c_name, scaled)]
    fuser.bypass(last, nxt)
    fuser.counts["matmul_scale"] += 1
    return True
