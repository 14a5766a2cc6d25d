"""Measure how responsive the workbench window stays (the numbers issue 4 asks for).

A 5 ms QTimer on the UI thread records its largest gap while: each available backend runs
the demo model and densenet121 continuously; densenet121 (from the zoo) is dropped on the
window and loads until its graph is drawn and its backend is ready. Prints a table.

Usage: ``python scripts/measure_ui.py [--seconds 5] [--models demo densenet121]``
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
    ap.add_argument("--seconds", type=float, default=5.0, help="continuous run per case")
    ap.add_argument("--models", nargs="+", default=["demo", "densenet121"])
    ap.add_argument("--loads", type=int, default=3, help="densenet121 drops to measure")
    args = ap.parse_args()
    from PySide6.QtCore import QMimeData, QPointF, QSettings, Qt, QUrl
    from PySide6.QtGui import QDropEvent
    from PySide6.QtWidgets import QApplication

    from engine import BackendType, zoo
    from workbench.diagnostics import measure_continuous, measure_load, wait_until
    from workbench.main_window import DEMO_MODEL, MainWindow

    app = QApplication.instance() or QApplication([])
    settings = QSettings(os.path.join(os.environ["XDG_RUNTIME_DIR"], "measure.ini"),
                         QSettings.Format.IniFormat)
    window = MainWindow(settings=settings)
    window.show()
    wait_until(app, lambda: "checking…" not in window.backend_status.values(), 60)
    dense = zoo.build("densenet121")
    paths = {"demo": DEMO_MODEL, "densenet121": dense}
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    def drop(path: str):
        mime = QMimeData()
        mime.setUrls([QUrl.fromLocalFile(path)])
        window.dropEvent(QDropEvent(QPointF(20, 20), Qt.DropAction.CopyAction, mime,
                                    Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))

    print("\nloading densenet121 by drop (UI gap until graph drawn / until backend ready):")
    for i in range(args.loads):
        window.open_model(DEMO_MODEL)  # start each drop from another model
        wait_until(app, lambda: bool(window.placement) and window.loaded is not None
                   and window.loaded.path == DEMO_MODEL, 60)
        r = measure_load(app, window, dense, opener=drop)
        if "error" in r:
            print(f"  drop {i + 1}: {r['error']}")
            continue
        print(f"  drop {i + 1}: max UI gap {r['max_gap_to_graph_ms']:.0f} ms to graph, "
              f"{r['max_gap_ms']:.0f} ms to ready; drop->graph {r['to_graph_ms']:.0f} ms "
              f"(load {r['load_ms']:.0f}, layout {r['layout_ms']:.0f})")

    print(f"\nrunning continuously for {args.seconds:.0f} s (largest UI gap):")
    for name in args.models:
        path = paths.get(name, name)
        window.open_model(path)
        wait_until(app, lambda: window.loaded is not None
                   and window.loaded.path == os.path.abspath(path), 120)  # noqa: B023
        for kind in BackendType:
            if not window.is_backend_available(kind):
                print(f"  {name:<12} {kind.name:<12} unavailable: {window.backend_status[kind]}")
                continue
            r = measure_continuous(app, window, kind, seconds=args.seconds, timeout_s=600,
                                   min_runs=3)
            if "error" in r:
                print(f"  {name:<12} {kind.name:<12} error: {r['error']}")
            else:
                print(f"  {name:<12} {kind.name:<12} max UI gap {r['max_gap_ms']:6.1f} ms  "
                      f"({r['runs_shown']} runs shown, median run {r['median_ms']:.1f} ms)")
    window.controller.shutdown(timeout=600)  # let a run in flight end before exiting
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
