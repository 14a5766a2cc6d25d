"""Passes that write several colour targets at once (a fragment computing several output
texels: shaders/pixel/conv_tap.wgsl), and the copies that put their columns in place.

Every tensor stays one texture: target 0 is the output, written over the columns [0, width)
by the pass; each other target's same columns are then copied into the output at their
offset. Recorded into the renderer's current command encoder, in order with its passes,
and reported to the run's recorder (when one is recording) so that replays re-issue them.
"""

from __future__ import annotations

from engine.backends.gpu_common import gpu_errors
from engine.backends.gpu_pixel.renderer import Renderer, Tex


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
