"""Loss CPU kernels (NumPy): NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss."""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.registry import cpu_kernel


def nll_loss(logp: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
             reduction: str, ignore_index: int | None) -> np.ndarray:
    """NLL of log-probabilities ``logp`` (N, C, d...) for class ``target`` (N, d...)."""
    target = np.asarray(target).astype(np.int64)
    ignored = (target == ignore_index) if ignore_index is not None else np.zeros(target.shape,
                                                                                 bool)
    safe = np.where(ignored, 0, target)
    picked = np.take_along_axis(logp, np.expand_dims(safe, 1), axis=1)[:, 0]
    w = np.ones(target.shape, logp.dtype) if weight is None else weight[safe]
    w = np.where(ignored, 0, w).astype(np.float64)
    loss = -picked.astype(np.float64) * w
    if reduction == "none":
        out = loss
    elif reduction == "sum":
        out = loss.sum()
    elif reduction == "mean":
        total = w.sum()
        out = loss.sum() / total if total != 0 else np.float64(0.0) * loss.sum()
    else:
        raise ValueError(f"unknown reduction {reduction!r}")
    return np.asarray(out).astype(logp.dtype)


@cpu_kernel("NegativeLogLikelihoodLoss")
def NegativeLogLikelihoodLoss(layer, inputs):
    x, target = inputs[0], inputs[1]
    weight = inputs[2] if len(inputs) > 2 else None
    return nll_loss(x, target, weight, layer.attr("reduction", "mean"),
                    layer.attr("ignore_index"))


@cpu_kernel("SoftmaxCrossEntropyLoss")
def SoftmaxCrossEntropyLoss(layer, inputs):
    scores, labels = inputs[0], inputs[1]
    weight = inputs[2] if len(inputs) > 2 else None
    s = scores.astype(np.float64)
    shifted = s - s.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = nll_loss(logp, labels, weight, layer.attr("reduction", "mean"),
                    layer.attr("ignore_index")).astype(scores.dtype)
    return loss, logp.astype(scores.dtype)
