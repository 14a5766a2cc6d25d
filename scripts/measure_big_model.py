"""Load time and peak memory of models with big external weights: the engine beside onnxruntime.

    python scripts/measure_big_model.py [--sizes 1gib,2.28gb] [--keep DIR] [--run]

Builds, in a temporary folder, a MatMul model with one 1 GiB float32 weight ([16384, 16384])
and a Gather (embedding) model with one 2.28 GB weight ([139264, 4096]), both stored as
external data. Each load runs in a fresh subprocess, which reports its wall time and its
peak resident memory (``ru_maxrss``) before and after the load. onnxruntime (creating an
``InferenceSession``) is a yardstick only. With ``--run`` each process also runs the model
once (engine: a CPU Worker), so the comparison includes preparing the weights for a run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHUNK_ROWS = 1024

#: name -> (op, weight shape)
MODELS = {
    "1gib": ("MatMul", (16384, 16384)),
    "2.28gb": ("Gather", (139264, 4096)),
}


def _external_tensor(name: str, shape: tuple[int, ...], location: str) -> TensorProto:
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(shape)
    t.data_location = TensorProto.EXTERNAL
    nbytes = int(np.prod(shape)) * 4
    for key, value in (("location", location), ("offset", "0"), ("length", str(nbytes))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


def build(folder: str, key: str, seed: int = 0) -> str:
    """Write ``<key>.onnx`` and its weight file into ``folder``; returns the model's path."""
    op, shape = MODELS[key]
    data_name = f"{key}.weights"
    rng = np.random.default_rng(seed)
    with open(os.path.join(folder, data_name), "wb") as f:
        for start in range(0, shape[0], CHUNK_ROWS):
            rows = min(CHUNK_ROWS, shape[0] - start)
            f.write(rng.standard_normal((rows, shape[1]), dtype=np.float32).tobytes())
    w = _external_tensor("w", shape, data_name)
    if op == "MatMul":
        node = helper.make_node("MatMul", ["x", "w"], ["y"])
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, shape[0]])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, shape[1]])
    else:
        node = helper.make_node("Gather", ["w", "x"], ["y"], axis=0)
        x = helper.make_tensor_value_info("x", TensorProto.INT64, [8])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, shape[1]])
    graph = helper.make_graph([node], key, [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = os.path.join(folder, f"{key}.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


_CHILD = r"""
import json, resource, sys, time
import numpy as np
path, who, run = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
kib = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if who == "engine":
    from engine import BackendType, ModelLoader, Worker
else:
    import onnxruntime as ort
before = kib()
t0 = time.perf_counter()
if who == "engine":
    model = ModelLoader.load(path)
    spec = model.inputs[0]
else:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    spec = sess.get_inputs()[0]
load_s = time.perf_counter() - t0
out = {"load_s": load_s, "rss_before_kib": before, "rss_peak_kib": kib()}
if run:
    shape = tuple(spec.shape)
    x = (np.arange(shape[0]) * 7 % 1000).astype(np.int64) if len(shape) == 1 else \
        np.random.default_rng(1).standard_normal(shape, dtype=np.float32)
    t0 = time.perf_counter()
    if who == "engine":
        with Worker(model, BackendType.CPU) as w:
            w.schedule(x)
            y = w.peek_output().download_to_array()
    else:
        y = sess.run(None, {spec.name: x})[0]
    out.update(run_s=time.perf_counter() - t0, rss_peak_run_kib=kib(),
               checksum=float(np.abs(y).sum(dtype=np.float64)))
print(json.dumps(out))
"""


def measure(path: str, who: str, run: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", _CHILD, path, who, "1" if run else "0"],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fmt(r: dict) -> str:
    if "error" in r:
        return f"error: {r['error']}"
    text = (f"load {r['load_s']:6.2f} s, peak {r['rss_peak_kib'] / 2**20:5.2f} GiB "
            f"(after imports {r['rss_before_kib'] / 2**20:4.2f} GiB)")
    if "run_s" in r:
        text += (f"; load+run peak {r['rss_peak_run_kib'] / 2**20:5.2f} GiB, run "
                 f"{r['run_s']:.2f} s, checksum {r['checksum']:.6g}")
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(MODELS), help="comma-separated: 1gib, 2.28gb")
    ap.add_argument("--keep", help="build the models in this folder and keep them")
    ap.add_argument("--run", action="store_true", help="also run each model once")
    ap.add_argument("--only", choices=["engine", "onnxruntime"], help="measure one side")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.keep) as tmp:
        folder = args.keep or tmp
        for key in args.sizes.split(","):
            path = os.path.join(folder, f"{key}.onnx")
            if not os.path.exists(path):
                path = build(folder, key)
            size = os.path.getsize(os.path.join(folder, f"{key}.weights"))
            print(f"{key}: {MODELS[key][0]} with a {size / 1e9:.2f} GB external weight")
            sides = [args.only] if args.only else ["engine", "onnxruntime"]
            results = {who: measure(path, who, args.run) for who in sides}
            for who, r in results.items():
                print(f"  {who:<12} {_fmt(r)}")
            if len(results) == 2 and all("error" not in r for r in results.values()):
                e, o = results["engine"], results["onnxruntime"]
                grow = [(r["rss_peak_kib"] - r["rss_before_kib"]) / 2**10 for r in (e, o)]
                print(f"  engine / onnxruntime: load time {e['load_s'] / o['load_s']:.2f}x, "
                      f"peak memory {e['rss_peak_kib'] / o['rss_peak_kib']:.2f}x; the load "
                      f"itself adds {grow[0]:.0f} MiB (engine) and {grow[1]:.0f} MiB "
                      "(onnxruntime) to the process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
