"""Bounded busy-waits without the GIL, for the CPU backend's thread pool.

On this kind of virtual machine a thread that blocks in the kernel takes 15-60 us to run
again once woken, about what a split layer saves. So the pool's threads poll a shared
word for a short, bounded time before they block, and the caller polls for their results.
An idle helper blocks in a futex wait from Numba too: a helper that went back to Python to
block took the GIL there while the caller was running Python, and each then waited for
the other in the interpreter's queue (a slow wake-up each way).
The polls run in Numba with the GIL released; each reads the word with an atomic load (so
LLVM cannot hoist it out of the loop) and then executes a ``pause``, the CPU's hint that
this is a spin loop (it frees the core's resources for a sibling and saves power).
"""

from __future__ import annotations

import platform
import sys
import time

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
#: the futex system call's number (Linux on x86-64 and arm64; None elsewhere)
_FUTEX_NR = ({"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}
             .get(platform.machine().lower()) if sys.platform.startswith("linux") else None)
#: whether idle helpers sleep in a futex wait inside Numba (no GIL needed to go idle or to
#: wake); elsewhere they return to Python and block on a condition variable
FUTEX = _FUTEX_NR is not None
_FUTEX_WAIT, _FUTEX_WAKE = 128, 129  # the PRIVATE variants: one process
#: longest futex wait before a sleeping helper looks at the word again (a safety net)
_SLEEP_NS = 100_000_000


def _slot(context, builder, sig, args):
    """Pointer to element ``args[1]`` of the 1-D int64 array ``args[0]`` (no checks)."""
    data = context.make_array(sig.args[0])(context, builder, args[0]).data
    return builder.gep(data, [args[1]])


@intrinsic
def _load_at(typingctx, arr, i):
    """``arr[i]`` of a 1-D int64 array, read from memory on every call (an atomic load,
    which LLVM never hoists out of a loop; no bounds check). An acquire load: what the
    writer stored before its release store or atomic update is seen after it (free on
    x86; on arm64 a helper would otherwise see a new job number before its gate)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        ptr = _slot(context, builder, sig, args)
        return builder.load_atomic(ptr, "acquire", 8)

    return types.int64(arr, types.intp), codegen


@intrinsic
def _store_at(typingctx, arr, i, value):
    """``arr[i] = value`` as a release store: writes before it are seen before it."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        ptr = _slot(context, builder, sig, args)
        builder.store_atomic(args[2], ptr, "release", 8)
        return context.get_dummy_value()

    return types.void(arr, types.intp, types.int64), codegen


@intrinsic
def _pause(typingctx):
    """The spin-loop hint (``pause`` on x86; nothing elsewhere)."""

    def codegen(context, builder, sig, args):
        if _X86:
            fnty = ir.FunctionType(ir.VoidType(), [])
            fn = builder.module.declare_intrinsic("llvm.x86.sse2.pause", fnty=fnty)
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def _futex(typingctx, word, op, value, timeout):
    """``syscall(SYS_futex, &word[0], op, value, &timeout[0])``: with ``_FUTEX_WAIT``, sleep
    while the low 32 bits of ``word[0]`` equal ``value`` (at most ``timeout`` = [s, ns]);
    with ``_FUTEX_WAKE``, wake up to ``value`` sleepers."""
    if not (isinstance(word, types.Array) and word.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [i64], var_arg=True)
        fn = cgutils.get_or_insert_function(builder.module, fnty, "syscall")
        word_ptr = context.make_array(sig.args[0])(context, builder, args[0]).data
        time_ptr = context.make_array(sig.args[3])(context, builder, args[3]).data
        zero = ir.Constant(i64, 0)
        return builder.call(fn, [ir.Constant(i64, _FUTEX_NR or 0),
                                 builder.ptrtoint(word_ptr, i64), args[1], args[2],
                                 builder.ptrtoint(time_ptr, i64), zero, zero])

    return types.int64(word, types.int64, types.int64, timeout), codegen


@intrinsic
def _fetch_add(typingctx, arr, i, value):
    """``arr[i] += value`` as one atomic step; returns the value before."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        ptr = _slot(context, builder, sig, args)
        return builder.atomic_rmw("add", ptr, args[2], "seq_cst")

    return types.int64(arr, types.intp, types.int64), codegen


@intrinsic
def _swap_if(typingctx, arr, i, expected, value):
    """``arr[i] = value`` if it holds ``expected``, as one atomic step; whether it did."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        ptr = _slot(context, builder, sig, args)
        pair = builder.cmpxchg(ptr, args[2], args[3], "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)

    return types.boolean(arr, types.intp, types.int64, types.int64), codegen


# A gated kernel's job is shared through a small int64 array, its gate:
#   gate[GATE_STATE]  GATE_PLAIN for a plain Python job; for a gated one GATE_SHUT until a
#                     thread has entered the kernel (its caller still holds the GIL), then
#                     GATE_OPEN
#   gate[GATE_WORK]   the job's generation (bits 40-62), the tasks claimed from the end
#                     (bits 20-39) and the next unclaimed task from the front (bits 0-19)
#   gate[GATE_TASKS]  the number of tasks (below MAX_TASKS)
#   gate[GATE_OUT]    helpers that took the job and are not back in their wait yet
#   gate[GATE_SIDES]  1: helpers claim from the end (``claim``), 0: from the front
# Claims check the generation, so a helper that reaches a kernel after its job has ended
# can never take tasks of the next one. The caller's kernel waits, without the GIL, until
# the helpers that took the job are back in ``finish_and_wait``: they get the GIL back from
# the kernel while nobody else wants it, and the caller gets it back likewise.
GATE_PLAIN, GATE_SHUT, GATE_OPEN = -1, 0, 1
GATE_STATE, GATE_WORK, GATE_TASKS, GATE_OUT, GATE_SIDES = 0, 1, 2, 3, 4
#: a gated job has fewer tasks than this (``parallel_tasks`` runs larger ones otherwise)
MAX_TASKS = 1 << 20
_TASK_MASK = MAX_TASKS - 1
_GEN_MASK = (1 << 23) - 1
#: helpers claim a gated job's tasks from its end, the caller from its start: each thread
#: then works on the same part of every layer's output (tasks are ordered by where they
#: write), so a layer finds most of its input in its own core's cache, where the previous
#: layer wrote it. Reading 1.5 MB another core wrote took 110 us here, 50 us from the
#: reader's own L2 cache. False: all threads claim from the start (tests, benchmarks)
SPLIT_ENDS = True


def new_gate() -> np.ndarray:
    """A gate (see above) for one pool's jobs; a plain job's until armed."""
    gate = np.zeros(8, np.int64)
    gate[GATE_STATE] = GATE_PLAIN
    return gate


def arm_gate(gate: np.ndarray, generation: int, tasks: int) -> None:
    """Set ``gate`` up for gated job ``generation`` of ``tasks`` tasks (before posting it)."""
    if not 0 <= tasks < MAX_TASKS:
        raise ValueError(f"a gated job has 0 to {MAX_TASKS - 1} tasks, not {tasks}")
    gate[GATE_TASKS] = tasks
    gate[GATE_SIDES] = 1 if SPLIT_ENDS else 0
    gate[GATE_WORK] = (generation & _GEN_MASK) << 40
    gate[GATE_STATE] = GATE_SHUT


@numba.njit(nogil=True, cache=True, inline="always")
def open_gate(gate):
    """Called first thing inside a gated kernel, i.e. once its caller has let go of the GIL:
    from now on a helper can take the GIL without waiting in the interpreter's queue."""
    _store_at(gate, GATE_STATE, GATE_OPEN)


@numba.njit(nogil=True, cache=True)
def claim(gate, generation, chunk, helper):
    """The first of the next (at most) ``chunk`` unclaimed tasks of job ``generation``, or -1
    when none are left or the gate has moved on to another job. A ``helper`` (a pool thread,
    not the caller) takes the last unclaimed chunk where ``GATE_SIDES`` says so: chunks lie
    on multiples of ``chunk`` either way (every claimer of a job passes the same one)."""
    tag = (generation & _GEN_MASK) << 40
    tasks = _load_at(gate, GATE_TASKS)
    from_end = helper and _load_at(gate, GATE_SIDES) != 0
    while True:
        work = _load_at(gate, GATE_WORK)
        if work >> 40 != generation & _GEN_MASK:
            return -1
        first = work & _TASK_MASK
        taken_end = (work >> 20) & _TASK_MASK
        end = tasks - taken_end
        if first >= end:
            return -1
        if from_end:
            t0 = (end - 1) // chunk * chunk
            new = tag | ((tasks - t0) << 20) | first
        else:
            t0 = first
            new = tag | (taken_end << 20) | min(first + chunk, tasks)
        if _swap_if(gate, GATE_WORK, work, new):
            return t0


@numba.njit(nogil=True, cache=True)
def _pending(gate, generation):
    """Whether job ``generation`` still has tasks to claim."""
    work = _load_at(gate, GATE_WORK)
    return work >> 40 == generation & _GEN_MASK and \
        work & _TASK_MASK < _load_at(gate, GATE_TASKS) - ((work >> 20) & _TASK_MASK)


@numba.njit(nogil=True, cache=True)
def take(gate, generation):
    """A helper takes job ``generation`` (True), counted in ``GATE_OUT`` until its next
    ``finish_and_wait``; False, uncounted, when the job has nothing left to claim."""
    _fetch_add(gate, GATE_OUT, 1)
    if _pending(gate, generation):
        return True
    _fetch_add(gate, GATE_OUT, -1)
    return False


@numba.njit(nogil=True, cache=True)
def helpers_back(gate, polls):
    """The caller's end of a gated kernel: poll until no helper is out on the job (True) or
    ``polls`` polls have passed (False)."""
    for _ in range(polls):
        if _load_at(gate, GATE_OUT) == 0:
            return True
        _pause()
    return False


@numba.njit(nogil=True, cache=True)
def post(word, sleepers):
    """Raise the job number ``word[0]`` (a full barrier) and wake the helpers sleeping on it
    (``FUTEX``); returns the new number."""
    number = _fetch_add(word, 0, 1) + 1
    if _load_at(sleepers, 0) > 0:
        _futex(word, _FUTEX_WAKE, 0x7FFFFFFF, sleepers)
    return number


def new_timeout() -> np.ndarray:
    """The futex wait bound ``finish_and_wait`` takes: [seconds, nanoseconds]."""
    return np.array([0, _SLEEP_NS], np.int64)


@numba.njit(nogil=True, cache=True)
def finish_and_wait(done, slot, finished, word, polls, settle, gate, back, sleepers, timeout):
    """Publish ``finished`` (the number of the last job this helper ran) in ``done[slot]``,
    and with ``back`` count the helper back from a gated job it took; then wait for a new
    job in ``word[0]`` and return its number. The wait polls ``polls`` times, then sleeps
    in the kernel (``FUTEX``, counted in ``sleepers[0]``; ``post`` wakes it) or, without
    futexes, returns ``-1 - seen`` (``seen``: the last job done) for the caller to block.
    The poster holds the GIL for a while after posting, and a thread that asks for the GIL
    then is put to sleep and woken late: for a plain job this polls ``settle`` more times
    first; a gated one it takes (``take``) once a thread has entered the kernel (and so let
    go of the GIL), or passes over here, without going back to Python, when nothing is
    left to claim. ``timeout`` ([s, ns], ``new_timeout``) bounds each futex wait; it comes
    from the caller because nothing here may allocate: without the GIL an allocation goes
    through Python's raw allocator, and while ``tracemalloc`` traced, this one crashed the
    process when the main thread stopped tracing at the same moment."""
    _store_at(done, slot, finished)
    if back:
        _fetch_add(gate, GATE_OUT, -1)
    seen = finished
    left = polls
    while True:
        job = _load_at(word, 0)
        if job == seen:
            if left > 0:
                left -= 1
                _pause()
                continue
            if not FUTEX:
                return -1 - seen
            _fetch_add(sleepers, 0, 1)
            if _load_at(word, 0) == seen:
                _futex(word, _FUTEX_WAIT, seen & 0xFFFFFFFF, timeout)
            _fetch_add(sleepers, 0, -1)
            continue
        if _load_at(gate, GATE_STATE) == GATE_PLAIN:
            for _ in range(settle):
                _pause()
            return job
        for _ in range(polls):
            if _load_at(gate, GATE_STATE) != GATE_SHUT:
                break
            _pause()
        if take(gate, job):
            return job
        seen = job
        _store_at(done, slot, seen)
        left = polls


@numba.njit(nogil=True, cache=True)
def wait_all(done, n, value, polls):
    """Poll until ``done[:n]`` all equal ``value`` (True) or ``polls`` polls have passed."""
    for _ in range(polls):
        ready = True
        for k in range(n):
            if _load_at(done, k) != value:
                ready = False
        if ready:
            return True
        _pause()
    return False


def polls_per_us() -> float:
    """How many polls of ``wait_all`` take a microsecond on this CPU (measured)."""
    done = np.zeros(1, np.int64)
    wait_all(done, 1, 1, 10)  # compiled before timing
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        wait_all(done, 1, 1, 20_000)
        best = max(best, 20_000 / ((time.perf_counter() - start) * 1e6))
    return best
