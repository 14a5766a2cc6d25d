"""Direct 2-D convolution for small output planes (7x7, 13x13, 14x14), channel-vectorised.

``conv_blocked`` vectorises along an output row: on a 7x7 plane its 48-position tiles
compute 64 positions for 49 outputs and read the whole weight block twice, and resnet50's
last stage ran at a third of the blocked kernel's speed. Here a vector holds 16 output
channels at one position instead: a tile of 64 output channels x 6 positions keeps 24 zmm
accumulators; per input channel and tap it loads 4 weight vectors (packed contiguous) and
broadcasts 6 input values into 24 fused multiply-adds. Any plane size wastes at most 5
positions a plane, and 1x1 kernels (the thin products sgemm handles poorly with 49 columns)
run here as well.

Input channels are copied into zero-bordered stride-phase planes as in ``conv_blocked``;
position p = (y, x) reads the input at ``y * Wq + x + toff[tap]``. A tile's accumulators go
to a position-major scratch, are transposed into a channel-major block of the whole plane,
and the epilogue (bias, activation, residual, activation after it) writes the output.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import threads
from engine.backends.cpu.activation import act_plane
from engine.backends.cpu.conv_blocked import add_residual_post, pack, tap_offsets
from engine.backends.cpu.conv_depthwise import _OPTS, phase_shape
from engine.backends.cpu.conv_direct import fill_phases
from engine.backends.cpu.simd import vbcast, vfma, vload, vstore, vzero

#: output channels per tile (4 vectors of 16)
CB = 64
#: output positions per tile
NP = 6
#: input channel x tap steps per slice of the reduction: 32 KB of packed weights, which stay
#: in L1 while every position tile of a task uses them (64 and 256 measured no better or
#: slower on resnet50's 7x7 and 14x14 layers)
K_STEPS = 128
#: fewest multiply-adds per parallel chunk
CHUNK_MACS = 2_000_000
#: use this kernel where ``wanted`` says so (False: the other kinds; tests and benchmarks)
ENABLED = True


def wanted(C: int, M: int, kernel, out_shape) -> bool:
    """Whether an ungrouped float32 2-D Conv runs here: at least 64 output channels (a
    tile's channel block) and small output planes, where row vectors waste most. Measured
    per layer against the other kinds (2 threads): 3x3 kernels on 7x7 to 14x14 planes ran
    1.0-1.5x faster than the blocked kernel (C = 96 at 14x14: 0.95x); 1x1 kernels beat sgemm
    on 7x7 planes (1.0-1.4x) from 128K weights up, but not on 14x14 ones (0.7-0.85x)."""
    P = int(np.prod(out_shape))
    if not ENABLED or M < CB or out_shape[-1] > 16:  # long rows: the row-vector kernels
        return False
    if max(kernel) == 1:  # small products (MobileNetV3's 96 x 288) stay with sgemm
        return P <= 64 and C * M >= 131072
    return P <= 196 and C >= 32


def position_offsets(oh: int, ow: int, Wq: int) -> np.ndarray:
    """Offset of each output position in a phase plane, padded to whole tiles by repeating
    the last position (its extra results are computed and dropped)."""
    P = oh * ow
    n = -(-P // NP) * NP
    p = np.minimum(np.arange(n), P - 1)
    return ((p // ow) * Wq + p % ow).astype(np.int64)


@njit(**_OPTS)
def _tile(xf, cs, toff, wf, k, c0, c1, q, j0, acc, first):
    """64 channels x positions ``q[j0:j0 + 6]`` over input channels ``c0:c1``, added to
    (or, when ``first``, stored in) ``acc[(j0 + j) * 64 + v * 16:][:16]``."""
    if first:
        a0 = a1 = a2 = a3 = a4 = a5 = vzero()
        b0 = b1 = b2 = b3 = b4 = b5 = vzero()
        c0_ = c1_ = c2_ = c3_ = c4_ = c5_ = vzero()
        d0 = d1 = d2 = d3 = d4 = d5 = vzero()
    else:
        o = j0 * CB
        a0, b0, c0_, d0 = (vload(acc, o), vload(acc, o + 16), vload(acc, o + 32),
                           vload(acc, o + 48))
        o += CB
        a1, b1, c1_, d1 = (vload(acc, o), vload(acc, o + 16), vload(acc, o + 32),
                           vload(acc, o + 48))
        o += CB
        a2, b2, c2_, d2 = (vload(acc, o), vload(acc, o + 16), vload(acc, o + 32),
                           vload(acc, o + 48))
        o += CB
        a3, b3, c3_, d3 = (vload(acc, o), vload(acc, o + 16), vload(acc, o + 32),
                           vload(acc, o + 48))
        o += CB
        a4, b4, c4_, d4 = (vload(acc, o), vload(acc, o + 16), vload(acc, o + 32),
                           vload(acc, o + 48))
        o += CB
        a5, b5, c5_, d5 = (vload(acc, o), vload(acc, o + 16), vload(acc, o + 32),
                           vload(acc, o + 48))
    q0, q1, q2, q3, q4, q5 = q[j0], q[j0 + 1], q[j0 + 2], q[j0 + 3], q[j0 + 4], q[j0 + 5]
    T = toff.shape[0]
    for c in range(c0, c1):
        for t in range(T):
            base = c * cs + toff[t]
            w0, w1 = vload(wf, k), vload(wf, k + 16)
            w2, w3 = vload(wf, k + 32), vload(wf, k + 48)
            x = vbcast(xf, base + q0)
            a0, b0, c0_, d0 = vfma(w0, x, a0), vfma(w1, x, b0), vfma(w2, x, c0_), vfma(w3, x, d0)
            x = vbcast(xf, base + q1)
            a1, b1, c1_, d1 = vfma(w0, x, a1), vfma(w1, x, b1), vfma(w2, x, c1_), vfma(w3, x, d1)
            x = vbcast(xf, base + q2)
            a2, b2, c2_, d2 = vfma(w0, x, a2), vfma(w1, x, b2), vfma(w2, x, c2_), vfma(w3, x, d2)
            x = vbcast(xf, base + q3)
            a3, b3, c3_, d3 = vfma(w0, x, a3), vfma(w1, x, b3), vfma(w2, x, c3_), vfma(w3, x, d3)
            x = vbcast(xf, base + q4)
            a4, b4, c4_, d4 = vfma(w0, x, a4), vfma(w1, x, b4), vfma(w2, x, c4_), vfma(w3, x, d4)
            x = vbcast(xf, base + q5)
            a5, b5, c5_, d5 = vfma(w0, x, a5), vfma(w1, x, b5), vfma(w2, x, c5_), vfma(w3, x, d5)
            k += CB
    for j, (a, b, c, d) in enumerate(((a0, b0, c0_, d0), (a1, b1, c1_, d1), (a2, b2, c2_, d2),
                                      (a3, b3, c3_, d3), (a4, b4, c4_, d4),
                                      (a5, b5, c5_, d5))):
        o = (j0 + j) * CB
        vstore(acc, o, a)
        vstore(acc, o + 16, b)
        vstore(acc, o + 32, c)
        vstore(acc, o + 48, d)


@njit(**_OPTS)
def smallplane_tasks(xf, cs, toff, q, wp, out, bias, act, params, res, post, pparams,
                     groups, t0, t1):
    """Tasks ``t0:t1`` of ``out`` (M, oh, ow): task i is channel block ``i // groups`` over
    the ``i % groups``-th of ``groups`` runs of position tiles. xf: flattened phase planes;
    q from ``position_offsets``; wp from ``conv_blocked.pack(w, CB)``. Epilogue as
    ``conv_blocked.blocked_rows``.
    The reduction runs in slices of input channels whose packed weights (``K_STEPS`` taps of
    64 floats) stay in the L1 cache while every position tile of the task uses them."""
    M = out.shape[0]
    P = out.shape[1] * out.shape[2]
    out2 = out.reshape(M, P)
    res2 = res.reshape(res.shape[0], -1)
    C, T = wp.shape[1], wp.shape[2]
    wf = wp.reshape(-1)
    p0, p1 = params[0], params[1]
    r0, r1 = pparams[0], pparams[1]
    zero = p0 - p0
    has_res = res.shape[0] > 0
    ntiles = q.shape[0] // NP
    acc = np.empty(q.shape[0] * CB, np.float32)
    sc = np.empty(CB * P, np.float32)
    kc = max(1, K_STEPS // T)
    for task in range(t0, t1):
        mb, g = task // groups, task % groups
        j_lo, j_hi = ntiles * g // groups * NP, ntiles * (g + 1) // groups * NP
        for c0 in range(0, C, kc):
            c1 = min(C, c0 + kc)
            k = (mb * C + c0) * T * CB
            for j0 in range(j_lo, j_hi, NP):
                _tile(xf, cs, toff, wf, k, c0, c1, q, j0, acc, c0 == 0)
        j_hi = min(P, j_hi)
        for j in range(j_lo, j_hi):
            for u in range(CB):
                sc[u * P + j] = acc[j * CB + u]
        for u in range(min(CB, M - mb * CB)):
            m = mb * CB + u
            b = bias[m] if bias.shape[0] > 0 else zero
            dst = out2[m, j_lo:j_hi].reshape(1, j_hi - j_lo)
            act_plane(sc[u * P + j_lo:], P, dst, b, act, p0, p1)
            if has_res:
                add_residual_post(dst, res2[m, j_lo:j_hi].reshape(1, j_hi - j_lo), post, r0, r1)


class SmallPlanePlan:
    """What a Conv layer keeps for this kernel: geometry, packed weights, offsets."""

    __slots__ = ("gd", "wp", "toff", "q", "nph", "Hq", "Wq", "direct")

    def __init__(self, gd, w: np.ndarray, in_hw, out_hw):
        self.gd = tuple(int(v) for v in gd)
        self.wp = pack(w, CB)  # [ceil(M/64)][C][taps][64]
        # 1x1, stride 1, no padding: the input planes serve as the phase planes
        self.direct = self.gd[:4] == (1, 1, 1, 1) and not any(self.gd[6:])
        if self.direct:
            self.nph, self.Hq, self.Wq = 1, *in_hw
        else:
            self.nph, self.Hq, self.Wq = phase_shape(self.gd, *in_hw, *out_hw)
        self.toff = tap_offsets(self.gd, self.Hq, self.Wq)
        self.q = position_offsets(out_hw[0], out_hw[1], self.Wq)


def run(sp: SmallPlanePlan, bias, x, out, act, params, res3, post) -> np.ndarray:
    """``out`` (N, M, oh, ow) of the convolution of ``x`` (N, C, H, W); ``res3`` None or
    (N, M, oh*ow); ``post`` = (code, params) of the activation after the residual."""
    N, C, H, W = x.shape
    M, oh, ow = out.shape[1:]
    cs = sp.nph * sp.Hq * sp.Wq
    nblocks = sp.wp.shape[0]
    ntiles = sp.q.shape[0] // NP
    macs_tile = CB * C * sp.toff.shape[0] * NP
    # enough tasks for every thread: position runs of a channel block when blocks are few
    groups = max(1, min(ntiles, -(-2 * threads.threads() // nblocks)))
    grain = max(1, CHUNK_MACS // max(1, macs_tile * (ntiles // groups)))
    none = np.zeros((0, 1, 1), x.dtype)
    for n in range(N):
        if sp.direct:
            xf = x[n].reshape(-1)
        else:
            xf = np.zeros(C * cs, np.float32)
            fill_phases(x[n], xf.reshape(C, sp.nph, sp.Hq, sp.Wq), sp.gd, 0, C)
        res = none if res3 is None else res3[n].reshape(out.shape[1:])
        threads.parallel_for(
            lambda lo, hi, o=out[n], res=res, xf=xf: smallplane_tasks(
                xf, cs, sp.toff, sp.q, sp.wp, o, bias, act, params, res, post[0], post[1],
                groups, lo, hi),
            nblocks * groups, grain=grain)
    return out
