"""The CPU backend's helper threads: every chunk (and every gated kernel's task) runs once,
errors reach the caller, calls from helpers or from a second thread run alone, and split
products match float64 NumPy."""

import threading
import time

import numpy as np
import pytest
from numba import njit

from engine.backends.cpu import spin, threads
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


@njit(nogil=True, cache=True)
def _count_claims(gate, generation, polls, chunk, seen, spin_per_task):
    """A gated kernel: marks each task it claims in ``seen`` (spinning a little per task so
    that a helper gets some)."""
    spin.open_gate(gate)
    n = seen.shape[0]
    while True:
        t0 = spin.claim(gate, generation, chunk, polls == 0)
        if t0 < 0:
            break
        for t in range(t0, min(n, t0 + chunk)):
            acc = 0.0
            for i in range(spin_per_task):
                acc += np.sqrt(i + acc * 1e-9)
            seen[t] += 1 + (acc < 0)
    if polls > 0:
        spin.helpers_back(gate, polls)


def _gated_run(seen, grain, spin_per_task=2000):
    threads.parallel_tasks(
        lambda lo, hi: seen.__setitem__(slice(lo, hi), seen[lo:hi] + 1),
        lambda gate, gen, polls, chunk: _count_claims(gate, gen, polls, chunk, seen,
                                                      spin_per_task),
        seen.shape[0], grain)


def test_gated_tasks_run_once(many_threads):
    for n, grain in ((1000, 1), (37, 5), (3, 1), (1, 1)):
        seen = np.zeros(n, np.int64)
        for _ in range(30):
            _gated_run(seen, grain)
        assert (seen == 30).all()


def test_gated_jobs_after_the_helpers_went_to_sleep(many_threads):
    """Helpers that polled their time out sleep (futex or condition variable) and still
    take later jobs; jobs posted back to back never share a task."""
    pool_before = threads._pool
    seen = np.zeros(64, np.int64)
    for round_ in range(4):
        _gated_run(seen, 1)
        time.sleep(0.003 if round_ % 2 else 0.0)  # past the helpers' polling window
    assert (seen == 4).all()
    assert threads._pool is pool_before


def test_claims_of_an_ended_job_take_nothing():
    gate = spin.new_gate()
    spin.arm_gate(gate, 7, 10)
    assert spin.claim(gate, 7, 4, False) == 0
    assert spin.claim(gate, 7, 4, False) == 4
    assert spin.claim(gate, 7, 4, False) == 8  # the last two
    assert spin.claim(gate, 7, 4, False) == -1
    spin.arm_gate(gate, 8, 5)
    assert spin.claim(gate, 7, 1, False) == -1  # a late kernel of job 7 finds job 8's closed
    assert spin.claim(gate, 8, 5, True) == 0


@pytest.mark.parametrize("split_ends", [True, False])
def test_helpers_claim_from_the_end(monkeypatch, split_ends):
    """The caller's claims go up from task 0 and a helper's down from the last chunk, on the
    same chunk grid, and together they take every task once; with SPLIT_ENDS off all claims
    go up from the start."""
    monkeypatch.setattr(spin, "SPLIT_ENDS", split_ends)
    gate = spin.new_gate()
    spin.arm_gate(gate, 3, 10)
    order = [spin.claim(gate, 3, 3, helper) for helper in (True, False, True, False, True)]
    if split_ends:
        assert order == [9, 0, 6, 3, -1]  # chunks 9, 6-8, 3-5, 0-2: each once
    else:
        assert order == [0, 3, 6, 9, -1]
    assert spin.claim(gate, 3, 3, False) == -1


def test_a_gated_job_of_too_many_tasks_is_refused_by_the_gate():
    with pytest.raises(ValueError, match="tasks"):
        spin.arm_gate(spin.new_gate(), 1, spin.MAX_TASKS)


def test_generations_past_the_tag_width_still_separate_jobs():
    """The generation is kept in 23 bits: a job number that wraps around still tells this
    job from the previous one."""
    gate = spin.new_gate()
    for generation in ((1 << 23) - 1, 1 << 23, (1 << 40) + 5):
        spin.arm_gate(gate, generation, 4)
        assert spin.claim(gate, generation - 1, 1, False) == -1
        assert spin.claim(gate, generation, 1, False) == 0


def test_error_in_a_gated_kernel_reaches_the_caller(many_threads):
    def gated(gate, gen, polls, chunk):
        raise ValueError("bad kernel")

    with pytest.raises(ValueError, match="bad kernel"):
        threads.parallel_tasks(lambda lo, hi: None, gated, 64, 1)
    seen = np.zeros(64, np.int64)
    _gated_run(seen, 1)  # the pool still works
    assert (seen == 1).all()


def test_a_finished_gated_job_keeps_no_arrays_alive(many_threads):
    """The pool and its helpers drop a job once it is done: its closure holds the layer's
    arrays (phase planes, outputs), which would otherwise stay alive until the next job."""
    import weakref

    seen = np.zeros(64, np.int64)
    marker = np.zeros(1000, np.float32)
    ref = weakref.ref(marker)
    threads.parallel_tasks(
        lambda lo, hi, m=marker: seen.__setitem__(slice(lo, hi), seen[lo:hi] + 1),
        lambda gate, gen, polls, chunk, m=marker: _count_claims(gate, gen, polls, chunk,
                                                                seen, 2000),
        64, 1)
    del marker
    time.sleep(0.01)  # a helper drops its reference right after it returns from the job
    assert (seen == 1).all()
    assert ref() is None


_TRACED_RUNS = """
import sys, time, tracemalloc
import numpy as np
sys.path.insert(0, sys.argv[1])
from engine.backends.cpu import threads
threads.set_threads(2)
x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
out = np.empty((256, 256), np.float32)
end = time.perf_counter() + float(sys.argv[2])
n = 0
while time.perf_counter() < end:
    threads.matmul(x, x, out)  # split: the helper ends its job in finish_and_wait
    tracemalloc.start()
    threads.matmul(x, x, out)
    tracemalloc.stop()  # while the helper is on its way back to waiting
    n += 1
print(n)
"""


def test_tracing_started_and_stopped_beside_idle_helpers(tmp_path):
    """A helper going idle allocated (without the GIL) through Python's raw allocator; with
    tracemalloc stopped at that moment on the main thread (as ``bench``'s peak memory
    does) the process crashed. Runs in a child process: a crash fails the test."""
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-c", _TRACED_RUNS, root, "4"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 100
