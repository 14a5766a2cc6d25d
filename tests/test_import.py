"""ONNX import: opsets, initializers, external data, attributes, symbolic dims, subgraphs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from modelgen import I64, B, F, elementwise_chain, engine_run, if_model, model
from onnx import helper, numpy_helper

from engine import Graph, ModelLoader
from engine.onnx_check import MIN_OPSET


@pytest.mark.parametrize("opset", range(MIN_OPSET, onnx.defs.onnx_opset_version() + 1))
def test_every_default_opset_loads_and_runs(opset, rng):
    m = ModelLoader.load(elementwise_chain(3, opset=opset).SerializeToString())
    assert m.opset == opset and all(layer.opset == opset for layer in m.layers)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    expect = np.tanh(1 / (1 + np.exp(-np.maximum(x + w, 0))))
    np.testing.assert_allclose(engine_run(m, {"x": x})["y"], expect, rtol=1e-6)


def test_initializers_and_external_data(tmp_path, rng):
    w = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    nodes = [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])]
    proto = model(nodes, [("x", F, [4, 8])], [("y", F, [4, 8])], [("w", w), ("b", b)])
    path = tmp_path / "ext.onnx"
    onnx.save_model(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.weights", size_threshold=0)
    raw = onnx.load(str(path), load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in raw.graph.initializer)
    m = ModelLoader.load(path)
    np.testing.assert_array_equal(m.constants["w"], w)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(engine_run(m, {"x": x})["y"], x * w + b)


def test_initializer_listed_as_input_is_a_constant(rng):
    w = rng.standard_normal(3).astype(np.float32)
    proto = model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", F, [3]), ("w", F, [3])],
                  [("y", F, [3])], [("w", w)])
    m = ModelLoader.load(proto.SerializeToString())
    assert [s.name for s in m.inputs] == ["x"] and "w" in m.constants


def test_attributes_of_every_kind():
    A = onnx.AttributeProto
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0], np.float32), "v"),
                                       numpy_helper.from_array(np.array([2], np.int64), "i"),
                                       [4])
    nodes = [
        helper.make_node("Constant", [], ["c_f"], value_float=1.5),
        helper.make_node("Constant", [], ["c_i"], value_int=7),
        helper.make_node("Constant", [], ["c_fs"], value_floats=[1.0, 2.0]),
        helper.make_node("Constant", [], ["c_is"], value_ints=[3, 4]),
        helper.make_node("Constant", [], ["c_s"], value_string="hello"),
        helper.make_node("Constant", [], ["c_ss"], value_strings=["a", "b"]),
        helper.make_node("Constant", [], ["c_t"],
                         value=numpy_helper.from_array(np.eye(2, dtype=np.float32))),
        helper.make_node("Constant", [], ["c_sp"], sparse_value=sparse),
    ]
    outs = [("c_f", F, []), ("c_i", I64, []), ("c_fs", F, [2]), ("c_is", I64, [2]),
            ("c_s", onnx.TensorProto.STRING, []), ("c_ss", onnx.TensorProto.STRING, [2]),
            ("c_t", F, [2, 2]), ("c_sp", F, [4])]
    m = ModelLoader.load(model(nodes, [], outs).SerializeToString(), optimize=False)
    attrs = {layer.outputs[0]: layer.attributes for layer in m.layers}
    assert attrs["c_f"]["value_float"] == 1.5 and attrs["c_i"]["value_int"] == 7
    assert attrs["c_fs"]["value_floats"] == [1.0, 2.0] and attrs["c_is"]["value_ints"] == [3, 4]
    assert attrs["c_s"]["value_string"] == "hello" and attrs["c_ss"]["value_strings"] == ["a", "b"]
    np.testing.assert_array_equal(attrs["c_t"]["value"], np.eye(2))
    np.testing.assert_array_equal(attrs["c_sp"]["sparse_value"], [0, 0, 5, 0])
    # graph attributes become Graphs; tensors/graphs lists convert item by item
    from engine.onnx_import import _attribute

    g = helper.make_graph([], "empty", [], [])
    t = numpy_helper.from_array(np.ones(2, np.int32))
    for attr, check in [
        (helper.make_attribute("gs", [g, g]), lambda v: all(isinstance(x, Graph) for x in v)),
        (helper.make_attribute("ts", [t, t]), lambda v: np.array_equal(v[1], [1, 1])),
        (helper.make_attribute("g", g), lambda v: isinstance(v, Graph)),
    ]:
        assert attr.type in (A.GRAPHS, A.TENSORS, A.GRAPH)
        assert check(_attribute(attr, set(), {"": 17}))
    # folded: the same values end up as constants
    folded = ModelLoader.load(model(nodes, [], outs).SerializeToString())
    assert not folded.layers and folded.pass_stats["folded"] == len(nodes)


def test_schema_defaults_filled_in():
    m = ModelLoader.load(model([helper.make_node("LeakyRelu", ["x"], ["y"])], [("x", F, [2])],
                               [("y", F, [2])]).SerializeToString(), optimize=False)
    assert m.layers[0].attr("alpha") == pytest.approx(0.01)


def test_symbolic_dims(rng):
    nodes = [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0])]
    w = rng.standard_normal(3).astype(np.float32)
    m = ModelLoader.load(model(nodes, [("x", F, ["batch", 3])], [("y", F, [3, "batch"])],
                               [("w", w)]).SerializeToString())
    assert m.inputs[0].shape == ("batch", 3) and m.outputs[0].shape == (3, "batch")
    assert m.value_info["a"].shape == ("batch", 3) and m.value_info["r"].shape == ("batch", 3)
    for n in (1, 5):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_array_equal(engine_run(m, {"x": x})["y"], np.maximum(x + w, 0).T)


def test_subgraphs_become_graphs_with_captures(rng):
    m = ModelLoader.load(if_model().SerializeToString())
    layer = next(layer for layer in m.layers if layer.op_type == "If")
    assert isinstance(layer.attr("then_branch"), Graph)
    assert layer.captures == ["a", "x"]
    x = rng.standard_normal(3).astype(np.float32)
    for c in (True, False):
        y = engine_run(m, {"x": x, "c": np.array(c)})["y"]
        np.testing.assert_array_equal(y, x * (x + x) if c else x - (x + x))


def test_nested_subgraph_captures_reach_the_top(rng):
    """A top-level tensor read two subgraphs deep is a capture of the outer Loop."""
    inner_then = helper.make_graph([helper.make_node("Add", ["acc", "top"], ["t"])], "t", [],
                                   [helper.make_tensor_value_info("t", F, [2])])
    inner_else = helper.make_graph([helper.make_node("Sub", ["acc", "top"], ["e"])], "e", [],
                                   [helper.make_tensor_value_info("e", F, [2])])
    body = helper.make_graph(
        [helper.make_node("If", ["cond"], ["acc_out"], then_branch=inner_then,
                          else_branch=inner_else),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond", B, []),
         helper.make_tensor_value_info("acc", F, [2])],
        [helper.make_tensor_value_info("cond_out", B, []),
         helper.make_tensor_value_info("acc_out", F, [2])])
    nodes = [helper.make_node("Neg", ["x"], ["top"]),
             helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)]
    proto = model(nodes, [("x", F, [2]), ("n", I64, [])], [("y", F, [2])])
    m = ModelLoader.load(proto.SerializeToString())
    loop = next(layer for layer in m.layers if layer.op_type == "Loop")
    assert loop.captures == ["top"]
    x = rng.standard_normal(2).astype(np.float32)
    y = engine_run(m, {"x": x, "n": np.array(3, np.int64)})["y"]
    np.testing.assert_allclose(y, x - 3 * x, rtol=1e-6)


def test_model_local_functions_are_inlined(rng):
    fn = helper.make_function("my.fns", "Twice", ["a"], ["b"],
                              [helper.make_node("Add", ["a", "a"], ["b"])],
                              [helper.make_opsetid("", 17)])
    g = helper.make_graph([helper.make_node("Twice", ["x"], ["y"], domain="my.fns")], "g",
                          [helper.make_tensor_value_info("x", F, [2])],
                          [helper.make_tensor_value_info("y", F, [2])])
    proto = helper.make_model(g, functions=[fn], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("my.fns", 1)])
    m = ModelLoader.load(proto.SerializeToString())
    x = rng.standard_normal(2).astype(np.float32)
    np.testing.assert_array_equal(engine_run(m, {"x": x})["y"], x + x)
