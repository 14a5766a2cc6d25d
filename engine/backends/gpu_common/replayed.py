"""What both GPU backends' replays share: how often a replayed run reads its per-layer
timestamps, and the profile a replayed run publishes."""

from __future__ import annotations

import time

from engine.backends.base import BackendType
from engine.profile import LayerTiming

#: replayed runs between two that read per-layer timestamps
SAMPLE_EVERY = 10
SAMPLED = "gpu-timestamp (sampled from an earlier replayed run)"


def publish_replayed_profile(worker, layers: list, last_times: dict | None,
                             t_run: float) -> None:
    """The profile of a replayed run: each layer's last sampled GPU time where there is one,
    else its share of the run's host time (``layers``: (layer, backend type) in order)."""
    t_end = time.perf_counter()
    host_ms = (t_end - t_run) * 1e3 / max(1, len(layers))
    gpu = last_times or {}

    def timings() -> list[LayerTiming]:
        # built when the profile is read (runs back to back do not pay for records nobody
        # reads: ~1.6 us a layer, 0.14 ms a run of an 85-layer model)
        return [LayerTiming(layer.name, layer.op_type, kind.value, gpu[layer.name], SAMPLED)
                if layer.name in gpu else
                LayerTiming(layer.name, layer.op_type, kind.value, host_ms,
                            "cpu-clock (replayed: host share of the run)",
                            kind is BackendType.CPU, 0.0)
                for layer, kind in layers]

    worker._finish_profile(timings, (t_end - t_run) * 1e3)
