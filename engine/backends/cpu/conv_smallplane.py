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
from engine.backends.cpu.conv_blocked import add_residual_post, kept_planes, pack, tap_offsets
from engine.backends.cpu.conv_depthwise import _OPTS, phase_shape
from engine.backends.cpu.conv_direct import fill_phases
from engine.backends.cpu.simd import prefetch, vbcast, vfma, vload, vstore, vzero

#: output channels per tile (4 vectors of 16)
CB = 64
#: output positions per tile
NP = 6
#: output channels and positions per tile of the last block when M % 64 is 1..32
TB, NPT = 32, 8
#: input channel x tap steps per slice of the reduction: 32 KB of packed weights, which stay
#: in L1 while every position tile of a task uses them (64 and 256 measured no better or
#: slower on resnet50's 7x7 and 14x14 layers)
K_STEPS = 128
#: most position tiles accumulated at once (96 KB of accumulators, in the core's L2 cache);
#: a task over more runs through them in pieces
TASK_TILES = 64
#: fewest multiply-adds per parallel chunk
CHUNK_MACS = 2_000_000
#: most output positions of a plane this kernel takes from kernels larger than 1x1 (28x28)
LARGE_PLANE = 784
#: ask for the next slice of weights while a slice is computed (False: the hardware's own
#: prefetching only; tests and benchmarks). In the models, whose weights come from the L3
#: cache, it took 3-7% off this kernel's layers (ResNet-50, DenseNet-121, both Inceptions;
#: per-layer A/B in one process); asking two slices ahead measured no better
PREFETCH = True
#: use this kernel where ``wanted`` says so (False: the other kinds; tests and benchmarks)
ENABLED = True


def wanted(C: int, M: int, kernel, out_shape, wino: int = 0) -> bool:
    """Whether an ungrouped float32 2-D Conv runs here; ``wino`` is the Winograd tile
    ``kernels_winograd.choose`` picked (0: none). Measured per layer on every such Conv of
    the zoo and the families against the kind that would run otherwise (2 threads):

    * kernels larger than 1x1 on planes up to 14x14 with M >= 64: 1.0-1.5x faster than the
      blocked kernel; on 20x20 to 28x28 planes with C >= 64: 1.15-1.45x faster than the
      blocked kernel (densenet's 128 -> 32 growth layers included) and 1.15-1.3x than
      Winograd F(2,3) with M <= 128 (0.9-1.0x with more output channels); larger planes,
      fewer input channels and rows longer than 28: 0.2-1.0x;
    * 1x1 kernels: on 7x7 planes from 128K weights up, 1.0-1.4x faster than sgemm in
      resnet50. Alone, 1x1 layers with 64K weights ran 1.05-1.35x faster on 7x7 planes and
      1.05-1.15x on 14x14 planes as well; but inside densenet121, whose weights come from
      the L3 cache on every run, the same layers ran 1.05-1.6x slower than sgemm.
    """
    P = int(np.prod(out_shape))
    if not ENABLED or out_shape[-1] > 28:  # long rows: the row-vector kernels
        return False
    if max(kernel) == 1:
        return M >= CB and 25 <= P <= 64 and C * M >= 131072
    if P <= 196:
        return C >= 32 and M >= CB
    return P <= LARGE_PLANE and C >= 64 and (M <= 128 or not wino)


def position_offsets(oh: int, ow: int, Wq: int, per_tile: int = NP) -> np.ndarray:
    """Offset of each output position in a phase plane, padded to whole tiles of
    ``per_tile`` by repeating the last position (its extra results are computed and
    dropped)."""
    P = oh * ow
    n = -(-P // per_tile) * per_tile
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
def _tile32(xf, cs, toff, wf, k, c0, c1, q, j0, acc, first):
    """``_tile`` for a block of 32 channels (the last block when M % 64 is 1..32): 2 weight
    vectors x 8 positions (``acc[(j0 + j) * 32 + v * 16:]``). 12 positions (24 accumulators)
    ran slower: LLVM loads all 12 broadcasts first and spills accumulators to the stack."""
    if first:
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vzero()
        b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = vzero()
    else:
        o = j0 * TB
        a0, b0, a1, b1 = vload(acc, o), vload(acc, o + 16), vload(acc, o + 32), vload(acc, o + 48)
        a2, b2, a3, b3 = (vload(acc, o + 64), vload(acc, o + 80), vload(acc, o + 96),
                          vload(acc, o + 112))
        a4, b4, a5, b5 = (vload(acc, o + 128), vload(acc, o + 144), vload(acc, o + 160),
                          vload(acc, o + 176))
        a6, b6, a7, b7 = (vload(acc, o + 192), vload(acc, o + 208), vload(acc, o + 224),
                          vload(acc, o + 240))
    q0, q1, q2, q3 = q[j0], q[j0 + 1], q[j0 + 2], q[j0 + 3]
    q4, q5, q6, q7 = q[j0 + 4], q[j0 + 5], q[j0 + 6], q[j0 + 7]
    T = toff.shape[0]
    for c in range(c0, c1):
        for t in range(T):
            base = c * cs + toff[t]
            w0, w1 = vload(wf, k), vload(wf, k + 16)
            x = vbcast(xf, base + q0)
            a0, b0 = vfma(w0, x, a0), vfma(w1, x, b0)
            x = vbcast(xf, base + q1)
            a1, b1 = vfma(w0, x, a1), vfma(w1, x, b1)
            x = vbcast(xf, base + q2)
            a2, b2 = vfma(w0, x, a2), vfma(w1, x, b2)
            x = vbcast(xf, base + q3)
            a3, b3 = vfma(w0, x, a3), vfma(w1, x, b3)
            x = vbcast(xf, base + q4)
            a4, b4 = vfma(w0, x, a4), vfma(w1, x, b4)
            x = vbcast(xf, base + q5)
            a5, b5 = vfma(w0, x, a5), vfma(w1, x, b5)
            x = vbcast(xf, base + q6)
            a6, b6 = vfma(w0, x, a6), vfma(w1, x, b6)
            x = vbcast(xf, base + q7)
            a7, b7 = vfma(w0, x, a7), vfma(w1, x, b7)
            k += TB
    for j, (a, b) in enumerate(((a0, b0), (a1, b1), (a2, b2), (a3, b3), (a4, b4), (a5, b5),
                                (a6, b6), (a7, b7))):
        o = (j0 + j) * TB
        vstore(acc, o, a)
        vstore(acc, o + 16, b)


@njit(**_OPTS)
def smallplane_tasks(xf, cs, toff, q, wp, qt, wt, out, bias, act, params, res, post, pparams,
                     groups, prefetch_next, t0, t1):
    """Tasks ``t0:t1`` of ``out`` (M, oh, ow): task i is channel block ``i // groups`` over
    the ``i % groups``-th of ``groups`` runs of position tiles. xf: flattened phase planes;
    q from ``position_offsets``; wp from ``conv_blocked.pack(w, CB)``: the blocks of 64;
    wt (a block of 32 channels after them, or empty) and qt (positions in tiles of 8) the
    same for the last channels when M % 64 is 1..32. Epilogue as
    ``conv_blocked.blocked_rows``.
    The reduction runs in slices of input channels whose packed weights (``K_STEPS`` taps of
    64 floats) stay in the L1 cache while every position tile of the task uses them; with
    ``prefetch_next`` each tile first asks for its share of the weights after the slice."""
    M = out.shape[0]
    P = out.shape[1] * out.shape[2]
    out2 = out.reshape(M, P)
    res2 = res.reshape(res.shape[0], -1)
    nfull, C, T = wp.shape[0], wp.shape[1], wp.shape[2]
    wf, wtf = wp.reshape(-1), wt.reshape(-1)
    p0, p1 = params[0], params[1]
    r0, r1 = pparams[0], pparams[1]
    zero = p0 - p0
    has_res = res.shape[0] > 0
    # scratch for one run of at most TASK_TILES tiles, indexed from the run's first position
    acc = np.empty(TASK_TILES * max(NP * CB, NPT * TB), np.float32)
    sc = np.empty(CB * TASK_TILES * max(NP, NPT), np.float32)
    kc = max(1, K_STEPS // T)
    for task in range(t0, t1):
        mb, g = task // groups, task % groups
        tail = mb == nfull
        width, npt = (TB, NPT) if tail else (CB, NP)
        ntiles = (qt.shape[0] if tail else q.shape[0]) // npt
        j_lo, j_hi = ntiles * g // groups * npt, ntiles * (g + 1) // groups * npt
        for r_lo in range(j_lo, j_hi, TASK_TILES * npt):
            r_hi = min(j_hi, r_lo + TASK_TILES * npt)
            for c0 in range(0, C, kc):
                c1 = min(C, c0 + kc)
                # the weights that follow this slice (the next slice, or the next block's
                # first), asked for a share per tile while this slice is computed
                w_next = (c1 * T * TB) if tail else ((mb * C + c1) * T * CB)
                lines = kc * T * width // 16 if prefetch_next else 0
                share = -(-lines // max(1, (r_hi - r_lo) // npt))
                for j0 in range(r_lo, r_hi, npt):
                    l0 = (j0 - r_lo) // npt * share
                    for ln in range(l0, min(l0 + share, lines)):
                        prefetch(wtf if tail else wf, w_next + ln * 16)
                    if tail:
                        _tile32(xf, cs, toff, wtf, c0 * T * TB, c0, c1, qt[r_lo:], j0 - r_lo,
                                acc, c0 == 0)
                    else:
                        _tile(xf, cs, toff, wf, (mb * C + c0) * T * CB, c0, c1, q[r_lo:],
                              j0 - r_lo, acc, c0 == 0)
            n = min(P, r_hi) - r_lo
            for j in range(n):
                for u in range(width):
                    sc[u * n + j] = acc[j * width + u]
            for u in range(min(width, M - mb * CB)):
                m = mb * CB + u
                b = bias[m] if bias.shape[0] > 0 else zero
                dst = out2[m, r_lo:r_lo + n].reshape(1, n)
                act_plane(sc[u * n:], n, dst, b, act, p0, p1)
                if has_res:
                    add_residual_post(dst, res2[m, r_lo:r_lo + n].reshape(1, n), post, r0, r1)


class SmallPlanePlan:
    """What a Conv layer keeps for this kernel: geometry, packed weights, offsets."""

    __slots__ = ("gd", "wp", "wt", "toff", "q", "qt", "nph", "Hq", "Wq", "direct", "xf")

    def __init__(self, gd, w: np.ndarray, in_hw, out_hw):
        self.gd = tuple(int(v) for v in gd)
        M = w.shape[0]
        # a last block of 1..32 channels runs as 32 (a 64-wide block would compute up to 63
        # padding channels: inception's 160-channel layers took as long as 192-channel ones)
        nfull = M // CB if 0 < M % CB <= TB else -(-M // CB)
        self.wp = pack(w[:nfull * CB], CB)  # [nfull][C][taps][64]
        self.wt = pack(w[nfull * CB:], TB) if nfull * CB < M else self.wp[:0]
        # 1x1, stride 1, no padding: the input planes serve as the phase planes
        self.direct = self.gd[:4] == (1, 1, 1, 1) and not any(self.gd[6:])
        if self.direct:
            self.nph, self.Hq, self.Wq = 1, *in_hw
        else:
            self.nph, self.Hq, self.Wq = phase_shape(self.gd, *in_hw, *out_hw)
        self.toff = tap_offsets(self.gd, self.Hq, self.Wq)
        self.q = position_offsets(out_hw[0], out_hw[1], self.Wq)
        self.qt = position_offsets(out_hw[0], out_hw[1], self.Wq, NPT)
        self.xf = None  # the phase planes, kept between calls (``conv_blocked.kept_planes``)


def run(sp: SmallPlanePlan, bias, x, out, act, params, res3, post) -> np.ndarray:
    """``out`` (N, M, oh, ow) of the convolution of ``x`` (N, C, H, W); ``res3`` None or
    (N, M, oh*ow); ``post`` = (code, params) of the activation after the residual."""
    N, C, H, W = x.shape
    M, oh, ow = out.shape[1:]
    cs = sp.nph * sp.Hq * sp.Wq
    nblocks = sp.wp.shape[0] + sp.wt.shape[0]
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
            xf = kept_planes(sp, C * cs)
            fill_phases(x[n], xf.reshape(C, sp.nph, sp.Hq, sp.Wq), sp.gd, 0, C)
        res = none if res3 is None else res3[n].reshape(out.shape[1:])
        threads.parallel_for(
            lambda lo, hi, o=out[n], res=res, xf=xf: smallplane_tasks(
                xf, cs, sp.toff, sp.q, sp.wp, sp.qt, sp.wt, o, bias, act, params, res, post[0],
                post[1], groups, PREFETCH, lo, hi),
            nblocks * groups, grain=grain)
    return out
