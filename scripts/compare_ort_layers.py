"""Per-layer CPU times of the engine beside onnxruntime's per-node times, for one model.

onnxruntime's profiler renames and fuses nodes (``r41_nchwc``, ``FusedConv``), so nodes are
matched to the engine's layers by what survives: the output shape, in graph order, and among
nodes of that shape the one reading as many parameters. A fused engine step (a Conv writing
into its Concat, a linear layer with its GELU) books its whole time on its first layer and
zero on the others, and onnxruntime does the same with its fusions: compare sums over a
kind of layer, or single layers that neither side fused. onnxruntime's blocked layout pads
some channel counts (SqueezeNet's 1000 to 1008) and its layout changes have shapes of their
own, so such a layer can pair with the wrong node. Prints the sums per op type and kernel
kind, then the layers the engine loses most time on.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python scripts/compare_ort_layers.py \\
        MODEL.onnx|FAMILY [--runs 20] [--top 25]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def onnxruntime_nodes(path: str, feeds: dict, runs: int, threads: int) -> list[tuple]:
    """(median us, op type, parameter count (float32-sized), output shape) per profiled
    node."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.enable_profiling = True
    so.log_severity_level = 3
    with tempfile.TemporaryDirectory() as tmp:
        so.profile_file_prefix = os.path.join(tmp, "ort")
        session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        for _ in range(runs + 5):
            session.run(None, feeds)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    times: dict[str, list] = defaultdict(list)
    info: dict[str, tuple] = {}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name, args = e["name"][:-len("_kernel_time")], e["args"]
        times[name].append(e["dur"])
        shapes = args.get("output_type_shape") or [{}]
        shape = next(iter(shapes[0].values()), None) if shapes else None
        # parameter_size is in bytes (float32 weights)
        info[name] = (args.get("op_name"), int(args.get("parameter_size") or 0) // 4,
                      None if shape is None else tuple(shape))
    return [(statistics.median(v[5:] or v), *info[n]) for n, v in times.items()]


def engine_layers(model, feeds: dict, runs: int) -> list[tuple]:
    """(median us, op type, kernel kind, parameter count, output shape, name) per layer."""
    from engine import Worker
    from engine.bench import _timed_engine, finish_tuning

    out = model.outputs[0].name
    with Worker(model, "cpu") as worker:
        for _ in range(5):
            _timed_engine(worker, feeds, out)
        finish_tuning(worker, lambda: _timed_engine(worker, feeds, out))
        times: dict[str, list] = defaultdict(list)
        for _ in range(runs):
            _timed_engine(worker, feeds, out)
            for t in worker.last_profile.layers:
                times[t.name].append(t.ms * 1e3)
        # one run keeping every tensor, for the layers' output shapes (symbolic dims resolved)
        worker.schedule(feeds, capture="all")
        shapes = {layer.name: tuple(worker.peek_output(layer.outputs[0]).shape)
                  for layer in model.layers if layer.outputs and layer.outputs[0]}
        constants = worker._constants
    rows = []
    for layer in model.layers:
        if layer.name not in times:
            continue
        params = sum(constants[n].size for n in layer.inputs[1:] if n and n in constants)
        plan = layer.__dict__.get("_cpu_conv_plan")
        rows.append((statistics.median(times[layer.name]), layer.op_type,
                     plan.kind if plan is not None else "", params,
                     shapes.get(layer.name), layer.name))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="an .onnx file or a family name (engine.families)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    from engine import ModelLoader
    from engine.backends.cpu import threads
    from engine.bench import _suite_models
    from engine.inputs import random_feeds

    threads.set_threads(args.threads)
    if args.model.endswith(".onnx"):
        path, feeds = args.model, None
    else:
        ((_, path, feeds),) = _suite_models("families:" + args.model)
    model = ModelLoader.load(path)
    feeds = feeds if feeds is not None else random_feeds(model, seed=0)
    theirs = onnxruntime_nodes(path, feeds, args.runs, args.threads)
    ours = engine_layers(model, feeds, args.runs)
    pending: dict[tuple, list[tuple]] = defaultdict(list)
    for us, _op, params, shape in theirs:
        pending[shape].append((params, us))
    by_kind: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    matched = []
    for us, op, kind, params, shape, name in ours:
        queue = pending.get(shape) or []
        pick = next((i for i, q in enumerate(queue) if q[0] == params), 0 if queue else None)
        ort_us = None if pick is None else queue.pop(pick)[1]
        k = by_kind[(op, kind)]
        k[0] += us
        k[1] += ort_us or 0.0
        k[2] += 1
        matched.append((us, ort_us, op, kind, name, shape))
    print(f"engine: {sum(r[0] for r in ours) / 1e3:.2f} ms summed over {len(ours)} layers; "
          f"onnxruntime: {sum(r[0] for r in theirs) / 1e3:.2f} ms over {len(theirs)} nodes, "
          f"{sum(r[1] or 0 for r in matched) / 1e3:.2f} ms of them matched")
    for (op, kind), (us, ort_us, n) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
        ratio = f"{us / ort_us:5.2f}x" if ort_us else "   -  "
        print(f"  {op:20s} {kind:11s} {n:4d} layers  engine {us / 1e3:7.2f} ms  "
              f"onnxruntime {ort_us / 1e3:7.2f} ms  {ratio}")
    print("layers with the largest excess (engine us / onnxruntime us):")
    for us, ort_us, op, kind, name, shape in sorted(
            (r for r in matched if r[1] is not None), key=lambda r: r[1] - r[0])[:args.top]:
        print(f"  {op:12s} {kind:11s} {us:9.1f} / {ort_us:8.1f}  {name} {list(shape or [])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
