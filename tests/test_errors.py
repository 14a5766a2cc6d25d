"""Every bad input of issue 2 (load items and Worker inputs) gives an engine error that says
what is wrong, naming the node, tensor or input at fault."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from modelgen import I64, F, elementwise_chain, model
from onnx import helper, numpy_helper

from engine import InputError, ModelLoader, ModelLoadError, Worker
from engine.onnx_check import MIN_OPSET


def _load_error(source) -> str:
    with pytest.raises(ModelLoadError) as info:
        ModelLoader.load(source)
    return str(info.value)


# -- not ONNX / truncated / empty ----------------------------------------------------------
def test_empty_bytes_and_empty_file(tmp_path):
    assert "empty" in _load_error(b"")
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    assert "empty" in _load_error(p)


def test_missing_file_and_folder(tmp_path):
    assert "no such file" in _load_error(tmp_path / "nope.onnx")
    assert "folder" in _load_error(tmp_path)


@pytest.mark.parametrize("data, words", [
    (b'{"not": "onnx"}', "text"),
    (b"PK\x03\x04" + bytes(60), "zip"),
    (b"<html><body>404</body></html>", "text"),
])
def test_other_formats_are_named(data, words):
    msg = _load_error(data)
    assert "not an ONNX model" in msg and words in msg


def test_random_bytes_are_not_onnx(rng):
    data = rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    assert "ONNX" in _load_error(data)


def test_truncated_model(rng):
    data = elementwise_chain(6).SerializeToString()
    cut = int(rng.integers(len(data) // 4, len(data) - 1))
    msg = _load_error(data[:cut])
    assert any(w in msg for w in ("truncated", "not an ONNX", "invalid")), msg


def test_model_cut_after_its_graph_says_it_may_be_truncated():
    """A file cut exactly between the graph and the opset list parses as a model importing
    no opset: the error says so and suggests a truncated file."""
    proto = elementwise_chain(6)
    del proto.opset_import[:]
    msg = _load_error(proto.SerializeToString())
    assert "imports no opset" in msg and "truncated" in msg, msg


# -- domains, ops, opsets -------------------------------------------------------------------
def test_unknown_domain():
    m = model([helper.make_node("FusedGemm", ["x"], ["y"], domain="com.microsoft", name="fg")],
              [("x", F, [2])], [("y", F, [2])])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    msg = _load_error(m.SerializeToString())
    assert "com.microsoft" in msg and "'fg'" in msg and "unknown operator domain" in msg


def test_unknown_op():
    m = model([helper.make_node("Frobnicate", ["x"], ["y"], name="frob")],
              [("x", F, [2])], [("y", F, [2])])
    msg = _load_error(m.SerializeToString())
    assert "Frobnicate" in msg and "unknown operator" in msg and "'frob'" in msg


def test_op_newer_than_the_models_opset():
    m = model([helper.make_node("Gelu", ["x"], ["y"])], [("x", F, [2])], [("y", F, [2])],
              opset=17)
    msg = _load_error(m.SerializeToString())
    assert "Gelu" in msg and "opset 17" in msg


@pytest.mark.parametrize("opset", [MIN_OPSET - 1, onnx.defs.onnx_opset_version() + 1])
def test_unsupported_opset(opset):
    m = model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, [2])], [("y", F, [2])],
              opset=opset)
    msg = _load_error(m.SerializeToString())
    assert f"opset {opset} is not supported" in msg and str(MIN_OPSET) in msg


# -- invalid graphs -------------------------------------------------------------------------
def test_node_reads_undefined_tensor():
    m = model([helper.make_node("Relu", ["ghost"], ["y"], name="r")],
              [("x", F, [2])], [("y", F, [2])])
    msg = _load_error(m.SerializeToString())
    assert "'ghost'" in msg and "'r'" in msg and "defines" in msg


def test_cycle():
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
             helper.make_node("Relu", ["a"], ["b"], name="n2"),
             helper.make_node("Identity", ["b"], ["y"], name="n3")]
    msg = _load_error(model(nodes, [("x", F, [2])], [("y", F, [2])]).SerializeToString())
    assert "cycle" in msg and "'n1'" in msg and "'n2'" in msg


def test_two_producers():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a"),
             helper.make_node("Neg", ["x"], ["y"], name="b")]
    msg = _load_error(model(nodes, [("x", F, [2])], [("y", F, [2])]).SerializeToString())
    assert "'y'" in msg and "twice" in msg


def test_output_not_computed():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, [2])],
              [("y", F, [2]), ("z", F, [2])])
    assert "'z'" in _load_error(m.SerializeToString())


def test_subgraph_reads_undefined_tensor():
    body = helper.make_graph([helper.make_node("Relu", ["nowhere"], ["t"], name="inner")],
                             "then", [], [helper.make_tensor_value_info("t", F, [2])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)]
    m = model(nodes, [("c", onnx.TensorProto.BOOL, [])], [("y", F, [2])])
    assert "'nowhere'" in _load_error(m.SerializeToString())


def test_unsorted_nodes_load():
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="second"),
             helper.make_node("Neg", ["x"], ["a"], name="first")]
    m = ModelLoader.load(model(nodes, [("x", F, [2])], [("y", F, [2])]).SerializeToString())
    assert [layer.op_type for layer in m.layers] == ["Neg", "Relu"]


def test_corrupt_initializer():
    t = numpy_helper.from_array(np.ones(4, np.float32), "w")
    t.raw_data = t.raw_data[:6]
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", F, [4])], [("y", F, [4])],
              [t])
    msg = _load_error(m.SerializeToString())
    assert "'w'" in msg or "name: w)" in msg


# -- external data --------------------------------------------------------------------------
def _external_model(tmp_path, location="weights.bin"):
    w = np.arange(16, dtype=np.float32)
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", F, [16])], [("y", F, [16])],
              [("w", w)])
    path = tmp_path / "m.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, location=location,
                    size_threshold=0)
    return path


def test_external_data_missing_file(tmp_path):
    path = _external_model(tmp_path)
    os.remove(tmp_path / "weights.bin")
    msg = _load_error(path)
    assert "'w'" in msg and "weights.bin" in msg and "does not exist" in msg


def test_external_data_path_escaping_the_folder(tmp_path):
    path = _external_model(tmp_path)
    m = onnx.load(str(path), load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../../etc/passwd"
    path.write_bytes(m.SerializeToString())
    msg = _load_error(path)
    assert "../../etc/passwd" in msg and "relative" in msg


def test_external_data_file_too_short(tmp_path):
    path = _external_model(tmp_path)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 8)
    msg = _load_error(path)
    assert "'w'" in msg and "too few" in msg


def test_external_data_from_bytes_asks_for_a_path(tmp_path):
    path = _external_model(tmp_path)
    assert "path" in _load_error(path.read_bytes())


# -- worker inputs --------------------------------------------------------------------------
@pytest.fixture
def two_input_model():
    nodes = [helper.make_node("Add", ["x", "y"], ["z"])]
    return ModelLoader.load(model(nodes, [("x", F, ["N", 3]), ("y", F, [1, 3])],
                                  [("z", F, ["N", 3])]).SerializeToString())


def test_wrong_shape(two_input_model):
    with Worker(two_input_model) as w, pytest.raises(InputError) as info:
        w.schedule({"x": np.ones((2, 3), np.float32), "y": np.ones((3,), np.float32)})
    assert "'y'" in str(info.value) and "[1, 3]" in str(info.value) and "[3]" in str(info.value)


def test_wrong_dtype(two_input_model):
    with Worker(two_input_model) as w, pytest.raises(InputError) as info:
        w.schedule({"x": np.ones((2, 3), np.float64), "y": np.ones((1, 3), np.float32)})
    msg = str(info.value)
    assert "'x'" in msg and "float32" in msg and "float64" in msg


def test_missing_input(two_input_model):
    with Worker(two_input_model) as w, pytest.raises(InputError) as info:
        w.schedule({"x": np.ones((2, 3), np.float32)})
    assert "missing input 'y'" in str(info.value) and "[1, 3]" in str(info.value)


def test_unknown_input(two_input_model):
    feeds = {"x": np.ones((2, 3), np.float32), "y": np.ones((1, 3), np.float32),
             "extra": np.ones(1, np.float32)}
    with Worker(two_input_model) as w, pytest.raises(InputError) as info:
        w.schedule(feeds)
    assert "'extra'" in str(info.value) and "'x'" in str(info.value)


def test_not_an_array_and_single_array_for_two_inputs(two_input_model):
    with Worker(two_input_model) as w:
        with pytest.raises(InputError, match="'x'.*NumPy array.*list"):
            w.schedule({"x": [[1.0, 2.0, 3.0]], "y": np.ones((1, 3), np.float32)})
        with pytest.raises(InputError, match="2 inputs"):
            w.schedule(np.ones((1, 3), np.float32))


def test_symbolic_dim_must_agree():
    nodes = [helper.make_node("Add", ["x", "y"], ["z"])]
    m = ModelLoader.load(model(nodes, [("x", F, ["N"]), ("y", F, ["N"])],
                               [("z", F, ["N"])]).SerializeToString())
    with Worker(m) as w, pytest.raises(InputError) as info:
        w.schedule({"x": np.ones(2, np.float32), "y": np.ones(3, np.float32)})
    assert "'N'" in str(info.value)


def test_integer_input_of_wrong_dtype():
    m = ModelLoader.load(model([helper.make_node("Identity", ["i"], ["o"])],
                               [("i", I64, [2])], [("o", I64, [2])]).SerializeToString())
    with Worker(m) as w, pytest.raises(InputError, match="'i' expects dtype int64, got int32"):
        w.schedule(np.ones(2, np.int32))
