"""``python -m workbench [MODEL]`` (or ``inference-workbench``): the desktop app.

With ``--headless`` (what ``make run`` uses when there is no display) it loads the model,
runs it on every available backend and prints the per-layer timing table instead.
"""

from __future__ import annotations

import argparse
import os
import sys


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="inference-workbench",
                                 description="Run ONNX models and watch how they run.")
    ap.add_argument("model", nargs="?", help="ONNX model to open (default: the demo model)")
    ap.add_argument("--backend", default="cpu", help="cpu, gpu-compute or gpu-pixel")
    ap.add_argument("--run", action="store_true", help="start running continuously once loaded")
    ap.add_argument("--headless", action="store_true",
                    help="no window: run on every backend and print the timing table")
    ap.add_argument("--repeat", type=int, default=5, help="runs per backend with --headless")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from workbench.main_window import DEMO_MODEL

    model = args.model or DEMO_MODEL
    if args.headless:
        from workbench.headless import run_headless

        return run_headless(model, repeat=args.repeat)

    os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")
    os.makedirs(os.environ["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    from PySide6.QtWidgets import QApplication

    from engine import BackendType
    from workbench.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Inference Workbench")
    window = MainWindow()
    window.show()
    try:
        window.backend = BackendType.parse(args.backend)
    except ValueError as exc:
        window.show_message("warning", str(exc))
    if args.run:
        window.model_loaded.connect(lambda _m: window.start_run(True))
    window.open_model(model)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
