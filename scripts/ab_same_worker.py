"""A/B of a CPU backend setting inside one worker, alternated block by block.

Two workers of the same model in one process differ by up to ~10% even when identical
(their tensors land in different memory), and separate processes minutes apart by more
(this machine's speed moves in phases of tens of seconds). Here one worker runs blocks of
runs with a module attribute set to its "off" and "on" values in turn (off, on, on, off,
...), the CPU plans kept on the layers are dropped at each switch, and each block gives a
median per layer and of the run loop's total. The report is the median over blocks of
each state and the median of the paired differences (a block against the block of the
other state beside it). An attribute that changes nothing measured within +-1.5% of the
total this way on MobileNetV3 (+-4% for single layers).

    python scripts/ab_same_worker.py MODEL engine.backends.cpu.conv_blocked.REUSE_PLANES
    python scripts/ab_same_worker.py mobilenetv3_cnn THREADS --layers ALL --blocks 16

MODEL is an ONNX file or a model family (``bench --suite families``). ``THREADS`` compares
one thread (off) with the backend's default (on). ``--values A,B`` gives the off and on
values (Python literals) instead of False and True; ``--set module.attr=value`` fixes
other attributes first (the thread tuning, say); ``--retune`` tunes the worker's thread
use anew for each block, for settings that change what the tuning would choose. Unset
``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` in the command, as for ``bench``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine import BackendType, ModelLoader, Worker  # noqa: E402
from engine.backends.cpu import threads  # noqa: E402
from engine.backends.cpu.thread_tuning import ThreadTuner  # noqa: E402
from engine.bench import _suite_models  # noqa: E402
from engine.inputs import random_feeds  # noqa: E402


def _setter(name: str, values):
    if name == "THREADS":
        default = threads.threads()
        return lambda on: threads.set_threads(default if on else 1)
    module, attr = name.rsplit(".", 1)
    target = importlib.import_module(module)
    return lambda on: setattr(target, attr, values[1] if on else values[0])


def _drop_plans(model) -> None:
    for layer in model.layers:
        for key in [k for k in layer.__dict__ if k.startswith("_cpu_")]:
            del layer.__dict__[key]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("attribute", help="module.attr, or THREADS")
    ap.add_argument("--layers", default="", help="layer names (comma-separated) or ALL")
    ap.add_argument("--blocks", type=int, default=12, help="blocks per state")
    ap.add_argument("--runs", type=int, default=15, help="timed runs per block")
    ap.add_argument("--warm", type=int, default=5, help="untimed runs after each switch")
    ap.add_argument("--skip", type=int, default=2,
                    help="first blocks per state left out (the worker's warm-up and thread "
                         "tuning run in them)")
    ap.add_argument("--values", help="off,on values (Python literals)")
    ap.add_argument("--set", action="append", default=[], help="module.attr=value first")
    ap.add_argument("--retune", action="store_true",
                    help="tune the worker's thread use anew after each switch (the warm-up "
                         "then runs until the tuning is done)")
    args = ap.parse_args()
    for item in args.set:
        name, value = item.split("=", 1)
        module, attr = name.rsplit(".", 1)
        setattr(importlib.import_module(module), attr, ast.literal_eval(value))
    values = [False, True]
    if args.values:
        values = [ast.literal_eval(v) for v in args.values.split(",")]
    switch = _setter(args.attribute, values)
    if args.model.endswith(".onnx"):
        path, feeds = args.model, None
    else:
        _, path, feeds = _suite_models("families:" + args.model)[0]
    model = ModelLoader.load(path)
    feeds = feeds or random_feeds(model, seed=0)
    worker = Worker(model, BackendType.CPU)
    out = model.outputs[0].name
    blocks: dict[bool, list[dict]] = {False: [], True: []}
    try:
        for b in range(2 * args.blocks):
            state = b % 4 in (1, 2)
            switch(state)
            _drop_plans(model)
            if args.retune:
                worker._tuner = ThreadTuner()
            for _ in range(args.warm):
                worker.schedule(feeds).peek_output(out).download_to_array()
            for _ in range(64 if args.retune else 0):
                if not worker._cpu_tuning():
                    break
                worker.schedule(feeds).peek_output(out).download_to_array()
            per_layer: dict[str, list[float]] = {}
            totals = []
            for _ in range(args.runs):
                worker.schedule(feeds).peek_output(out).download_to_array()
                profile = worker.last_profile
                totals.append(profile.total_ms * 1e3)
                for t in profile.layers:
                    per_layer.setdefault(t.name, []).append(t.ms * 1e3)
            blocks[state].append({"total": float(np.median(totals)),
                                  **{k: float(np.median(v)) for k, v in per_layer.items()}})
    finally:
        worker.close()
    off, on = blocks[False][args.skip:], blocks[True][args.skip:]
    names = ["total"]
    if args.layers == "ALL":
        names += sorted((k for k in off[0] if k != "total"), key=lambda k: -off[0][k])[:40]
    elif args.layers:
        names += args.layers.split(",")
    print(f"{args.attribute}: {len(off)} blocks each of {args.runs} runs (us, medians)")
    for name in names:
        a = np.array([d.get(name, np.nan) for d in off])
        b = np.array([d.get(name, np.nan) for d in on])
        if not np.isfinite(a).any() or not (a > 0).any():
            continue
        diff = b - a
        print(f"{name[:28]:28s} off {np.median(a):9.1f}  on {np.median(b):9.1f}  "
              f"on - off {np.median(diff):+8.1f} ({100 * np.median(diff / a):+.1f}%)")


if __name__ == "__main__":
    main()
