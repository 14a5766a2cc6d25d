"""Measure how responsive the workbench window stays (the numbers issue 4 asks for).

A 5 ms QTimer on the UI thread records its largest gap while: densenet121 (from the zoo) is
dropped on a fresh window (the first open), and again on each backend, until its graph is
drawn and its backend is ready; densenet121 is compared on two backends layer by layer; each
available backend runs the demo model and densenet121 continuously. Prints a table.

Usage: ``python scripts/measure_ui.py [--seconds 5] [--models demo densenet121]
[--loads 3] [--compare gpu-compute cpu] [--no-continuous]``
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
    ap.add_argument("--compare", nargs=2, default=["gpu-compute", "cpu"],
                    metavar=("BACKEND", "AGAINST"), help="backends compared on densenet121")
    ap.add_argument("--no-continuous", action="store_true", help="skip the continuous runs")
    args = ap.parse_args()
    from PySide6.QtCore import QMimeData, QPointF, QSettings, Qt, QUrl
    from PySide6.QtGui import QDropEvent
    from PySide6.QtWidgets import QApplication

    from engine import BackendType, zoo
    from workbench.diagnostics import Heartbeat, measure_continuous, measure_load, wait_until
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
    beat = Heartbeat()
    beat.start()
    wait_until(app, lambda: False, args.seconds)
    print(f"baseline: largest UI gap with nothing running: {beat.stop():.1f} ms "
          "(the machine's own noise)")

    def drop(path: str):
        mime = QMimeData()
        mime.setUrls([QUrl.fromLocalFile(path)])
        window.dropEvent(QDropEvent(QPointF(20, 20), Qt.DropAction.CopyAction, mime,
                                    Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))

    def report(label: str, r: dict) -> None:
        if "error" in r:
            print(f"  {label}: {r['error']}")
        else:
            print(f"  {label}: max UI gap {r['max_gap_to_graph_ms']:.0f} ms "
                  f"to graph, {r['max_gap_ms']:.0f} ms to ready; drop->graph "
                  f"{r['to_graph_ms']:.0f} ms (load {r['load_ms']:.0f}, "
                  f"layout {r['layout_ms']:.0f})")

    print("\nfirst open: densenet121 dropped on the fresh window (CPU):")
    report("CPU          drop 1", measure_load(app, window, dense, opener=drop, timeout_s=600))

    print("\nloading densenet121 by drop (UI gap until graph drawn / until the selected "
          "backend is ready, kernels compiled):")
    for kind in BackendType:
        if not window.is_backend_available(kind):
            continue
        for i in range(args.loads if kind is BackendType.CPU else 1):
            window.open_model(DEMO_MODEL)  # start each drop from another model
            wait_until(app, lambda: window.loaded is not None
                       and window.loaded.path == DEMO_MODEL, 60)
            window.set_backend(kind)
            wait_until(app, lambda: bool(window.placement), 300)
            r = measure_load(app, window, dense, opener=drop, timeout_s=600)
            report(f"{kind.name:<12} drop {i + 1}", r)
    window.set_backend(BackendType.CPU)

    kinds = [BackendType.parse(k) for k in args.compare]
    if all(window.is_backend_available(k) for k in kinds):
        print(f"\ncomparing densenet121, {kinds[0].name} against {kinds[1].name}:")
        window.open_model(dense)
        wait_until(app, lambda: window.loaded is not None
                   and window.loaded.path == os.path.abspath(dense), 300)
        wait_until(app, lambda: bool(window.placement), 300)
        done: list = []
        window.compare_completed.connect(done.append)
        window.compare_failed.connect(done.append)
        beat.start()
        window.compare_backends(*kinds)
        wait_until(app, lambda: bool(done), 1200)
        gap = beat.stop()
        if done and not isinstance(done[0], str):
            r = done[0]
            print(f"  max UI gap {gap:.0f} ms; compare took {r.seconds:.1f} s; first over "
                  f"{window.session.threshold:g}: {window.session.first_divergent()}; worst "
                  f"rel L2 {max(row['rel_l2'] for row in r.layers):.2e}")
        else:
            print(f"  failed: {done[:1]}")
    if args.no_continuous:
        window.controller.shutdown(timeout=600)
        window.close()
        return 0

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
