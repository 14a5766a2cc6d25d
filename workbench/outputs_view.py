"""The outputs panel: statistics of every output, top-k for classifiers, images for images."""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from workbench.preprocess import to_display_image
from workbench.widgets import StableLabel, pixmap_from_array

TOP_K = 5


def stats_line(arr: np.ndarray) -> str:
    """Shape, dtype and min/max/mean/std of an array, as one line of text."""
    a = np.asarray(arr)
    head = f"{a.dtype.name}{list(a.shape)}"
    if a.size == 0 or a.dtype.kind not in "fiub":
        return head
    f = a.astype(np.float64)
    finite = np.isfinite(f)
    bad = int(f.size - finite.sum())
    if not finite.any():
        return f"{head} · all {f.size} values are NaN/inf"
    v = f[finite]
    out = (f"{head} · min {v.min():.4g} · max {v.max():.4g} · mean {v.mean():.4g} "
           f"· std {v.std():.4g}")
    return out + (f" · <span style='color:#D6455B'>{bad} NaN/inf</span>" if bad else "")


def classifier_scores(arr: np.ndarray) -> tuple[np.ndarray, bool] | None:
    """(probabilities, were_already_probabilities) for a 1-row score vector, else None."""
    a = np.asarray(arr)
    if a.dtype.kind != "f" or a.size < 2 or a.size > 100_000:
        return None
    if sum(d > 1 for d in a.shape) != 1:
        return None
    v = a.reshape(-1).astype(np.float64)
    if not np.all(np.isfinite(v)):
        return None
    if v.min() >= 0 and abs(v.sum() - 1.0) < 1e-3:
        return v, True
    e = np.exp(v - v.max())
    return e / e.sum(), False


def topk_html(arr: np.ndarray, labels: list[str] | None, k: int = TOP_K) -> str:
    scores = classifier_scores(arr)
    if scores is None:
        return ""
    probs, direct = scores
    raw = np.asarray(arr).reshape(-1)
    order = np.argsort(-probs)[:k]
    rows = []
    for rank, i in enumerate(order):
        label = labels[i] if labels and i < len(labels) else f"class {i}"
        p = probs[i]
        bar = f"<span style='background:#5B8DEF'>{'&nbsp;' * max(1, int(round(p * 30)))}</span>"
        extra = "" if direct else f" <small>(logit {raw[i]:.3g})</small>"
        weight = "bold" if rank == 0 else "normal"
        rows.append(f"<tr><td style='font-weight:{weight}'>{html.escape(label)}</td>"
                    f"<td align='right'>{100 * p:5.1f}%</td><td>{bar}{extra}</td></tr>")
    title = f"top-{len(order)}" + ("" if direct else " (softmax of the scores)")
    return f"<b>{title}</b><table cellspacing='4'>{''.join(rows)}</table>"


class OutputCard(QGroupBox):
    def __init__(self, name: str, spec_text: str):
        super().__init__(name)
        box = QHBoxLayout(self)
        text_col = QVBoxLayout()
        self.stats = StableLabel(spec_text, 260, lines=2)
        self.topk = StableLabel("", 260, lines=7)
        text_col.addWidget(self.stats)
        text_col.addWidget(self.topk)
        text_col.addStretch(1)
        box.addLayout(text_col, 1)
        self.image = QLabel()
        self.image.setVisible(False)
        box.addWidget(self.image)

    def update_value(self, arr: np.ndarray, labels: list[str] | None) -> None:
        self.stats.setText(stats_line(arr))
        top = topk_html(arr, labels)
        self.topk.setText(top)
        img = None if top else to_display_image(arr)
        if img is not None:
            self.image.setPixmap(pixmap_from_array(img, 160))
        self.image.setVisible(img is not None)


class OutputsPanel(QWidget):
    """One card per model output, updated after each run the UI shows."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.cards: dict[str, OutputCard] = {}
        self.labels: list[str] | None = None
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        inner = QWidget()
        self.box = QVBoxLayout(inner)
        self.box.addStretch(1)
        scroll.setWidget(inner)
        outer.addWidget(scroll)

    def set_model(self, model, labels: list[str] | None) -> None:
        for card in self.cards.values():
            card.setParent(None)
            card.deleteLater()
        self.cards = {}
        self.labels = labels
        for spec in model.outputs:
            card = OutputCard(spec.name, f"{spec} — not run yet")
            self.box.insertWidget(self.box.count() - 1, card)
            self.cards[spec.name] = card

    def update_outputs(self, outputs: dict[str, np.ndarray]) -> None:
        for name, arr in outputs.items():
            card = self.cards.get(name)
            if card is not None:
                card.update_value(arr, self.labels)

    def text(self) -> str:
        """All shown text (for tests and the headless summary)."""
        return "\n".join(f"{n}: {c.stats.text()} {c.topk.text()}" for n, c in self.cards.items())
