"""Detection CPU kernels (NumPy): NonMaxSuppression."""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.registry import cpu_kernel


def _corners(boxes: np.ndarray, center: bool) -> np.ndarray:
    """(N, 4) boxes as (y_min, x_min, y_max, x_max)."""
    b = boxes.astype(np.float64)
    if center:  # [x_center, y_center, width, height]
        xc, yc, w, h = b.T
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=1)
    y1, x1, y2, x2 = b.T
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
                     np.maximum(x1, x2)], axis=1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    ih = np.maximum(0, np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]))
    iw = np.maximum(0, np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]))
    inter = ih * iw
    area = lambda b: (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    union = area(box) + area(others) - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def _scalar(inputs, i, default, kind=float):
    v = inputs[i] if len(inputs) > i and inputs[i] is not None else None
    return default if v is None or np.asarray(v).size == 0 else kind(np.asarray(v).reshape(-1)[0])


@cpu_kernel("NonMaxSuppression", since=10)
def NonMaxSuppression(layer, inputs):
    boxes, scores = inputs[0], inputs[1]
    max_out = _scalar(inputs, 2, 0, int)
    iou_thr = _scalar(inputs, 3, 0.0)
    score_thr = _scalar(inputs, 4, None)
    center = bool(layer.attr("center_point_box", 0))
    picked = []
    for b in range(boxes.shape[0]):
        corners = _corners(boxes[b], center)
        for c in range(scores.shape[1]):
            s = scores[b, c].astype(np.float64)
            order = np.argsort(-s, kind="stable")
            if score_thr is not None:
                order = order[s[order] > score_thr]
            kept: list[int] = []
            while order.size and len(kept) < max_out:
                top = order[0]
                kept.append(int(top))
                rest = order[1:]
                order = rest[_iou(corners[top], corners[rest]) <= iou_thr]
            picked += [(b, c, k) for k in kept]
    return np.array(picked, dtype=np.int64).reshape(-1, 3)
