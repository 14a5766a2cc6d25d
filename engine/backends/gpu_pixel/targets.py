"""Passes that write several colour targets at once (a fragment computing several output
texels: shaders/pixel/conv_tap.wgsl), and the copies that put their columns in place.

Every tensor stays one texture: target 0 is the output, written over the columns [0, width)
by the pass; each other target's same columns are then copied into the output at their
offset. Recorded into the renderer's current command encoder, in order with its passes,
and reported to the run's recorder (when one is recording) so that replays re-issue them.
"""

from __future__ import annotations

from engine.backends.gpu_common import gpu_errors
from engine.backends.gpu_pixel.handles import PixelTensor
from engine.backends.gpu_pixel.layout import layout_of
from engine.backends.gpu_pixel.renderer import Renderer, Tex, pack_params


def draw_targets(r: Renderer, label: str, pipe, outs: list[Tex], textures: list[Tex],
                 params: bytes, width: int) -> None:
    """Record one render pass writing the columns [0, width) of every target in ``outs``
    (all the same size; the pipeline's locations 0..), keeping the rest of them."""
    pipeline, bgl, n_tex = pipe
    if r.rec is not None:
        r.rec.drew_targets(label, pipe, outs, textures, params, width)
    with gpu_errors(f"recording {label}"):
        group = r.bind_group(bgl, n_tex, textures, params)
        rp = r._enc().begin_render_pass(
            color_attachments=[{"view": t.view, "load_op": "load", "store_op": "store"}
                               for t in outs],
            timestamp_writes=r._timestamp_writes(label))
        rp.set_pipeline(pipeline)
        rp.set_bind_group(0, group)
        rp.set_scissor_rect(0, 0, width, outs[0].height)
        rp.draw(3)
        rp.end()


def copy_columns(r: Renderer, src: Tex, dst: Tex, dst_x: int, width: int) -> None:
    """Record a copy of the columns [0, width) of ``src`` (all rows) into ``dst`` from column
    ``dst_x`` on."""
    if r.rec is not None:
        r.rec.copied_columns(src, dst, dst_x, width)
    with gpu_errors("copying a texture"):
        record_column_copy(r._enc(), src, dst, dst_x, width)


def record_column_copy(encoder, src: Tex, dst: Tex, dst_x: int, width: int) -> None:
    encoder.copy_texture_to_texture({"texture": src.texture, "origin": (0, 0, 0)},
                                    {"texture": dst.texture, "origin": (dst_x, 0, 0)},
                                    (width, src.height, 1))


def run_columns(be, shader: str, out_shape, inputs, ints, floats, per: int, q: int,
                **consts) -> PixelTensor:
    """A pass of ``shader`` whose fragment at column x computes the output columns x + j * q
    for j < ``per``, one colour target each (``per`` 1: a plain pass)."""
    if per == 1:
        return be.run(shader, out_shape, inputs, ints=ints, floats=floats, P=1, **consts)
    lay = layout_of(tuple(out_shape))
    texes = [be.tex_of(t) if isinstance(t, PixelTensor) else t for t in inputs]
    lays = [t.layout if isinstance(t, PixelTensor) else None for t in inputs]
    outs = [be.r.alloc(lay.width, lay.height) for _ in range(per)]
    pipe = be.r.pipeline(shader, len(texes), targets=per, P=per, **consts)
    draw_targets(be.r, be.label, pipe, outs, texes, pack_params(lay, lays, ints, floats), q)
    for j, extra in enumerate(outs[1:], 1):
        if lay.width > j * q:
            copy_columns(be.r, extra, outs[0], j * q, min(q, lay.width - j * q))
        be.r.release(extra)
    return PixelTensor(lay, outs[0])


_TARGETS: dict[int, int] = {}


def color_targets(be) -> int:
    """The rgba32float colour targets a pass may write on this device (the colour-target
    limits: 8 such targets need 128 bytes a sample)."""
    key = id(be.r.device)
    most = _TARGETS.get(key)
    if most is None:
        limits = be.r.device.limits
        most = _TARGETS[key] = min(int(limits.get("max-color-attachments", 1)),
                                   int(limits.get("max-color-attachment-bytes-per-sample",
                                                  16)) // 16)
    return most


def pixels_per_fragment(be, ow: int, widest: int = 8) -> int:
    """Output pixels a fragment of such a pass computes (its colour targets): the most of
    ``WIDTHS`` (at most ``widest``) the device's colour-target limits allow (8 rgba32float
    targets need 128 bytes a sample) on rows of at least twice as many pixels, else 1 (and
    always 1 where the backend's ``targets`` is "one")."""
    if be.targets == "one":
        return 1
    most = color_targets(be)
    for per in WIDTHS:
        if per <= min(most, widest) and ow >= 2 * per:
            return per
    return 1


#: pixels a fragment may compute, most first
WIDTHS = (8, 4, 2)
