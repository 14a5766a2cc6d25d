"""``python -m engine bench``: median latency per model and backend, optionally next to
onnxruntime in the same process with the same thread count.

Each model is warmed up first (compiles/loads kernels, touches memory). Timed runs of the
engine and of onnxruntime alternate in a few blocks, so a load change on a shared machine
hits both sides alike and the ratio stays meaningful; blocks rather than single runs keep
onnxruntime's spinning pool threads from eating into the engine's runs. onnxruntime is a
yardstick only: it never computes an engine result.

``--host`` adds, for GPU backends, the host µs per layer (``engine.hostclock``: recording and
submitting a run, the GPU excluded) and the summed GPU timestamps beside the latency.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from engine.backends import BackendType
from engine.bench_memory import (
    engine_peak_bytes,
    finish_tuning,
    model_flops,
    onnxruntime_peak_bytes,
)
from engine.errors import EngineError

WARMUP_RUNS = 2
#: timed runs come in this many alternating blocks (engine, then onnxruntime)
ROUNDS = 4
SETTLE_S = 0.05
#: untimed runs before every timed block, for at least this long, engine and onnxruntime
#: alike: after 50 ms idle this VM ran the next ~100 ms of work up to 2x slower (both cores
#: slowed, not only the engine's), and onnxruntime's pool, which spins ~30 ms after a run,
#: kept its own cores busy through that while the engine's block started cold
WARM_S = 0.15


def _warm(run) -> None:
    """Call ``run()`` until WARM_S has passed (at least once)."""
    t_end = time.perf_counter() + WARM_S
    run()
    while time.perf_counter() < t_end:
        run()


def _timed_engine(worker, feeds, out_name, clock=None) -> float:
    t0, c0 = time.perf_counter(), time.thread_time()
    worker.schedule(feeds)
    if clock is not None:
        clock.caller_s += time.thread_time() - c0
    worker.peek_output(out_name).download_to_array()
    return (time.perf_counter() - t0) * 1e3


def _ort_session(path: str, threads: int):
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise EngineError("--compare onnxruntime needs the onnxruntime package "
                          "(pip install onnxruntime)") from exc
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _set_cpu_threads(threads: int) -> None:
    from engine import executor
    from engine.backends.cpu import threads as cpu_threads

    executor.call(cpu_threads.set_threads, threads)


def _suite_models(suite: str) -> list[tuple[str, str, dict | None]]:
    """Models of a named suite: ``zoo``, ``families`` or ``families:NAME[,NAME...]``."""
    kind, _, picked = suite.partition(":")
    if kind == "zoo":
        from engine import zoo

        return [(name, zoo.build(name), None) for name in zoo.ZOO]
    if kind == "families":
        from engine import families

        names = picked.split(",") if picked else list(families.FAMILIES)
        try:
            chosen = [families.get(n) for n in names]
        except ValueError as exc:
            raise EngineError(str(exc)) from None
        # each family brings its own realistic inputs (token ids in range, padded masks...)
        return [(f.name, families.path(f.name), f.inputs("bench")) for f in chosen]
    raise EngineError(f"unknown bench suite {suite!r}; use zoo, families or families:NAME")


def _model_paths(args) -> list[tuple[str, str, dict | None]]:
    paths = [(os.path.splitext(os.path.basename(m))[0], m, None) for m in args.models]
    suites = list(getattr(args, "suite", None) or [])
    if args.zoo and "zoo" not in suites:
        suites.insert(0, "zoo")
    for suite in suites:
        paths += _suite_models(suite)
    if not paths:
        raise EngineError("bench needs MODEL files, --zoo or --suite")
    return paths


def bench_model(name: str, path: str, backends: list[BackendType], repeat: int, threads: int,
                compare: bool, progress=print, feeds: dict | None = None,
                host: bool = False) -> list[dict]:
    """Benchmark one model; returns result rows (``model, backend, median_ms, min_ms, runs,
    gflops, peak_mb``: see ``engine.bench_memory``).

    ``feeds`` are the inputs to time (seeded random ones when None). ``host``: GPU backends'
    rows also get ``host_us_per_layer`` (median host time of a run divided by the model's
    layers, see ``engine.hostclock``) and ``gpu_ms`` (the median sum of the run's GPU
    timestamps)."""
    from engine import ModelLoader, Worker
    from engine.hostclock import HostClock
    from engine.inputs import random_feeds

    model = ModelLoader.load(path)
    if feeds is None:
        feeds = random_feeds(model, seed=0)
    out_name = model.outputs[0].name
    session = _ort_session(path, threads) if compare else None
    ort_feeds = {k: v for k, v in feeds.items()}
    times: dict[str, list[float]] = {b.value: [] for b in backends}
    if compare:
        times["onnxruntime"] = []
    workers = {}
    clocks: dict[str, HostClock] = {}
    warm_ms: dict[str, float] = {}  # the last warm-up run's time, per backend
    try:
        for b in backends:
            workers[b.value] = Worker(model, b)
            if host and b is not BackendType.CPU:
                clocks[b.value] = HostClock(workers[b.value])
            for _ in range(WARMUP_RUNS):
                warm_ms[b.value] = _timed_engine(workers[b.value], feeds, out_name)
            finish_tuning(workers[b.value],
                          lambda w=workers[b.value]: _timed_engine(w, feeds, out_name))
        for _ in range(WARMUP_RUNS if compare else 0):
            session.run(None, ort_feeds)
        rounds = min(repeat, ROUNDS)
        for r in range(rounds):
            count = repeat * (r + 1) // rounds - repeat * r // rounds
            for key, worker in workers.items():
                clock = clocks.get(key)
                last_ms = times[key][-1] if times[key] else warm_ms.get(key, 0.0)
                if key == BackendType.CPU.value or last_ms < WARM_S * 1e3:
                    # a GPU clocks down while idle too: on an H100 BERT ran 3x slower right
                    # after onnxruntime's block. A run longer than WARM_S (lavapipe's) keeps
                    # the device busy by itself.
                    _warm(lambda worker=worker: _timed_engine(worker, feeds, out_name))
                for _ in range(count):
                    if clock is not None:
                        clock.start_run()
                    times[key].append(_timed_engine(worker, feeds, out_name, clock))
                    if clock is not None:
                        clock.end_run()
            if compare:
                time.sleep(SETTLE_S)
                _warm(lambda: session.run(None, ort_feeds))
                for _ in range(count):
                    t0 = time.perf_counter()
                    session.run(None, ort_feeds)
                    times["onnxruntime"].append((time.perf_counter() - t0) * 1e3)
                time.sleep(SETTLE_S)  # onnxruntime's pool spins for a while after a run
        flops = model_flops(next(iter(workers.values()))) if workers else 0.0
        peaks = {key: engine_peak_bytes(w, feeds, out_name) for key, w in workers.items()}
        if compare:
            peaks["onnxruntime"] = onnxruntime_peak_bytes(path, ort_feeds, threads)
    finally:
        for w in workers.values():
            w.close()
    rows = [{"model": name, "backend": key, "median_ms": float(np.median(v)),
             "min_ms": float(np.min(v)), "runs": len(v),
             "gflops": flops / np.median(v) / 1e6 if flops else None,
             "peak_mb": None if peaks.get(key) is None else peaks[key] / 2**20}
            for key, v in times.items()]
    for r in rows:
        clock = clocks.get(r["backend"])
        if clock is not None:
            r.update(clock.summary(len(model.layers)))
    return rows


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def format_table(rows: list[dict]) -> str:
    """A text table with ratios to onnxruntime and their geometric mean per backend."""
    from engine.cli_util import table

    ort = {r["model"]: r["median_ms"] for r in rows if r["backend"] == "onnxruntime"}
    host = any("host_us_per_layer" in r for r in rows)
    header = ["model", "backend", "median ms", "min ms", "runs", "GFLOP/s", "peak MB"]
    header += ["vs ort"] if ort else []
    header += ["host us/layer", "gpu ms", "ms/gpu"] if host else []
    ceiling = any("ceiling_pct" in r for r in rows)
    header += ["ceiling GFLOP/s", "% ceiling"] if ceiling else []
    cells = []
    ratios: dict[str, list[float]] = {}
    for r in rows:
        line = [r["model"], r["backend"], f"{r['median_ms']:.2f}", f"{r['min_ms']:.2f}",
                str(r["runs"]), _number(r.get("gflops")), _number(r.get("peak_mb"))]
        if ort:
            line.append("")
        if ort and r["backend"] != "onnxruntime" and r["model"] in ort:
            ratio = r["median_ms"] / ort[r["model"]]
            ratios.setdefault(r["backend"], []).append(ratio)
            line[-1] = f"{ratio:.2f}x"
        if host:
            gpu = r.get("gpu_ms") or 0.0
            if "host_us_per_layer" in r:
                line += [f"{r['host_us_per_layer']:.1f}", f"{gpu:.2f}",
                         f"{r['median_ms'] / gpu:.1f}x" if gpu else "-"]
            else:
                line += ["", "", ""]
        if ceiling:
            line += [f"{r['ceiling_gflops']:.2f}", f"{r['ceiling_pct']:.0f}%"] \
                if "ceiling_pct" in r else ["", ""]
        cells.append(line)
    lines = [table(header, cells, right=set(range(2, len(header))))]
    for backend, rs in ratios.items():
        geo = math.exp(sum(math.log(x) for x in rs) / len(rs))
        lines.append(f"geometric mean of median ratios, {backend} / onnxruntime: {geo:.2f}x "
                     f"over {len(rs)} model(s)")
    return "\n".join(lines)


def _ceiling() -> float:
    """The GPU_COMPUTE adapter's matmul ceiling, GFLOP/s (``microbench.matmul_ceiling``)."""
    from engine import executor
    from engine.backends.gpu_compute.microbench import matmul_ceiling

    return executor.call(matmul_ceiling)


def run_bench(args) -> int:
    """Entry point of ``python -m engine bench`` (arguments from ``engine.cli``)."""
    from engine.backends.cpu import threads as cpu_threads

    backends = args.backend or [BackendType.CPU]
    threads = args.threads or cpu_threads.default_threads()
    _set_cpu_threads(threads)
    compare = args.compare == "onnxruntime"
    rows: list[dict] = []
    ceiling = BackendType.GPU_COMPUTE in backends and getattr(args, "ceiling", False)
    # measured again after every model: this machine's speed drifts over minutes, so each
    # model is set against the better of the two measurements beside it in time
    ceilings = [_ceiling()] if ceiling else []
    for name, path, feeds in _model_paths(args):
        model_rows = bench_model(name, path, backends, max(1, args.repeat), threads, compare,
                                 feeds=feeds, host=getattr(args, "host", False))
        for r in model_rows:
            print(f"  {r['model']:<16} {r['backend']:<12} median {r['median_ms']:.2f} ms",
                  flush=True)
        if ceiling:
            ceilings.append(_ceiling())
            near = max(ceilings[-2:])
            for r in model_rows:
                if r["backend"] == BackendType.GPU_COMPUTE.value and r.get("gflops"):
                    r["ceiling_gflops"] = near
                    r["ceiling_pct"] = 100.0 * r["gflops"] / near
        rows += model_rows
    if ceiling:
        print(f"matmul ceiling of the adapter: {max(ceilings):.2f} GFLOP/s (measured before "
              f"the first model and after each: {', '.join(f'{c:.2f}' for c in ceilings)}; "
              "a model's share is of the better of the two beside it)")
    print(f"threads: {threads}")
    print(format_table(rows))
    if args.json:
        from engine.cli_util import dumps

        with open(args.json, "w") as f:
            f.write(dumps({"results": rows}, indent=1))
    return 0
