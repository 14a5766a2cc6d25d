"""``python -m engine``: inspect, run, bench, ops, conformance (see the README)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

import numpy as np

from engine import cli_util
from engine.backends import BackendType
from engine.cli_util import BACKEND_NAMES
from engine.errors import EngineError
from engine.inputs import random_feeds

__all__ = ["build_parser", "main"]

DESCRIPTION = """Inspect, run and benchmark ONNX models on the engine's backends.

backends (--backend): cpu, gpu-compute, gpu-pixel
`python -m engine COMMAND --help` explains the options of a command."""


def _backend(text: str) -> BackendType:
    try:
        return BackendType.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _side(text: str):
    from engine.compare import parse_side

    try:
        return parse_side(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or cpu-f64") from exc


def cmd_inspect(args) -> int:
    from engine.cli_inspect import cmd_inspect as inspect

    return inspect(args)


def cmd_compare(args) -> int:
    from engine.cli_inspect import cmd_compare as compare

    return compare(args, lambda model: _load_inputs(model, args.input, args.seed))


def _load_inputs(model, pairs: list[str] | None, seed: int) -> dict[str, np.ndarray]:
    """Inputs given by --input NAME=FILE.npy; random values only for the others."""
    given = {}
    for pair in pairs or []:
        name, _, path = pair.partition("=")
        if not path:
            raise EngineError(f"--input expects NAME=FILE.npy, got {pair!r}")
        try:
            given[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise EngineError(f"cannot read input file {path!r}: {exc}") from exc
    return {**random_feeds(model, seed=seed, skip=given), **given}


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
        print(cli_util.dumps({
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
        rows = [[op] + ["yes" if op in tables[k].op_types() else "-" for k in kinds]
                for op in ops]
        print(cli_util.table(["operator"] + [k.name for k in kinds], rows))
    counts = ", ".join(f"{k.name} {len(tables[k].op_types())}" for k in kinds)
    print(f"native op types: {counts}")
    return 0


def cmd_conformance(args) -> int:
    from engine.conformance import run_conformance

    def progress(i, n, name):
        if args.verbose:
            print(f"[{i}/{n}] {name}", file=sys.stderr)

    result = run_conformance(args.backend, args.filter, progress)
    print(f"{result['backend']}: {result['passed']} of {result['total']} cases pass, "
          f"{result.get('passed_natively', result['passed'])} without CPU fallback")
    if args.json:
        with open(args.json, "w") as f:
            f.write(cli_util.dumps({k: result[k] for k in ("backend", "total", "passed",
                                                           "failed")}, indent=1))
    failed = result["failed"]
    if args.baseline:
        try:
            with open(args.baseline) as f:
                known = set(json.load(f)["passing"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise EngineError(f"cannot read the baseline {args.baseline!r} (a JSON file with "
                              f"a \"passing\" list, as in tests/baselines): {exc}") from exc
        failed = [name for name in failed if name in known]
        what = "case(s) that pass in the baseline now fail"
    else:
        what = "case(s) failed"
    if failed:
        shown = ", ".join(failed[:10]) + (f" and {len(failed) - 10} more" if len(failed) > 10
                                          else "")
        print(f"{len(failed)} {what}: {shown}", file=sys.stderr)
        return 1
    return 0


def cmd_bench(args) -> int:
    from engine.bench import run_bench

    return run_bench(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    backend_help = f"backend: {BACKEND_NAMES}"
    s = sub.add_parser("inspect", help="inputs, outputs, layers, placement",
                       description="Show a model's inputs, outputs and layers, the load's time "
                       f"and peak memory, and with --backend each layer's placement. "
                       f"Backends: {BACKEND_NAMES}.")
    s.add_argument("model", help="the ONNX file")
    s.add_argument("--backend", type=_backend, help=f"show the placement on this {backend_help}")
    s.add_argument("--input", action="append", metavar="NAME=1x3x224x224",
                   help="plan for this input shape (default: the declared shape, symbolic "
                   "dims guessed)")
    s.set_defaults(fn=cmd_inspect)
    s = sub.add_parser("compare", help="per-layer error of one backend against another",
                       description="Run the same inputs on two backends with every "
                       "intermediate captured; print each layer's relative L2 error and max "
                       "abs difference; exit 1 when a layer diverges. "
                       f"Backends: {BACKEND_NAMES}; cpu-f64 is the CPU backend running the "
                       "model in float64.")
    s.add_argument("model", help="the ONNX file")
    s.add_argument("--backend", type=_side, required=True, help=backend_help + " or cpu-f64")
    s.add_argument("--against", type=_side, default=BackendType.CPU,
                   help=f"the reference {backend_help}, or cpu-f64 (default cpu)")
    s.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="the value of one input, from a .npy file (repeat for more inputs)")
    s.add_argument("--seed", type=cli_util.seed_arg, default=0,
                   help="seed of the random inputs, 0 to 2**32-1 (default 0)")
    s.add_argument("--threshold", type=float, default=1e-3,
                   help="relative L2 error above which a layer diverges (default 1e-3)")
    s.add_argument("--json", metavar="FILE", help="also write the table as strict JSON")
    s.set_defaults(fn=cmd_compare)
    s = sub.add_parser("run", help="run a model once or repeatedly",
                       description="Run a model and print its outputs and latency. Inputs not "
                       "given with --input get seeded random values of their declared shape "
                       f"(symbolic dims 1) and dtype. Backends: {BACKEND_NAMES}.")
    s.add_argument("model", help="the ONNX file")
    s.add_argument("--backend", type=_backend, default=BackendType.CPU,
                   help=f"{backend_help} (default cpu)")
    s.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="the value of one input, from a .npy file (repeat for more inputs)")
    s.add_argument("--repeat", type=int, default=1, help="number of runs (default 1)")
    s.add_argument("--seed", type=cli_util.seed_arg, default=0,
                   help="seed of the random inputs, 0 to 2**32-1 (default 0)")
    s.add_argument("--profile", action="store_true", help="print per-layer timings")
    s.add_argument("--json", action="store_true",
                   help="print one JSON object (strict JSON: NaN and infinities are null)")
    s.set_defaults(fn=cmd_run)
    s = sub.add_parser("bench", help="median latency, optionally against onnxruntime",
                       description="Median latency per model and backend, optionally beside "
                       f"onnxruntime. Backends: {BACKEND_NAMES}.")
    s.add_argument("models", nargs="*", metavar="MODEL", help="ONNX files")
    s.add_argument("--zoo", action="store_true", help="the nine zoo CNNs with seeded weights")
    s.add_argument("--suite", action="append", metavar="NAME",
                   help="zoo, families (the project's model families) or families:NAME[,NAME]")
    s.add_argument("--backend", type=_backend, action="append",
                   help=f"{backend_help}; repeat for several (default cpu)")
    s.add_argument("--compare", choices=["onnxruntime"], help="also time onnxruntime")
    s.add_argument("--repeat", type=int, default=10, help="timed runs per backend (default 10)")
    s.add_argument("--threads", type=int, default=0, help="0: all cores")
    s.add_argument("--json", metavar="FILE", help="write the results as JSON to FILE")
    s.add_argument("--host", action="store_true",
                   help="GPU backends: host us per layer (recording and submitting) and GPU ms")
    s.add_argument("--ceiling", action="store_true",
                   help="gpu-compute: each model's GFLOP/s as a share of the adapter's matmul "
                        "ceiling, measured before and after each model")
    s.set_defaults(fn=cmd_bench)
    s = sub.add_parser("ops", help="supported operators per backend",
                       description="The ONNX operators each backend runs natively (generated "
                       "from the kernel registrations); others fall back to the CPU.")
    s.add_argument("--markdown", action="store_true", help="a Markdown table")
    s.set_defaults(fn=cmd_ops)
    s = sub.add_parser("conformance", help="the ONNX node test suite",
                       description="Run the ONNX node test suite shipped in the onnx package. "
                       "Exit status 1 when a case fails; with --baseline, only when a case "
                       f"that the baseline lists as passing fails. Backends: {BACKEND_NAMES}.")
    s.add_argument("--backend", type=_backend, default=BackendType.CPU,
                   help=f"{backend_help} (default cpu)")
    s.add_argument("--json", metavar="FILE", help="write {backend, total, passed, failed} here")
    s.add_argument("--filter", help="only cases whose name contains this")
    s.add_argument("--baseline", metavar="FILE",
                   help="known results (tests/baselines/conformance_<backend>.json): fail only "
                   "on cases it lists as passing")
    s.add_argument("--verbose", action="store_true", help="print each case as it runs")
    s.set_defaults(fn=cmd_conformance)
    p.epilog = "usage of each command:\n" + "\n".join(
        textwrap.fill(" ".join(c.format_usage().split()[1:]), 96, initial_indent="  ",
                      subsequent_indent="      ") for c in sub.choices.values())
    return p


def main(argv: list[str] | None = None) -> int:
    cli_util.ensure_runtime_dir()
    try:
        args = build_parser().parse_args(argv)
        return args.fn(args)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        cli_util.exit_interrupted()
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): no traceback
        cli_util.quiet_stdout()
        return 141
