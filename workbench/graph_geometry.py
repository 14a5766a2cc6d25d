"""What painting a layout needs, precomputed off the UI thread: node rectangles, edge paths
grouped in horizontal bands (so a paint touches only the visible ones), arrow tips and the
anchors of the edge labels. QRectF and QPainterPath are plain values, safe in any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QRectF
from PySide6.QtGui import QPainterPath

from workbench.layout import KIND_LAYER, GraphLayout

BAND_H = 1200.0     # height of the bands edges are grouped in (scene units)


@dataclass
class GraphGeometry:
    """Everything painting needs that depends only on the layout."""

    rect: QRectF
    rects: list[QRectF]
    bands: list[tuple[float, float, QPainterPath, QPainterPath]]
    tips: np.ndarray
    tip_dirs: np.ndarray
    label_xy: np.ndarray
    forced_producer: np.ndarray
    index_of: dict[str, int]


def build_geometry(layout: GraphLayout, model) -> GraphGeometry:
    """Node rectangles, banded edge paths, arrow tips and label anchors of a layout."""
    left, top, right, bottom = layout.bounds
    n = len(layout.names)
    left_x, top_y = layout.x - layout.w / 2, layout.y - layout.h / 2
    rects = [QRectF(float(left_x[i]), float(top_y[i]), float(layout.w[i]), float(layout.h[i]))
             for i in range(n)]
    forced = set(model.cpu_forced)
    forced_producer = np.zeros(n, bool)
    for i in range(n):
        li = layout.layer_index[i]
        if li >= 0 and any(o in forced for o in model.layers[li].outputs):
            forced_producer[i] = True
    tips, dirs = _edge_tips(layout)
    # edge label anchors: just below the producer, where the tensor leaves it
    label_xy = np.array([[e.points[0, 0], e.points[0, 1] + 12] for e in layout.edges]
                        ).reshape(-1, 2)
    return GraphGeometry(QRectF(left - 40, top - 40, right - left + 80, bottom - top + 80),
                         rects, _edge_bands(layout, forced), tips, dirs, label_xy,
                         forced_producer,
                         {name: i for i, name in enumerate(layout.names)
                          if layout.kinds[i] == KIND_LAYER})


def _edge_tips(layout: GraphLayout) -> tuple[np.ndarray, np.ndarray]:
    if not layout.edges:
        return np.zeros((0, 2)), np.zeros((0, 2))
    tips = np.array([e.points[-1] for e in layout.edges])
    d = tips - np.array([e.points[-2] for e in layout.edges])
    norm = np.hypot(d[:, 0], d[:, 1])
    return tips, d / np.where(norm > 0, norm, 1.0)[:, None]


def _edge_bands(layout: GraphLayout, forced_names: set[str]):
    """Edges as paths per horizontal band, so painting touches only the visible bands."""
    if not layout.edges:
        return []
    seg = np.vstack([np.hstack([e.points[:-1], e.points[1:]]) for e in layout.edges])
    forced = np.repeat([any(t in forced_names for t in e.tensors) for e in layout.edges],
                       [len(e.points) - 1 for e in layout.edges])
    y0 = np.minimum(seg[:, 1], seg[:, 3])
    y1 = np.maximum(seg[:, 1], seg[:, 3])
    # a segment goes in every band it crosses
    first = np.floor((y0 - y0.min()) / BAND_H).astype(np.int64)
    last = np.floor((y1 - y0.min()) / BAND_H).astype(np.int64)
    order = np.argsort(first, kind="stable")
    rows = seg.tolist()
    bands = []
    long_segs = np.flatnonzero(last > first)  # few: only direct long edges
    starts = np.searchsorted(first[order], np.arange(int(last.max()) + 2))
    for b in range(int(last.max()) + 1):
        sel = order[starts[b]:starts[b + 1]]
        extra = long_segs[(first[long_segs] < b) & (last[long_segs] >= b)]
        sel = np.concatenate([sel, extra]) if len(extra) else sel
        if not len(sel):
            continue
        paths = (QPainterPath(), QPainterPath())
        for k in sel.tolist():
            path = paths[1] if forced[k] else paths[0]
            x_a, y_a, x_b, y_b = rows[k]
            path.moveTo(x_a, y_a)
            path.lineTo(x_b, y_b)
        bands.append((float(y0[sel].min()), float(y1[sel].max()), *paths))
    return bands
