"""String CPU kernels (NumPy object arrays of Python str): StringConcat, StringSplit,
RegexFullMatch, StringNormalizer."""

from __future__ import annotations

import re

import numpy as np

from engine.backends.cpu.registry import cpu_kernel

_concat = np.frompyfunc(lambda a, b: str(a) + str(b), 2, 1)


@cpu_kernel("StringConcat")
def StringConcat(layer, inputs):
    return np.asarray(_concat(inputs[0], inputs[1]), dtype=object)


@cpu_kernel("StringSplit")
def StringSplit(layer, inputs):
    x = inputs[0]
    delim = layer.attr("delimiter") or None  # empty or missing: runs of whitespace
    maxsplit = layer.attr("maxsplit")
    maxsplit = -1 if maxsplit is None else int(maxsplit)
    parts = [str(s).split(delim, maxsplit) for s in x.reshape(-1)]
    width = max((len(p) for p in parts), default=0)
    y = np.full((len(parts), width), "", dtype=object)
    for i, p in enumerate(parts):
        y[i, :len(p)] = p
    counts = np.array([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
    return y.reshape(x.shape + (width,)), counts


@cpu_kernel("RegexFullMatch")
def RegexFullMatch(layer, inputs):
    pattern = re.compile(layer.attr("pattern"))
    x = inputs[0]
    return np.array([pattern.fullmatch(str(s)) is not None for s in x.reshape(-1)],
                    dtype=bool).reshape(x.shape)


@cpu_kernel("StringNormalizer")
def StringNormalizer(layer, inputs):
    x = inputs[0]
    stop = layer.attr("stopwords") or []
    sensitive = bool(layer.attr("is_case_sensitive", 0))
    action = layer.attr("case_change_action", "NONE")
    stop_set = set(stop) if sensitive else {s.lower() for s in stop}
    words = [str(s) for s in x.reshape(-1)]
    kept = [w for w in words if (w if sensitive else w.lower()) not in stop_set]
    if action == "LOWER":
        kept = [w.lower() for w in kept]
    elif action == "UPPER":
        kept = [w.upper() for w in kept]
    if not kept:
        kept = [""]  # an all-stopwords input gives one empty string
    out = np.array(kept, dtype=object)
    return out.reshape(1, -1) if x.ndim == 2 else out
