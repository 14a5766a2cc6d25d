"""The GPU_PIXEL device handle."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.backends.gpu_pixel.layout import TexLayout


class PixelTensor:
    """A device handle: a texture holding a float32 tensor, and/or the host array it came from.

    Arrays the textures cannot hold (other dtypes, empty or oversized tensors) stay on the
    host; kernels only read those as parameters (their values are known on the CPU).
    """

    __slots__ = ("layout", "tex", "host", "derived", "early")

    def __init__(self, layout: TexLayout | None, tex: Any = None,
                 host: np.ndarray | None = None, early: Any = None):
        self.layout, self.tex, self.host = layout, tex, host
        #: a replayed run's output: its read back state (``replayed.EarlyRead``), else None
        self.early = early
        #: textures derived from this one by kernels (e.g. repacked weights), by key
        self.derived: dict[Any, PixelTensor] = {}

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape if self.layout is not None else tuple(self.host.shape)
