"""Throughput and memory figures for ``python -m engine bench``.

* GFLOP/s: the model's FLOP count (``engine.ops.costs`` summed over layers, for the timed
  input shapes) over the median latency; the same count is used for onnxruntime.
* Peak memory of a run, engine: the weights plus the Python-heap peak of one steady-state
  run (``tracemalloc`` sees every NumPy array) plus the device's own plan peak for GPU
  backends. onnxruntime: its C++ arena is invisible to tracemalloc, so it is the growth of
  a fresh process's resident high-water mark over creating the session and two runs (the
  kernel's peak RSS is reset first through ``/proc/self/clear_refs``). Both include the
  weights; neither counts the interpreter or the libraries.
"""

from __future__ import annotations

import tracemalloc


def model_flops(worker) -> float:
    """FLOPs of one run at the worker's last scheduled shapes."""
    return float(sum(c.flops for c in worker.layer_costs().values()))


def cpu_kept_bytes(model) -> int:
    """What the CPU kernels keep between runs for ``model``'s layers: packed copies of its
    weights (``gemm_packed``), kept phase planes (``conv_blocked.kept_planes``), and the
    packed weights and reused outputs of channel-blocked regions (``blocked_step``)."""
    from engine.backends.cpu import conv_plan, gemm_packed

    return (sum(gemm_packed.packed_bytes(w) for w in model.constants.values())
            + sum(conv_plan.kept_bytes(layer) + layer.__dict__.get("_cpu_blocked_bytes", 0)
                  for layer in model.layers))


def finish_tuning(worker, run) -> None:
    """Call ``run()`` while the worker's CPU thread tuning (``thread_tuning``) is still
    timing runs, at most 64 times: benchmarks and memory figures measure the tuned state
    (the tuning's runs alternate kernel variants, and the first use of one compiles it)."""
    for _ in range(64):
        if not worker._cpu_tuning():
            return
        run()


def engine_peak_bytes(worker, feeds: dict, out_name: str) -> int:
    """Weights + what the CPU kernels keep for them between runs (``cpu_kept_bytes``) + the
    heap peak of one run (+ the device plan's peak on a GPU backend)."""
    weights = sum(getattr(v, "nbytes", 0) for v in worker.model.constants.values())
    worker.schedule(feeds)
    worker.peek_output(out_name).download_to_array()  # warm: caches and plans exist
    finish_tuning(worker, lambda: worker.schedule(feeds).peek_output(out_name)
                  .download_to_array())
    started = tracemalloc.is_tracing()
    if not started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    worker.schedule(feeds)
    worker.peek_output(out_name).download_to_array()
    peak = tracemalloc.get_traced_memory()[1] - base
    if not started:
        tracemalloc.stop()
    kept = cpu_kept_bytes(worker.model)
    return weights + kept + max(peak, 0) + int(worker.peak_memory_bytes or 0)


_ORT_PEAK_SCRIPT = """
import sys, numpy as np, onnxruntime as ort
def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
feeds = dict(np.load(sys.argv[2]))
so = ort.SessionOptions()
so.intra_op_num_threads = int(sys.argv[3])
so.log_severity_level = 3
open("/proc/self/clear_refs", "w").write("5")
before = kib("VmRSS")
session = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
for _ in range(2):
    session.run(None, feeds)
print(kib("VmHWM") - before)
"""


def onnxruntime_peak_bytes(path: str, feeds: dict, threads: int) -> int | None:
    """Resident high-water growth over creating the session and two runs, measured in a
    fresh process (in this one, memory freed by earlier sessions is reused unseen);
    None where that cannot be measured (not Linux, no onnxruntime)."""
    import os
    import subprocess
    import sys
    import tempfile

    import numpy as np

    if not os.path.exists("/proc/self/clear_refs"):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        inputs = os.path.join(tmp, "feeds.npz")
        np.savez(inputs, **feeds)
        try:
            out = subprocess.run([sys.executable, "-c", _ORT_PEAK_SCRIPT, path, inputs,
                                  str(threads)], capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired):
            return None
    try:
        return max(int(out.stdout.strip().splitlines()[-1]), 0) * 1024
    except (ValueError, IndexError):
        return None
