"""Concat that grows its output in place (the CPU Concat kernel's path for large inputs).

DenseNet-style blocks concatenate a growing tensor with one new piece per layer:
``c_k = Concat(c_{k-1}, y_k)``, which copies the whole of ``c_{k-1}`` again at every layer.
When nothing precedes the concat axis (batch 1 on the channel axis), a prefix along that
axis of a larger C-order buffer is itself a contiguous array. So a concat writes into a
buffer with room to spare and returns the filled prefix; a later concat whose first input
is exactly that prefix, with the buffer not yet extended by anyone else, copies only its
other inputs behind it and returns the longer prefix. Earlier prefixes keep their values
(nothing is written below the claimed end), so every reader of them stays correct.

The room to spare is learnt: a concat that finds the buffer too small records the length
it needed on the layer that allocated it, which allocates that much on the next run.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

#: below this many output elements a plain ``np.concatenate`` (shape arithmetic, small maps)
GROW_MIN_ELEMENTS = 16384
#: runs a concat registers its output before it is taken to head no chain
PLAIN_RUNS = 3


class _Grow:
    """A growable buffer's state: how far along the axis it is filled, the prefix view last
    handed out (weakly), and the layer whose capacity hint a too-small buffer raises."""

    __slots__ = ("end", "view", "head")

    def __init__(self, end: int, view: np.ndarray, head):
        self.end, self.view, self.head = end, weakref.ref(view), head


_BUFFERS: dict[int, tuple[weakref.ref, _Grow]] = {}


def _state(x: np.ndarray) -> tuple[np.ndarray, _Grow] | None:
    """The growable buffer ``x`` is a view of, and its state, or None."""
    base = x if x.base is None else x.base
    entry = _BUFFERS.get(id(base))
    if entry is None or entry[0]() is not base:
        return None
    return base, entry[1]


def _prefix(buf: np.ndarray, axis: int, end: int) -> np.ndarray:
    return buf[(slice(None),) * axis + (slice(0, end),)]


def _put(buf: np.ndarray, axis: int, start: int, part: np.ndarray) -> int:
    stop = start + part.shape[axis]
    buf[(slice(None),) * axis + (slice(start, stop),)] = part
    return stop


def concat_grow(layer, parts: list[np.ndarray], axis: int) -> np.ndarray | None:
    """``Concat`` of ``parts`` along ``axis`` as a prefix of a growable buffer, extending
    the first part's buffer in place when it can; None when the inputs do not qualify
    (then the caller concatenates them plainly)."""
    x0 = parts[0]
    if layer.__dict__.get("_cpu_concat_plain", 0) >= PLAIN_RUNS and _state(x0) is None and \
            "_cpu_concat_cap" not in layer.__dict__:
        return None  # known to head no chain, and not extending one
    shape = x0.shape
    if axis >= len(shape) or math.prod(shape[:axis]) != 1 or x0.dtype.kind not in "biufc":
        return None
    rest = shape[axis + 1:]
    total = 0
    for p in parts:
        if p.dtype != x0.dtype or p.shape[:axis] != shape[:axis] or p.shape[axis + 1:] != rest:
            return None
        total += p.shape[axis]
    inner = math.prod(rest)
    if total * inner < GROW_MIN_ELEMENTS:
        return None
    found = _state(x0)
    head = layer
    if found is not None:
        buf, st = found
        # x0 must be the filled prefix itself (the last view handed out: nobody has
        # extended the buffer past it); a reshaped or offset view of it is copied
        if st.view() is x0:
            if total <= buf.shape[axis]:
                end = st.end
                for p in parts[1:]:
                    end = _put(buf, axis, end, p)
                out = _prefix(buf, axis, end)
                st.end, st.view = end, weakref.ref(out)
                return out
            _learn(st.head, axis, rest, x0.dtype, total)  # too small: next time allocate more
            head = st.head
    cap = _hint(head, axis, rest, x0.dtype)
    if cap <= total and found is None:
        # a concat that neither extended a buffer nor was asked for room: after a few runs
        # it is no chain's head, and registering its output would only cost time
        seen = layer.__dict__.get("_cpu_concat_plain", 0)
        if seen >= PLAIN_RUNS:
            return None
        layer.__dict__["_cpu_concat_plain"] = seen + 1
    if cap > total:  # the head of a chain: room for what later concats append
        buf = np.empty(shape[:axis] + (cap,) + rest, x0.dtype)
        end = 0
        for p in parts:
            end = _put(buf, axis, end, p)
        out = _prefix(buf, axis, end)
    else:  # no room known to be needed (yet): a plain concatenate, still registered
        buf = out = np.concatenate(parts, axis=axis)
    key = id(buf)
    _BUFFERS[key] = (weakref.ref(buf, lambda _, k=key: _BUFFERS.pop(k, None)),
                     _Grow(total, out, head))
    return out


def _hint(layer, axis: int, rest: tuple, dtype) -> int:
    known = layer.__dict__.get("_cpu_concat_cap")
    return known[1] if known is not None and known[0] == (axis, rest, dtype) else 0


def _learn(layer, axis: int, rest: tuple, dtype, need: int) -> None:
    if need > _hint(layer, axis, rest, dtype):
        layer.__dict__["_cpu_concat_cap"] = ((axis, rest, dtype), need)
