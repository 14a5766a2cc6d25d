"""Placement of the model families on the GPU backends, for their concrete test shapes.

    python scripts/measure_placement.py [--backend gpu-compute] [--family NAME] [--shapes bench]

For each family and backend: layers run natively, CPU-forced and by fallback (reasons
grouped) after one run, the native share of the layers that are not CPU-forced, the same
count for the model with its input shapes declared statically, and what planning costs for
a new input signature and for a repeated one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import onnx  # noqa: E402

from engine import ModelLoader, Worker, families  # noqa: E402
from engine.plan import signature_of  # noqa: E402


def static_copy(path: str, shapes: dict[str, tuple[int, ...]]) -> bytes:
    """The family's model with its inputs declared with these concrete shapes."""
    proto = onnx.load(path)
    for vi in proto.graph.input:
        if vi.name in shapes:
            dims = vi.type.tensor_type.shape.dim
            for d, size in zip(dims, shapes[vi.name]):
                d.Clear()
                d.dim_value = int(size)
    return proto.SerializeToString()


def placed_counts(worker: Worker, feeds) -> dict:
    worker.schedule(feeds)
    for o in worker.model.outputs:
        worker.peek_output(o.name).download_to_array()
    return worker.plan.summary()


def measure(name: str, backend: str, which: str) -> dict:
    fam = families.get(name)
    path = families.path(name)
    feeds = fam.inputs(which, 0)
    model = ModelLoader.load(path)
    with Worker(model, backend) as worker:
        s = placed_counts(worker, feeds)
        new_ms = worker.plan.build_ms
        sig = signature_of(feeds)
        t0 = time.perf_counter()
        for _ in range(1000):
            worker._plans.get(signature_of(feeds) if sig else None)
        repeat_us = (time.perf_counter() - t0) * 1e3
    shapes = {k: v.shape for k, v in feeds.items()}
    static = ModelLoader.load(static_copy(path, shapes))
    with Worker(static, backend) as worker:
        st = placed_counts(worker, feeds)
    eligible = s["layers"] - s["cpu_forced"]
    return {"family": name, "backend": backend, "layers": s["layers"], "native": s["native"],
            "cpu_forced": s["cpu_forced"], "fallback": s["fallback"],
            "native_share": s["native"] / eligible if eligible else 1.0,
            "static_native": st["native"], "static_layers": st["layers"],
            "plan_new_ms": new_ms, "plan_repeat_us": repeat_us,
            "reasons": s["fallback_reasons"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", choices=["gpu-compute", "gpu-pixel"])
    ap.add_argument("--family", action="append")
    ap.add_argument("--shapes", choices=["test", "bench"], default="test")
    args = ap.parse_args(argv)
    print(f"{'family':<18} {'backend':<12} {'layers':>6} {'native':>6} {'forced':>6} "
          f"{'fallbk':>6} {'share':>7} {'static':>9} {'plan new':>9} {'repeat':>8}")
    for name in args.family or list(families.FAMILIES):
        for backend in args.backend or ["gpu-compute", "gpu-pixel"]:
            r = measure(name, backend, args.shapes)
            print(f"{r['family']:<18} {r['backend']:<12} {r['layers']:>6} {r['native']:>6} "
                  f"{r['cpu_forced']:>6} {r['fallback']:>6} {r['native_share']:>7.1%} "
                  f"{r['static_native']:>4}/{r['static_layers']:<4} "
                  f"{r['plan_new_ms']:>7.1f}ms {r['plan_repeat_us']:>6.2f}us", flush=True)
            for reason, count in r["reasons"].items():
                print(f"{'':<20}{count} x {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
