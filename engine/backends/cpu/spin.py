"""Bounded busy-waits without the GIL, for the CPU backend's thread pool.

On this kind of virtual machine a thread that blocks in the kernel takes 15-60 us to run
again once woken, about what a split layer saves. So the pool's threads poll a shared
word for a short, bounded time before they block, and the caller polls for their results.
The polls run in Numba with the GIL released; each reads the word with an atomic load (so
LLVM cannot hoist it out of the loop) and then executes a ``pause``, the CPU's hint that
this is a spin loop (it frees the core's resources for a sibling and saves power).
"""

from __future__ import annotations

import platform
import time

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


@intrinsic
def _load_at(typingctx, arr, i):
    """``arr[i]`` of a 1-D int64 array, read from memory on every call (an atomic load,
    which LLVM never hoists out of a loop; no bounds check)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        ptr = builder.gep(data, [args[1]])
        return builder.load_atomic(ptr, "monotonic", 8)

    return types.int64(arr, types.intp), codegen


@intrinsic
def _store_at(typingctx, arr, i, value):
    """``arr[i] = value`` as a release store: writes before it are seen before it."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        ptr = builder.gep(data, [args[1]])
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


@numba.njit(nogil=True, cache=True)
def finish_and_wait(done, slot, finished, word, seen, polls, settle):
    """Publish ``finished`` in ``done[slot]``, then poll ``word[0]`` until it differs from
    ``seen`` (True) or ``polls`` polls have passed (False). On a change it polls ``settle``
    more times first: the poster still holds the GIL for a few microseconds, and a thread
    that asks for the GIL then is put to sleep and woken late."""
    _store_at(done, slot, finished)
    for _ in range(polls):
        if _load_at(word, 0) != seen:
            for _ in range(settle):
                _pause()
            return True
        _pause()
    return False


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
