"""Thread use of the CPU backend: how many cores its kernels may use, and a row-split sgemm.

OpenBLAS's own threads busy-wait between calls; on a machine whose cores are shared this
made whole-model runs 10-30x slower. So BLAS runs single-threaded, and large products are
split by rows over a small pool of helper threads (``pool.py``) that poll briefly after a
job and then block, so an idle pool never spins; NumPy releases the GIL inside BLAS, so the
parts run truly in parallel. Numba's own parallel kernels use the same thread count.
"""

from __future__ import annotations

import os
import threading
from collections import deque

import numpy as np

from engine.backends.cpu import spin
from engine.backends.cpu.pool import WorkerPool

# GNU OpenMP (Numba's threading layer here) spins between parallel regions by default; with
# busy cores that spinning starves the thread doing the work. Must be set before the first
# parallel kernel loads libgomp; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_lock = threading.Lock()
_threads = 0
_pool: WorkerPool | None = None
_blas_limiter = None
#: below this many multiply-adds a product runs on the calling thread alone. With the helpers
#: polling between jobs, a split of 4M (65 us) ran 1.2-1.4x faster, of 8-16M 1.4-1.7x
SPLIT_MIN_FLOPS = 4_000_000
#: pools and other memory-bound loops: fewest input elements per parallel chunk
SPLIT_MIN_ELEMENTS = 200_000
#: one-pass streaming kernels (scale/shift, copies) below this many elements run on the
#: calling thread: in a model run, waking the pool thread and waiting for it took ~0.1 ms
#: (densenet's 14x14 BatchNorms: 0.15-0.2 ms split, 0.03-0.05 ms on one thread)
STREAM_SPLIT_ELEMENTS = 1_000_000
#: most chunks a parallel_for makes per thread
CHUNKS_PER_THREAD = 2
#: gated kernels claim their tasks (False: ``parallel_tasks`` runs ``parallel_for``'s plain
#: jobs instead; for benchmarks)
GATED = True
#: most chunks a gated kernel's tasks are claimed in, per thread (claims cost an atomic add)
GATED_CHUNKS_PER_THREAD = 2
#: set by the run loop around layers that run faster on one thread (``thread_tuning``): the
#: splits below then run every chunk on the calling thread
_serial = False


def _forget_pool_in_child() -> None:
    """A forked child has none of the parent's helper threads: it makes its own pool."""
    global _pool, _threads, _lock
    _pool, _threads, _lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


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
                _pool.close()
            _pool = WorkerPool(n - 1) if n > 1 else None
            _threads = n
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))  # for any prange kernel
    return n


def threads() -> int:
    if not _threads:
        set_threads(0)
    return _threads


def set_serial(alone: bool) -> None:
    """Run the following splits on the calling thread only (``alone``) or over the threads.
    Plans and tilings stay those of ``threads()``, so results do not change."""
    global _serial
    _serial = alone


def parallel_for(fn, n: int, grain: int = 1) -> None:
    """Call ``fn(lo, hi)`` over chunks of ``range(n)`` on the calling thread and the pool.

    Chunks are handed out dynamically and the caller works too, so a helper thread that the
    OS does not schedule in time only means fewer chunks for it, never a wait for it to start.
    The caller takes chunks from the start and the helpers from the end (``spin.SPLIT_ENDS``:
    each core keeps working on the same part of every layer's data). A call made while the
    pool is busy (from a helper, or from another thread) runs alone.
    """
    nt = threads()
    chunks = min(n // max(grain, 1), nt * CHUNKS_PER_THREAD)
    if nt <= 1 or chunks <= 1 or _serial:
        if n > 0:
            fn(0, n)
        return
    bounds = [n * i // chunks for i in range(chunks + 1)]
    left = deque(range(chunks))  # (its pops are atomic)
    caller = threading.get_ident()
    errors: list[BaseException] = []

    def work():
        take = left.pop if spin.SPLIT_ENDS and threading.get_ident() != caller \
            else left.popleft
        while left:
            try:
                i = take()
            except IndexError:  # another thread took the last chunk
                return
            try:
                fn(bounds[i], bounds[i + 1])
            except BaseException as exc:  # re-raised on the calling thread
                errors.append(exc)

    pool = _pool
    if pool is None or not pool.run(work):
        work()
    if errors:
        raise errors[0]


def parallel_tasks(plain, gated, n: int, grain: int = 1) -> None:
    """Run a gated Numba kernel over tasks ``range(n)`` on the calling thread and the pool.

    ``gated(gate, generation, polls, chunk)`` calls the kernel, which opens ``gate`` on
    entry, claims ``chunk`` tasks at a time of job ``generation`` until none are left and
    then, if ``polls`` > 0, waits for the helpers to be back (``spin.open_gate``,
    ``claim``, ``helpers_back``; see ``WorkerPool.run``); ``plain(lo, hi)`` runs tasks
    ``lo:hi`` on the calling thread alone, when one thread does it all. Unlike
    ``parallel_for``, a helper starts within microseconds of the caller and no thread waits
    for the GIL, so layers of a few tens of microseconds can be split.
    """
    if not GATED:
        parallel_for(plain, n, grain)
        return
    nt = threads()
    chunks = min(n // max(grain, 1), nt * GATED_CHUNKS_PER_THREAD)
    if chunks > nt:
        chunks -= chunks % nt  # even shares: 3 chunks on 2 threads left one doing two
    pool = _pool
    if nt <= 1 or chunks <= 1 or pool is None or _serial:
        if n > 0:
            plain(0, n)
        return
    if n >= spin.MAX_TASKS:
        parallel_for(plain, n, grain)
        return
    chunk = -(-n // chunks)
    errors: list[BaseException] = []

    def job(gate, generation, polls):
        try:
            gated(gate, generation, polls, chunk)
        except BaseException as exc:  # re-raised on the calling thread
            errors.append(exc)

    if not pool.run(job, tasks=n):
        plain(0, n)
    if errors:
        raise errors[0]


def stream_grain(n: int, per_item: int, least: int = STREAM_SPLIT_ELEMENTS) -> int:
    """The ``parallel_for`` grain for ``n`` items of ``per_item`` elements of a streaming
    kernel: all on the calling thread below ``least`` elements, else two chunks per thread
    (the caller takes what a late pool thread has not)."""
    if n * per_item < least:
        return max(n, 1)
    return max(1, n // (2 * threads()))


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray, after=None) -> np.ndarray:
    """``out[...] = a @ b`` for 2-D ``a`` (M, K), ``b`` (K, N), rows (or, for few rows,
    columns) split over the backend's threads when the product pays for the hand-off.
    ``after(r0, r1, c0, c1)`` runs on each block of ``out`` right after it is computed."""
    M, K = a.shape
    N = b.shape[1]
    if threads() <= 1 or M * K * N < SPLIT_MIN_FLOPS or _serial:
        np.matmul(a, b, out=out)
        if after is not None:
            after(0, M, 0, N)
        return out
    nt = threads()
    if M < 64 * nt:
        # column blocks: each part reads its slice of ``b`` once and all of (small) ``a``
        def cols(lo, hi):
            np.matmul(a, b[:, lo:hi], out=out[:, lo:hi])
            if after is not None:
                after(0, M, lo, hi)

        parallel_for(cols, N, grain=max(16, N // nt // 16 * 16))
    else:
        def rows(lo, hi):
            np.matmul(a[lo:hi], b, out=out[lo:hi])
            if after is not None:
                after(lo, hi, 0, N)

        # one block a thread: the helpers start within microseconds, and smaller blocks only
        # lower sgemm's own efficiency (256x256x256: 1.67x in two blocks, 1.47x in four)
        parallel_for(rows, M, grain=M // nt)  # floor: parallel_for makes n // grain chunks
    return out
