"""The layer details panel: attributes, input/output shapes, placement, last time, output."""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtWidgets import QTextBrowser, QVBoxLayout, QWidget

from workbench import theme
from workbench.outputs_view import stats_line
from workbench.tensor_view import TensorView


def _attr_text(value) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return f"tensor {value.dtype.name}{list(value.shape)} = {value.tolist()}"
        return f"tensor {value.dtype.name}{list(value.shape)}"
    if hasattr(value, "layers"):  # a subgraph
        return f"graph with {len(value.layers)} layers"
    text = repr(value)
    return text if len(text) < 120 else text[:117] + "…"


class DetailsPanel(QWidget):
    """Shows one layer; the output preview arrives later from the controller."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)
        self.tensor_view = TensorView()
        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addWidget(self.browser, 1)
        box.addWidget(self.tensor_view)
        self.layer_name: str | None = None
        self.preview_tensor: str | None = None
        self._body = ""
        self._head = ""
        self._preview = ""
        self._shown_tensor: str | None = None
        self.show_nothing()

    def show_nothing(self) -> None:
        self.layer_name = self.preview_tensor = self._shown_tensor = None
        self._head = ""
        self._body = ("<p style='color:#6B7280'>Click a layer in the graph or a bar in the "
                      "timing plot to see its details.</p>")
        self._preview = ""
        self.tensor_view.show_tensor(None)
        self._render()

    def show_layer(self, model, layer, placement, ms: float | None) -> None:
        self.layer_name = layer.name
        self.preview_tensor = next((o for o in layer.outputs if o), None)
        rows = [f"<h3 style='margin:0'>{html.escape(layer.op_type)} "
                f"<span style='font-weight:normal'>{html.escape(layer.name)}</span></h3>"]
        if placement is not None:
            color = (theme.FALLBACK_COLOR if placement.is_fallback
                     else theme.BACKEND_COLORS[placement.backend])
            rows.append(f"<p>runs on <b style='color:{color}'>{placement.backend.name}</b>"
                        f" — {html.escape(placement.reason)}</p>")
        else:
            rows.append("<p>placement: not known yet (backend still preparing)</p>")
        rows.append(f"<p>last run: <b>{ms:.3f} ms</b></p>" if ms is not None
                    else "<p>last run: —</p>")
        rows.append("<b>inputs</b><table cellspacing='3'>")
        for name in layer.all_inputs():
            if not name:
                continue
            kind = "constant" if name in model.constants else "tensor"
            spec = model.spec(name)
            forced = (f" <span style='color:{theme.FORCED_COLOR}'>CPU-forced</span>"
                      if name in model.cpu_forced else "")
            rows.append(f"<tr><td>{html.escape(name)}</td><td>{kind}</td>"
                        f"<td>{html.escape(spec.shape_str() if spec else '?')}</td>"
                        f"<td>{_dtype(spec)}</td><td>{forced}</td></tr>")
        rows.append("</table><b>outputs</b><table cellspacing='3'>")
        for name in layer.outputs:
            spec = model.spec(name)
            forced = (f" <span style='color:{theme.FORCED_COLOR}'>CPU-forced: needed on the "
                      "CPU to plan other layers</span>" if name in model.cpu_forced else "")
            rows.append(f"<tr><td>{html.escape(name)}</td>"
                        f"<td>{html.escape(spec.shape_str() if spec else '?')}</td>"
                        f"<td>{_dtype(spec)}</td><td>{forced}</td></tr>")
        rows.append("</table>")
        if layer.attributes:
            rows.append("<b>attributes</b><table cellspacing='3'>")
            for key, value in sorted(layer.attributes.items()):
                rows.append(f"<tr><td>{html.escape(key)}</td>"
                            f"<td>{html.escape(_attr_text(value))}</td></tr>")
            rows.append("</table>")
        # the output summary goes right below the placement and time, where it is seen
        self._head, self._body = "".join(rows[:3]), "".join(rows[3:])
        if self.preview_tensor != self._shown_tensor:
            self._preview = ("<p style='color:#6B7280'>reading the output from the backend…</p>"
                             if self.preview_tensor else "")
            self.tensor_view.show_tensor(None)
        self._render()

    def show_intermediate(self, value) -> None:
        """Show a layer output read back from the backend that ran it
        (``controller_jobs.Intermediate``), or why it could not be read."""
        if value.tensor != self.preview_tensor:
            return
        self._shown_tensor = value.tensor
        if value.array is None:
            self._preview = f"<p style='color:#6B7280'>{html.escape(value.reason)}</p>"
            self.tensor_view.show_tensor(None)
        else:
            arr = np.asarray(value.array)
            flat = arr.reshape(-1)[:12] if arr.dtype.kind in "fiub" else []
            vals = ", ".join(f"{v:.4g}" for v in np.asarray(flat, np.float64))
            self._preview = (f"<b>output {html.escape(value.tensor)}</b> <small>(read back from "
                             f"{html.escape(value.backend)}, the backend that ran it)</small>"
                             f"<br>{stats_line(arr)}<br><small>first values: {vals}"
                             f"{' …' if arr.size > 12 else ''}</small>")
            self.tensor_view.show_tensor(arr)
        self._render()

    def _render(self) -> None:
        preview = self._preview + "<hr>" if self._preview else ""
        self.browser.setHtml(self._head + preview + self._body)

    def text(self) -> str:
        return self.browser.toPlainText()


def _dtype(spec) -> str:
    return "?" if spec is None or spec.dtype is None else np.dtype(spec.dtype).name
