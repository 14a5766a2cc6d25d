"""Per-layer cost of the CPU backend on models of many tiny layers, next to onnxruntime.

Builds two models in a temporary folder and benchmarks them with ``engine.bench`` (engine
and onnxruntime alternate in one process):

* ``chain``: LAYERS small layers (Add, Mul, Relu, Reshape, Sigmoid, Sub in turn) on [1, 64];
* ``lstm``: one streaming step of a small speech-style model: two LSTM layers (hidden 64)
  on one frame with the state passed in and out, plus a Gemm head.

Prints median latency and microseconds per layer (total / layers), and the CPU run loop's
own cost per layer: the chain run with every kernel replaced by a pass-through (minimum and
median over many runs, thread CPU time too, which a busy machine inflates less). Usage::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python scripts/bench_tiny_layers.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# the checkout this script belongs to, not an installed copy
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from engine.backends import BackendType  # noqa: E402


def chain_model(layers: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    cur = "x"
    for i in range(layers):
        out = f"t{i}"
        kind = i % 6
        if kind in (0, 1, 5):
            c = f"c{i}"
            inits.append(numpy_helper.from_array(
                rng.uniform(0.9, 1.1, (1, 64)).astype(np.float32), c))
            op = {0: "Add", 1: "Mul", 5: "Sub"}[kind]
            nodes.append(helper.make_node(op, [cur, c], [out]))
        elif kind == 2:
            nodes.append(helper.make_node("Relu", [cur], [out]))
        elif kind == 3:
            s = f"s{i}"
            inits.append(numpy_helper.from_array(np.array([1, 64], np.int64), s))
            nodes.append(helper.make_node("Reshape", [cur, s], [out]))
        else:
            nodes.append(helper.make_node("Sigmoid", [cur], [out]))
        cur = out
    nodes.append(helper.make_node("Identity", [cur], ["y"]))
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def lstm_model(hidden: int = 64, feat: int = 40, layers: int = 2) -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    nodes, inits, ins, outs = [], [], [], []
    ins.append(helper.make_tensor_value_info("frame", TensorProto.FLOAT, [1, 1, feat]))
    cur, size = "frame", feat
    for k in range(layers):
        w = rng.normal(0, 0.1, (1, 4 * hidden, size)).astype(np.float32)
        r = rng.normal(0, 0.1, (1, 4 * hidden, hidden)).astype(np.float32)
        b = rng.normal(0, 0.1, (1, 8 * hidden)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"W{k}"), numpy_helper.from_array(r, f"R{k}"),
                  numpy_helper.from_array(b, f"B{k}")]
        for s in ("h", "c"):
            ins.append(helper.make_tensor_value_info(f"{s}{k}", TensorProto.FLOAT,
                                                     [1, 1, hidden]))
            outs.append(helper.make_tensor_value_info(f"{s}{k}_out", TensorProto.FLOAT,
                                                      [1, 1, hidden]))
        nodes.append(helper.make_node("LSTM", [cur, f"W{k}", f"R{k}", f"B{k}", "", f"h{k}",
                                               f"c{k}"], [f"y{k}", f"h{k}_out", f"c{k}_out"],
                                      hidden_size=hidden))
        nodes.append(helper.make_node("Squeeze", [f"y{k}", "ax1"], [f"ys{k}"]))
        cur, size = f"ys{k}", hidden
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "ax1"))
    inits.append(numpy_helper.from_array(rng.normal(0, 0.1, (hidden, 32)).astype(np.float32),
                                         "Wo"))
    inits.append(numpy_helper.from_array(np.zeros(32, np.float32), "bo"))
    nodes.append(helper.make_node("Reshape", [cur, "shape2"], ["flat"]))
    inits.append(numpy_helper.from_array(np.array([1, hidden], np.int64), "shape2"))
    nodes.append(helper.make_node("Gemm", ["flat", "Wo", "bo"], ["logits"]))
    nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], axis=-1))
    outs.insert(0, helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 32]))
    g = helper.make_graph(nodes, "lstm_stream", ins, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def loop_cost(path: str, runs: int = 300) -> tuple[float, float, float, int]:
    """(min, median wall, median thread CPU) microseconds per layer of ``run_on_cpu`` with
    pass-through kernels, and the number of layers."""
    import time

    from engine import ModelLoader, Worker
    from engine.inputs import random_feeds
    from engine.run_loops import run_on_cpu

    model = ModelLoader.load(path)
    feeds = random_feeds(model, seed=0)
    with Worker(model, BackendType.CPU) as worker:
        steps = worker._cpu_steps()
        steps[:] = [(st[0], _pass) + tuple(st[2:]) for st in steps]
        wall, cpu = [], []
        for k in range(runs + 20):
            t, c = time.perf_counter(), time.thread_time()
            for _ in run_on_cpu(worker, feeds, {}, set()):
                pass
            if k >= 20:
                wall.append(time.perf_counter() - t)
                cpu.append(time.thread_time() - c)
    n = len(model.layers)
    return (min(wall) * 1e6 / n, float(np.median(wall)) * 1e6 / n,
            float(np.median(cpu)) * 1e6 / n, n)


def _pass(layer, inputs):
    return inputs[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    from engine.bench import _set_cpu_threads, bench_model, format_table

    _set_cpu_threads(args.threads)
    tmp = tempfile.mkdtemp(prefix="tiny_layers_")
    models = {"chain": chain_model(args.layers), "lstm": lstm_model()}
    rows = []
    for name, proto in models.items():
        path = os.path.join(tmp, f"{name}.onnx")
        onnx.save(proto, path)
        rows += bench_model(name, path, [BackendType.CPU], args.repeat, args.threads, True,
                            progress=None)
        n = len(proto.graph.node)
        for r in rows[-2:]:
            print(f"{name:<6} {r['backend']:<12} {r['median_ms'] * 1e3 / n:7.2f} us/layer "
                  f"({n} layers, median {r['median_ms']:.3f} ms)")
    print(format_table(rows))
    lo, med, cpu, n = loop_cost(os.path.join(tmp, "chain.onnx"))
    print(f"run loop alone (pass-through kernels, {n} layers): min {lo:.2f} us/layer, "
          f"median {med:.2f} (thread CPU {cpu:.2f})")


if __name__ == "__main__":
    main()
