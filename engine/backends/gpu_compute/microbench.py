"""GFLOP/s of the matmul and conv shaders against reference matmuls, timed by GPU timestamps.

``python -m engine.backends.gpu_compute.microbench [--size 512] [--repeat 3]`` prints one line
per shader; the numbers go into docs/PERFORMANCE.md. Results are checked against NumPy.
"""

from __future__ import annotations

import argparse

import numpy as np

from engine.backends.gpu_compute.backend import GpuComputeBackend
from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.pipelines import Program
from engine.model import Layer
from engine.ops.base import Meta


def _time(backend: GpuComputeBackend, name: str, record, repeat: int, pick=min) -> float:
    """GPU milliseconds of ``record()`` (which dispatches under layer ``name``): the best of
    ``repeat`` runs, or what ``pick`` takes of them."""
    runs = []
    for k in range(repeat + 1):  # the first run includes lavapipe's shader compile
        backend.begin_run()
        backend._layer = name
        record()
        backend._layer = None
        backend.flush()
        times = backend.collect_timings().result()
        if k:
            runs.append(sum(times.values()))
    return float(pick(runs))


def bench_matmul(backend, n: int, repeat: int, pick=min) -> dict[str, float]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b
    ha, hb = backend.upload(a), backend.upload(b)
    meta = Meta((n, n), np.dtype(np.float32))
    out = {}
    for name, path, groups in (("reference register-blocked", "bench_matmul_ref.wgsl",
                                (n // 4 // 8, n // 4 // 8, 1)),
                               ("reference workgroup-tiled", "bench_matmul_tiled.wgsl",
                                (-(-n // 16), -(-n // 16), 1)),
                               ("reference column-per-invocation", "bench_matmul_cols.wgsl",
                                (n // 64, n // 8, 1))):
        hc = backend.tensor(meta)
        ms = _time(backend, name, lambda p=path, g=groups, c=hc: backend.dispatch(
            Program.of(p), [ha, hb, c], pack(n, n, n, 0), g), repeat, pick)
        _check(backend.download(hc, meta), ref, name)
        out[name] = 2 * n ** 3 / ms / 1e6
    layer = Layer("mm", "MatMul", ["a", "b"], ["c"], {}, opset=13)
    metas = [Meta.of(a), Meta.of(b)]
    default = backend.matmul_variant
    for variant in ("blocked", "tiled"):
        backend.matmul_variant = variant
        holder: list = []

        def record(holder=holder):
            holder.append(backend.run_layer(layer, [ha, hb], metas, [meta])[0])

        name = f"MatMul (engine, {variant})"
        ms = _time(backend, name, record, repeat, pick)
        _check(backend.download(holder[-1], meta), ref, name)
        out[name] = 2 * n ** 3 / ms / 1e6
    backend.matmul_variant = default
    return out


def matmul_ceiling(n: int = 512, repeat: int = 5, batch: int = 4) -> float:
    """The adapter's matmul ceiling in GFLOP/s: the better of the simple register-blocked
    reference and the engine's own matmul at ``n``³, by wall clock: ``batch`` products in one
    submission, waited for through a readback (its cost spread over them), median of
    ``repeat`` such runs. (Wall clock, not timestamps: a backend made after others on the
    same device read back timestamps that made its products look 500x faster.) Run it on
    the engine thread, which owns the wgpu objects."""
    import time

    backend = GpuComputeBackend()
    try:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        ref = a.astype(np.float64) @ b
        ha, hb = backend.upload(a), backend.upload(b)
        meta = Meta((n, n), np.dtype(np.float32))
        layer = Layer("mm", "MatMul", ["a", "b"], ["c"], {}, opset=13)
        metas = [Meta.of(a), Meta.of(b)]
        backend.matmul_variant = "blocked"
        hc = backend.tensor(meta)
        groups = (n // 4 // 8, n // 4 // 8, 1)

        def reference():
            backend.dispatch(Program.of("bench_matmul_ref.wgsl"), [ha, hb, hc],
                             pack(n, n, n, 0), groups)
            return hc

        def engine_matmul():
            return backend.run_layer(layer, [ha, hb], metas, [meta])[0]

        best = 0.0
        for record in (reference, engine_matmul):
            runs = []
            for k in range(repeat + 1):  # the first includes the shader compile
                t0 = time.perf_counter()
                backend.begin_run()
                outs = [record() for _ in range(batch)]
                backend.flush()
                got = backend.download(outs[-1], meta)
                if k:
                    runs.append((time.perf_counter() - t0) / batch)
                for h in outs:
                    if h is not hc:
                        backend.free(h)
            _check(got, ref, record.__name__)
            best = max(best, 2 * n ** 3 / float(np.median(runs)) / 1e9)
        return best
    finally:
        backend.close()


def bench_conv(backend, repeat: int) -> dict[str, float]:
    """ResNet-like 3x3 and 1x1 convolutions through the engine's Conv kernel."""
    rng = np.random.default_rng(1)
    out = {}
    for c, m, hw, k in ((64, 64, 56, 3), (256, 512, 14, 1), (256, 256, 14, 3)):
        x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
        w = (rng.standard_normal((m, c, k, k)) * 0.1).astype(np.float32)
        layer = Layer("conv", "Conv", ["x", "w"], ["y"],
                      {"pads": [k // 2] * 4, "strides": [1, 1], "kernel_shape": [k, k],
                       "dilations": [1, 1], "group": 1, "auto_pad": "NOTSET"}, opset=13)
        hx, hw_ = backend.upload(x), backend.upload(w)
        meta = Meta((1, m, hw, hw), np.dtype(np.float32))
        for strategy in ("implicit", "im2col"):
            backend.conv_strategy = strategy
            holder: list = []
            name = f"Conv {k}x{k} {c}->{m} @{hw}x{hw} ({strategy})"

            metas = (Meta.of(x), Meta.of(w))

            def record(layer=layer, args=(hx, hw_), metas=metas, meta=meta, holder=holder):
                holder.append(backend.run_layer(layer, list(args), list(metas), [meta])[0])

            ms = _time(backend, name, record, repeat)
            y = backend.download(holder[-1], meta)
            _check(y, _conv_ref(x, w, k // 2), name)
            out[name] = 2 * m * c * k * k * hw * hw / ms / 1e6
    return out


def _conv_ref(x, w, pad):
    n, c, h, wd = x.shape
    m, _, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))).astype(np.float64)
    cols = np.stack([xp[:, :, i:i + h, j:j + wd] for i in range(k) for j in range(k)], axis=2)
    return np.einsum("mck,nckhw->nmhw", w.reshape(m, c, k * k), cols)


def _check(got, want, name):
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    if err > 1e-4:
        raise AssertionError(f"{name}: relative L2 error {err:.2e}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-conv", action="store_true")
    args = p.parse_args(argv)
    backend = GpuComputeBackend()
    print(f"adapter: {backend.gpu.name}")
    results = bench_matmul(backend, args.size, args.repeat)
    if not args.no_conv:
        results.update(bench_conv(backend, args.repeat))
    for name, gflops in results.items():
        print(f"{name:<40} {gflops:8.2f} GFLOP/s")
    backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
