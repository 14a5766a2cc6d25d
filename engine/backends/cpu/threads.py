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
#: below this many multiply-adds a product runs on the calling thread alone: waking a pool
#: thread and waiting for it costs 15-60 us each way on this 2-core VM, and a split product
#: gained only 1.1-1.25x where it paid at all. Model runs A/B (quiet machine): 12-32M ran
#: ViT 9-10% and YOLO 5% faster than 6M, the other zoo and family models within 2%
SPLIT_MIN_FLOPS = 16_000_000
#: pools and other memory-bound loops: fewest input elements per parallel chunk
SPLIT_MIN_ELEMENTS = 200_000
#: one-pass streaming kernels (scale/shift, copies) below this many elements run on the
#: calling thread: in a model run, waking the pool thread and waiting for it took ~0.1 ms
#: (densenet's 14x14 BatchNorms: 0.15-0.2 ms split, 0.03-0.05 ms on one thread)
STREAM_SPLIT_ELEMENTS = 1_000_000


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
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))  # for any prange kernel
    return n


def threads() -> int:
    if not _threads:
        set_threads(0)
    return _threads


def parallel_for(fn, n: int, grain: int = 1) -> None:
    """Call ``fn(lo, hi)`` over chunks of ``range(n)`` on the calling thread and the pool.

    Chunks are handed out dynamically and the caller works too, so a helper thread that the
    OS does not schedule in time only means fewer chunks for it, never a wait for it to start.
    """
    nt = threads()
    chunks = min(n // max(grain, 1), nt * 4)
    if nt <= 1 or chunks <= 1:
        if n > 0:
            fn(0, n)
        return
    bounds = [n * i // chunks for i in range(chunks + 1)]
    state = _Chunks(chunks)

    def work():
        while True:
            i = state.take()
            if i < 0:
                return
            try:
                fn(bounds[i], bounds[i + 1])
            except BaseException as exc:  # re-raised on the calling thread
                state.error = exc
            finally:
                state.finish()

    for _ in range(nt - 1):
        _pool.submit(work)
    work()
    state.done.wait()
    if state.error is not None:
        raise state.error


def stream_grain(n: int, per_item: int, least: int = STREAM_SPLIT_ELEMENTS) -> int:
    """The ``parallel_for`` grain for ``n`` items of ``per_item`` elements of a streaming
    kernel: all on the calling thread below ``least`` elements, else two chunks per thread
    (the caller takes what a late pool thread has not)."""
    if n * per_item < least:
        return max(n, 1)
    return max(1, n // (2 * threads()))


class _Chunks:
    """Hands out chunk indices; ``done`` is set when every chunk taken has finished."""

    def __init__(self, n: int):
        self.n, self.next, self.finished = n, 0, 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.error: BaseException | None = None

    def take(self) -> int:
        with self.lock:
            if self.next >= self.n:
                return -1
            self.next += 1
            return self.next - 1

    def finish(self) -> None:
        with self.lock:
            self.finished += 1
            if self.finished == self.n:
                self.done.set()


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray, after=None) -> np.ndarray:
    """``out[...] = a @ b`` for 2-D ``a`` (M, K), ``b`` (K, N), rows (or, for few rows,
    columns) split over the backend's threads when the product pays for the hand-off.
    ``after(r0, r1, c0, c1)`` runs on each block of ``out`` right after it is computed."""
    M, K = a.shape
    N = b.shape[1]
    if threads() <= 1 or M * K * N < SPLIT_MIN_FLOPS:
        np.matmul(a, b, out=out)
        if after is not None:
            after(0, M, 0, N)
        return out
    if N >= M:
        # column blocks: each part reads its slice of ``b`` once and all of (small) ``a``
        def cols(lo, hi):
            np.matmul(a, b[:, lo:hi], out=out[:, lo:hi])
            if after is not None:
                after(0, M, lo, hi)

        parallel_for(cols, N, grain=256)
    else:
        def rows(lo, hi):
            np.matmul(a[lo:hi], b, out=out[lo:hi])
            if after is not None:
                after(lo, hi, 0, N)

        parallel_for(rows, M, grain=max(64, -(-M // (2 * threads()))))
    return out
