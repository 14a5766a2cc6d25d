"""The workbench's main job without a window: load a model, run it on every available
backend, print the per-layer timing table. Used by ``make run`` when there is no display.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from engine import BackendType, BackendUnavailableError, EngineError, ModelLoader, Worker
from engine.inputs import random_feeds
from workbench.model_process import read_model_metadata
from workbench.preprocess import (
    InputFileError,
    Preprocess,
    image_layout,
    image_to_input,
)


def _feeds(model, path: str, seed: int) -> tuple[dict[str, np.ndarray], str]:
    """Random inputs, or the sample image a model names in its metadata (the demo does)."""
    feeds = random_feeds(model, seed=seed)
    pre, _labels = read_model_metadata(model)
    sample = (pre or {}).get("sample")
    if sample and len(model.inputs) == 1:
        spec = model.inputs[0]
        try:
            from workbench.widgets import load_image_rgb

            layout = image_layout(spec)
            rgb = load_image_rgb(os.path.join(os.path.dirname(path), sample))
            feeds[spec.name] = image_to_input(rgb, spec, Preprocess.from_dict(
                pre, layout.channels if layout else 3))
            return feeds, f"sample {sample}"
        except InputFileError:
            pass
    return feeds, f"random inputs (seed {seed})"


def run_headless(path: str, repeat: int = 5, seed: int = 0, top: int | None = 25,
                 out=sys.stdout) -> int:
    """Run ``path`` on each backend; returns a process exit status (0 when one backend ran)."""
    try:
        model = ModelLoader.load(path)
    except EngineError as exc:
        print(f"cannot load {path}: {exc}", file=out)
        return 1
    print(f"model {path}: {len(model.layers)} layers; inputs "
          + ", ".join(str(s) for s in model.inputs), file=out)
    feeds, source = _feeds(model, path, seed)
    print(f"feeding {source}", file=out)
    ran = 0
    for kind in BackendType:
        try:
            worker = Worker(model, kind)
        except BackendUnavailableError as exc:
            print(f"\n== {kind.name}: unavailable ({exc})", file=out)
            continue
        except EngineError as exc:
            print(f"\n== {kind.name}: cannot prepare the model: {exc}", file=out)
            continue
        with worker:
            try:
                totals = []
                outputs = {}
                for _ in range(repeat + 1):  # the first run compiles; it is not counted
                    worker.schedule(feeds)
                    outputs = {o.name: worker.peek_output(o.name).download_to_array()
                               for o in model.outputs}
                    totals.append(worker.last_profile.total_ms)
            except EngineError as exc:
                print(f"\n== {kind.name}: run failed: {exc}", file=out)
                continue
            ran += 1
            prof = worker.last_profile
            steady = totals[1:] or totals
            fallback = sum(p.is_fallback for p in worker.placement.values())
            print(f"\n== {kind.name}: median {np.median(steady):.3f} ms over {len(steady)} runs "
                  f"(first run {totals[0]:.1f} ms); {fallback} CPU fallback layer(s)", file=out)
            print(prof.table(top=top if len(prof.layers) > (top or 0) else None), file=out)
            for name, arr in outputs.items():
                flat = arr.reshape(-1)
                line = f"output {name}: {arr.dtype.name}{list(arr.shape)}"
                if arr.dtype.kind == "f" and 1 < flat.size <= 1000:
                    line += f", argmax {int(flat.argmax())} ({float(flat.max()):.4f})"
                print(line, file=out)
    return 0 if ran else 1
