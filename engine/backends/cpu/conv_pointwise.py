"""1x1 convolutions on NCHW data without sgemm: ``y[M, P] = w[M, C] @ x[C, P]``, vectorised
along the pixels.

sgemm packs both operands on every call and blocks for square-ish products; a 1x1 layer's
product is thin (SqueezeNet's squeezes: 16 output channels over 3025 pixels), and there it
ran at 35-55 GFLOP/s on one core. Here the weights are packed once, as [M/8][C][8], and
the input is read where it lies: a register tile is 8 output channels x 48 pixels (24 zmm
accumulators); per input channel it loads three vectors of the input row and broadcasts
eight weights into 24 fused multiply-adds. Tasks are runs of 48 pixels over every output
channel, so the threads split the pixels (the caller the first ones). The bias and a ReLU
are applied in the registers; other epilogues (activations, a residual and the activation
after it: ``activation.bias_res_act_rows``) run on the block a task has just written,
still in cache. The last run of fewer than 48 pixels is computed 16 at a time from a
zero-padded copy.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import threads
from engine.backends.cpu.activation import ACT_NONE, ACT_RELU, bias_act_rows, bias_res_act_rows
from engine.backends.cpu.conv_depthwise import _OPTS
from engine.backends.cpu.simd import (
    prefetch,
    prefetchw,
    vbcast,
    vfma,
    vload,
    vlt_select,
    vsplat,
    vstore,
)
from engine.backends.cpu.spin import claim, helpers_back, open_gate

#: output channels per register tile
MR = 8
#: pixels per register tile and per task (three vectors)
NB = 48
#: fewest multiply-adds per parallel chunk: smaller layers run on the calling thread (split,
#: YOLO's 0.6M multiply-add layers ran 1.3-1.5x slower; with 2M, SqueezeNet's 3M ones
#: 1.1-1.4x slower than with 400K)
CHUNK_MACS = 1_000_000
#: layers of up to this many output channels run here whatever their input channels; wider
#: ones up to WIDE_M when they have at most WIDE_C input channels (one thread and two, the
#: zoo's 1x1 shapes tried: 1.1-2.3x faster than sgemm there; 0.84-0.92x on wider products
#: and deeper ones, whose 48-pixel input runs no longer stay in the L1 cache)
MAX_M = 64
WIDE_M, WIDE_C = 256, 256
#: each task's first tile asks for the next task's input, and each tile for its output
#: rows (to be written: ``prefetchw``) and the residual rows the task's epilogue adds
#: (False: the hardware's prefetching only; tests and benchmarks)
PREFETCH = True
#: use this kernel where ``wanted`` says so (False: sgemm; tests and benchmarks)
ENABLED = True
#: patchify convolutions (kernel = stride, no padding) run here on their patches, copied
#: as rows (``kernels_conv._patch_rows``), where ``wanted`` takes the product (False: the
#: blocked or dense kernels; checked when a layer is planned)
PATCHES = True


def wanted(C: int, M: int, P: int) -> bool:
    """Whether a float32 1x1 convolution (stride 1, no padding, one group) of ``C`` -> ``M``
    channels over ``P`` pixels runs here rather than with sgemm."""
    return M % MR == 0 and P >= NB and (M <= MAX_M or M <= WIDE_M and C <= WIDE_C)


def pack(w2: np.ndarray) -> np.ndarray:
    """Weights [M, C] as flat [M/8][C][8] (M a multiple of 8)."""
    M, C = w2.shape
    return np.ascontiguousarray(w2.reshape(M // MR, MR, C).transpose(0, 2, 1)).reshape(-1)


@njit(inline="always")
def _ask48(a, i):
    """Prefetch the lines of ``a[i:i + 48]`` (four: the run may straddle one more)."""
    prefetch(a, i)
    prefetch(a, i + 16)
    prefetch(a, i + 32)
    prefetch(a, i + NB - 1)


@njit(inline="always")
def _ask48w(a, i):
    """``_ask48`` for values about to be written."""
    prefetchw(a, i)
    prefetchw(a, i + 16)
    prefetchw(a, i + 32)
    prefetchw(a, i + NB - 1)


@njit(**_OPTS)
def _tile(x, ldx, q, wp, wo, C, y, ldy, o, bias, m0, floor, ahead):
    """y[o + i * ldy:][:48] = max(floor, bias[m0 + i] + sum over k of wp[wo + k * 8 + i] *
    x[q + k * ldx:][:48]), i < 8 (``floor`` 0 is a ReLU, -inf none; no branch, so the
    accumulators stay in registers; a NaN stays NaN). With ``ahead``, each input row's 48
    values after these are asked for (the next task's)."""
    a0 = a1 = a2 = vsplat(bias[m0])
    b0 = b1 = b2 = vsplat(bias[m0 + 1])
    c0 = c1 = c2 = vsplat(bias[m0 + 2])
    d0 = d1 = d2 = vsplat(bias[m0 + 3])
    e0 = e1 = e2 = vsplat(bias[m0 + 4])
    f0 = f1 = f2 = vsplat(bias[m0 + 5])
    g0 = g1 = g2 = vsplat(bias[m0 + 6])
    h0 = h1 = h2 = vsplat(bias[m0 + 7])
    for k in range(C):
        if ahead:
            _ask48(x, q + NB)
        x0, x1, x2 = vload(x, q), vload(x, q + 16), vload(x, q + 32)
        w = wo + k * MR
        v = vbcast(wp, w)
        a0, a1, a2 = vfma(v, x0, a0), vfma(v, x1, a1), vfma(v, x2, a2)
        v = vbcast(wp, w + 1)
        b0, b1, b2 = vfma(v, x0, b0), vfma(v, x1, b1), vfma(v, x2, b2)
        v = vbcast(wp, w + 2)
        c0, c1, c2 = vfma(v, x0, c0), vfma(v, x1, c1), vfma(v, x2, c2)
        v = vbcast(wp, w + 3)
        d0, d1, d2 = vfma(v, x0, d0), vfma(v, x1, d1), vfma(v, x2, d2)
        v = vbcast(wp, w + 4)
        e0, e1, e2 = vfma(v, x0, e0), vfma(v, x1, e1), vfma(v, x2, e2)
        v = vbcast(wp, w + 5)
        f0, f1, f2 = vfma(v, x0, f0), vfma(v, x1, f1), vfma(v, x2, f2)
        v = vbcast(wp, w + 6)
        g0, g1, g2 = vfma(v, x0, g0), vfma(v, x1, g1), vfma(v, x2, g2)
        v = vbcast(wp, w + 7)
        h0, h1, h2 = vfma(v, x0, h0), vfma(v, x1, h1), vfma(v, x2, h2)
        q += ldx
    lo = vsplat(floor)
    for u0, u1, u2 in ((a0, a1, a2), (b0, b1, b2), (c0, c1, c2), (d0, d1, d2),
                       (e0, e1, e2), (f0, f1, f2), (g0, g1, g2), (h0, h1, h2)):
        vstore(y, o, vlt_select(u0, lo, lo, u0))
        vstore(y, o + 16, vlt_select(u1, lo, lo, u1))
        vstore(y, o + 32, vlt_select(u2, lo, lo, u2))
        o += ldy


@njit(**_OPTS)
def _tile16(x, ldx, q, wp, wo, C, y, ldy, o, bias, m0, floor):
    """``_tile`` for 16 pixels (the last ones of a row of tasks)."""
    a = vsplat(bias[m0])
    b = vsplat(bias[m0 + 1])
    c = vsplat(bias[m0 + 2])
    d = vsplat(bias[m0 + 3])
    e = vsplat(bias[m0 + 4])
    f = vsplat(bias[m0 + 5])
    g = vsplat(bias[m0 + 6])
    h = vsplat(bias[m0 + 7])
    for k in range(C):
        x0 = vload(x, q)
        w = wo + k * MR
        a, b = vfma(vbcast(wp, w), x0, a), vfma(vbcast(wp, w + 1), x0, b)
        c, d = vfma(vbcast(wp, w + 2), x0, c), vfma(vbcast(wp, w + 3), x0, d)
        e, f = vfma(vbcast(wp, w + 4), x0, e), vfma(vbcast(wp, w + 5), x0, f)
        g, h = vfma(vbcast(wp, w + 6), x0, g), vfma(vbcast(wp, w + 7), x0, h)
        q += ldx
    lo = vsplat(floor)
    for u in (a, b, c, d, e, f, g, h):
        vstore(y, o, vlt_select(u, lo, lo, u))
        o += ldy


@njit(**_OPTS)
def pw_tasks(x, wp, y, bias, act, params, res, post, pparams, t0, t1, prefetch_next=False):
    """Tasks ``t0:t1`` of ``y`` (M, P) = w @ ``x`` (C, P) and the epilogue: task t is
    pixels ``t * 48`` to ``t * 48 + 48`` (fewer in the last) of every output channel.
    ``res`` is (M, P) or has no rows (none). The bias and a ReLU (or no activation) are
    applied in the registers when there is no residual; else a pass over the block does
    it all."""
    C, P = x.shape
    M = y.shape[0]
    xf, yf, rf = x.reshape(-1), y.reshape(-1), res.reshape(-1)
    has_res = res.shape[0] > 0
    inline = not has_res and (act == ACT_NONE or act == ACT_RELU)
    b = bias if inline and bias.shape[0] > 0 else np.zeros(M, np.float32)
    floor = np.float32(0.0) if inline and act == ACT_RELU else np.float32(-np.inf)
    for t in range(t0, t1):
        p0 = t * NB
        n = min(NB, P - p0)
        if n == NB:
            # the first tile asks for the input of the task after this one (each input row
            # is a stream of its own, too many for the hardware to follow)
            ahead = prefetch_next and t + 1 < t1
            for mt in range(M // MR):
                m0 = mt * MR
                if prefetch_next:  # this tile's output rows (about to be written) and the
                    # residual rows its epilogue reads next
                    for i in range(m0 * P + p0, (m0 + MR) * P + p0, P):
                        _ask48w(yf, i)
                        if has_res:
                            _ask48(rf, i)
                _tile(xf, P, p0, wp, m0 * C, C, yf, P, m0 * P + p0, b, m0, floor,
                      ahead and mt == 0)
        else:  # the last pixels: 16 at a time, from a zero-padded copy, through scratch
            nv = -(-n // 16)
            xs = np.zeros(C * nv * 16, np.float32)
            for k in range(C):
                for j in range(n):
                    xs[k * nv * 16 + j] = xf[k * P + p0 + j]
            ys = np.empty(MR * nv * 16, np.float32)
            for mt in range(M // MR):
                m0 = mt * MR
                for v in range(nv):
                    _tile16(xs, nv * 16, v * 16, wp, m0 * C, C, ys, nv * 16, v * 16, b, m0,
                            floor)
                for i in range(MR):
                    for j in range(n):
                        yf[(m0 + i) * P + p0 + j] = ys[i * nv * 16 + j]
        if has_res:
            bias_res_act_rows(y, bias, act, params, res, post, pparams, 0, M, p0, p0 + n)
        elif not inline:
            bias_act_rows(y, bias, act, params, 0, M, p0, p0 + n)


@njit(**_OPTS)
def pw_claimed(gate, generation, polls, chunk, ntask, x, wp, y, bias, act, params, res, post,
               pparams, prefetch_next):
    """``pw_tasks`` as a gated kernel (``threads.parallel_tasks``)."""
    open_gate(gate)
    while True:
        t0 = claim(gate, generation, chunk, polls == 0)
        if t0 < 0:
            break
        pw_tasks(x, wp, y, bias, act, params, res, post, pparams, t0, min(ntask, t0 + chunk),
                 prefetch_next)
    if polls > 0:
        helpers_back(gate, polls)


_NO_RES = np.zeros((0, 1), np.float32)


def run(wp: np.ndarray, x2: np.ndarray, y2: np.ndarray, bias: np.ndarray, act: int, params,
        res2: np.ndarray | None = None, post: int = 0, pparams=None) -> np.ndarray:
    """``y2`` (M, P) = act(w @ ``x2`` (C, P) + bias) (+ ``res2`` then ``post``) for
    weights ``wp`` from ``pack``; all float32 and C-contiguous. ``bias`` may be empty."""
    C, P = x2.shape
    M = y2.shape[0]
    ntask = -(-P // NB)
    res = _NO_RES if res2 is None else res2
    pp = params if pparams is None else pparams
    pf = PREFETCH
    threads.parallel_tasks(
        lambda lo, hi: pw_tasks(x2, wp, y2, bias, act, params, res, post, pp, lo, hi, pf),
        lambda gate, gen, polls, chunk: pw_claimed(gate, gen, polls, chunk, ntask, x2, wp, y2,
                                                   bias, act, params, res, post, pp, pf),
        ntask, grain=max(1, CHUNK_MACS // (NB * M * C)))
    return y2
