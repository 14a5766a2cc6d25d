"""Output previews for the details panel: a layer's output computed with the CPU kernels
(on the engine thread) from the current inputs, cached per inputs, on a thread of its own so
a preview never waits behind a continuous run."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from engine import EngineError, executor

MAX_CACHE_BYTES = 512 * 2**20


def _describe(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, EngineError) else f"{type(exc).__name__}: {exc}"


class PreviewService:
    """Serves the newest preview request; ``emit(tensor, array | reason)`` delivers it."""

    def __init__(self, emit: Callable[[str, object], None], is_current: Callable[[int], bool]):
        self._emit = emit
        self._is_current = is_current
        self._lock = threading.Lock()
        self._request: tuple | None = None
        self._wake = threading.Event()
        self._closing = False
        self._cache: dict[str, np.ndarray] = {}
        self._key: object = None
        self._thread = threading.Thread(target=self._preview_loop, name="workbench-preview",
                                        daemon=True)
        self._thread.start()

    def request(self, layer_index: int, tensor: str, feeds, feeds_key, gen: int, model) -> None:
        with self._lock:
            self._request = (layer_index, tensor, feeds, feeds_key, gen, model)
        self._wake.set()

    def reset(self) -> None:
        """Forget cached tensors (a new model was loaded)."""
        with self._lock:
            self._cache, self._key = {}, None

    def close(self) -> None:
        self._closing = True
        self._wake.set()

    def _preview_loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            with self._lock:
                request, self._request = self._request, None
            if request is None:
                continue
            try:
                self._do_preview(*request)
            except Exception as exc:  # a preview must never kill its thread
                self._emit(request[1], f"preview failed: {_describe(exc)}")

    def _do_preview(self, layer_index: int, tensor: str, feeds, feeds_key, gen: int,
                    model) -> None:
        """Compute one layer's output on the CPU interpreter from the current inputs."""
        if not self._is_current(gen) or model is None:
            return
        from engine.backends.cpu.interpreter import run_layer

        if (gen, feeds_key) != self._key:
            self._cache, self._key = {}, (gen, feeds_key)
        env = self._cache
        if tensor not in env:
            if not env:
                env.update(model.constants)
                env.update(feeds)
            layers = [layer for layer in model.layers[:layer_index + 1]
                      if not all(o in env for o in layer.outputs if o)]

            def compute() -> None:
                for layer in layers:
                    args = [env.get(n) if n else None for n in layer.all_inputs()]
                    for name, value in zip(layer.outputs, run_layer(layer, args)):
                        if name:
                            env[name] = value

            try:
                executor.call(compute)
            except Exception as exc:
                self._emit(tensor, f"preview unavailable: {_describe(exc)}")
                return
            nbytes = sum(getattr(v, "nbytes", 0) for v in env.values())
            if nbytes > 512 * 2**20:  # keep memory bounded on big models
                keep = env.get(tensor)
                self._cache, self._key = {}, None
                env = {tensor: keep}
        if self._is_current(gen):
            self._emit(tensor, env.get(tensor))
