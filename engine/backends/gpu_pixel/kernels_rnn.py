"""LSTM (shaders/pixel/lstm.wgsl): one render pass per time step for every direction at once
(small hidden sizes and sequences run the whole recurrence in one pass: kernels_rnn_seq.py).

One pass first computes the input's part of the gates, X W^T plus both biases, for every
time step at once (one wide pass instead of a loop over the input in every step). The state
of a step, h and c of every direction, batch row and hidden unit, is one small
texture ([1, 2, dirs, batch, H]: a texel holds (h, c)). Each step pass reads the previous
state and draws the next; a texture copy (a transfer, not a pass) appends it to a history
texture that stacks the states of all steps, so the steps cost O(seq) texel traffic. One
last pass gathers Y from the history (a forward direction made time t at step t, a reverse
one at step seq - 1 - t); Y_h and Y_c come from the last state.
"""

from __future__ import annotations

from engine.backends.gpu_pixel.handles import PixelTensor
from engine.backends.gpu_pixel.kernels_rnn_seq import lstm_one_pass, seq_targets
from engine.backends.gpu_pixel.layout import DEFAULT_MAX_DIM, fit_reason
from engine.backends.gpu_pixel.registry import pixel_kernel
from engine.ops.rnn import lstm_default_reason


def _dims(layer, metas):
    x, w, r = metas[0], metas[1], metas[2]
    layout = int(layer.attr("layout", 0))
    seq, batch = (x.shape[1], x.shape[0]) if layout else (x.shape[0], x.shape[1])
    return seq, batch, x.shape[2], r.shape[2], w.shape[0], layout


def _lstm_check(layer, metas):
    why = lstm_default_reason(layer, metas)
    if why is not None or any(m is None for m in metas[:3]):
        return why
    seq, batch, _, hid, dirs, _ = _dims(layer, metas)
    if all(isinstance(v, int) for v in (seq, batch, hid, dirs)):
        why = fit_reason((seq, 2, dirs, batch, hid))
        if why is not None:
            return (f"LSTM keeps the states of all {seq} steps in one texture of "
                    f"{hid} x {seq * dirs * batch} texels (hidden x steps * directions * "
                    f"batch), over the {DEFAULT_MAX_DIM} texel limit it plans with")
    return None


@pixel_kernel("LSTM", since=7, check=_lstm_check, tensors=(0, 1, 2, 3, 5, 6), max_outputs=3)
def LSTM(be, layer, inputs, in_metas, out_metas):
    seq, batch, inp, hid, dirs, layout = _dims(layer, in_metas)
    direction = layer.attr("direction", "forward")
    rev_from = {"forward": dirs, "reverse": 0}.get(direction, 1)

    def given(i):
        return inputs[i] if len(inputs) > i and inputs[i] is not None else None

    def ints(step=0, flags=0, comp=0):
        return [(seq, batch, inp, hid), (dirs, step, layout, flags), (rev_from, comp)]

    dummy = be.r.dummy
    h0, c0 = given(5), given(6)
    bias = given(3)
    proj = be.run("lstm", (seq, 4, dirs, batch, hid),
                  [inputs[0], inputs[1], dummy, dummy if bias is None else bias], n_tex=5,
                  OP="Proj", ints=ints(flags=int(bias is not None)))
    names = list(layer.outputs) + [""] * (3 - len(layer.outputs))
    targets = seq_targets(be, seq, hid)
    if targets is not None:
        outs = lstm_one_pass(be, names, out_metas, proj, inputs[2], h0, c0, ints, targets)
        be.free(proj)
        return outs[:len(layer.outputs)]
    state_shape = (1, 2, dirs, batch, hid)
    state = be.run("lstm", state_shape, [dummy if h0 is None else h0,
                                         dummy if c0 is None else c0], n_tex=5, OP="Init",
                   ints=ints(flags=(h0 is not None) | (c0 is not None) << 1))
    history = be.r.alloc(hid, seq * dirs * batch)
    rows = dirs * batch
    for step in range(seq):
        new = be.run("lstm", state_shape, [proj, dummy, inputs[2], dummy, state], OP="Step",
                     ints=ints(step))
        be.free(state)
        state = new
        be.r.copy_rows(state.tex, history, step * rows)
    outs: list[PixelTensor | None] = []
    if names[0]:
        outs.append(be.run("lstm", out_metas[0].shape, [history], n_tex=5, OP="Y",
                           ints=ints()))
    else:
        outs.append(None)
    be.r.release(history)
    be.free(proj)
    for k, name in enumerate(names[1:3]):
        outs.append(be.run("lstm", out_metas[k + 1].shape, [state.tex], n_tex=5, OP="Final",
                           ints=ints(comp=k)) if name else None)
    be.free(state)
    return outs[:len(layer.outputs)]
