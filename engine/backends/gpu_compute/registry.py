"""The GPU_COMPUTE kernel table and the checks every kernel shares.

A kernel is ``fn(ctx, layer, inputs, in_metas, out_metas) -> list[GpuTensor]`` where ``ctx`` is
the backend (it allocates outputs and records dispatches). Registering needs no adapter, so the
``ops`` table works on machines without a GPU. Every registration gets the common check: all
tensors must have a dtype the GPU holds and fit one storage-buffer binding.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from engine.backends.base import KernelTable
from engine.backends.gpu_compute.memory import storage_bytes, words_per_element
from engine.model import Layer
from engine.ops.base import Meta

KERNELS = KernelTable("GPU_COMPUTE")



@dataclass(frozen=True)
class Limits:
    """What one GPU_COMPUTE backend's device allows: each backend has its own (two workers on
    different adapters, or one planning for a smaller GPU, never share them)."""

    #: bytes of one storage-buffer binding
    max_binding: int = 128 << 20
    #: the most dims the kernels' shape uniforms hold
    max_rank: int = 8


#: used where no backend is planning (the ``ops`` table, tests of the checks)
DEFAULT_LIMITS = Limits()
_CURRENT: ContextVar[Limits] = ContextVar("gpu_compute_limits", default=DEFAULT_LIMITS)


def current_limits() -> Limits:
    """The limits of the backend whose layer is being checked or recorded now.

    Checks have the signature ``check(layer, metas)`` shared by every backend's kernel
    table, so a backend makes its limits current around its own calls (``limits_in_force``)
    rather than writing a module-wide value that another worker's backend would see."""
    return _CURRENT.get()


@contextmanager
def limits_in_force(limits: Limits):
    """Make ``limits`` current in this thread (and task) for the duration of the block."""
    token = _CURRENT.set(limits)
    try:
        yield limits
    finally:
        _CURRENT.reset(token)

F32 = (np.dtype(np.float32),)
NUMERIC = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.uint32))
WORD = NUMERIC + (np.dtype(bool),)


def concrete(meta: Meta | None) -> bool:
    """True when ``meta`` has a fully known shape (at schedule time, always)."""
    return meta is not None and all(isinstance(d, int) for d in meta.shape)


def common_reason(layer: Layer, metas: list[Meta | None], dtypes, inputs,
                  big_ok=()) -> str | None:
    """Dtype, rank and binding-size checks of the inputs named by ``inputs`` (None: all);
    inputs in ``big_ok`` may exceed one binding (their kernel splits them)."""
    idx = range(len(metas)) if inputs is None else [i for i in inputs if i < len(metas)]
    limits = current_limits()
    for i in idx:
        m = metas[i]
        if m is None:
            continue
        if m.dtype == np.dtype(object) or words_per_element(m.dtype) is None:
            return f"input {i} has dtype {m.dtype}, which the GPU kernels do not handle"
        if dtypes is not None and np.dtype(m.dtype) not in dtypes:
            names = "/".join(np.dtype(d).name for d in dtypes)
            return f"{layer.op_type} runs on {names} on the GPU, input {i} is {m.dtype}"
        if len(m.shape) > limits.max_rank:
            return f"rank {len(m.shape)} exceeds the GPU kernels' {limits.max_rank}"
        if i not in big_ok and concrete(m) and storage_bytes(m) > limits.max_binding:
            return (f"input {i} ({storage_bytes(m) >> 20} MiB) exceeds the adapter's "
                    f"storage-buffer binding limit ({limits.max_binding >> 20} MiB)")
    return None


def gpu_kernel(op_type: str, since: int = 1, *, dtypes=F32, inputs=(0,), check=None,
               big_ok=()):
    """Register a kernel. ``dtypes``/``inputs``: allowed dtypes of those inputs (None: any
    dtype the GPU holds, all inputs); ``check(layer, metas)`` adds op-specific reasons;
    ``big_ok``: inputs the kernel splits when they exceed one storage binding."""

    def full_check(layer, metas):
        reason = common_reason(layer, metas, dtypes, inputs, big_ok)
        if reason is None and inputs is not None:
            reason = common_reason(layer, metas, None, None, big_ok)
        if reason is None and check is not None:
            reason = check(layer, metas)
        return reason

    return KERNELS.kernel(op_type, since, check=full_check)


def out_size_reason(nbytes: int) -> str | None:
    """Reason to decline when an output would not fit one binding."""
    max_binding = current_limits().max_binding
    if nbytes > max_binding:
        return (f"output ({nbytes >> 20} MiB) exceeds the adapter's storage-buffer binding "
                f"limit ({max_binding >> 20} MiB)")
    return None
