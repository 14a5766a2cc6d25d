"""ONNX element types as NumPy dtypes (ml_dtypes for bfloat16, float8 and 4-bit types)."""

from __future__ import annotations

import numpy as np

from engine.errors import ModelLoadError


def onnx_dtype(elem_type: int) -> np.dtype:
    """NumPy dtype of an ONNX TensorProto element type (strings are ``object``)."""
    from onnx import TensorProto, helper

    if elem_type == TensorProto.STRING:
        return np.dtype(object)
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception as exc:
        raise ModelLoadError(f"unsupported tensor element type {elem_type}") from exc
