"""Range, Trilu, CumSum, Where, Gather*, ScatterND, TopK on both GPU backends.

Each case builds a one-node model, asserts that the layer ran natively on the GPU backend
(a silent CPU fallback would make the comparison meaningless) and compares with onnx's
reference evaluator on fresh random data, with odd sizes, broadcasting and negative
axes/indices.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.shape_ops_util import GPU, check, one_node, run_native

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("require_gpu")]
backends = pytest.mark.parametrize("backend", GPU, ids=lambda b: b.value)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@backends
@pytest.mark.parametrize("start,limit,delta,dtype", [
    (0, 7, 1, np.int64), (10, -3, -3, np.int64), (2, 11, 2, np.int32),
    (0.5, 3.7, 0.25, np.float32), (1.0, -2.0, -0.3, np.float32)])
def test_range(backend, start, limit, delta, dtype):
    feeds = {n: np.array(v, dtype) for n, v in zip(("s", "l", "d"), (start, limit, delta))}
    check(backend, "Range", feeds)


@backends
@pytest.mark.parametrize("shape,k,upper", [
    ((5, 7), 0, 1), ((2, 3, 6, 5), -2, 0), ((3, 9, 4), 3, 1), ((4, 4), -1, 1),
    ((3, 5), 9, 0), ((2, 6, 3), -7, 1)])
def test_trilu(backend, shape, k, upper, rng):
    check(backend, "Trilu", {"x": f32(rng, *shape)}, {"k": np.array(k, np.int64)},
          {"upper": upper})


@backends
@pytest.mark.parametrize("shape,axis,exclusive,reverse", [
    ((7,), 0, 0, 0), ((3, 5, 6), -1, 0, 0), ((3, 5, 6), 1, 1, 0), ((2, 9, 3), 1, 0, 1),
    ((4, 3, 5), -3, 1, 1)])
def test_cumsum(backend, shape, axis, exclusive, reverse, rng):
    check(backend, "CumSum", {"x": f32(rng, *shape)}, {"axis": np.array(axis, np.int32)},
          {"exclusive": exclusive, "reverse": reverse}, rtol=1e-4)


@backends
@pytest.mark.parametrize("cshape,xshape,yshape", [
    ((2, 5, 7), (2, 5, 7), (2, 5, 7)), ((1, 1, 5, 5), (2, 3, 5, 5), ()),
    ((6, 1), (3, 1, 7), (7,)), ((5,), (4, 1), (1, 5))])
def test_where_broadcasting(backend, cshape, xshape, yshape, rng):
    cond = rng.random(cshape) > 0.5
    check(backend, "Where", {"x": f32(rng, *xshape), "y": f32(rng, *yshape)},
          {"c": np.asarray(cond)}, order=["c", "x", "y"])



@backends
@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize("cshape,xshape,yshape", [
    ((6, 6), (1, 3, 6, 6), ()),             # a causal mask over heads (GPT)
    ((2, 1, 1, 7), (2, 3, 5, 7), (1,)),     # a padding mask over heads and queries
    ((5,), (3, 2, 5), (3, 2, 5))])
def test_where_with_the_condition_fed(backend, cshape, xshape, yshape, whole, rng,
                                      monkeypatch):
    """The condition as a graph input; GPU_PIXEL broadcasts a host condition to the
    output's shape once (``whole``) or reads it with broadcasting per value."""
    from engine.backends.gpu_pixel import kernels_index

    if not whole:
        monkeypatch.setattr(kernels_index, "WHERE_FULL", 0)
    cond = rng.random(cshape) > 0.4
    check(backend, "Where", {"c": cond, "x": f32(rng, *xshape)},
          {"y": f32(rng, *yshape)}, order=["c", "x", "y"])

@backends
@pytest.mark.parametrize("shape,ishape,axis", [
    ((7, 5), (3,), 0), ((3, 9, 5), (2, 4), 1), ((2, 3, 11), (6,), -1), ((9, 6), (), 0),
    ((5, 3, 4), (2, 2), -2),
    # rows of a table, as embeddings are looked up (GPU_PIXEL: gather_rows.wgsl)
    ((11, 6), (2, 9), 0), ((30, 16), (1, 12), 0), ((9, 3), (5,), 0), ((40, 8), (3, 4), -2)])
def test_gather(backend, shape, ishape, axis, rng):
    dim = shape[axis]
    idx = rng.integers(-dim, dim, ishape).astype(np.int64)
    check(backend, "Gather", {"x": f32(rng, *shape)}, {"i": idx}, {"axis": axis})


@backends
def test_gather_indices_fed_as_input(backend, rng):
    idx = rng.integers(-6, 6, (4, 3)).astype(np.int64)
    check(backend, "Gather", {"x": f32(rng, 3, 6, 5), "i": idx}, attrs={"axis": 1})


@backends
@pytest.mark.parametrize("shape,ishape,axis", [
    ((5, 7), (5, 3), 1), ((4, 3, 6), (2, 3, 6), 0), ((3, 4, 5), (3, 4, 2), 2)])
def test_gather_elements(backend, shape, ishape, axis, rng):
    dim = shape[axis]
    idx = rng.integers(-dim, dim, ishape).astype(np.int64)
    check(backend, "GatherElements", {"x": f32(rng, *shape)}, {"i": idx}, {"axis": axis})


@backends
def test_gather_elements_negative_axis(backend, rng):
    # (onnx's reference mishandles a negative axis here: NumPy is the oracle)
    x = f32(rng, 3, 4, 5)
    idx = rng.integers(-5, 5, (3, 4, 2)).astype(np.int64)
    proto = one_node("GatherElements", {"x": x}, {"i": idx}, {"axis": -1})
    got = run_native(backend, proto, {"x": x})[0]
    np.testing.assert_array_equal(got, np.take_along_axis(x, idx % 5, -1))


@backends
@pytest.mark.parametrize("shape,ishape,batch", [
    ((5, 7), (4, 2), 0), ((4, 3, 6), (2, 1), 0), ((3, 4, 5), (3, 2, 1), 1),
    ((2, 3, 5), (2,), 0)])
def test_gather_nd(backend, shape, ishape, batch, rng):
    depth = ishape[-1]
    dims = shape[batch:batch + depth]
    idx = np.stack([rng.integers(-d, d, ishape[:-1]) for d in dims], -1).astype(np.int64)
    check(backend, "GatherND", {"x": f32(rng, *shape)}, {"i": idx}, {"batch_dims": batch})


@backends
@pytest.mark.parametrize("shape,rows,depth", [((7, 5), 3, 1), ((4, 3, 6), 2, 2),
                                               ((5, 6), 4, 2), ((3, 4, 5), 2, 1)])
def test_scatter_nd(backend, shape, rows, depth, rng):
    flat = rng.permutation(int(np.prod(shape[:depth])))[:rows]  # distinct targets
    idx = np.stack(np.unravel_index(flat, shape[:depth]), -1).astype(np.int64)
    idx[0] -= np.array(shape[:depth])  # a negative index
    upd = f32(rng, rows, *shape[depth:])
    check(backend, "ScatterND", {"x": f32(rng, *shape), "u": upd}, {"i": idx},
          order=["x", "i", "u"])


@backends
@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_nd_reductions_with_duplicates(backend, reduction, rng):
    idx = np.array([[1, 0], [3, -2], [1, 0], [-3, 1]], np.int64)  # rows 0 and 2 repeat
    check(backend, "ScatterND", {"x": f32(rng, 4, 3, 5), "u": f32(rng, 4, 5)}, {"i": idx},
          {"reduction": reduction}, order=["x", "i", "u"], rtol=1e-5)


@backends
@pytest.mark.parametrize("shape,k,axis,largest", [
    ((3, 17), 4, -1, 1), ((2, 9, 5), 3, 1, 0), ((30,), 1, 0, 1), ((4, 6, 7), 7, 2, 1),
    ((5, 2, 3), 5, 0, 0)])
def test_topk(backend, shape, k, axis, largest, rng):
    x = f32(rng, *shape)
    x.reshape(-1)[::5] = 0.5  # ties: the smaller index comes first
    check(backend, "TopK", {"x": x}, {"k": np.array([k], np.int64)},
          {"axis": axis, "largest": largest}, n_out=2, out_dtypes=[np.float32, np.int64])


@pytest.mark.parametrize("shape,axis,bias,n_out", [
    ((2, 7, 13), -1, True, 1), ((3, 5, 6), 1, False, 1), ((2, 3, 4, 5), -2, True, 3),
    ((9, 10), 0, True, 1)])
def test_layer_normalization_on_pixel(shape, axis, bias, n_out, rng):
    from engine import BackendType

    a = axis % len(shape)
    consts = {"scale": f32(rng, *shape[a:])}
    if bias:
        consts["b"] = f32(rng, *shape[a:])
    dtypes = [np.float32] * n_out
    check(BackendType.GPU_PIXEL, "LayerNormalization", {"x": f32(rng, *shape)}, consts,
          {"axis": axis, "epsilon": 1e-3}, n_out=n_out, rtol=1e-4, out_dtypes=dtypes)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 3, 5, 6), (3, 4, 3, 3), {}),
    ((2, 4, 4, 5), (4, 3, 3, 2), {"strides": [2, 3], "pads": [1, 0, 0, 1]}),
    ((1, 6, 5, 5), (6, 2, 3, 3), {"group": 2, "strides": [2, 2], "output_padding": [1, 1]}),
    ((1, 3, 4, 4), (3, 2, 2, 2), {"dilations": [2, 2], "auto_pad": "SAME_UPPER",
                                  "strides": [2, 2]}),
    ((2, 3, 7), (3, 5, 4), {"strides": [3], "pads": [1, 2]})])
def test_conv_transpose_on_pixel(xs, ws, attrs, rng):
    from engine import BackendType

    consts = {"w": f32(rng, *ws), "b": f32(rng, ws[1] * attrs.get("group", 1))}
    check(BackendType.GPU_PIXEL, "ConvTranspose", {"x": f32(rng, *xs)}, consts, attrs,
          rtol=1e-4)


def test_where_on_int64_values_on_compute(rng):
    from engine import BackendType

    cond = rng.random((3, 1, 5)) > 0.5
    x = rng.integers(-2**40, 2**40, (3, 4, 5)).astype(np.int64)
    y = np.array([-7, 2**35, 0, 9, -2**50], np.int64)
    check(BackendType.GPU_COMPUTE, "Where", {"x": x, "y": y}, {"c": cond},
          order=["c", "x", "y"])


@backends
def test_symbolic_dims_plan_native_and_run(backend, rng):
    """A causal-mask-like chain on an input with symbolic dims: planned before the sizes are
    known, then run natively on concrete ones."""
    from onnx import TensorProto, helper

    from tests.modelgen import model
    from tests.shape_ops_util import reference

    nodes = [helper.make_node("Trilu", ["x", "k"], ["t"], upper=0),
             helper.make_node("CumSum", ["t", "axis"], ["y"])]
    inits = [("k", np.array(-1, np.int64)), ("axis", np.array(-1, np.int64))]
    proto = model(nodes, [("x", TensorProto.FLOAT, ["b", "s", "s"])],
                  [("y", TensorProto.FLOAT, ["b", "s", "s"])], initializers=inits)
    feeds = {"x": f32(rng, 2, 7, 7)}
    got = run_native(backend, proto, feeds)[0]
    np.testing.assert_allclose(got, reference(proto, feeds)[0], rtol=1e-5, atol=1e-5)


@backends
@pytest.mark.parametrize("xshape,shape", [
    ((3, 1, 5), [2, 1, 4, 1]), ((1,), [3, 5]), ((4, 1), [1, 6]), ((2, 3), [3, 1, 1]),
    # an attention mask over heads and queries (broadcast along GPU_PIXEL's blocked axis)
    ((2, 1, 1, 7), [2, 6, 5, 7]), ((1, 1, 6), [3, 4, 6]), ((5,), [2, 3, 5])])
def test_expand_broadcasting(backend, xshape, shape, rng):
    check(backend, "Expand", {"x": f32(rng, *xshape)}, {"shape": np.array(shape, np.int64)})


@backends
@pytest.mark.parametrize("ashape,bshape", [((3, 7), (3, 7)), ((2, 5, 4), (4,))])
def test_mod_fmod_on_floats(backend, ashape, bshape, rng):
    b = f32(rng, *bshape)
    b[np.abs(b) < 0.1] = 0.5
    check(backend, "Mod", {"a": f32(rng, *ashape) * 5, "b": b}, attrs={"fmod": 1})


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_int32_signs_on_compute(fmod, rng):
    from engine import BackendType

    a = rng.integers(-50, 50, (4, 9)).astype(np.int32)
    b = rng.choice([-7, -3, 2, 5], (9,)).astype(np.int32)
    check(BackendType.GPU_COMPUTE, "Mod", {"a": a, "b": b}, attrs={"fmod": fmod})


@backends
def test_topk_indices_feed_gather(backend, rng):
    """Detector-style: TopK's indices (on GPU_PIXEL a texture of whole numbers) pick boxes."""
    from onnx import TensorProto, helper

    from tests.modelgen import model
    from tests.shape_ops_util import reference

    nodes = [helper.make_node("TopK", ["scores", "k"], ["v", "i"], axis=-1),
             helper.make_node("Gather", ["boxes", "i"], ["picked"], axis=0)]
    proto = model(nodes, [("scores", TensorProto.FLOAT, [37]),
                          ("boxes", TensorProto.FLOAT, [37, 4])],
                  [("picked", TensorProto.FLOAT, [5, 4]), ("i", TensorProto.INT64, [5])],
                  initializers=[("k", np.array([5], np.int64))])
    feeds = {"scores": f32(rng, 37), "boxes": f32(rng, 37, 4)}
    got = run_native(backend, proto, feeds)
    want = reference(proto, feeds)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("outputs", [["y", "", "inv"], ["y", "mean"]])
def test_layer_normalization_some_statistics_on_pixel(outputs, rng):
    from onnx import TensorProto, helper

    from engine import BackendType
    from tests.modelgen import model
    from tests.shape_ops_util import reference

    node = helper.make_node("LayerNormalization", ["x", "g"], outputs, axis=-1)
    stats = [(o, TensorProto.FLOAT, [3, 6, 1]) for o in outputs[1:] if o]
    proto = model([node], [("x", TensorProto.FLOAT, [3, 6, 10])],
                  [("y", TensorProto.FLOAT, [3, 6, 10])] + stats,
                  initializers=[("g", f32(rng, 10))])
    feeds = {"x": f32(rng, 3, 6, 10)}
    for g, w in zip(run_native(BackendType.GPU_PIXEL, proto, feeds), reference(proto, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@backends
def test_shape_of_a_gpu_tensor_waits_for_nothing(backend, rng):
    """Shape and Size of a tensor the GPU computed run on the CPU from its metadata: no
    readback, no wait for the GPU (a 'Sync' bar in the profile), outputs as onnxruntime's."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from engine import ModelLoader, Worker

    f = TensorProto.FLOAT
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"], start=1),
             helper.make_node("Size", ["r"], ["n"]),
             helper.make_node("Concat", ["minus_one", "s"], ["target"], axis=0),
             helper.make_node("Reshape", ["r", "target"], ["flat"]),
             helper.make_node("Cast", ["n"], ["nf"], to=f),
             helper.make_node("Mul", ["flat", "nf"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", f, ["b", 3, 5, 4])],
        [helper.make_tensor_value_info("y", f, [None, None, None, None])],
        [helper.make_tensor("minus_one", TensorProto.INT64, [1], [-1])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = f32(rng, 2, 3, 5, 4)
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with Worker(ModelLoader.from_proto(proto), backend) as worker:
        for _ in range(2):  # the recorded runs (later ones replay the recording)
            worker.schedule({"x": x})
            got = worker.peek_output("y").download_to_array()
            assert not [t.name for t in worker.last_profile.layers if t.op_type == "Sync"]
            np.testing.assert_allclose(got, want, rtol=1e-6)
