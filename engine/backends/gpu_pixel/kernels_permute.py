"""Transpose, Slice and Split as linear texel shuffles (shaders/pixel/permute.wgsl).

Where every input index is ``start + step * out[src]`` (no wrapping, padding or
reflection), the input texel's row, x and blocked-axis index are linear in the output
index, so the shader needs one dot product per texel instead of per-element index
decomposition. ``linear_plan`` computes those coefficients from the two layouts.
"""

from __future__ import annotations

from engine.backends.gpu_pixel.layout import MAX_RANK as RANK
from engine.backends.gpu_pixel.layout import layout_of


def linear_plan(in_shape, out_shape, src, start, step):
    """(ints, shader constants) of permute.wgsl; ``src`` etc. per input axis as in affine_copy."""
    lin, lout = layout_of(tuple(in_shape)), layout_of(tuple(out_shape))
    r_in, r_out = len(in_shape), len(out_shape)
    rows = lin.row_strides()
    ax_in, ax_out = lin.axis, lout.axis
    cy, cx, cb = [0] * RANK, [0] * RANK, [0] * RANK
    y0 = x0 = b0 = 0
    for j in range(r_in):
        k = j + RANK - r_in
        s = src[j] + RANK - r_out if src[j] >= 0 else -1
        first, stride = int(start[j]), int(step[j])
        if k == ax_in:  # the blocked axis: its element index (texel and component)
            coef, b0 = cb, b0 + first
        elif k == RANK - 1:  # the texture's x
            coef, x0 = cx, x0 + first
        else:  # a texture-row axis
            coef, y0 = cy, y0 + first * rows[k]
            stride *= rows[k]
        if s >= 0:
            coef[s] += stride
    block_rows = rows[ax_in] if ax_in < RANK - 1 else 0
    steps = (cy[ax_out], cx[ax_out], cb[ax_out])
    whole = steps == (0, 0, 1) and b0 % 4 == 0 and \
        all(cb[k] % 4 == 0 for k in range(RANK) if k != ax_out)
    ints = [cy[:4], (cy[4], cy[5], y0, block_rows), cx[:4], (cx[4], cx[5], x0),
            cb[:4], (cb[4], cb[5], b0), steps]
    consts = {"BLOCKED_X": str(ax_in == RANK - 1).lower(), "WHOLE": str(whole).lower()}
    return ints, consts


def linear_copy(be, x, out_shape, src, start, step):
    ints, consts = linear_plan(tuple(x.shape), tuple(out_shape), src, start, step)
    return be.run("permute", tuple(out_shape), [x], ints=ints, **consts)
