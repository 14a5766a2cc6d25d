"""LSTM with a small hidden size: the whole recurrence in one pass (shaders/pixel/lstm_seq.wgsl).

The per-step path (kernels_rnn.py) draws a pass and copies a texture for every time step.
On a rasteriser each pass costs far more than the arithmetic of one step of a small LSTM
(~0.2 ms a step on lavapipe for hidden size 32), so for hidden sizes that fit the colour
targets of one fragment (4 units a target, at most 8 targets: 32 units) a single pass runs
the recurrence: the fragment of history column s and (direction, batch) row runs steps
0..s with every unit's h and c in private memory and writes h after step s, units 4k..4k + 3
into target k; column seq holds c after the last step. A row's fragments repeat each
other's early steps, seq (seq + 1) / 2 steps in all, so the path is taken for short
sequences only (``MAX_STEP_WORK``). Y and the final states are then gathered from the
targets (lstm_gather.wgsl).
"""

from __future__ import annotations

from engine.backends.gpu_pixel.handles import PixelTensor
from engine.backends.gpu_pixel.layout import layout_of
from engine.backends.gpu_pixel.renderer import pack_params
from engine.backends.gpu_pixel.targets import color_targets, draw_targets

#: the one-pass recurrence's fragments run seq^2 / 2 steps a row, each ~H^2 work; the per-step
#: path draws seq passes. Measured on lavapipe (GPU time of the LSTM): H 32: 16 steps 1.5 vs
#: 2.4 ms, 24 steps even, 32 steps 7.9 vs 4.8 ms; H 16: 64 steps 5.5 vs 6.8 ms. So the path is
#: taken while seq * max(H, 8)^2 stays under 20 steps at H 32, and never past ``MAX_SEQ``
MAX_STEP_WORK = 20 * 32 * 32
MAX_SEQ = 256
#: colour targets a fragment may write (4 hidden units each), fewest first
TARGETS = (1, 2, 4, 8)
#: texture bindings of lstm_gather.wgsl (one per target of the recurrence)
GATHER_TEXTURES = 8


def seq_targets(be, seq: int, hid: int) -> int | None:
    """Colour targets of the one-pass recurrence for ``seq`` steps of ``hid`` units, or None
    when the per-step path runs the LSTM."""
    if seq > MAX_SEQ or seq * max(hid, 8) ** 2 > MAX_STEP_WORK or seq + 1 > be.max_dim \
            or hid % 4:  # (the shader takes a gate of 4 units from one texel)
        return None
    need = next((p for p in TARGETS if 4 * p >= hid), None)
    if need is None or need > color_targets(be):
        return None
    return need


def lstm_one_pass(be, names: list[str], out_metas, proj: PixelTensor, r: PixelTensor,
                  h0: PixelTensor | None, c0: PixelTensor | None, ints, targets: int
                  ) -> list[PixelTensor | None]:
    """Y, Y_h, Y_c (None where ``names`` has no output) from the projection ``proj`` (the
    input's part of the gates, lstm.wgsl Proj) and R; ``ints(flags=, comp=)`` gives the
    parameter block shared with lstm.wgsl."""
    (seq, batch, _, hid), (dirs, *_), _ = ints()
    rows = dirs * batch
    dummy = be.r.dummy
    texes = [be.tex_of(proj), be.tex_of(r), dummy if h0 is None else be.tex_of(h0),
             dummy if c0 is None else be.tex_of(c0)]
    lays = [proj.layout, r.layout, None if h0 is None else h0.layout,
            None if c0 is None else c0.layout]
    flags = (h0 is not None) | (c0 is not None) << 1
    history = [be.r.alloc(seq + 1, rows) for _ in range(targets)]
    pipe = be.r.pipeline("lstm_seq", len(texes), targets=targets, P=targets, H=hid)
    draw_targets(be.r, be.label, pipe, history, texes,
                 pack_params(layout_of((rows, seq + 1)), lays, ints(flags=flags)), seq + 1)
    sources = history + [dummy] * (GATHER_TEXTURES - targets)
    outs: list[PixelTensor | None] = [None, None, None]
    if names[0]:
        outs[0] = be.run("lstm_gather", out_metas[0].shape, sources, n_tex=GATHER_TEXTURES,
                         OP="Y", T=1, ints=ints())
    if names[1] and names[2]:  # Y_h and Y_c: one pass writing both
        lay = layout_of(tuple(out_metas[1].shape))
        pair = [be.r.alloc(lay.width, lay.height) for _ in range(2)]
        pipe = be.r.pipeline("lstm_gather", GATHER_TEXTURES, targets=2, OP="State", T=2)
        draw_targets(be.r, be.label, pipe, pair, sources,
                     pack_params(lay, [None] * GATHER_TEXTURES, ints()), lay.width)
        outs[1], outs[2] = (PixelTensor(lay, t) for t in pair)
    else:
        for k in (1, 2):
            if names[k]:
                outs[k] = be.run("lstm_gather", out_metas[k].shape, sources,
                                 n_tex=GATHER_TEXTURES, OP="State", T=1, ints=ints(comp=k - 1))
    for tex in history:
        be.r.release(tex)
    return outs
