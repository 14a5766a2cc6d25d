"""What both GPU backends' replays share: how often a replayed run reads its per-layer
timestamps, and the profile a replayed run publishes."""

from __future__ import annotations

import time

from engine.backends.base import BackendType
from engine.profile import LayerTiming

#: replayed runs between two that read per-layer timestamps
SAMPLE_EVERY = 10
SAMPLED = "gpu-timestamp (sampled from an earlier replayed run)"


#: a GPU layer of a replay with sampled timestamps that has none of its own
NO_STAMPS = ("gpu (no timestamps of its own in the replayed run: a view, a buffer copy, or "
             "absorbed into another layer's dispatch)")
#: a CPU layer of a replay computed on the run's inputs (an If condition)
PREFIX = "cpu-clock (replayed: computed on this run's inputs)"
#: a CPU layer of a replay's prefix whose inputs repeat the last run's: its value kept
REUSED = "not run (replayed: its inputs are the last run's, its value kept)"
#: a CPU layer of a replay whose value the input signature fixes: not run
FIXED = "not run (replayed: value fixed by the input signature)"


def publish_replayed_profile(worker, layers: list, last_times: dict | None,
                             t_run: float, host_times: dict | None = None) -> None:
    """The profile of a replayed run (``layers``: (layer, backend type) in order): a GPU
    layer gets its last sampled GPU time, or 0 when the samples have none for it; a CPU
    layer its time in this run's host prefix (``host_times``, by name: the If conditions
    computed from the inputs; None: kept from the last run, ``guards.PrefixMemo``) or 0
    (not run: fixed by the signature). Only without any
    sampled times does a GPU layer get its share of the run's host time. (Every layer
    without time of its own once got that share: in a detector's replay eleven shape
    layers showed 3 ms each.)"""
    t_end = time.perf_counter()
    host_ms = (t_end - t_run) * 1e3 / max(1, len(layers))
    gpu = last_times or {}
    host = host_times or {}

    def timing(layer, kind) -> LayerTiming:
        name = layer.name
        if name in gpu:
            return LayerTiming(name, layer.op_type, kind.value, gpu[name], SAMPLED)
        if kind is BackendType.CPU:
            ms = host.get(name, 0.0)
            source = FIXED if name not in host else REUSED if ms is None else PREFIX
            return LayerTiming(name, layer.op_type, kind.value, ms or 0.0, source, True, 0.0)
        if gpu:
            return LayerTiming(name, layer.op_type, kind.value, 0.0, NO_STAMPS)
        return LayerTiming(name, layer.op_type, kind.value, host_ms,
                           "cpu-clock (replayed: host share of the run)", False, 0.0)

    def timings() -> list[LayerTiming]:
        # built when the profile is read (runs back to back do not pay for records nobody
        # reads: ~1.6 us a layer, 0.14 ms a run of an 85-layer model)
        return [timing(layer, kind) for layer, kind in layers]

    worker._finish_profile(timings, (t_end - t_run) * 1e3)


class EarlyRead:
    """The read back state of one replayed run's output: where the run copied it to (a
    staging buffer, when the previous run's value of that output was read), and the replay
    (its ``read_back`` set of output names) to tell whether this one was read: outputs are
    copied early for as long as each run's value is read.

    Reading a replayed output then maps a buffer that the run's own submit filled: a
    command encoder, a copy and a second submit through wgpu-py's API a read cost the
    engine thread more than recording the whole run of a small model."""

    __slots__ = ("replay", "name", "staging", "nbytes")

    def __init__(self, replay, name: str):
        self.replay, self.name = replay, name
        self.staging, self.nbytes = None, 0

    def taken(self, gpu, nbytes: int):
        """The output is being read: its staging buffer when it holds the ``nbytes`` asked
        for (None: copy it now)."""
        self.replay.read_back.add(self.name)
        staging, self.staging = self.staging, None
        if staging is not None and self.nbytes != nbytes:
            gpu.give_back_staging(staging)
            return None
        return staging

    def dropped(self, gpu) -> None:
        """The output was released unread: stop copying it early."""
        self.replay.read_back.discard(self.name)
        if self.staging is not None:
            gpu.give_back_staging(self.staging)
            self.staging = None
