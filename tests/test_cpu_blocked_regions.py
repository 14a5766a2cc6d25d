"""Blocked regions of the CPU plan (``step_fusion_blocked``, ``nchw16c``): MobileNet-style
inverted-residual blocks built as exporters write them, against onnxruntime on fresh random
data, with channel counts that are not multiples of 16, batches, odd planes, strides, every
vector activation, squeeze-and-excitation, tensors read from outside the region, NaN and
Inf."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from numba import njit
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from engine import ModelLoader, Worker
from engine.backends.cpu import nchw16c, step_fusion_blocked
from engine.backends.cpu.activation import (
    ACT_CLIP,
    ACT_HARDSIGMOID,
    ACT_LEAKY,
    ACT_NONE,
    ACT_RELU,
    ACT_XHARDSIGMOID,
    _act,
)
from engine.backends.cpu.simd import vload, vsplat, vstore


class _Net:
    """An ONNX graph under construction: nodes, constants and a running tensor name."""

    def __init__(self, rng, c: int, positive: bool = False):
        self.rng, self.nodes, self.inits, self.c, self.k = rng, [], {}, c, 0
        self.positive = positive

    def name(self, stem: str) -> str:
        self.k += 1
        return f"{stem}{self.k}"

    def const(self, value) -> str:
        n = self.name("w")
        value = np.asarray(value, np.float32)
        self.inits[n] = np.abs(value) if self.positive else value
        return n

    def conv(self, x, m, k=1, stride=1, group=1, act=None, bias=True):
        c = self.c
        w = self.const(self.rng.normal(0, (1.0 / (k * k * c / group)) ** 0.5,
                                       (m, c // group, k, k)))
        ins = [x, w] + ([self.const(self.rng.normal(0, 0.2, m))] if bias else [])
        y = self.name("c")
        self.nodes.append(helper.make_node("Conv", ins, [y], kernel_shape=[k, k],
                                           strides=[stride, stride], pads=[k // 2] * 4,
                                           group=group))
        self.c = m
        return self.act(y, act)

    def act(self, x, act):
        if act is None:
            return x
        y = self.name("a")
        if act == "Clip":
            self.nodes.append(helper.make_node("Clip", [x, self.const(0.0), self.const(6.0)],
                                               [y]))
        elif act == "LeakyRelu":
            self.nodes.append(helper.make_node("LeakyRelu", [x], [y], alpha=0.1))
        elif act == "HardSigmoid":
            self.nodes.append(helper.make_node("HardSigmoid", [x], [y], alpha=0.2, beta=0.4))
        elif act == "SiLU":  # as exporters write it: x * Sigmoid(x)
            s = self.name("s")
            self.nodes += [helper.make_node("Sigmoid", [x], [s]),
                           helper.make_node("Mul", [x, s], [y])]
        else:
            self.nodes.append(helper.make_node(act, [x], [y]))
        return y

    def se(self, x, r):
        c = self.c
        g = self.name("g")
        self.nodes.append(helper.make_node("GlobalAveragePool", [x], [g]))
        self.c = c
        h = self.conv(g, r, act="Relu")
        s = self.conv(h, c, act="HardSigmoid")
        y = self.name("m")
        self.nodes.append(helper.make_node("Mul", [x, s], [y]))
        return y

    def block(self, x, expand, out, k=3, stride=1, act="Relu", se=False):
        c_in = self.c
        h = self.conv(x, expand, act=act)
        h = self.conv(h, expand, k=k, stride=stride, group=expand, act=act)
        if se:
            h = self.se(h, max(8, expand // 4))
        h = self.conv(h, out)
        if stride == 1 and c_in == out:
            y = self.name("r")
            self.nodes.append(helper.make_node("Add", [h, x], [y]))
            return y
        return h

    def model(self, outputs, shape):
        inp = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", shape[1], "h", "w"])
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["n", "c", "h", "w"])
                for o in outputs]
        graph = helper.make_graph(self.nodes, "g", [inp], outs,
                                  [numpy_helper.from_array(v, k) for k, v in self.inits.items()])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _mobilenet(rng, c=3, act="Relu", pool=True, extra_outputs=False, se=True,
               positive=False, stem=16):
    net = _Net(rng, c, positive)
    h = net.conv("x", stem, k=3, stride=2, act="HardSwish")
    h = net.block(h, 16, 24, k=3, stride=2, act=act)
    inner = net.block(h, 72, 24, k=3, act=act, se=se)
    h = net.block(inner, 72, 40, k=5, stride=2, act="HardSwish", se=se)
    h = net.block(h, 120, 40, k=5, act="HardSwish")
    outs = [h]
    if pool:
        g = net.name("p")
        net.nodes.append(helper.make_node("GlobalAveragePool", [h], [g]))
        outs = [g]
    if extra_outputs:
        side = net.name("side")
        net.nodes.append(helper.make_node("Relu", [inner], [side]))
        outs += [inner, side]
    return net.model(outs, (1, c, 0, 0)), outs


def _run(proto, feeds, outs, optimize=True):
    model = ModelLoader.from_proto(proto, optimize=optimize)
    with Worker(model, "cpu") as worker:
        steps = worker._cpu_steps()
        blocked = sum(1 for s in steps if any(n.endswith(step_fusion_blocked.BLOCKED)
                                              for n in s[2]))
        # a squeeze-and-excitation's gates scale the weights of the 1x1 layer after it
        folded = sum(1 for s in steps if any(n.endswith(step_fusion_blocked.GATES)
                                             for n in s[2]))
        se_muls = sum(1 for n in proto.graph.node if n.op_type == "Mul"
                      and n.output[0].startswith("m"))  # (``_Net.se``'s, not SiLU's)
        assert folded == (blocked and se_muls)
        worker.schedule(feeds)
        got = [worker.peek_output(o).download_to_array() for o in outs]
        worker.schedule(feeds, capture="all")  # captures: the plan without fusions
        plain = [worker.peek_output(o).download_to_array() for o in outs]
    return blocked, got, plain


def _compare(proto, feeds, outs, min_blocked=8):
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(outs, feeds)
    blocked, got, plain = _run(proto, feeds, outs)
    assert blocked >= min_blocked
    for g, p, w in zip(got, plain, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)
        np.testing.assert_allclose(p, w, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("act", ["Relu", "HardSwish", "Clip", "LeakyRelu", "HardSigmoid",
                                 "SiLU", "Sigmoid", "Tanh"])
def test_inverted_residual_blocks_match_onnxruntime(rng, act):
    proto, outs = _mobilenet(rng, act=act)
    _compare(proto, {"x": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)}, outs)


def test_silu_fused_by_the_cpu_plan(rng):
    """Loaded without the import passes, x * Sigmoid(x) stays three layers that the CPU
    plan fuses into the Conv's step; the region takes that step with a SiLU epilogue."""
    proto, outs = _mobilenet(rng, act="SiLU", se=False)
    x = rng.standard_normal((1, 3, 40, 40)).astype(np.float32)
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(outs, {"x": x})
    blocked, got, plain = _run(proto, {"x": x}, outs, optimize=False)
    assert blocked >= 8
    np.testing.assert_allclose(got[0], want[0], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(plain[0], want[0], rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("shape", [(2, 3, 37, 29), (1, 3, 17, 95), (3, 3, 8, 8), (0, 3, 16, 16)])
def test_batches_and_odd_planes(rng, shape):
    proto, outs = _mobilenet(rng)
    _compare(proto, {"x": rng.standard_normal(shape).astype(np.float32)}, outs)


@pytest.mark.parametrize("c,stem", [(4, 24), (1, 8), (8, 40)])
def test_dense_stems(rng, c, stem):
    """The stem (few input channels) writes the blocked layout itself, whatever its
    output channels."""
    proto, outs = _mobilenet(rng, c=c, stem=stem)
    _compare(proto, {"x": rng.standard_normal((2, c, 33, 30)).astype(np.float32)}, outs,
             min_blocked=12)


def test_region_tensors_read_outside_and_as_outputs(rng):
    """A block's output that is also a model output and the input of a layer outside the
    region is written in NCHW as well; the last block's output leaves without a pool."""
    proto, outs = _mobilenet(rng, pool=False, extra_outputs=True)
    _compare(proto, {"x": rng.standard_normal((2, 3, 40, 36)).astype(np.float32)}, outs)


def test_infinities_stay_out_of_padding_lanes(rng):
    """Padding lanes of the last channel block never carry 0 * Inf = NaN into real
    channels: with positive weights an infinite input stays +Inf through the blocks, as
    the ONNX reference evaluator has it (onnxruntime's own channel-blocked kernels turn
    these into NaN); no squeeze-and-excitation, whose pooling would spread it everywhere."""
    proto, outs = _mobilenet(rng, pool=False, se=False, positive=True)
    x = rng.standard_normal((1, 3, 48, 48)).astype(np.float32)
    x[0, 1, 5, 7] = np.inf
    want = ReferenceEvaluator(proto).run(outs, {"x": x})[0]
    blocked, got, plain = _run(proto, {"x": x}, outs)
    assert blocked and np.isfinite(want).any() and np.isposinf(want).any()
    assert not np.isnan(want).any()
    for g in (got[0], plain[0]):
        np.testing.assert_array_equal(np.isposinf(g), np.isposinf(want))
        np.testing.assert_allclose(g, want, rtol=2e-4, atol=2e-5)


def test_small_chains_stay_in_nchw(rng):
    """A region needs MIN_STEPS layers and a depthwise one: a lone 1x1 pair does not pay
    for two layout changes."""
    net = _Net(rng, 8)
    h = net.conv("x", 24, act="Relu")
    h = net.conv(h, 16)
    proto = net.model([h], (1, 8, 0, 0))
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    blocked, got, _ = _run(proto, {"x": x}, [h])
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert blocked == 0
    np.testing.assert_allclose(got[0], want, rtol=2e-4, atol=2e-5)


def test_layout_changes_round_trip(rng):
    for shape in [(1, 16, 4, 4), (2, 21, 5, 7), (1, 40, 16, 17), (1, 3, 1, 1)]:
        x = rng.standard_normal(shape).astype(np.float32)
        b = nchw16c.to_blocked(x)
        assert b.shape == (shape[0], -(-shape[1] // 16), shape[2], shape[3], 16)
        assert not b[:, -1, ..., shape[1] % 16 or 16:].any()  # padding lanes are zeros
        np.testing.assert_array_equal(nchw16c.from_blocked(b, shape[1]), x)
        np.testing.assert_allclose(nchw16c.global_average_pool(b, shape[1])[..., 0, 0],
                                   x.astype(np.float64).mean(axis=(2, 3)), rtol=1e-5,
                                   atol=1e-6)


@njit
def _vact_all(x, out, act, p0, p1):
    for i in range(0, x.size, 16):
        vstore(out, i, nchw16c.vact(vload(x, i), act, vsplat(p0), vsplat(p1)))


@pytest.mark.parametrize("act,p0,p1", [(ACT_NONE, 0, 0), (ACT_RELU, 0, 0), (ACT_LEAKY, 0.1, 0),
                                       (ACT_CLIP, -0.5, 2.0), (ACT_HARDSIGMOID, 0.2, 0.5),
                                       (ACT_XHARDSIGMOID, 1 / 6, 0.5)])
def test_vector_activations_match_the_scalar_ones(rng, act, p0, p1):
    x = (rng.standard_normal(64) * 4).astype(np.float32)
    x[:4] = [np.nan, np.inf, -np.inf, 0.0]
    got = np.empty_like(x)
    _vact_all(x, got, act, np.float32(p0), np.float32(p1))
    want = np.array([_act(v, act, np.float32(p0), np.float32(p1)) for v in x], np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
