"""The graph layout (pure NumPy) and the headless mode of the workbench."""

from __future__ import annotations

import io

import numpy as np
import onnx
from onnx import TensorProto, helper
from test_workbench_helpers import block_model

from engine import ModelLoader
from workbench.headless import run_headless
from workbench.layout import KIND_LAYER, compute_layout, count_crossings, graph_of
from workbench.main_window import DEMO_MODEL


def _check_invariants(layout, model):
    names, kinds, _, edges = graph_of(model)
    assert layout.names == names
    # every edge points down: the producer's rank is above the consumer's
    for (a, b), e in zip(edges, layout.edges):
        assert layout.rank[a] < layout.rank[b]
        assert e.points[0, 1] < e.points[-1, 1]
    # no two boxes of one rank overlap
    for r in np.unique(layout.rank):
        idx = np.flatnonzero(layout.rank == r)
        order = idx[np.argsort(layout.x[idx])]
        right = layout.x[order] + layout.w[order] / 2
        left = layout.x[order] - layout.w[order] / 2
        assert np.all(left[1:] >= right[:-1] - 1e-6)


def test_layout_of_residual_chain(tmp_path):
    path = str(tmp_path / "blocks.onnx")
    block_model(path, 30)
    model = ModelLoader.load(path)
    layout = compute_layout(model)
    _check_invariants(layout, model)
    assert count_crossings(layout) == 0
    assert (layout.kinds == KIND_LAYER).sum() == len(model.layers)
    # a chain stays narrow: residual edges do not push the graph sideways
    left, _, right, _ = layout.bounds
    assert right - left < 800


def test_crossing_reduction_untangles_a_crossed_graph(tmp_path):
    # inputs a, b feed layers in an order that crosses unless the layout reorders them
    x = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in "abcd"]
    nodes = [helper.make_node("Relu", [n], [f"r{n}"], name=f"relu_{n}") for n in "abcd"]
    pairs = [("ra", "rd"), ("rb", "rc"), ("rc", "ra"), ("rd", "rb")]
    nodes += [helper.make_node("Add", [p, q], [f"s{i}"], name=f"add{i}")
              for i, (p, q) in enumerate(pairs)]
    nodes += [helper.make_node("Sum", [f"s{i}" for i in range(4)], ["y"], name="sum")]
    graph = helper.make_graph(nodes, "crossed", x,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = str(tmp_path / "crossed.onnx")
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    onnx.save(proto, path)
    model = ModelLoader.load(path)
    unswept = compute_layout(model, sweeps=0)
    swept = compute_layout(model)
    _check_invariants(swept, model)
    assert count_crossings(swept) < count_crossings(unswept)


def test_layout_of_thousands_of_layers(tmp_path):
    path = str(tmp_path / "big.onnx")
    block_model(path, 600, shape=(1, 2, 2, 2))
    model = ModelLoader.load(path)
    layout = compute_layout(model)
    _check_invariants(layout, model)
    assert len(layout.names) >= 3000


def test_headless_runs_the_demo_and_prints_timings():
    out = io.StringIO()
    assert run_headless(DEMO_MODEL, repeat=2, out=out) == 0
    text = out.getvalue()
    assert "feeding sample samples/digit_3.png" in text
    assert "== CPU: median" in text and "conv" in text.lower()
    assert "argmax 3" in text
