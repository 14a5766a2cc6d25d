"""Classic-ML and text CPU kernels: LabelEncoder, Binarizer, ArrayFeatureExtractor
(ai.onnx.ml) and TfIdfVectorizer."""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.registry import cpu_kernel

ML = "ai.onnx.ml"


def _first(layer, names):
    for n in names:
        v = layer.attr(n)
        if v is not None and (not hasattr(v, "__len__") or len(v)):
            return n, v
    return None, None


@cpu_kernel("LabelEncoder", domain=ML)
def LabelEncoder(layer, inputs):
    x = inputs[0]
    _, keys = _first(layer, ("keys_tensor", "keys_strings", "keys_int64s", "keys_floats"))
    vname, values = _first(layer, ("values_tensor", "values_strings", "values_int64s",
                                   "values_floats"))
    keys, values = np.asarray(keys).reshape(-1), np.asarray(values).reshape(-1)
    if vname == "values_strings" or values.dtype.kind in "OUS":
        out_dtype, default = np.dtype(object), layer.attr("default_string", "_Unused")
        values = values.astype(object)
    elif vname == "values_int64s" or values.dtype.kind in "iu":
        out_dtype, default = values.dtype if vname == "values_tensor" else np.dtype(np.int64), \
            layer.attr("default_int64", -1)
    else:
        out_dtype = values.dtype if vname == "values_tensor" else np.dtype(np.float32)
        default = layer.attr("default_float", -0.0)
    dt = layer.attr("default_tensor")
    if dt is not None and np.asarray(dt).size:
        default = np.asarray(dt).reshape(-1)[0]
    table = {}
    nan_value = None
    for k, v in zip(keys.tolist(), values.tolist()):
        if isinstance(k, float) and np.isnan(k):
            nan_value = v  # NaN keys match any NaN input
        else:
            table[k.decode() if isinstance(k, bytes) else k] = v
    flat = []
    for item in x.reshape(-1).tolist():
        if isinstance(item, float) and np.isnan(item) and nan_value is not None:
            flat.append(nan_value)
        else:
            flat.append(table.get(item.decode() if isinstance(item, bytes) else item, default))
    return np.array(flat, dtype=out_dtype).reshape(x.shape)


@cpu_kernel("Binarizer", domain=ML)
def Binarizer(layer, inputs):
    x = inputs[0]
    return (x > layer.attr("threshold", 0.0)).astype(x.dtype)


@cpu_kernel("ArrayFeatureExtractor", domain=ML)
def ArrayFeatureExtractor(layer, inputs):
    x, idx = inputs
    out = np.take(x, np.asarray(idx).reshape(-1).astype(np.int64), axis=-1)
    return out.reshape(1, -1) if x.ndim == 1 else out


def _pool_ngrams(layer) -> dict:
    """n-gram tuple -> output coordinate, from the CSR-like pool attributes."""
    pool = layer.attr("pool_strings") or layer.attr("pool_int64s") or []
    pool = list(pool)
    starts = list(layer.attr("ngram_counts") or [0])
    indexes = list(layer.attr("ngram_indexes") or [])
    table, k = {}, 0
    for n, start in enumerate(starts, start=1):
        end = starts[n] if n < len(starts) else len(pool)
        for i in range(start, end, n):
            table[tuple(pool[i:i + n])] = indexes[k]
            k += 1
    return table


@cpu_kernel("TfIdfVectorizer", since=9)
def TfIdfVectorizer(layer, inputs):
    x = inputs[0]
    table = _pool_ngrams(layer)
    width = max(layer.attr("ngram_indexes")) + 1
    lo, hi = int(layer.attr("min_gram_length")), int(layer.attr("max_gram_length"))
    max_skip = int(layer.attr("max_skip_count", 0))
    mode = layer.attr("mode", "TF")
    weights = layer.attr("weights")
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    out = np.zeros((rows.shape[0], width), dtype=np.float32)
    for r, row in enumerate(rows.tolist()):
        row = [v.decode() if isinstance(v, bytes) else v for v in row]
        for n in range(lo, hi + 1):
            for skip in range(0, max_skip + 1 if n > 1 else 1):  # a 1-gram has no gaps
                step = skip + 1
                for i in range(len(row) - (n - 1) * step):
                    col = table.get(tuple(row[i + j * step] for j in range(n)))
                    if col is not None:
                        out[r, col] += 1
    if weights is not None and len(weights):
        w = np.zeros(width, np.float32)
        w[list(layer.attr("ngram_indexes"))] = weights
    else:
        w = np.ones(width, np.float32)
    if mode == "IDF":
        out = np.minimum(out, 1) * w
    elif mode == "TFIDF":
        out = out * w
    return out.reshape(width) if x.ndim == 1 else out
