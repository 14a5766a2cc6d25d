"""The ONNX node conformance suite against committed per-backend baselines.

The suite runs once per backend (module-scoped). A case listed as passing in
``tests/baselines/conformance_<backend>.json`` that fails now is a regression and fails
the test (all of them are listed); cases that pass and are not in the baseline are
printed, so the baseline can be raised with ``scripts/update_baselines.py``. The CPU
always takes part; a GPU backend takes part once its baseline file exists.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from engine.conformance import _compare, run_conformance, to_value

BASELINES = Path(__file__).parent / "baselines"
GPU_BACKENDS = ("gpu-compute", "gpu-pixel")


def baseline_path(backend: str) -> Path:
    return BASELINES / f"conformance_{backend}.json"


def _backends() -> list[str]:
    return ["cpu"] + [b for b in GPU_BACKENDS if baseline_path(b).exists()]


_RESULTS: dict[str, dict] = {}


@pytest.fixture(scope="module")
def conformance():
    """Runs the suite at most once per backend for the whole module."""

    def get(backend: str) -> dict:
        if backend not in _RESULTS:
            _RESULTS[backend] = run_conformance(backend)
        return _RESULTS[backend]

    return get


@pytest.mark.parametrize("backend", _backends())
def test_no_regressions_against_baseline(backend, conformance, request):
    if backend != "cpu":
        request.getfixturevalue("require_gpu")
    path = baseline_path(backend)
    assert path.exists(), f"missing baseline {path}; run scripts/update_baselines.py {backend}"
    baseline = json.loads(path.read_text())
    result = conformance(backend)
    passing_now = set(result["passing"])
    regressions = sorted(set(baseline["passing"]) - passing_now)
    improved = sorted(passing_now - set(baseline["passing"]))
    print(f"\n{backend}: {result['passed']} of {result['total']} pass "
          f"(baseline {baseline['passed']} of {baseline['total']})")
    if improved:
        print(f"{len(improved)} newly passing (update the baseline): {', '.join(improved)}")
    if regressions:
        lines = [f"  {n}: {result['errors'].get(n, 'not run')}" for n in regressions]
        pytest.fail(f"{len(regressions)} {backend} conformance case(s) passed in the baseline "
                    "and fail now:\n" + "\n".join(lines), pytrace=False)
    # a GPU case that passed on the GPU itself must not start passing only by CPU fallback
    native_now = set(result["native"])
    print(f"{backend}: {len(native_now)} cases pass natively "
          f"(baseline {baseline.get('passed_natively', 'not recorded')})")
    lost = sorted(set(baseline.get("native", [])) - native_now)
    if lost:
        pytest.fail(f"{len(lost)} {backend} case(s) ran natively in the baseline and now need "
                    f"the CPU: {', '.join(lost[:40])}", pytrace=False)


@pytest.mark.parametrize("backend", _backends())
def test_conformance_meets_the_target_now(backend, conformance, request):
    """At least 1855 cases pass on every backend, measured in this run (not read from the
    committed baseline)."""
    if backend != "cpu":
        request.getfixturevalue("require_gpu")
    assert conformance(backend)["passed"] >= 1855


# -- the comparison itself must be able to fail ------------------------------------------
def test_compare_rejects_wrong_values_shapes_and_dtypes(rng):
    e = rng.standard_normal((3, 4)).astype(np.float32)
    _compare(e, e.copy(), 1e-3, 1e-7, "same")
    with pytest.raises(AssertionError):
        _compare(e, e + 1e-2, 1e-3, 1e-7, "values")
    with pytest.raises(AssertionError, match="shape"):
        _compare(e, e.reshape(4, 3), 1e-3, 1e-7, "shape")
    with pytest.raises(AssertionError, match="dtype"):
        _compare(e, e.astype(np.float64), 1e-3, 1e-7, "dtype")
    b = e > 0
    with pytest.raises(AssertionError):
        _compare(b, ~b, 0, 0, "bool")
    with pytest.raises(AssertionError, match="sequence"):
        _compare([e, e], [e], 1e-3, 1e-7, "seq")
    with pytest.raises(AssertionError, match="optional"):
        _compare(None, e, 1e-3, 1e-7, "opt")
    s = np.array(["a", "b"], dtype=object)
    with pytest.raises(AssertionError):
        _compare(s, np.array(["a", "c"], dtype=object), 0, 0, "str")


def test_protobuf_data_becomes_arrays(rng):
    import ml_dtypes

    x = rng.standard_normal((2, 3)).astype(np.float32)
    assert np.array_equal(to_value(numpy_helper.from_array(x)), x)
    f8 = x.astype(ml_dtypes.float8_e4m3fn)
    t = onnx.helper.make_tensor("t", onnx.TensorProto.FLOAT8E4M3FN, f8.shape,
                                f8.view(np.uint8).reshape(-1).tobytes(), raw=True)
    back = to_value(t)
    assert back.dtype == f8.dtype
    assert np.array_equal(back.astype(np.float32), f8.astype(np.float32))
    seq = numpy_helper.from_list([x, x + 1])
    got = to_value(seq)
    assert isinstance(got, list) and len(got) == 2 and np.array_equal(got[1], x + 1)
    opt = numpy_helper.from_optional(None, name="o", dtype=onnx.OptionalProto.TENSOR)
    assert to_value(opt) is None
