"""Helpers of the worker: the ``schedule_iterable`` iterator and the run profiles."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future

from engine import executor
from engine.backends.cpu.registry import KERNELS
from engine.backends.cpu.step_fusion import fuse_steps
from engine.backends.cpu.step_fusion_blocked import blocked_regions
from engine.errors import EngineError
from engine.model import Layer, Model
from engine.profile import Profile


def apply_device_times(profile: Profile, device: dict[str, float] | None) -> None:
    """Replace CPU-clock times of GPU layers by the device's timestamps where it has them."""
    for t in profile.layers:
        if device and t.name in device and not t.fallback:
            t.ms, t.source = device[t.name], "gpu-timestamp"


class RunProfiles:
    """The profile of a worker's last run, published as runs end.

    A CPU run hands over a function that makes its per-layer records, built only when read
    (a small model's runs back to back do not pay for records nobody looks at). A GPU run's
    device times resolve once the GPU has finished: its profile is published then."""

    def __init__(self, backend: str):
        self.backend = backend
        self._last: Profile | None = None
        self._pending: Future | None = None
        #: (build the per-layer timings, total ms) of a CPU run, built when first read
        self._lazy: tuple | None = None

    def publish(self, timings, total_ms: float, device) -> None:
        """``timings``: the list of LayerTiming or a function making it; ``device``: the
        backend's device times (a dict, None, or a Future of a dict)."""
        if callable(timings):
            if device is None:
                self._lazy, self._pending = (timings, total_ms), None
                return
            timings = timings()
        self._lazy = None
        profile = Profile(self.backend, timings, total_ms)
        if not isinstance(device, Future):
            apply_device_times(profile, device)
            self._last = profile
            return
        # the total becomes the latency until the device was done
        t_start = time.perf_counter() - total_ms * 1e-3
        published: Future = Future()

        def on_device_times(fut: Future) -> None:
            profile.total_ms = max(profile.total_ms, (time.perf_counter() - t_start) * 1e3)
            if fut.exception() is None:
                apply_device_times(profile, fut.result())
            self._last = profile
            published.set_result(None)

        self._pending = published
        device.add_done_callback(on_device_times)

    def latest(self) -> Profile | None:
        """The last completed run's profile (waits for device times still in flight)."""
        lazy = self._lazy
        if lazy is not None:
            profile = Profile(self.backend, lazy[0](), lazy[1])
            if self._lazy is lazy:  # (not replaced by a newer run meanwhile)
                self._last, self._lazy = profile, None
            return profile
        pending = self._pending
        if pending is not None:
            try:
                pending.result(timeout=60)
            except Exception:  # noqa: BLE001 - the profile keeps its CPU-clock times
                pass
        return self._last


class Steps:
    """The iterator of ``schedule_iterable``: one layer per ``next``, on the engine thread."""

    def __init__(self, steps: Iterator[Layer], finish: Callable[[Future], None]):
        self._steps, self._finish, self._done = steps, finish, False

    def __iter__(self) -> Steps:
        return self

    def __next__(self) -> Layer:
        if self._done:
            raise StopIteration
        try:
            layer = executor.call(next, self._steps, None)
        except BaseException as exc:
            self._end(exc)
            raise
        if layer is None:
            self._end(None)
            raise StopIteration
        return layer

    def done(self) -> bool:
        """Whether the run has ended (a later ``schedule`` may then write into the inputs
        this run read)."""
        return self._done

    def close(self) -> None:
        """Stop scheduling; outputs not computed yet fail with an EngineError."""
        if not self._done:
            executor.call(self._steps.close)
            self._end(EngineError("schedule_iterable was abandoned before the end"))

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown; nothing is waiting then
            pass

    def _end(self, exc: BaseException | None) -> None:
        self._done = True
        done: Future = Future()
        if exc is None:
            done.set_result(None)
        else:
            done.set_exception(exc)
        self._finish(done)


def build_cpu_steps(model: Model, last_use: dict[str, int], constants: dict
                    ) -> dict[bool, list[tuple]]:
    """The CPU run loop's steps, unfused (False) and with the CPU's fusions (True). Per step:
    (layer, kernel fn or None, input names, output name when the layer has exactly one output
    else None, (index, name) of its named outputs, names whose last use it is, layers it
    absorbed, the steps it replaces or None)."""
    dead: list[list[str]] = [[] for _ in model.layers]
    for n, i in last_use.items():
        if i < len(dead) and n not in constants:
            dead[i].append(n)
    steps = []
    for layer, gone in zip(model.layers, dead):
        kernel = KERNELS.lookup(layer)
        single = layer.outputs[0] if len(layer.outputs) == 1 and layer.outputs[0] else None
        steps.append((layer, None if kernel is None else kernel.fn, tuple(layer.all_inputs()),
                      single, [(i, n) for i, n in enumerate(layer.outputs) if n], tuple(gone)))
    fused = blocked_regions(fuse_steps(steps, constants), constants,
                            {o.name for o in model.outputs})
    return {False: [st + ((), None) for st in steps], True: fused}
