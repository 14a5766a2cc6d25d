"""The command line's rough edges: random inputs, --seed, strict JSON, exit statuses, --help,
aligned tables, XDG_RUNTIME_DIR and Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from engine import ModelLoader, cli, cli_util
from engine.bench import format_table
from engine.errors import EngineError
from engine.inputs import random_feeds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=ROOT)


def _save(tmp_path, nodes, inputs, outputs, name="m.onnx"):
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs])
    path = tmp_path / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def _no_traceback(proc):
    assert "Traceback" not in proc.stderr, proc.stderr


def test_random_inputs_in_their_dtype_and_only_when_not_given(tmp_path, rng):
    inputs = [("a", TensorProto.FLOAT16, ["N", 3]), ("b", TensorProto.INT32, [4]),
              ("c", TensorProto.BOOL, [2, 2]), ("d", TensorProto.FLOAT, [10**6] * 3)]
    path = _save(tmp_path, [helper.make_node("Identity", [n], [n + "_out"]) for n in "abcd"],
                 inputs, [(n + "_out", t, s) for n, t, s in inputs])
    model = ModelLoader.load(path)
    seed = int(rng.integers(0, 2**32))
    feeds = random_feeds(model, seed=seed, skip={"d"})
    assert {k: (v.dtype, v.shape) for k, v in feeds.items()} == {
        "a": (np.float16, (1, 3)), "b": (np.int32, (4,)), "c": (np.bool_, (2, 2))}
    np.testing.assert_array_equal(random_feeds(model, seed=seed, skip={"d"})["a"],
                                  feeds["a"])
    with pytest.raises(EngineError, match=r"input 'd' of shape \[1000000, 1000000, "
                                          r"1000000\] \(float32\) would need 4000000000\.0 GB"):
        random_feeds(model, seed=seed)


def test_absurd_input_shape_is_a_message_not_a_memory_error(tmp_path):
    path = _save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])],
                 [("x", TensorProto.FLOAT, [100000, 100000, 10])],
                 [("y", TensorProto.FLOAT, [100000, 100000, 10])])
    proc = _cli("run", path)
    assert proc.returncode == 2
    assert "input 'x'" in proc.stderr and "400.0 GB" in proc.stderr and "--input" in proc.stderr
    _no_traceback(proc)


@pytest.mark.parametrize("seed", ["-1", "2**40", "abc", str(2**32)])
def test_bad_seed_is_a_usage_error(seed, tmp_path):
    path = _save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])],
                 [("x", TensorProto.FLOAT, [3])], [("y", TensorProto.FLOAT, [3])])
    proc = _cli("run", path, "--seed", seed)
    assert proc.returncode == 2 and "--seed" in proc.stderr
    _no_traceback(proc)


def test_json_is_strict_nan_and_inf_become_null(tmp_path, rng):
    path = _save(tmp_path, [helper.make_node("Log", ["x"], ["y"]),
                            helper.make_node("Div", ["x", "z"], ["q"])],
                 [("x", TensorProto.FLOAT, [4]), ("z", TensorProto.FLOAT, [4])],
                 [("y", TensorProto.FLOAT, [4]), ("q", TensorProto.FLOAT, [4])])
    x = -rng.random(4).astype(np.float32) - 0.5  # log of a negative: NaN
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "z.npy", np.zeros(4, np.float32))  # x / 0: -inf
    proc = _cli("run", path, "--input", f"x={tmp_path / 'x.npy'}", "--input",
                f"z={tmp_path / 'z.npy'}", "--json")
    assert proc.returncode == 0, proc.stderr

    def refuse(token):
        raise AssertionError(f"not JSON: {token}")

    out = json.loads(proc.stdout, parse_constant=refuse)
    assert out["outputs"]["y"]["mean"] is None and out["outputs"]["q"]["mean"] is None
    assert cli_util.dumps({"a": [float("nan"), np.float32("inf"), 1.5]}) == \
        '{"a": [null, null, 1.5]}'


def _fake_conformance(monkeypatch, failed):
    import engine.conformance

    result = {"backend": "cpu", "total": 3, "passed": 3 - len(failed), "failed": failed,
              "passing": [n for n in ("test_a", "test_b", "test_c") if n not in failed]}
    monkeypatch.setattr(engine.conformance, "run_conformance", lambda *a, **k: result)


def test_conformance_exit_status_and_baseline(monkeypatch, tmp_path, capsys):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"passing": ["test_a", "test_b"]}))
    _fake_conformance(monkeypatch, [])
    assert cli.main(["conformance"]) == 0
    _fake_conformance(monkeypatch, ["test_c"])
    assert cli.main(["conformance"]) == 1
    assert "1 case(s) failed: test_c" in capsys.readouterr().err
    assert cli.main(["conformance", "--baseline", str(baseline)]) == 0  # a known failure
    _fake_conformance(monkeypatch, ["test_b", "test_c"])
    assert cli.main(["conformance", "--baseline", str(baseline)]) == 1
    assert "pass in the baseline now fail: test_b" in capsys.readouterr().err


def test_conformance_run_with_a_failing_case_exits_1(tmp_path):
    """A real (filtered) run: Bernoulli's expected outputs are random draws, never passing."""
    proc = _cli("conformance", "--filter", "test_bernoulli_seed", "--json",
                str(tmp_path / "r.json"))
    assert proc.returncode == 1 and "test_bernoulli_seed" in proc.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["failed"] and result["passed"] == 0


def _help(capsys, *args) -> str:
    with pytest.raises(SystemExit) as stop:
        cli.main([*args, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_help_lists_options_and_backends(capsys):
    top = _help(capsys)
    for word in ("cpu", "gpu-compute", "gpu-pixel", "inspect", "run", "bench", "ops",
                 "conformance", "--input", "--seed", "--baseline"):
        assert word in top, word
    for command, options in {"run": ["--backend", "--input", "--repeat", "--seed", "--profile",
                                      "--json"],
                             "inspect": ["--backend"], "bench": ["--backend", "--compare"],
                             "conformance": ["--backend", "--filter", "--baseline"]}.items():
        text = _help(capsys, command)
        assert "gpu-compute" in text and "gpu-pixel" in text, command
        for option in options:
            assert option in text, (command, option)


def test_ops_and_bench_columns_line_up():
    lines = _cli("ops").stdout.splitlines()
    header, rows = lines[0], [ln for ln in lines[1:-1] if ln]
    starts = [header.index(name) for name in ("CPU", "GPU_COMPUTE", "GPU_PIXEL")]
    for row in rows:
        for s in starts:
            assert row[s - 2:s] == "  " and row[s] in "y-", row
    rows = [{"model": m, "backend": b, "median_ms": t, "min_ms": t / 2, "runs": 10}
            for m in ("squeezenet", "a_much_longer_model_name") for b, t in
            (("cpu", 1.5), ("gpu-compute", 123.25), ("onnxruntime", 1.0))]
    table = format_table(rows).splitlines()[:7]
    end = table[0].index("median ms") + len("median ms")
    assert all(line[end - 1].isdigit() or line[end - 1] == "s" for line in table), table
    assert len({line.index(line.split()[1]) for line in table[1:]}) == 1  # backend column


def test_inspect_reports_load_time_and_peak_memory(tmp_path):
    path = _save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])],
                 [("x", TensorProto.FLOAT, [3])], [("y", TensorProto.FLOAT, [3])])
    out = _cli("inspect", path).stdout
    assert "load: " in out and "peak memory" in out and "MiB" in out


def test_unset_xdg_runtime_dir_prints_no_stray_lines(tmp_path):
    path = _save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])],
                 [("x", TensorProto.FLOAT, [3])], [("y", TensorProto.FLOAT, [3])])
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    proc = _cli("run", path, "--backend", "gpu-compute", env=env)
    assert "XDG_RUNTIME_DIR" not in proc.stderr, proc.stderr
    _no_traceback(proc)


def test_ctrl_c_exits_130_with_one_line(tmp_path):
    path = _save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])],
                 [("x", TensorProto.FLOAT, [64, 64])], [("y", TensorProto.FLOAT, [64, 64])])
    proc = subprocess.Popen([sys.executable, "-m", "engine", "run", path, "--repeat",
                             str(10**9)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(6)  # imported and running
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, err


def test_bench_ceiling_column_is_a_share_of_the_measured_matmul_ceiling(tmp_path, require_gpu):
    path = _save(tmp_path, [helper.make_node("MatMul", ["a", "b"], ["y"])],
                 [("a", TensorProto.FLOAT, [96, 64]), ("b", TensorProto.FLOAT, [64, 80])],
                 [("y", TensorProto.FLOAT, [96, 80])])
    proc = _cli("bench", path, "--backend", "gpu-compute", "--repeat", "2", "--ceiling")
    _no_traceback(proc)
    out = proc.stdout
    best = float(out.split("matmul ceiling of the adapter: ")[1].split()[0])
    row = [ln for ln in out.splitlines() if ln.split()[1:2] == ["gpu-compute"]][-1]  # table
    gflops = float(row.split()[5])  # model, backend, median, min, runs, GFLOP/s, ...
    ceiling, pct = float(row.split()[-2]), float(row.split()[-1].rstrip("%"))
    # one model: its ceiling is the better of the measurements before and after it
    assert ceiling > 0 and abs(ceiling - best) <= 0.01, out
    assert abs(pct - 100 * gflops / ceiling) <= 1.0 + 0.01 * pct, out
