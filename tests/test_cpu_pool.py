"""The CPU backend's helper threads: every chunk runs once, errors reach the caller, calls
from helpers or from a second thread run alone, and split products match float64 NumPy."""

import threading

import numpy as np
import pytest

from engine.backends.cpu import threads
from engine.backends.cpu.pool import WorkerPool


@pytest.fixture(params=[2, 3])
def many_threads(request):
    before = threads.threads()
    threads.set_threads(request.param)
    yield request.param
    threads.set_threads(before)


def test_every_chunk_runs_once(many_threads):
    for n, grain in ((1000, 1), (37, 5), (3, 1)):
        seen = np.zeros(n, np.int64)
        lock = threading.Lock()

        def mark(lo, hi, seen=seen, lock=lock):
            with lock:
                seen[lo:hi] += 1

        for _ in range(20):
            threads.parallel_for(mark, n, grain)
        assert (seen == 20).all()


def test_helpers_take_part(many_threads):
    names = set()

    def work(lo, hi):
        names.add(threading.current_thread().name)
        x = np.random.default_rng(lo).random(200_000)
        np.sort(x)  # long enough for a helper to pick up a chunk

    for _ in range(20):
        threads.parallel_for(work, 64)
    assert any(name.startswith("cpu-helper") for name in names)


def test_error_in_a_chunk_reaches_the_caller(many_threads):
    def fail(lo, hi):
        if lo <= 5 < hi:
            raise ValueError("chunk five")

    with pytest.raises(ValueError, match="chunk five"):
        threads.parallel_for(fail, 16)
    hits = []
    threads.parallel_for(lambda lo, hi: hits.append(hi - lo), 16)  # the pool still works
    assert sum(hits) == 16


def test_nested_and_concurrent_calls_run_alone(many_threads):
    inner = np.zeros(64, np.int64)

    def outer(lo, hi):
        for i in range(lo, hi):
            threads.parallel_for(lambda a, b, i=i: inner.__setitem__(i, inner[i] + b - a), 10)

    threads.parallel_for(outer, 64)
    assert (inner == 10).all()

    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 150)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    results, errors = [], []

    def caller():
        try:
            for _ in range(30):
                out = np.empty((300, 150), np.float32)
                results.append(threads.matmul(a, b, out).copy())
        except BaseException as exc:
            errors.append(exc)

    callers = [threading.Thread(target=caller) for _ in range(3)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(60)
    assert not errors and len(results) == 90
    for got in results:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("m,k,n", [(300, 128, 160), (40, 512, 300), (130, 300, 120)])
def test_split_products_match_float64(many_threads, m, k, n):
    """Rows (many rows) or columns (few rows) split, with the epilogue on each block once."""
    assert m * k * n >= threads.SPLIT_MIN_FLOPS
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    out = np.empty((m, n), np.float32)
    touched = np.zeros((m, n), np.int64)

    def after(r0, r1, c0, c1):
        out[r0:r1, c0:c1] *= 2.0
        touched[r0:r1, c0:c1] += 1

    threads.matmul(a, b, out, after=after)
    assert (touched == 1).all()
    want = 2.0 * (a.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)


def test_idle_helpers_block_and_closed_pool_refuses():
    pool = WorkerPool(1, spin_us=0.0)
    ran = []
    assert pool.run(lambda: ran.append(threading.current_thread().name))
    assert len(ran) == 2  # the caller and the helper, the helper woken from its block
    pool.close()
    assert not pool.run(lambda: ran.append("late"))
    assert "late" not in ran
