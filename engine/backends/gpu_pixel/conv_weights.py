"""Re-laid weight textures of the pixel Conv and ConvTranspose kernels (made once, cached on
the weight's handle)."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_pixel.handles import PixelTensor
from engine.backends.gpu_pixel.layout import layout_of, pack


def weight_matrix(be, w, rows: int, width: int):
    """W's texels re-wrapped as [M rows, width] (cached on the weight's handle)."""
    mat = w.derived.get("matrix")
    if mat is None:
        tex = be.r.alloc(width, rows, for_write=True)
        be.r.write(tex, pack(w.host).reshape(rows, width, 4))
        mat = w.derived["matrix"] = PixelTensor(layout_of(tuple(w.host.shape)), tex)
    return mat


def transposed_fit(w_shape, max_dim: int) -> bool:
    """Whether ConvTranspose weights [C, M, k...] fit the transposed matrix texture."""
    c, m = w_shape[0], w_shape[1]
    return m <= max_dim and (c + 3) // 4 * int(np.prod(w_shape[2:])) <= max_dim


def transposed_matrix(be, w, rows: int, width: int):
    """ConvTranspose weights [C, M, k...] as Conv's [M rows, width] matrix of W[c, m, ...]
    (cached on the weight's handle)."""
    mat = w.derived.get("tmatrix")
    if mat is None:
        host = np.swapaxes(np.asarray(w.host, np.float32), 0, 1)
        tex = be.r.alloc(width, rows, for_write=True)
        be.r.write(tex, pack(host).reshape(rows, width, 4))
        mat = w.derived["tmatrix"] = PixelTensor(layout_of(tuple(host.shape)), tex)
    return mat


def grouped_blocks(c: int, cg: int) -> int:
    """Texel blocks of input channels the widest group of ``cg`` channels spans (a group
    that starts inside a block spans one more than its size needs)."""
    return max((g * cg + cg + 3) // 4 - g * cg // 4 for g in range(c // cg))


def grouped_matrix(be, w, blocks: int, mg: int):
    """Weights of a grouped Conv whose groups are not aligned to 4 channels, as a [M rows,
    blocks * kh * kw texels] matrix on the input's own channel blocks: row m holds the blocks
    from the one its group starts in, zero for channels outside the group (cached)."""
    mat = w.derived.get("grouped")
    if mat is None:
        host = np.asarray(w.host, np.float32)
        m, cg = host.shape[:2]
        taps = host.shape[2:]
        start = (np.arange(m) // mg) * cg                       # first channel of m's group
        lanes = (start // 4 * 4)[:, None] + np.arange(blocks * 4)[None, :]
        inside = (lanes >= start[:, None]) & (lanes < start[:, None] + cg)
        wide = np.zeros((m, blocks * 4, *taps), np.float32)
        rows, cols = np.nonzero(inside)
        wide[rows, cols] = host[rows, lanes[rows, cols] - start[rows]]
        tex = be.r.alloc(blocks * int(np.prod(taps)), m, for_write=True)
        be.r.write(tex, pack(wide).reshape(m, -1, 4))
        mat = w.derived["grouped"] = PixelTensor(layout_of(tuple(wide.shape)), tex)
    return mat


def depthwise_taps(be, w, m: int, taps: int):
    """Depthwise weights [M, 1, kh, kw] as texel (tap, m // 4) = 4 channels' weights."""
    mat = w.derived.get("taps")
    if mat is None:
        blocks = (m + 3) // 4
        data = np.zeros((blocks * 4, taps), np.float32)
        data[:m] = np.asarray(w.host, np.float32).reshape(m, taps)
        texels = np.ascontiguousarray(data.reshape(blocks, 4, taps).transpose(0, 2, 1))
        tex = be.r.alloc(taps, blocks, for_write=True)
        be.r.write(tex, texels)
        mat = w.derived["taps"] = PixelTensor(layout_of(tuple(w.host.shape)), tex)
    return mat


def tap_fit(w_shape, max_dim: int, mg: int, group: int) -> bool:
    """Whether Conv weights [M, C / group, k...] fit tap_matrix's (or, for groups not
    aligned to 4 channels, tap_group_matrix's) texture."""
    m, cg = w_shape[0], w_shape[1]
    taps = int(np.prod(w_shape[2:]))
    if cg == 1 and mg == 1:  # depthwise: depthwise_taps's [taps, M / 4] texels
        return taps <= max_dim and (m + 3) // 4 <= max_dim
    aligned = group == 1 or (cg % 4 == 0 and mg % 4 == 0)
    span = (cg + 3) // 4 if aligned else group_span(m, cg, mg)
    return (m + 3) // 4 <= max_dim and span * 4 * taps <= max_dim


def tap_matrix(be, w, transposed: bool = False):
    """Conv weights [M, C / group, kh, kw] (groups aligned to 4 channels) tap-major for
    shaders/pixel/conv_tap.wgsl: texel (((ky * kw + kx) * CBG + cb) * 4 + j, mb) holds
    W[4 mb + j, 4 cb..4 cb + 3, ky, kx], zero past M and C / group. ``transposed``:
    ConvTranspose weights [C, M, kh, kw], laid out as W[c, m] at [m, c]."""
    key = "taps_transposed" if transposed else "taps_major"
    mat = w.derived.get(key)
    if mat is None:
        host = np.asarray(w.host, np.float32)
        if transposed:
            host = np.swapaxes(host, 0, 1)
        m, cg = host.shape[:2]
        taps = int(np.prod(host.shape[2:]))
        mbs, cbg = (m + 3) // 4, (cg + 3) // 4
        wide = np.zeros((mbs * 4, cbg * 4, taps), np.float32)
        wide[:m, :cg] = host.reshape(m, cg, taps)
        # [mb, j, cb, c, tap] -> [mb, tap, cb, j, c]
        texels = wide.reshape(mbs, 4, cbg, 4, taps).transpose(0, 4, 2, 1, 3)
        tex = be.r.alloc(taps * cbg * 4, mbs, for_write=True)
        be.r.write(tex, np.ascontiguousarray(texels).reshape(mbs, taps * cbg * 4, 4))
        mat = w.derived[key] = PixelTensor(layout_of(tuple(host.shape)), tex)
    return mat


def group_span(m: int, cg: int, mg: int) -> int:
    """Input blocks a conv_tap fragment of a grouped Conv reads: from the block holding the
    first channel of output block mb's first group to the one holding its last group's end."""
    most = 1
    for mb in range((m + 3) // 4):
        first = (4 * mb) // mg * cg // 4
        last = ((min(4 * mb + 3, m - 1) // mg + 1) * cg - 1) // 4
        most = max(most, last - first + 1)
    return most


def tap_group_matrix(be, w, mg: int, span: int):
    """Grouped Conv weights [M, C / group, kh, kw] (groups not aligned to 4) tap-major for
    conv_tap.wgsl: texel (((tap * span) + b) * 4 + j, mb) holds W[4 mb + j] on the input
    channels of block first(mb) + b, zero outside that output channel's group."""
    mat = w.derived.get("taps_grouped")
    if mat is None:
        host = np.asarray(w.host, np.float32)
        m, cg = host.shape[:2]
        taps = int(np.prod(host.shape[2:]))
        flat = host.reshape(m, cg, taps)
        mbs = (m + 3) // 4
        wide = np.zeros((mbs, taps, span, 4, 4), np.float32)   # [mb, tap, b, j, lane]
        for mb in range(mbs):
            first = (4 * mb) // mg * cg // 4
            for j in range(min(4, m - 4 * mb)):
                mm = 4 * mb + j
                c0 = mm // mg * cg
                ch = (first * 4 + np.arange(span * 4)).reshape(span, 4)
                inside = (ch >= c0) & (ch < c0 + cg)
                b, lane = np.nonzero(inside)
                # (advanced indices around a slice: the rows come first, then the taps)
                wide[mb, :, b, j, lane] = flat[mm, ch[b, lane] - c0]
        tex = be.r.alloc(taps * span * 4, mbs, for_write=True)
        be.r.write(tex, np.ascontiguousarray(wide).reshape(mbs, taps * span * 4, 4))
        mat = w.derived["taps_grouped"] = PixelTensor(layout_of(tuple(host.shape)), tex)
    return mat
