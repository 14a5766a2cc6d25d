"""``python -m engine``: inspect, run, bench, ops, conformance (see DESIGN.md)."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from engine.backends import BackendType
from engine.errors import EngineError


def _backend(text: str) -> BackendType:
    try:
        return BackendType.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def random_inputs(model, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random inputs for every model input (symbolic dims become 1)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in model.inputs:
        shape = tuple(d if isinstance(d, int) else 1 for d in (spec.shape or ()))
        dtype = np.dtype(spec.dtype or np.float32)
        if dtype.kind == "f":
            feeds[spec.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            feeds[spec.name] = rng.integers(0, 10, shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[spec.name] = rng.random(shape) > 0.5
        else:
            raise EngineError(f"cannot make a random value for input {spec.name!r} ({dtype})")
    return feeds


def cmd_inspect(args) -> int:
    from engine.cli_inspect import cmd_inspect as inspect

    return inspect(args)


def cmd_compare(args) -> int:
    from engine.cli_inspect import cmd_compare as compare

    return compare(args, lambda model: _load_inputs(model, args.input, args.seed))


def _load_inputs(model, pairs: list[str] | None, seed: int) -> dict[str, np.ndarray]:
    feeds = random_inputs(model, seed)
    for pair in pairs or []:
        name, _, path = pair.partition("=")
        if not path:
            raise EngineError(f"--input expects NAME=FILE.npy, got {pair!r}")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise EngineError(f"cannot read input file {path!r}: {exc}") from exc
    return feeds


def cmd_run(args) -> int:
    from engine import ModelLoader, Worker

    model = ModelLoader.load(args.model)
    feeds = _load_inputs(model, args.input, args.seed)
    with Worker(model, args.backend) as worker:
        latencies = []
        for _ in range(max(1, args.repeat)):
            worker.schedule(feeds)
            outs = {o.name: worker.peek_output(o.name).download_to_array() for o in model.outputs}
            latencies.append(worker.last_profile.total_ms)
        profile = worker.last_profile
        fallbacks = {n: p.reason for n, p in worker.placement.items() if p.is_fallback}
    if args.json:
        print(json.dumps({
            "backend": args.backend.value,
            "latency_ms": {"median": float(np.median(latencies)), "min": float(min(latencies)),
                           "runs": len(latencies)},
            "outputs": {n: {"shape": list(np.shape(v)), "dtype": str(np.asarray(v).dtype),
                            "mean": float(np.mean(v)) if np.size(v) else None}
                        for n, v in outs.items()},
            "fallbacks": fallbacks,
            "profile": [vars(t) for t in profile.layers] if args.profile else None,
        }, indent=1))
        return 0
    for name, value in outs.items():
        arr = np.asarray(value)
        print(f"output {name}: {arr.dtype}{list(arr.shape)}  "
              f"min {arr.min():.5g} max {arr.max():.5g} mean {arr.mean():.5g}"
              if arr.size and arr.dtype.kind in "fiub" else f"output {name}: {arr!r}")
    print(f"latency: median {np.median(latencies):.3f} ms over {len(latencies)} run(s) on "
          f"{args.backend.value}")
    if fallbacks:
        print(f"{len(fallbacks)} layer(s) fell back to the CPU:")
        for n, r in fallbacks.items():
            print(f"  {n}: {r}")
    if args.profile:
        print(profile.table())
        print("per op type (ms): " + ", ".join(f"{k} {v:.3f}"
                                               for k, v in profile.by_op_type().items()))
    return 0


def cmd_ops(args) -> int:
    from engine.backends import kernel_tables

    tables = kernel_tables()
    ops = sorted(set().union(*(t.op_types() for t in tables.values())))
    kinds = list(BackendType)
    if args.markdown:
        print("| Operator | " + " | ".join(k.name for k in kinds) + " |")
        print("|---|" + "---|" * len(kinds))
        for op in ops:
            cells = ["yes" if op in tables[k].op_types() else "fallback" for k in kinds]
            print(f"| {op} | " + " | ".join(cells) + " |")
        print()
    else:
        for op in ops:
            print(f"{op:<32}" + "  ".join(f"{k.name}:{'yes' if op in tables[k].op_types() else '-'}"
                                           for k in kinds))
    counts = ", ".join(f"{k.name} {len(tables[k].op_types())}" for k in kinds)
    print(f"native op types: {counts}")
    return 0


def cmd_conformance(args) -> int:
    from engine.conformance import run_conformance

    def progress(i, n, name):
        if args.verbose:
            print(f"[{i}/{n}] {name}", file=sys.stderr)

    result = run_conformance(args.backend, args.filter, progress)
    print(f"{result['backend']}: {result['passed']} of {result['total']} cases pass")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({k: result[k] for k in ("backend", "total", "passed", "failed")}, f,
                      indent=1)
    return 0


def cmd_bench(args) -> int:
    from engine.bench import run_bench

    return run_bench(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("inspect", help="inputs, outputs, layers, placement")
    s.add_argument("model")
    s.add_argument("--backend", type=_backend)
    s.add_argument("--input", action="append", metavar="NAME=1x3x224x224",
                   help="plan for this input shape (default: declared, symbolic dims guessed)")
    s.set_defaults(fn=cmd_inspect)
    s = sub.add_parser("compare", help="per-layer error of one backend against another")
    s.add_argument("model")
    s.add_argument("--backend", type=_backend, required=True)
    s.add_argument("--against", type=_backend, default=BackendType.CPU)
    s.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--threshold", type=float, default=1e-3,
                   help="relative L2 error above which a layer diverges (default 1e-3)")
    s.add_argument("--json", metavar="FILE")
    s.set_defaults(fn=cmd_compare)
    s = sub.add_parser("run", help="run a model once or repeatedly")
    s.add_argument("model")
    s.add_argument("--backend", type=_backend, default=BackendType.CPU)
    s.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    s.add_argument("--repeat", type=int, default=1)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--profile", action="store_true")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_run)
    s = sub.add_parser("bench", help="median latency, optionally against onnxruntime")
    s.add_argument("models", nargs="*", metavar="MODEL")
    s.add_argument("--zoo", action="store_true", help="the nine zoo CNNs with seeded weights")
    s.add_argument("--backend", type=_backend, action="append")
    s.add_argument("--compare", choices=["onnxruntime"])
    s.add_argument("--repeat", type=int, default=10)
    s.add_argument("--threads", type=int, default=0, help="0: all cores")
    s.add_argument("--json", metavar="FILE")
    s.add_argument("--host", action="store_true",
                   help="GPU backends: host us per layer (recording and submitting) and GPU ms")
    s.set_defaults(fn=cmd_bench)
    s = sub.add_parser("ops", help="supported operators per backend")
    s.add_argument("--markdown", action="store_true")
    s.set_defaults(fn=cmd_ops)
    s = sub.add_parser("conformance", help="the ONNX node test suite")
    s.add_argument("--backend", type=_backend, default=BackendType.CPU)
    s.add_argument("--json", metavar="FILE")
    s.add_argument("--filter", help="only cases whose name contains this")
    s.add_argument("--verbose", action="store_true")
    s.set_defaults(fn=cmd_conformance)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
