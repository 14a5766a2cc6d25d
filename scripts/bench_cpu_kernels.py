"""One CPU kernel against onnxruntime on the same single-node model: latency and GFLOP/s.

Each case builds a one-node ONNX model, checks the engine's kernel against onnxruntime
(max error relative to the largest output value), then alternates blocks of timed calls
of both (the engine's kernel is called directly, without the worker) and prints medians.
The default cases are the convolution shapes that dominate the zoo. Usage::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python scripts/bench_cpu_kernels.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: (C, H, W, M, kernel, stride, pad, group) of the default convolution cases
CONVS = [
    (3, 224, 224, 64, 3, 2, 0, 1),     # squeezenet's first layer
    (16, 55, 55, 64, 3, 1, 1, 1),      # squeezenet expand 3x3
    (16, 55, 55, 64, 1, 1, 0, 1),      # squeezenet expand 1x1
    (64, 56, 56, 64, 3, 1, 1, 1),      # resnet50 stage 1
    (256, 56, 56, 64, 1, 1, 0, 1),
    (64, 56, 56, 256, 1, 1, 0, 1),
    (128, 28, 28, 128, 3, 1, 1, 1),
    (256, 14, 14, 256, 3, 1, 1, 1),
    (1024, 14, 14, 256, 1, 1, 0, 1),
    (512, 7, 7, 512, 3, 1, 1, 1),
    (240, 28, 28, 240, 3, 1, 1, 240),  # depthwise
]


def single_node(op: str, xshape, attrs: dict, consts: dict) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    node = helper.make_node(op, ["x", *consts], ["y"], **attrs)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [f"d{i}" for i in range(len(xshape))])
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(xshape))], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def bench(proto: onnx.ModelProto, xshape, flops: float, repeat: int, threads: int) -> str:
    import onnxruntime as ort

    from engine import ModelLoader
    from engine.backends.cpu.registry import KERNELS
    from engine.bench import SETTLE_S

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        onnx.save(proto, path)
        model = ModelLoader.load(path)
    layer = model.layers[0]
    fn = KERNELS.lookup(layer).fn
    x = np.random.default_rng(0).standard_normal(xshape).astype(np.float32)
    args = [x] + [model.constants[n] for n in layer.inputs[1:]]
    want = sess.run(None, {"x": x})[0]
    err = np.abs(want - fn(layer, args)).max() / (np.abs(want).max() + 1e-12)
    ours, theirs = [], []
    block = max(1, repeat // 4)
    for _ in range(4):
        for _ in range(block):
            t = time.perf_counter()
            fn(layer, args)
            ours.append(time.perf_counter() - t)
        for _ in range(block):
            t = time.perf_counter()
            sess.run(None, {"x": x})
            theirs.append(time.perf_counter() - t)
        # onnxruntime's pool spins for a while after a run: timed then, the engine shares
        # its cores with it (2-4x slower here)
        time.sleep(SETTLE_S)
    a, b = float(np.median(ours)) * 1e3, float(np.median(theirs)) * 1e3
    rate = f"  {flops / a / 1e6:6.1f} vs {flops / b / 1e6:6.1f} GFLOP/s" if flops else ""
    return f"engine {a:7.3f} ms  onnxruntime {b:7.3f} ms  {a / b:5.2f}x{rate}  err {err:.1e}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--conv", action="append", metavar="C,H,W,M,K,S,P,G",
                    help="a convolution case instead of the defaults (repeatable): input "
                         "channels, height, width, output channels, kernel, stride, pad, group")
    args = ap.parse_args()
    from engine.backends.cpu import threads

    threads.set_threads(args.threads)
    rng = np.random.default_rng(1)
    cases = [tuple(int(v) for v in c.split(",")) for c in args.conv] if args.conv else CONVS
    for C, H, W, M, k, s, p, g in cases:
        w = (rng.standard_normal((M, C // g, k, k)) * 0.1).astype(np.float32)
        b = rng.standard_normal(M).astype(np.float32)
        oh, ow = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
        flops = 2.0 * M * (C // g) * k * k * oh * ow
        proto = single_node("Conv", (1, C, H, W), dict(kernel_shape=[k, k], strides=[s, s],
                                                      pads=[p] * 4, group=g), {"w": w, "b": b})
        name = f"Conv {C}->{M} {k}x{k}/{s} {H}x{W}" + (f" g{g}" if g > 1 else "")
        print(f"{name:<28} {bench(proto, (1, C, H, W), flops, args.repeat, args.threads)}",
              flush=True)
    if args.conv:
        return
    for shape, attrs in (((1, 64, 111, 111), dict(kernel_shape=[3, 3], strides=[2, 2])),
                         ((1, 192, 56, 56), dict(kernel_shape=[3, 3], strides=[2, 2],
                                                 pads=[0, 0, 1, 1]))):
        proto = single_node("MaxPool", shape, attrs, {})
        name = f"MaxPool 3x3/2 {shape[1]}x{shape[2]}"
        print(f"{name:<28} {bench(proto, shape, 0, args.repeat, args.threads)}", flush=True)


if __name__ == "__main__":
    main()
