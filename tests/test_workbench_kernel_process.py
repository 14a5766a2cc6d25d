"""A model's CPU kernels compile in a helper process when the kernel cache lacks them
(``workbench.kernel_process``), and the cache marks which op types a model run compiled
(``kernel_cache.uncompiled`` / ``mark_compiled``)."""

from __future__ import annotations

import os
import subprocess

import numpy as np
from onnx import TensorProto, helper

from engine import ModelLoader
from engine.backends.cpu import kernel_cache
from workbench import kernel_process


def test_marks_name_the_compiled_op_types(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setitem(kernel_cache._active, "folder", str(tmp_path))
    assert kernel_cache.uncompiled({"Conv", "Add", "com.microsoft/Odd:Op"}) == \
        {"Conv", "Add", "com.microsoft/Odd:Op"}
    kernel_cache.mark_compiled({"Conv", "com.microsoft/Odd:Op"})
    assert kernel_cache.uncompiled({"Conv", "Add", "com.microsoft/Odd:Op"}) == {"Add"}
    # per version of the sources and of Numba
    folder = kernel_cache.marks_folder()
    assert folder.startswith(str(tmp_path)) and kernel_cache._active["digest"] in folder
    monkeypatch.setitem(kernel_cache._active, "digest", "another")
    assert kernel_cache.uncompiled({"Conv"}) == {"Conv"}


def test_without_a_cache_folder_nothing_is_compiled_ahead(monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setitem(kernel_cache._active, "folder", None)
    assert kernel_cache.uncompiled({"Conv"}) == set()
    kernel_cache.mark_compiled({"Conv"})  # (nowhere to write: nothing happens)


def _softmax_model(path: str) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 37])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 37])
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("Softmax", ["sq"], ["y"], axis=-1)]
    proto = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def test_helper_compiles_into_the_shared_cache_and_marks_the_model(tmp_path, monkeypatch):
    cache = tmp_path / "numba"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(cache))  # read by the helper and by the marks
    path = str(tmp_path / "softmax.onnx")
    _softmax_model(path)
    model = ModelLoader.load(path)
    assert kernel_process.needs_helper(model)
    steps = []
    assert kernel_process.compile_ahead(path, model, lambda text, f: steps.append(text))
    assert steps and "helper process" in steps[0]
    # the helper's Numba compiled the softmax kernels into the cache this process reads
    compiled = [n for _, _, names in os.walk(cache) for n in names if n.endswith(".nbi")]
    assert any("softmax" in n for n in compiled), compiled
    assert not kernel_process.needs_helper(model)

    def no_process(*args, **kwargs):
        raise AssertionError("no helper should start for a marked model")

    monkeypatch.setattr(subprocess, "run", no_process)
    assert not kernel_process.compile_ahead(path, model)
    # and the model runs here from the cache, matching NumPy
    x = np.random.default_rng(3).standard_normal((4, 37)).astype(np.float32)
    from engine import Worker

    with Worker(model, "cpu") as worker:
        got = worker.schedule({"x": x}).peek_output("y").download_to_array()
    e = np.exp(x.astype(np.float64) ** 2 - (x.astype(np.float64) ** 2).max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_no_helper_without_a_model_file(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    path = str(tmp_path / "softmax.onnx")
    _softmax_model(path)
    model = ModelLoader.load(path)
    assert not kernel_process.compile_ahead(None, model)
    assert not kernel_process.compile_ahead(str(tmp_path / "gone.onnx"), model)
    assert kernel_process.needs_helper(model)
