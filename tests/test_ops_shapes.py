"""Shape logic (``Op.infer``) against the shapes and dtypes a reference actually produces.

Each case is a one-node ONNX model run by the ONNX reference evaluator (a test oracle
only) on fresh random data. ``infer`` gets values only for the inputs its op declares
in ``cpu_inputs``, which also checks that the declaration covers what the shape needs.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from engine import ModelLoader
from engine.ops import Meta, op_for

F, I = np.float32, np.int64


def _r(rng, *shape, dtype=F):
    return rng.standard_normal(shape).astype(dtype)


def _model(op, opset, inputs, attrs, n_out, results=None):
    names = [f"in{i}" if v is not None else "" for i, v in enumerate(inputs)]
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    graph_in = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype),
                                              v.shape) for n, v in zip(names, inputs) if n]
    if results is None:  # the reference evaluator needs no output types
        graph_out = [helper.make_empty_tensor_value_info(o) for o in outs]
    else:
        graph_out = [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(r.dtype),
                                                   r.shape) for o, r in zip(outs, results)]
    graph = helper.make_graph([node], "g", graph_in, graph_out)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _cases(rng):
    x4 = _r(rng, 2, 3, 4, 5)
    x3 = _r(rng, 3, 4, 5)
    idx = rng.integers(-3, 3, (2, 4)).astype(I)
    cases = [
        ("ReduceSum", 11, [x4], {"axes": [1, -1], "keepdims": 0}, 1),
        ("ReduceSum", 13, [x4, np.array([0, 2], I)], {}, 1),
        ("ReduceSum", 13, [x4, np.array([], I)], {"noop_with_empty_axes": 1}, 1),
        ("ReduceSum", 13, [x4, np.array([], I)], {"keepdims": 0}, 1),
        ("ReduceMean", 18, [x4, np.array([-2], I)], {"keepdims": 1}, 1),
        ("ReduceMax", 11, [x4], {}, 1),
        ("ReduceL2", 18, [x3, np.array([-1, 0], I)], {"keepdims": 0}, 1),
        ("ReduceLogSumExp", 13, [x3], {"axes": [1]}, 1),
        ("ArgMax", 13, [x4], {"axis": -1, "keepdims": 0}, 1),
        ("ArgMin", 11, [x4], {"axis": 2}, 1),
        ("Softmax", 13, [x3], {}, 1),
        ("LogSoftmax", 11, [x3], {"axis": 1}, 1),
        ("Hardmax", 13, [x3], {"axis": 0}, 1),
        ("CumSum", 14, [x3, np.array(1, I)], {"reverse": 1}, 1),
        ("TopK", 11, [x3, np.array([2], I)], {"axis": 1}, 2),
        ("TopK", 9, [x3], {"k": 3}, 2),
        ("Split", 13, [x4, np.array([1, 3, 1], I)], {"axis": -1}, 3),
        ("Split", 11, [x4], {"axis": 2, "split": [1, 3]}, 2),
        ("Split", 13, [x4], {"axis": 2}, 2),
        ("Split", 18, [_r(rng, 7, 2)], {"num_outputs": 3}, 3),
        ("Slice", 13, [x4, np.array([1, -1], I), np.array([100, -4], I),
                       np.array([3, 1], I), np.array([2, -1], I)], {}, 1),
        ("Slice", 9, [x4], {"starts": [0, 1], "ends": [1, 1000], "axes": [0, 2]}, 1),
        ("Slice", 13, [x3, np.array([-100], I), np.array([2], I)], {}, 1),
        ("Pad", 10, [x4], {"pads": [0, 1, 2, 0, 0, 0, 1, 3]}, 1),
        ("Pad", 13, [x4, np.array([0, 1, 1, 0, 1, 0, 0, 2], I)], {"mode": "constant"}, 1),
        ("Pad", 18, [x4, np.array([2, 1, 0, 3], I), np.array(0.5, F),
                     np.array([1, 3], I)], {"mode": "reflect"}, 1),
        ("Cast", 19, [x3], {"to": TensorProto.FLOAT16}, 1),
        ("CastLike", 19, [x3, np.array([1], np.int32)], {}, 1),
        ("Size", 13, [x4], {}, 1),
        ("DepthToSpace", 13, [_r(rng, 1, 8, 2, 3)], {"blocksize": 2, "mode": "CRD"}, 1),
        ("SpaceToDepth", 13, [_r(rng, 1, 2, 4, 6)], {"blocksize": 2}, 1),
        ("Trilu", 14, [x3, np.array(1, I)], {"upper": 0}, 1),
        ("OneHot", 11, [idx, np.array(5, I), np.array([0, 1], F)], {"axis": 1}, 1),
        ("Range", 11, [np.array(1.5, F), np.array(7.0, F), np.array(1.2, F)], {}, 1),
        ("Range", 11, [np.array(10, I), np.array(2, I), np.array(-3, I)], {}, 1),
        ("EyeLike", 9, [_r(rng, 3, 5)], {"k": 1, "dtype": TensorProto.INT32}, 1),
        ("Dropout", 13, [x3, np.array(0.3, F), np.array(False)], {}, 2),
        ("Dropout", 10, [x3], {}, 2),
        ("Gather", 13, [x4, idx], {"axis": 1}, 1),
        ("GatherElements", 13, [x3, rng.integers(0, 3, (3, 2, 5)).astype(I)], {"axis": 1}, 1),
        ("GatherND", 13, [x3, rng.integers(0, 3, (3, 2, 1)).astype(I)], {"batch_dims": 1}, 1),
        ("GatherND", 13, [x3, rng.integers(0, 3, (2, 2)).astype(I)], {}, 1),
        ("ScatterElements", 16, [x3, rng.integers(0, 3, (3, 2, 5)).astype(I),
                                 _r(rng, 3, 2, 5)], {"axis": 1}, 1),
        ("ScatterND", 16, [x3, np.array([[0], [2]], I), _r(rng, 2, 4, 5)], {}, 1),
        ("Gemm", 13, [_r(rng, 4, 3), _r(rng, 5, 4), _r(rng, 5)],
         {"transA": 1, "transB": 1}, 1),
        ("MatMul", 13, [_r(rng, 2, 1, 3, 4), _r(rng, 5, 4, 6)], {}, 1),
        ("MatMul", 13, [_r(rng, 4), _r(rng, 2, 4, 6)], {}, 1),
        ("MatMul", 13, [_r(rng, 2, 3, 4), _r(rng, 4)], {}, 1),
        ("Einsum", 12, [_r(rng, 2, 3, 4), _r(rng, 2, 4, 5)], {"equation": "bij,bjk->bik"}, 1),
        ("Einsum", 12, [_r(rng, 2, 3, 3)], {"equation": "...ii->...i"}, 1),
        ("Einsum", 12, [_r(rng, 3, 4), _r(rng, 4, 2)], {"equation": "ij,jk"}, 1),
        ("Einsum", 12, [_r(rng, 3, 4)], {"equation": "ij->"}, 1),
        ("BatchNormalization", 15, [x4, *[np.abs(_r(rng, 3)) for _ in range(4)]], {}, 1),
        ("BatchNormalization", 15, [x4, *[np.abs(_r(rng, 3)) for _ in range(4)]],
         {"training_mode": 1}, 3),
        ("InstanceNormalization", 7, [x4, _r(rng, 3), _r(rng, 3)], {}, 1),
        ("LayerNormalization", 17, [x4, _r(rng, 4, 5), _r(rng, 4, 5)], {"axis": 2}, 3),
        ("LRN", 13, [x4], {"size": 3}, 1),
        ("Resize", 13, [x4, np.array([], F), np.array([1, 1, 2, 0.6], F)],
         {"mode": "nearest"}, 1),
        ("Resize", 13, [x4, np.array([], F), np.array([], F), np.array([2, 3, 7, 2], I)],
         {"mode": "linear"}, 1),
        ("Resize", 18, [x4, None, None, np.array([7, 7], I)],
         {"axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"}, 1),
        ("Resize", 18, [x4, None, None, np.array([7, 7], I)],
         {"axes": [2, 3], "keep_aspect_ratio_policy": "not_smaller"}, 1),
        ("Upsample", 9, [x4, np.array([1, 1, 2, 3], F)], {}, 1),
    ]
    return cases


def _case_ids():
    return [f"{c[0]}-v{c[1]}-{i}" for i, c in enumerate(_cases(np.random.default_rng(0)))]


@pytest.mark.parametrize("index", range(len(_case_ids())), ids=_case_ids())
def test_infer_matches_reference(index, rng):
    op, opset, inputs, attrs, n_out = _cases(rng)[index]
    proto = _model(op, opset, inputs, attrs, n_out)
    feeds = {f"in{i}": v for i, v in enumerate(inputs) if v is not None}
    expected = [np.asarray(r) for r in ReferenceEvaluator(proto).run(None, feeds)]

    proto = _model(op, opset, inputs, attrs, n_out, expected)
    model = ModelLoader.from_proto(proto, optimize=False)
    layer = model.layers[0]
    shape_op = op_for(layer)
    assert shape_op is not None, f"{op} has no shape logic"
    metas = []
    for i, v in enumerate(inputs):
        if v is None:
            metas.append(None)
        else:
            known = v if i in shape_op.cpu_inputs else None
            metas.append(Meta(tuple(v.shape), v.dtype, known))
    got = shape_op.infer(layer, metas)
    assert len(got) == n_out
    for i, (meta, ref) in enumerate(zip(got, expected)):
        ref = np.asarray(ref)
        assert meta.shape == ref.shape, f"output {i}: shape {meta.shape} != {ref.shape}"
        assert meta.dtype == ref.dtype, f"output {i}: dtype {meta.dtype} != {ref.dtype}"
        if meta.value is not None:
            np.testing.assert_array_equal(meta.value, ref)


def test_cpu_inputs_of_planning_inputs():
    """DESIGN §5: the axes/starts/sizes/k inputs are CPU-forced, data inputs are not."""
    from engine.ops import find_op

    assert find_op("ReduceSum", opset=13).cpu_inputs == (1,)
    assert find_op("ReduceSum", opset=11).cpu_inputs == ()
    assert find_op("ReduceMean", opset=17).cpu_inputs == ()
    assert find_op("ReduceMean", opset=18).cpu_inputs == (1,)
    assert find_op("Slice", opset=13).cpu_inputs == (1, 2, 3, 4)
    assert set(find_op("Resize", opset=19).cpu_inputs) == {1, 2, 3}
    assert find_op("TopK", opset=11).cpu_inputs == (1,)
    assert 0 not in find_op("Pad", opset=18).cpu_inputs


def _layer(op, opset, attrs, n_in=1, n_out=1):
    from engine.model import Layer

    return Layer("n", op, [f"i{i}" for i in range(n_in)], [f"o{i}" for i in range(n_out)],
                 attrs, "", opset)


def test_shapes_the_reference_evaluator_does_not_cover():
    """Negative pads crop; Resize-10 takes scales as input 1; Dropout-7's mask is T."""
    from engine.ops import find_op

    x = Meta((2, 3, 4, 5), np.dtype(F))
    pads = np.array([0, 1, -1, 0, 1, 0, 0, -2], I)
    got = find_op("Pad", opset=13).infer(_layer("Pad", 13, {"mode": "constant"}, 2),
                                         [x, Meta.of(pads)])
    assert got[0].shape == (3, 4, 3, 3)
    scales = np.array([1, 1, 1.5, 2], F)
    got = find_op("Resize", opset=10).infer(_layer("Resize", 10, {"mode": "nearest"}, 2),
                                            [x, Meta.of(scales)])
    assert got[0].shape == (2, 3, 6, 10)
    got = find_op("Dropout", opset=7).infer(_layer("Dropout", 7, {}, 1, 2), [x])
    assert [m.dtype for m in got] == [np.dtype(F), np.dtype(F)]


def test_bad_shapes_raise():
    from engine.model import Layer
    from engine.ops import find_op

    mm = find_op("MatMul")
    layer = Layer("m", "MatMul", ["a", "b"], ["y"], {}, "", 13)
    with pytest.raises(ValueError, match="inner dimensions"):
        mm.infer(layer, [Meta((2, 3), np.dtype(F)), Meta((4, 5), np.dtype(F))])
    split = Layer("s", "Split", ["x"], ["a", "b"], {"axis": 0}, "", 13)
    with pytest.raises(ValueError, match="equal parts"):
        find_op("Split", opset=13).infer(split, [Meta((5,), np.dtype(F))])
    assert onnx is not None


@pytest.mark.parametrize("op,gates", [("RNN", 1), ("GRU", 3), ("LSTM", 4)])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("dirs", [1, 2])
def test_recurrent_shape_logic_matches_the_cpu_kernel(op, gates, layout, dirs, rng):
    from engine.backends.cpu.interpreter import run_layer
    from engine.model import Layer
    from engine.ops import op_for
    from engine.ops.base import Meta

    seq, batch, inp, hidden = 5, 3, 4, 6
    x = rng.normal(size=(batch, seq, inp) if layout else (seq, batch, inp)).astype(np.float32)
    w = rng.normal(size=(dirs, gates * hidden, inp)).astype(np.float32)
    r = rng.normal(size=(dirs, gates * hidden, hidden)).astype(np.float32)
    outs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    layer = Layer("rnn", op, ["x", "w", "r"], outs,
                  {"hidden_size": hidden, "layout": layout,
                   "direction": "bidirectional" if dirs == 2 else "forward"}, opset=17)
    got = [m.shape for m in op_for(layer).infer(layer, [Meta.of(x), Meta.of(w), Meta.of(r)])]
    want = [v.shape for v in run_layer(layer, [x, w, r])]
    assert got == want


def test_recurrent_state_of_another_batch_is_refused(rng):
    from engine import EngineError, Worker

    f = TensorProto.FLOAT
    node = helper.make_node("LSTM", ["x", "w", "r", "", "", "h0"], ["y"], hidden_size=4)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", f, [3, "batch", 2]),
         helper.make_tensor_value_info("w", f, [1, 16, 2]),
         helper.make_tensor_value_info("r", f, [1, 16, 4]),
         helper.make_tensor_value_info("h0", f, [1, "?", 4])],
        [helper.make_tensor_value_info("y", f, None)])
    graph.output[0].type.tensor_type.shape.dim.add().dim_param = "?"
    model = ModelLoader.load(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString())
    feeds = {"x": rng.normal(size=(3, 1, 2)).astype(np.float32),
             "w": rng.normal(size=(1, 16, 2)).astype(np.float32),
             "r": rng.normal(size=(1, 16, 4)).astype(np.float32),
             "h0": rng.normal(size=(1, 2, 4)).astype(np.float32)}
    with Worker(model, "cpu") as worker, pytest.raises(EngineError, match="initial_h"):
        worker.schedule(feeds).peek_output().download_to_array()
