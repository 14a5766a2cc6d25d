"""Screenshots of the analysis features (compare, moved layers, symbolic shapes, batch,
memory, GFLOP/s); called by ``scripts/screenshots.py``."""

from __future__ import annotations

import os

import numpy as np
import onnx

from engine import BackendType, zoo
from engine.compare import CPU_FLOAT64
from workbench.diagnostics import wait_until


def dynamic_squeezenet(folder: str) -> str:
    """squeezenet with symbolic batch, height and width (a copy in ``folder``)."""
    model = onnx.load(zoo.build("squeezenet"))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for d, name in zip(dims, ["batch", None, "height", "width"]):
        if name:
            d.Clear()
            d.dim_param = name
    del model.graph.value_info[:]
    for out in model.graph.output:
        odims = out.type.tensor_type.shape.dim
        odims[0].Clear()
        odims[0].dim_param = "batch"
        for d in odims[2:]:
            d.Clear()
            d.dim_param = "?"
    path = os.path.join(folder, "squeezenet_dynamic.onnx")
    onnx.save(model, path)
    return path


class FeatureShots:
    """Drives one window through each feature and saves a PNG per feature."""

    def __init__(self, app, window, out: str, tmp: str):
        self.app, self.w, self.out, self.tmp = app, window, out, tmp

    def _open(self, path: str, backend: BackendType = BackendType.CPU) -> None:
        loaded: list = []
        self.w.model_loaded.connect(loaded.append)
        self.w.open_model(path)
        wait_until(self.app, lambda: bool(loaded), 300)
        self.w.model_loaded.disconnect(loaded.append)
        self.w.set_backend(backend)
        if not wait_until(self.app, lambda: bool(self.w.placement), 300):
            raise SystemExit(f"{path}: backend not ready: {self.w.messages[-1:]}")

    def _run(self, times: int = 1) -> None:
        for _ in range(times):
            done: list = []
            self.w.run_completed.connect(done.append)
            n = len(self.w.messages)
            self.w.start_run(False)
            # a run's result is shown after the run has ended: wait for it, or for an error
            wait_until(self.app, lambda d=done, n=n: bool(d) or len(self.w.messages) > n, 600)
            wait_until(self.app, lambda: not self.w.running, 60)
            self.w.run_completed.disconnect(done.append)

    def _save(self, name: str) -> None:
        self.w.message_bar.dismiss()
        wait_until(self.app, lambda: False, 0.6)  # let the last repaints land
        path = os.path.join(self.out, f"workbench-{name}.png")
        self.w.grab().save(path)
        print(f"wrote {path}")

    def compare(self, backend=BackendType.GPU_COMPUTE, against=BackendType.CPU,
                name: str = "compare-inception_v1") -> None:
        """inception_v1, GPU compute against the CPU, first layer over a threshold centred."""
        self._open(zoo.build("inception_v1"), backend)
        done: list = []
        self.w.compare_completed.connect(done.append)
        self.w.compare_backends(backend, against)
        wait_until(self.app, lambda: bool(done), 900)
        self.w.compare_completed.disconnect(done.append)
        if not done:
            raise SystemExit(f"compare failed: {self.w.messages[-1:]}")
        rel = sorted(r["rel_l2"] for r in done[0].layers if r["rel_l2"] > 0)
        if rel:  # a threshold the later layers pass: shows where the error grows
            self.w.set_compare_threshold(float(f"{rel[int(len(rel) * 0.8)]:.1g}"))
        self.w.graph.zoom(1.0)
        self._save(name)

    def compare_float64(self) -> None:
        """inception_v1, GPU pixel against the CPU computing in float64."""
        self.compare(BackendType.GPU_PIXEL, CPU_FLOAT64, "compare-f64-inception_v1")

    def move_layers(self) -> None:
        """inception_v1 on GPU compute with the 1×1 convolutions of one block on the CPU."""
        self._open(zoo.build("inception_v1"), BackendType.GPU_COMPUTE)
        model = self.w.loaded.model
        convs = [la.name for la in model.layers if la.op_type.startswith("Conv")][8:12]
        self.w.set_layer_backend(convs, BackendType.CPU)
        wait_until(self.app, lambda: bool(self.w.placement), 300)
        self._run(3)
        self.w.select_layer(convs[0])
        self.w.docks["timing"].raise_()
        self._save("move-inception_v1-gpu-compute")
        self.w.timing.set_metric("gflops")
        self._save("gflops-inception_v1-gpu-compute")
        self.w.timing.set_metric("ms")
        self.w.set_layer_backend(convs, None)

    def dynamic_shapes(self) -> None:
        """squeezenet with symbolic dims: 2×3×480×640 makes one GPU layer fall back."""
        self._open(dynamic_squeezenet(self.tmp), BackendType.GPU_COMPUTE)
        shown: list = []
        self.w.placement_shown.connect(shown.append)
        name = self.w.loaded.model.inputs[0].name
        self.w.set_input_shape(name, (2, 3, 480, 640))
        wait_until(self.app, lambda: bool(shown), 300)
        self.w.placement_shown.disconnect(shown.append)
        fallback = next((n for n, p in self.w.placement.items() if p.is_fallback), None)
        if fallback:
            self.w.select_layer(fallback)
        self._save("dynamic-squeezenet-gpu-compute")

    def batch(self, demo: str, samples: str) -> None:
        """The demo model on a folder of digits."""
        self._open(demo)
        done: list = []
        self.w.batch_completed.connect(done.append)
        self.w.run_batch([samples])
        wait_until(self.app, lambda: bool(done), 300)
        self.w.batch_completed.disconnect(done.append)
        self._save("batch-digits_cnn")

    def memory(self) -> None:
        """densenet121 on the CPU: live memory along the run, tensors alive at the peak."""
        self._open(zoo.build("densenet121"))
        self._run(1)
        self.w.docks["memory"].raise_()
        rows = self.w.memory_panel.show_peak_tensors()
        if self.w.memory_panel.timeline is not None:
            self.w.select_layer(self.w.memory_panel.names[self.w.memory_panel.timeline.peak_index])
        print(f"memory: {len(rows)} tensors alive at the peak, "
              f"{np.sum([r[1] for r in rows]) / 1e6:.1f} MB")
        self._save("memory-densenet121")
        self.w.docks["timing"].raise_()
