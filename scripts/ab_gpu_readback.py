"""A/B of a GPU backend's readback (or input) path inside one worker, alternated block by block.

"old" switches off what the replays' reads gained: outputs copied early in the run's own
submit (``replayed.EarlyRead``), maps through direct wgpu-native calls (``rawmap``) and
blocking reads on the reading thread (``download_staged``), so a read goes through an
engine-thread job, a copy and submit of its own, wgpu-py's map and the reader thread, as
before; with ``--inputs`` it switches off instead the inputs written from the caller's
arrays in ``schedule`` (``Worker._written_feeds``: copied there and written by the engine
thread, as before). "new" is the code as it is. Each round runs a block of each (after two runs to
settle) and the report is the median over all runs of each state: latency, the process's
CPU time (all threads, lavapipe's included) and the host time ``bench --host`` counts.

    python scripts/ab_gpu_readback.py audio_streaming --backend gpu-pixel
    python scripts/ab_gpu_readback.py model.onnx --rounds 10 --runs 12
    python scripts/ab_gpu_readback.py db_text_detector --inputs --runs 6

MODEL is an ONNX file or a model family (``bench --suite families``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine import BackendType, ModelLoader, Worker  # noqa: E402
from engine.bench import _suite_models, _timed_engine  # noqa: E402
from engine.hostclock import HostClock  # noqa: E402
from engine.inputs import random_feeds  # noqa: E402


class _ReadBack(set):
    """A replay's ``read_back`` that stays empty while the old path is on."""

    def __init__(self, names, state: dict):
        super().__init__(names)
        self.state = state

    def add(self, name) -> None:
        if not self.state["old"]:
            super().add(name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--backend", default="gpu-compute")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--inputs", action="store_true",
                    help="switch the inputs written in schedule, not the readback")
    args = ap.parse_args()
    if args.model.endswith(".onnx"):
        path, feeds = args.model, None
    else:
        _, path, feeds = _suite_models("families:" + args.model)[0]
    model = ModelLoader.load(path)
    feeds = feeds or random_feeds(model, seed=0)
    out = model.outputs[0].name
    with Worker(model, BackendType(args.backend)) as worker:
        clock = HostClock(worker)
        for _ in range(5):  # recorded at the second run, replayed from the third
            _timed_engine(worker, feeds, out)
        backend = worker._backend
        replays = list(backend._replays._by_sig.values())
        if len(replays) != 1:
            sys.exit(f"the model did not replay: {backend.replay_status}")
        state = {"old": False}
        replays[0].read_back = _ReadBack(replays[0].read_back, state)
        device = backend.gpu if hasattr(backend, "gpu") else backend.dev
        mapper, staged = device.reader._raw, type(backend).download_staged
        results: dict[str, list] = {"old": [], "new": []}
        for _ in range(args.rounds):
            for key in ("old", "new"):
                old = key == "old"
                if args.inputs:
                    worker._written_feeds = (lambda inputs: None) if old else \
                        type(worker)._written_feeds.__get__(worker)
                else:
                    state["old"] = old
                    if old:
                        replays[0].read_back.clear()
                    device.reader._raw = None if old else mapper
                    backend.download_staged = (lambda h, m: None) if old else \
                        staged.__get__(backend)
                for _ in range(2):
                    _timed_engine(worker, feeds, out)
                for _ in range(args.runs):
                    clock.start_run()
                    cpu0 = time.process_time()
                    wall = _timed_engine(worker, feeds, out, clock)
                    cpu = (time.process_time() - cpu0) * 1e3
                    clock.end_run()
                    results[key].append((wall, cpu, clock.host_ms[-1] * 1e3))
        device.reader._raw = mapper
        backend.__dict__.pop("download_staged", None)
        worker.__dict__.pop("_written_feeds", None)
    print(f"{args.model} on {args.backend}, {args.rounds} rounds of {args.runs} runs:")
    for key, rows in results.items():
        wall, cpu, host = np.median(np.array(rows), axis=0)
        print(f"  {key}: latency {wall:.3f} ms, process CPU {cpu:.3f} ms, host {host:.1f} us "
              f"a run ({host / len(model.layers):.1f} a layer)")


if __name__ == "__main__":
    main()
