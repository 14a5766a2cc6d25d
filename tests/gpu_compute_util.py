"""Helpers of the GPU_COMPUTE tests: one-node models, and running them on two backends."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from engine import ModelLoader, Worker
from engine.backends import BackendType


class Const:
    """Marks a node argument that becomes an initializer (a CPU-known constant)."""

    def __init__(self, value):
        self.value = np.asarray(value)


def one_node(op: str, args: list, attrs: dict | None = None, opset: int = 17, n_out: int = 1):
    """(model, feeds) of a one-``op`` model. ``args``: arrays (graph inputs), ``Const`` values
    (initializers) or None (omitted optional inputs), in the node's input order."""
    names, graph_inputs, inits, feeds = [], [], [], {}
    for k, a in enumerate(args):
        if a is None:
            names.append("")
            continue
        name = f"in{k}"
        names.append(name)
        if isinstance(a, Const):
            inits.append(numpy_helper.from_array(a.value, name))
        else:
            feeds[name] = a
            graph_inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
    outs = [f"out{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph = helper.make_graph([node], f"one_{op}", graph_inputs,
                              [onnx.ValueInfoProto(name=o) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=8)
    return onnx.shape_inference.infer_shapes(model), feeds


def run_both(proto: onnx.ModelProto, feeds: dict, expect_native: bool = True):
    """Outputs on GPU_COMPUTE and on the CPU backend; checks the GPU ran the layers natively."""
    results = {}
    for kind in (BackendType.GPU_COMPUTE, BackendType.CPU):
        model = ModelLoader.from_proto(proto)
        with Worker(model, kind) as worker:
            if kind is BackendType.GPU_COMPUTE and expect_native:
                fallbacks = {n: p.reason for n, p in worker.placement.items()
                             if p.backend is not BackendType.GPU_COMPUTE}
                assert not fallbacks, f"expected every layer on the GPU: {fallbacks}"
            worker.schedule(feeds)
            results[kind] = [worker.peek_output(o.name).download_to_array()
                             for o in model.outputs]
            if kind is BackendType.GPU_COMPUTE and expect_native:
                fallbacks = {n: p.reason for n, p in worker.placement.items()
                             if p.backend is not BackendType.GPU_COMPUTE}
                assert not fallbacks, f"a layer fell back at schedule time: {fallbacks}"
    return results[BackendType.GPU_COMPUTE], results[BackendType.CPU]


def assert_close(gpu, cpu, rtol=1e-4, atol=1e-5):
    assert len(gpu) == len(cpu)
    for g, c in zip(gpu, cpu):
        g, c = np.asarray(g), np.asarray(c)
        assert g.shape == c.shape, f"shape {g.shape} != {c.shape}"
        assert g.dtype == c.dtype, f"dtype {g.dtype} != {c.dtype}"
        if c.dtype.kind in "fc":
            np.testing.assert_allclose(g, c, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, c)


def dispatching_layers(worker) -> list[str]:
    """The layers that record GPU_COMPUTE work in the worker's next runs (the planning walk
    runs the kernels too, recording nothing: not counted)."""
    backend, seen = worker._backend, []
    original = backend.dispatch

    def spy(*args, **kwargs):
        if backend._dry is None:
            seen.append(backend._layer)
        return original(*args, **kwargs)

    backend.dispatch = spy
    return seen
