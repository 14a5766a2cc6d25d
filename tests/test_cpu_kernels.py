"""CPU Conv/ConvTranspose/Gemm/MatMul/pool/norm kernels against NumPy float64 references on
fresh random shapes and data; fusion against the unfused model and onnxruntime."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from onnx import TensorProto, helper

from engine import ModelLoader, Worker
from engine.backends.cpu import kernels_conv as kc
from engine.backends.cpu import kernels_gemm as kg
from engine.backends.cpu import kernels_norm as kn
from engine.backends.cpu import kernels_pool as kp
from engine.backends.cpu import kernels_softmax as ksm
from engine.model import Layer
from engine.passes.fusion import apply_activation
from tests.modelgen import model as make_model
from tests.modelgen import ort_run

F = TensorProto.FLOAT


def L(op, n_out=1, **attrs):
    return Layer("t", op, ["x", "w", "b"], [f"y{i}" for i in range(n_out)], attrs, opset=21)


def close(got, want, tol=1e-4):
    assert got.shape == want.shape, (got.shape, want.shape)
    err = np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-6)
    assert err < tol, f"max relative error {err:.2e}"


# -- references (float64, written from the ONNX definitions) ------------------------------
def ref_conv(x, w, b, strides, pads, dil, group):
    x, w = x.astype(np.float64), w.astype(np.float64)
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    ks = w.shape[2:]
    out_sp = [(xp.shape[2 + i] - ((ks[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(nd)]
    N, C = x.shape[:2]
    M = w.shape[0]
    cg, mg = C // group, M // group
    y = np.zeros((N, M, *out_sp))
    for k in itertools.product(*[range(s) for s in ks]):
        sl = tuple(slice(k[i] * dil[i], k[i] * dil[i] + (out_sp[i] - 1) * strides[i] + 1,
                         strides[i]) for i in range(nd))
        patch = xp[(slice(None), slice(None)) + sl]
        for g in range(group):
            wk = w[(slice(g * mg, (g + 1) * mg), slice(None)) + k]
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...",
                                                    patch[:, g * cg:(g + 1) * cg], wk)
    if b is not None:
        y += b.reshape((1, M) + (1,) * nd)
    return y


def ref_conv_transpose(x, w, b, strides, pads, dil, out_pad, group):
    x, w = x.astype(np.float64), w.astype(np.float64)
    nd = x.ndim - 2
    N, C = x.shape[:2]
    mg = w.shape[1]
    ks = w.shape[2:]
    full = [strides[i] * (x.shape[2 + i] - 1) + out_pad[i] + (ks[i] - 1) * dil[i] + 1
            for i in range(nd)]
    y = np.zeros((N, mg * group, *full))
    cg = C // group
    for pos in itertools.product(*[range(s) for s in x.shape[2:]]):
        for k in itertools.product(*[range(s) for s in ks]):
            o = tuple(pos[i] * strides[i] + k[i] * dil[i] for i in range(nd))
            for g in range(group):
                xv = x[(slice(None), slice(g * cg, (g + 1) * cg)) + pos]  # (N, cg)
                wv = w[(slice(g * cg, (g + 1) * cg), slice(None)) + k]   # (cg, mg)
                y[(slice(None), slice(g * mg, (g + 1) * mg)) + o] += xv @ wv
    crop = tuple(slice(pads[i], full[i] - pads[i + nd]) for i in range(nd))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y += b.reshape((1, -1) + (1,) * nd)
    return y


def ref_pool(x, kernel, strides, pads, dil, ceil_mode, mode, count_pad=False, p=2):
    x = x.astype(np.float64)
    nd = x.ndim - 2
    out_sp, extra = [], []
    for i in range(nd):
        eff = (kernel[i] - 1) * dil[i] + 1
        span = x.shape[2 + i] + pads[i] + pads[i + nd] - eff
        o = (math.ceil(span / strides[i]) if ceil_mode else span // strides[i]) + 1
        if ceil_mode and (o - 1) * strides[i] >= x.shape[2 + i] + pads[i]:
            o -= 1
        out_sp.append(o)
        extra.append(max(0, (o - 1) * strides[i] + eff - x.shape[2 + i] - pads[i] - pads[i + nd]))
    y = np.zeros(x.shape[:2] + tuple(out_sp))
    for o in itertools.product(*[range(s) for s in out_sp]):
        vals, npad = [], 0
        for k in itertools.product(*[range(s) for s in kernel]):
            idx = [o[i] * strides[i] - pads[i] + k[i] * dil[i] for i in range(nd)]
            if all(-pads[i] <= idx[i] < x.shape[2 + i] + pads[i + nd] for i in range(nd)):
                npad += 1
            if all(0 <= idx[i] < x.shape[2 + i] for i in range(nd)):
                vals.append(x[(slice(None), slice(None)) + tuple(idx)])
        v = np.stack(vals, -1)
        sl = (slice(None), slice(None)) + o
        if mode == "max":
            y[sl] = v.max(-1)
        elif mode == "avg":
            y[sl] = v.sum(-1) / (npad if count_pad else v.shape[-1])
        else:
            y[sl] = (np.abs(v) ** p).sum(-1) ** (1 / p)
    return y


# -- Conv -------------------------------------------------------------------------------
def _rand_conv_case(rng, nd):
    group = int(rng.choice([1, 1, 2, 3]))
    cg, mg = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    k = [int(v) for v in rng.integers(1, 4, nd)]
    s = [int(v) for v in rng.integers(1, 3, nd)]
    d = [int(v) for v in rng.integers(1, 3, nd)]
    pads = [int(v) for v in rng.integers(0, 3, 2 * nd)]
    sp = [int(v) + (k[i] - 1) * d[i] + 1 for i, v in enumerate(rng.integers(0, 9 - 2 * nd, nd))]
    x = rng.standard_normal((int(rng.integers(1, 3)), cg * group, *sp)).astype(np.float32)
    w = rng.standard_normal((mg * group, cg, *k)).astype(np.float32)
    b = rng.standard_normal(mg * group).astype(np.float32) if rng.random() < 0.7 else None
    return x, w, b, s, pads, d, group


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_random(rng, nd):
    for _ in range(6):
        x, w, b, s, pads, d, group = _rand_conv_case(rng, nd)
        layer = L("Conv", strides=s, pads=pads, dilations=d, group=group)
        got = kc.Conv(layer, [x, w] + ([b] if b is not None else []))
        close(got, ref_conv(x, w, b, s, pads, d, group))


@pytest.mark.parametrize("mult", [1, 2])
def test_conv_depthwise(rng, mult):
    C = int(rng.integers(3, 9))
    h, wd = (int(v) for v in rng.integers(5, 14, 2))
    x = rng.standard_normal((2, C, h, wd)).astype(np.float32)
    w = rng.standard_normal((C * mult, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(C * mult).astype(np.float32)
    for s, p, d in [([1, 1], [1, 1, 1, 1], [1, 1]), ([2, 2], [0, 1, 1, 0], [1, 2])]:
        layer = L("Conv", strides=s, pads=p, dilations=d, group=C)
        close(kc.Conv(layer, [x, w, b]), ref_conv(x, w, b, s, p, d, C))


def test_conv_grouped_pointwise_split(rng):
    """A grouped 1x1 Conv large enough for its products to spread over the threads."""
    from engine.backends.cpu import threads

    x = rng.standard_normal((1, 256, 50, 46)).astype(np.float32)
    w = rng.standard_normal((256, 64, 1, 1)).astype(np.float32)
    b = rng.standard_normal(256).astype(np.float32)
    assert 256 * 64 * 50 * 46 >= threads.SPLIT_MIN_FLOPS
    layer = L("Conv", group=4, activation="Relu")
    want = np.maximum(ref_conv(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1], 4), 0)
    close(kc.Conv(layer, [x, w, b]), want)
    assert layer._cpu_conv_plan.kind == "pointwise"


@pytest.mark.parametrize("act,params", [("Relu", []), ("LeakyRelu", [0.1]), ("Clip", [-0.5, 0.7]),
                                        ("Sigmoid", []), ("HardSigmoid", [0.3, 0.4]),
                                        ("Tanh", [])])
def test_conv_fused_activation(rng, act, params):
    x = rng.standard_normal((1, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    layer = L("Conv", pads=[1, 1, 1, 1], activation=act, activation_params=params)
    want = apply_activation(ref_conv(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), act, params)
    close(kc.Conv(layer, [x, w, b]), want)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_transpose_random(rng, nd):
    for _ in range(4):
        group = int(rng.choice([1, 2]))
        cg, mg = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        k = [int(v) for v in rng.integers(1, 4, nd)]
        s = [int(v) for v in rng.integers(1, 3, nd)]
        d = [int(v) for v in rng.integers(1, 3, nd)]
        op = [int(rng.integers(0, st)) for st in s]
        pads = [min(int(v), kk - 1) for v, kk in zip(rng.integers(0, 2, 2 * nd), k + k)]
        x = rng.standard_normal((1, cg * group, *rng.integers(2, 6, nd))).astype(np.float32)
        w = rng.standard_normal((cg * group, mg, *k)).astype(np.float32)
        b = rng.standard_normal(mg * group).astype(np.float32)
        layer = L("ConvTranspose", strides=s, pads=pads, dilations=d, group=group,
                  output_padding=op)
        close(kc.ConvTranspose(layer, [x, w, b]),
              ref_conv_transpose(x, w, b, s, pads, d, op, group))


# -- Gemm / MatMul ----------------------------------------------------------------------
def test_gemm_variants(rng):
    for ta, tb in itertools.product([0, 1], [0, 1]):
        m, k, n = (int(v) for v in rng.integers(1, 70, 3))
        a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        shapes = [(n,), (1, n), (m, n), (m, 1)]
        c = rng.standard_normal(shapes[int(rng.integers(0, 4))]).astype(np.float32)
        alpha, beta = float(rng.uniform(-2, 2)), float(rng.uniform(-2, 2))
        got = kg.Gemm(L("Gemm", transA=ta, transB=tb, alpha=alpha, beta=beta), [a, b, c])
        a64 = a.T.astype(np.float64) if ta else a.astype(np.float64)
        b64 = b.T.astype(np.float64) if tb else b.astype(np.float64)
        close(got, alpha * a64 @ b64 + beta * c)


def test_gemm_large_split_and_activation(rng):
    a = rng.standard_normal((67, 300)).astype(np.float32)
    b = rng.standard_normal((300, 411)).astype(np.float32)
    c = rng.standard_normal(411).astype(np.float32)
    got = kg.Gemm(L("Gemm", activation="LeakyRelu", activation_params=[0.2]), [a, b, c])
    close(got, apply_activation(a.astype(np.float64) @ b + c, "LeakyRelu", [0.2]))


def test_matmul_batched_broadcasting(rng):
    for sa, sb in [((2, 1, 5, 7), (3, 7, 4)), ((7,), (2, 7, 3)), ((4, 6, 5), (5,)),
                   ((1, 9), (9, 2))]:
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        close(kg.MatMul(L("MatMul"), [a, b]), np.matmul(a.astype(np.float64), b))


# -- pools ------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_pools_random(rng, op, nd):
    for _ in range(4):
        k = [int(v) for v in rng.integers(1, 4, nd)]
        s = [int(v) for v in rng.integers(1, 4, nd)]
        d = [int(v) for v in rng.integers(1, 3, nd)] if op == "MaxPool" else [1] * nd
        pads = [min(int(v), kk - 1) for v, kk in zip(rng.integers(0, 3, 2 * nd), k + k)]
        ceil = int(rng.integers(0, 2)) if op != "LpPool" else 0
        sp = [int(v) + (k[i] - 1) * d[i] + 1 for i, v in enumerate(rng.integers(0, 7, nd))]
        x = rng.standard_normal((2, 3, *sp)).astype(np.float32)
        attrs = dict(kernel_shape=k, strides=s, pads=pads, ceil_mode=ceil)
        if op == "MaxPool":
            attrs["dilations"] = d
            got, want = kp.MaxPool(L(op, **attrs), [x]), ref_pool(x, k, s, pads, d, ceil, "max")
        elif op == "AveragePool":
            cp = int(rng.integers(0, 2))
            got = kp.AveragePool(L(op, count_include_pad=cp, **attrs), [x])
            want = ref_pool(x, k, s, pads, d, ceil, "avg", bool(cp))
        else:
            got = kp.LpPool(L(op, p=3, **attrs), [x])
            want = ref_pool(x, k, s, pads, d, ceil, "lp", p=3)
        close(got, want)


def test_maxpool_indices(rng):
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    y, idx = kp.MaxPool(L("MaxPool", 2, kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1), [x])
    close(y, ref_pool(x, [3, 2], [2, 2], [0] * 4, [1, 1], 1, "max"))
    assert np.array_equal(x.reshape(-1)[idx], y)


def test_global_pools(rng):
    x = rng.standard_normal((2, 5, 4, 3, 6)).astype(np.float32)
    x64 = x.astype(np.float64)
    close(kp.GlobalAveragePool(L("GlobalAveragePool"), [x]), x64.mean((2, 3, 4), keepdims=True))
    close(kp.GlobalMaxPool(L("GlobalMaxPool"), [x]), x64.max((2, 3, 4), keepdims=True))
    close(kp.GlobalLpPool(L("GlobalLpPool", p=2), [x]),
          np.sqrt((x64 ** 2).sum((2, 3, 4), keepdims=True)))


# -- normalisation, LRN, softmax --------------------------------------------------------
def test_batchnorm_inference_and_training(rng):
    x = rng.standard_normal((3, 5, 4, 6)).astype(np.float32)
    g, b, m = (rng.standard_normal(5).astype(np.float32) for _ in range(3))
    v = rng.uniform(0.5, 2, 5).astype(np.float32)
    shape = (1, 5, 1, 1)
    want = (x - m.reshape(shape)) / np.sqrt(v.reshape(shape) + 1e-3) * g.reshape(shape) \
        + b.reshape(shape)
    close(kn.BatchNormalization(L("BatchNormalization", epsilon=1e-3), [x, g, b, m, v]), want)
    y, rm, rv = kn.BatchNormalization(L("BatchNormalization", 3, training_mode=1, momentum=0.8),
                                      [x, g, b, m, v])
    x64 = x.astype(np.float64)
    bm, bv = x64.mean((0, 2, 3)), x64.var((0, 2, 3))
    close(y, (x64 - bm.reshape(shape)) / np.sqrt(bv.reshape(shape) + 1e-5) * g.reshape(shape)
          + b.reshape(shape))
    close(rm, m * 0.8 + bm * 0.2)
    close(rv, v * 0.8 + bv * 0.2)


def test_layer_norm(rng):
    x = rng.standard_normal((2, 3, 7)).astype(np.float32)
    for axis in (-1, 1):
        sh = x.shape[axis:]
        scale, bias = rng.standard_normal(sh).astype(np.float32), rng.standard_normal(sh)
        y, mean, inv = kn.LayerNormalization(L("LayerNormalization", 3, axis=axis, epsilon=1e-4),
                                             [x, scale, bias.astype(np.float32)])
        ax = tuple(range(axis % x.ndim, x.ndim))
        x64 = x.astype(np.float64)
        mu, var = x64.mean(ax, keepdims=True), x64.var(ax, keepdims=True)
        close(y, (x64 - mu) / np.sqrt(var + 1e-4) * scale + bias)
        close(mean, mu)
        close(inv, 1 / np.sqrt(var + 1e-4))


def test_lrn(rng):
    x = rng.standard_normal((2, 7, 4, 5)).astype(np.float32)
    for size, beta in [(3, 0.75), (4, 0.6)]:
        got = kn.LRN(L("LRN", size=size, alpha=2e-2, beta=beta, bias=1.5), [x])
        x64 = x.astype(np.float64)
        sq = np.zeros_like(x64)
        for c in range(7):
            lo, hi = max(0, c - (size - 1) // 2), min(6, c + math.ceil((size - 1) / 2))
            sq[:, c] = (x64[:, lo:hi + 1] ** 2).sum(1)
        close(got, x64 / (1.5 + 2e-2 / size * sq) ** beta)


def test_softmax_family(rng):
    x = (rng.standard_normal((3, 4, 5)) * 5).astype(np.float32)
    x64 = x.astype(np.float64)
    for axis in (0, 1, -1):
        e = np.exp(x64 - x64.max(axis, keepdims=True))
        sm = e / e.sum(axis, keepdims=True)
        close(ksm.Softmax_13(L("Softmax", axis=axis), [x]), sm)
        close(ksm.LogSoftmax_13(L("LogSoftmax", axis=axis), [x]), np.log(sm))
    flat = x64.reshape(3, 20)
    e = np.exp(flat - flat.max(1, keepdims=True))
    close(ksm.Softmax(L("Softmax", axis=1), [x]), (e / e.sum(1, keepdims=True)).reshape(x.shape))


# -- fusion -----------------------------------------------------------------------------
def _fusion_models(rng):
    def r(*s, lo=None):
        a = rng.standard_normal(s).astype(np.float32)
        return np.abs(a) + 0.5 if lo else a

    n = helper.make_node
    yield "conv_bn_relu", make_model(
        [n("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         n("BatchNormalization", ["c", "g", "be", "m", "v"], ["bn"]),
         n("Relu", ["bn"], ["y"])],
        [("x", F, [1, 3, 8, 8])], [("y", F, [1, 4, 8, 8])],
        [("w", r(4, 3, 3, 3)), ("b", r(4)), ("g", r(4)), ("be", r(4)), ("m", r(4)),
         ("v", r(4, lo=1))]), {"conv_bn": 1, "activation": 1}
    yield "conv_mul_add_clip", make_model(
        [n("Conv", ["x", "w"], ["c"], strides=[2, 2]), n("Mul", ["c", "s"], ["cm"]),
         n("Add", ["t", "cm"], ["ca"]), n("Clip", ["ca", "lo", "hi"], ["y"])],
        [("x", F, [1, 3, 9, 9])], [("y", F, [1, 5, 4, 4])],
        [("w", r(5, 3, 3, 3)), ("s", r(5, 1, 1)), ("t", r(1, 5, 1, 1)),
         ("lo", np.array(-0.3, np.float32)), ("hi", np.array(0.6, np.float32))]), \
        {"conv_affine": 2, "activation": 1}
    yield "bn_mul_add", make_model(
        [n("BatchNormalization", ["x", "g", "be", "m", "v"], ["bn"]),
         n("Mul", ["bn", "s"], ["bm"]), n("Add", ["bm", "t"], ["y"])],
        [("x", F, [2, 4, 5, 5])], [("y", F, [2, 4, 5, 5])],
        [("g", r(4)), ("be", r(4)), ("m", r(4)), ("v", r(4, lo=1)), ("s", r(4, 1, 1)),
         ("t", r(4, 1, 1))]), {"bn_affine": 2}
    yield "matmul_add_leaky", make_model(
        [n("MatMul", ["x", "w"], ["mm"]), n("Add", ["mm", "b"], ["a"]),
         n("LeakyRelu", ["a"], ["y"], alpha=0.3)],
        [("x", F, [3, 6])], [("y", F, [3, 4])], [("w", r(6, 4)), ("b", r(4))]), \
        {"matmul_add": 1, "activation": 1}
    # ConvNeXt's layer scale: MatMul on 4-D activations, bias row, per-column Mul
    yield "matmul_bias_layer_scale", make_model(
        [n("MatMul", ["x", "w"], ["mm"]), n("Add", ["b", "mm"], ["a"]),
         n("Mul", ["g", "a"], ["y"])],
        [("x", F, [1, 3, 5, 6])], [("y", F, [1, 3, 5, 4])],
        [("w", r(6, 4)), ("b", r(4)), ("g", r(4))]), {"matmul_scale": 1}
    # a scalar scale straight after a 2-D MatMul, then a bias: scale folded, then Gemm
    yield "matmul_scalar_scale", make_model(
        [n("MatMul", ["x", "w"], ["mm"]), n("Mul", ["mm", "s"], ["ms"]),
         n("Add", ["ms", "b"], ["y"])],
        [("x", F, [3, 6])], [("y", F, [3, 4])],
        [("w", r(6, 4)), ("s", np.array(0.37, np.float32)), ("b", r(1, 4))]), \
        {"matmul_scale": 1, "matmul_add": 1}
    # not a column scale (varies along rows; would broadcast to a higher rank; the bias
    # is a full matrix): nothing folded
    yield "matmul_row_scale", make_model(
        [n("MatMul", ["x", "w"], ["mm"]), n("Mul", ["mm", "g"], ["y"])],
        [("x", F, [3, 6])], [("y", F, [3, 4])], [("w", r(6, 4)), ("g", r(3, 1))]), {}
    yield "matmul_rank_growing_scale", make_model(
        [n("MatMul", ["x", "w"], ["mm"]), n("Mul", ["mm", "g"], ["y"])],
        [("x", F, [3, 6])], [("y", F, [1, 3, 4])], [("w", r(6, 4)), ("g", r(1, 1, 4))]), {}
    yield "matmul_matrix_bias_scale", make_model(
        [n("MatMul", ["x", "w"], ["mm"]), n("Add", ["mm", "b"], ["a"]),
         n("Mul", ["a", "g"], ["y"])],
        [("x", F, [1, 3, 6])], [("y", F, [1, 3, 4])],
        [("w", r(6, 4)), ("b", r(3, 4)), ("g", r(4))]), {}
    # HardSwish and HardSigmoid written out as exporters before opset 14 do
    three, six = np.array(3.0, np.float32), np.array(6.0, np.float32)
    yield "conv_hardswish_written", make_model(
        [n("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), n("Add", ["c", "three"], ["a"]),
         n("Clip", ["a", "zero", "six"], ["cl"]), n("Mul", ["cl", "c"], ["m"]),
         n("Div", ["m", "six"], ["y"])],
        [("x", F, [1, 3, 6, 6])], [("y", F, [1, 4, 6, 6])],
        [("w", r(4, 3, 3, 3)), ("b", r(4)), ("three", three), ("six", six),
         ("zero", np.array(0.0, np.float32))]), {"hard_activation": 1}
    yield "gemm_hardswish_mul_sixth", make_model(
        [n("Gemm", ["x", "w", "b"], ["c"]), n("Add", ["three", "c"], ["a"]),
         n("Clip", ["a", "zero", "six"], ["cl"]), n("Mul", ["c", "cl"], ["m"]),
         n("Mul", ["m", "sixth"], ["y"])],
        [("x", F, [2, 6])], [("y", F, [2, 5])],
        [("w", r(6, 5)), ("b", r(5)), ("three", three), ("six", six),
         ("zero", np.array(0.0, np.float32)), ("sixth", np.array(1 / 6, np.float32))]), \
        {"hard_activation": 1}
    yield "conv_hardsigmoid_written", make_model(
        [n("Conv", ["x", "w"], ["c"]), n("Add", ["c", "three"], ["a"]),
         n("Clip", ["a", "zero", "six"], ["cl"]), n("Div", ["cl", "six"], ["y"])],
        [("x", F, [1, 3, 5, 5])], [("y", F, [1, 2, 5, 5])],
        [("w", r(2, 3, 1, 1) * 4), ("three", three), ("six", six),
         ("zero", np.array(0.0, np.float32))]), {"hard_activation": 1}
    # other bounds: not a HardSwish (the Add then folds into the Conv's bias, the Clip fuses)
    yield "conv_clip_0_5_not_hardswish", make_model(
        [n("Conv", ["x", "w"], ["c"]), n("Add", ["c", "three"], ["a"]),
         n("Clip", ["a", "zero", "five"], ["cl"]), n("Mul", ["cl", "c"], ["m"]),
         n("Div", ["m", "six"], ["y"])],
        [("x", F, [1, 3, 5, 5])], [("y", F, [1, 2, 5, 5])],
        [("w", r(2, 3, 1, 1) * 4), ("three", three), ("six", six),
         ("zero", np.array(0.0, np.float32)), ("five", np.array(5.0, np.float32))]), {}
    # the Conv output is also a graph output: nothing may be fused
    yield "no_fuse_output", make_model(
        [n("Conv", ["x", "w"], ["c"]), n("Relu", ["c"], ["y"])],
        [("x", F, [1, 2, 5, 5])], [("y", F, [1, 3, 5, 5]), ("c", F, [1, 3, 5, 5])],
        [("w", r(3, 2, 1, 1))]), {}


def test_fusion_preserves_results(rng):
    for name, proto, counts in _fusion_models(rng):
        x = rng.standard_normal(
            [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
        ).astype(np.float32)
        fused = ModelLoader.from_proto(proto)
        plain = ModelLoader.from_proto(proto, optimize=False)
        for key in ("conv_bn", "conv_affine", "bn_affine", "activation", "matmul_add",
                    "matmul_scale", "hard_activation"):
            assert fused.pass_stats.get(key, 0) == counts.get(key, 0), (name, key,
                                                                        fused.pass_stats)
        results = []
        for m in (fused, plain):
            with Worker(m, "cpu") as worker:
                worker.schedule({"x": x})
                results.append([worker.peek_output(o.name).download_to_array()
                                for o in m.outputs])
        expected = ort_run(proto, {"x": x})
        for got_f, got_p, want in zip(results[0], results[1], expected):
            close(got_f, want.astype(np.float64), 1e-4)
            close(got_p, want.astype(np.float64), 1e-4)


def test_split_views_follow_shape_and_sizes(rng):
    """Split keeps its slices per input shape and split sizes: a new shape or new sizes on
    the same layer give the right parts, which share the input's memory (no copy)."""
    from engine.backends.cpu import kernels_tensor as kt
    from engine.model import Layer

    layer = Layer("s", "Split", ["x", "n"], ["a", "b", "c"], {"axis": -1}, opset=18)
    for shape, sizes in [((2, 3, 10), [2, 3, 5]), ((2, 3, 10), [6, 1, 3]),
                         ((4, 7), [1, 1, 5])]:
        x = rng.standard_normal(shape).astype(np.float32)
        parts = kt.Split(layer, [x, np.array(sizes, np.int64)])
        want = np.split(x, np.cumsum(sizes)[:-1], axis=-1)
        assert [p.shape for p in parts] == [w.shape for w in want]
        for p, w in zip(parts, want):
            np.testing.assert_array_equal(p, w)
            assert np.shares_memory(p, x)
