"""Kernels for chains the CPU plan fuses in transformer models (see ``step_fusion_nlp``).

* Attention ``softmax(Q K * scale [+ mask | where keep]) V`` computed a block of query rows
  at a time: the scores block stays in cache between the two GEMMs instead of the whole
  [batch, heads, L, M] score tensor going through memory four times (MatMul, Div, Softmax,
  MatMul), which is most of a long-sequence encoder's time.
* GELU in its decomposed Erf form, one vectorised pass (``fastmath.gelu``).

Each returns None for inputs it does not take (other dtypes, broadcasting batch dims), and
the CPU run loop then runs the original layers one by one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.fastmath import exp_f32
from engine.backends.cpu.threads import parallel_for

MASK_NONE, MASK_ADD, MASK_KEEP = 0, 1, 2
#: bytes of one scores block (rows x keys): small enough to stay in L2 between the GEMMs
BLOCK_BYTES = 1 << 18
_F32 = np.dtype(np.float32)


@njit(nogil=True, cache=True, error_model="numpy",
      fastmath={"contract", "arcp", "afn", "reassoc"})
def softmax_block(s, scale, add, keep, fill, mode):
    """s: (R, M) raw scores, replaced by softmax(s * scale [+ add | keep ? . : fill]) per row.
    ``add``/``keep`` are (R, M) views (any strides) used when ``mode`` says so."""
    R, M = s.shape
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
        m = row[0]
        for j in range(1, M):
            m = max(m, row[j])
        total = np.float32(0.0)
        for j in range(M):
            e = exp_f32(row[j] - m)
            row[j] = e
            total += e
        inv = np.float32(1.0) / total
        for j in range(M):
            row[j] *= inv


def attention(q, k, v, scale: float, mask=None, mode: int = MASK_NONE, fill: float = 0.0):
    """softmax(q @ k * scale, masked) @ v for q [..., L, d], k [..., d, M], v [..., M, dv]
    with the same leading dims; None when the inputs are not of that form or not float32."""
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
    try:
        full_mask = None if mode == MASK_NONE else np.broadcast_to(mask, lead + (L, M))
    except ValueError:
        return None
    n = int(np.prod(lead, dtype=np.int64))
    q3 = np.ascontiguousarray(q).reshape(n, L, d)
    k3 = np.ascontiguousarray(k).reshape(n, d, M)
    v3 = np.ascontiguousarray(v).reshape(n, M, dv)
    out = np.empty(lead + (L, dv), np.float32)
    o3 = out.reshape(n, L, dv)
    rows = max(1, min(L, BLOCK_BYTES // (4 * max(M, 1))))
    blocks = -(-L // rows)
    scale32, fill32 = np.float32(scale), np.float32(fill)
    dummy_add = np.zeros((1, 1), np.float32)
    dummy_keep = np.zeros((1, 1), bool)

    def run(lo: int, hi: int) -> None:
        scores = np.empty((rows, M), np.float32)
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
            softmax_block(s, scale32, add, keep, fill32, mode)
            np.matmul(s, v3[b], out=o3[b, r0:r1])

    if L and M and n:
        parallel_for(run, n * blocks, grain=max(1, (1 << 21) // max(1, rows * M * (d + dv))))
    elif L and n:
        return None  # softmax over no keys: leave the edge case to the plain layers
    else:
        o3[...] = 0
    return out
