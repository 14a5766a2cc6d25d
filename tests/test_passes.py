"""Import passes: exact same results with and without them, on random models vs onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from modelgen import I64, F, engine_run, model, ort_run
from onnx import helper, numpy_helper

from engine import ModelLoader
from engine.backends.cpu import KERNELS
from engine.passes.fold import FOLD_LIMIT_BYTES

UNARY = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg"]
BINARY = ["Add", "Sub", "Mul"]


def random_model(rng: np.random.Generator, n_ops: int = 24) -> tuple[onnx.ModelProto, dict]:
    """A random valid model mixing foldable constants, no-ops, dead code and shape chains."""
    shape = [2, 3, 4]
    nodes, inits = [], []
    live = ["x"]  # float tensors of ``shape`` computed from the input
    consts: list[str] = []
    k = 0

    def new(prefix):
        nonlocal k
        k += 1
        return f"{prefix}{k}"

    def const(value=None):
        name = new("c")
        v = rng.standard_normal(shape).astype(np.float32) if value is None else value
        if rng.random() < 0.5:
            inits.append(numpy_helper.from_array(v, name))
        else:
            nodes.append(helper.make_node("Constant", [], [name],
                                          value=numpy_helper.from_array(v)))
        consts.append(name)
        return name

    for _ in range(n_ops):
        r = rng.random()
        src = live[int(rng.integers(len(live)))]
        out = new("t")
        if r < 0.25:
            nodes.append(helper.make_node(UNARY[int(rng.integers(len(UNARY)))], [src], [out]))
        elif r < 0.45:
            other = live[int(rng.integers(len(live)))] if rng.random() < 0.5 else const()
            nodes.append(helper.make_node(BINARY[int(rng.integers(3))], [src, other], [out]))
        elif r < 0.6:  # a chain of constants only: folds away
            a, b = const(), const()
            c = new("f")
            nodes.append(helper.make_node(BINARY[int(rng.integers(3))], [a, b], [c]))
            nodes.append(helper.make_node("Tanh", [c], [out + "_"]))
            nodes.append(helper.make_node("Add", [src, out + "_"], [out]))
        elif r < 0.72:
            op = "Identity" if rng.random() < 0.5 else "Dropout"
            nodes.append(helper.make_node(op, [src], [out]))
        elif r < 0.82:  # Shape -> Gather -> Concat -> Reshape: a CPU-forced chain
            s, g, cat, flat = new("s"), new("g"), new("cat"), new("flat")
            idx, minus = new("i"), new("m")
            inits += [numpy_helper.from_array(np.array([0, 1], np.int64), idx),
                      numpy_helper.from_array(np.array([-1], np.int64), minus)]
            nodes += [helper.make_node("Shape", [src], [s]),
                      helper.make_node("Gather", [s, idx], [g]),
                      helper.make_node("Concat", [g, minus], [cat], axis=0),
                      helper.make_node("Reshape", [src, cat], [flat]),
                      helper.make_node("Reshape", [flat, new("shp")], [out])]
            inits.append(numpy_helper.from_array(np.array(shape, np.int64), f"shp{k}"))
        elif r < 0.9:  # transpose there and back
            t = new("tr")
            nodes += [helper.make_node("Transpose", [src], [t], perm=[2, 0, 1]),
                      helper.make_node("Transpose", [t], [out], perm=[1, 2, 0])]
        else:  # dead code: computed, never read
            nodes.append(helper.make_node("Sigmoid", [src], [new("dead")]))
            continue
        live.append(out)
    outputs = [live[-1]] + ([live[len(live) // 2]] if len(live) > 2 else [])
    nodes.append(helper.make_node("Identity", [outputs[0]], ["y"]))
    nodes.append(helper.make_node("Identity", ["x"], ["x_copy"]))
    nodes.append(helper.make_node("Identity", [const()], ["c_out"]))
    outs = [("y", F, shape), ("x_copy", F, shape), ("c_out", F, shape)]
    if len(outputs) > 1 and outputs[1] != "x" and outputs[1] != outputs[0]:
        outs.append((outputs[1], F, shape))
    proto = model(nodes, [("x", F, shape)], outs, inits, opset=int(rng.integers(13, 18)))
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    return proto, feeds


@pytest.mark.parametrize("i", range(8))
def test_passes_preserve_results_on_random_models(i, rng):
    proto, feeds = random_model(rng)
    onnx.checker.check_model(proto)
    expect = ort_run(proto, feeds)
    raw = ModelLoader.load(proto.SerializeToString(), optimize=False)
    opt = ModelLoader.load(proto.SerializeToString())
    assert [o.name for o in opt.outputs] == [o.name for o in proto.graph.output]
    got_opt = engine_run(opt, feeds)
    # without the passes every layer runs as is (Dropout needs its own kernel then)
    got_raw = engine_run(raw, feeds) if all(KERNELS.lookup(x) for x in raw.layers) else got_opt
    for o, e in zip(opt.outputs, expect):
        np.testing.assert_array_equal(got_opt[o.name], got_raw[o.name], err_msg=o.name)
        np.testing.assert_allclose(got_opt[o.name], e, rtol=1e-5, atol=1e-6, err_msg=o.name)
    assert len(opt.layers) < len(raw.layers)
    stats = opt.pass_stats
    assert stats["folded"] > 0 and stats["removed"] > 0
    # an Identity stays only where two graph outputs (or an input and an output) carry one
    # value under two names: both names must exist
    outputs = {o.name for o in opt.outputs}
    assert not any(layer.op_type in ("Identity", "Dropout") and layer.inputs[0] != "x"
                   and layer.inputs[0] not in outputs for layer in opt.layers)
    assert {"Shape", "Gather", "Concat", "Constant"}.isdisjoint(layer.op_type
                                                                for layer in opt.layers)


def test_dead_code_and_unused_constants_go():
    w = np.ones(3, np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Add", ["x", "w"], ["d1"]),
             helper.make_node("Neg", ["d1"], ["d2"])]
    m = ModelLoader.load(model(nodes, [("x", F, [3])], [("y", F, [3])],
                               [("w", w)]).SerializeToString())
    assert [layer.op_type for layer in m.layers] == ["Relu"] and not m.constants
    assert m.pass_stats["dead"] == 2 and m.pass_stats["unused_constants"] == 1


def test_dropout_with_training_mode_input_is_kept_unless_false():
    nodes = [helper.make_node("Dropout", ["x", "", "train"], ["d"]),
             helper.make_node("Relu", ["d"], ["y"])]
    for value, kept in [(False, False), (True, True)]:
        m = ModelLoader.load(model(nodes, [("x", F, [3])], [("y", F, [3])],
                                   [("train", np.array(value))]).SerializeToString())
        assert any(layer.op_type == "Dropout" for layer in m.layers) == kept
    m = ModelLoader.load(model(nodes, [("x", F, [3]), ("train", onnx.TensorProto.BOOL, [])],
                               [("y", F, [3])]).SerializeToString())
    assert [layer.op_type for layer in m.layers] == ["Dropout", "Relu"]


def test_dropout_with_a_named_but_unread_mask_goes(rng):
    """Old exporters name the mask output even when nothing reads it (inception_v1)."""
    nodes = [helper.make_node("Dropout", ["x"], ["d", "mask"], ratio=0.4),
             helper.make_node("Relu", ["d"], ["y"])]
    m = ModelLoader.load(model(nodes, [("x", F, [3])], [("y", F, [3])],
                               opset=9).SerializeToString())
    assert [layer.op_type for layer in m.layers] == ["Relu"]
    x = rng.standard_normal(3).astype(np.float32)
    np.testing.assert_array_equal(engine_run(m, {"x": x})["y"], np.maximum(x, 0))
    nodes.append(helper.make_node("Cast", ["mask"], ["m"], to=onnx.TensorProto.FLOAT))
    m = ModelLoader.load(model(nodes, [("x", F, [3])], [("y", F, [3]), ("m", F, [3])],
                               opset=9).SerializeToString())
    assert "Dropout" in [layer.op_type for layer in m.layers]


def test_identity_feeding_a_subgraph_capture_is_renamed_inside(rng):
    then_g = helper.make_graph([helper.make_node("Mul", ["a", "a"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F, [3])])
    else_g = helper.make_graph([helper.make_node("Identity", ["a"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F, [3])])
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Identity", ["n"], ["a"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    proto = model(nodes, [("x", F, [3]), ("c", onnx.TensorProto.BOOL, [])], [("y", F, [3])])
    m = ModelLoader.load(proto.SerializeToString())
    assert m.pass_stats["removed"] == 2
    assert next(layer for layer in m.layers if layer.op_type == "If").captures == ["n"]
    x = rng.standard_normal(3).astype(np.float32)
    for c in (True, False):
        y = engine_run(m, {"x": x, "c": np.array(c)})["y"]
        np.testing.assert_array_equal(y, x * x if c else -x)


def test_folding_is_capped():
    big = 2 * FOLD_LIMIT_BYTES // 4
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["z"],
                              value=numpy_helper.from_array(np.ones(1, np.float32))),
             helper.make_node("Add", ["z", "x"], ["y"])]
    m = ModelLoader.load(model(nodes, [("x", F, [big])], [("y", F, [big])],
                               [("shape", np.array([big], np.int64))]).SerializeToString())
    assert any(layer.op_type == "ConstantOfShape" for layer in m.layers)
    assert all(v.nbytes < FOLD_LIMIT_BYTES for v in m.constants.values())
    small = ModelLoader.load(model(nodes, [("x", F, [8])], [("y", F, [8])],
                                   [("shape", np.array([8], np.int64))]).SerializeToString())
    assert [layer.op_type for layer in small.layers] == ["Add"]


def test_cpu_forced_chain_and_through_subgraphs():
    """Reshape's shape computed from an input: the chain is forced, Shape's input is not."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Add", ["s", "k"], ["s2"]),
             helper.make_node("Reshape", ["r", "s2"], ["y"])]
    m = ModelLoader.load(model(nodes, [("x", F, ["N", 4]), ("k", I64, [2])],
                               [("y", F, [None, None])]).SerializeToString())
    assert m.cpu_forced == {"s", "s2"}
    # a Reshape inside an If body whose shape comes from the outer graph
    then_g = helper.make_graph([helper.make_node("Reshape", ["x", "shp"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F, None)])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F, None)])
    nodes = [helper.make_node("Neg", ["k"], ["shp"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    m = ModelLoader.load(model(nodes, [("x", F, [4]), ("k", I64, [2]),
                                       ("c", onnx.TensorProto.BOOL, [])],
                               [("y", F, [None, None])]).SerializeToString())
    assert m.cpu_forced == {"shp"}


@pytest.fixture
def hide_kernels(monkeypatch):
    """Pretend the CPU lacks some kernels, so that expansion must take over."""
    hidden: set[str] = set()
    real = KERNELS.lookup
    monkeypatch.setattr(KERNELS, "lookup",
                        lambda layer: None if layer.op_type in hidden else real(layer))
    return hidden


@pytest.mark.parametrize("op, attrs, opset", [
    ("Elu", {"alpha": 0.7}, 18), ("Selu", {}, 17), ("Softplus", {}, 13), ("Mish", {}, 18),
    ("Softsign", {}, 20), ("ThresholdedRelu", {"alpha": 0.3}, 19), ("Celu", {"alpha": 2.0}, 14),
])
def test_function_ops_expand_and_match_onnxruntime(op, attrs, opset, hide_kernels, rng):
    hide_kernels.add(op)
    nodes = [helper.make_node(op, ["x"], ["a"], **attrs), helper.make_node("Neg", ["a"], ["y"])]
    proto = model(nodes, [("x", F, ["N", 5])], [("y", F, ["N", 5])], opset=opset)
    m = ModelLoader.load(proto.SerializeToString())
    assert m.pass_stats["expanded"] >= 1 and op not in {x.op_type for x in m.layers}
    assert m.value_info[next(x for x in m.layers if x.op_type == "Neg").inputs[0]].shape \
        == ("N", 5)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_allclose(engine_run(m, {"x": x})["y"], ort_run(proto, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


def test_range_expands_into_a_loop(hide_kernels, rng):
    hide_kernels.add("Range")
    nodes = [helper.make_node("Range", ["a", "b", "d"], ["y"])]
    proto = model(nodes, [("a", F, []), ("b", F, []), ("d", F, [])], [("y", F, [None])])
    m = ModelLoader.load(proto.SerializeToString())
    assert "Loop" in {x.op_type for x in m.layers}
    feeds = {"a": np.array(rng.uniform(-3, 0), np.float32),
             "b": np.array(rng.uniform(1, 6), np.float32), "d": np.array(0.7, np.float32)}
    np.testing.assert_allclose(engine_run(m, feeds)["y"], ort_run(proto, feeds)[0], rtol=1e-6)


def test_no_expansion_when_the_body_cannot_run(hide_kernels):
    hide_kernels.update({"Elu", "Where"})
    proto = model([helper.make_node("Elu", ["x"], ["y"])], [("x", F, [3])], [("y", F, [3])],
                  opset=18)
    m = ModelLoader.load(proto.SerializeToString())
    assert [x.op_type for x in m.layers] == ["Elu"] and m.pass_stats["expanded"] == 0


def test_inspect_shows_pass_stats_and_cpu_forced(tmp_path, capsys):
    from engine.cli import main

    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["i"]),
             helper.make_node("Shape", ["i"], ["s"]), helper.make_node("Add", ["s", "k"], ["s2"]),
             helper.make_node("Reshape", ["i", "s2"], ["y"])]
    path = tmp_path / "m.onnx"
    onnx.save(model(nodes, [("x", F, ["N", 4]), ("k", I64, [2])], [("y", F, [None, None])]),
              str(path))
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "import passes:" in out and "removed 1" in out
    assert "CPU-forced tensors (2): s, s2" in out
    assert any("Add" in line and line.endswith("CPU-forced") for line in out.splitlines())


def test_static_shape_fill_in():
    from engine.passes.shapes import infer_shapes

    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Reshape", ["t", "shape"], ["y"])]
    m = ModelLoader.load(model(nodes, [("x", F, [2, 6])], [("y", F, [None, None])],
                               [("shape", np.array([3, -1], np.int64))]).SerializeToString())
    m.value_info.clear()
    assert infer_shapes(m) == 2
    assert m.value_info["t"].shape == (6, 2) and m.value_info["y"].shape == (3, 4)


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_constant_condition_is_inlined(cond, rng):
    vi = helper.make_tensor_value_info
    inner = helper.make_graph([helper.make_node("Mul", ["loc", "x"], ["m"])], "inner", [],
                              [vi("m", F, [3])])
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "k"], ["loc"]),  # 'loc' is read by a nested If too
         helper.make_node("If", ["c2"], ["nested"], then_branch=inner, else_branch=inner),
         helper.make_node("Neg", ["nested"], ["t"]), helper.make_node("Identity", ["x"], ["xt"])],
        "then", [], [vi("t", F, [3]), vi("k", F, [3]), vi("xt", F, [3]), vi("t", F, [3])],
        [numpy_helper.from_array(np.arange(3, dtype=np.float32), "k")])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["x", "w"], ["e"]), helper.make_node("Abs", ["e"], ["e2"]),
         helper.make_node("Identity", ["x"], ["xe"])],
        "else", [], [vi("e", F, [3]), vi("e2", F, [3]), vi("xe", F, [3]), vi("e", F, [3])])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Equal", ["s", "three" if cond else "four"], ["eq"]),
             helper.make_node("Squeeze", ["eq", "ax"], ["c"]),
             helper.make_node("If", ["c"], ["a", "b", "xx", "d"], then_branch=then_g,
                              else_branch=else_g),
             helper.make_node("Add", ["a", "b"], ["y"])]
    inits = [("three", np.array([3], np.int64)), ("four", np.array([4], np.int64)),
             ("ax", np.array([0], np.int64)), ("w", rng.standard_normal(3).astype(np.float32))]
    proto = model(nodes, [("x", F, [3]), ("c2", onnx.TensorProto.BOOL, [])],
                  [("y", F, [3]), ("xx", F, [3]), ("d", F, [3]), ("a", F, [3])], inits)
    m = ModelLoader.load(proto.SerializeToString())
    assert m.pass_stats["inlined_ifs"] == 1
    assert [x.op_type for x in m.layers].count("If") == (1 if cond else 0)  # only the nested
    x = rng.standard_normal(3).astype(np.float32)
    from onnx.reference import ReferenceEvaluator

    for c2 in (True, False):
        feeds = {"x": x, "c2": np.array(c2)}
        got = engine_run(m, feeds)
        # the ONNX reference: onnxruntime mishandles a branch returning one tensor twice
        for o, e in zip(m.outputs, ReferenceEvaluator(proto).run(None, feeds)):
            np.testing.assert_allclose(got[o.name], e, rtol=1e-6, err_msg=o.name)


def test_value_info_follows_renames_with_symbolic_dims():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["i"]),
             helper.make_node("Neg", ["i"], ["n"]), helper.make_node("Tanh", ["n"], ["t"]),
             helper.make_node("Dropout", ["t"], ["y"])]
    m = ModelLoader.load(model(nodes, [("x", F, ["B", 3])], [("y", F, ["B", 3])])
                         .SerializeToString())
    assert [x.op_type for x in m.layers] == ["Relu", "Neg", "Tanh"]
    assert m.layers[-1].outputs == ["y"] and m.layers[1].inputs == ["r"]
    assert "i" not in m.value_info and "t" not in m.value_info
    assert m.value_info["r"].shape == ("B", 3) and m.value_info["y"].shape == ("B", 3)
