"""Conv and ConvTranspose on the CPU (the Numba kernels are in ``conv_numba``).

Every case is run as 3-D (1-D and 2-D inputs get leading size-1 spatial axes). Group
convolutions are lowered to BLAS sgemm per group: pointwise ones straight on the input,
others on im2col patch matrices, built and multiplied tile by tile on large outputs.
Depthwise 2-D convolutions (one input channel per group) use a direct Numba kernel
(``conv_depthwise``), which beats sgemm on such thin matrices; most ungrouped 2-D float32
ones larger than 1x1 use the register-blocked direct kernel (``conv_blocked``).
ConvTranspose is sgemm followed by a parallel col2im scatter. Bias and the fused activation
(``engine.passes.fusion``) are applied to each block of the output right after it is
computed.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from engine.backends.cpu import (
    conv_blocked,
    conv_direct,
    conv_dw16,
    conv_pointwise,
    conv_shift,
    conv_smallplane,
    threads,
)
from engine.backends.cpu import kernels_winograd as winograd
from engine.backends.cpu.activation import (
    ACT_NONE,
    activation_of,
    bias_act_rows,
    bias_res_act_rows,
    carr,
    epilogue,
)
from engine.backends.cpu.conv_depthwise import depthwise_claimed, depthwise_nchw
from engine.backends.cpu.conv_numba import col2im, im2col
from engine.backends.cpu.conv_plan import ConvPlan
from engine.backends.cpu.conv_plan import as3d as _as3d
from engine.backends.cpu.conv_plan import check_conv as _check
from engine.backends.cpu.conv_plan import geom15 as _geom
from engine.backends.cpu.conv_plan import plan as _plan
from engine.backends.cpu.conv_pool_fused import monotone
from engine.backends.cpu.nchw16c import from_blocked
from engine.backends.cpu.nchw16c_dense import dense
from engine.backends.cpu.registry import cpu_kernel
from engine.ops.conv_pool import conv_transpose_geometry


class _Scratch(threading.local):
    """A grow-only buffer per thread for im2col/col2im matrices (avoids page faults per call)."""

    def __init__(self):
        self.buf = np.empty(0, np.float32)

    def get(self, shape: tuple[int, int], dtype) -> np.ndarray:
        n = shape[0] * shape[1]
        if self.buf.dtype != dtype or self.buf.size < n:
            self.buf = np.empty(max(n, int(self.buf.size * 1.25)), dtype)
        return self.buf[:n].reshape(shape)


_SCRATCH = _Scratch()
class _Fused:
    """What the CPU plan fused into one Conv call (``step_fusion``): an activation replacing
    the layer's own, and/or a residual added after it, followed by ``post``."""

    __slots__ = ("act", "params", "res", "post", "pparams")

    def __init__(self, act, res, post, dtype):
        self.act, self.res, self.post = act, res, post
        self.params = None if act is None else np.array(act[1:], dtype)
        self.pparams = np.array(post[1:], dtype)


def _epi(y2d: np.ndarray, b: np.ndarray, plan: ConvPlan, act, params, res2d=None, fz=None):
    """Bias + activation (+ residual and ``post``) on a block of ``y2d``
    (``fn(r0, r1, c0, c1)``), or None when there is nothing to do."""
    if res2d is not None:
        post, pp = fz.post[0], fz.pparams
        return lambda r0, r1, c0, c1: bias_res_act_rows(y2d, b, act, params, res2d, post, pp,
                                                       r0, r1, c0, c1)
    if not b.size and act == ACT_NONE:
        return None
    return lambda r0, r1, c0, c1: bias_act_rows(y2d, b, act, params, r0, r1, c0, c1)


def _conv_pooled(layer, x, w, bias, pool):
    if x.dtype != np.float32 or x.ndim != 4 or w.dtype != x.dtype:
        return None
    plan = _plan(layer, x, w, bias)
    (oh, ow), (ph, pw) = plan.out_shape, pool
    if plan.kind != "blocked" or plan.group != 1 or oh < ph or ow < pw \
            or not monotone(plan.act[0], plan.params):
        return None
    out = np.empty((x.shape[0], plan.Mg, oh // ph, ow // pw), np.float32)
    return conv_blocked.run(plan.blk, plan.b, carr(x), out, plan.act[0], plan.params, None,
                            (ACT_NONE, plan.params), pool)


def _patches(plan, x, out, act, params, res3, fz):
    """A patchify convolution (kernel = stride, no padding, ``conv_plan``'s "patches"): the
    patches copied as the rows of one matrix, then one product with the weights."""
    N, C = x.shape[:2]
    (kh, kw), (oh, ow) = plan.patch, plan.out_shape
    out3 = out.reshape(N, out.shape[1], oh * ow)
    rows = _SCRATCH.get((oh * ow, C * kh * kw), x.dtype)
    for n in range(N):
        np.copyto(rows.reshape(oh, ow, C, kh, kw), x[n, :, :oh * kh, :ow * kw]
                  .reshape(C, oh, kh, ow, kw).transpose(1, 3, 0, 2, 4))
        og = out3[n]
        threads.matmul(plan.w2, rows.T, og, after=_epi(
            og, plan.b, plan, act, params, None if res3 is None else res3[n], fz))
    return out


def _patch_rows(plan, x, out, act, params, res3, fz):
    """A patchify convolution (``conv_plan``'s "patch_rows") as a 1x1 convolution of its
    patches: a strided copy lays patch (c, ky, kx) values out as rows of (C kh kw, pixels),
    the order of the weights' columns, for ``conv_pointwise``."""
    N, C = x.shape[:2]
    (kh, kw), (oh, ow) = plan.patch, plan.out_shape
    M = out.shape[1]
    out3 = out.reshape(N, M, oh * ow)
    rows = _SCRATCH.get((C * kh * kw, oh * ow), x.dtype)
    post_code, pp = (ACT_NONE, plan.params) if fz is None else (fz.post[0], fz.pparams)
    for n in range(N):
        np.copyto(rows.reshape(C, kh, kw, oh, ow), x[n, :, :oh * kh, :ow * kw]
                  .reshape(C, oh, kh, ow, kw).transpose(0, 2, 4, 1, 3))
        conv_pointwise.run(plan.pwp, rows, out3[n], plan.b, act, params,
                           None if res3 is None else res3[n], post_code, pp)
    return out


@cpu_kernel("Conv")
def Conv(layer, inputs):
    # a small layer run alone (one Numba call) straight from its kept plan: the checks
    # ``conv`` makes cost ~2.5 us, as much as a speech model's framing convolution itself
    plan = layer.__dict__.get("_cpu_conv_plan")
    if plan is not None and plan.alone is not None:
        x = inputs[0]
        key = plan.key
        if x.shape == key[0] and x.dtype == key[1] and inputs[1] is plan.w \
                and (inputs[2] if len(inputs) > 2 else None) is plan.bias \
                and x.flags.c_contiguous and key[2] == threads.threads():
            return conv_blocked.run_alone(plan.alone, x)
    return conv(layer, inputs)


def conv(layer, inputs, act=None, res=None, post=(ACT_NONE, 0.0, 0.0), out=None, pool=None,
         shuffle=False):
    """Conv; ``act`` (code, p0, p1) overrides the layer's fused activation, and ``res`` (an
    array of the output's shape) is added after it, followed by the activation ``post``.
    ``out``: a C-contiguous array of the output's shape and dtype to write (None: a new
    one), e.g. a slice of a concatenation's output. ``pool`` (kh, kw): return the
    non-overlapping max pool of the output instead (``conv_pool_fused``), or None where this
    layer's kernel or activation cannot pool. ``shuffle``: a grouped 1x1 layer writes its
    output channel-shuffled (``step_fusion_shuffle``: channel ``k * M/group + j`` at
    ``j * group + k``); None for any other layer, or with ``res``."""
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    if pool is not None:
        return _conv_pooled(layer, x, w, bias, pool) if act is None and res is None \
            and out is None else None
    if x.dtype.char == "e" and w.dtype == x.dtype:  # float16: float32 math, rounded back once
        if act is not None or res is not None or out is not None or shuffle:
            return None  # the caller runs the absorbed layers itself
        return Conv(layer, [None if a is None else a.astype(np.float32)
                            for a in inputs]).astype(np.float16)
    plan = _plan(layer, x, w, bias)
    if shuffle and (plan.kind != "pointwise" or plan.group == 1 or res is not None):
        return None
    if plan.alone is not None and act is None and res is None and out is None \
            and x.flags.c_contiguous:
        return conv_blocked.run_alone(plan.alone, x)
    N, C = x.shape[:2]
    group, Cg, Mg, P = plan.group, plan.Cg, plan.Mg, plan.P
    M = Mg * group
    fz = None if act is None and res is None else _Fused(act, res, post, x.dtype)
    a0, params = (plan.act[0], plan.params) if act is None else (act[0], fz.params)
    res3 = None
    if res is not None:
        if res.dtype != x.dtype or res.shape != (N, M, *plan.out_shape):
            return None  # the caller runs the absorbed layers itself
        res3 = carr(res).reshape(N, M, P)
    if out is None:
        out = np.empty((N, M, *plan.out_shape), x.dtype)
    elif out.shape != (N, M, *plan.out_shape) or out.dtype != x.dtype \
            or not out.flags.c_contiguous:
        return None
    x = carr(x)
    if plan.kind == "depthwise":
        gd, w3, b = plan.gd, plan.w3, plan.b
        post = (ACT_NONE, plan.params) if fz is None else (fz.post[0], fz.pparams)
        none = np.zeros((0, 1, 1), x.dtype)
        for n in range(N):
            res = none if res3 is None else res3[n].reshape(out.shape[1:])
            args = (x[n], w3, out[n], gd, M // C, b, a0, params, res, post[0], post[1])
            threads.parallel_tasks(
                lambda lo, hi, a=args: depthwise_nchw(*a, lo, hi),
                lambda gate, gen, polls, chunk, a=args: depthwise_claimed(gate, gen, polls,
                                                                          chunk, *a),
                M, grain=plan.grain)
        return out
    if plan.kind == "dw16":
        post = (ACT_NONE, plan.params) if fz is None else (fz.post[0], fz.pparams)
        return conv_dw16.run(plan.dw, x, out, a0, params, res3, post)
    if plan.kind == "direct":
        post = (ACT_NONE, plan.params) if fz is None else (fz.post[0], fz.pparams)
        return conv_direct.run(plan.gd, plan.w3, plan.b, x, out, a0, params, res3, post)
    if plan.kind == "dense" and fz is None:
        return from_blocked(dense(x, plan.dn, plan.gd, plan.out_shape), M, out)
    if plan.kind in ("blocked", "dense"):
        post = (ACT_NONE, plan.params) if fz is None else (fz.post[0], fz.pparams)
        if x.ndim == 3:  # 1-D: run as one row of 2-D
            conv_blocked.run(plan.blk, plan.b, x[:, :, None], out[:, :, None], a0, params,
                             res3, post)
            return out
        return conv_blocked.run(plan.blk, plan.b, x, out, a0, params, res3, post)
    if plan.kind == "smallplane":
        post = (ACT_NONE, plan.params) if fz is None else (fz.post[0], fz.pparams)
        return conv_smallplane.run(plan.sp, plan.b, x, out, a0, params, res3, post)
    if plan.kind == "shift":
        post = (ACT_NONE, plan.params) if fz is None else (fz.post[0], fz.pparams)
        return conv_shift.run(plan.sg, plan.w2, plan.b, x, out, a0, params, res3, post,
                              _SCRATCH)
    if plan.kind == "patches":
        return _patches(plan, x, out, a0, params, res3, fz)
    if plan.kind == "patch_rows":
        return _patch_rows(plan, x, out, a0, params, res3, fz)
    if plan.kind == "winograd":
        res4 = None if res3 is None else res3.reshape(out.shape)
        post_code, pp = (ACT_NONE, plan.params) if fz is None else (fz.post[0], fz.pparams)
        if winograd.run(plan.wino, x, out, plan.b, a0, params, res4, post_code, pp):
            return out
        # NaN or Inf in the input: the direct path below, which keeps them where they are
    out3 = out.reshape(N, M, P)
    K, w2, gi = plan.K, plan.w2, plan.gi
    x5 = x.reshape(N, C, *_as3d(x.shape[2:]))
    if plan.pwp is not None and conv_pointwise.ENABLED:
        post_code, pp = (ACT_NONE, plan.params) if fz is None else (fz.post[0], fz.pparams)
        for n in range(N):
            conv_pointwise.run(plan.pwp, x5[n].reshape(Cg, P), out3[n], plan.b, a0, params,
                               None if res3 is None else res3[n], post_code, pp)
        return out
    if plan.kind == "pointwise" and group == 1:
        for n in range(N):
            og = out3[n]
            threads.matmul(w2, x5[n].reshape(Cg, P), og,
                           after=_epi(og, plan.bg[0], plan, a0, params,
                                      None if res3 is None else res3[n], fz))
        return out
    if plan.kind == "pointwise":
        # grouped: one parallel loop over (image, group, column block) products, not a
        # small split product per group
        x3 = x5.reshape(N, C, P)
        nt = threads.threads()
        blocks = max(1, min(-(-P // 256), -(-2 * nt // (N * group))))
        # shuffled, output channel j * group + k holds group k's row j: image n's output is
        # the C-contiguous (Mg, group * P) matrix whose columns k * P .. (k + 1) * P are
        # group k's rows, so products and epilogues address it as they do unshuffled rows
        rows_of = out.reshape(N, Mg, group * P) if shuffle else None

        def products(i0, i1):
            for i in range(i0, i1):
                n, k, j = i // (group * blocks), (i // blocks) % group, i % blocks
                c0, c1 = P * j // blocks, P * (j + 1) // blocks
                if shuffle:
                    og, at = rows_of[n], k * P
                else:
                    og, at = out3[n, k * Mg:(k + 1) * Mg], 0
                np.matmul(w2[k * Mg:(k + 1) * Mg], x3[n, k * Cg:(k + 1) * Cg, c0:c1],
                          out=og[:, at + c0:at + c1])
                epi = _epi(og, plan.bg[k], plan, a0, params,
                           None if res3 is None else res3[n, k * Mg:(k + 1) * Mg], fz)
                if epi is not None:
                    epi(0, Mg, at + c0, at + c1)

        if N * M * Cg * P >= threads.SPLIT_MIN_FLOPS:
            threads.parallel_for(products, N * group * blocks)
            return out
        # small: all groups in one stacked product (NumPy loops over them in C) and one
        # epilogue pass (residual included), ~15 us less per layer than a product and
        # epilogue call per group
        wg3 = w2.reshape(group, Mg, Cg)
        b = plan.b
        if shuffle and b.size:
            if plan.b_shuffled is None:
                plan.b_shuffled = np.ascontiguousarray(b.reshape(group, Mg).T.reshape(-1))
            b = plan.b_shuffled
        for n in range(N):
            og3 = out.reshape(N, Mg, group, P)[n].transpose(1, 0, 2) if shuffle \
                else out3[n].reshape(group, Mg, P)
            np.matmul(wg3, x3[n].reshape(group, Cg, P), out=og3)
            epi = _epi(out3[n], b, plan, a0, params, None if res3 is None else res3[n], fz)
            if epi is not None:
                epi(0, M, 0, P)
        return out
    ow, rows, per = plan.ow, plan.rows, plan.per
    for n in range(N):
        for k in range(group):
            xg = x5[n, k * Cg:(k + 1) * Cg]
            wg = w2[k * Mg:(k + 1) * Mg]
            og = out3[n, k * Mg:(k + 1) * Mg]
            epi = _epi(og, plan.bg[k], plan, a0, params,
                       None if res3 is None else res3[n, k * Mg:(k + 1) * Mg], fz)
            if not plan.tiled:
                cols = _SCRATCH.get((Cg * K, P), x.dtype)
                threads.parallel_for(
                    lambda lo, hi, xg=xg, cols=cols: im2col(xg, cols, gi, lo, hi, 0, rows),
                    Cg * K, grain=max(1, threads.SPLIT_MIN_ELEMENTS // P))
                threads.matmul(wg, cols, og, after=epi)
                continue

            def tile(t0, t1, xg=xg, wg=wg, og=og, epi=epi):
                for s0 in range(t0 * per, min(rows, t1 * per), per):
                    s1 = min(rows, s0 + per)
                    cols = _SCRATCH.get((Cg * K, (s1 - s0) * ow), x.dtype)
                    im2col(xg, cols, gi, 0, Cg * K, s0, s1)
                    np.matmul(wg, cols, out=og[:, s0 * ow:s1 * ow])
                    if epi is not None:
                        epi(0, Mg, s0 * ow, s1 * ow)

            threads.parallel_for(tile, plan.ntiles)
    return out


@cpu_kernel("ConvTranspose")
def ConvTranspose(layer, inputs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    if x.dtype.char == "e" and w.dtype == x.dtype:  # float16: float32 math, rounded back once
        return ConvTranspose(layer, [None if a is None else a.astype(np.float32)
                                     for a in inputs]).astype(np.float16)
    _check(layer, x, w)
    g = conv_transpose_geometry(layer, x.shape, w.shape)
    group = int(layer.attr("group", 1) or 1)
    N, C = x.shape[:2]
    Cg, Mg = C // group, w.shape[1]
    M = Mg * group
    K = math.prod(g.kernel)
    P = math.prod(x.shape[2:])
    out = np.zeros((N, M, *g.out_shape), x.dtype)
    out5 = out.reshape(N, M, *_as3d(g.out_shape))
    # (C, Mg*K) per group; transposed for cols = W_g^T @ x_g
    w2 = np.ascontiguousarray(w.reshape(group, Cg, Mg * K).transpose(0, 2, 1))
    x3 = np.ascontiguousarray(x).reshape(N, C, P)
    gi = _geom(g, x.shape[2:])
    for n in range(N):
        for k in range(group):
            cols = _SCRATCH.get((Mg * K, P), x.dtype)
            threads.matmul(w2[k], x3[n, k * Cg:(k + 1) * Cg], cols)
            dst = out5[n, k * Mg:(k + 1) * Mg]
            threads.parallel_for(lambda lo, hi, cols=cols, dst=dst: col2im(cols, dst, gi, lo, hi),
                                 Mg)
        epilogue(out.reshape(N, M, -1)[n], bias, activation_of(layer))
    return out
