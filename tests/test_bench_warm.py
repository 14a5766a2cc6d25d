"""bench warms each side up before every timed block, for WARM_S and at least once."""

import time

from engine import bench


def test_warm_runs_for_its_time_and_at_least_once(monkeypatch):
    calls = []
    monkeypatch.setattr(bench, "WARM_S", 0.03)
    t0 = time.perf_counter()
    bench._warm(lambda: (calls.append(1), time.sleep(0.005)))
    assert time.perf_counter() - t0 >= 0.03 and len(calls) >= 4
    monkeypatch.setattr(bench, "WARM_S", 0.0)
    calls.clear()
    bench._warm(lambda: calls.append(1))
    assert calls == [1]
