"""Reductions over the last axis in two passes (shaders/pixel/rowstats.wgsl, rownorm.wgsl).

The last axis runs along the texture's x, so one texture row holds whole tensor rows
(4 of them, one per component, from rank 3 on; one, blocked 4 per texel, at rank <= 2).
A first pass writes each row's statistics into a 2-texel-wide texture with one fragment
per row and statistic; a second pass normalises every texel from them. Each input texel
is then read about three times instead of once per texel of its row.
"""

from __future__ import annotations

from engine.backends.gpu_pixel.layout import layout_of


def row_mode(shape) -> bool:
    """True when the last axis is also the blocked one (rank <= 2)."""
    return len(shape) <= 2


def row_stats(be, x, shape, op: str, eps: float = 0.0, scale: float = 1.0):
    """The statistics texture of ``op`` (moments, softmax) of x's texture rows."""
    lay = layout_of(tuple(shape))
    row = row_mode(shape)
    return be.run("rowstats", (lay.height, 1, 2), [x], ints=[(shape[-1] if shape else 1,)],
                  floats=[(eps, scale)], OP=op, ROW=str(row).lower())


def row_finish(be, x, stats, shape, op: str, scale=None, bias=None):
    """Second pass: ``op`` (LayerNormalization, Softmax, LogSoftmax) of x with its stats."""
    dummy = be.r.dummy
    texes = [x, stats.tex, scale if scale is not None else dummy,
             bias if bias is not None else dummy]
    return be.run("rownorm", tuple(shape), texes, OP=op, ROW=str(row_mode(shape)).lower(),
                  BIAS=str(bias is not None).lower())


def row_softmax(be, x, shape, op: str):
    """Softmax or LogSoftmax over the last axis."""
    stats = row_stats(be, x, shape, "softmax")
    out = row_finish(be, x, stats, shape, op)
    be.free(stats)
    return out


def row_sum(be, x, shape, scale: float):
    """Sum over the last axis times ``scale``, keeping it (rank >= 3 only: same rows)."""
    out_shape = tuple(shape[:-1]) + (1,)
    return be.run("rowstats", out_shape, [x], ints=[(shape[-1],)], floats=[(0.0, scale)],
                  OP="sum", ROW="false")
