"""A/B of GPU_COMPUTE's MatMul epilogues (``engine.backends.gpu_common.epilogues``) in one
process: two workers of each model, one with its epilogue chains and one without, their runs
alternated (separate processes a minute apart differ by more than the effect on this machine).
Prints the median wall time of a run for each.

    python scripts/ab_gpu_epilogues.py gpt_decoder,bert_encoder [RUNS]

MODELS are model families (``bench --suite families``); RUNS timed runs each (default 10).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine import BackendType, ModelLoader, Worker  # noqa: E402
from engine.bench import _suite_models  # noqa: E402

WARMUP = 2


def _run(worker, feeds, out) -> float:
    t0 = time.perf_counter()
    worker.schedule(feeds)
    worker.peek_output(out).download_to_array()
    return (time.perf_counter() - t0) * 1e3


def main(argv: list[str]) -> int:
    names = argv[0].split(",")
    runs = int(argv[1]) if len(argv) > 1 else 10
    for name, path, feeds in _suite_models("families:" + ",".join(names)):
        model = ModelLoader.load(path)
        out = model.outputs[0].name
        on = Worker(model, BackendType.GPU_COMPUTE)
        off = Worker(model, BackendType.GPU_COMPUTE)
        table = off._backend.epilogues
        table.use_model = lambda m: None  # this worker finds no chains: a dispatch a layer
        table._chains = {}
        times: dict[str, list[float]] = {"on": [], "off": []}
        try:
            for r in range(runs + WARMUP):
                pair = [("on", on), ("off", off)]
                for key, worker in pair if r % 2 == 0 else pair[::-1]:
                    ms = _run(worker, feeds, out)
                    if r >= WARMUP:
                        times[key].append(ms)
        finally:
            on.close()
            off.close()
        a, b = np.median(times["off"]), np.median(times["on"])
        print(f"{name:<16} without {a:8.1f} ms  with {b:8.1f} ms  ({(b / a - 1) * 100:+.1f}%)",
              flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
