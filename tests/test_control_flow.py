"""If / Loop / Scan / SequenceMap on the CPU against onnxruntime (or the ONNX reference)."""

from __future__ import annotations

import numpy as np
import pytest
from modelgen import I64, B, F, engine_run, if_model, model, ort_run
from onnx import helper

from engine import ModelLoader

vi = helper.make_tensor_value_info


def _check(proto, feeds, rtol=1e-6):
    expect = ort_run(proto, feeds)
    for optimize in (True, False):
        m = ModelLoader.load(proto.SerializeToString(), optimize=optimize)
        got = engine_run(m, feeds)
        for o, e in zip(m.outputs, expect):
            np.testing.assert_allclose(got[o.name], e, rtol=rtol, atol=1e-6, err_msg=o.name)


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_captures(cond, rng):
    _check(if_model(), {"x": rng.standard_normal(3).astype(np.float32), "c": np.array(cond)})


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_a_pass_through_branch(cond, rng):
    """A branch of Identity layers only (handed on without running them): outputs that are
    an outer value through a chain of them, and a constant of the branch."""
    k = helper.make_tensor("k", helper.TensorProto.FLOAT, [3], [0.5, -1.5, 2.0])
    then = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["b"]),
         helper.make_node("Identity", ["k"], ["kb"])], "then", [],
        [vi("b", F, [3]), vi("kb", F, [3])], [k])
    other = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Neg", ["x"], ["ng"])],
        "else", [], [vi("sq", F, [3]), vi("ng", F, [3])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y", "z"], then_branch=then, else_branch=other),
         helper.make_node("Add", ["y", "z"], ["s"])], "g", [vi("x", F, [3]), vi("c", B, [])],
        [vi("y", F, [3]), vi("z", F, [3]), vi("s", F, [3])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    _check(proto, {"x": rng.standard_normal(3).astype(np.float32), "c": np.array(cond)})


def _loop_body(with_exit: bool):
    nodes = [helper.make_node("Add", ["acc", "w"], ["acc_out"]),
             helper.make_node("Cast", ["i"], ["i_f"], to=1),
             helper.make_node("Mul", ["acc_out", "i_f"], ["scan"])]
    if with_exit:
        nodes.append(helper.make_node("Less", ["i_f", "limit"], ["cond_out"]))
    else:
        nodes.append(helper.make_node("Identity", ["cond"], ["cond_out"]))
    return helper.make_graph(nodes, "body",
                             [vi("i", I64, []), vi("cond", B, []), vi("acc", F, [3])],
                             [vi("cond_out", B, []), vi("acc_out", F, [3]), vi("scan", F, [3])])


@pytest.mark.parametrize("trips, with_exit", [(4, False), (0, False), (9, True)])
def test_loop_carried_scan_outputs_and_captures(trips, with_exit, rng):
    nodes = [helper.make_node("Neg", ["x"], ["w"]),
             helper.make_node("Loop", ["n", "c", "x"], ["acc", "scans"],
                              body=_loop_body(with_exit))]
    proto = model(nodes, [("x", F, [3]), ("n", I64, []), ("c", B, []), ("limit", F, [])],
                  [("acc", F, [3]), ("scans", F, [None, 3])], opset=16)
    feeds = {"x": rng.standard_normal(3).astype(np.float32), "n": np.array(trips, np.int64),
             "c": np.array(True), "limit": np.array(3.0, np.float32)}
    _check(proto, feeds)


def test_loop_without_trip_count_stops_on_condition(rng):
    nodes = [helper.make_node("Neg", ["x"], ["w"]),
             helper.make_node("Loop", ["", "c", "x"], ["acc", "scans"], body=_loop_body(True))]
    proto = model(nodes, [("x", F, [3]), ("c", B, []), ("limit", F, [])],
                  [("acc", F, [3]), ("scans", F, [None, 3])], opset=13)
    _check(proto, {"x": rng.standard_normal(3).astype(np.float32), "c": np.array(True),
                   "limit": np.array(5.0, np.float32)})


def _scan_body(state_shape):
    return helper.make_graph(
        [helper.make_node("Add", ["s", "xt"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "k"], ["yt"])],
        "body", [vi("s", F, state_shape), vi("xt", F, state_shape)],
        [vi("s_out", F, state_shape), vi("yt", F, state_shape)])


@pytest.mark.parametrize("in_axis, in_dir, out_axis, out_dir",
                         [(0, 0, 0, 0), (1, 1, 1, 0), (-1, 0, 0, 1), (1, 1, -1, 1)])
def test_scan9(in_axis, in_dir, out_axis, out_dir, rng):
    x_shape = [5, 2] if in_axis == 0 else [2, 5]
    nodes = [helper.make_node("Identity", ["kk"], ["k"]),
             helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=_scan_body([2]),
                              num_scan_inputs=1, scan_input_axes=[in_axis],
                              scan_input_directions=[in_dir], scan_output_axes=[out_axis],
                              scan_output_directions=[out_dir])]
    proto = model(nodes, [("s0", F, [2]), ("x", F, x_shape), ("kk", F, [2])],
                  [("s", F, [2]), ("y", F, [None, None])], opset=16)
    feeds = {"s0": rng.standard_normal(2).astype(np.float32),
             "x": rng.standard_normal(x_shape).astype(np.float32),
             "kk": rng.standard_normal(2).astype(np.float32)}
    _check(proto, feeds)


def test_scan8_batched(rng):
    nodes = [helper.make_node("Identity", ["kk"], ["k"]),
             helper.make_node("Scan", ["", "s0", "x"], ["s", "y"], body=_scan_body([2]),
                              num_scan_inputs=1)]
    proto = model(nodes, [("s0", F, [3, 2]), ("x", F, [3, 4, 2]), ("kk", F, [2])],
                  [("s", F, [3, 2]), ("y", F, [3, 4, 2])], opset=8)
    feeds = {"s0": rng.standard_normal((3, 2)).astype(np.float32),
             "x": rng.standard_normal((3, 4, 2)).astype(np.float32),
             "kk": rng.standard_normal(2).astype(np.float32)}
    _check(proto, feeds)


def test_sequence_map_against_reference(rng):
    from onnx import TensorProto
    from onnx.reference import ReferenceEvaluator

    body = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "body",
                             [vi("a", F, None), vi("b", F, None)], [vi("c", F, None)])
    seq_t = helper.make_tensor_sequence_value_info
    nodes = [helper.make_node("SequenceMap", ["seq", "t"], ["out"], body=body)]
    proto = model(nodes, [seq_t("seq", TensorProto.FLOAT, None), ("t", F, [3])],
                  [seq_t("out", TensorProto.FLOAT, None)], opset=17)
    seq = [rng.standard_normal(3).astype(np.float32) for _ in range(4)]
    t = rng.standard_normal(3).astype(np.float32)
    expect = ReferenceEvaluator(proto).run(None, {"seq": seq, "t": t})[0]
    got = engine_run(ModelLoader.load(proto.SerializeToString()), {"seq": seq, "t": t})["out"]
    assert len(got) == len(expect)
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g, e, rtol=1e-6)
