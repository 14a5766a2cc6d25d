"""The backend contract: allocate, upload, download, free, run a layer.

A backend is one folder under ``engine/backends``. It owns a ``KernelTable`` whose
registrations are the single source of truth for what it runs natively: they
drive placement, CPU fallback and the ``ops`` table alike.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.model import Layer
from engine.ops.base import Meta


class BackendType(enum.Enum):
    """Where a worker runs layers (names as in the reference API)."""

    CPU = "cpu"
    GPU_COMPUTE = "gpu-compute"
    GPU_PIXEL = "gpu-pixel"

    @classmethod
    def parse(cls, text: str | BackendType) -> BackendType:
        if isinstance(text, BackendType):
            return text
        key = text.strip().lower().replace("_", "-")
        for member in cls:
            if member.value == key or member.name.lower().replace("_", "-") == key:
                return member
        names = ", ".join(m.value for m in cls)
        raise ValueError(f"unknown backend {text!r}; choose one of {names}")


#: check(layer, input metas) -> None if supported, else the reason it is not
SupportCheck = Callable[[Layer, list[Meta | None]], str | None]


@dataclass
class Kernel:
    op_type: str
    since_version: int
    fn: Callable[..., Any]
    check: SupportCheck | None = None
    domain: str = ""


class KernelTable:
    """Versioned kernels of one backend, registered with the ``kernel`` decorator."""

    def __init__(self, backend_name: str):
        self.backend_name = backend_name
        self._kernels: dict[tuple[str, str], list[Kernel]] = {}

    def kernel(self, op_type: str, since: int = 1, domain: str = "",
               check: SupportCheck | None = None):
        """Decorator registering ``fn`` as the kernel of ``op_type`` from opset ``since`` on."""

        def register(fn):
            versions = self._kernels.setdefault((domain, op_type), [])
            if any(k.since_version == since for k in versions):
                raise RuntimeError(
                    f"{self.backend_name} kernel {op_type} v{since} registered twice")
            versions.append(Kernel(op_type, since, fn, check, domain))
            versions.sort(key=lambda k: k.since_version)
            return fn

        return register

    def lookup(self, layer: Layer) -> Kernel | None:
        domain = "" if layer.domain in ("", "ai.onnx") else layer.domain
        versions = self._kernels.get((domain, layer.op_type))
        if not versions:
            return None
        opset = layer.opset or 10**9
        chosen = None
        for k in versions:
            if k.since_version <= opset:
                chosen = k
        return chosen

    def unsupported_reason(self, layer: Layer, metas: list[Meta | None]) -> str | None:
        """None if a kernel runs ``layer`` with these inputs, else why not."""
        k = self.lookup(layer)
        if k is None:
            versions = self._kernels.get((layer.domain, layer.op_type))
            if versions:
                return f"{layer.op_type} opset {layer.opset} has no {self.backend_name} kernel"
            return f"{self.backend_name} has no {layer.op_type} kernel"
        if k.check is not None:
            try:
                return k.check(layer, metas)
            except Exception:  # a check must never take the planner down (nor its text)
                shapes = ", ".join("none" if m is None else
                                   f"{np.dtype(m.dtype).name}{list(m.shape)}" for m in metas)
                return (f"the {self.backend_name} {layer.op_type} kernel does not handle "
                        f"inputs {shapes}")
        return None

    def op_types(self) -> set[str]:
        return {op for (_, op) in self._kernels}


class Backend(ABC):
    """One device's memory and kernels. All calls arrive on the engine thread (or on a
    thread running a job it took over, for backends whose ``host_memory`` is True)."""

    type: BackendType
    kernels: KernelTable
    #: handles are host arrays and no call is tied to a thread: a thread blocked on a run's
    #: result may run the job itself (``executor.help_until``)
    host_memory: bool = False

    @property
    def closed(self) -> bool:
        """True once ``close`` released the backend's resources (handles are invalid)."""
        return bool(getattr(self, "_closed", False))

    def supports(self, layer: Layer, metas: list[Meta | None]) -> str | None:
        """None if this backend runs ``layer`` natively, else the reason for CPU fallback."""
        return self.kernels.unsupported_reason(layer, metas)

    @abstractmethod
    def upload(self, array: np.ndarray) -> Any:
        """Copy a CPU array to a new device handle."""

    @abstractmethod
    def download(self, handle: Any, meta: Meta) -> np.ndarray:
        """Blocking copy of a device handle to a new CPU array."""

    def request_download(self, handle: Any, meta: Meta) -> Future:
        """Start a readback; the future resolves to the CPU array. Default: blocking download."""
        fut: Future = Future()
        try:
            data = self.download(handle, meta)
        except Exception as exc:  # delivered to whoever waits on the readback
            fut.set_exception(exc)
        else:
            fut.set_result(data)
        return fut

    @abstractmethod
    def free(self, handle: Any) -> None:
        """Return a handle's memory to the backend (may be reused by later layers)."""

    @abstractmethod
    def run_layer(self, layer: Layer, inputs: list[Any], in_metas: list[Meta | None],
                  out_metas: list[Meta]) -> list[Any]:
        """Record/run ``layer`` on device handles; returns one handle per output."""

    #: peak device bytes of the plan (backends that allocate device memory set it)
    peak_memory_bytes: int | None = None

    def prepare(self, model, placement: dict, progress=None, input_metas=None) -> None:
        """Compile what a plan needs before its first run (called once per input signature
        with that signature's concrete ``input_metas``; None: the declared shapes)."""

    def poll(self) -> None:
        """Drive pending readbacks forward, for backends whose device needs polling."""

    def begin_run(self) -> None:
        """Called before the first layer of a schedule."""

    def run_context(self, placement: dict, keep: set[str], metas: dict | None = None) -> None:
        """Before ``begin_run`` of a layer-by-layer run: where each layer of the plan runs,
        which tensors the run captures and the metadata the plan derived for its tensors (a
        backend that fuses layers while recording must keep captured tensors and layers
        placed elsewhere out of its fusions, and may fuse only what the shapes allow)."""

    def flush(self) -> None:
        """Submit recorded work (before a CPU fallback reads back, and at the end of a run)."""

    def collect_timings(self) -> dict[str, float] | None:
        """Per-layer device milliseconds of the last flushed run, if the device measures them."""
        return None

    def replay_run(self, worker, plan, feeds: dict, futures: dict, keep: set):
        """An iterator that runs the whole of ``plan`` from what an earlier run of the same
        input signature recorded (yielding each layer, as the worker's run loop does), or
        None when this run must take the layer-by-layer loop."""
        return None

    def end_run(self, outputs: dict) -> None:
        """A layer-by-layer run handed its outputs over (``outputs``: {name: run slot});
        a backend that recorded the run for replay completes the recording here."""

    def close(self) -> None:
        """Release every resource."""
