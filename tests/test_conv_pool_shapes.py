"""Conv/ConvTranspose/pool shape logic against the shapes onnxruntime produces."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from engine.model import Layer
from engine.ops import find_op
from engine.ops.base import Meta
from engine.ops.conv_pool import conv_geometry

ort = pytest.importorskip("onnxruntime")


def _ort_shapes(op, x_shape, w_shape, attrs, n_out=1, opset=19):
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    names = ["x"]
    if w_shape is not None:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w_shape)))
        names.append("w")
    outs = ["y", "idx"][:n_out]
    node = helper.make_node(op, names, outs, **attrs)
    out_info = [helper.make_tensor_value_info(o, t, None)
                for o, t in zip(outs, (TensorProto.FLOAT, TensorProto.INT64))]
    graph = helper.make_graph([node], "g", inputs, out_info)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {"x": np.random.rand(*x_shape).astype(np.float32)}
    if w_shape is not None:
        feeds["w"] = np.random.rand(*w_shape).astype(np.float32)
    results = sess.run(None, feeds)
    return [tuple(r.shape) for r in results], [str(r.dtype) for r in results]


def _ours(op, x_shape, w_shape, attrs, n_out=1):
    layer = Layer("n", op, ["x", "w"] if w_shape else ["x"], ["y", "idx"][:n_out],
                  dict(attrs), opset=19)
    metas = [Meta(tuple(x_shape), np.dtype(np.float32))]
    if w_shape is not None:
        metas.append(Meta(tuple(w_shape), np.dtype(np.float32)))
    out = find_op(op, opset=19).infer(layer, metas)
    return [m.shape for m in out], [str(m.dtype) for m in out]


CASES = [
    ("Conv", (1, 3, 7, 9), (4, 3, 3, 3), {}),
    ("Conv", (2, 4, 11, 8), (6, 2, 3, 2), dict(group=2, strides=[2, 3], pads=[1, 0, 2, 1])),
    ("Conv", (1, 3, 10, 10), (5, 3, 3, 3), dict(dilations=[2, 3], strides=[1, 2])),
    ("Conv", (1, 3, 10, 11), (5, 3, 4, 3), dict(auto_pad="SAME_UPPER", strides=[2, 3])),
    ("Conv", (1, 3, 10, 11), (5, 3, 4, 3), dict(auto_pad="SAME_LOWER", strides=[3, 2])),
    ("Conv", (1, 3, 10, 11), (5, 3, 4, 3), dict(auto_pad="VALID", strides=[3, 2])),
    ("Conv", (2, 5, 17), (3, 5, 4), dict(strides=[3], pads=[2, 1])),
    ("Conv", (1, 2, 5, 6, 7), (4, 2, 2, 3, 2), dict(strides=[1, 2, 3], pads=[1, 0, 1, 0, 1, 1])),
    ("Conv", (1, 8, 9, 9), (8, 1, 3, 3), dict(group=8, pads=[1, 1, 1, 1], strides=[2, 2])),
    ("ConvTranspose", (1, 3, 5, 6), (3, 4, 3, 3), {}),
    ("ConvTranspose", (1, 3, 5, 6), (3, 4, 3, 3), dict(strides=[2, 3], output_padding=[1, 2])),
    ("ConvTranspose", (1, 3, 5, 6), (3, 4, 3, 3), dict(strides=[2, 2], pads=[1, 0, 2, 1])),
    ("ConvTranspose", (1, 4, 5, 6), (4, 2, 3, 2), dict(group=2, dilations=[2, 3])),
    ("ConvTranspose", (1, 3, 5, 6), (3, 2, 3, 3), dict(strides=[3, 2], output_shape=[16, 13])),
    ("ConvTranspose", (1, 3, 5, 6), (3, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    ("ConvTranspose", (1, 3, 7), (3, 2, 4), dict(strides=[3], pads=[1, 2])),
    ("MaxPool", (1, 3, 9, 10), None, dict(kernel_shape=[3, 3], strides=[2, 2])),
    ("MaxPool", (1, 3, 9, 10), None, dict(kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1)),
    ("MaxPool", (1, 3, 8, 8), None, dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1,
                                         pads=[1, 1, 1, 1])),
    ("MaxPool", (1, 3, 9, 10), None, dict(kernel_shape=[3, 3], dilations=[2, 2],
                                          pads=[1, 2, 1, 0])),
    ("MaxPool", (1, 3, 9, 10), None, dict(kernel_shape=[3, 3], strides=[2, 3],
                                          auto_pad="SAME_UPPER")),
    ("MaxPool", (1, 3, 9, 10), None, dict(kernel_shape=[2, 3], strides=[2, 2],
                                          auto_pad="SAME_LOWER")),
    ("MaxPool", (1, 2, 13), None, dict(kernel_shape=[4], strides=[3], ceil_mode=1)),
    ("MaxPool", (1, 2, 6, 7, 5), None, dict(kernel_shape=[2, 3, 2], strides=[2, 2, 1])),
    ("AveragePool", (1, 3, 9, 10), None, dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("AveragePool", (1, 3, 9, 10), None, dict(kernel_shape=[3, 2], pads=[1, 1, 0, 1],
                                              count_include_pad=1)),
    ("AveragePool", (1, 3, 9, 10), None, dict(kernel_shape=[3, 3], auto_pad="VALID",
                                              strides=[2, 1])),
    ("LpPool", (1, 3, 9, 10), None, dict(kernel_shape=[3, 3], strides=[2, 2], p=3)),
    ("GlobalAveragePool", (2, 3, 9, 10), None, {}),
    ("GlobalMaxPool", (2, 3, 4, 5, 6), None, {}),
    ("GlobalLpPool", (2, 3, 7), None, dict(p=2)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{sorted(c[3])}")
def test_shape_matches_onnxruntime(case):
    op, x, w, attrs = case
    assert _ours(op, x, w, attrs) == _ort_shapes(op, x, w, attrs)


def test_maxpool_indices_output():
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    ours = _ours("MaxPool", (1, 2, 8, 9), None, attrs, n_out=2)
    assert ours == _ort_shapes("MaxPool", (1, 2, 8, 9), None, attrs, n_out=2)
    assert ours[1][1] == "int64"


def test_random_pool_and_conv_shapes(rng):
    """Fresh random geometries (valid ones) against onnxruntime."""
    checked = 0
    while checked < 25:
        nd = int(rng.integers(1, 4))
        k = [int(v) for v in rng.integers(1, 4, nd)]
        d = [int(v) for v in rng.integers(1, 3, nd)]
        s = [int(v) for v in rng.integers(1, 4, nd)]
        p = [int(v) for v in rng.integers(0, 2, 2 * nd)]
        x = [1, 2] + [int(v) for v in rng.integers(4, 12, nd)]
        mode = str(rng.choice(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
        attrs = dict(strides=s, dilations=d, auto_pad=mode)
        if mode == "NOTSET":
            attrs["pads"] = [min(pi, ki - 1) for pi, ki in zip(p, k + k)]
        if rng.random() < 0.5:
            op, w = "Conv", [3, 2, *k]
        else:
            op, w = "MaxPool", None
            attrs["kernel_shape"] = k
            attrs["ceil_mode"] = int(rng.integers(0, 2))
            if mode in ("SAME_UPPER", "SAME_LOWER"):
                attrs["dilations"] = [1] * nd  # onnxruntime pads SAME pools for kernel, not span
        pads = attrs.get("pads", [0] * 2 * nd)
        if any(x[2 + i] + pads[i] + pads[nd + i] < (k[i] - 1) * attrs["dilations"][i] + 1
               for i in range(nd)):
            continue  # window larger than the padded input: onnxruntime truncates, ONNX floors
        try:
            expected = _ort_shapes(op, x, w, attrs)
        except Exception:
            continue  # a geometry onnxruntime rejects is not a shape test
        if 0 in expected[0][0]:
            continue  # input smaller than the window: onnxruntime gives an empty tensor, we raise
        assert _ours(op, x, w, attrs) == expected, (op, x, w, attrs)
        checked += 1


def test_random_conv_transpose_shapes(rng):
    for _ in range(15):
        nd = int(rng.integers(1, 4))
        k = [int(v) for v in rng.integers(1, 4, nd)]
        s = [int(v) for v in rng.integers(1, 4, nd)]
        d = [int(v) for v in rng.integers(1, 3, nd)]
        attrs = dict(strides=s, dilations=d, group=int(rng.integers(1, 3)))
        choice = rng.integers(0, 3)
        if choice == 0:
            attrs["pads"] = [min(int(v), kk - 1) for v, kk in zip(rng.integers(0, 2, 2 * nd),
                                                                     k + k)]
            attrs["output_padding"] = [int(rng.integers(0, st)) for st in s]
        elif choice == 1:
            attrs["auto_pad"] = str(rng.choice(["SAME_UPPER", "SAME_LOWER"]))
        x = [1, 2 * attrs["group"]] + [int(v) for v in rng.integers(2, 7, nd)]
        if choice == 2:
            attrs["output_shape"] = [s[i] * (x[2 + i] - 1) + (k[i] - 1) * d[i] + 1
                                     - int(rng.integers(0, 2)) for i in range(nd)]
        w = [x[1], 3, *k]
        assert _ours("ConvTranspose", x, w, attrs) == _ort_shapes("ConvTranspose", x, w, attrs), \
            (x, w, attrs)


def test_geometry_helper_values():
    layer = Layer("c", "Conv", ["x", "w"], ["y"],
                  dict(auto_pad="SAME_LOWER", strides=[2, 2], dilations=[1, 2]), opset=19)
    g = conv_geometry(layer, (1, 3, 10, 9), (4, 3, 3, 3))
    assert g.out_shape == (5, 5)
    assert g.effective_kernel == (3, 5)
    # total pads: (5-1)*2+3-10 = 1 -> lower puts the odd one first; (5-1)*2+5-9 = 4
    assert g.pads_begin == (1, 2) and g.pads_end == (0, 2)
    assert g.pads == (1, 2, 0, 2)


def test_errors_are_clear():
    layer = Layer("c", "Conv", ["x", "w"], ["y"], {}, opset=19)
    with pytest.raises(ValueError, match="channels"):
        find_op("Conv").infer(layer, [Meta((1, 4, 5, 5), np.dtype("float32")),
                                      Meta((2, 3, 3, 3), np.dtype("float32"))])
    with pytest.raises(ValueError, match="smaller"):
        find_op("Conv").infer(layer, [Meta((1, 3, 2, 2), np.dtype("float32")),
                                      Meta((2, 3, 3, 3), np.dtype("float32"))])


def test_onnx_shape_inference_agrees_on_ceil_mode():
    """Cross-check one ceil_mode case with onnx's own shape inference too."""
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            ceil_mode=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 1, 10, 10])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)])
    inferred = onnx.shape_inference.infer_shapes(helper.make_model(graph))
    dims = [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim]
    assert tuple(dims) == _ours("AveragePool", (1, 1, 10, 10), None,
                                dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))[0][0]
