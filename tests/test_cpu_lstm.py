"""The CPU's fused float32 LSTM (``rnn_fast``) against onnxruntime, on random data."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import BackendType, ModelLoader, Worker
from engine.backends.cpu import kernels_rnn, rnn_fast
from engine.errors import EngineError


def _lstm_model(seq, batch, inputs, hidden, direction, states, rng, state_batch="batch"):
    dirs = 2 if direction == "bidirectional" else 1
    weights = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.3, n)
               for n, s in (("W", (dirs, 4 * hidden, inputs)), ("R", (dirs, 4 * hidden, hidden)),
                            ("B", (dirs, 8 * hidden)))]
    names = ["x", "W", "R", "B", "", "h0" if states else "", "c0" if states else ""]
    node = helper.make_node("LSTM", names, ["y", "yh", "yc"], hidden_size=hidden,
                            direction=direction)
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", "batch", inputs])]
    if states:
        graph_inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT,
                                                       [dirs, state_batch, hidden])
                         for n in ("h0", "c0")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [None] * r)
               for n, r in (("y", 4), ("yh", 3), ("yc", 3))]
    graph = helper.make_graph([node], "lstm", graph_inputs, outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), dirs


def _feeds(seq, batch, inputs, hidden, dirs, states, rng):
    feeds = {"x": rng.standard_normal((seq, batch, inputs)).astype(np.float32)}
    if states:
        for n in ("h0", "c0"):
            feeds[n] = rng.standard_normal((dirs, batch, hidden)).astype(np.float32)
    return feeds


@pytest.mark.parametrize("seq,batch,inputs,hidden,direction,states", [
    (16, 1, 32, 32, "forward", True),       # a streaming model's cell
    (12, 1, 64, 48, "bidirectional", False),  # a recognizer's BiLSTM (hidden not 16k)
    (30, 1, 40, 128, "bidirectional", True),  # large enough for one thread a direction
    (7, 3, 10, 5, "reverse", True),
    (9, 2, 12, 20, "bidirectional", True),
    (5, 1, 3, 1, "forward", False),
    (40, 2, 64, 64, "reverse", True),  # one direction over lstm_kernels.SMALL_MACS
])
def test_fast_lstm_matches_onnxruntime(tmp_path, seq, batch, inputs, hidden, direction,
                                       states, monkeypatch):
    monkeypatch.setattr(rnn_fast, "SPLIT_MACS", 0)  # every bidirectional case on two threads
    repeated = []

    def again(layer, inputs):
        result = rnn_fast.lstm_small_again(layer, inputs)
        repeated.append(result is not None)
        return result

    monkeypatch.setattr(kernels_rnn, "lstm_small_again", again)
    dirs = 2 if direction == "bidirectional" else 1
    small = dirs == 1 and (seq + 2) * batch * inputs * 4 * hidden <= rnn_fast.SMALL_MACS
    assert small == (dirs == 1 and seq != 40)  # both one-direction paths are tested
    rng = np.random.default_rng(seq * 1000 + hidden)
    model, dirs = _lstm_model(seq, batch, inputs, hidden, direction, states, rng)
    path = tmp_path / "lstm.onnx"
    onnx.save(model, path)
    worker = Worker(ModelLoader.load(str(path)), BackendType.CPU)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    # later runs take the kept weights and the repeated-call paths (a repeated shape:
    # ``lstm_small_again``), on fresh values each time
    for extra in (0, 1, 1, 0, 0):
        feeds = _feeds(seq + extra, batch, inputs, hidden, dirs, states, rng)
        worker.schedule(feeds)
        want = session.run(None, feeds)
        for name, ref in zip(("y", "yh", "yc"), want):
            got = worker.peek_output(name).download_to_array()
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=2e-5, err_msg=name)
    # the repeated shapes' runs took the short path, the others not
    assert repeated == ([False, False, True, False, True] if small else [False] * 5)


def test_a_state_of_another_batch_is_refused_after_accepted_calls(tmp_path):
    rng = np.random.default_rng(3)
    # the states' batch is a dim of its own: only the kernel can see the mismatch
    model, dirs = _lstm_model(6, 2, 4, 8, "forward", True, rng, state_batch="state_batch")
    path = tmp_path / "lstm.onnx"
    onnx.save(model, path)
    worker = Worker(ModelLoader.load(str(path)), BackendType.CPU)
    feeds = _feeds(6, 2, 4, 8, dirs, True, rng)
    for _ in range(2):
        worker.schedule(feeds)
        worker.peek_output("y").download_to_array()
    wrong_x = dict(feeds, x=feeds["x"][:, :1].copy())  # batch 1 against states of batch 2
    with pytest.raises(EngineError, match="initial_h must have shape"):
        worker.schedule(wrong_x)
        worker.peek_output("y").download_to_array()
    # the same input as accepted calls, states of another batch (not the repeated call)
    wrong_state = dict(feeds, h0=feeds["h0"][:, :1].copy(), c0=feeds["c0"][:, :1].copy())
    with pytest.raises(EngineError, match="initial_h must have shape"):
        worker.schedule(wrong_state)
        worker.peek_output("y").download_to_array()
