"""Winograd against im2col on the zoo's 3x3 stride-1 convolutions: GFLOP/s per layer shape.

Runs each zoo model once on the CPU backend to collect the shapes of its 3x3, stride-1,
ungrouped Conv layers, then times the engine's Conv kernel on each distinct shape with
im2col + sgemm, Winograd F(2, 3) and F(4, 3), alternating the three in rounds (medians;
GFLOP/s counts the direct convolution's 2*M*C*9*oh*ow). Usage::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python scripts/bench_winograd.py [MODEL...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODELS = ["squeezenet", "inception_v1", "inception_v2", "resnet50", "densenet121", "vgg19"]


def zoo_shapes(names) -> dict[tuple, list[str]]:
    """(N, C, H, W, M, pads) -> models, of every 3x3 stride-1 group-1 2-D Conv run."""
    from engine import ModelLoader, Worker, zoo
    from engine.backends.cpu import kernels_conv as kc

    found: dict[tuple, list[str]] = {}
    real = kc._plan

    def spy(layer, x, w, bias):
        attrs = layer.attributes
        if (x.ndim == 4 and w.shape[2:] == (3, 3) and int(attrs.get("group", 1) or 1) == 1
                and list(attrs.get("strides", [1, 1])) == [1, 1]
                and list(attrs.get("dilations", [1, 1])) == [1, 1]):
            pads = tuple(attrs.get("pads", (0, 0, 0, 0)))
            found.setdefault((*x.shape, w.shape[0], pads), []).append(name)
        return real(layer, x, w, bias)

    kc._plan = spy
    try:
        for name in names:
            model = ModelLoader.load(zoo.build(name))
            with Worker(model, "cpu") as worker:
                worker.schedule(zoo.sample_input(model))
                worker.peek_output().download_to_array()
    finally:
        kc._plan = real
    return found


def time_shape(shape, repeat: int, rounds: int = 3) -> dict[str, float]:
    from engine.backends.cpu import kernels_conv as kc
    from engine.backends.cpu import kernels_winograd as kw
    from engine.model import Layer

    N, C, H, W, M, pads = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((M, C, 3, 3)) * 0.1).astype(np.float32)
    b = rng.standard_normal(M).astype(np.float32)
    oh, ow = H + pads[0] + pads[2] - 2, W + pads[1] + pads[3] - 2
    flops = 2.0 * N * M * C * 9 * oh * ow
    layers, times = {}, {}
    for mode in ("im2col", "F2", "F4"):
        kw.FORCE = {"im2col": 0, "F2": 2, "F4": 4}[mode]
        layers[mode] = Layer("t", "Conv", ["x", "w", "b"], ["y"],
                             dict(pads=list(pads), activation="Relu"), opset=21)
        kc.Conv(layers[mode], [x, w, b])  # plan (with FORCE) and compile
        times[mode] = []
    kw.FORCE = None
    for _ in range(rounds):
        for mode, layer in layers.items():
            for _ in range(repeat):
                t = time.perf_counter()
                kc.Conv(layer, [x, w, b])
                times[mode].append(time.perf_counter() - t)
    return {mode: flops / float(np.median(v)) / 1e9 for mode, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=MODELS)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from engine.backends.cpu import threads

    threads.set_threads(2)
    shapes = zoo_shapes(args.models)
    print(f"{'C':>5} {'M':>5} {'HxW':>9} {'layers':>6}  {'im2col':>7} {'F2':>7} {'F4':>7}"
          "  GFLOP/s  best  models")
    for shape in sorted(shapes, key=lambda s: (s[2] * s[3], s[1], s[4])):
        N, C, H, W, M, pads = shape
        g = time_shape(shape, args.repeat)
        best = max(g, key=g.get)
        print(f"{C:>5} {M:>5} {f'{H}x{W}':>9} {len(shapes[shape]):>6}  {g['im2col']:7.1f} "
              f"{g['F2']:7.1f} {g['F4']:7.1f}  {best:>13}  {','.join(sorted(set(shapes[shape])))}",
              flush=True)


if __name__ == "__main__":
    main()
