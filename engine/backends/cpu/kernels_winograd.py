"""Winograd convolution F(m x m, 3 x 3) for 3x3, stride-1, dilation-1, ungrouped 2-D float32
Conv layers on the CPU (chosen by ``kernels_conv._plan`` through ``choose``).

Each output tile of m x m pixels is computed from an (m+2) x (m+2) input tile with a = m+2
squared multiplications per channel pair instead of 9 m^2: the weights are transformed once
(``U = G g G^T``, kept on the plan), input tiles are transformed by ``wino_input`` into
``V`` [a*a, C, tiles], the a*a products ``U[k] @ V[k]`` ([M, C] @ [C, tiles]) run as one
batched np.matmul (BLAS), and ``wino_output`` transforms them back with the Conv epilogue
(bias, activation, residual, ``post``) fused in. The image is processed in blocks of whole
tile rows sized so that a block's V and products stay in the core's L2 cache, but of at
least ``NB_MIN`` tiles; blocks (and, on small images, slices of the output channels) are
spread over the backend's threads.

F(4, 3) does 4x fewer multiplications than direct convolution, F(2, 3) 2.25x fewer; the
transforms cost memory passes and float32 precision (F(4, 3) loses about one more decimal
digit, see tests/test_cpu_winograd.py). Inputs holding NaN or Inf are sent back to the
direct path: in this domain a non-finite value spreads over its whole tile.
"""

from __future__ import annotations

import threading

import numpy as np

from engine.backends.cpu import threads
from engine.backends.cpu.winograd_numba import wino_input, wino_output

#: G of F(2, 3) and F(4, 3) (Lavin and Gray), in float64 for the one-time weight transform
_G = {2: np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]]),
      4: np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                   [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])}
#: bytes of a block's transformed input and products together: half the 2 MiB L2 of a core
#: here, leaving room for the slice of U being read and the output rows being written
BLOCK_BYTES = 1 << 20
#: fewest tiles a block (where the image has them): every block's products read all of U
#: (a*a*M*C floats), so blocks of a few tiles made large layers wait on memory; 16 to 256
#: measured alike within the noise here, 64 is in the middle
NB_MIN = 64
#: None: ``choose`` decides; 0: never Winograd; 2 or 4: always that tile size where it
#: applies (tests and benchmarks)
FORCE: int | None = None


def choose(C: int, M: int, oh: int, ow: int) -> int:
    """Tile size m (2 or 4) for a 3x3 stride-1 convolution of C -> M channels and an
    oh x ow output, or 0 where im2col + sgemm measured faster."""
    if FORCE is not None:
        return FORCE
    # measured on the zoo's 3x3 layers (scripts/bench_winograd.py, docs/PERFORMANCE.md):
    # F(4,3) won every layer of 55x55 and more with C >= 64 (1.3-2.3x), F(2,3) most of the
    # 27x27-28x28 ones with C >= 64 (up to 1.8x); at 14x14 only the wide ones (C >= 192,
    # M >= 256: resnet50's 256 -> 256 1.35x), and at 13x13 and below none (a few dozen
    # tiles: the transforms and U, 1.8-4x the weights' size, are read for too little work).
    # With few input channels (squeezenet's 16 and 32, vgg19's first layer) the products
    # are thin (K = C) and im2col was as fast or faster
    side = min(oh, ow)
    if side >= 40:
        return 4 if C >= 32 else 0
    if side >= 20:
        return 2 if C >= 64 else 0
    return 2 if side >= 14 and C >= 192 and M >= 256 else 0


class WinoPlan:
    """The Winograd part of a Conv plan: transformed weights and the tiling of one image."""

    __slots__ = ("m", "a", "U", "pt", "pl", "th", "tw", "rb", "nblk", "ms", "mb", "C", "M",
                 "sizes")

    def __init__(self, w: np.ndarray, out_shape, pads_begin, m: int, nthreads: int, N: int):
        M, C = w.shape[:2]
        a = m + 2
        G = _G[m]
        u = np.einsum("ai,mcij,bj->abmc", G, w.astype(np.float64), G)
        self.U = np.ascontiguousarray(u.reshape(a * a, M, C), np.float32)
        self.m, self.a, self.C, self.M = m, a, C, M
        oh, ow = out_shape
        self.pt, self.pl = int(pads_begin[0]), int(pads_begin[1])
        self.th, self.tw = -(-oh // m), -(-ow // m)
        # tile rows per block: as many as fit BLOCK_BYTES with V and all M product rows, but
        # at least NB_MIN tiles (each block's products read all of U once), then evened out
        per_row = a * a * (C + M) * self.tw * 4
        rb = max(1, BLOCK_BYTES // per_row, -(-NB_MIN // self.tw))
        nblk = -(-self.th // min(self.th, rb))
        # two tasks a thread: smaller blocks (down to 16 tiles), then (small images) slices
        # of the output channels, each part transforming the block's input itself (cheap
        # next to its product)
        want = -(-2 * nthreads // N)
        if nblk < want:
            nblk = max(nblk, min(want, self.th, self.th * self.tw // 16))
        self.rb = -(-self.th // nblk)
        self.nblk = -(-self.th // self.rb)
        tasks = N * self.nblk
        self.ms = 1
        while tasks * self.ms < 2 * nthreads and M // (2 * self.ms) >= 16:
            self.ms *= 2
        self.mb = -(-M // self.ms)
        nb = self.rb * self.tw
        self.sizes = (a * a * C * nb, a * a * self.mb * nb, 2 * a * (self.tw * m + 2),
                      a * a * nb, a * m * nb, m * m * nb, self.tw * m)

    def finite(self) -> bool:
        """False when the transformed weights hold NaN or Inf (then the direct path runs)."""
        return bool(np.isfinite(self.U).all())


class _Scratch(threading.local):
    """A grow-only float32 buffer per thread for a block's V, products and transform rows."""

    def __init__(self):
        self.buf = np.empty(0, np.float32)

    def parts(self, sizes) -> list[np.ndarray]:
        n = sum(sizes)
        if self.buf.size < n:
            self.buf = np.empty(max(n, int(self.buf.size * 1.25)), np.float32)
        out, o = [], 0
        for s in sizes:
            out.append(self.buf[o:o + s])
            o += s
        return out


_SCRATCH = _Scratch()
_NO_RES = np.zeros((0, 1, 1), np.float32)


def run(wp: WinoPlan, x: np.ndarray, out: np.ndarray, bias: np.ndarray, act: int,
        params: np.ndarray, res: np.ndarray | None, post: int, pparams: np.ndarray) -> bool:
    """``out`` (N, M, oh, ow) = the convolution of ``x`` (N, C, H, W, C-contiguous) with
    bias, activation ``act``, and when ``res`` (out's shape) is given ``post(... + res)``.
    Returns False, leaving ``out`` unspecified, when ``x`` holds NaN or Inf."""
    N = x.shape[0]
    m, a, tw, th, rb, ms, mb, M = wp.m, wp.a, wp.tw, wp.th, wp.rb, wp.ms, wp.mb, wp.M
    per_image = wp.nblk * ms
    bad = []

    def blocks(lo: int, hi: int) -> None:
        pv, py, pb, pe, ps, po, obuf = _SCRATCH.parts(wp.sizes)
        buf, er = pb.reshape(2, a, tw * m + 2)
        nbc = rb * tw
        E, S, O = pe.reshape(a * a, nbc), ps.reshape(a * m, nbc), po.reshape(m * m, nbc)
        for t in range(lo, hi):
            n, r = divmod(t, per_image)
            blk, part = divmod(r, ms)
            i0 = blk * rb
            i1 = min(th, i0 + rb)
            nb = (i1 - i0) * tw
            m0, m1 = part * mb, min(M, (part + 1) * mb)
            if m1 <= m0:
                continue
            V = pv[:a * a * wp.C * nb].reshape(a * a, wp.C, nb)
            if wino_input(x[n], V, m, wp.pt, wp.pl, i0, i1, tw, buf, er, E):
                bad.append(t)
                return
            Y = py[:a * a * (m1 - m0) * nb].reshape(a * a, m1 - m0, nb)
            np.matmul(wp.U[:, m0:m1], V, out=Y)
            wino_output(Y, out[n], m, i0, i1, tw, m0, bias, act, params,
                        _NO_RES if res is None else res[n], post, pparams, S, O, obuf)

    threads.parallel_for(blocks, N * per_image)
    return not bad


def warm_up() -> None:
    """Compile (or load from Numba's cache) both tile sizes' transforms on a tiny image."""
    x = np.ones((1, 2, 5, 5), np.float32)
    w = np.ones((3, 2, 3, 3), np.float32)
    out = np.empty((1, 3, 5, 5), np.float32)
    p = np.zeros(2, np.float32)
    for m in (2, 4):
        run(WinoPlan(w, (5, 5), (1, 1), m, 1, 1), x, out, p[:0], 0, p, None, 0, p)
