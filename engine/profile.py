"""Per-layer timings of a completed run, with Chrome-trace and CSV export."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field


@dataclass
class LayerTiming:
    """Time one layer took. ``source`` says how it was measured: 'cpu-clock' or 'gpu-timestamp'."""

    name: str
    op_type: str
    backend: str
    ms: float
    source: str = "cpu-clock"
    fallback: bool = False
    #: start offset from the beginning of the run, in ms (for traces)
    start_ms: float = 0.0


@dataclass
class Profile:
    """Timings of one run: per layer, plus the whole run's wall-clock latency."""

    backend: str
    layers: list[LayerTiming] = field(default_factory=list)
    total_ms: float = 0.0

    def by_op_type(self) -> dict[str, float]:
        """Total milliseconds per op type, largest first."""
        out: dict[str, float] = {}
        for t in self.layers:
            out[t.op_type] = out.get(t.op_type, 0.0) + t.ms
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def layer_ms(self) -> float:
        return sum(t.ms for t in self.layers)

    def to_chrome_trace(self) -> str:
        """Chrome trace JSON (opens in Perfetto / chrome://tracing)."""
        events = []
        tids = {}
        for t in self.layers:
            tid = tids.setdefault(t.backend, len(tids) + 1)
            events.append({"name": t.name, "cat": t.op_type, "ph": "X", "pid": 1, "tid": tid,
                           "ts": round(t.start_ms * 1000.0, 3), "dur": round(t.ms * 1000.0, 3),
                           "args": {"op_type": t.op_type, "backend": t.backend,
                                    "source": t.source, "fallback": t.fallback}})
        for backend, tid in tids.items():
            events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                           "args": {"name": backend}})
        return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, indent=1)

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["layer", "op_type", "backend", "ms", "source", "fallback"])
        for t in self.layers:
            w.writerow([t.name, t.op_type, t.backend, f"{t.ms:.4f}", t.source, int(t.fallback)])
        return buf.getvalue()

    def table(self, top: int | None = None) -> str:
        """A plain-text per-layer table, slowest first when ``top`` is given."""
        rows = sorted(self.layers, key=lambda t: -t.ms)[:top] if top else self.layers
        width = max([len(t.name) for t in rows] + [5])
        lines = [f"{'layer':<{width}}  {'op':<20} {'backend':<12} {'ms':>9}  source"]
        for t in rows:
            mark = " (fallback)" if t.fallback else ""
            lines.append(f"{t.name:<{width}}  {t.op_type:<20} {t.backend:<12} {t.ms:9.3f}  "
                         f"{t.source}{mark}")
        lines.append(f"{'total (wall)':<{width}}  {'':<20} {'':<12} {self.total_ms:9.3f}")
        return "\n".join(lines)
