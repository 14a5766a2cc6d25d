"""The CPU run loop's kept results of shape computations (engine/step_memo.py): reused only
while their inputs repeat, never for steps that read data values, never for model outputs."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker

RNG = np.random.default_rng(11)


def _proto():
    """y = Reshape(x, [batch, -1]) + position table rows Gather(pos, Range(0, batch)), and the
    shape vector of x as a second output (a model output computed from shapes only)."""
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    pos = RNG.normal(0, 1, (16, 1)).astype(np.float32)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "zero1"], ["b1"]),
             helper.make_node("Concat", ["b1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Range", ["zero", "b", "one"], ["rows"]),
             helper.make_node("Gather", ["pos", "rows"], ["p"], axis=0),
             helper.make_node("Add", ["flat", "p"], ["y"]),
             helper.make_node("Shape", ["x"], ["shape_out"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "k"]),
         helper.make_tensor_value_info("shape_out", TensorProto.INT64, [3])],
        [i64("zero", 0), i64("zero1", [0]), i64("minus1", [-1]), i64("one", 1),
         numpy_helper.from_array(pos, "pos")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_kept_shape_results_follow_the_inputs():
    proto = _proto()
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    model = ModelLoader.from_proto(proto)
    with Worker(model, "cpu") as worker:
        kinds, memo = worker._cpu_memo(True)
        by_op = {}
        for st, kind in zip(worker._cpu_steps(True), kinds):
            by_op.setdefault(st[0].op_type, []).append((kind, st[0].outputs[0]))
        # data values are never kept: the Reshape and the Add read x; the model output is not
        assert all(kind == 0 for kind, _ in by_op["Add"] + by_op["Reshape"])
        assert dict((n, k) for k, n in by_op["Shape"])["shape_out"] == 0
        assert any(kind == 1 for kind, _ in by_op["Gather"] + by_op["Range"])
        for shape in [(4, 3, 5), (4, 3, 5), (7, 3, 2), (4, 3, 5), (4, 3, 5)]:
            x = RNG.normal(0, 1, shape).astype(np.float32)  # new values every run
            worker.schedule({"x": x})
            got = worker.peek_output("y").download_to_array()
            shape_out = worker.peek_output("shape_out").download_to_array()
            want, want_shape = sess.run(None, {"x": x})
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
            np.testing.assert_array_equal(shape_out, want_shape)
            shape_out[...] = -1  # a user writing into an output changes no later run
            assert sum(slot is not None for slot in memo) >= 4


def test_steps_reading_model_input_values_always_run():
    """Integer arithmetic on a model input's values looks like a shape computation but is
    data: it must see new values however often the same bytes came before."""
    nodes = [helper.make_node("Add", ["ids", "one"], ["t"]),
             helper.make_node("Mul", ["t", "one"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [4])],
        [numpy_helper.from_array(np.array(1, np.int64), "one")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with Worker(ModelLoader.from_proto(proto), "cpu") as worker:
        assert worker._cpu_memo(True)[0] == [0] * len(worker._cpu_steps(True))
        for ids in ([1, 2, 3, 4], [1, 2, 3, 4], [5, 6, 7, 8]):
            worker.schedule({"ids": np.array(ids, np.int64)})
            np.testing.assert_array_equal(worker.peek_output("y").download_to_array(),
                                          np.array(ids) + 1)


def test_large_kept_values_are_matched_by_identity():
    """A causal mask made from the input's shape (ConstantOfShape -> Trilu): its 6-25 KB
    are too large for a value key, so the Trilu is matched by its input object, the kept
    ConstantOfShape result; a new shape makes a new one and a new mask."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["ones"],
                              value=numpy_helper.from_array(np.array([1.0], np.float32))),
             helper.make_node("Trilu", ["ones"], ["tri"], upper=0),
             helper.make_node("Mul", ["x", "tri"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "n"])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with Worker(ModelLoader.from_proto(proto, optimize=False), "cpu") as worker:
        kinds, memo = worker._cpu_memo(True)
        for n in (40, 40, 80, 40):
            x = RNG.normal(0, 1, (n, n)).astype(np.float32)
            worker.schedule({"x": x})
            np.testing.assert_array_equal(worker.peek_output("y").download_to_array(),
                                          np.tril(x))
        trilu = [st[0].op_type for st in worker._cpu_steps(True)].index("Trilu")
        assert kinds[trilu] == 1 and memo[trilu] is not None and memo[trilu][0] is None
