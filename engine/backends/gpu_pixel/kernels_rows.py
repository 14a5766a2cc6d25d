"""Reductions over the last axis in two passes (shaders/pixel/rowstats.wgsl, rownorm.wgsl).

The last axis runs along the texture's x, so one texture row holds whole tensor rows
(4 of them, one per component, from rank 3 on; one, blocked 4 per texel, at rank <= 2).
A first pass writes each row's statistics into a 2-texel-wide texture with one fragment
per row and statistic; a second pass normalises every texel from them. Each input texel
is then read about three times instead of once per texel of its row.

On GPUs (the backend's ``split_rows``) rows longer than ``2 * CHUNK`` texels take the
statistics in two levels: fragments of ``CHUNK`` texels each (rowstats_part.wgsl), then
one per row merging them (rowstats_merge.wgsl). A fragment walking a whole long row
leaves a GPU nearly idle: 2.3 ms for a Softmax over Whisper's 1500-long score rows on an
H100. CPU adapters keep one pass (its host cost outweighs their few threads' gain).
"""

from __future__ import annotations

from engine.backends.gpu_pixel.layout import layout_of


def row_mode(shape) -> bool:
    """True when the last axis is also the blocked one (rank <= 2)."""
    return len(shape) <= 2


#: texels of a row one fragment reduces in the first level of split statistics
CHUNK = 64


def _chunks(be, width: int) -> int:
    """How many chunks the statistics of rows ``width`` texels wide are taken in (1: one
    fragment per row and statistic)."""
    if not be.split_rows or width <= 2 * CHUNK or 2 * -(-width // CHUNK) > be.max_dim:
        return 1
    return -(-width // CHUNK)


def _stats(be, x, shape, out_shape, op: str, floats):
    lay = layout_of(tuple(shape))
    row = str(row_mode(shape)).lower()
    n = shape[-1] if shape else 1
    chunks = _chunks(be, lay.width)
    if chunks == 1:
        return be.run("rowstats", out_shape, [x], ints=[(n,)], floats=floats, OP=op, ROW=row)
    part = be.run("rowstats_part", (lay.height, 1, 2 * chunks), [x], ints=[(n,)],
                  floats=floats, OP=op, ROW=row, CHUNK=CHUNK)
    out = be.run("rowstats_merge", out_shape, [x, part], ints=[(n, chunks)], floats=floats,
                 OP=op, ROW=row)
    be.free(part)
    return out


def row_stats(be, x, shape, op: str, eps: float = 0.0, scale: float = 1.0):
    """The statistics texture of ``op`` (moments, softmax) of x's texture rows."""
    lay = layout_of(tuple(shape))
    return _stats(be, x, shape, (lay.height, 1, 2), op, [(eps, scale)])


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
    return _stats(be, x, shape, tuple(shape[:-1]) + (1,), "sum", [(0.0, scale)])
