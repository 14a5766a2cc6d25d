"""Pooling kernels (shaders/pixel/pool.wgsl); 1-D runs as 2-D with H = 1."""

from __future__ import annotations

from engine.backends.gpu_pixel.kernels_conv import _as_2d, _spatial_check
from engine.backends.gpu_pixel.registry import pixel_kernel
from engine.ops.conv_pool import conv_geometry

#: a global pool over more elements than this reduces rows first, then the column of row
#: results: one fragment looping over a whole 112 x 112 plane took 2 ms on a real GPU
TWO_LEVEL = 256


def pool(be, layer, inputs, in_metas, out_metas, mode, global_=False, p=2.0):
    x, y = in_metas[0].shape, out_metas[0].shape
    n, c, h, wd = _as_2d(x)
    _, _, oh, ow = _as_2d(y)
    if global_ and h > 1 and wd > 1 and h * wd > TWO_LEVEL:
        # max of row maxima, mean of row means (equal counts), Lp norm of row Lp norms
        rows = be.run("pool", (n, c, h, 1), inputs[:1], MODE=mode, floats=[(p,)],
                      ints=[(n, c, h, wd), ((c + 3) // 4, h, 1, 0), (1, wd, 1, 1),
                            (0, 0, 1, 1), (0, 0)])
        out = be.run("pool", y, [rows], MODE=mode, floats=[(p,)],
                     ints=[(n, c, h, 1), ((c + 3) // 4, 1, 1, 0), (h, 1, 1, 1),
                           (0, 0, 1, 1), (0, 0)])
        be.free(rows)
        return [out]
    if global_:
        kh, kw, pb, pe, s, d = h, wd, (0, 0), (0, 0), (1, 1), (1, 1)
    else:
        geo = conv_geometry(layer, x).as_2d()
        pb, pe, s, d = geo.pads_begin, geo.pads_end, geo.strides, geo.dilations
        kh, kw = geo.kernel
    include = int(layer.attr("count_include_pad", 0)) if mode == "avg" else 0
    ints = [(n, c, h, wd), ((c + 3) // 4, oh, ow, include), (kh, kw, s[0], s[1]),
            (pb[0], pb[1], d[0], d[1]), (pe[0], pe[1])]
    return [be.run("pool", y, inputs[:1], ints=ints, floats=[(p,)], MODE=mode)]


@pixel_kernel("MaxPool", check=_spatial_check)
def MaxPool(be, layer, inputs, in_metas, out_metas):
    return pool(be, layer, inputs, in_metas, out_metas, "max")


@pixel_kernel("AveragePool", check=_spatial_check)
def AveragePool(be, layer, inputs, in_metas, out_metas):
    return pool(be, layer, inputs, in_metas, out_metas, "avg")


@pixel_kernel("LpPool", check=_spatial_check)
def LpPool(be, layer, inputs, in_metas, out_metas):
    return pool(be, layer, inputs, in_metas, out_metas, "lp",
                p=float(layer.attr("p", 2)))


@pixel_kernel("GlobalAveragePool", check=_spatial_check)
def GlobalAveragePool(be, layer, inputs, in_metas, out_metas):
    return pool(be, layer, inputs, in_metas, out_metas, "avg", global_=True)


@pixel_kernel("GlobalMaxPool", check=_spatial_check)
def GlobalMaxPool(be, layer, inputs, in_metas, out_metas):
    return pool(be, layer, inputs, in_metas, out_metas, "max", global_=True)


@pixel_kernel("GlobalLpPool", check=_spatial_check)
def GlobalLpPool(be, layer, inputs, in_metas, out_metas):
    return pool(be, layer, inputs, in_metas, out_metas, "lp", global_=True,
                p=float(layer.attr("p", 2)))
