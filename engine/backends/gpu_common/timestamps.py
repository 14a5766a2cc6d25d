"""Per-layer GPU time from timestamp queries written at the start and end of each pass
(GPU_COMPUTE's compute passes, GPU_PIXEL's render passes).

Stamps are resolved into a buffer at every flush and read back asynchronously, so timing
never makes the engine wait for the GPU: ``collect`` hands the worker a future that resolves
once the run's last submission has finished.
"""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np

from engine.backends.gpu_common import gpu_errors

#: WebGPU's largest query set
SET_SIZE = 4096


class Timestamps:
    """Query sets of one backend and the stamps of the current run."""

    def __init__(self, gpu):
        self.gpu = gpu
        self._sets: list = []
        self._entries: list[tuple[str | None, int, int]] = []  # (layer, set index, first query)
        self._next = 0  # next free query over all sets, since the last resolve
        self._first = 0
        self._pending: list[Future] = []

    def begin_run(self) -> None:
        self._pending = []

    def writes(self, layer: str | None) -> dict:
        """``timestamp_writes`` for the next pass (two queries: begin, end)."""
        set_index, query = divmod(self._next, SET_SIZE)
        while set_index >= len(self._sets):
            with gpu_errors("creating a timestamp query set"):
                self._sets.append(self.gpu.device.create_query_set(type="timestamp",
                                                                   count=SET_SIZE))
        self._next += 2
        self._entries.append((layer, set_index, query))
        return {"query_set": self._sets[set_index], "beginning_of_pass_write_index": query,
                "end_of_pass_write_index": query + 1}

    def resolve(self, encoder) -> list | None:
        """Record the resolves of this submission's stamps; returns what ``read`` needs."""
        if not self._entries:
            return None
        wgpu = self.gpu.wgpu
        used = {}
        for _, s, q in self._entries:
            used[s] = max(used.get(s, 0), q + 2)
        buffers = {}
        for s, count in used.items():
            buf = self.gpu.device.create_buffer(
                size=count * 8, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
            encoder.resolve_query_set(self._sets[s], 0, count, buf, 0)
            buffers[s] = (buf, count)
        entries, self._entries, self._next = self._entries, [], 0
        return [entries, buffers]

    def read(self, resolved: list) -> None:
        """Start the asynchronous readback of resolved stamps (after the submit)."""
        entries, buffers = resolved
        reads = {s: self.gpu.read_buffer_async(buf, count * 8, np.dtype(np.uint64), (count,))
                 for s, (buf, count) in buffers.items()}
        out: Future = Future()
        remaining = [len(reads)]

        def one_done(_):
            remaining[0] -= 1
            if remaining[0]:
                return
            try:
                stamps = {s: f.result() for s, f in reads.items()}
                times: dict[str, float] = {}
                for layer, s, q in entries:
                    if layer is None:
                        continue
                    # WebGPU timestamps are nanoseconds (checked on lavapipe against wall time)
                    ticks = int(stamps[s][q + 1]) - int(stamps[s][q])
                    times[layer] = times.get(layer, 0.0) + max(ticks, 0) * 1e-6
                out.set_result(times)
            except Exception as exc:  # delivered to whoever waits on the profile
                out.set_exception(exc)

        for f in reads.values():
            f.add_done_callback(one_done)
        self._pending.append(out)

    def add(self, times: Future) -> None:
        """Merge a future of {layer: GPU ms} (stamps read elsewhere) into this run's."""
        self._pending.append(times)

    def collect(self) -> Future | None:
        """One future merging every submission's stamps of the current run."""
        parts, self._pending = self._pending, []
        if not parts:
            return None
        merged: Future = Future()
        remaining = [len(parts)]

        def one_done(_):
            remaining[0] -= 1
            if remaining[0]:
                return
            try:
                times: dict[str, float] = {}
                for p in parts:
                    for k, v in p.result().items():
                        times[k] = times.get(k, 0.0) + v
                merged.set_result(times)
            except Exception as exc:
                merged.set_exception(exc)

        for p in parts:
            p.add_done_callback(one_done)
        return merged
