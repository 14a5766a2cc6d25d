"""GPU_PIXEL's packed/two-pass shader paths against NumPy float64 and onnxruntime.

Covers matmul_packed.wgsl (every B mode, CPU-known and GPU-computed B), the two-pass
last-axis reductions (LayerNormalization, Softmax, LogSoftmax, ReduceMean/Sum), the
depthwise Conv with packed tap weights and the linear texel shuffles (Transpose, Slice,
Split). Odd sizes exercise the padded components of the 4-per-texel layout; every case
asserts that its layers ran on GPU_PIXEL.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import helper

from engine import BackendType, ModelLoader, Worker
from engine.backends.gpu_pixel.kernels_gemm import packed_plan
from tests.modelgen import F, model, ort_run

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("require_gpu")]


def pixel(proto, feeds):
    """GPU_PIXEL outputs; asserts every layer ran on GPU_PIXEL."""
    m = ModelLoader.from_proto(proto)
    with Worker(m, BackendType.GPU_PIXEL) as w:
        w.schedule(feeds)
        out = [w.peek_output(o.name).download_to_array() for o in m.outputs]
        for name, p in w.placement.items():
            assert p.backend is BackendType.GPU_PIXEL, f"{name} fell back: {p.reason}"
    return out


def one(op, x, inits=(), attrs=None, n_out=1, opset=18, extra_inputs=()):
    """One node on input x (and float graph inputs ``extra_inputs``: [(name, array)])."""
    names = ["x"] + [n for n, _ in extra_inputs] + [n for n, _ in inits]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    ins = [("x", F, list(x.shape))] + [(n, F, list(a.shape)) for n, a in extra_inputs]
    proto = model([node], ins, [(o, F, ["?"]) for o in outs], initializers=inits, opset=opset)
    feeds = {"x": x, **dict(extra_inputs)}
    return pixel(proto, feeds)


def close(got, want, tol=2e-5):
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


MATMUL = [((1, 3, 37, 21), (1, 3, 21, 19), 0), ((2, 5, 9, 13), (1, 5, 13, 7), 0),
          ((2, 1, 9, 13), (2, 5, 13, 7), 0), ((2, 6, 9, 13), (2, 1, 13, 7), 1),
          ((3, 17, 11), (3, 11, 9), 2), ((1, 17, 11), (3, 11, 9), 2),
          ((3, 17, 11), (11, 10), 3), ((2, 5, 9, 13), (13, 6), 3),
          ((2, 9, 6), (6, 3), 3), ((1, 6, 43), (1, 43, 70), 2)]


@pytest.mark.parametrize("a_shape,b_shape,mode", MATMUL)
@pytest.mark.parametrize("b_const", [True, False])
def test_matmul_packed(rng, a_shape, b_shape, mode, b_const):
    """Every B mode; output widths from 3 (one column a fragment) to 70 (8 columns a
    fragment, colour targets copied into place, the last one partly past the end)."""
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    plan = packed_plan(a_shape, b_shape, want.shape)
    assert plan is not None and plan[1]["B_MODE"] == mode
    if b_const:
        (got,) = one("MatMul", a, inits=[("b", b)])
    else:
        (got,) = one("MatMul", a, extra_inputs=[("b", b)])
    close(got, want)


@pytest.mark.parametrize("shape", [(3, 37), (2, 5, 13), (1, 7, 9, 130), (11,), (2, 3, 4)])
def test_last_axis_two_pass(rng, shape):
    x = (rng.standard_normal(shape) * 3 + 5).astype(np.float32)
    xd = x.astype(np.float64)
    d = shape[-1]
    s, b = (rng.standard_normal(d).astype(np.float32) for _ in range(2))
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * s + b
    (got,) = one("LayerNormalization", x, inits=[("s", s), ("b", b)], attrs={"epsilon": 1e-5})
    close(got, want, 1e-4)
    (got,) = one("LayerNormalization", x, inits=[("s", s)], attrs={"epsilon": 1e-5})
    close(got, want - b, 1e-4)
    e = np.exp(xd - xd.max(-1, keepdims=True))
    soft = e / e.sum(-1, keepdims=True)
    close(one("Softmax", x, attrs={"axis": -1})[0], soft)
    close(one("LogSoftmax", x, attrs={"axis": -1})[0], np.log(soft), 1e-4)
    if len(shape) >= 3:
        axes = ("axes", np.array([-1], np.int64))
        close(one("ReduceMean", x, inits=[axes])[0], xd.mean(-1, keepdims=True))
        close(one("ReduceSum", x, inits=[axes])[0], xd.sum(-1, keepdims=True))


@pytest.mark.parametrize("c,k,stride,dil", [(7, 5, 2, 1), (13, 7, 1, 1), (6, 3, 1, 2)])
def test_depthwise_conv(rng, c, k, stride, dil):
    x = rng.standard_normal((2, c, 11, 14)).astype(np.float32)
    w = rng.standard_normal((c, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    pad = k // 2 * dil
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=c, kernel_shape=[k, k],
                            pads=[pad] * 4, strides=[stride] * 2, dilations=[dil] * 2)
    proto = model([node], [("x", F, list(x.shape))], [("y", F, ["?"])],
                  initializers=[("w", w), ("b", b)])
    close(pixel(proto, {"x": x})[0], ort_run(proto, {"x": x})[0], 1e-5)


@pytest.mark.parametrize("shape", [(1, 9, 3, 7), (2, 5, 6), (7, 5), (3, 2, 5, 4, 3), (9,)])
def test_linear_shuffles(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    rank = len(shape)
    perms = list(itertools.permutations(range(rank)))
    for i in rng.choice(len(perms), size=min(4, len(perms)), replace=False):
        perm = list(perms[i])
        np.testing.assert_array_equal(one("Transpose", x, attrs={"perm": perm})[0],
                                      x.transpose(perm))
    starts = [int(rng.integers(0, d)) for d in shape]
    steps = [int(rng.choice([-2, -1, 1, 2, 3])) for _ in shape]
    ends = [d if st > 0 else -d - 1 for d, st in zip(shape, steps)]
    inits = [(n, np.array(v, np.int64)) for n, v in
             (("s", starts), ("e", ends), ("a", list(range(rank))), ("st", steps))]
    want = x[tuple(slice(s, e if e >= 0 else None, st)
                   for s, e, st in zip(starts, ends, steps))]
    np.testing.assert_array_equal(one("Slice", x, inits=inits)[0], want)
    ax = rank - 1
    cut = shape[ax] // 2 or 1
    sizes = [cut, shape[ax] - cut] if shape[ax] > 1 else [1]
    got = one("Split", x, inits=[("sp", np.array(sizes, np.int64))], attrs={"axis": ax},
              n_out=len(sizes))
    for g, w in zip(got, np.split(x, [cut], axis=ax)):
        np.testing.assert_array_equal(g, w)


RESHAPES = [((1, 13, 24), (1, 13, 4, 6)), ((1, 13, 4, 6), (1, 13, 24)), ((2, 15), (2, 3, 5)),
            ((2, 3, 5), (6, 5)), ((35,), (5, 7)), ((1, 9, 3, 7), (9, 21)), ((6, 10), (2, 3, 2, 5))]


@pytest.mark.parametrize("in_shape,out_shape", RESHAPES)
def test_reshape(rng, in_shape, out_shape):
    x = rng.standard_normal(in_shape).astype(np.float32)
    shape = ("shape", np.array(out_shape, np.int64))
    np.testing.assert_array_equal(one("Reshape", x, inits=[shape])[0], x.reshape(out_shape))


BIAS = [((1, 7, 9, 13), (13,)), ((1, 7, 9, 13), (1, 13)), ((2, 5, 13), (1, 1, 13)),
        ((5, 13), (13,)), ((5, 13), (1, 13)), ((3, 5, 1), (1,))]


@pytest.mark.parametrize("x_shape,v_shape", BIAS)
def test_last_axis_vector_broadcast(rng, x_shape, v_shape):
    x = rng.standard_normal(x_shape).astype(np.float32)
    v = rng.standard_normal(v_shape).astype(np.float32)
    close(one("Add", x, inits=[("v", v)])[0], x.astype(np.float64) + v)
    close(one("Mul", x, extra_inputs=[("v", v)])[0], x.astype(np.float64) * v)


@pytest.mark.parametrize("x_shape,s_shape", [((2, 3, 37, 21), ()), ((2, 3, 37, 21), (1,)),
                                             ((5, 13), (1, 1)), ((3, 9, 6), (1, 1, 1)),
                                             ((1, 2, 3, 4, 5), (1, 1, 1, 1))])
def test_one_element_broadcast(rng, x_shape, s_shape):
    """A one-element operand (attention's scale) is read from its single texel."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    s = (rng.standard_normal(s_shape) + 3).astype(np.float32)
    close(one("Div", x, inits=[("s", s)])[0], x.astype(np.float64) / s)
    close(one("Sub", x, extra_inputs=[("s", s)])[0], x.astype(np.float64) - s)
