"""The project's model families (``engine.families``) against onnxruntime.

Every output is compared on fresh random inputs at the family's bench shapes and at its
smaller test shapes: relative L2 error <= 1e-3, or within twice onnxruntime's own spread
between no graph optimisation and full optimisation when that spread is larger (outputs
near zero make a relative error meaningless below what onnxruntime itself can promise).
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from engine import ModelLoader, Worker, families

ort = pytest.importorskip("onnxruntime")

TOL = 1e-3
NAMES = list(families.FAMILIES)


def _rel_l2(got: np.ndarray, want: np.ndarray) -> float:
    diff = np.linalg.norm(got.astype(np.float64) - want.astype(np.float64))
    norm = np.linalg.norm(want.astype(np.float64))
    return float(diff / norm) if norm else float(diff)


def _onnxruntime(path: str, feeds: dict, level) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = level
    opts.log_severity_level = 3
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check_family(name: str, which: str, backend: str, rng: np.random.Generator) -> None:
    """Run family ``name`` on ``backend`` at its ``which`` shapes and compare every output."""
    family = families.get(name)
    path = families.path(name)
    feeds = family.inputs(which, rng)
    model = ModelLoader.load(path)
    with Worker(model, backend) as worker:
        compare_run(name, which, backend, worker, path, feeds)


def other_shapes(model, family, feeds, rng) -> dict:
    """Inputs like ``feeds`` with the last symbolic dim of the first input changed (a
    sequence length or an image width: +32, a multiple of every family's stride; a batch
    when that is the only symbol)."""
    first = model.inputs[0].shape or ()
    axis = max(i for i, d in enumerate(first) if isinstance(d, str))
    symbol = first[axis]
    shapes = {}
    for spec in model.inputs:
        shape = list(feeds[spec.name].shape)
        for i, dim in enumerate(spec.shape or ()):
            if dim == symbol:
                shape[i] = (1 if shape[i] > 1 else 2) if i == 0 else shape[i] + 32
        shapes[spec.name] = tuple(shape)
    return family.make_inputs(shapes, rng)


def compare_run(name, which, backend, worker, path, feeds) -> None:
    """Schedule ``feeds`` on ``worker`` and compare every output with onnxruntime."""
    model = worker.model
    worker.schedule(feeds)
    ours = [worker.peek_output(o.name).download_to_array() for o in model.outputs]
    levels = ort.GraphOptimizationLevel
    want = _onnxruntime(path, feeds, levels.ORT_ENABLE_ALL)
    plain = _onnxruntime(path, feeds, levels.ORT_DISABLE_ALL)
    for spec, got, ref, ref0 in zip(model.outputs, ours, want, plain):
        assert got.shape == ref.shape and got.dtype == ref.dtype, (
            f"{name} {spec.name!r}: {got.dtype}{list(got.shape)}, "
            f"onnxruntime {ref.dtype}{list(ref.shape)}")
        tol = max(TOL, 2 * _rel_l2(ref0, ref))
        err = _rel_l2(got, ref)
        assert err <= tol, (f"{name} ({which} shapes) on {backend}, output {spec.name!r}: "
                            f"relative L2 error {err:.2e} > {tol:.2e}")


@pytest.mark.parametrize("which", ["test", "bench"])
@pytest.mark.parametrize("name", NAMES)
def test_family_cpu_matches_onnxruntime(name, which, rng):
    check_family(name, which, "cpu", rng)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["gpu-compute", "gpu-pixel"])
@pytest.mark.parametrize("name", NAMES)
def test_family_gpu_matches_onnxruntime(name, backend, require_gpu, rng):
    """Two input signatures in one worker: the test shapes, then other ones."""
    family = families.get(name)
    path = families.path(name)
    model = ModelLoader.load(path)
    feeds = family.inputs("test", rng)
    with Worker(model, backend) as worker:
        compare_run(name, "test", backend, worker, path, feeds)
        compare_run(name, "other", backend, worker, path,
                    other_shapes(model, family, feeds, rng))
        assert len(worker._plans) >= 3  # declared shapes + both signatures


@pytest.mark.parametrize("name", NAMES)
def test_family_is_exporter_style(name):
    """Valid ONNX with at least one symbolic input dim, and the two shape sets differ."""
    family = families.get(name)
    proto = onnx.load(families.path(name))
    onnx.checker.check_model(proto, full_check=True)
    dims = [d for i in proto.graph.input for d in i.type.tensor_type.shape.dim]
    assert any(not d.HasField("dim_value") for d in dims)
    assert family.bench_shapes != family.test_shapes
    assert set(family.inputs("test", 1)) == {i.name for i in proto.graph.input}


def test_family_build_is_deterministic():
    a = families.get("audio_streaming").build(3)
    b = families.get("audio_streaming").build(3)
    assert a.SerializeToString() == b.SerializeToString()


def test_token_inputs_are_realistic():
    feeds = families.get("bert_encoder").inputs("test", 5)
    ids, mask = feeds["input_ids"], feeds["attention_mask"]
    assert ids.dtype == np.int64 and 0 <= ids.min() and ids.max() < 1000
    assert mask.min() == 0 and mask.max() == 1 and mask[:, 0].all()


def test_bench_suite_families_parses(tmp_path, capsys):
    from engine.cli import main

    out = tmp_path / "bench.json"
    rc = main(["bench", "--suite", "families:audio_streaming", "--backend", "cpu",
               "--repeat", "1", "--compare", "onnxruntime", "--json", str(out)])
    assert rc == 0
    rows = json.loads(out.read_text())["results"]
    assert {r["backend"] for r in rows} == {"cpu", "onnxruntime"}
    assert all(r["model"] == "audio_streaming" and r["runs"] == 1 for r in rows)
    assert all(r["gflops"] > 0 and r["peak_mb"] > 0 for r in rows), rows
    assert "audio_streaming" in capsys.readouterr().out


def test_bench_unknown_suite_is_an_error(capsys):
    from engine.cli import main

    assert main(["bench", "--suite", "families:nope", "--repeat", "1"]) == 2
    assert "nope" in capsys.readouterr().err
