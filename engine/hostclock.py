"""Host cost of GPU runs: time the engine spends recording and submitting, GPU excluded.

A run's host time is the caller's ``schedule`` call plus the engine thread's time from the
backend's ``begin_run`` to the end of the run loop (its final submit, when the worker asks
the backend for the run's timestamps), less the time spent waiting for the GPU inside the
run (readbacks for CPU fallback layers). ``bench --host`` divides it by the model's layers.

Times are the threads' CPU time (``time.thread_time``), not wall time: on a machine shared
with other work (or with a software GPU on the same cores) wall time mostly measures waiting
for a core, while the CPU time is the host cost itself.
"""

from __future__ import annotations

import time

import numpy as np


class HostClock:
    """Wraps one worker's backend methods (instance attributes) to time its runs."""

    def __init__(self, worker):
        self.worker = worker
        backend = worker._backend
        self.caller_s = 0.0
        self._begin = self._end = None
        self._waits = 0.0
        self.host_ms: list[float] = []
        self.gpu_ms: list[float] = []
        clock = time.thread_time
        begin, collect, download = backend.begin_run, backend.collect_timings, backend.download

        def begin_run():
            self._begin, self._end, self._waits = clock(), None, 0.0
            return begin()

        def collect_timings():
            if self._end is None:
                self._end = clock()
            return collect()

        def timed_download(handle, meta):
            t0 = clock()
            try:
                return download(handle, meta)
            finally:
                self._waits += clock() - t0

        backend.begin_run, backend.collect_timings = begin_run, collect_timings
        backend.download = timed_download

    def start_run(self) -> None:
        self.caller_s = 0.0

    def end_run(self) -> None:
        """After the run's outputs are read: book its host time and summed GPU time."""
        profile = self.worker.last_profile
        if self._begin is None or self._end is None:
            return
        engine_s = self._end - self._begin - self._waits
        self.host_ms.append((self.caller_s + engine_s) * 1e3)
        if profile is not None:
            gpu = [t.ms for t in profile.layers if t.source.startswith("gpu-timestamp")]
            if gpu:
                self.gpu_ms.append(float(sum(gpu)))

    def summary(self, layers: int) -> dict:
        """``host_us_per_layer`` and ``gpu_ms`` medians (absent when nothing was timed)."""
        out = {}
        if self.host_ms:
            out["host_us_per_layer"] = float(np.median(self.host_ms)) * 1e3 / max(1, layers)
            out["host_ms"] = float(np.median(self.host_ms))
        if self.gpu_ms:
            out["gpu_ms"] = float(np.median(self.gpu_ms))
        return out
