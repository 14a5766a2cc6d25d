"""The inputs panel: one card per model input, fed by random values, an image or a .npy file.

Drop a file on a card (or use its button). Images go through the visible, editable
preprocessing (colour, invert, scale, mean, std; resized to the input), and the card shows
what the model will see.
"""

from __future__ import annotations

import os

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.errors import EngineError
from engine.inputs import random_array
from engine.model import TensorSpec
from workbench.input_shapes import ShapeEditing, concrete_spec
from workbench.preprocess import (
    InputFileError,
    Preprocess,
    image_layout,
    image_to_input,
    npy_to_input,
    to_display_image,
)
from workbench.widgets import load_image_rgb, pixmap_from_array

IMAGE_EXT = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".pgm", ".webp", ".tif", ".tiff"}


def _floats(text: str) -> list[float]:
    try:
        vals = [float(v) for v in text.replace(";", ",").split(",") if v.strip()]
    except ValueError as exc:
        raise InputFileError(f"expected numbers separated by commas, got {text!r}") from exc
    if not vals:
        raise InputFileError("expected at least one number")
    return vals


class InputCard(ShapeEditing, QGroupBox):
    """One input: its spec, where its value comes from, preprocessing and a preview."""

    changed = Signal()
    problem = Signal(str)

    def __init__(self, spec: TensorSpec, index: int, preprocess: dict | None, seed: int = 0):
        super().__init__(spec.name)
        #: the model's declaration; ``spec`` is it with every symbolic dim made concrete
        self.declared = spec
        self.spec = concrete_spec(spec, None)
        self.dim_edits: dict[int, QSpinBox] = {}
        self.index = index
        self.seed = seed
        self.source = "random"
        self.raw_image: np.ndarray | None = None
        self.value: np.ndarray | None = None
        self.layout_info = image_layout(spec)
        self.setAcceptDrops(True)
        box = QVBoxLayout(self)
        dt = np.dtype(spec.dtype).name if spec.dtype is not None else "?"
        box.addWidget(QLabel(f"{dt} {spec.shape_str()}"))
        self._build_dims(box)
        self.source_label = QLabel()
        self.source_label.setWordWrap(True)
        box.addWidget(self.source_label)
        row = QHBoxLayout()
        load = QPushButton("Load file…")
        load.clicked.connect(self._browse)
        rand = QPushButton("Random")
        rand.clicked.connect(self.use_random)
        row.addWidget(load)
        row.addWidget(rand)
        box.addLayout(row)
        hint = "Drop an image or .npy here" if self.layout_info else "Drop a .npy file here"
        drop = QLabel(f"<i>{hint}</i>")
        drop.setStyleSheet("color: #6B7280")
        box.addWidget(drop)
        self.form: QFormLayout | None = None
        if self.layout_info is not None:
            self.pre = Preprocess.from_dict(preprocess, self.layout_info.channels)
            self._build_preprocess_form(box)
        else:
            self.pre = Preprocess()
        self.preview = QLabel()
        self.preview.setAlignment(Qt.AlignmentFlag.AlignCenter)
        box.addWidget(self.preview)
        self.use_random()

    def _build_preprocess_form(self, box: QVBoxLayout) -> None:
        lay = self.layout_info
        group = QGroupBox(f"Preprocess → {lay.height}×{lay.width}·{lay.channels}ch "
                          f"{'NHWC' if lay.channels_last else 'NCHW'}")
        form = QFormLayout(group)
        self.color = QComboBox()
        self.color.addItems(["rgb", "bgr", "gray"])
        self.color.setCurrentText(self.pre.color)
        self.invert = QCheckBox("invert (255 − pixel)")
        self.invert.setChecked(bool(self.pre.invert))
        self.scale = QLineEdit(f"{self.pre.scale:.6g}")
        self.mean = QLineEdit(", ".join(f"{v:g}" for v in self.pre.mean))
        self.std = QLineEdit(", ".join(f"{v:g}" for v in self.pre.std))
        form.addRow("colour", self.color)
        form.addRow("", self.invert)
        form.addRow("scale", self.scale)
        form.addRow("mean", self.mean)
        form.addRow("std", self.std)
        form.addRow(QLabel("<small>value = (pixel × scale − mean) / std</small>"))
        self.color.currentTextChanged.connect(self._preprocess_edited)
        self.invert.toggled.connect(self._preprocess_edited)
        for edit in (self.scale, self.mean, self.std):
            edit.editingFinished.connect(self._preprocess_edited)
        self.form = form
        box.addWidget(group)

    # -- sources ----------------------------------------------------------------------------
    def use_random(self) -> None:
        self.source, self.raw_image = "random", None
        try:
            self.value = random_array(self.spec, self.seed + self.index)
        except (InputFileError, EngineError) as exc:
            self.value = None
            self.problem.emit(str(exc))
        self.source_label.setText(f"source: random (seed {self.seed + self.index})")
        self._refresh_preview()
        self.changed.emit()

    def set_seed(self, seed: int) -> None:
        self.seed = seed
        if self.source == "random":
            self.use_random()

    def load_file(self, path: str) -> bool:
        """Feed this input from an image or .npy file; on failure keep the old value."""
        ext = os.path.splitext(path)[1].lower()
        name = os.path.basename(path)
        try:
            if ext == ".npy":
                try:
                    arr = np.load(path, allow_pickle=False)
                except Exception as exc:
                    raise InputFileError(f"cannot read {name} as a NumPy array: {exc}") from exc
                if self.dim_edits and arr.ndim == len(self.shape) and arr.shape != self.shape:
                    self.set_shape(tuple(arr.shape))
                value = npy_to_input(arr, self.spec)
                self.raw_image = None
            elif ext in IMAGE_EXT:
                if self.layout_info is None:
                    raise InputFileError(f"input {self.spec.name!r} ({self.spec.shape_str()}) "
                                         "is not image-shaped; feed it a .npy file instead")
                rgb = load_image_rgb(path)
                value = image_to_input(rgb, self.spec, self.current_preprocess())
                self.raw_image = rgb
            else:
                raise InputFileError(f"{name}: not an image or .npy file")
        except InputFileError as exc:
            self.problem.emit(f"Cannot use {name} for input {self.spec.name!r}: {exc}")
            return False
        self.value = value
        self.source = path
        self.source_label.setText(f"source: {name}")
        self._refresh_preview()
        self.changed.emit()
        return True

    def current_preprocess(self) -> Preprocess:
        if self.form is None:
            return self.pre
        return Preprocess(color=self.color.currentText(), invert=self.invert.isChecked(),
                          scale=_floats(self.scale.text())[0], mean=_floats(self.mean.text()),
                          std=_floats(self.std.text()))

    def _preprocess_edited(self, *_args) -> None:
        try:
            self.pre = self.current_preprocess()
            if self.raw_image is not None:
                self.value = image_to_input(self.raw_image, self.spec, self.pre)
        except InputFileError as exc:
            self.problem.emit(f"Preprocessing of {self.spec.name!r}: {exc}")
            return
        self._refresh_preview()
        self.changed.emit()

    def _refresh_preview(self) -> None:
        img = to_display_image(self.value, 128) if self.value is not None else None
        if img is None:
            self.preview.clear()
            self.preview.setVisible(False)
            return
        self.preview.setPixmap(pixmap_from_array(img, 112))
        self.preview.setToolTip("what the model sees (min–max scaled)")
        self.preview.setVisible(True)

    # -- drag and drop ----------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        urls = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if urls:
            event.acceptProposedAction()
            if urls[0].lower().endswith(".onnx"):
                # a model dropped on an input card still opens the model
                self.window().handle_dropped_paths(urls)
            else:
                self.load_file(urls[0])

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, f"Feed input {self.spec.name}", "",
                                              "Images or arrays (*.png *.jpg *.jpeg *.bmp *.npy)"
                                              ";;All files (*)")
        if path:
            self.load_file(path)


class InputsPanel(QWidget):
    """All inputs of the model plus the random seed."""

    changed = Signal()
    problem = Signal(str)
    #: {input name: shape} after a symbolic dim was edited
    shapes_changed = Signal(object)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.cards: list[InputCard] = []
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        row = QHBoxLayout()
        row.addWidget(QLabel("Random seed"))
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.seed.valueChanged.connect(self._seed_changed)
        row.addWidget(self.seed, 1)
        outer.addLayout(row)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.inner = QWidget()
        self.cards_box = QVBoxLayout(self.inner)
        self.cards_box.addStretch(1)
        self.scroll.setWidget(self.inner)
        outer.addWidget(self.scroll, 1)

    def set_model(self, model, preprocess: dict | None) -> None:
        for card in self.cards:
            card.setParent(None)
            card.deleteLater()
        self.cards = []
        for i, spec in enumerate(model.inputs):
            card = InputCard(spec, i, preprocess, seed=self.seed.value())
            card.changed.connect(self._card_changed)
            card.problem.connect(self.problem)
            card.shape_changed.connect(lambda: self.shapes_changed.emit(self.shapes()))
            self.cards_box.insertWidget(self.cards_box.count() - 1, card)
            self.cards.append(card)
        self._card_changed()

    def card(self, name: str | None = None) -> InputCard | None:
        if name is None:
            return self.cards[0] if len(self.cards) == 1 else None
        return next((c for c in self.cards if c.spec.name == name), None)

    def feed_file(self, path: str, name: str | None = None) -> bool:
        card = self.card(name)
        if card is None:
            names = ", ".join(repr(c.spec.name) for c in self.cards)
            self.problem.emit(f"The model has several inputs ({names}); drop "
                              f"{os.path.basename(path)} onto one of them in the Inputs panel")
            return False
        return card.load_file(path)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The concrete shape of every input."""
        return {c.spec.name: c.shape for c in self.cards}

    def set_shape(self, name: str, shape: tuple[int, ...]) -> bool:
        """Give input ``name`` a concrete shape (symbolic dims only)."""
        card = self.card(name)
        return card is not None and card.set_shape(shape)

    def feeds(self) -> dict[str, np.ndarray]:
        return {c.spec.name: c.value for c in self.cards if c.value is not None}

    def _seed_changed(self, value: int) -> None:
        for card in self.cards:
            card.set_seed(value)

    def _card_changed(self) -> None:
        self.changed.emit()

