"""``inspect`` and ``compare`` commands of ``python -m engine`` (kept apart from cli.py)."""

from __future__ import annotations

import json
import os

import numpy as np

from engine.errors import EngineError
from engine.symbols import default_shape


def parse_shape_inputs(model, pairs: list[str] | None) -> dict[str, tuple[int, ...]]:
    """``NAME=1x3x640x640`` (or ``NAME=FILE.npy``, its shape) per input; the others get
    the model's declared shape with symbolic dims at plausible defaults."""
    specs = {s.name: s for s in model.inputs}
    shapes = {n: default_shape(s.shape or (), s.dtype) for n, s in specs.items()
              if s.shape is not None}
    for pair in pairs or []:
        name, _, text = pair.partition("=")
        if name not in specs:
            raise EngineError(f"--input names no input of the model: {name!r} (inputs: "
                              f"{', '.join(specs)})")
        if text.endswith(".npy") and os.path.exists(text):
            shapes[name] = tuple(np.load(text, mmap_mode="r", allow_pickle=False).shape)
            continue
        try:
            shape = tuple(int(d) for d in text.lower().split("x")) if text else ()
        except ValueError:
            raise EngineError(f"--input expects NAME=1x3x224x224 or NAME=FILE.npy, got "
                              f"{pair!r}") from None
        declared = specs[name].shape or ()
        if len(shape) != len(declared) or any(d < 0 for d in shape):
            raise EngineError(f"input {name!r} is declared {specs[name].shape_str()}; "
                              f"{text!r} does not fit it")
        shapes[name] = shape
    return shapes


def print_placement_summary(plan) -> None:
    s = plan.summary()
    print(f"placement for {_sig_text(plan.signature)}: {s['layers']} layers, "
          f"{s['native']} native, {s['cpu_forced']} CPU-forced, {s['fallback']} fallback"
          + (f", {s['user']} placed by the user" if s["user"] else "")
          + f" (planned in {plan.build_ms:.1f} ms)")
    for reason, count in s["fallback_reasons"].items():
        print(f"  {count:4d} x {reason}")


def _sig_text(sig) -> str:
    if not sig:
        return "the declared shapes"
    return ", ".join(f"{n}={'x'.join(map(str, shape))}" for n, shape, _ in sig)


def cmd_inspect(args) -> int:
    from engine import Worker
    from engine.cli_util import timed_load

    model, load_line = timed_load(args.model)
    print(f"model: {args.model}  (opsets {model.opsets}, producer {model.producer or '?'})")
    print(load_line)
    print("inputs:")
    for s in model.inputs:
        print(f"  {s}")
    print("outputs:")
    for s in model.outputs:
        print(f"  {s}")
    if model.pass_stats:
        print("import passes: " + ", ".join(f"{k} {v}" for k, v in model.pass_stats.items()))
    placement, plan = {}, None
    if args.backend:
        with Worker(model, args.backend) as worker:
            plan = worker.plan_for(parse_shape_inputs(model, getattr(args, "input", None)))
            placement = plan.placement
            peak = worker.peak_memory_bytes
            if peak is not None:
                print(f"peak device memory of the plan: {peak / 2**20:.2f} MiB")
    print(f"layers ({len(model.layers)}):")
    for layer in model.layers:
        outs = ", ".join(str(model.value_info.get(o, o)) for o in layer.outputs)
        line = f"  {layer.name}: {layer.op_type}({', '.join(layer.inputs)}) -> {outs}"
        if layer.captures:
            line += f"  captures ({', '.join(layer.captures)})"
        if any(o in model.cpu_forced for o in layer.outputs):
            line += "  CPU-forced"
        if layer.name in placement:
            p = placement[layer.name]
            line += f"  [{p.backend.value}: {p.reason}]"
        print(line)
    forced = ", ".join(sorted(model.cpu_forced)) or "none"
    print(f"CPU-forced tensors ({len(model.cpu_forced)}): {forced}")
    if plan is not None:
        print_placement_summary(plan)
    return 0


def cmd_compare(args, feeds: dict[str, np.ndarray]) -> int:
    from engine import ModelLoader
    from engine.compare import compare_backends, strict_json

    model = ModelLoader.load(args.model)
    result = compare_backends(model, args.backend, args.against, feeds(model),
                              rel_l2=args.threshold)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(strict_json(result), f, indent=1, allow_nan=False)
    width = max([len(r["name"]) for r in result["layers"]] + [5])
    print(f"{'layer':<{width}}  {'op':<20} {'rel_l2':>10} {'max_abs':>10}")
    for r in result["layers"]:
        mark = "  <- first divergent" if r["name"] == result["first_divergent"] else ""
        print(f"{r['name']:<{width}}  {r['op_type']:<20} {r['rel_l2']:10.3g} "
              f"{r['max_abs']:10.3g}{mark}")
    first = result["first_divergent"]
    if first is None:
        print(f"{result['backend']} and {result['against']} agree on every layer "
              f"(relative L2 <= {args.threshold:g})")
        return 0
    print(f"first divergent layer: {first}")
    return 1
