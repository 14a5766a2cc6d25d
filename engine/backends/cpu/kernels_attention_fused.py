"""Kernels for chains the CPU plan fuses in transformer models (see ``step_fusion_nlp``).

* Attention ``softmax(Q K * scale [+ mask | where keep]) V`` computed a block of query rows
  at a time: the scores block stays in cache between the two GEMMs instead of the whole
  [batch, heads, L, M] score tensor going through memory four times (MatMul, Div, Softmax,
  MatMul), which is most of a long-sequence encoder's time.
  Softmax's division is applied to the product with V (dv columns, not M), and the
  exponentials use a form for arguments <= 0.

Each returns None for inputs it does not take (other dtypes, broadcasting batch dims), and
the CPU run loop then runs the original layers one by one.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from engine.backends.cpu import attention_packed
from engine.backends.cpu.fastmath import exp_le0
from engine.backends.cpu.threads import parallel_for, threads

MASK_NONE, MASK_ADD, MASK_KEEP = 0, 1, 2
#: bytes of one scores block (rows x keys): small enough to stay in L2 between the GEMMs,
#: large enough that the two products (K or N = head size, often 32-64) get rows to work
#: on: whisper's 4 x 1500 x 1500 (head 32), one thread, 21.6 ms at 256 KiB, 19.1 at 512,
#: 17.8 at 1 MiB, 17.7 at 2 MiB; 4000 keys (head 64) 291 / 246 / 216 / 201 ms
BLOCK_BYTES = 1 << 20
#: fewest multiply-adds (both products) per parallel chunk: handing a chunk to the other
#: thread and waiting for it costs 50-100 us here, so BERT's 4 heads x 128 tokens (2.1M a
#: head) ran 0.38 ms split over two threads and 0.27 ms on one
CHUNK_MACS = 4_000_000
_F32 = np.dtype(np.float32)
#: heads whose scores together take at most this many bytes run as batched products over
#: all of a thread's heads (one NumPy call each, not a Python loop per head): with a few
#: heads of 64-128 tokens the per-head Python cost and the GIL hand-offs it caused between
#: the threads were most of the layer's time
BATCHED_BYTES = 4 << 20
#: ... and each head's at most this many (BERT's 128 x 128 ran 8% faster batched; ViT's
#: 197 x 197 heads 3% slower while Q, K and V were copied first, 1.3% faster since they
#: are read as views)
BATCHED_HEAD_BYTES = 256 << 10


_LANES = 16  # independent running maxima: a single one is a serial compare chain


@njit(nogil=True, cache=True, error_model="numpy",
      fastmath={"contract", "arcp", "afn", "reassoc"})
def softmax_block(s, scale, add, keep, fill, mode, inv):
    """s: (R, M) raw scores, replaced by exp(s * scale [+ add | keep ? . : fill] - row max);
    ``inv[r]`` gets 1 / the row's sum, applied later to the (narrower) product with V.
    ``add``/``keep`` are C-contiguous (R, M) arrays used when ``mode`` says so. Each loop
    is simple enough for LLVM to vectorise: the maximum keeps ``_LANES`` running maxima
    (one is a serial compare chain), read-only (with stores in the same loop it was not)."""
    R, M = s.shape
    acc = np.empty(_LANES, np.float32)
    for r in range(R):
        row = s[r]
        if mode == 1:
            for j in range(M):
                row[j] = row[j] * scale + add[r, j]
        elif mode == 2:
            for j in range(M):
                row[j] = row[j] * scale if keep[r, j] else fill
        else:
            for j in range(M):
                row[j] = row[j] * scale
        acc[:] = -np.inf
        j = 0
        while j + _LANES <= M:
            for t in range(_LANES):
                v = row[j + t]
                acc[t] = v if v > acc[t] else acc[t]
            j += _LANES
        m = acc[0]
        for t in range(1, _LANES):
            m = acc[t] if acc[t] > m else m
        for jj in range(j, M):
            m = row[jj] if row[jj] > m else m
        total = np.float32(0.0)
        for jj in range(M):
            e = exp_le0(row[jj] - m)
            row[jj] = e
            total += e
        inv[r] = np.float32(1.0) / total


@njit(nogil=True, cache=True, error_model="numpy")
def scale_rows(o, inv):
    """o[r, :] *= inv[r] (softmax's division, done on the product with V)."""
    for r in range(o.shape[0]):
        f = inv[r]
        for j in range(o.shape[1]):
            o[r, j] *= f


@njit(nogil=True, cache=True, error_model="numpy")
def softmax_heads(s3, scale, add3, keep3, fill, mode, inv2):
    """``softmax_block`` on every head of s3 (H, L, M); add3/keep3 (H, L, M), (1, L, M) for
    a mask every head shares, or (1, 1, 1) when ``mode`` does not use them."""
    for h in range(s3.shape[0]):
        a = add3[h] if mode == 1 and add3.shape[0] > 1 else add3[0]
        k = keep3[h] if mode == 2 and keep3.shape[0] > 1 else keep3[0]
        softmax_block(s3[h], scale, a, k, fill, mode, inv2[h])


@njit(nogil=True, cache=True, error_model="numpy")
def scale_rows_heads(o3, inv2):
    """``scale_rows`` on every head of o3 (H, L, dv)."""
    for h in range(o3.shape[0]):
        scale_rows(o3[h], inv2[h])


def attention(q, k, v, scale: float, mask=None, mode: int = MASK_NONE, fill: float = 0.0,
              heads_last: bool = False):
    """softmax(q @ k * scale, masked) @ v for q [..., L, d], k [..., d, M], v [..., M, dv]
    with the same leading dims; None when the inputs are not of that form or not float32.
    ``heads_last``: return the result for [1, H, L, dv] inputs as [1, L, H, dv] (the
    Transpose exporters put after attention), written in that layout where the heads are
    batched."""
    if not all(a.dtype == _F32 for a in (q, k, v)) or q.ndim < 2 \
            or not q.ndim == k.ndim == v.ndim:
        return None
    lead = q.shape[:-2]
    L, d = q.shape[-2:]
    M = k.shape[-1]
    dv = v.shape[-1]
    if k.shape != lead + (d, M) or v.shape != lead + (M, dv):
        return None
    if mode == MASK_ADD and mask.dtype != _F32 or mode == MASK_KEEP and mask.dtype != bool:
        return None
    full_mask = None
    if mode != MASK_NONE:
        try:
            np.broadcast_to(mask, lead + (L, M))
        except ValueError:
            return None
        # rows (L, M) made contiguous, so the kernel's loops over them vectorise; leading
        # dims stay broadcast (a [B, 1, 1, M] padding mask becomes [B, 1, L, M], not more)
        own = (1,) * (len(lead) + 2 - mask.ndim) + mask.shape
        rows_c = np.ascontiguousarray(np.broadcast_to(mask.reshape(own), own[:-2] + (L, M)))
        full_mask = np.broadcast_to(rows_c, lead + (L, M))
    n = math.prod(lead)
    batched = n > 1 and L and M and L * M * 4 <= BATCHED_HEAD_BYTES \
        and n * L * M * 4 <= BATCHED_BYTES
    # batched heads: views where the leading dims merge (a transposed [B, L, H, D] does),
    # the products take each head's strided rows as they are; long sequences read each
    # head many times (a block of rows at a time) and run faster on contiguous copies
    # (whisper's 1500 tokens: 3% slower on views)
    q3, k3, v3 = q.reshape(n, L, d), k.reshape(n, d, M), v.reshape(n, M, dv)
    # a mask shared by every head (a padding or causal mask) as one (1, L, M) plane
    shared = full_mask is not None and not any(full_mask.strides[:-2])
    mask3 = full_mask[(0,) * len(lead)][None] if shared else None
    if attention_packed.wanted(L, M, d, dv, full_mask is None or shared, n):
        out = np.empty(lead + (L, dv), np.float32)
        attention_packed.attention(q3, k3, v3, out.reshape(n, L, dv), scale, mask3, mode,
                                   fill)
        return _heads_last(out) if heads_last else out
    if not batched:
        q3, k3, v3 = (np.ascontiguousarray(a) for a in (q3, k3, v3))
    final = None
    if heads_last and batched and len(lead) == 2 and lead[0] == 1:
        # each head's rows written straight into the [1, L, H, dv] result (row stride H * dv)
        final = np.empty((1, L, lead[1], dv), np.float32)
        out = final.transpose(0, 2, 1, 3)
    else:
        out = np.empty(lead + (L, dv), np.float32)
    o3 = out.reshape(n, L, dv)
    rows = max(1, min(L, BLOCK_BYTES // (4 * max(M, 1))))
    blocks = -(-L // rows)
    scale32, fill32 = np.float32(scale), np.float32(fill)
    dummy_add = np.zeros((1, 1), np.float32)
    dummy_keep = np.zeros((1, 1), bool)
    if batched:
        _batched(q3, k3, v3, o3, scale32, full_mask, mask3, mode, fill32, n, L, M, d + dv)
        if final is not None:
            return final
        return _heads_last(out) if heads_last else out

    def run(lo: int, hi: int) -> None:
        scores = np.empty((rows, M), np.float32)
        inv = np.empty(rows, np.float32)
        for item in range(lo, hi):
            b, blk = divmod(item, blocks)
            r0 = blk * rows
            r1 = min(L, r0 + rows)
            s = scores[:r1 - r0]
            np.matmul(q3[b, r0:r1], k3[b], out=s)
            add, keep = dummy_add, dummy_keep
            if full_mask is not None:
                part = full_mask[(np.unravel_index(b, lead) if lead else ()) + (slice(r0, r1),)]
                add, keep = (part, dummy_keep) if mode == MASK_ADD else (dummy_add, part)
            softmax_block(s, scale32, add, keep, fill32, mode, inv)
            o = o3[b, r0:r1]
            np.matmul(s, v3[b], out=o)
            scale_rows(o, inv)

    if L and M and n:
        parallel_for(run, n * blocks, grain=max(1, CHUNK_MACS // max(1, rows * M * (d + dv))))
    elif L and n:
        return None  # softmax over no keys: leave the edge case to the plain layers
    else:
        o3[...] = 0
    return _heads_last(out) if heads_last else out


def _heads_last(out: np.ndarray) -> np.ndarray:
    """[B, H, L, dv] as a C-contiguous [B, L, H, dv] (any rank: the last-but-two and
    last-but-one axes swapped)."""
    return np.ascontiguousarray(np.swapaxes(out, -3, -2))


def _batched(q3, k3, v3, o3, scale32, full_mask, mask3, mode, fill32, n, L, M, dk):
    """All heads at once, split into one run of heads a thread (see ``BATCHED_BYTES``), or
    into every head's rows when the heads do not divide over the threads (``SPLIT_ROWS``)."""
    add3 = np.zeros((1, 1, 1), np.float32)
    keep3 = np.zeros((1, 1, 1), bool)
    shared = mask3 is not None
    if full_mask is not None:
        # a mask every head shares (``mask3``) is passed once, not copied out per head
        # (BERT's: 256 KB a call)
        m3 = mask3 if shared else np.ascontiguousarray(full_mask).reshape(n, L, M)
        add3, keep3 = (m3, keep3) if mode == MASK_ADD else (add3, m3)
    nt = threads()
    split = n * L * M * dk >= CHUNK_MACS and nt > 1
    if split and n % nt and SPLIT_ROWS and L >= 2 * nt:
        # (ViT-tiny's 3 heads on 2 threads: two heads on one, one on the other)
        parallel_for(lambda lo, hi: _rows_of_heads(q3, k3, v3, o3, scale32, add3, keep3,
                                                   fill32, mode, L * lo // nt, L * hi // nt),
                     nt, grain=1)
        return
    scores = np.empty((n, L, M), np.float32)
    inv = np.empty((n, L), np.float32)

    def run(lo: int, hi: int) -> None:
        s = scores[lo:hi]
        np.matmul(q3[lo:hi], k3[lo:hi], out=s)
        softmax_heads(s, scale32, add3[lo:hi] if mode == MASK_ADD and not shared else add3,
                      keep3[lo:hi] if mode == MASK_KEEP and not shared else keep3, fill32,
                      mode, inv[lo:hi])
        np.matmul(s, v3[lo:hi], out=o3[lo:hi])
        scale_rows_heads(o3[lo:hi], inv[lo:hi])

    if split:
        parallel_for(run, n, grain=max(1, n // nt))
    else:
        run(0, n)


#: heads that do not divide evenly over the threads split every head's query rows instead
SPLIT_ROWS = True


def _rows_of_heads(q3, k3, v3, o3, scale32, add3, keep3, fill32, mode, r0, r1):
    """``_batched``'s work for query rows r0:r1 of every head, its scores and product in
    C-contiguous scratch (a strided slice of the shared scores compiled the softmax without
    vectorised rows: 31-35% slower layers); masks by rows where they have them."""
    rows = slice(r0, r1)
    n, M, dv = q3.shape[0], k3.shape[2], v3.shape[2]
    s = np.empty((n, r1 - r0, M), np.float32)
    inv = np.empty((n, r1 - r0), np.float32)
    np.matmul(q3[:, rows], k3, out=s)
    softmax_heads(s, scale32, np.ascontiguousarray(add3[:, rows]) if mode == MASK_ADD else add3,
                  np.ascontiguousarray(keep3[:, rows]) if mode == MASK_KEEP else keep3, fill32,
                  mode, inv)
    o = np.empty((n, r1 - r0, dv), np.float32)
    np.matmul(s, v3, out=o)
    scale_rows_heads(o, inv)
    o3[:, rows] = o
