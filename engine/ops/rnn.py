"""Shape logic of the recurrent ops (RNN, GRU, LSTM): outputs Y, Y_h (and Y_c for LSTM).

Layout 0: X is [seq, batch, input], Y [seq, directions, batch, hidden], Y_h/Y_c
[directions, batch, hidden]; layout 1 puts batch first: X [batch, seq, input], Y
[batch, seq, directions, hidden], Y_h/Y_c [batch, directions, hidden].
"""

from __future__ import annotations

import numpy as np

from engine.model import Layer
from engine.ops.base import Meta, Op, register_op


class _Recurrent(Op):
    since_version = 7
    n_states = 1

    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        x, w, r = inputs[0], inputs[1], inputs[2]
        if len(x.shape) != 3 or len(w.shape) != 3 or len(r.shape) != 3:
            raise ValueError(f"{layer.op_type} needs rank-3 X, W and R")
        dirs = w.shape[0]
        hidden = int(layer.attr("hidden_size") or r.shape[-1])
        if layer.attr("layout", 0):
            batch, seq = x.shape[0], x.shape[1]
            y, state = (batch, seq, dirs, hidden), (batch, dirs, hidden)
        else:
            seq, batch = x.shape[0], x.shape[1]
            y, state = (seq, dirs, batch, hidden), (dirs, batch, hidden)
        check_recurrent_inputs(layer, [None if m is None else tuple(m.shape) for m in inputs])
        outs = [Meta(y, x.dtype)] + [Meta(state, x.dtype) for _ in range(self.n_states)]
        return outs[:max(1, len(layer.outputs))]


_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def check_recurrent_inputs(layer: Layer, shapes: list[tuple[int, ...] | None]) -> None:
    """Raise ValueError naming the input when B, initial_h or initial_c do not fit X/W/R
    (a user's state tensor with another batch size must not be read past its end)."""
    x, w, r = shapes[0], shapes[1], shapes[2]
    dirs, hidden = w[0], r[-1]
    batch = x[0] if layer.attr("layout", 0) else x[1]
    state = (batch, dirs, hidden) if layer.attr("layout", 0) else (dirs, batch, hidden)
    gates = _GATES.get(layer.op_type, 1)
    want = {3: ("B", (dirs, 2 * gates * hidden)), 5: ("initial_h", state),
            6: ("initial_c", state)}
    for index, (name, shape) in want.items():
        if index == 6 and layer.op_type != "LSTM":
            continue
        got = shapes[index] if index < len(shapes) else None
        if got is not None and tuple(got) != shape:
            raise ValueError(f"{layer.op_type} {name} must have shape {list(shape)} for X "
                             f"{list(x)}, got {list(got)}")


@register_op
class RNN(_Recurrent):
    pass


@register_op
class GRU(_Recurrent):
    pass


@register_op
class LSTM(_Recurrent):
    n_states = 2


def lstm_default_reason(layer: Layer, metas: list[Meta | None]) -> str | None:
    """Why the GPU LSTM kernels (default activations, full sequences) cannot run ``layer``."""
    acts = layer.attr("activations")
    if acts and [a.lower() for a in acts] != ["sigmoid", "tanh", "tanh"] * (len(acts) // 3):
        return f"LSTM with activations {acts} runs on the CPU (the GPU has the defaults)"
    if layer.attr("clip") is not None:
        return "LSTM with a cell clip runs on the CPU"
    if layer.attr("input_forget", 0):
        return "LSTM with coupled input/forget gates runs on the CPU"
    if len(metas) > 7 and metas[7] is not None:
        return "LSTM with peephole weights runs on the CPU"
    lens = metas[4] if len(metas) > 4 else None
    if lens is not None:
        x = metas[0]
        seq = x.shape[1] if layer.attr("layout", 0) else x.shape[0]
        if lens.value is None:
            return "LSTM sequence_lens must be known on the CPU to run on the GPU"
        if np.any(np.asarray(lens.value) != seq):
            return "LSTM with sequences shorter than the input runs on the CPU"
    return None
