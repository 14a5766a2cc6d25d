"""Transpose, Slice, Split and axis-splitting Reshapes as linear texel shuffles.

Where every input index is ``start + step * out[src]`` (no wrapping, padding or
reflection), or a Reshape only splits axes, the input texel's row, x and blocked-axis
index are linear in the output index (shaders/pixel/permute.wgsl), so the shader needs
one dot product per texel instead of per-element index decomposition. ``linear_plan``
computes those coefficients from the two layouts.
"""

from __future__ import annotations

from engine.backends.gpu_pixel.layout import MAX_RANK as RANK
from engine.backends.gpu_pixel.layout import layout_of


def linear_plan(in_shape, out_shape, terms, start):
    """(ints, shader constants) of permute.wgsl.

    Input index j is ``start[j] + sum(mult * out[k] for k, mult in terms[j])`` (output axes
    counted in ``out_shape``'s own rank).
    """
    lin, lout = layout_of(tuple(in_shape)), layout_of(tuple(out_shape))
    r_in, r_out = len(in_shape), len(out_shape)
    rows = lin.row_strides()
    ax_in, ax_out = lin.axis, lout.axis
    cy, cx, cb = [0] * RANK, [0] * RANK, [0] * RANK
    y0 = x0 = b0 = 0
    for j in range(r_in):
        k = j + RANK - r_in
        first, scale = int(start[j]), 1
        if k == ax_in:  # the blocked axis: its element index (texel and component)
            coef, b0 = cb, b0 + first
        elif k == RANK - 1:  # the texture's x
            coef, x0 = cx, x0 + first
        else:  # a texture-row axis
            coef, y0, scale = cy, y0 + first * rows[k], rows[k]
        for s, mult in terms[j]:
            coef[s + RANK - r_out] += int(mult) * scale
    block_rows = rows[ax_in] if ax_in < RANK - 1 else 0
    steps = (cy[ax_out], cx[ax_out], cb[ax_out])
    whole = steps == (0, 0, 1) and b0 % 4 == 0 and \
        all(cb[k] % 4 == 0 for k in range(RANK) if k != ax_out)
    ints = [cy[:4], (cy[4], cy[5], y0, block_rows), cx[:4], (cx[4], cx[5], x0),
            cb[:4], (cb[4], cb[5], b0), steps]
    consts = {"BLOCKED_X": str(ax_in == RANK - 1).lower(), "WHOLE": str(whole).lower()}
    return ints, consts


def affine_terms(src, step):
    """``terms`` of linear_plan for input index ``start + step * out[src]``."""
    return [[(s, st)] if s >= 0 else [] for s, st in zip(src, step)]


def reshape_terms(in_shape, out_shape):
    """``terms`` of a Reshape that only splits axes (each input axis longer than 1 is a run
    of consecutive output axes), else None (merging axes is not linear)."""
    ins = [(j, int(d)) for j, d in enumerate(in_shape) if d != 1]
    outs = [(k, int(d)) for k, d in enumerate(out_shape) if d != 1]
    terms: list[list] = [[] for _ in in_shape]
    pos = 0
    for j, d in ins:
        group, prod = [], 1
        while prod < d and pos < len(outs):
            group.append(outs[pos])
            prod *= outs[pos][1]
            pos += 1
        if prod != d:
            return None
        mult = 1
        for k, dk in reversed(group):
            terms[j].append((k, mult))
            mult *= dk
    return terms if pos == len(outs) else None


def linear_copy(be, x, out_shape, terms, start=None):
    start = start if start is not None else [0] * len(x.shape)
    ints, consts = linear_plan(tuple(x.shape), tuple(out_shape), terms, start)
    return be.run("permute", tuple(out_shape), [x], ints=ints, **consts)
