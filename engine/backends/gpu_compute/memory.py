"""Device memory: tensors as storage buffers, a size-class pool, and the plan's peak estimate.

The worker frees a tensor right after its last use in the plan; ``BufferPool.release`` puts
the buffer back in its size class so a later layer of the same (or the next) run reuses it.
Reuse inside one command encoder is safe because the passes of an encoder execute in
recording order. Buffers are reference counted so that views (Reshape, Flatten, ...) share
their source's buffer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.ops.base import Meta

#: dtypes stored as one 32-bit word per element (bool as 0/1 in a u32)
WORD_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32",
               np.dtype(np.uint32): "u32", np.dtype(bool): "u32"}
#: dtypes stored as two 32-bit words per element (low word first), moved bit-exactly; only
#: Cast to/from int64 and int64 comparisons compute on them (shaders/compute/int64.wgsl)
WIDE_DTYPES = {np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.float64)}


def words_per_element(dtype: np.dtype) -> int | None:
    """1 or 2 for dtypes the GPU can hold, None for the rest (they stay on the CPU)."""
    dtype = np.dtype(dtype)
    if dtype in WORD_DTYPES:
        return 1
    if dtype in WIDE_DTYPES:
        return 2
    return None


def storage_bytes(meta: Meta) -> int:
    """Bytes a tensor of ``meta`` takes on the device (at least 4: no empty bindings)."""
    words = words_per_element(meta.dtype) or 1
    return max(4, meta.size * words * 4)


def size_class(nbytes: int) -> int:
    """Round up so that similar sizes share buffers: 256 B steps, then 1/8-octave steps."""
    if nbytes <= 4096:
        return max(256, (nbytes + 255) // 256 * 256)
    step = 1 << max(8, nbytes.bit_length() - 4)
    return (nbytes + step - 1) // step * step


class Allocation:
    """One device buffer with a reference count (views share it)."""

    __slots__ = ("buffer", "size", "refs")

    def __init__(self, buffer, size: int):
        self.buffer, self.size, self.refs = buffer, size, 1


@dataclass
class GpuTensor:
    """A tensor on the device: a (shared) allocation plus the meta it holds."""

    alloc: Allocation
    shape: tuple[int, ...]
    dtype: np.dtype
    #: a replayed run's output: its read back state (``replay.EarlyRead``), else None
    early: Any = field(default=None, compare=False, repr=False)

    @property
    def buffer(self):
        return self.alloc.buffer

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.size * (words_per_element(self.dtype) or 1) * 4


class BufferPool:
    """Storage buffers grouped by size class; counts live and peak bytes."""

    def __init__(self, create_buffer, max_binding: int):
        self._create = create_buffer
        self.max_binding = max_binding
        self._free: dict[int, list] = {}
        self._all: list = []
        self.live_bytes = 0
        self.peak_bytes = 0
        self.device_bytes = 0

    def acquire(self, nbytes: int) -> Allocation:
        """A buffer of at least ``nbytes``, reused from the pool when one is free."""
        size = size_class(nbytes)
        if size > self.max_binding:
            size = (nbytes + 3) // 4 * 4  # rounding must not push it past one binding
        free = self._free.get(size)
        buffer = free.pop() if free else None
        if buffer is None:
            buffer = self._create(size)
            self._all.append(buffer)
            self.device_bytes += size
        self.live_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        return Allocation(buffer, size)

    def release(self, alloc: Allocation) -> None:
        """Drop one reference; the last one returns the buffer to its size class."""
        alloc.refs -= 1
        if alloc.refs == 0:
            self.live_bytes -= alloc.size
            self._free.setdefault(alloc.size, []).append(alloc.buffer)

    def destroy_all(self) -> None:
        """Destroy every buffer this pool ever created (when the backend closes)."""
        for b in self._all:
            b.destroy()
        self._all.clear()
        self._free.clear()
        self.device_bytes = self.live_bytes = 0
