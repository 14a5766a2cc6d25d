"""Reshapes that merge axes (and any other Reshape) as texel shuffles (shaders/pixel/reshape.wgsl).

A tensor's texels run in row-major order over (pre, blocked extent / 4, inner): the elements
before the blocked axis, its texels and the elements after it. A Reshape keeps every
element's row-major position, so an output texel's input texels follow from that position
with a few integer divisions per texel. ``reshape_plan`` picks the cheapest map that is exact
for the two shapes; splits keep the linear shuffle of kernels_permute.py.
"""

from __future__ import annotations

import math
from functools import lru_cache

from engine.backends.gpu_pixel.layout import layout_of

SAME, STRIDE, ANY = 0, 1, 2


def texel_order(shape) -> tuple[int, int, int, int, int]:
    """(pre, blocked extent, inner, texels along the blocked axis, texture width) of shape."""
    lay = layout_of(tuple(shape))
    ax = lay.axis
    pre = int(math.prod(lay.dims[:ax]))
    inner = int(math.prod(lay.dims[ax + 1:]))
    return pre, lay.dims[ax], inner, lay.blocked[ax], lay.width


def _aligned(pre: int, d: int) -> bool:
    """Texel k along (pre, d) holds elements 4k..4k+3 of the merged (pre * d) axis."""
    return pre == 1 or d % 4 == 0


def _stride(n_in: int, d_in: int, n_out: int, p_out: int, d_out: int) -> int:
    """Texels between the input texels of an output texel's 4 components when they are one
    component of texels a fixed step apart, else 0. Component c is c * n_out elements on from
    component 0, whose position is a multiple of 4 * n_out plus less than n_out when the
    output's texels start at multiples of 4 along (pre, blocked extent)."""
    if not _aligned(p_out, d_out):
        return 0
    if n_in % (4 * n_out) == 0:
        # all 4 within one (pre, blocked index) of the input: n_out apart in its inner
        return n_out
    m = n_out // n_in
    if n_out % n_in == 0 and m % 4 == 0 and d_in % (4 * m) == 0:
        # m further along the input's blocked axis without leaving it: same component, m / 4
        # blocks of n_in texels apart (a split of the blocked axis)
        return m // 4 * n_in
    return 0


@lru_cache(maxsize=1024)
def reshape_plan(in_shape: tuple[int, ...], out_shape: tuple[int, ...]):
    """(map, ints, shader constants) of reshape.wgsl for a Reshape in_shape -> out_shape."""
    p_in, d_in, n_in, b_in, w_in = texel_order(in_shape)
    p_out, d_out, n_out, b_out, w_out = texel_order(out_shape)
    ints = [(n_out, b_out, d_out, w_out), (n_in, b_in, d_in, w_in), (0, 0, 0)]
    mode, lane_div, step = ANY, False, _stride(n_in, d_in, n_out, p_out, d_out)
    if n_in == n_out and (d_in == d_out or (_aligned(p_in, d_in) and _aligned(p_out, d_out))):
        mode = SAME
    elif step:
        mode = STRIDE
        if step % w_in == 0:  # whole texture rows apart
            ints[2] = (0, step // w_in, step)
        elif n_in == 1 or (step == n_out and w_in % (4 * n_out) == 0):  # along one row
            ints[2] = (step, 0, step)
        else:
            ints[2], lane_div = (0, 0, step), True
    return mode, ints, {"LANES": mode, "LANE_DIV": str(lane_div).lower()}


def reshape_copy(be, x, out_shape):
    mode, ints, consts = reshape_plan(tuple(x.shape), tuple(out_shape))
    return be.run("reshape", tuple(out_shape), [x], ints=ints, **consts)
