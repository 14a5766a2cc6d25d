"""LSTM on GPU_COMPUTE against onnxruntime (the ONNX reference for batch-first layouts):
directions, layouts, initial states, omitted outputs."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from engine import BackendType, ModelLoader, Worker
from tests.test_gpu_pixel_rnn import reference_outputs


def _lstm_model(seq, batch, inp, hid, dirs, layout, outputs, with_states, reverse=False):
    f = TensorProto.FLOAT
    x_shape = [batch, seq, inp] if layout else [seq, batch, inp]
    st = [batch, dirs, hid] if layout else [dirs, batch, hid]
    inputs = [helper.make_tensor_value_info("x", f, x_shape),
              helper.make_tensor_value_info("w", f, [dirs, 4 * hid, inp]),
              helper.make_tensor_value_info("r", f, [dirs, 4 * hid, hid]),
              helper.make_tensor_value_info("b", f, [dirs, 8 * hid])]
    names = ["x", "w", "r", "b"]
    if with_states:
        inputs += [helper.make_tensor_value_info("h0", f, st),
                   helper.make_tensor_value_info("c0", f, st)]
        names += ["", "h0", "c0"]
    y_shape = [batch, seq, dirs, hid] if layout else [seq, dirs, batch, hid]
    outs = [helper.make_tensor_value_info(n, f, s) for n, s in
            zip(["y", "y_h", "y_c"], [y_shape, st, st]) if n in outputs]
    node = helper.make_node("LSTM", names, [n if n in outputs else "" for n in
                                            ["y", "y_h", "y_c"]], hidden_size=hid,
                            layout=layout,
                            direction="bidirectional" if dirs == 2 else
                            ("reverse" if reverse else "forward"))
    graph = helper.make_graph([node], "lstm", inputs, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


@pytest.mark.gpu
@pytest.mark.parametrize("dirs,layout,outputs,with_states,reverse", [
    (1, 0, ("y", "y_h", "y_c"), False, False),
    (1, 0, ("y", "y_c"), True, True),
    (2, 0, ("y", "y_h"), True, False),
    (2, 1, ("y_h", "y_c"), True, False),
    (1, 1, ("y",), False, False),
])
def test_lstm_matches_onnxruntime(dirs, layout, outputs, with_states, reverse, require_gpu,
                                  rng):
    _check(7, 3, 5, 6, dirs, layout, outputs, with_states, reverse, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("hid,seq_max", [(70, None), (130, None), (6, 4)])
def test_lstm_hidden_sizes_and_the_per_step_form(hid, seq_max, require_gpu, rng,
                                                 monkeypatch):
    """Invocations owning 2 and 3 hidden units of the one-dispatch recurrence, and the
    per-step dispatches used for hidden sizes above ``SEQ_MAX_HIDDEN``."""
    from engine.backends.gpu_compute import kernels_rnn

    if seq_max is not None:
        monkeypatch.setattr(kernels_rnn, "SEQ_MAX_HIDDEN", seq_max)
    _check(5, 2, 4, hid, 2, 0, ("y", "y_h", "y_c"), True, False, rng)


def _check(seq, batch, inp, hid, dirs, layout, outputs, with_states, reverse, rng):
    proto = _lstm_model(seq, batch, inp, hid, dirs, layout, outputs, with_states, reverse)
    feeds = {"x": rng.normal(size=(batch, seq, inp) if layout else (seq, batch, inp)),
             "w": rng.normal(0, 0.5, size=(dirs, 4 * hid, inp)),
             "r": rng.normal(0, 0.5 / max(1.0, hid / 16) ** 0.5, size=(dirs, 4 * hid, hid)),
             "b": rng.normal(0, 0.2, size=(dirs, 8 * hid))}
    if with_states:
        st = (batch, dirs, hid) if layout else (dirs, batch, hid)
        feeds["h0"], feeds["c0"] = rng.normal(size=st), rng.normal(size=st)
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    want = reference_outputs(proto, feeds, layout)  # (batch-first: the ONNX evaluator)
    model = ModelLoader.load(proto.SerializeToString())
    with Worker(model, "gpu-compute") as worker:
        worker.schedule(feeds)
        got = [worker.peek_output(o.name).download_to_array() for o in model.outputs]
        assert all(p.backend is BackendType.GPU_COMPUTE for p in worker.placement.values())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
