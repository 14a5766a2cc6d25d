"""The layer details panel: attributes, input/output shapes, placement, last time, output."""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtWidgets import QLabel, QTextBrowser, QVBoxLayout, QWidget

from workbench import theme
from workbench.outputs_view import stats_line
from workbench.preprocess import to_display_image
from workbench.widgets import pixmap_from_array


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
        self.thumb = QLabel()
        self.thumb.setVisible(False)
        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addWidget(self.browser, 1)
        box.addWidget(self.thumb)
        self.layer_name: str | None = None
        self.preview_tensor: str | None = None
        self._body = ""
        self._preview = ""
        self.show_nothing()

    def show_nothing(self) -> None:
        self.layer_name = self.preview_tensor = None
        self._body = ("<p style='color:#6B7280'>Click a layer in the graph or a bar in the "
                      "timing plot to see its details.</p>")
        self._preview = ""
        self.thumb.setVisible(False)
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
        self._body = "".join(rows)
        self._preview = ("<p style='color:#6B7280'>computing output preview…</p>"
                         if self.preview_tensor else "")
        self.thumb.setVisible(False)
        self._render()

    def show_preview(self, tensor: str, value) -> None:
        """``value`` is the tensor (from the CPU interpreter on the current inputs) or a reason."""
        if tensor != self.preview_tensor:
            return
        if isinstance(value, str) or value is None:
            self._preview = f"<p style='color:#6B7280'>{html.escape(str(value))}</p>"
            self.thumb.setVisible(False)
        else:
            arr = np.asarray(value)
            flat = arr.reshape(-1)[:12] if arr.dtype.kind in "fiub" else []
            vals = ", ".join(f"{v:.4g}" for v in np.asarray(flat, np.float64))
            self._preview = (f"<b>output {html.escape(tensor)}</b> <small>(CPU reference on the "
                             f"current inputs)</small><br>{stats_line(arr)}<br>"
                             f"<small>first values: {vals}{' …' if arr.size > 12 else ''}</small>")
            img = to_display_image(arr[0, :1] if arr.ndim == 4 and arr.shape[1] > 3 else arr)
            if img is not None:
                self.thumb.setPixmap(pixmap_from_array(img, 96))
                self.thumb.setToolTip("first channel of the output, min–max scaled")
            self.thumb.setVisible(img is not None)
        self._render()

    def _render(self) -> None:
        self.browser.setHtml(self._body + "<hr>" + self._preview if self._preview
                             else self._body)

    def text(self) -> str:
        return self.browser.toPlainText()


def _dtype(spec) -> str:
    return "?" if spec is None or spec.dtype is None else np.dtype(spec.dtype).name
