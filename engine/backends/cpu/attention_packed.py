"""Attention over long sequences on the packed-panel product (``gemm_packed``).

With a head size of 32-64, both of attention's products are thin for sgemm: Q K^T has an
inner dimension of d, and P V an output of d columns. Whisper's 4 heads x 1500 tokens ran
the two at ~100 GFLOP/s on one core, beside a softmax of 9M values. Here each head's K and
V are packed into 32-column panels once per call (the panels hold all keys: a few hundred
KB), and a block of ``ROWS`` query rows goes through Q K^T on the 8 x 32 register tiles,
the softmax of ``softmax_vec``, P V on the same tiles (one panel for d <= 32) and the
row scaling, before the next block: the scores block stays in L1/L2 throughout. Blocks
of all heads are tasks of a gated kernel (``threads.parallel_tasks``). Whisper's 4 heads x
1500 tokens (head 32): 16.1 -> 13.4 ms on one thread, 9.0 -> 7.0 ms on two; the encoder
26.1 -> 22.7 ms.

Used for at least ``MIN_KEYS`` keys and ``ROWS`` query rows, with a mask, if any, shared
by every head; everything else stays with ``kernels_attention_fused``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import threads
from engine.backends.cpu.conv_depthwise import _OPTS
from engine.backends.cpu.gemm_packed import NR, _pack_heads, block
from engine.backends.cpu.linear_epilogue import EPI_NONE
from engine.backends.cpu.softmax_vec import softmax_rows
from engine.backends.cpu.spin import claim, helpers_back, open_gate

#: query rows a task takes through both products
ROWS = 64
#: fewest keys for this path whatever the heads. From 128, ViT's 3 heads x 197 tokens ran
#: 0.37 -> 0.32 ms on two threads (alone), and 6-9% faster in the model, where the layers
#: after them lost more (the whole model 2% slower)
MIN_KEYS = 256
#: fewest keys when the heads divide evenly over the threads, whose runs of tasks then
#: cover whole heads (each head's K and V packed once): BERT's 4 heads x 128 tokens, in the
#: model with thread tuning off, 462 -> 352 us a layer against the batched NumPy products,
#: the GPT-style decoder's 4 x 64 248 -> 213 us
SHORT_MIN_KEYS = 32
#: use this path where ``wanted`` says so (False: the row-block path; tests, benchmarks)
ENABLED = True
_NO_RES = np.zeros((1, 1), np.float32)


def wanted(L: int, M: int, d: int, dv: int, shared_mask: bool, heads: int = 1) -> bool:
    """Whether attention of L query rows over M keys (head sizes d, dv) in ``heads`` heads
    (batch x heads) runs here."""
    if not (ENABLED and L >= ROWS and shared_mask and d <= 256 and dv <= 256):
        return False
    return M >= MIN_KEYS or M >= SHORT_MIN_KEYS and heads % threads.threads() == 0


@njit(**_OPTS)
def _tasks(q3, k3, v3, o, scale, add, keep, fill, mode, t0, t1, sc):
    """Tasks ``t0:t1`` (head * row blocks + block) of o (H, L, dv) = softmax(q3 (H, L, d)
    @ k3 (H, d, M) * scale, masked) @ v3 (H, M, dv), all of any strides; add or keep
    (1, L, M) when ``mode`` is 1 or 2. ``sc`` (``_scratch``) holds the thread's block of
    query rows, scores, product and the panels of the head it packed last: a thread packs
    a head's K and V when its tasks reach that head (in parallel, and once per thread for
    the head-major runs of tasks the threads claim)."""
    qs, s, t, inv, kp, vp, packed = sc
    n, L, d = q3.shape
    M, dv = k3.shape[2], v3.shape[2]
    blocks = -(-L // ROWS)
    nbk, nbv = -(-M // NR), -(-dv // NR)
    no_bias_m, no_bias_d = np.zeros(M, np.float32), np.zeros(dv, np.float32)
    for task in range(t0, t1):
        h, b = task // blocks, task % blocks
        if packed[0] != h:
            _pack_heads(k3[h:h + 1], kp)
            _pack_heads(v3[h:h + 1], vp)
            packed[0] = h
        r0 = b * ROWS
        rows = min(L, r0 + ROWS) - r0
        for i in range(rows):
            src = q3[h, r0 + i]
            for j in range(d):
                qs[i * d + j] = src[j]
        sv, tv = s[:rows], t[:rows]
        block(qs, rows, d, kp[0], sv, no_bias_m, EPI_NONE, _NO_RES, False, 0, rows, 0, nbk)
        softmax_rows(sv, scale, add[0, r0:r0 + rows] if mode == 1 else add[0],
                     keep[0, r0:r0 + rows] if mode == 2 else keep[0], fill, mode, inv)
        block(sv.reshape(-1), rows, M, vp[0], tv, no_bias_d, EPI_NONE, _NO_RES, False, 0,
              rows, 0, nbv)
        for i in range(rows):
            f = inv[i]
            src, dst = tv[i], o[h, r0 + i]
            for j in range(dv):
                dst[j] = src[j] * f


@njit(**_OPTS)
def _scratch(d, M, dv):
    """A thread's scratch for ``_tasks``: query rows, scores, product, row sums, one head's
    K and V panels and the number of the head they hold (-1: none yet)."""
    nbk, nbv = -(-M // NR), -(-dv // NR)
    return (np.empty(ROWS * d, np.float32), np.empty((ROWS, M), np.float32),
            np.empty((ROWS, dv), np.float32), np.empty(ROWS, np.float32),
            np.empty((1, nbk * d * NR), np.float32), np.empty((1, nbv * M * NR), np.float32),
            np.full(1, -1, np.int64))


@njit(**_OPTS)
def attend(q3, k3, v3, o, scale, add, keep, fill, mode, t0, t1):
    """``_tasks`` on the calling thread."""
    _tasks(q3, k3, v3, o, scale, add, keep, fill, mode, t0, t1,
           _scratch(q3.shape[2], k3.shape[2], v3.shape[2]))


@njit(**_OPTS)
def attend_claimed(gate, generation, polls, chunk, ntask, q3, k3, v3, o, scale, add, keep,
                   fill, mode):
    """``_tasks`` as a gated kernel (``threads.parallel_tasks``)."""
    open_gate(gate)
    sc = _scratch(q3.shape[2], k3.shape[2], v3.shape[2])
    while True:
        t0 = claim(gate, generation, chunk, polls == 0)
        if t0 < 0:
            break
        _tasks(q3, k3, v3, o, scale, add, keep, fill, mode, t0, min(ntask, t0 + chunk), sc)
    if polls > 0:
        helpers_back(gate, polls)


_NO_MASK = np.zeros((1, 1, 1), np.float32)
_NO_KEEP = np.zeros((1, 1, 1), bool)


def attention(q3, k3, v3, o3, scale, mask3, mode: int, fill) -> None:
    """``o3`` (H, L, dv) = softmax(q3 @ k3 * scale, masked) @ v3 for q3 (H, L, d), k3
    (H, d, M), v3 (H, M, dv) (views are fine); ``mask3`` (1, L, M) shared by every head
    (``mode`` 1: added, 2: kept where True, else ``fill``), or None."""
    n, L = q3.shape[:2]
    add, keep = _NO_MASK, _NO_KEEP
    if mode == 1:
        add = np.ascontiguousarray(mask3)
    elif mode == 2:
        keep = np.ascontiguousarray(mask3)
    ntask = n * -(-L // ROWS)
    args = (q3, k3, v3, o3, np.float32(scale), add, keep, np.float32(fill), mode)
    threads.parallel_tasks(lambda lo, hi: attend(*args, lo, hi),
                           lambda gate, gen, polls, chunk: attend_claimed(
                               gate, gen, polls, chunk, ntask, *args),
                           ntask, grain=1)
