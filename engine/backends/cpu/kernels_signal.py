"""Signal-processing CPU kernels (NumPy FFT): DFT, STFT, Hann/Hamming/Blackman windows,
MelWeightMatrix. Complex tensors are real arrays with a trailing axis of 2."""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.kernel_util import onnx_dtype
from engine.backends.cpu.registry import cpu_kernel


def _complex(x: np.ndarray) -> np.ndarray:
    """Complex view of a (..., 1|2) tensor, at the input's precision (NumPy's FFT keeps
    complex64 for float32 data)."""
    ctype = np.complex64 if x.dtype.itemsize <= 4 else np.complex128
    if x.shape[-1] == 2:
        return (x[..., 0] + 1j * x[..., 1]).astype(ctype)
    return x[..., 0].astype(ctype)


def _pack(z: np.ndarray, dtype) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


def dft(x: np.ndarray, axis: int, length: int | None, inverse: bool, onesided: bool):
    rank = x.ndim
    axis = axis + rank if axis < 0 else axis  # an axis of the signal, not the complex axis
    z = _complex(x)
    if inverse and onesided:  # IRFFT: half spectrum in, real signal out
        n = length or 2 * (z.shape[axis] - 1)
        return np.fft.irfft(z, n=n, axis=axis)[..., None].astype(x.dtype)
    n = length or z.shape[axis]
    out = np.fft.ifft(z, n=n, axis=axis) if inverse else np.fft.fft(z, n=n, axis=axis)
    if onesided:
        out = np.take(out, np.arange(n // 2 + 1), axis=axis)
    return _pack(out, x.dtype)


def _scalar(v):
    return None if v is None or np.asarray(v).size == 0 else int(np.asarray(v).reshape(-1)[0])


@cpu_kernel("DFT", since=17)
def DFT_17(layer, inputs):
    length = _scalar(inputs[1]) if len(inputs) > 1 else None
    return dft(inputs[0], int(layer.attr("axis", 1)), length, bool(layer.attr("inverse", 0)),
               bool(layer.attr("onesided", 0)))


@cpu_kernel("DFT", since=20)
def DFT_20(layer, inputs):
    length = _scalar(inputs[1]) if len(inputs) > 1 else None
    axis = _scalar(inputs[2]) if len(inputs) > 2 else None
    return dft(inputs[0], -2 if axis is None else axis, length,
               bool(layer.attr("inverse", 0)), bool(layer.attr("onesided", 0)))


@cpu_kernel("STFT", since=17)
def STFT(layer, inputs):
    signal, step = inputs[0], _scalar(inputs[1])
    window = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    length = _scalar(inputs[3]) if len(inputs) > 3 else None
    z = _complex(signal)  # (batch, signal_length)
    if length is None:
        length = window.shape[0] if window is not None else z.shape[1]
    w = np.ones(length) if window is None else window.astype(np.float64)
    frames = (z.shape[1] - length) // step + 1
    idx = np.arange(frames)[:, None] * step + np.arange(length)[None, :]
    spec = np.fft.fft(z[:, idx] * w, axis=-1)
    if layer.attr("onesided", 1):
        spec = spec[..., : length // 2 + 1]
    return _pack(spec, signal.dtype)


def _window(layer, size, a0: float, a1: float, a2: float) -> np.ndarray:
    n = int(np.asarray(size).reshape(-1)[0])
    denom = n if layer.attr("periodic", 1) else n - 1
    k = np.arange(n) * (2 * np.pi / denom) if denom else np.zeros(n)
    w = a0 - a1 * np.cos(k) + a2 * np.cos(2 * k)
    return w.astype(onnx_dtype(layer.attr("output_datatype", 1)))


@cpu_kernel("HannWindow", since=17)
def HannWindow(layer, inputs):
    return _window(layer, inputs[0], 0.5, 0.5, 0.0)


@cpu_kernel("HammingWindow", since=17)
def HammingWindow(layer, inputs):
    return _window(layer, inputs[0], 25 / 46, 21 / 46, 0.0)


@cpu_kernel("BlackmanWindow", since=17)
def BlackmanWindow(layer, inputs):
    return _window(layer, inputs[0], 0.42, 0.5, 0.08)


@cpu_kernel("MelWeightMatrix", since=17)
def MelWeightMatrix(layer, inputs):
    bins, n_fft, rate = (int(np.asarray(v).reshape(-1)[0]) for v in inputs[:3])
    lo, hi = (float(np.asarray(v).reshape(-1)[0]) for v in inputs[3:5])
    n_spec = n_fft // 2 + 1
    mel = lambda f: 2595 * np.log10(1 + f / 700)
    # bins + 2 band edges spaced evenly in mel, mapped to DFT bin indices
    points = np.arange(bins + 2) * ((mel(hi) - mel(lo)) / (bins + 2)) + mel(lo)
    hz = 700 * (10 ** (points / 2595) - 1)
    edge = (((n_fft + 1) * hz) // rate).astype(np.int64)
    out = np.zeros((n_spec, bins))
    j = np.arange(n_spec)
    for i in range(bins):
        left, centre, right = edge[i], edge[i + 1], edge[i + 2]
        if centre == left:
            out[centre, i] = 1.0
        else:
            up = (j >= left) & (j <= centre)
            out[up, i] = (j[up] - left) / (centre - left)
        if right > centre:
            down = (j >= centre) & (j < right)
            out[down, i] = (right - j[down]) / (right - centre)
    return out.astype(onnx_dtype(layer.attr("output_datatype", 1)))
