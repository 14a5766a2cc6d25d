"""Files in and out of the main window: open dialogs, recent files, drag and drop, exports
(a mixin of MainWindow)."""

from __future__ import annotations

import json
import os

from PySide6.QtWidgets import QFileDialog

from workbench.inputs_view import IMAGE_EXT
from workbench.paths import RESOURCES

MAX_RECENT = 8


class WindowFiles:
    """Opening, dropping and exporting; errors go to the window's message bar."""

    def export_chrome_trace(self, path: str) -> bool:
        """Write the last run as Chrome-trace JSON (Perfetto); False, with a message, if not."""
        return self._export(path, "trace")

    def export_csv(self, path: str) -> bool:
        """Write the last run's per-layer timings as CSV; False, with a message, if not."""
        return self._export(path, "csv")

    def handle_dropped_paths(self, paths: list[str]) -> None:
        """Open a dropped .onnx; feed a dropped image / .npy to the (single) input; several
        images / .npy files, or a folder, run as a batch."""
        if paths and (len(paths) > 1 or os.path.isdir(paths[0])) and not any(
                p.lower().endswith(".onnx") for p in paths):
            self.run_batch(paths)
            return
        for path in paths[:1]:
            ext = os.path.splitext(path)[1].lower()
            name = os.path.basename(path)
            if os.path.isdir(path):
                self.show_message("error", f"{name} is a folder; drop an .onnx model file")
            elif ext == ".onnx":
                self.open_model(path)
            elif ext in IMAGE_EXT or ext == ".npy":
                if self.loaded is None:
                    self.show_message("warning", f"Open a model before feeding it {name}")
                else:
                    self.inputs.feed_file(path)
            else:
                self.show_message("error", f"{name} is not something the workbench can open: "
                                  "drop an ONNX model (.onnx), or an image / .npy file to feed "
                                  "an input")

    def _open_dialog(self) -> None:
        start = os.path.dirname(self.loaded.path) if self.loaded else RESOURCES
        path, _ = QFileDialog.getOpenFileName(self, "Open ONNX model", start,
                                              "ONNX models (*.onnx);;All files (*)")
        if path:
            self.open_model(path)

    def _export_dialog(self, kind: str) -> None:
        if self.last_profile is None:
            self.show_message("warning", "Run the model first: there is no profile to export")
            return
        suffix = "json" if kind == "trace" else "csv"
        base = os.path.splitext(os.path.basename(self.loaded.path))[0] if self.loaded else "run"
        path, _ = QFileDialog.getSaveFileName(
            self, "Export Chrome trace" if kind == "trace" else "Export CSV",
            f"{base}-{self.last_profile.backend}.{suffix}",
            "Chrome trace (*.json)" if kind == "trace" else "CSV (*.csv)")
        if path:
            self._export(path, kind)

    def _export(self, path: str, kind: str) -> bool:
        if self.last_profile is None:
            self.show_message("warning", "Run the model first: there is no profile to export")
            return False
        prof = self.last_profile
        text = prof.to_chrome_trace() if kind == "trace" else prof.to_csv()
        if kind == "trace":
            text = self._trace_with_overrides(text)
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            self.show_message("error", f"Cannot write {path}: {exc.strerror or exc}")
            return False
        what = "Chrome trace (open it in ui.perfetto.dev)" if kind == "trace" else "CSV"
        self.show_message("info", f"Exported the last run as {what}: {path}")
        return True

    def _trace_with_overrides(self, text: str) -> str:
        """The trace with the user's placement choices: in ``otherData`` and on each event."""
        overrides = self.session.overrides if hasattr(self, "session") else {}
        data = json.loads(text)
        data["otherData"] = {"placement_overrides": {n: b.value for n, b in
                                                     sorted(overrides.items())}}
        for event in data.get("traceEvents", []):
            if event.get("ph") == "X" and event.get("name") in overrides:
                event.setdefault("args", {})["user_choice"] = True
        return json.dumps(data, indent=1)

    # -- recent files -----------------------------------------------------------------------
    def recent_files(self) -> list[str]:
        value = self.settings.value("recent", [])
        if isinstance(value, str):
            value = [value]
        return [p for p in (value or []) if isinstance(p, str)]

    def _add_recent(self, path: str) -> None:
        items = [path] + [p for p in self.recent_files() if p != path]
        self.settings.setValue("recent", items[:MAX_RECENT])
        self._rebuild_recent()

    def _rebuild_recent(self) -> None:
        self.recent_menu.clear()
        files = self.recent_files()
        for path in files:
            act = self.recent_menu.addAction(os.path.basename(path))
            act.setToolTip(path)
            act.setData(path)
            act.triggered.connect(lambda _=False, p=path: self.open_model(p))
        self.recent_menu.setEnabled(bool(files))

    # -- drag and drop, closing -------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.handle_dropped_paths(paths)

