"""Attention (opsets 23-25) and RotaryEmbedding on the CPU (NumPy, float64 inside).

Attention follows the opset-25 text, which the older versions' errata adopted: bottom-right
causal alignment (offset = past length, or nonpad_kv_seqlen - q length), sliding windows,
GQA/MQA head sharing, softcap, and zero rows for fully masked queries.
"""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.kernel_util import onnx_dtype
from engine.backends.cpu.registry import cpu_kernel


def _heads(x: np.ndarray, n: int | None) -> np.ndarray:
    """(B, S, H*D) -> (B, H, S, D); 4-D inputs are already (B, H, S, D)."""
    if x.ndim == 4:
        return x
    if not n:
        raise ValueError("Attention: 3-D inputs need q_num_heads and kv_num_heads")
    b, s, hd = x.shape
    return x.reshape(b, s, n, hd // n).transpose(0, 2, 1, 3)


def _opt(inputs, i):
    return inputs[i] if len(inputs) > i and inputs[i] is not None else None


@cpu_kernel("Attention", since=23)
def Attention(layer, inputs):
    q_in, k_in, v_in = inputs[:3]
    mask, past_k, past_v, nonpad = (_opt(inputs, i) for i in (3, 4, 5, 6))
    dtype = q_in.dtype
    q = _heads(q_in, layer.attr("q_num_heads")).astype(np.float64)
    k = _heads(k_in, layer.attr("kv_num_heads")).astype(np.float64)
    v = _heads(v_in, layer.attr("kv_num_heads")).astype(np.float64)
    past_len = 0
    if past_k is not None:
        past_len = past_k.shape[2]
        k = np.concatenate([past_k.astype(np.float64), k], axis=2)
        v = np.concatenate([past_v.astype(np.float64), v], axis=2)
    present_k, present_v = k.astype(dtype), v.astype(dtype)
    b, hq, sq, dh = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"Attention: {hq} query heads do not group over {hkv} kv heads")
    k_rep = np.repeat(k, hq // hkv, axis=1)
    v_rep = np.repeat(v, hq // hkv, axis=1)
    scale = layer.attr("scale") or 1.0 / np.sqrt(dh)
    root = np.sqrt(scale)
    scores = (q * root) @ np.swapaxes(k_rep * root, -1, -2)
    raw = scores
    softcap = float(layer.attr("softcap", 0.0) or 0.0)
    if softcap > 0:
        scores = np.tanh(scores / softcap) * softcap
    capped = scores

    allowed = np.ones((b, 1, sq, skv), dtype=bool)
    bias = np.zeros((1, 1, 1, 1))
    if mask is not None:
        m = mask
        if m.shape[-1] < skv:  # a shorter mask covers the valid prefix of the cache
            pad = [(0, 0)] * (m.ndim - 1) + [(0, skv - m.shape[-1])]
            m = np.pad(m, pad, constant_values=False if m.dtype == bool else -np.inf)
        if m.dtype == bool:
            allowed = allowed & m
        else:
            bias = m.astype(np.float64)
    if nonpad is not None:
        valid = np.arange(skv)[None, :] < np.asarray(nonpad).reshape(-1, 1)
        allowed = allowed & valid[:, None, None, :]
    if past_k is not None:
        offset = np.full(b, past_len)
    elif nonpad is not None:
        offset = np.asarray(nonpad).reshape(-1) - sq
    else:
        offset = np.zeros(b, np.int64)
    pos = offset[:, None] + np.arange(sq)[None, :]  # absolute query positions (B, Sq)
    j = np.arange(skv)[None, None, :]
    if layer.attr("is_causal", 0):
        allowed = allowed & (j <= pos[:, :, None])[:, None]
    left, right = layer.attr("left_window_size", -1), layer.attr("right_window_size", -1)
    if left is not None and left >= 0:
        allowed = allowed & (j >= pos[:, :, None] - left)[:, None]
    if right is not None and right >= 0:
        allowed = allowed & (j <= pos[:, :, None] + right)[:, None]
    scores = np.where(allowed, scores + bias, -np.inf)
    biased = scores

    precision = layer.attr("softmax_precision")
    if precision:
        scores = scores.astype(onnx_dtype(precision)).astype(np.float64)
    top = np.max(scores, axis=-1, keepdims=True)
    dead = ~np.isfinite(top)  # fully masked rows give zeros, not NaN
    e = np.exp(scores - np.where(dead, 0, top))
    total = e.sum(axis=-1, keepdims=True)
    probs = np.where(dead | (total == 0), 0.0, e / np.where(total == 0, 1, total))
    y = probs @ v_rep
    if q_in.ndim == 3:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    mode = layer.attr("qk_matmul_output_mode", 0)
    qk = {0: raw, 1: capped, 2: biased, 3: probs}[mode]
    return y.astype(dtype), present_k, present_v, qk.astype(dtype)


@cpu_kernel("RotaryEmbedding", since=23)
def RotaryEmbedding(layer, inputs):
    x, cos, sin = inputs[:3]
    pos = _opt(inputs, 3)
    shape = x.shape
    if x.ndim == 4:  # (B, H, S, D) -> (B, S, H, D)
        t = x.transpose(0, 2, 1, 3)
    else:
        n = layer.attr("num_heads")
        t = x.reshape(shape[0], shape[1], n, shape[2] // n)
    d = layer.attr("rotary_embedding_dim") or t.shape[3]
    rot, keep = t[..., :d], t[..., d:]
    if pos is not None:
        cos, sin = cos[pos], sin[pos]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    if layer.attr("interleaved", 0):
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = rot[..., : d // 2], rot[..., d // 2:]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if layer.attr("interleaved", 0):
        rot = np.stack([real, imag], axis=-1).reshape(rot.shape)
    else:
        rot = np.concatenate([real, imag], axis=-1)
    out = np.concatenate([rot, keep], axis=-1).astype(x.dtype)
    return out.transpose(0, 2, 1, 3) if x.ndim == 4 else out.reshape(shape)
