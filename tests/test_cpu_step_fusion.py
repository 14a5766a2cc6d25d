"""The CPU plan's own fusions (engine.backends.cpu.step_fusion) against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker

RNG = np.random.default_rng(7)


def _model(nodes, inits, extra_inputs=(), out_shape=None, opset=17, x_shape=(1, 6, 9, 9)):
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in extra_inputs]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape or ["a", "b", "c", "d"])
    graph = helper.make_graph(nodes, "g", inputs, [out],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _conv_inits(m=8, c=6, k=3, group=1):
    return {"w": RNG.normal(0, 0.3, (m, c // group, k, k)).astype(np.float32),
            "b": RNG.normal(0, 0.3, m).astype(np.float32)}


def _conv(out="t", group=1, m=8):
    return helper.make_node("Conv", ["x", "w", "b"], [out], kernel_shape=[3, 3],
                            pads=[1, 1, 1, 1], group=group)


def _check(proto, feeds, fused_steps, optimize=True):
    model = ModelLoader.from_proto(proto, optimize=optimize)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    with Worker(model, "cpu") as worker:
        steps = worker._cpu_steps()
        assert sum(1 for s in steps if s[6]) == fused_steps
        worker.schedule(feeds)
        got = worker.peek_output("y").download_to_array()
        assert [t.name for t in worker.last_profile.layers] == [x.name for x in model.layers]
        worker.schedule(feeds, capture="all")  # captures run the unfused plan
        unfused = worker.peek_output("y").download_to_array()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(unfused, want, rtol=1e-4, atol=1e-5)


def _x():
    return RNG.normal(0, 1, (1, 6, 9, 9)).astype(np.float32)


@pytest.mark.parametrize("gate", ["Sigmoid", "HardSigmoid"])
@pytest.mark.parametrize("group", [1, 6])
def test_conv_gate_mul(gate, group):
    attrs = {"alpha": 0.25, "beta": 0.4} if gate == "HardSigmoid" else {}
    nodes = [_conv(group=group, m=6 if group > 1 else 8),
             helper.make_node(gate, ["t"], ["s"], **attrs),
             helper.make_node("Mul", ["s", "t"], ["y"])]
    inits = _conv_inits(m=6 if group > 1 else 8, group=group)
    # (loaded with the passes, SiLU is already the Conv's activation: tests/test_fused_silu.py)
    _check(_model(nodes, inits), {"x": _x()}, 1, optimize=gate != "Sigmoid")


def test_conv_hardswish():
    nodes = [_conv(), helper.make_node("HardSwish", ["t"], ["y"])]
    _check(_model(nodes, _conv_inits()), {"x": _x()}, 1, optimize=False)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("kernel", [1, 3])
def test_conv_residual(relu, kernel):
    inits = _conv_inits(m=6, k=kernel)
    pads = [kernel // 2] * 4
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], kernel_shape=[kernel] * 2,
                              pads=pads),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Add", ["r", "t"], ["u" if relu else "y"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["u"], ["y"]))
    _check(_model(nodes, inits), {"x": _x()}, 1)


def test_conv_residual_that_broadcasts_runs_unfused():
    inits = _conv_inits(m=6)
    nodes = [_conv(), helper.make_node("Add", ["t", "z"], ["y"])]
    feeds = {"x": _x(), "z": RNG.normal(0, 1, (1, 1, 9, 9)).astype(np.float32)}
    proto = _model(nodes, inits, [("z", [1, 1, 9, 9])])
    _check(proto, feeds, 1)


def test_batchnorm_relu():
    c = 6
    inits = {"g": RNG.uniform(0.5, 1.5, c).astype(np.float32),
             "be": RNG.normal(0, 0.3, c).astype(np.float32),
             "mu": RNG.normal(0, 0.3, c).astype(np.float32),
             "var": RNG.uniform(0.5, 1.5, c).astype(np.float32)}
    nodes = [helper.make_node("Relu", ["x"], ["x1"]),
             helper.make_node("BatchNormalization", ["x1", "g", "be", "mu", "var"], ["t"]),
             helper.make_node("Relu", ["t"], ["y"])]
    _check(_model(nodes, inits), {"x": _x()}, 1)


def test_intermediate_read_twice_is_not_fused():
    nodes = [_conv(), helper.make_node("Sigmoid", ["t"], ["s"]),
             helper.make_node("Mul", ["s", "t"], ["u"]),
             helper.make_node("Add", ["u", "s"], ["y"])]
    _check(_model(nodes, _conv_inits()), {"x": _x()}, 0)


def _fire(extra=()):
    """A SqueezeNet fire module: a 1x1 squeeze, then 1x1 and 3x3 expands concatenated."""
    inits = {"ws": RNG.normal(0, 0.4, (4, 6, 1, 1)).astype(np.float32),
             "w1": RNG.normal(0, 0.4, (5, 4, 1, 1)).astype(np.float32),
             "b1": RNG.normal(0, 0.3, 5).astype(np.float32),
             "w3": RNG.normal(0, 0.3, (7, 4, 3, 3)).astype(np.float32),
             "b3": RNG.normal(0, 0.3, 7).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "ws"], ["s"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["s"], ["sr"]),
             helper.make_node("Conv", ["sr", "w1", "b1"], ["e1"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["e1"], ["r1"]),
             helper.make_node("Conv", ["sr", "w3", "b3"], ["e3"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["e3"], ["r3"]),
             helper.make_node("Concat", ["r1", "r3", *extra], ["y"], axis=1)]
    return nodes, inits


@pytest.mark.parametrize("batch", [1, 2])
def test_convs_write_into_their_concat(batch):
    """Batch 1: both expands write their channels of the Concat's output; batch 2 (channel
    runs are not contiguous there): the fused step declines and the layers run as they are."""
    nodes, inits = _fire()
    proto = _model(nodes, inits, x_shape=("n", 6, 9, 9))
    x = RNG.normal(0, 1, (batch, 6, 9, 9)).astype(np.float32)
    _check(proto, {"x": x}, 1)


def test_concat_with_an_input_that_is_no_conv_is_not_fused():
    nodes, inits = _fire(extra=("sr",))
    _check(_model(nodes, inits), {"x": _x()}, 0)


def test_concat_of_a_conv_read_elsewhere_is_not_fused():
    nodes, inits = _fire()
    nodes[-1] = helper.make_node("Concat", ["r1", "r3"], ["c"], axis=1)
    nodes.append(helper.make_node("ReduceSum", ["r3"], ["m"], keepdims=1))
    nodes.append(helper.make_node("Add", ["c", "m"], ["y"]))
    _check(_model(nodes, inits), {"x": _x()}, 0)


@pytest.mark.parametrize("c,side", [(8, 9), (128, 40)])  # one stacked product / split
def test_grouped_pointwise_conv_residual(c, side):
    """ShuffleNet's grouped 1x1 Conv -> Add (residual) -> Relu: the residual in the grouped
    products' epilogue."""
    inits = {"w": RNG.normal(0, 0.3, (c, c // 4, 1, 1)).astype(np.float32),
             "b": RNG.normal(0, 0.3, c).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], kernel_shape=[1, 1], group=4),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Add", ["t", "r"], ["u"]),
             helper.make_node("Relu", ["u"], ["y"])]
    x = RNG.normal(0, 1, (1, c, side, side)).astype(np.float32)
    _check(_model(nodes, inits, x_shape=x.shape), {"x": x}, 1)
