"""Regenerate docs/screenshots/*.png: the window with a model loaded and timings shown.

Runs offscreen by default (``QT_QPA_PLATFORM=offscreen``); under ``xvfb-run`` it uses the
virtual display instead. Usage: ``python scripts/screenshots.py [--out docs/screenshots]``.
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if not os.environ.get("DISPLAY"):
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")
os.makedirs(os.environ["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "screenshots"))
    ap.add_argument("--runs", type=int, default=12, help="runs shown before each capture")
    ap.add_argument("--only", nargs="*", default=None,
                    choices=["demo", "densenet", "gpu", "compare", "compare64", "move",
                             "dynamic", "batch", "memory"],
                    help="take only these screenshots (default: all)")
    args = ap.parse_args()
    wanted = set(args.only or ["demo", "densenet", "gpu", "compare", "compare64", "move",
                               "dynamic", "batch", "memory"])
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from engine import BackendType, zoo
    from workbench.diagnostics import wait_until
    from workbench.main_window import DEMO_MODEL, RESOURCES, MainWindow
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from screenshot_features import FeatureShots

    app = QApplication.instance() or QApplication([])
    settings = QSettings(os.path.join(os.environ["XDG_RUNTIME_DIR"], "shots.ini"),
                         QSettings.Format.IniFormat)
    window = MainWindow(settings=settings)
    window.resize(1600, 1000)
    window.show()
    os.makedirs(args.out, exist_ok=True)
    wait_until(app, lambda: "checking…" not in window.backend_status.values(), 60)

    def capture(path: str, select: str | None, runs: int, prepare=None, backend=None,
                suffix: str = "") -> None:
        done: list = []
        loaded: list = []
        window.model_loaded.connect(loaded.append)
        window.run_completed.connect(done.append)
        window.open_model(path)
        wait_until(app, lambda: bool(loaded), 120)
        window.model_loaded.disconnect(loaded.append)
        if backend is not None:
            window.set_backend(backend)
        if not wait_until(app, lambda: bool(window.placement), 120):
            raise SystemExit(f"{path}: backend not ready: {window.messages[-1:]}")
        window.start_run(True)
        wait_until(app, lambda: len(done) >= runs or not window.running, 300)
        window.stop_run()
        window.run_completed.disconnect(done.append)
        if not done:
            raise SystemExit(f"{path}: no run completed: {window.messages[-1:]}")
        window.message_bar.dismiss()
        if prepare:
            prepare()
        if select == "fallback":  # show where a GPU backend falls back, and why
            select = next((n for n, p in window.placement.items() if p.is_fallback), None)
        if select:
            window.select_layer(select)
        wait_until(app, lambda: "reading the output" not in window.details.text(), 120)
        wait_until(app, lambda: False, 0.5)  # let the last repaints land
        name = os.path.splitext(os.path.basename(path))[0].split("_seed")[0]
        out = os.path.join(args.out, f"workbench-{name}{suffix}.png")
        window.grab().save(out)
        print(f"wrote {os.path.relpath(out, ROOT)}")

    def densenet_view() -> None:
        window.search.setText("Concat")
        window.graph.zoom(1.0)

    if "demo" in wanted:
        capture(DEMO_MODEL, "conv2", args.runs)
    if "densenet" in wanted:
        capture(zoo.build("densenet121"), "n59", args.runs // 2, prepare=densenet_view,
                backend=BackendType.CPU)
    if "gpu" in wanted:
        for kind in (BackendType.GPU_COMPUTE, BackendType.GPU_PIXEL):
            if window.is_backend_available(kind):
                capture(zoo.build("inception_v1"), "fallback", 4, backend=kind,
                        suffix=f"-{kind.value}")
            else:
                print(f"{kind.name} unavailable ({window.backend_status[kind]}): no screenshot")
    window.search.clear()
    shots = FeatureShots(app, window, args.out, os.environ["XDG_RUNTIME_DIR"])
    gpu = window.is_backend_available(BackendType.GPU_COMPUTE)
    if "batch" in wanted:
        shots.batch(DEMO_MODEL, os.path.join(RESOURCES, "samples"))
    if "memory" in wanted:
        shots.memory()
    for key, take in (("compare", shots.compare), ("compare64", shots.compare_float64),
                      ("move", shots.move_layers),
                      ("dynamic", shots.dynamic_shapes)):
        if key in wanted and gpu:
            take()
        elif key in wanted:
            print(f"GPU_COMPUTE unavailable: no {key} screenshot")
    window.controller.shutdown(timeout=600)  # let a run in flight end before exiting
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
