"""GPU_PIXEL Reshape, Flatten, Squeeze and Unsqueeze against NumPy's reshape.

A texture's layout depends on the shape (one axis is packed 4 elements per texel), so these
ops move data: splits use the linear shuffle of permute.wgsl, merges and the rest the texel
shuffle of reshape.wgsl, whose cheaper maps (same texels, stride) hold only for some shape
pairs. The plan's choice is checked on many shape pairs against a NumPy model of the shader,
then on the GPU: odd sizes leave padded components, NaN and infinities must move unchanged,
and every case asserts that the layer ran on GPU_PIXEL.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine import BackendType, ModelLoader, Worker
from engine.backends.gpu_pixel.kernels_reshape import ANY, SAME, STRIDE, reshape_plan
from engine.backends.gpu_pixel.layout import pack
from tests.modelgen import F, model

SHUFFLE = ((1, 28, 4, 56, 56), (1, 112, 56, 56))
RESHAPES = [
    # splits (linear shuffle of permute.wgsl) and their inverse merges
    ((1, 13, 24), (1, 13, 4, 6)), ((1, 13, 4, 6), (1, 13, 24)),
    ((2, 15), (2, 3, 5)), ((2, 3, 5), (2, 15)), ((6, 10), (2, 3, 2, 5)),
    # the blocked axis merged with an inner size that is a multiple of 4 and one that is not
    ((1, 34, 4, 7, 7), (1, 136, 7, 7)), ((2, 6, 8, 3), (2, 48, 3)), ((2, 6, 5, 3), (2, 30, 3)),
    ((3, 5, 7), (3, 35)), ((1, 9, 3, 7), (9, 21)), ((2, 7, 4, 4), (2, 112)),
    # flattening, ranks 2..6, batch > 1
    ((1, 64, 6, 6), (1, 2304)), ((1, 16, 3, 8), (1, 384)), ((3, 7, 5, 5), (3, 175)),
    ((2, 5, 1, 1), (2, 5)),
    ((2, 3, 4, 5, 6, 2), (6, 20, 12)), ((2, 3, 4, 5, 6, 2), (2, 12, 60)),
    ((4, 3, 2, 5, 7), (4, 6, 35)), ((2, 2, 3, 3, 2, 2), (4, 9, 4)),
    # neither a split nor a merge, ranks 0 and 1
    ((6, 4), (4, 6)), ((5, 6, 7), (7, 6, 5)), ((35,), (5, 7)), ((5, 7), (35,)),
    ((1, 1), ()), ((1, 5), (5,)),
    # splits of the blocked axis (stride map where its lanes stay in one component)
    ((2, 12, 5), (2, 3, 4, 5)), ((2, 32), (2, 4, 8)), ((3, 48, 2, 3), (3, 2, 24, 6)),
    ((2, 96, 3, 5), (2, 4, 24, 3, 5)), ((2, 3, 4, 5), (6, 4, 5)), ((3, 8, 5), (6, 4, 5)),
    SHUFFLE,
]


def emulate(in_shape, out_shape, x):
    """The output texels reshape.wgsl writes for ``reshape_plan``'s map, in NumPy."""
    mode, ints, _ = reshape_plan(in_shape, out_shape)
    (n_o, b_o, d_o, w_o), (n_i, b_i, d_i, w_i), (dx, dy, step) = ints
    src = pack(x).reshape(-1, 4)
    height = len(pack(np.zeros(out_shape, np.float32)))
    t = np.arange(height * w_o)
    k, w = t // n_o, t % n_o
    pre, blk = k // b_o, k % b_o
    valid = np.arange(4)[None, :] < (d_o - 4 * blk)[:, None]

    def texel(f):  # (row-major texel index, component) of input element f
        kk, ww = f // n_i, f % n_i
        a = kk % d_i
        return (kk // d_i * b_i + a // 4) * n_i + ww, a % 4

    if mode == SAME:
        out = src[t]
    else:
        f = (pre * d_o + 4 * blk) * n_o + w
        ti, comp = texel(f)
        lanes = []
        for c in range(4):
            if mode == STRIDE:  # the shader's per-texel step, not a fresh decomposition
                y, x_ = ti // w_i + c * dy, ti % w_i + c * dx
                if (dx, dy) == (0, 0):
                    y, x_ = (ti + c * step) // w_i, (ti + c * step) % w_i
                ci = comp
            else:
                tc, ci = texel(f + c * n_o)
                y, x_ = tc // w_i, tc % w_i
            idx = np.minimum(y * w_i + x_, len(src) - 1)
            lanes.append(src[idx, ci])
        out = np.stack(lanes, axis=1)
    return np.where(valid, out, 0.0).reshape(height, w_o, 4)


@pytest.mark.parametrize("in_shape,out_shape", RESHAPES + [(b, a) for a, b in RESHAPES])
def test_plan_matches_numpy(rng, in_shape, out_shape):
    x = rng.standard_normal(in_shape).astype(np.float32)
    np.testing.assert_array_equal(emulate(in_shape, out_shape, x), pack(x.reshape(out_shape)))


def test_plan_maps():
    assert reshape_plan(*SHUFFLE)[0] == STRIDE
    assert reshape_plan(*SHUFFLE)[1][2] == (0, 56, 3136)  # 56 rows apart, no division
    # the split before it: 7 blocks of 56 * 56 texels apart
    assert reshape_plan((1, 112, 56, 56), (1, 4, 28, 56, 56))[1][2] == (0, 392, 21952)
    assert reshape_plan((2, 32), (2, 4, 8))[1][2] == (2, 0, 2)
    assert reshape_plan((2, 5, 1, 1), (2, 5))[0] == SAME
    assert reshape_plan((1, 64, 6, 6), (1, 2304))[0] == STRIDE
    assert reshape_plan((1, 64, 6, 6), (1, 2304))[2]["LANE_DIV"] == "true"
    assert reshape_plan((1, 16, 3, 8), (1, 384))[1][2] == (1, 0, 1)  # along one texture row
    assert reshape_plan((1, 64, 7, 7), (1, 3136))[0] == ANY


def gpu_pixel(nodes, x, inits=()):
    """Output y of a graph on input x; asserts every layer ran on GPU_PIXEL."""
    proto = model(nodes, [("x", F, list(x.shape))], [("y", F, ["?"])], initializers=inits)
    m = ModelLoader.from_proto(proto)
    with Worker(m, BackendType.GPU_PIXEL) as w:
        w.schedule({"x": x})
        y = w.peek_output("y").download_to_array()
        assert w.placement, "no layer placed"
        for name, p in w.placement.items():
            assert p.backend is BackendType.GPU_PIXEL, f"{name} fell back: {p.reason}"
    return y


def reshape(x, out_shape):
    shape = ("s", np.array(out_shape, np.int64))
    return gpu_pixel([helper.make_node("Reshape", ["x", "s"], ["y"])], x, [shape])


def special(rng, shape):
    """Random data with NaN, infinities and -0.0 in random places."""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    where = rng.choice(flat.size, size=min(flat.size, 8), replace=False)
    flat[where] = np.array([np.nan, np.inf, -np.inf, -0.0] * 2, np.float32)[:len(where)]
    return x


@pytest.mark.usefixtures("require_gpu")
@pytest.mark.parametrize("in_shape,out_shape", RESHAPES)
def test_reshape(rng, in_shape, out_shape):
    x = special(rng, in_shape)
    for a, b in ((in_shape, out_shape), (out_shape, in_shape)):
        src = x.reshape(a)
        got = reshape(src, b)
        assert got.shape == tuple(b)
        # bit for bit: NaN, infinities and -0.0 move unchanged
        np.testing.assert_array_equal(got.view(np.uint32), src.reshape(b).view(np.uint32))


@pytest.mark.usefixtures("require_gpu")
@pytest.mark.parametrize("op,shape,attrs,axes", [
    ("Flatten", (2, 7, 3, 5), {"axis": 1}, None), ("Flatten", (2, 7, 3, 5), {"axis": 2}, None),
    ("Flatten", (3, 8, 1, 1), {"axis": 1}, None), ("Squeeze", (2, 5, 1, 1), {}, [2, 3]),
    ("Squeeze", (1, 6, 4, 3), {}, [0]), ("Unsqueeze", (6, 4, 3), {}, [0]),
    ("Unsqueeze", (2, 9), {}, [2, 3]),
])
def test_flatten_squeeze_unsqueeze(rng, op, shape, attrs, axes):
    x = special(rng, shape)
    inputs, inits = ["x"], []
    if axes is not None:
        inputs.append("a")
        inits.append(("a", np.array(axes, np.int64)))
    got = gpu_pixel([helper.make_node(op, inputs, ["y"], **attrs)], x, inits)
    if op == "Flatten":
        want = x.reshape(int(np.prod(shape[:attrs["axis"]])), -1)
    elif op == "Squeeze":
        want = np.squeeze(x, tuple(axes))
    else:
        want = np.expand_dims(x, tuple(axes))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.usefixtures("require_gpu")
@pytest.mark.parametrize("c,groups,hw", [(112, 4, 56), (136, 4, 28), (18, 3, 5), (12, 2, 3)])
def test_channel_shuffle(rng, c, groups, hw):
    # shufflenet: Reshape (split), Transpose, Reshape (merge) back to the channels
    x = special(rng, (2, c, hw, hw))
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["a"]),
             helper.make_node("Transpose", ["a"], ["t"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t", "s2"], ["y"])]
    inits = [("s1", np.array([2, groups, c // groups, hw, hw], np.int64)),
             ("s2", np.array([2, c, hw, hw], np.int64))]
    want = x.reshape(2, groups, c // groups, hw, hw).transpose(0, 2, 1, 3, 4).reshape(x.shape)
    got = gpu_pixel(nodes, x, inits)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.usefixtures("require_gpu")
def test_resize_by_one_copies(rng):
    # nothing resized: Resize copies its input with reshape.wgsl's same-texel map
    x = special(rng, (2, 5, 3, 7))
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest")
    got = gpu_pixel([node], x, [("sc", np.ones(4, np.float32))])
    np.testing.assert_array_equal(got.view(np.uint32), x.view(np.uint32))
