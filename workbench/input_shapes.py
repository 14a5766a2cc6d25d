"""Editable symbolic input dims (a mixin of ``InputCard``): one spin box per symbolic dim;
the card then feeds values of that concrete shape."""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QGridLayout, QLabel, QSpinBox, QVBoxLayout

from engine.model import TensorSpec
from engine.symbols import default_shape
from workbench.preprocess import image_layout, image_to_input


def concrete_spec(spec: TensorSpec, shape: tuple[int, ...] | None) -> TensorSpec:
    """``spec`` with a concrete shape: ``shape``, or the engine's defaults for symbolic dims."""
    if spec.shape is None or (shape is None and spec.is_static):
        return spec
    if shape is None:
        shape = default_shape(spec.shape, spec.dtype)
    return dataclasses.replace(spec, shape=tuple(shape))


class ShapeEditing:
    """Needs ``declared``, ``spec``, ``dim_edits``, ``raw_image``, ``use_random`` of the card."""

    shape_changed = Signal()

    def _build_dims(self, box: QVBoxLayout) -> None:
        """One spin box per symbolic dim: the shape the next runs use."""
        shape = self.declared.shape or ()
        symbolic = [(axis, d) for axis, d in enumerate(shape) if not isinstance(d, int)]
        if not symbolic:
            return
        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.addWidget(QLabel("<small>symbolic dims (the shape the next runs use):</small>"),
                       0, 0, 1, 4)
        for k, (axis, dim) in enumerate(symbolic):
            spin = QSpinBox()
            spin.setRange(1, 16384)
            spin.setValue(self.spec.shape[axis])
            spin.setToolTip(f"symbolic dim {dim!r} of axis {axis}: the size the next runs use")
            spin.valueChanged.connect(self._dims_edited)
            name = str(dim) if dim and not str(dim).startswith("?") else f"axis {axis}"
            row, col = 1 + k // 2, 2 * (k % 2)
            grid.addWidget(QLabel(name), row, col)
            grid.addWidget(spin, row, col + 1)
            self.dim_edits[axis] = spin
        box.addLayout(grid)

    @property
    def shape(self) -> tuple[int, ...]:
        """The concrete shape this input is fed with."""
        return tuple(self.spec.shape or ())

    def set_shape(self, shape: tuple[int, ...]) -> bool:
        """Use ``shape`` (it must keep the declared fixed dims); random values are made anew
        and an image is resized to it. False, with a message, if it does not fit."""
        shape = tuple(int(d) for d in shape)
        declared = self.declared.shape or ()
        if len(shape) != len(declared) or any(
                isinstance(d, int) and d != s for d, s in zip(declared, shape)) or min(
                shape, default=1) < 1:
            self.problem.emit(f"input {self.declared.name!r} ({self.declared.shape_str()}) "
                              f"cannot take shape {list(shape)}")
            return False
        if shape == self.shape:
            return True
        self.spec = concrete_spec(self.declared, shape)
        self.layout_info = image_layout(self.spec)
        for axis, spin in self.dim_edits.items():
            spin.blockSignals(True)
            spin.setValue(shape[axis])
            spin.blockSignals(False)
        if self.raw_image is not None and self.layout_info is not None:
            self.value = image_to_input(self.raw_image, self.spec, self.current_preprocess())
            self._refresh_preview()
            self.changed.emit()
        else:
            self.use_random()
        self.shape_changed.emit()
        return True

    def _dims_edited(self, _value: int) -> None:
        shape = list(self.shape)
        for axis, spin in self.dim_edits.items():
            shape[axis] = spin.value()
        self.set_shape(tuple(shape))
