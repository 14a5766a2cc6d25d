"""Conv followed by a non-overlapping MaxPool (kernel = stride, no padding) as one CPU step
(called by ``step_fusion.fuse_steps``).

Recognizers and VGG-style CNNs pool every convolution's output 2x2 (or 2x1): the Conv writes
its whole output and the pool reads it all back to keep a quarter of it (crnn's four pools
cost 3-4x onnxruntime's time, the full-size outputs being written and read from L2 or
memory). Fused, the register-blocked kernel (``conv_blocked``) pools each task's rows from
its scratch block, still in L1, and writes only the pooled plane.

Pooling before the bias and the activation is exact for the activations that never
decrease (none, Relu, Clip, LeakyRelu with alpha >= 0): rounding ``x + b`` keeps the order
of the values, so the largest pre-activation gives the largest output. NaN propagates as in
the MaxPool kernel (``pool_same._mx``). Other kernels and activations decline, and the two
layers run one by one.
"""

from __future__ import annotations

from numba import njit

from engine.backends.cpu.activation import ACT_CLIP, ACT_LEAKY, ACT_NONE, ACT_RELU, act_row
from engine.backends.cpu.conv_depthwise import _OPTS
from engine.backends.cpu.pool_same import _mx
from engine.backends.cpu.simd import (
    LANES,
    vadd,
    vle_select,
    vload,
    vmax,
    vpairmax,
    vsplat,
    vstore,
    vzero,
)

#: make the fusion where it applies (False: Conv and MaxPool run apart; tests, benchmarks)
ENABLED = True
#: largest pool window side fused
MAX_WINDOW = 4


def monotone(act: int, params) -> bool:
    """Whether pooling before activation ``act`` gives the result of pooling after it."""
    if act == ACT_LEAKY:
        return float(params[0]) >= 0.0
    return act in (ACT_NONE, ACT_RELU, ACT_CLIP)


@njit(**_OPTS)
def _pool2_rows(src, Wq, dst, y0, y1, pw, b, relu):
    """``pool_rows`` for 2 x 2 and 2 x 1 windows and no activation or ReLU, 16 outputs a
    step in registers (``simd``): the rows' maximum, then for 2 x 2 the neighbours' by a
    lane shuffle. The loop of ``pool_rows`` pairing strided values ran scalar, 1.5 ns a
    2 x 2 output: ~9% of a recognizer whose four convolutions pool."""
    ohp, owp = dst.shape
    bv, zero = vsplat(b), vzero()
    z = b - b
    for py in range(y0 // 2, min(y1 // 2, ohp)):
        r0 = (py * 2 - y0) * Wq
        r1 = r0 + Wq
        d = dst[py]
        q = 0
        while q + LANES <= owp:
            if pw == 2:
                o, o1 = r0 + 2 * q, r1 + 2 * q
                v = vpairmax(vmax(vload(src, o), vload(src, o1)),
                             vmax(vload(src, o + LANES), vload(src, o1 + LANES)))
            else:
                v = vmax(vload(src, r0 + q), vload(src, r1 + q))
            v = vadd(v, bv)
            if relu:
                v = vle_select(v, zero, zero, v)  # (NaN fails the test and stays)
            vstore(d, q, v)
            q += LANES
        for k in range(q, owp):
            if pw == 2:
                o, o1 = r0 + 2 * k, r1 + 2 * k
                m = _mx(_mx(src[o], src[o1]), _mx(src[o + 1], src[o1 + 1]))
            else:
                m = _mx(src[r0 + k], src[r1 + k])
            v = m + b
            d[k] = z if relu and v <= z else v


@njit(**_OPTS)
def pool_rows(src, Wq, dst, y0, y1, ph, pw, b, act, p0, p1, pooled):
    """Rows ``y0:y1`` of a convolution held in ``src`` (row pitch ``Wq``, row ``y0`` first)
    -> the rows of ``dst`` = act(max over ph x pw windows + b) they cover in full.
    ``pooled``: scratch of (pw + 1) * dst.shape[1] floats."""
    if ph == 2 and pw <= 2 and (act == ACT_NONE or act == ACT_RELU):
        _pool2_rows(src, Wq, dst, y0, y1, pw, b, act == ACT_RELU)
        return
    ohp, owp = dst.shape
    n = owp * pw
    for py in range(y0 // ph, min(y1 // ph, ohp)):
        r0 = (py * ph - y0) * Wq
        # rows sliced and indexed from 0: offsets added inside the index kept a
        # negative-index test on every load and the loops scalar (2x2: 3.5x slower)
        a = src[r0:r0 + n]
        if ph == 2 and pw == 2:
            # the two rows first (a contiguous loop), then column pairs
            c = src[r0 + Wq:r0 + Wq + n]
            rows2 = pooled[owp:owp + n]
            for q in range(n):
                rows2[q] = _mx(a[q], c[q])
            for q in range(owp):
                pooled[q] = _mx(rows2[2 * q], rows2[2 * q + 1])
        elif ph == 2 and pw == 1:
            c = src[r0 + Wq:r0 + Wq + n]
            for q in range(owp):
                pooled[q] = _mx(a[q], c[q])
        else:
            for q in range(owp):
                pooled[q] = a[q * pw]
            for dy in range(ph):
                c = src[r0 + dy * Wq:r0 + dy * Wq + n]
                for dx in range(pw):
                    for q in range(owp):
                        pooled[q] = _mx(c[q * pw + dx], pooled[q])
        act_row(pooled, dst[py], owp, b, act, p0, p1)


def _window(pool_layer) -> tuple[int, int] | None:
    """(kh, kw) of a 2-D MaxPool whose stride equals its kernel, without padding, dilation,
    ceil mode or indices output; None for any other."""
    if pool_layer.op_type != "MaxPool" or len([o for o in pool_layer.outputs if o]) != 1:
        return None
    k = list(pool_layer.attr("kernel_shape") or [])
    s = list(pool_layer.attr("strides") or [1] * len(k))
    pads = list(pool_layer.attr("pads") or [0] * 2 * len(k))
    dil = list(pool_layer.attr("dilations") or [1] * len(k))
    auto = pool_layer.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if len(k) != 2 or k != s or any(pads) or any(d != 1 for d in dil) \
            or auto not in ("NOTSET", "VALID") or pool_layer.attr("ceil_mode", 0) \
            or pool_layer.attr("storage_order", 0) or max(k) > MAX_WINDOW or min(k) < 1:
        return None
    return int(k[0]), int(k[1])


def match_conv_maxpool(i, steps, t, only_users, constants):
    """Conv ``i`` (output ``t``) read only by such a MaxPool."""
    u = only_users(t, 1)
    if u is None or not ENABLED:
        return None
    j = u[0]
    pool_layer = steps[j][0]
    window = _window(pool_layer)
    if window is None or pool_layer.domain not in ("", "ai.onnx") or pool_layer.captures \
            or steps[j][3] is None:
        return None

    def conv_maxpool(layer, args, window=window):
        from engine.backends.cpu.kernels_conv import conv

        return conv(layer, args, pool=window)

    return conv_maxpool, [j], steps[j][3]
