"""``x @ w`` for a constant weight ``w`` [K, N], packed once, with the linear layer's epilogue
(``linear_epilogue``: bias, GELU or residual) applied to each block right after it is
computed. Used by the fused linear layers (``linear_fused``), Gemm and MatMul by a repeated
weight (``kernels_gemm``) and the LSTM's input projection (``rnn_fast``).

sgemm packs both operands on every call; a transformer's linear layers multiply a few dozen
to a few hundred rows by the same weights every run, where that packing and sgemm's small-M
blocking cost a third of the time (64 x 256 x 256: OpenBLAS 124 GFLOP/s on one core, this
kernel 170). The weights are packed at first use as [N/32][K][32] (zero columns pad N),
64-byte aligned: one panel's 32 columns of a row of ``w`` are two vector loads. A register
tile is 8 rows x 32 columns (16 zmm accumulators, ``simd``); per k, two loads of ``w``, eight
broadcasts of ``x`` and sixteen fused multiply-adds. Rows go 64 at a time against every
panel (those rows of ``x`` stay in cache); the threads split the panels of a few rows or
the row blocks of many. Rows beyond a multiple of 8 go one at a time (``_row``).
"""

from __future__ import annotations

import weakref

import numpy as np
from numba import njit

from engine.backends.cpu import threads
from engine.backends.cpu.conv_depthwise import _OPTS
from engine.backends.cpu.linear_epilogue import EPI_BIAS, linear_epilogue
from engine.backends.cpu.simd import (
    aligned,
    empty_aligned,
    prefetch,
    vadd,
    vbcast,
    vfma,
    vload,
    vstore,
    vzero,
)
from engine.backends.cpu.spin import claim, helpers_back, open_gate

#: columns per packed panel (two 16-float vectors)
NR = 32
#: rows per register tile
MR = 8
#: rows of ``x`` a block computes against every panel before the next rows
ROWS = 64
#: use this kernel for linear layers (False: sgemm; tests and benchmarks)
ENABLED = True
#: the first register tile of a panel asks for the next panel's weights (False: the
#: hardware's prefetching only; tests and benchmarks)
PREFETCH = True
#: larger weights go to sgemm unpacked: a packed copy of each would double the memory of
#: big (often memory-mapped) models, whose products are long enough to amortise sgemm's
#: packing anyway
MAX_WEIGHT_BYTES = 32 << 20
#: products smaller than this many multiply-adds stay with sgemm: a tiny product (a
#: streaming model's 16 x 32 x 128) spent more in the call than in the arithmetic
MIN_MACS = 131072
#: packed copies kept at once, all models together: the copies sit beside the weights
#: (bert's 12.8 MB beside its 14.5); past this, further weights go to sgemm unpacked
MAX_PACKED_BYTES = 512 << 20

_NO_RES = np.zeros((1, 1), np.float32)
_ZEROS: dict[int, np.ndarray] = {}
_packed: dict[tuple[int, bool], tuple] = {}
_held = [0]  # bytes of the packed copies in ``_packed``


def _zeros(n: int) -> np.ndarray:
    """A bias of n zeros (products without one), made once per width."""
    z = _ZEROS.get(n)
    if z is None:
        z = _ZEROS[n] = np.zeros(n, np.float32)
    return z


def _forget(key) -> None:
    entry = _packed.pop(key, None)
    if entry is not None:
        _held[0] -= entry[1].nbytes


def packable(w: np.ndarray, trans: bool = False, rows: int = 1 << 30) -> bool:
    """Whether ``w`` is packed already or may be: float32, 2-D, at most MAX_WEIGHT_BYTES,
    room left under MAX_PACKED_BYTES, and a product with ``rows`` rows of at least
    MIN_MACS multiply-adds."""
    if not ENABLED or w.dtype != np.float32 or w.ndim != 2 or w.nbytes > MAX_WEIGHT_BYTES \
            or rows * w.size < MIN_MACS:
        return False
    hit = _packed.get((id(w), trans))
    if hit is not None and hit[0]() is w:
        return True
    return _held[0] + w.nbytes <= MAX_PACKED_BYTES


def pack_panels(w: np.ndarray, trans: bool = False) -> np.ndarray:
    """``w`` [K, N] (``trans``: [N, K]) as flat panels [N/32][K][32], zero columns padding N,
    64-byte aligned (uncached: ``packed`` keeps a constant weight's)."""
    N, K = w.shape if trans else w.shape[::-1]
    nb = -(-N // NR)
    wp = np.zeros((nb * NR, K), np.float32)
    wp[:N] = w if trans else w.T
    return aligned(wp.reshape(nb, NR, K).transpose(0, 2, 1)).reshape(-1)


@njit(**_OPTS)
def _pack_heads(w3, out):
    """Each ``w3[h]`` [K, N] (any strides) into row ``h`` of ``out`` as panels
    [N/32][K][32], zero columns padding N."""
    H, K, N = w3.shape
    for h in range(H):
        dst = out[h]
        for j in range(-(-N // NR)):
            n0 = j * NR
            n = min(NR, N - n0)
            for k in range(K):
                o = (j * K + k) * NR
                src = w3[h, k, n0:]
                for c in range(n):
                    dst[o + c] = src[c]
                for c in range(n, NR):
                    dst[o + c] = 0.0


def pack_heads(w3: np.ndarray) -> np.ndarray:
    """``pack_panels`` of every ``w3[h]`` ([K, N], views are fine) in one call, as rows of a
    64-byte aligned (H, N/32 * K * 32) array (attention's per-call K and V panels: NumPy's
    transposes and copies per head took 20 us a head for ViT's 64 x 197)."""
    H, K, N = w3.shape
    out = empty_aligned((H, -(-N // NR) * K * NR))
    _pack_heads(w3, out)
    return out


def packed(w: np.ndarray, trans: bool = False) -> np.ndarray:
    """``w`` [K, N] (``trans``: ``w`` is [N, K] and the product is with its transpose)
    packed for ``matmul_packed``, made once per weight array (kept while the array lives:
    model constants are the same objects every run)."""
    key = (id(w), trans)
    hit = _packed.get(key)
    if hit is not None and hit[0]() is w:
        return hit[1]
    bp = pack_panels(w, trans)
    _forget(key)  # a dead array's entry whose id came back
    _packed[key] = (weakref.ref(w, lambda _ref, key=key: _forget(key)), bp)
    _held[0] += bp.nbytes
    return bp


def packed_bytes(w: np.ndarray) -> int:
    """Bytes of the packed copies kept for ``w`` (``packed``; 0 when there are none)."""
    kept = 0
    for trans in (False, True):
        hit = _packed.get((id(w), trans))
        if hit is not None and hit[0]() is w:
            kept += hit[1].nbytes
    return kept


def worth_packing(layer, w: np.ndarray, trans: bool = False, rows: int = 1 << 30) -> bool:
    """Whether a product with ``w`` should use the packed kernel: ``packable``, and either
    packed already or the very array this layer multiplied by on its previous call (a
    constant, or a value kept from constants: packing a fresh operand on every call would
    cost what sgemm's own packing does)."""
    if not packable(w, trans, rows):
        return False
    hit = _packed.get((id(w), trans))
    if hit is not None and hit[0]() is w:
        return True
    last = layer.__dict__.get("_cpu_last_weight")
    layer.__dict__["_cpu_last_weight"] = weakref.ref(w)
    return last is not None and last() is w


@njit(**_OPTS)
def _tile(a, r0, K, bp, boff, c, o, ldc, ahead):
    """c[o + i * ldc:][:32] = a[r0 + i * K:][:K] @ panel, i < 8; with ``ahead`` > 0, the
    panel values that far on (the next panel's) are asked for as this one's are read."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vzero()
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = vzero()
    for k in range(K):
        q = boff + k * NR
        if ahead > 0:
            prefetch(bp, q + ahead)
            prefetch(bp, q + ahead + 16)
        x0, x1 = vload(bp, q), vload(bp, q + 16)
        v = vbcast(a, r0 + k)
        a0, b0 = vfma(v, x0, a0), vfma(v, x1, b0)
        v = vbcast(a, r0 + K + k)
        a1, b1 = vfma(v, x0, a1), vfma(v, x1, b1)
        v = vbcast(a, r0 + 2 * K + k)
        a2, b2 = vfma(v, x0, a2), vfma(v, x1, b2)
        v = vbcast(a, r0 + 3 * K + k)
        a3, b3 = vfma(v, x0, a3), vfma(v, x1, b3)
        v = vbcast(a, r0 + 4 * K + k)
        a4, b4 = vfma(v, x0, a4), vfma(v, x1, b4)
        v = vbcast(a, r0 + 5 * K + k)
        a5, b5 = vfma(v, x0, a5), vfma(v, x1, b5)
        v = vbcast(a, r0 + 6 * K + k)
        a6, b6 = vfma(v, x0, a6), vfma(v, x1, b6)
        v = vbcast(a, r0 + 7 * K + k)
        a7, b7 = vfma(v, x0, a7), vfma(v, x1, b7)
    for i, (u, w) in enumerate(((a0, b0), (a1, b1), (a2, b2), (a3, b3), (a4, b4), (a5, b5),
                                (a6, b6), (a7, b7))):
        vstore(c, o + i * ldc, u)
        vstore(c, o + i * ldc + 16, w)


@njit(**_OPTS)
def _row(a, r0, K, bp, boff, c, o):
    """c[o:][:32] = a[r0:][:K] @ panel: one row, even and odd k in two accumulator pairs
    (a row past the last whole tile: through the 8-row tile it cost 8 rows' work, and a
    classifier's single row is all of its product)."""
    a0 = a1 = b0 = b1 = vzero()
    k = 0
    while k + 1 < K:
        q = boff + k * NR
        v = vbcast(a, r0 + k)
        a0, a1 = vfma(v, vload(bp, q), a0), vfma(v, vload(bp, q + 16), a1)
        v = vbcast(a, r0 + k + 1)
        b0, b1 = vfma(v, vload(bp, q + NR), b0), vfma(v, vload(bp, q + NR + 16), b1)
        k += 2
    if k < K:
        q = boff + k * NR
        v = vbcast(a, r0 + k)
        a0, a1 = vfma(v, vload(bp, q), a0), vfma(v, vload(bp, q + 16), a1)
    vstore(c, o, vadd(a0, b0))
    vstore(c, o + 16, vadd(a1, b1))


@njit(**_OPTS)
def block(a, M, K, bp, y, bias, act, res, has_res, m_lo, m_hi, j0, j1, prefetch_next=True):
    """Rows ``m_lo:m_hi`` (whole tiles but the matrix's last) of column panels ``j0:j1`` of
    y (M, N) = epilogue(a (M*K,) @ w), w packed in ``bp``; ROWS rows at a time, so those
    rows of ``a`` stay in cache while the panels stream past them; with ``prefetch_next``
    the first tile of a panel asks for the next panel's weights."""
    N = y.shape[1]
    yf = y.reshape(-1)
    scratch_c = np.empty(MR * NR, np.float32)
    for r0 in range(m_lo, m_hi, ROWS):
        r1 = min(m_hi, r0 + ROWS)
        full = r1 - (r1 - r0) % MR
        for j in range(j0, j1):
            n0 = j * NR
            boff = j * K * NR
            whole = n0 + NR <= N
            for m0 in range(r0, full, MR):
                # the first tile of a panel asks for the next panel (read from the L3 cache
                # or memory in a model; the tiles after it find it on its way)
                ahead = K * NR if m0 == r0 and j + 1 < j1 and prefetch_next else 0
                if whole:
                    _tile(a, m0 * K, K, bp, boff, yf, m0 * N + n0, N, ahead)
                else:
                    _tile(a, m0 * K, K, bp, boff, scratch_c, 0, NR, ahead)
                    for i in range(MR):
                        for q in range(N - n0):
                            y[m0 + i, n0 + q] = scratch_c[i * NR + q]
            for i in range(full, r1):
                if whole:
                    _row(a, i * K, K, bp, boff, yf, i * N + n0)
                else:
                    _row(a, i * K, K, bp, boff, scratch_c, 0)
                    for q in range(N - n0):
                        y[i, n0 + q] = scratch_c[q]
            linear_epilogue(y, bias, act, res, has_res, r0, r1, n0, min(N, n0 + NR))


@njit(**_OPTS)
def block_claimed(gate, generation, polls, chunk, by_rows, ntask, a, M, K, bp, y, bias, act,
                  res, has_res, nb, prefetch_next):
    """``block`` over column panels (or, ``by_rows``, register tiles of ``MR`` rows) as a
    gated kernel (``threads.parallel_tasks``)."""
    open_gate(gate)
    while True:
        t0 = claim(gate, generation, chunk, polls == 0)
        if t0 < 0:
            break
        t1 = min(ntask, t0 + chunk)
        if by_rows:
            block(a, M, K, bp, y, bias, act, res, has_res, t0 * MR, min(M, t1 * MR), 0, nb,
                  prefetch_next)
        else:
            block(a, M, K, bp, y, bias, act, res, has_res, 0, M, t0, t1, prefetch_next)
    if polls > 0:
        helpers_back(gate, polls)


def matmul_packed(x2: np.ndarray, w: np.ndarray, y: np.ndarray, bias: np.ndarray | None = None,
                  act: int = EPI_BIAS, res: np.ndarray | None = None,
                  trans: bool = False) -> np.ndarray:
    """y = epilogue(x2 @ w) for C-contiguous float32 x2 (M, K), constant w (K, N) (or
    (N, K) with ``trans``), y (M, N): + ``bias`` (N,) if given, then GELU (``act``) or +
    ``res`` (M, N). The threads split the column panels of a few rows, the row blocks of
    many."""
    N = y.shape[1]
    if bias is None:
        bias = _zeros(N)
    has_res = res is not None
    res = res if has_res else _NO_RES
    M, K = x2.shape
    bp = packed(w, trans)
    nb = -(-N // NR)
    a = x2.reshape(-1)
    grain_macs = threads.SPLIT_MIN_FLOPS // 2
    pf = PREFETCH
    args = (a, M, K, bp, y, bias, act, res, has_res, nb, pf)
    if M <= ROWS:
        threads.parallel_tasks(
            lambda lo, hi: block(a, M, K, bp, y, bias, act, res, has_res, 0, M, lo, hi, pf),
            lambda gate, gen, polls, chunk: block_claimed(gate, gen, polls, chunk, False, nb,
                                                          *args),
            nb, grain=max(1, grain_macs // max(1, M * K * NR)))
    else:
        # tasks are register tiles, each thread's share one run of them: in blocks of ROWS
        # rows ViT's 197 went 128 to one thread and 69 to the other
        tiles = -(-M // MR)
        threads.parallel_tasks(
            lambda lo, hi: block(a, M, K, bp, y, bias, act, res, has_res, lo * MR,
                                 min(M, hi * MR), 0, nb, pf),
            lambda gate, gen, polls, chunk: block_claimed(gate, gen, polls, chunk, True,
                                                          tiles, *args),
            tiles, grain=max(1, grain_macs // max(1, MR * K * nb * NR),
                             tiles // threads.threads()))
    return y
