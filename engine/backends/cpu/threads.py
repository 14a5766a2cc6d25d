"""Thread use of the CPU backend: how many cores its kernels may use, and a row-split sgemm.

OpenBLAS's own threads busy-wait between calls; on a machine whose cores are shared this
made whole-model runs 10-30x slower. So BLAS runs single-threaded, and large products are
split by rows over a small pool of Python threads that block (not spin) when idle; NumPy
releases the GIL inside BLAS, so the parts run truly in parallel. Numba's own parallel
kernels use the same thread count.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# GNU OpenMP (Numba's threading layer here) spins between parallel regions by default; with
# busy cores that spinning starves the thread doing the work. Must be set before the first
# parallel kernel loads libgomp; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_lock = threading.Lock()
_threads = 0
_pool: ThreadPoolExecutor | None = None
_blas_limiter = None
#: below this many multiply-adds a product runs on the calling thread alone
SPLIT_MIN_FLOPS = 2_000_000


def default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else os.cpu_count() or 1)


def set_threads(n: int = 0) -> int:
    """Use ``n`` threads (0: all cores) for BLAS splits and Numba kernels of the calling thread."""
    global _threads, _pool, _blas_limiter
    n = n or default_threads()
    import numba

    with _lock:
        if _blas_limiter is None:
            from threadpoolctl import threadpool_limits

            _blas_limiter = threadpool_limits(1, user_api="blas")
        if n != _threads:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(n - 1, thread_name_prefix="cpu-gemm") if n > 1 else None
            _threads = n
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    return n


def threads() -> int:
    if not _threads:
        set_threads(0)
    return _threads


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[...] = a @ b`` for 2-D ``a`` (M, K), ``b`` (K, N); rows of ``out`` split over the
    backend's threads when the product is big enough to pay for the hand-off."""
    n = threads()
    M, K = a.shape
    N = b.shape[1]
    parts = min(n, M)
    if parts <= 1 or M * K * N < SPLIT_MIN_FLOPS:
        return np.matmul(a, b, out=out)
    if M < parts * 8:  # too few rows: split the columns instead (outputs are then strided)
        bounds = np.linspace(0, N, parts + 1).astype(int)
        jobs = [_pool.submit(np.matmul, a, b[:, lo:hi], out=out[:, lo:hi])
                for lo, hi in zip(bounds[1:-1], bounds[2:])]
        np.matmul(a, b[:, :bounds[1]], out=out[:, :bounds[1]])
    else:
        bounds = np.linspace(0, M, parts + 1).astype(int)
        jobs = [_pool.submit(np.matmul, a[lo:hi], b, out=out[lo:hi])
                for lo, hi in zip(bounds[1:-1], bounds[2:])]
        np.matmul(a[:bounds[1]], b, out=out[:bounds[1]])
    for j in jobs:
        j.result()
    return out
