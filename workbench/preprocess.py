"""Turning user files into model inputs: images (resize, colour, invert, normalise) and .npy.

Pure NumPy; the Qt side only decodes image files into ``uint8`` RGB arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.model import TensorSpec


class InputFileError(ValueError):
    """A file cannot feed an input; the message says why and what was expected."""


@dataclass
class Preprocess:
    """Editable image preprocessing: resize to the input, colour, invert, (x*scale-mean)/std."""

    color: str = "rgb"          # "rgb", "bgr" or "gray"
    invert: bool = False
    scale: float = 1 / 255
    mean: list[float] = field(default_factory=lambda: [0.0])
    std: list[float] = field(default_factory=lambda: [1.0])

    @classmethod
    def from_dict(cls, d: dict | None, channels: int) -> Preprocess:
        p = cls(color="gray" if channels == 1 else "rgb")
        for key in ("color", "invert", "scale", "mean", "std"):
            if d and key in d:
                setattr(p, key, d[key])
        return p


@dataclass
class ImageLayout:
    """Where an image goes in an input tensor."""

    batch: int
    channels: int
    height: int
    width: int
    channels_last: bool


def image_layout(spec: TensorSpec) -> ImageLayout | None:
    """The image layout of an input (NCHW or NHWC with 1 or 3 channels), or None."""
    shape = spec.shape
    if shape is None or len(shape) not in (3, 4) or spec.dtype is None:
        return None
    if np.dtype(spec.dtype).kind != "f":
        return None
    dims = [d if isinstance(d, int) else 1 for d in shape]
    if len(dims) == 3:
        dims = [1, *dims]
    n, a, b, c = dims
    if a in (1, 3) and b >= 2 and c >= 2:
        return ImageLayout(n, a, b, c, False)
    if c in (1, 3) and a >= 2 and b >= 2:
        return ImageLayout(n, c, a, b, True)
    return None


def concrete_shape(spec: TensorSpec) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else 1 for d in (spec.shape or ()))


def resize_area(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize (H, W, C) by averaging source pixels (good for shrinking; nearest when growing)."""
    h0, w0 = img.shape[:2]
    k = max(1, -(-h0 // height), -(-w0 // width))
    rows = np.minimum(((np.arange(height * k) + 0.5) * h0 / (height * k)).astype(int), h0 - 1)
    cols = np.minimum(((np.arange(width * k) + 0.5) * w0 / (width * k)).astype(int), w0 - 1)
    sampled = img[rows][:, cols].astype(np.float64)
    return sampled.reshape(height, k, width, k, -1).mean(axis=(1, 3))


def image_to_input(rgb: np.ndarray, spec: TensorSpec, pre: Preprocess) -> np.ndarray:
    """An RGB ``uint8`` image (H, W, 3) -> an array for ``spec`` following ``pre``."""
    lay = image_layout(spec)
    if lay is None:
        raise InputFileError(f"input {spec.name!r} ({spec.shape_str()}) is not image-shaped; "
                             "feed it a .npy file instead")
    img = rgb.astype(np.float64)
    if pre.color == "gray" or lay.channels == 1:
        img = (img @ np.array([0.299, 0.587, 0.114]))[..., None]
    elif pre.color == "bgr":
        img = img[..., ::-1]
    img = resize_area(img, lay.height, lay.width)
    if pre.invert:
        img = 255.0 - img
    mean = np.resize(np.asarray(pre.mean, np.float64), lay.channels)
    std = np.resize(np.asarray(pre.std, np.float64), lay.channels)
    if np.any(std == 0):
        raise InputFileError("preprocessing std must not contain 0")
    img = (img * float(pre.scale) - mean) / std
    if img.shape[-1] != lay.channels:
        img = np.repeat(img, lay.channels, axis=-1)
    if not lay.channels_last:
        img = img.transpose(2, 0, 1)
    batch = np.repeat(img[None], lay.batch, axis=0)
    return batch.reshape(concrete_shape(spec)).astype(spec.dtype)


def npy_to_input(arr: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Check a loaded .npy array against ``spec`` (same element count is reshaped; floats cast)."""
    want = concrete_shape(spec)
    if not isinstance(arr, np.ndarray) or arr.dtype == object:
        raise InputFileError("the .npy file does not hold a numeric array")
    if tuple(arr.shape) != want:
        if arr.size != int(np.prod(want)):
            raise InputFileError(f"input {spec.name!r} expects shape {spec.shape_str()}, "
                                 f"the file holds {list(arr.shape)}")
        arr = arr.reshape(want)
    want_dtype = np.dtype(spec.dtype or arr.dtype)
    if arr.dtype != want_dtype:
        if arr.dtype.kind != want_dtype.kind and not (arr.dtype.kind in "iu"
                                                      and want_dtype.kind in "iuf"):
            raise InputFileError(f"input {spec.name!r} expects {want_dtype.name}, "
                                 f"the file holds {arr.dtype.name}")
        arr = arr.astype(want_dtype)
    return np.ascontiguousarray(arr)


def to_display_image(arr: np.ndarray, max_side: int | None = None) -> np.ndarray | None:
    """An (H, W) or (H, W, 3) uint8 picture of an image-shaped tensor, else None; with
    ``max_side`` every k-th pixel is taken first so no side exceeds it (a cheap thumbnail)."""
    a = np.asarray(arr)
    if a.dtype.kind not in "fiub" or a.ndim < 2:
        return None
    while a.ndim > 3 and a.shape[0] == 1:
        a = a[0]
    if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[1] >= 4 and a.shape[2] >= 4:
        a = a.transpose(1, 2, 0)
    elif a.ndim == 3 and a.shape[2] in (1, 3) and a.shape[0] >= 4 and a.shape[1] >= 4:
        pass
    elif a.ndim == 2 and min(a.shape) >= 4:
        a = a[..., None]
    else:
        return None
    if max_side and max(a.shape[:2]) > max_side:
        step = -(-max(a.shape[:2]) // max_side)
        a = a[::step, ::step]
    a = a.astype(np.float32 if a.dtype.itemsize <= 4 else np.float64)
    lo, hi = float(np.nanmin(a)), float(np.nanmax(a))
    a = (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)
    out = np.round(np.nan_to_num(a) * 255).astype(np.uint8)
    return out[..., 0] if out.shape[-1] == 1 else out
