"""``python -m workbench [MODEL]`` (or ``inference-workbench``): the desktop app.

With ``--headless`` (what ``make run`` uses when there is no display) it loads the model,
runs it on every available backend and prints the per-layer timing table instead.
"""

from __future__ import annotations

import argparse
import signal
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
    # Ctrl-C in the terminal closes the window like its close button. Until the window
    # exists it is only noted (an exception in the middle of imports or Qt's set-up would
    # leave threads and native state half made)
    interrupted: list = []
    if not args.headless:
        signal.signal(signal.SIGINT, lambda *_: interrupted.append(None))
    from workbench.paths import DEMO_MODEL

    model = args.model or DEMO_MODEL
    from engine.cli_util import ensure_runtime_dir

    ensure_runtime_dir()
    if args.headless:
        from workbench.headless import run_headless

        try:
            return run_headless(model, repeat=args.repeat)
        except KeyboardInterrupt:
            from engine.cli_util import exit_interrupted

            exit_interrupted()

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from engine import BackendType
    from workbench.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Inference Workbench")
    window = MainWindow()
    window.show()
    try:
        window.session.choose_backend(BackendType.parse(args.backend))  # used once loaded
    except ValueError as exc:
        window.show_message("warning", str(exc))
    if args.run:
        window.model_loaded.connect(lambda _m: window.start_run(True))
    window.open_model(model)

    def on_sigint(*_):
        interrupted.append(None)
        window.close()

    signal.signal(signal.SIGINT, on_sigint)
    # Qt's event loop runs in C++: a timer hands control back to Python now and then, so
    # that the signal handler runs
    tick = QTimer()
    tick.timeout.connect(lambda: None)
    tick.start(200)
    if interrupted:
        QTimer.singleShot(0, window.close)
    status = app.exec()
    return 130 if interrupted else status

if __name__ == "__main__":
    sys.exit(main())
