"""CausalConvWithState (opset 27) on every backend against the ONNX reference evaluator, on
fresh random data: both outputs, with and without bias and past state, each activation,
kernel sizes 1, 3 and 4 (GPU_PIXEL leaves size 1 to the CPU: its state is empty).

The op has its own shape logic (engine/ops/conv_pool.py); it is the worked example of
docs/ADDING_AN_OP.md, (b).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from engine import BackendType, ModelLoader, Worker
from engine.ops import find_op
from engine.ops.base import Meta
from tests.modelgen import F, model

BACKENDS = [pytest.param("cpu"), pytest.param("gpu-compute", marks=pytest.mark.gpu),
            pytest.param("gpu-pixel", marks=pytest.mark.gpu)]


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param != "cpu":
        request.getfixturevalue("require_gpu")
    return request.param


def _case(b, c, length, k, bias, past, activation):
    names = ["x", "w", "bias" if bias else "", "past" if past else ""]
    while not names[-1]:
        names.pop()
    attrs = {} if activation is None else {"activation": activation}
    node = helper.make_node("CausalConvWithState", names, ["y", "state"], **attrs)
    shapes = {"x": [b, c, length], "w": [c, 1, k], "bias": [c], "past": [b, c, k - 1]}
    inputs = [(n, F, shapes[n]) for n in names if n]
    return model([node], inputs, [("y", F, [b, c, length]), ("state", F, [b, c, k - 1])],
                 opset=27)


@pytest.mark.parametrize("k", [1, 3, 4])
@pytest.mark.parametrize("bias,past", [(False, False), (True, False), (True, True),
                                       (False, True)])
@pytest.mark.parametrize("activation", [None, "silu", "swish"])
def test_matches_reference_evaluator(backend, rng, k, bias, past, activation):
    b, c, length = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 12))
    proto = _case(b, c, length, k, bias, past, activation)
    feeds = {"x": rng.standard_normal((b, c, length)).astype(np.float32) * 3,
             "w": rng.standard_normal((c, 1, k)).astype(np.float32)}
    if bias:
        feeds["bias"] = rng.standard_normal(c).astype(np.float32)
    if past:
        feeds["past"] = rng.standard_normal((b, c, k - 1)).astype(np.float32)
    want_y, want_state = ReferenceEvaluator(proto).run(None, feeds)
    with Worker(ModelLoader.from_proto(proto), backend) as w:
        w.schedule(feeds)
        got_y = w.peek_output("y").download_to_array()
        got_state = w.peek_output("state").download_to_array()
        placed = {name: p.backend for name, p in w.placement.items()}
    native = BackendType.parse(backend) if k > 1 or backend != "gpu-pixel" else BackendType.CPU
    assert all(p is native for p in placed.values()), placed
    np.testing.assert_allclose(got_y, want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got_state, want_state)


def test_shape_logic_checks_the_state():
    op = find_op("CausalConvWithState")
    layer = ModelLoader.from_proto(_case(2, 3, 5, 4, True, True, None)).layers[0]
    f32 = np.dtype(np.float32)
    metas = [Meta((2, 3, 5), f32), Meta((3, 1, 4), f32), Meta((3,), f32), Meta((2, 3, 3), f32)]
    assert [m.shape for m in op.infer(layer, metas)] == [(2, 3, 5), (2, 3, 3)]
    metas[3] = Meta((2, 3, 2), f32)
    with pytest.raises(ValueError, match="past_state"):
        op.infer(layer, metas)
