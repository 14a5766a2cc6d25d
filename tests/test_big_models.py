"""Models with big external weights: mapped from their files, never serialised whole."""

import mmap
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from engine import BackendType, ModelLoader, Worker

ort = pytest.importorskip("onnxruntime")


def _external(name: str, shape, location: str, offset: int = 0) -> TensorProto:
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.extend(shape)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)),
                       ("length", str(int(np.prod(shape)) * 4))):
        e = t.external_data.add()
        e.key, e.value = key, value
    return t


def _save(folder, nodes, inputs, outputs, inits) -> str:
    graph = helper.make_graph(nodes, "big", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = os.path.join(folder, "big.onnx")
    onnx.save(model, path)
    return path


def _mapped(arr: np.ndarray) -> bool:
    base = arr
    while base is not None and not isinstance(base, mmap.mmap | np.memmap):
        base = getattr(base, "base", None) if isinstance(base, np.ndarray) else getattr(
            base, "obj", None)
    return base is not None


def _ort(path, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_64mb_external_weight_is_mapped_and_matches_onnxruntime(tmp_path, rng, monkeypatch):
    w = rng.standard_normal((4096, 4096), dtype=np.float32)  # 64 MiB, after a 4 KiB header
    with open(tmp_path / "w.bin", "wb") as f:
        f.write(rng.bytes(4096))
        f.write(w.tobytes())
    b = rng.standard_normal(4096).astype(np.float32)
    path = _save(str(tmp_path),
                 [helper.make_node("MatMul", ["x", "w"], ["h"]),
                  helper.make_node("Add", ["h", "b"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4096])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4096])],
                 [_external("w", w.shape, "w.bin", offset=4096),
                  onnx.numpy_helper.from_array(b, "b")])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # external files are found beside the model, not the cwd
    model = ModelLoader.load(path)
    weight = model.constants["w"]
    assert _mapped(weight), type(weight.base)
    np.testing.assert_array_equal(weight, w)
    x = rng.standard_normal((2, 4096), dtype=np.float32)
    with Worker(model, BackendType.CPU) as worker:
        worker.schedule({"x": x})
        got = worker.peek_output().download_to_array()
    (want,) = _ort(path, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_weights_past_2gb_load_without_serialising_the_proto(tmp_path, rng):
    """A 2.28 GB embedding in a sparse file: the rows read are random, the rest zeros."""
    rows, dim = 139264, 4096
    picked = rng.choice(rows, 6, replace=False)
    table = rng.standard_normal((len(picked), dim), dtype=np.float32)
    with open(tmp_path / "emb.bin", "wb") as f:
        f.truncate(rows * dim * 4)  # sparse: no disk space, no memory
        for r, values in zip(picked, table):
            f.seek(int(r) * dim * 4)
            f.write(values.tobytes())
    path = _save(str(tmp_path), [helper.make_node("Gather", ["emb", "ids"], ["y"], axis=0)],
                 [helper.make_tensor_value_info("ids", TensorProto.INT64, [8])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, dim])],
                 [_external("emb", (rows, dim), "emb.bin")])
    model = ModelLoader.load(path)
    assert model.constants["emb"].nbytes > 2**31 and _mapped(model.constants["emb"])
    ids = np.concatenate([picked, rng.integers(0, rows, 2)]).astype(np.int64)
    with Worker(model, BackendType.CPU) as worker:
        worker.schedule({"ids": ids})
        got = worker.peek_output().download_to_array()
    (want,) = _ort(path, {"ids": ids})
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[:6], table)


def test_in_memory_proto_is_not_changed_by_loading(rng):
    nodes = [helper.make_node("Relu", ["h"], ["y"]), helper.make_node("Neg", ["x"], ["h"])]
    graph = helper.make_graph(nodes, "unsorted",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    before = proto.SerializeToString()
    model = ModelLoader.from_proto(proto)
    assert proto.SerializeToString() == before
    x = rng.standard_normal(3).astype(np.float32)
    with Worker(model, BackendType.CPU) as worker:
        worker.schedule(x)
        np.testing.assert_array_equal(worker.peek_output().download_to_array(),
                                      np.maximum(-x, 0))
