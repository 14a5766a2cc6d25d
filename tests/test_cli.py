"""The command line contract in the README: ops table, inspect, run --json."""

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from engine.backends import kernel_tables


def _cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True,
                          text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture
def small_model(tmp_path, rng):
    w = rng.standard_normal((4, 3)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [onnx.numpy_helper.from_array(w, "w")])
    path = tmp_path / "small.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, w


def test_ops_markdown_is_generated_from_registrations():
    out = _cli("ops", "--markdown").stdout.splitlines()
    assert out[0] == "| Operator | CPU | GPU_COMPUTE | GPU_PIXEL |"
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:5]]
            for line in out[2:] if line.startswith("| ")}
    tables = kernel_tables()
    assert set(rows) == set().union(*(t.op_types() for t in tables.values()))
    for op, cells in rows.items():
        for cell, table in zip(cells, tables.values()):
            assert cell == ("yes" if op in table.op_types() else "fallback"), op


def test_inspect_lists_inputs_and_layers(small_model):
    path, _ = small_model
    out = _cli("inspect", str(path), "--backend", "cpu").stdout
    assert "x: float32[N, 4]" in out
    assert "MatMul" in out and "Relu" in out


def test_run_json_with_input_file(small_model, tmp_path, rng):
    path, w = small_model
    x = rng.standard_normal((5, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = json.loads(_cli("run", str(path), "--backend", "cpu", "--input",
                          f"x={tmp_path / 'x.npy'}", "--json").stdout)
    expected = np.maximum(x.astype(np.float64) @ w.astype(np.float64), 0)
    assert out["outputs"]["y"]["shape"] == [5, 3]
    assert out["outputs"]["y"]["mean"] == pytest.approx(expected.mean(), rel=1e-4)


def test_errors_are_messages_not_tracebacks(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a model")
    proc = _cli("run", str(bad), "--backend", "cpu", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
