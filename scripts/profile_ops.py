"""GPU time per op type of family models on the GPU backends, from a run's timestamps.

    python scripts/profile_ops.py whisper_encoder,gpt_decoder gpu-compute,gpu-pixel

Each model runs six times per backend (the later runs replay the recorded plan); the last
run's profile is summed by op type, with the layers that took longest. Per-layer timestamps
put each layer in a pass of its own, so the sums run above an untimed run's latency.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict

from engine import ModelLoader, Worker
from engine.bench import _suite_models


def main(models: str, backends: str, runs: int = 6, top: int = 14) -> None:
    for name, path, feeds in _suite_models("families:" + models):
        model = ModelLoader.load(path)
        for backend in backends.split(","):
            with Worker(model, backend) as worker:
                out = model.outputs[0].name
                for _ in range(runs):
                    t0 = time.perf_counter()
                    worker.schedule(feeds)
                    worker.peek_output(out).download_to_array()
                    ms = (time.perf_counter() - t0) * 1e3
                time.sleep(0.05)  # the device times of the last run resolve
                prof = worker.last_profile
            per_op: dict[tuple, list] = defaultdict(lambda: [0.0, 0])
            for t in prof.layers:
                key = (t.op_type, t.backend, t.source.split(" ")[0])
                per_op[key][0] += t.ms
                per_op[key][1] += 1
            print(f"== {name} {backend}: last run {ms:.2f} ms, {len(prof.layers)} layers, "
                  f"summed layer ms {sum(t.ms for t in prof.layers):.2f}")
            for (op, be, src), (total, n) in sorted(per_op.items(), key=lambda kv: -kv[1][0])[:top]:
                print(f"   {op:22s} {be:12s} {src:14s} n={n:3d} {total:8.3f} ms")
            slowest = sorted(prof.layers, key=lambda t: -t.ms)[:6]
            print("   slowest:", ", ".join(f"{t.name}={t.ms:.3f}" for t in slowest))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "gpu-compute,gpu-pixel")
