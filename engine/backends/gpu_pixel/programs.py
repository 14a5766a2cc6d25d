"""What a pixel pass is made of: its render pipeline (a shader file specialised by template
parameters) and its packed uniform block."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from engine.backends.gpu_common import gpu_errors, load_shader
from engine.backends.gpu_common.arith_probe import division_constants
from engine.backends.gpu_pixel.layout import TexLayout

FORMAT = "rgba32float"
#: 32-bit words of the shaders' ``Params`` uniform block (common.wgsl)
PARAM_WORDS = 16 + 8 * 16 + 8 * 4 + 8 * 4
#: uniform blocks kept (with the bind groups that use them) before the caches start over
MAX_CACHED_UNIFORMS = 8192


_PACKED: dict[tuple, bytes] = {}


def pack_params(out: TexLayout, inputs: list[TexLayout | None], ints=(), floats=()) -> bytes:
    """The uniform block of one pass: output and input layouts, then kernel parameters
    (remembered: a run of a plan packs the same blocks as the run before it)."""
    # floats by their bits: -0.0 and 0.0 compare equal but pack differently
    flat = [float(v) for vec in floats for v in vec]
    key = (out, tuple(inputs), tuple(map(tuple, ints)), tuple(map(len, floats)),
           struct.pack(f"{len(flat)}d", *flat))
    packed = _PACKED.get(key)
    if packed is None:
        if len(_PACKED) >= MAX_CACHED_UNIFORMS:
            _PACKED.clear()
        packed = _PACKED[key] = _pack(out, inputs, ints, floats)
    return packed


def _pack(out: TexLayout, inputs: list[TexLayout | None], ints, floats) -> bytes:
    words = np.zeros(PARAM_WORDS, np.uint32)
    words[0:16] = out.desc_words()
    for k, lay in enumerate(inputs):
        if lay is not None:
            words[16 + 16 * k:32 + 16 * k] = lay.desc_words()
    base = 16 + 8 * 16
    iv = words[base:base + 32].view(np.int32)
    for k, vec in enumerate(ints):
        iv[4 * k:4 * k + len(vec)] = [int(v) for v in vec]
    fv = words[base + 32:base + 64].view(np.float32)
    for k, vec in enumerate(floats):
        fv[4 * k:4 * k + len(vec)] = [float(v) for v in vec]
    return words.tobytes()


@dataclass(frozen=True)
class RenderProgram:
    """A pixel shader file, its texture count, template parameters and colour-target count
    (the cache key); its render pipeline is built once per device."""

    shader: str
    n_tex: int
    params: tuple[tuple[str, object], ...] = ()
    targets: int = 1

    def build(self, device) -> tuple:
        """(render pipeline, bind group layout, texture count)."""
        import wgpu

        source = load_shader(f"pixel/{self.shader}.wgsl", prelude="pixel/common.wgsl",
                             **dict(self.params))
        entries = [{"binding": 0, "visibility": wgpu.ShaderStage.FRAGMENT,
                    "buffer": {"type": wgpu.BufferBindingType.uniform}}]
        entries += [{"binding": 1 + k, "visibility": wgpu.ShaderStage.FRAGMENT,
                     "texture": {"sample_type": wgpu.TextureSampleType.unfilterable_float,
                                 "view_dimension": "2d"}} for k in range(self.n_tex)]
        with gpu_errors(f"compiling shader pixel/{self.shader}.wgsl"):
            fragment = {"entry_point": "fs_main",
                        "targets": [{"format": FORMAT}] * self.targets}
            constants = division_constants(device, source)
            if constants:
                fragment["constants"] = constants
            module = device.create_shader_module(code=source)
            bgl = device.create_bind_group_layout(entries=entries)
            layout = device.create_pipeline_layout(bind_group_layouts=[bgl])
            pipe = device.create_render_pipeline(
                layout=layout,
                vertex={"module": module, "entry_point": "vs_main"},
                fragment={"module": module, **fragment},
                primitive={"topology": "triangle-list"})
        return pipe, bgl, self.n_tex
