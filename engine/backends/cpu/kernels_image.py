"""Sampling CPU kernels (NumPy): GridSample (N-D), AffineGrid, RoiAlign, Col2Im, MaxUnpool."""

from __future__ import annotations

import itertools

import numpy as np

from engine.backends.cpu.registry import cpu_kernel


def _reflect(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Fold coordinates into [lo, hi] by repeated reflection at the borders."""
    span = hi - lo
    if span <= 0:
        return np.full_like(v, lo)
    below, above = v < lo, v > hi
    d = np.where(below, lo - v, np.where(above, v - hi, 0.0))
    n = np.floor(d / span)
    r = d - n * span
    even = (n % 2) == 0
    from_lo = np.where(even, lo + r, hi - r)
    from_hi = np.where(even, hi - r, lo + r)
    return np.where(below, from_lo, np.where(above, from_hi, v))


def _cubic_weights(t: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    def k(d):
        d = np.abs(d)
        return np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                        np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0))

    return [k(t + 1), k(t), k(1 - t), k(2 - t)]


@cpu_kernel("GridSample", since=16)
def GridSample(layer, inputs):
    x, grid = inputs
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(layer.attr("mode", "linear"),
                                                         layer.attr("mode", "linear"))
    padding = layer.attr("padding_mode", "zeros")
    align = bool(layer.attr("align_corners", 0))
    dims = x.shape[2:]
    r = len(dims)
    n = x.shape[0]
    xt = np.moveaxis(x, 1, -1)  # (N, D1..Dr, C)
    out_sp = grid.shape[1:-1]
    batch = np.arange(n).reshape((n,) + (1,) * len(out_sp))
    coords, lows, highs = [], [], []
    for i, d in enumerate(dims):
        g = grid[..., r - 1 - i].astype(np.float64)  # the grid lists the last axis first
        c = (g + 1) / 2 * (d - 1) if align else ((g + 1) * d - 1) / 2
        c = c.astype(np.float32).astype(np.float64)
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        if mode == "nearest":
            c = np.rint(c)
        if padding == "border":
            c = np.where((c < lo) | (c > hi), np.clip(c, 0, d - 1), c)
        elif padding == "reflection":
            c = _reflect(c, lo, hi)
        coords.append(c)
        lows.append(lo)
        highs.append(hi)

    def fetch(idx: list[np.ndarray]) -> np.ndarray:
        ok = np.ones(idx[0].shape, bool)
        safe = []
        for i, (j, d) in enumerate(zip(idx, dims)):
            if padding == "zeros":
                ok &= (j >= 0) & (j < d)
                j = np.clip(j, 0, d - 1)
            elif padding == "border":
                j = np.clip(j, 0, d - 1)
            else:
                j = _reflect(j.astype(np.float64), lows[i], highs[i]).astype(np.int64)
                j = np.clip(j, 0, d - 1)
            safe.append(j.astype(np.int64))
        vals = xt[(batch, *safe)].astype(np.float64)
        return np.where(ok[..., None], vals, 0.0)

    if mode == "nearest":
        y = fetch([c.astype(np.int64) for c in coords])
    else:
        base = [np.floor(c).astype(np.int64) for c in coords]
        frac = [c - b for c, b in zip(coords, base)]
        if mode == "linear":
            offsets, weights = (0, 1), [[1 - f, f] for f in frac]
        elif mode == "cubic":
            offsets, weights = (-1, 0, 1, 2), [_cubic_weights(f) for f in frac]
        else:
            raise ValueError(f"GridSample: unknown mode {mode!r}")
        y = 0.0
        for combo in itertools.product(range(len(offsets)), repeat=r):
            w = np.ones(base[0].shape)
            for i, k in enumerate(combo):
                w = w * weights[i][k]
            y = y + w[..., None] * fetch([b + offsets[k] for b, k in zip(base, combo)])
    return np.moveaxis(np.asarray(y), -1, 1).astype(x.dtype)


@cpu_kernel("AffineGrid", since=20)
def AffineGrid(layer, inputs):
    theta, size = inputs
    size = [int(s) for s in np.asarray(size).reshape(-1)]
    n, spatial = size[0], size[2:]
    align = bool(layer.attr("align_corners", 0))

    def axis(d):
        if align:
            return np.linspace(-1, 1, d) if d > 1 else np.zeros(1)
        return (np.arange(d) * 2 + 1) / d - 1

    # base grid with coordinates listed x (last axis) first, then a homogeneous 1
    mesh = np.meshgrid(*[axis(d) for d in spatial], indexing="ij")
    base = np.stack(list(mesh[::-1]) + [np.ones(spatial)], axis=-1)  # (D..., r+1)
    th = theta.astype(np.float64)
    out = np.einsum("...k,njk->n...j", base, th)
    return out.reshape((n, *spatial, len(spatial))).astype(theta.dtype)


def _bilinear_samples(img: np.ndarray, ys: np.ndarray, xs: np.ndarray):
    """Corner weights and values for RoiAlign's sampling points (C, P) per the
    Detectron convention: points beyond one pixel outside count as zero."""
    h, w = img.shape[1:]
    out_of_range = (ys < -1) | (ys > h) | (xs < -1) | (xs > w)
    y = np.maximum(ys, 0)
    x = np.maximum(xs, 0)
    y0 = np.floor(y).astype(np.int64)
    x0 = np.floor(x).astype(np.int64)
    top = y0 >= h - 1
    left = x0 >= w - 1
    y0 = np.where(top, h - 1, y0)
    x0 = np.where(left, w - 1, x0)
    y1 = np.where(top, h - 1, y0 + 1)
    x1 = np.where(left, w - 1, x0 + 1)
    y = np.where(top, y0, y)
    x = np.where(left, x0, x)
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    ws = [hy * hx, hy * lx, ly * hx, ly * lx]
    vs = [img[:, y0, x0], img[:, y0, x1], img[:, y1, x0], img[:, y1, x1]]
    ws = [np.where(out_of_range, 0.0, wt) for wt in ws]
    return ws, vs


@cpu_kernel("RoiAlign", since=10)
def RoiAlign(layer, inputs):
    x, rois, batch_idx = inputs
    oh, ow = int(layer.attr("output_height", 1)), int(layer.attr("output_width", 1))
    ratio = int(layer.attr("sampling_ratio", 0))
    scale = float(layer.attr("spatial_scale", 1.0))
    half = layer.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel" \
        if (layer.opset or 16) >= 16 else False
    mode = layer.attr("mode", "avg")
    c = x.shape[1]
    out = np.zeros((len(rois), c, oh, ow))
    xd = x.astype(np.float64)
    for r, (roi, b) in enumerate(zip(rois.astype(np.float64), batch_idx)):
        off = 0.5 if half else 0.0
        x0, y0, x1, y1 = roi * scale - off
        rw, rh = x1 - x0, y1 - y0
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = ratio if ratio > 0 else int(np.ceil(rh / oh))
        gw = ratio if ratio > 0 else int(np.ceil(rw / ow))
        gh, gw = max(gh, 1), max(gw, 1)
        iy = (np.arange(gh) + 0.5) * bh / gh
        ix = (np.arange(gw) + 0.5) * bw / gw
        ys = (y0 + np.arange(oh)[:, None] * bh + iy[None, :])  # (oh, gh)
        xs = (x0 + np.arange(ow)[:, None] * bw + ix[None, :])  # (ow, gw)
        yy = np.broadcast_to(ys[:, None, :, None], (oh, ow, gh, gw)).reshape(-1)
        xx = np.broadcast_to(xs[None, :, None, :], (oh, ow, gh, gw)).reshape(-1)
        ws, vs = _bilinear_samples(xd[int(b)], yy, xx)
        if mode == "avg":
            val = sum(wt * v for wt, v in zip(ws, vs)).reshape(c, oh, ow, gh * gw)
            out[r] = val.sum(axis=-1) / (gh * gw)
        else:  # max over samples of the largest weighted corner, as common runtimes do
            val = np.max(np.stack([wt * v for wt, v in zip(ws, vs)]), axis=0)
            out[r] = val.reshape(c, oh, ow, gh * gw).max(axis=-1)
    return out.astype(x.dtype)


@cpu_kernel("Col2Im", since=18)
def Col2Im(layer, inputs):
    cols, image_shape, block_shape = inputs
    img = [int(v) for v in image_shape]
    blk = [int(v) for v in block_shape]
    r = len(img)
    dil = layer.attr("dilations") or [1] * r
    strides = layer.attr("strides") or [1] * r
    pads = layer.attr("pads") or [0] * (2 * r)
    n = cols.shape[0]
    kprod = int(np.prod(blk))
    c = cols.shape[1] // kprod
    padded = [img[i] + pads[i] + pads[i + r] for i in range(r)]
    counts = [(padded[i] - (dil[i] * (blk[i] - 1) + 1)) // strides[i] + 1 for i in range(r)]
    data = cols.reshape((n, c, *blk, *counts))
    out = np.zeros((n, c, *padded), dtype=np.float64)
    for k in itertools.product(*[range(b) for b in blk]):
        dst = tuple(slice(k[i] * dil[i], k[i] * dil[i] + strides[i] * (counts[i] - 1) + 1,
                          strides[i]) for i in range(r))
        out[(slice(None), slice(None), *dst)] += data[(slice(None), slice(None), *k)]
    crop = tuple(slice(pads[i], pads[i] + img[i]) for i in range(r))
    return out[(slice(None), slice(None), *crop)].astype(cols.dtype)


@cpu_kernel("MaxUnpool", since=9)
def MaxUnpool(layer, inputs):
    x, idx = inputs[0], inputs[1]
    shape_in = inputs[2] if len(inputs) > 2 else None
    ks = layer.attr("kernel_shape")
    r = len(ks)
    strides = layer.attr("strides") or [1] * r
    pads = layer.attr("pads") or [0] * (2 * r)
    spatial = [(x.shape[2 + i] - 1) * strides[i] - pads[i] - pads[i + r] + ks[i]
               for i in range(r)]
    shape = (*x.shape[:2], *spatial)
    out = np.zeros(int(np.prod(shape)), dtype=x.dtype)
    out[np.asarray(idx).reshape(-1)] = x.reshape(-1)
    out = out.reshape(shape)
    if shape_in is not None:
        # indices address the default-shaped output; a requested larger shape pads at the end
        target = tuple(int(v) for v in shape_in)
        full = np.zeros(target, dtype=x.dtype)
        full[tuple(slice(0, min(a, b)) for a, b in zip(shape, target))] = \
            out[tuple(slice(0, min(a, b)) for a, b in zip(shape, target))]
        out = full
    return out
