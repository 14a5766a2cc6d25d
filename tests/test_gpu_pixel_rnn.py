"""LSTM on GPU_PIXEL against onnxruntime (layout 0) and the ONNX reference evaluator
(layout 1: onnxruntime has no batch-first LSTM): directions, layouts, initial states, bias
or none, omitted outputs, hidden sizes that are not multiples of 4; and the model families
with LSTMs run every layer that is not CPU-forced on GPU_PIXEL."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from engine import BackendType, ModelLoader, Worker, families

F = TensorProto.FLOAT


def reference_outputs(proto, feeds: dict, layout: int) -> list:
    """The model's outputs from onnxruntime, or from the ONNX reference evaluator for
    batch-first (layout 1) recurrent layers, which onnxruntime does not run."""
    if layout:
        return ReferenceEvaluator(proto).run(None, feeds)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, feeds)


def lstm_feeds_and_reference(proto, seq, batch, inp, hid, dirs, layout, states, bias, rng,
                             scale):
    """Fresh float32 inputs for ``_model``'s LSTM (weights ~ N(0, scale)) and the
    reference outputs for them."""
    feeds = {"x": rng.normal(size=(batch, seq, inp) if layout else (seq, batch, inp)),
             "w": rng.normal(0, scale, size=(dirs, 4 * hid, inp)),
             "r": rng.normal(0, scale, size=(dirs, 4 * hid, hid))}
    if bias:
        feeds["b"] = rng.normal(0, 0.3, size=(dirs, 8 * hid))
    for name in states:
        feeds[name] = rng.normal(size=(batch, dirs, hid) if layout else (dirs, batch, hid))
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    return feeds, reference_outputs(proto, feeds, layout)


def _model(seq, batch, inp, hid, dirs, layout, outputs, states, bias, direction):
    x_shape = [batch, seq, inp] if layout else [seq, batch, inp]
    st = [batch, dirs, hid] if layout else [dirs, batch, hid]
    y_shape = [batch, seq, dirs, hid] if layout else [seq, dirs, batch, hid]
    inputs = [helper.make_tensor_value_info("x", F, x_shape),
              helper.make_tensor_value_info("w", F, [dirs, 4 * hid, inp]),
              helper.make_tensor_value_info("r", F, [dirs, 4 * hid, hid])]
    names = ["x", "w", "r", "b" if bias else ""]
    if bias:
        inputs.append(helper.make_tensor_value_info("b", F, [dirs, 8 * hid]))
    if states:
        inputs += [helper.make_tensor_value_info(n, F, st) for n in states]
        names += [""] + [n if n in states else "" for n in ("h0", "c0")]
    outs = [helper.make_tensor_value_info(n, F, s) for n, s in
            zip(("y", "y_h", "y_c"), (y_shape, st, st)) if n in outputs]
    node = helper.make_node("LSTM", names, [n if n in outputs else "" for n in
                                            ("y", "y_h", "y_c")],
                            name="lstm", hidden_size=hid, layout=layout, direction=direction)
    graph = helper.make_graph([node], "lstm", inputs, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


CASES = [  # seq, batch, inp, hid, direction, layout, outputs, initial states, bias
    (7, 3, 5, 6, "forward", 0, ("y", "y_h", "y_c"), (), True),
    (9, 2, 4, 5, "reverse", 0, ("y", "y_c"), ("h0", "c0"), True),
    (6, 3, 7, 8, "bidirectional", 0, ("y", "y_h"), ("h0", "c0"), False),
    (5, 1, 3, 33, "bidirectional", 0, ("y_h", "y_c"), ("c0",), True),
    (8, 2, 5, 6, "bidirectional", 1, ("y", "y_h", "y_c"), ("h0", "c0"), True),
    (4, 3, 6, 7, "reverse", 1, ("y",), ("h0",), False),
]


@pytest.mark.gpu
@pytest.mark.parametrize("seq,batch,inp,hid,direction,layout,outputs,states,bias", CASES)
def test_lstm_matches_reference(seq, batch, inp, hid, direction, layout, outputs, states, bias,
                                require_gpu, rng):
    dirs = 2 if direction == "bidirectional" else 1
    proto = _model(seq, batch, inp, hid, dirs, layout, outputs, states, bias, direction)
    feeds, want = lstm_feeds_and_reference(proto, seq, batch, inp, hid, dirs, layout, states,
                                           bias, rng, 0.5)
    model = ModelLoader.load(proto.SerializeToString())
    with Worker(model, "gpu-pixel") as worker:
        worker.schedule(feeds)
        got = [worker.peek_output(o.name).download_to_array() for o in model.outputs]
        placed = worker.placement["lstm"]
        assert placed.backend is BackendType.GPU_PIXEL, placed.reason
    for spec, g, w in zip(model.outputs, got, want):
        assert g.shape == w.shape, spec.name
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=spec.name)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["crnn_recognizer", "audio_streaming"])
def test_lstm_families_have_no_fallback_on_gpu_pixel(name, require_gpu):
    model = ModelLoader.load(families.path(name))
    feeds = families.get(name).inputs("test", 0)
    with Worker(model, "gpu-pixel") as worker:
        worker.schedule(feeds)
        for o in model.outputs:
            worker.peek_output(o.name).download_to_array()
        lstms = [lay.name for lay in model.layers if lay.op_type == "LSTM"]
        assert lstms
        for n in lstms:
            assert worker.placement[n].backend is BackendType.GPU_PIXEL, \
                worker.placement[n].reason
        fallbacks = {n: p.reason for n, p in worker.placement.items()
                     if p.reason and p.reason.startswith("fallback")}
    assert not fallbacks, fallbacks


@pytest.mark.gpu
@pytest.mark.parametrize("seq,attrs,words", [
    (4, {"clip": 3.0}, "cell clip"),
    (4, {"activations": ["Sigmoid", "Relu", "Tanh"]}, "activations"),
    (2100, {}, "texel limit"),  # 2100 steps * 2 directions * batch 2 rows of states
])
def test_lstm_declines_with_a_reason(seq, attrs, words, require_gpu):
    proto = _model(seq, 2, 3, 4, 2, 0, ("y",), (), True, "bidirectional")
    proto.graph.node[0].attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
    model = ModelLoader.load(proto.SerializeToString())
    with Worker(model, "gpu-pixel") as worker:
        placed = worker.placement["lstm"]
    assert placed.backend is BackendType.CPU
    assert words in placed.reason, placed.reason
