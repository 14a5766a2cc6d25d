"""Register-blocked direct 2-D convolution (ungrouped, float32, NCHW in and out).

Each input channel is copied once into zero-bordered stride-phase planes
(``conv_depthwise``), flattened with row pitch ``Wq``: output value ``p = y * Wq + x`` of
tap t reads the input at ``p + toff[t]`` (``Wq - ow`` junk columns per row, dropped by the
epilogue), so any stride and dilation becomes a contiguous run per tap. A tile of 8 output
channels x 48 consecutive positions lives in 24 zmm registers (``simd``) for the whole
reduction over input channels and taps: per tap, 3 vector loads of input and 8 broadcast
weights feed 24 fused multiply-adds, with no accumulator traffic to memory (one thread
ran the tile alone at ~170 GFLOP/s, whole 3x3 layers at 120-148; im2col + sgemm reached
60-100 on two threads). Without AVX-512, LLVM splits the 16-float vectors into halves:
still correct, slower. Narrower tiles (32, 16) finish a row
block. Weights are packed once, at plan time, as [M/8][C][taps][8] (zero rows pad M), so
the 8 broadcasts of a tap are one contiguous 32-byte run.

Work is split into (output-row block, 8-channel block) tasks over the threads; a task's
tiles go to a scratch block that the epilogue (bias, fused activation, residual and the
activation after it) writes into the output rows.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import conv_blocked_direct, threads
from engine.backends.cpu.activation import ACT_NONE, act_plane
from engine.backends.cpu.conv_blocked_direct import tasks_direct
from engine.backends.cpu.conv_depthwise import _OPTS, phase_shape
from engine.backends.cpu.conv_direct import fill_phases
from engine.backends.cpu.conv_pool_fused import pool_rows
from engine.backends.cpu.simd import aligned, vbcast, vfma, vfma3, vload, vstore, vzero
from engine.backends.cpu.spin import claim, helpers_back, open_gate

#: output channels per register tile (weights are packed in blocks of this many)
R = 8
#: positions per task, about (whole output rows are rounded up)
TASK_VALUES = 384
#: fewest multiply-adds per parallel chunk: below twice this a layer runs on the calling
#: thread. With the gated pool a split costs ~8 us; on the 2-core AMD EPYC the issue
#: measures on, 2M (layers from 4M split, MobileNetV3's 3-channel stem among them) against
#: 4M, alternated in one process: crnn -5.0%, inception_v2 -3.8%, mobilenetv3 -3.4%, yolo
#: -2.6%, resnet50 -1.3%, convnext -0.7%, shufflenet and densenet +0.4%, squeezenet +2.0%
#: (1M on the earlier Intel machine: mobilenetv3 +4 to +5%)
CHUNK_MACS = 2_000_000
#: floats read past the last plane by a tile's last vectors (junk positions)
TAIL = 64
#: a layer with fewer input values than this fills its planes on the calling thread
_FILL_SPLIT = threads.SPLIT_MIN_ELEMENTS
_NONE = np.zeros((0, 1, 1), np.float32)
#: keep each layer's phase planes between calls (False: zero a new buffer per call)
REUSE_PLANES = True
#: larger phase planes are zeroed anew per call
REUSE_MAX_BYTES = 2 << 20
#: use this kernel where ``wanted`` says so (False: the other kinds; tests and benchmarks)
ENABLED = True


def wanted(C: int, M: int, kernel, out_shape, wino: int) -> bool:
    """Whether an ungrouped 2-D float32 Conv with a kernel larger than 1x1 runs here; ``wino``
    is the Winograd tile ``kernels_winograd.choose`` picked (0: none). Measured A/B against
    the other kinds on the zoo's and families' layers (2 threads): this kernel ran 1.1-2.4x
    faster than im2col + sgemm, the shifted-row and the few-channel direct kernels (3x3,
    5x5, 7x7, strides 1 and 2, 7x7 to 160x160 outputs), and than Winograd F(2,3) with M <= 96
    at 28x28 (1.1-1.2x), at 14x14 (1.15-1.5x) and F(4,3) with C = 32 (1.05x). Winograd kept
    F(4,3) with C >= 64 (1.2-1.5x faster than this) and F(2,3) at 28x28 with M >= 128
    (1.0-1.1x). Strided 1x1 kernels stay with im2col (0.8-0.9x here)."""
    if not ENABLED or max(kernel) == 1:
        return False
    if wino == 4 and C >= 64:
        return False
    return not (wino == 2 and min(out_shape) >= 20 and M >= 128)


def pack(w: np.ndarray, block: int = R) -> np.ndarray:
    """Weights (M, C, kh, kw) as [ceil(M/block)][C][kh*kw][block] float32, zero rows padding
    M: a tap's ``block`` output-channel weights are one contiguous run, 64-byte aligned."""
    M, C = w.shape[:2]
    nb = -(-M // block)
    taps = w.shape[2] * w.shape[3]
    wp = np.zeros((nb * block, C, taps), np.float32)
    wp[:M] = w.reshape(M, C, taps)
    return aligned(wp.reshape(nb, block, C, taps).transpose(0, 2, 3, 1))


def tap_offsets(gd, Hq: int, Wq: int) -> np.ndarray:
    """Offset of each tap (i, j) in a channel's flattened phase planes."""
    kh, kw, sh, sw, dh, dw = gd[:6]
    return np.array([(((i * dh) % sh) * sw + (j * dw) % sw) * Hq * Wq
                     + ((i * dh) // sh) * Wq + (j * dw) // sw
                     for i in range(kh) for j in range(kw)], np.int64)


@njit(inline="always", **_OPTS)
def _fma2(w, x0, x1, a, b):
    return vfma(w, x0, a), vfma(w, x1, b)


@njit(**_OPTS)
def _tile48(xf, q0, cs, toff, C, wf, k, sc, s0, ss):
    """8 output channels x 48 positions from ``q0``: ``sc[u * ss + s0:][:48]``."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vzero()
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = vzero()
    c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = vzero()
    T = toff.shape[0]
    for c in range(C):
        base = q0 + c * cs
        for t in range(T):
            q = base + toff[t]
            x0, x1, x2 = vload(xf, q), vload(xf, q + 16), vload(xf, q + 32)
            a0, b0, c0 = vfma3(vbcast(wf, k), x0, x1, x2, a0, b0, c0)
            a1, b1, c1 = vfma3(vbcast(wf, k + 1), x0, x1, x2, a1, b1, c1)
            a2, b2, c2 = vfma3(vbcast(wf, k + 2), x0, x1, x2, a2, b2, c2)
            a3, b3, c3 = vfma3(vbcast(wf, k + 3), x0, x1, x2, a3, b3, c3)
            a4, b4, c4 = vfma3(vbcast(wf, k + 4), x0, x1, x2, a4, b4, c4)
            a5, b5, c5 = vfma3(vbcast(wf, k + 5), x0, x1, x2, a5, b5, c5)
            a6, b6, c6 = vfma3(vbcast(wf, k + 6), x0, x1, x2, a6, b6, c6)
            a7, b7, c7 = vfma3(vbcast(wf, k + 7), x0, x1, x2, a7, b7, c7)
            k += R
    for u, (a, b, c) in enumerate(((a0, b0, c0), (a1, b1, c1), (a2, b2, c2), (a3, b3, c3),
                                   (a4, b4, c4), (a5, b5, c5), (a6, b6, c6), (a7, b7, c7))):
        vstore(sc, u * ss + s0, a)
        vstore(sc, u * ss + s0 + 16, b)
        vstore(sc, u * ss + s0 + 32, c)


@njit(**_OPTS)
def _tile32(xf, q0, cs, toff, C, wf, k, sc, s0, ss):
    """As ``_tile48`` for 32 positions."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vzero()
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = vzero()
    T = toff.shape[0]
    for c in range(C):
        base = q0 + c * cs
        for t in range(T):
            q = base + toff[t]
            x0, x1 = vload(xf, q), vload(xf, q + 16)
            a0, b0 = _fma2(vbcast(wf, k), x0, x1, a0, b0)
            a1, b1 = _fma2(vbcast(wf, k + 1), x0, x1, a1, b1)
            a2, b2 = _fma2(vbcast(wf, k + 2), x0, x1, a2, b2)
            a3, b3 = _fma2(vbcast(wf, k + 3), x0, x1, a3, b3)
            a4, b4 = _fma2(vbcast(wf, k + 4), x0, x1, a4, b4)
            a5, b5 = _fma2(vbcast(wf, k + 5), x0, x1, a5, b5)
            a6, b6 = _fma2(vbcast(wf, k + 6), x0, x1, a6, b6)
            a7, b7 = _fma2(vbcast(wf, k + 7), x0, x1, a7, b7)
            k += R
    for u, (a, b) in enumerate(((a0, b0), (a1, b1), (a2, b2), (a3, b3), (a4, b4), (a5, b5),
                                (a6, b6), (a7, b7))):
        vstore(sc, u * ss + s0, a)
        vstore(sc, u * ss + s0 + 16, b)


@njit(**_OPTS)
def _tile16(xf, q0, cs, toff, C, wf, k, sc, s0, ss):
    """As ``_tile48`` for 16 positions."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vzero()
    T = toff.shape[0]
    for c in range(C):
        base = q0 + c * cs
        for t in range(T):
            x0 = vload(xf, base + toff[t])
            a0 = vfma(vbcast(wf, k), x0, a0)
            a1 = vfma(vbcast(wf, k + 1), x0, a1)
            a2 = vfma(vbcast(wf, k + 2), x0, a2)
            a3 = vfma(vbcast(wf, k + 3), x0, a3)
            a4 = vfma(vbcast(wf, k + 4), x0, a4)
            a5 = vfma(vbcast(wf, k + 5), x0, a5)
            a6 = vfma(vbcast(wf, k + 6), x0, a6)
            a7 = vfma(vbcast(wf, k + 7), x0, a7)
            k += R
    for u, a in enumerate((a0, a1, a2, a3, a4, a5, a6, a7)):
        vstore(sc, u * ss + s0, a)


@njit(**_OPTS)
def blocked_rows(xf, cs, toff, wp, out, oh, ow, Wq, rows, bias, act, params, res, post,
                 pparams, ph, pw, direct, t0, t1):
    """Tasks ``t0:t1``: blocks of ``rows`` output rows, each for all 8-channel blocks in turn
    (its input rows stay in cache for them; channel-block major ran up to 1.3x slower on
    inputs near the L2 size, as resnet50's 128-channel stride-2 3x3 on 56x56).
    xf: flattened phase planes, ``cs`` floats a channel, ``TAIL`` more at the end; wp from
    ``pack``; out (M, oh, ow). Epilogue ``post(act(conv + bias) + res)`` with ``res``
    (M, oh, ow), or ``act(conv + bias)`` when ``res`` is empty; an empty bias adds nothing.
    With a ``ph`` x ``pw`` pool (``rows`` a multiple of ``ph``), ``out`` is the max pool's
    (M, oh // ph, ow // pw) output of ``act(conv + bias)`` (``conv_pool_fused``). ``direct``
    (what ``conv_blocked_direct.wanted`` said): row-aligned tiles store into ``out`` with
    the bias and activation, no scratch block or epilogue pass."""
    sc, pooled = _scratch(out, Wq, rows, ph, pw)
    _tasks(xf, cs, toff, wp, out, oh, ow, Wq, rows, bias, act, params, res, post, pparams,
           ph, pw, direct, t0, t1, sc, pooled)


@njit(**_OPTS)
def _scratch(out, Wq, rows, ph, pw):
    """A task's tile block (``R`` rows of ``rows * Wq + 48``) and pooled row buffer."""
    sc = np.empty(R * (rows * Wq + 48), np.float32)
    return sc, np.empty(out.shape[2] * (pw + 1) if ph * pw > 1 else 0, np.float32)


@njit(**_OPTS)
def _tasks(xf, cs, toff, wp, out, oh, ow, Wq, rows, bias, act, params, res, post, pparams,
           ph, pw, direct, t0, t1, sc, pooled):
    M = out.shape[0]
    C, T = wp.shape[1], wp.shape[2]
    wf = wp.reshape(-1)
    nmb = wp.shape[0]
    p0, p1 = params[0], params[1]
    q0, q1 = pparams[0], pparams[1]
    zero = p0 - p0
    has_res = res.shape[0] > 0
    ss = rows * Wq + 48
    if direct:
        tasks_direct(xf, cs, toff, wp, out, oh, ow, Wq, rows, bias, act, t0, t1)
        return
    for task in range(t0, t1):
        yb, mb = task // nmb, task % nmb
        y0 = yb * rows
        y1 = min(oh, y0 + rows)
        start, L = y0 * Wq, (y1 - y0 - 1) * Wq + ow
        k = mb * C * T * R
        p = 0
        while p < L:
            if L - p > 32:
                _tile48(xf, start + p, cs, toff, C, wf, k, sc, p, ss)
                p += 48
            elif L - p > 16:
                _tile32(xf, start + p, cs, toff, C, wf, k, sc, p, ss)
                p += 32
            else:
                _tile16(xf, start + p, cs, toff, C, wf, k, sc, p, ss)
                p += 16
        for u in range(min(R, M - mb * R)):
            m = mb * R + u
            b = bias[m] if bias.shape[0] > 0 else zero
            if ph * pw > 1:
                pool_rows(sc[u * ss:], Wq, out[m], y0, y1, ph, pw, b, act, p0, p1, pooled)
                continue
            act_plane(sc[u * ss:], Wq, out[m, y0:y1], b, act, p0, p1)
            if has_res:
                add_residual_post(out[m, y0:y1], res[m, y0:y1], post, q0, q1)


@njit(**_OPTS)
def blocked_claimed(gate, generation, polls, chunk, ntask, xf, cs, toff, wp, out, oh, ow, Wq,
                    rows, bias, act, params, res, post, pparams, ph, pw, direct):
    """``blocked_rows`` as a gated kernel (``threads.parallel_tasks``)."""
    open_gate(gate)
    sc, pooled = _scratch(out, Wq, rows, ph, pw)
    while True:
        t0 = claim(gate, generation, chunk, polls == 0)
        if t0 < 0:
            break
        _tasks(xf, cs, toff, wp, out, oh, ow, Wq, rows, bias, act, params, res, post, pparams,
               ph, pw, direct, t0, min(ntask, t0 + chunk), sc, pooled)
    if polls > 0:
        helpers_back(gate, polls)


@njit(**_OPTS)
def add_residual_post(dst, res, post, q0, q1):
    """``dst = post(dst + res)`` on a 2-D block: a plain add loop, then ``post`` through
    ``act_plane``, which picks its loop once (a single loop applying both activations by
    code per value does not vectorise: YOLO's SiLU + residual layers ran 3x slower)."""
    oh, ow = dst.shape
    for y in range(oh):
        d, r = dst[y], res[y]
        for q in range(ow):
            d[q] += r[q]
    if post != ACT_NONE:
        act_plane(dst.reshape(-1), ow, dst, q0 - q0, post, q0, q1)


class BlockedPlan:
    """What a Conv layer keeps for this kernel: geometry, packed weights, tap offsets."""

    __slots__ = ("gd", "wp", "toff", "nph", "Hq", "Wq", "rows", "out_hw", "xf")

    def __init__(self, gd, w: np.ndarray, in_hw, out_hw):
        self.gd = tuple(int(v) for v in gd)
        self.out_hw = tuple(int(v) for v in out_hw)
        self.wp = pack(w)
        self.nph, self.Hq, self.Wq = phase_shape(self.gd, *in_hw, *out_hw)
        self.toff = tap_offsets(self.gd, self.Hq, self.Wq)
        self.rows = max(1, min(out_hw[0], -(-TASK_VALUES // self.Wq)))
        self.xf = None

    def planes(self, C: int) -> np.ndarray:
        """The zero-bordered phase planes of C channels, flat with ``TAIL`` zeros after them
        (``kept_planes``)."""
        return kept_planes(self, C * self.nph * self.Hq * self.Wq + TAIL)


def kept_planes(plan, size: int) -> np.ndarray:
    """A zeroed float32 buffer of ``size`` for a layer's phase planes, made once and kept on
    ``plan`` (its ``xf`` slot): each call writes every input value into the same places and
    never the borders, so they stay zero (a fresh zeroed buffer per call cost a pass over
    it: YOLO's layers zeroed 35 of them, 0.4 ms of a 10 ms run; kept, YOLO ran 5.4% faster,
    MobileNetV3 5.0%, Inception-v2 2.6%). Buffers over ``REUSE_MAX_BYTES`` are made per
    call: their layers' arithmetic dwarfs the zeroing, and kept they would hold memory
    (a 640 x 640 detector's layers: 17 MB). What is kept counts in bench's memory figure
    (``bench_memory.cpu_kept_bytes``)."""
    if not REUSE_PLANES or size * 4 > REUSE_MAX_BYTES:
        return np.zeros(size, np.float32)
    if plan.xf is None or plan.xf.size != size:
        plan.xf = np.zeros(size, np.float32)
    return plan.xf


@njit(**_OPTS)
def blocked_alone(x, xf, gd, nph, Hq, toff, wp, out, oh, ow, Wq, rows, ntask, bias, act,
                  params, res, post, pparams, ph, pw, direct):
    """One image on the calling thread in one call: phase planes (into ``xf``, see
    ``BlockedPlan.planes``), then every task (the two parallel loops' hand-offs and closures
    cost more than such a layer's arithmetic)."""
    C, cs = x.shape[0], nph * Hq * Wq
    fill_phases(x, xf[:C * cs].reshape(C, nph, Hq, Wq), gd, 0, C)
    blocked_rows(xf, cs, toff, wp, out, oh, ow, Wq, rows, bias, act, params, res, post,
                 pparams, ph, pw, direct, 0, ntask)


def _alone(N: int, values_in: int, macs: int, chunk_macs: int) -> bool:
    """Whether a layer runs on the calling thread in one call (``blocked_alone``): one image
    with fewer multiply-adds than two chunks and an input small enough to fill alone."""
    return N == 1 and macs < 2 * chunk_macs and values_in < _FILL_SPLIT


def alone_call(bp: BlockedPlan, bias, act, params, x_shape, M: int):
    """What ``run_alone`` needs for a layer whose input has shape ``x_shape`` (one image;
    2-D, or 1-D as one row) and that ``run`` would run on the calling thread in one call,
    without a residual or pool: (``blocked_alone``, output shape, input shape as 3-D,
    output shape as 3-D, its arguments before and after the output); None for any other."""
    C = x_shape[1]
    H, W = (1, x_shape[2]) if len(x_shape) == 3 else x_shape[2:]
    oh, ow = bp.out_hw
    ntask = bp.wp.shape[0] * -(-oh // bp.rows)
    if not _alone(x_shape[0], C * H * W, ntask * R * C * bp.toff.shape[0] * bp.rows * ow,
                  CHUNK_MACS):
        return None
    out_shape = (1, M, ow) if len(x_shape) == 3 else (1, M, oh, ow)
    direct = conv_blocked_direct.wanted(M, ow, C, bp.toff.shape[0], act, False, False)
    return (blocked_alone, out_shape, (C, H, W), (M, oh, ow),
            (bp.planes(C), bp.gd, bp.nph, bp.Hq, bp.toff, bp.wp),
            (oh, ow, bp.Wq, bp.rows, ntask, bias, act, params, _NONE, ACT_NONE, params, 1, 1,
             direct))


def run_alone(call, x: np.ndarray) -> np.ndarray:
    """The layer's output for a C-contiguous ``x``, from ``alone_call``'s tuple (or one of
    the same form for another kernel, ``conv_row.row_call``): one Numba call and no per-run
    arithmetic (a speech model's framing convolution: conv() 9.2 -> 6.4 us, of which the
    Numba call's dispatch is 1.1)."""
    kernel, out_shape, in_shape, kernel_out_shape, before, after = call
    y = np.empty(out_shape, np.float32)
    kernel(x.reshape(in_shape), *before, y.reshape(kernel_out_shape), *after)
    return y


def run(bp: BlockedPlan, bias, x, out, act, params, res3, post, pool=(1, 1)) -> np.ndarray:
    """``out`` (N, M, oh, ow) of the convolution of ``x`` (N, C, H, W); ``res3`` None or
    (N, M, oh*ow); ``post`` = (code, params) of the activation after the residual. With a
    ``pool`` (ph, pw) other than (1, 1), ``out`` is (N, M, oh // ph, ow // pw): the max pool
    with that kernel and stride of ``act(conv + bias)``, and ``res3`` must be None."""
    N, C, H, W = x.shape
    oh, ow = bp.out_hw
    ph, pw = pool
    rows = bp.rows if ph == 1 else -(-bp.rows // ph) * ph
    cs = bp.nph * bp.Hq * bp.Wq
    ntask = bp.wp.shape[0] * -(-oh // rows)
    macs_task = R * C * bp.toff.shape[0] * rows * ow
    none = _NONE
    # a pooled layer writes a fraction of the values, so its split costs the next layer
    # (which reads what a helper wrote from that core's cache) less: split 4x smaller
    # pooled layers (crnn's stem, 13M multiply-adds, pooled 2 x 2: 226 -> 158 us, the
    # model -3%)
    chunk_macs = CHUNK_MACS // (ph * pw)
    direct = conv_blocked_direct.wanted(out.shape[1], ow, C, bp.toff.shape[0], act,
                                        res3 is not None, ph * pw > 1)
    if _alone(N, C * H * W, ntask * macs_task, chunk_macs):
        blocked_alone(x[0], bp.planes(C), bp.gd, bp.nph, bp.Hq, bp.toff, bp.wp, out[0], oh,
                      ow, bp.Wq, rows, ntask, bias, act, params,
                      none if res3 is None else res3[0].reshape(out.shape[1:]), post[0],
                      post[1], ph, pw, direct)
        return out
    xf = bp.planes(C)
    for n in range(N):
        planes = xf[:C * cs].reshape(C, bp.nph, bp.Hq, bp.Wq)
        xn = x[n]
        threads.parallel_for(
            lambda lo, hi, xn=xn, pl=planes: fill_phases(xn, pl, bp.gd, lo, hi),
            C, grain=max(1, threads.SPLIT_MIN_ELEMENTS // (H * W)))
        res = none if res3 is None else res3[n].reshape(out.shape[1:])
        args = (xf, cs, bp.toff, bp.wp, out[n], oh, ow, bp.Wq, rows, bias, act, params, res,
                post[0], post[1], ph, pw, direct)
        threads.parallel_tasks(
            lambda lo, hi, a=args: blocked_rows(*a, lo, hi),
            lambda gate, gen, polls, chunk, a=args: blocked_claimed(gate, gen, polls, chunk,
                                                                    ntask, *a),
            ntask, grain=max(1, chunk_macs // max(1, macs_task)))
    return out
