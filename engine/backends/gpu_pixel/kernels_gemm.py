"""Gemm and MatMul kernels (shaders/pixel/gemm.wgsl, matmul.wgsl)."""

from __future__ import annotations

from engine.backends.gpu_pixel.kernels_conv import activation, activation_reason
from engine.backends.gpu_pixel.kernels_elementwise import unary_params
from engine.backends.gpu_pixel.layout import MAX_RANK, layout_of
from engine.backends.gpu_pixel.registry import pixel_kernel
from engine.backends.gpu_pixel.targets import pixels_per_fragment, run_columns


def gemm(be, a, b, c, out_shape, k, trans_a=0, trans_b=0, alpha=1.0, beta=1.0,
         act="Identity", params=(0.0,)):
    m, n = out_shape
    texes = [a, b, c if c is not None else be.r.dummy]
    layouts = [None, None, c.layout if c is not None else None]
    c_mode = 0
    if c is not None:
        shape = tuple(c.shape)
        c_mode = 3 if shape == (m, n) else 2 if shape in ((n,), (1, n)) else 1
    ints = [(m, n, k, trans_a), (trans_b, c_mode)]
    floats = [(alpha, beta)] + [(0,)] * 6 + [params]
    return be.run("gemm", out_shape, texes, ints=ints, floats=floats, layouts=layouts, ACT=act,
                  TRANS_A=str(bool(trans_a)).lower(), TRANS_B=str(bool(trans_b)).lower(),
                  C_MODE=c_mode)


#: most output columns (colour targets) a batched MatMul fragment computes
MATMUL_TARGETS = 8


def _gemm_check(layer, metas):
    for i in (0, 1):
        m = metas[i] if i < len(metas) else None
        if m is not None and len(m.shape) != 2:
            return "Gemm inputs must be 2-D"
    return activation_reason(layer)


@pixel_kernel("Gemm", check=_gemm_check)
def Gemm(be, layer, inputs, in_metas, out_metas):
    ta, tb = int(layer.attr("transA", 0)), int(layer.attr("transB", 0))
    a = in_metas[0].shape
    k = a[0] if ta else a[1]
    c = inputs[2] if len(inputs) > 2 else None
    act, params = activation(layer)
    return [gemm(be, inputs[0], inputs[1], c, out_metas[0].shape, k, ta, tb,
                 float(layer.attr("alpha", 1.0)), float(layer.attr("beta", 1.0)), act, params)]


def _matmul_check(layer, metas):
    for m in metas[:2]:
        if m is not None and len(m.shape) < 2:
            return "MatMul with 1-D operands is not supported"
        if m is not None and len(m.shape) > 2 and layer.attr("activation"):
            return "a fused activation on batched MatMul is not supported"
    return activation_reason(layer)


def _epilogue(be, layer, out_meta):
    """(scale, bias row texture or None, activation op, its parameters) of the layers after
    the MatMul ``layer`` that its pass absorbs (``gpu_common.epilogues``; none when the layer
    has a fused activation of its own), or None."""
    if layer.attr("activation"):
        return None
    taken = be.epilogues.take(be, layer, out_meta)
    if taken is None:
        return None
    act, params = "Identity", [0.0] * 4
    if taken.act is not None:
        act, params = taken.act.op_type, unary_params(taken.act)
    bias = be.bias_row(taken.bias, out_meta.shape[-1]) if taken.bias is not None else None
    return taken.alpha, bias, act, params


@pixel_kernel("MatMul", check=_matmul_check)
def MatMul(be, layer, inputs, in_metas, out_metas):
    a, b, y = in_metas[0].shape, in_metas[1].shape, out_metas[0].shape
    act, params = activation(layer)
    rhs, packed = inputs[1], None
    flat = len(a) == 2 and len(b) == 2
    if not flat:
        if len(b) == 2 and rhs.host is not None and b[1] <= be.max_dim:
            # CPU-known [K, N] weights: repacked once with 4 k per texel (the layout of
            # [1, K, N]), so one texel read serves 4 steps of k
            rhs = rhs.derived.get("k_blocked")
            if rhs is None:
                rhs = inputs[1].derived["k_blocked"] = be.upload(
                    inputs[1].host.reshape((1,) + b))
            b = (1,) + tuple(b)
        packed = packed_plan(a, b, y)
    # the plain matmul.wgsl pass takes no epilogue: the layers after it then run as layers
    epi = _epilogue(be, layer, out_metas[0]) if flat or packed is not None else None
    alpha, bias = 1.0, None
    if epi is not None:
        alpha, bias, act, params = epi
    if flat:
        return [gemm(be, inputs[0], inputs[1], bias, y, a[1], alpha=alpha, act=act,
                     params=params)]
    if packed is not None:
        # a fragment computes ``per`` output columns (one colour target each), so each texel
        # of A it reads serves them all: ViT's linear layers 2x faster on lavapipe
        ints, consts = packed
        per = pixels_per_fragment(be, y[-1], widest=MATMUL_TARGETS)
        q = -(-y[-1] // per)
        return [run_columns(be, "matmul_packed", y,
                            [inputs[0], rhs, be.r.dummy if bias is None else bias],
                            ints + [(q,)], [(alpha,), params], per, q, ACT=act,
                            HAS_BIAS=str(bias is not None).lower(), **consts)]
    return [be.run("matmul", y, inputs[:2], ints=[(a[-2], b[-1], a[-1])])]


def packed_plan(a_shape, b_shape, y_shape):
    """(ints, shader constants) of matmul_packed.wgsl for these shapes, or None.

    The output's texel holds 4 entries of its blocked axis (a batch axis from rank 4 on,
    M at rank 3). A must hold the same 4 entries in its texels (or broadcast that axis);
    B may do the same, broadcast it, be blocked along K (rank 3) or be a [K, N] matrix.
    """
    if len(y_shape) < 3:
        return None
    out, la, lb = layout_of(tuple(y_shape)), layout_of(tuple(a_shape)), layout_of(tuple(b_shape))
    ax = out.axis
    if la.axis != ax:
        return None
    if la.dims[ax] == out.dims[ax]:
        a_splat = False
    elif la.dims[ax] == 1:
        a_splat = True
    else:
        return None
    if ax < MAX_RANK - 2 and lb.axis == ax:
        b_mode = 0 if lb.dims[ax] == out.dims[ax] else 1
    elif lb.axis == MAX_RANK - 2 and (ax == lb.axis or lb.dims[ax] == 1):
        b_mode = 2
    elif lb.axis == MAX_RANK - 1:
        b_mode = 3
    else:
        return None
    ra, rb = la.row_strides(), lb.row_strides()
    sa = [ra[k] if la.dims[k] > 1 else 0 for k in range(4)]
    sb = [rb[k] if lb.dims[k] > 1 else 0 for k in range(4)]
    ints = [(y_shape[-2], y_shape[-1], a_shape[-1]), sa, (ra[4],), sb, (rb[4],)]
    return ints, {"A_SPLAT": str(a_splat).lower(), "B_MODE": b_mode}
