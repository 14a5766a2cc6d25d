"""GPU_PIXEL's two LSTM paths against onnxruntime (layout 0) and the ONNX reference
evaluator (layout 1), on fresh random data: the one-pass recurrence (kernels_rnn_seq.py:
short sequences, at most 32 hidden units, a multiple of 4; 1, 2, 4 and 8 colour targets) and
the pass-a-step path beside it (sequences past the one-pass bound, more than 32 units, a
hidden size that is not a multiple of 4). Each case checks
which path its sizes take, so a change of the bound cannot silently test one path twice."""

import numpy as np
import pytest

from engine import BackendType, ModelLoader, Worker
from engine.backends.gpu_pixel.kernels_rnn_seq import seq_targets
from tests.test_gpu_pixel_rnn import _model, lstm_feeds_and_reference

CASES = [  # seq, batch, inp, hid, direction, layout, outputs, states, bias, one pass
    (16, 1, 32, 32, "forward", 0, ("y", "y_h", "y_c"), ("h0", "c0"), True, True),
    (5, 3, 4, 4, "bidirectional", 0, ("y_h",), ("h0",), True, True),
    (11, 2, 6, 12, "reverse", 0, ("y", "y_h", "y_c"), (), False, True),
    (7, 2, 5, 8, "bidirectional", 1, ("y", "y_c"), ("h0", "c0"), True, True),
    (30, 2, 16, 32, "bidirectional", 0, ("y", "y_h", "y_c"), ("h0", "c0"), True, False),
    (6, 2, 5, 36, "forward", 1, ("y", "y_h"), ("c0",), True, False),
    (5, 3, 4, 3, "bidirectional", 0, ("y_h", "y_c"), ("h0",), True, False),
]


@pytest.mark.gpu
@pytest.mark.parametrize("seq,batch,inp,hid,direction,layout,outputs,states,bias,one_pass",
                         CASES)
def test_lstm_paths_match_reference(seq, batch, inp, hid, direction, layout, outputs, states,
                                    bias, one_pass, require_gpu, rng):
    dirs = 2 if direction == "bidirectional" else 1
    proto = _model(seq, batch, inp, hid, dirs, layout, outputs, states, bias, direction)
    feeds, want = lstm_feeds_and_reference(proto, seq, batch, inp, hid, dirs, layout, states,
                                           bias, rng, 0.4)
    model = ModelLoader.load(proto.SerializeToString())
    with Worker(model, "gpu-pixel") as worker:
        assert (seq_targets(worker._backend, seq, hid) is not None) == one_pass
        for _ in range(3):  # the third run is replayed from the recorded second
            worker.schedule(feeds)
            got = [worker.peek_output(o.name).download_to_array() for o in model.outputs]
            for spec, g, w in zip(model.outputs, got, want):
                assert g.shape == w.shape, spec.name
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5, err_msg=spec.name)
        placed = worker.placement["lstm"]
        assert placed.backend is BackendType.GPU_PIXEL, placed.reason
