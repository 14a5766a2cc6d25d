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
        outs = [Meta(y, x.dtype)] + [Meta(state, x.dtype) for _ in range(self.n_states)]
        return outs[:max(1, len(layer.outputs))]


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
