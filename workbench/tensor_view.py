"""A tensor at a glance: a histogram of its values and, for image-like tensors, a grid of its
first channels (each min–max scaled). The plot items are made once and updated in place."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from workbench.widgets import pixmap_from_array

BINS = 48
GRID_MAX = 16   # channels shown in the grid
CELL = 40       # pixels per channel tile


def histogram(arr: np.ndarray, bins: int = BINS) -> tuple[np.ndarray, np.ndarray]:
    """(bin centres, counts) of the finite values of ``arr`` (empty when there are none)."""
    a = np.asarray(arr, np.float64).reshape(-1)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return np.zeros(0), np.zeros(0)
    lo, hi = float(a.min()), float(a.max())
    if hi <= lo:
        hi = lo + 1.0
    counts, edges = np.histogram(a, bins=bins, range=(lo, hi))
    return (edges[:-1] + edges[1:]) / 2, counts.astype(float)


def channel_grid(arr: np.ndarray, limit: int = GRID_MAX, cell: int = CELL) -> np.ndarray | None:
    """An (H, W) uint8 mosaic of the first ``limit`` channels of an NCHW-like tensor, each
    min–max scaled; None when the tensor is not image-like (rank 4 with spatial dims ≥ 2)."""
    a = np.asarray(arr)
    if a.ndim != 4 or a.shape[2] < 2 or a.shape[3] < 2 or a.dtype.kind not in "fiub":
        return None
    chans = a[0, :limit].astype(np.float32)
    n, h, w = chans.shape
    cols = int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / cols))
    # nearest-neighbour resample every channel to one tile
    yi = (np.arange(cell) * h // cell).clip(0, h - 1)
    xi = (np.arange(cell) * w // cell).clip(0, w - 1)
    tiles = chans[:, yi][:, :, xi]
    lo = np.nanmin(tiles, axis=(1, 2), keepdims=True)
    hi = np.nanmax(tiles, axis=(1, 2), keepdims=True)
    scaled = np.nan_to_num((tiles - lo) / np.where(hi > lo, hi - lo, 1.0)) * 255
    grid = np.full((rows * (cell + 2), cols * (cell + 2)), 255, np.uint8)
    for k in range(n):
        r, c = divmod(k, cols)
        grid[r * (cell + 2):r * (cell + 2) + cell,
             c * (cell + 2):c * (cell + 2) + cell] = scaled[k].astype(np.uint8)
    return grid


class TensorView(QWidget):
    """Histogram plus channel grid of one tensor."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.plot = pg.PlotWidget()
        self.plot.setFixedHeight(118)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.plot.getAxis("left").setWidth(36)
        self.plot.setLabel("bottom", "value")
        self.bars = pg.BarGraphItem(x=np.zeros(0), height=np.zeros(0), width=1.0,
                                    brush=pg.mkBrush("#5B8DEF"), pen=pg.mkPen(None))
        self.plot.addItem(self.bars)
        self.grid = QLabel()
        self.grid.setToolTip("first channels of the output, each min–max scaled")
        box = QHBoxLayout(self)  # side by side: the text above keeps its room
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.plot, 1)
        box.addWidget(self.grid)
        self.channels_shown = 0
        self.setVisible(False)

    def show_tensor(self, arr: np.ndarray | None) -> None:
        """Show ``arr`` (None hides the view)."""
        if arr is None or np.asarray(arr).dtype.kind not in "fiub":
            self.setVisible(False)
            return
        centres, counts = histogram(arr)
        width = float(centres[1] - centres[0]) if len(centres) > 1 else 1.0
        self.bars.setOpts(x=centres, height=counts, width=width)
        if len(centres):
            self.plot.setXRange(centres[0] - width, centres[-1] + width, padding=0)
            self.plot.setYRange(0, float(counts.max()) * 1.1, padding=0)
        grid = channel_grid(arr)
        if grid is not None:
            self.grid.setPixmap(pixmap_from_array(grid, 116))
            self.channels_shown = min(GRID_MAX, np.asarray(arr).shape[1])
        else:
            self.channels_shown = 0
        self.grid.setVisible(grid is not None)
        self.setVisible(True)
