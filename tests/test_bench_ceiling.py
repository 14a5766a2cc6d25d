"""bench --ceiling sets each model against the better of the ceiling measurements taken just
before and just after it (the machine's speed drifts over a run)."""

import argparse
import json

from engine import bench
from engine.backends import BackendType


def test_each_model_is_set_against_its_neighbouring_ceilings(monkeypatch, tmp_path, capsys):
    measured = iter([4.0, 6.0, 10.0])  # before model a, after a, after b
    monkeypatch.setattr(bench, "_ceiling", lambda: next(measured))
    monkeypatch.setattr(bench, "_set_cpu_threads", lambda n: None)  # (no lasting change)
    monkeypatch.setattr(bench, "_model_paths",
                        lambda args: [("a", "a.onnx", None), ("b", "b.onnx", None)])
    rates = {"a": 3.0, "b": 5.0}

    def fake_bench_model(name, path, backends, repeat, threads, compare, feeds=None,
                         host=False):
        return [{"model": name, "backend": BackendType.GPU_COMPUTE.value, "median_ms": 1.0,
                 "min_ms": 1.0, "runs": repeat, "gflops": rates[name], "peak_mb": None}]

    monkeypatch.setattr(bench, "bench_model", fake_bench_model)
    out = tmp_path / "rows.json"
    args = argparse.Namespace(backend=[BackendType.GPU_COMPUTE], threads=1, compare=None,
                              ceiling=True, repeat=1, host=False, json=str(out))
    assert bench.run_bench(args) == 0
    rows = {r["model"]: r for r in json.loads(out.read_text())["results"]}
    assert rows["a"]["ceiling_gflops"] == 6.0 and rows["a"]["ceiling_pct"] == 50.0
    assert rows["b"]["ceiling_gflops"] == 10.0 and rows["b"]["ceiling_pct"] == 50.0
    text = capsys.readouterr().out
    assert "matmul ceiling of the adapter: 10.00 GFLOP/s" in text
    assert "4.00, 6.00, 10.00" in text
