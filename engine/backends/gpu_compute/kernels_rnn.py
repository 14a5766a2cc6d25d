"""LSTM: the input projection of every step as one matmul per direction, then the recurrence
in one dispatch for the whole sequence (one workgroup per direction and batch row, the
hidden state shared in workgroup memory), or for hidden sizes above SEQ_MAX_HIDDEN one
dispatch per time step (both directions at once).

The projection used to be computed inside each step: on CPU adapters a step's cost is its
loads, and the W loads were more than half of them; 80 steps of a narrow LSTM stay bound by
the per-dispatch latency, though.
"""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.kernels_matmul import Operand, matmul
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, gpu_kernel
from engine.ops.base import Meta
from engine.ops.rnn import lstm_default_reason

F32_DT = np.dtype(np.float32)
#: hidden sizes up to this run the whole sequence in one dispatch (``lstm_seq.wgsl``: 64
#: invocations of up to 16 units a workgroup); larger ones dispatch once per step
SEQ_MAX_HIDDEN = 1024


@gpu_kernel("LSTM", since=7, dtypes=F32, inputs=(0, 1, 2, 3, 5, 6), check=lstm_default_reason)
def LSTM(ctx, layer, ins, metas, out_metas):
    x, w, r = metas[0], metas[1], metas[2]
    layout = int(layer.attr("layout", 0))
    seq, batch = (x.shape[1], x.shape[0]) if layout else (x.shape[0], x.shape[1])
    dirs, inp, hid = w.shape[0], x.shape[2], r.shape[2]
    dbh = dirs * batch * hid
    direction = layer.attr("direction", "forward")
    rev_from = {"forward": dirs, "reverse": 0}.get(direction, 1)
    has_bias = len(ins) > 3 and ins[3] is not None
    aux_host = np.zeros(dirs * 8 * hid + 2 * dbh, F32_DT)
    aux = ctx.upload(aux_host)
    offset = 0
    for index, size in ((3, dirs * 8 * hid), (5, dbh), (6, dbh)):
        if len(ins) > index and ins[index] is not None and size:
            ctx.copy(ins[index], 0, aux, offset * 4, size * 4)
        offset += size
    y_meta = Meta((batch, seq, dirs, hid) if layout else (seq, dirs, batch, hid), F32_DT)
    y = ctx.tensor(y_meta)
    state = ctx.tensor(Meta((4 * dbh,), F32_DT))
    rows = seq * batch
    # gates[d] = X W[d]^T over every step: X's rows are contiguous in either layout
    gates = ctx.tensor(Meta((dirs, rows, 4 * hid), F32_DT))
    matmul(ctx, Operand(ins[0], inp, 1), Operand(ins[1], 1, inp, batch=4 * hid * inp), gates,
           rows, 4 * hid, inp, dirs, c_batch=rows * 4 * hid)
    if hid <= SEQ_MAX_HIDDEN:
        params = pack(seq, batch, inp, hid, dirs, 0, layout, int(has_bias), rev_from, 0, 0, 0)
        ctx.dispatch(Program.of("lstm_seq.wgsl"), [gates, ins[2], aux, y, state], params,
                     dirs * batch)
    else:
        program = Program.of("lstm_step.wgsl")
        for step in range(seq):
            params = pack(seq, batch, inp, hid, dirs, step, layout, int(has_bias), rev_from,
                          0, 0, 0)
            ctx.dispatch(program, [gates, ins[2], aux, y, state], params, -(-dbh // 64))
    ctx.free(gates)
    outs = []
    names = list(layer.outputs) + [""] * (3 - len(layer.outputs))
    if names[0]:
        outs.append(y)
    else:
        outs.append(None)
    for k, name in enumerate(names[1:3]):
        if not name:
            outs.append(None)
            continue
        out = ctx.tensor(Meta(out_metas[k + 1].shape, F32_DT))
        ctx.copy(state, (2 + k) * dbh * 4, out, 0, dbh * 4)
        outs.append(out)
    if not names[0]:
        ctx.free(y)
    ctx.free(state)
    ctx.free(aux)
    return outs[:len(layer.outputs)]
