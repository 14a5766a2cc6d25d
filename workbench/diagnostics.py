"""Measuring the UI thread's responsiveness: a fast timer that records its largest gap."""

from __future__ import annotations

import time

from PySide6.QtCore import QElapsedTimer, QObject, QTimer


class Heartbeat(QObject):
    """A 5 ms timer on the UI thread that records the largest gap between its ticks."""

    def __init__(self, interval_ms: int = 5):
        super().__init__()
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self.clock = QElapsedTimer()
        self.max_gap = 0.0
        self.ticks = 0
        self._last = None

    def start(self) -> None:
        self.max_gap, self.ticks, self._last = 0.0, 0, None
        self.clock.start()
        self.timer.start()

    def _tick(self) -> None:
        now = self.clock.nsecsElapsed() / 1e6
        if self._last is not None:
            self.max_gap = max(self.max_gap, now - self._last)
        self._last = now
        self.ticks += 1

    def stop(self) -> float:
        self.timer.stop()
        self._tick()
        return self.max_gap


def wait_until(app, predicate, timeout_s: float) -> bool:
    """Process events until ``predicate()`` is true (never sleeps long on the UI thread)."""
    end = time.perf_counter() + timeout_s
    while time.perf_counter() < end:
        app.processEvents()
        if predicate():
            return True
        time.sleep(0.001)
    return bool(predicate())


def measure_continuous(app, window, backend, seconds: float = 3.0,
                       timeout_s: float = 180.0, min_runs: int = 1) -> dict:
    """Largest UI gap while ``window``'s model runs continuously on ``backend``.

    The backend is prepared and one warm-up run done first (compilation is measured by the
    loading numbers, not here); then it runs for ``seconds`` and at least ``min_runs`` runs
    (up to ``timeout_s``). Returns {"max_gap_ms", "runs_shown", "median_ms"} or
    {"error": message}.
    """
    if not window.set_backend(backend):
        return {"error": window.messages[-1][1] if window.messages else "unavailable"}
    if not wait_until(app, lambda: bool(window.placement), timeout_s):
        return {"error": "backend did not become ready"}
    n_msgs = len(window.messages)
    done: list = []
    window.run_completed.connect(done.append)
    try:
        window.start_run(False)
        wait_until(app, lambda: done or len(window.messages) > n_msgs, timeout_s)
        if not done:
            return {"error": window.messages[-1][1] if window.messages else "no result"}
        beat = Heartbeat()
        beat.start()
        start = len(done)
        window.start_run(True)
        wait_until(app, lambda: len(window.messages) > n_msgs, seconds)
        wait_until(app, lambda: len(done) - start >= min_runs or len(window.messages) > n_msgs,
                   timeout_s)
        gap = beat.stop()
        window.stop_run()
        shown = done[start:]
    finally:
        window.run_completed.disconnect(done.append)
    if len(window.messages) > n_msgs and window.messages[-1][0] == "error":
        return {"error": window.messages[-1][1]}
    totals = sorted(p.total_ms for p in shown) or [float("nan")]
    return {"max_gap_ms": gap, "runs_shown": len(shown), "median_ms": totals[len(totals) // 2]}


def measure_load(app, window, path: str, timeout_s: float = 120.0, opener=None) -> dict:
    """Largest UI gap from opening ``path`` until its graph is drawn and its backend is
    ready, and the time to the drawn graph."""
    loaded: list = []
    window.model_loaded.connect(loaded.append)
    n_msgs = len(window.messages)
    beat = Heartbeat()
    beat.start()
    try:
        (opener or window.open_model)(path)
        ok = wait_until(app, lambda: "to_graph_ms" in window.load_timings
                        or len(window.messages) > n_msgs, timeout_s)
        gap_graph = beat.max_gap
        wait_until(app, lambda: bool(window.placement) or len(window.messages) > n_msgs,
                   timeout_s)
        gap = beat.stop()
    finally:
        window.model_loaded.disconnect(loaded.append)
    if not ok or "to_graph_ms" not in window.load_timings:
        return {"error": window.messages[-1][1] if window.messages else "timed out"}
    return {"max_gap_ms": gap, "max_gap_to_graph_ms": gap_graph, **window.load_timings}
