"""The ONNX node conformance suite shipped in the onnx package, run through a Worker.

Each case is a one-node model with input/output protobufs; a case passes when every
output matches within the case's own rtol/atol. The ONNX package only supplies the
data: results are computed by the engine.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import onnx

from engine.backends import BackendType


@dataclass
class Case:
    """One node test: a model and its (inputs, expected outputs) data sets."""

    name: str
    model: onnx.ModelProto
    data_sets: list
    rtol: float
    atol: float


def node_cases() -> list[Case]:
    """All node test cases of the installed onnx package (built from its case generators)."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        tests = load_model_tests(kind="node")
    cases = [Case(t.name, t.model, list(t.data_sets or []), float(t.rtol), float(t.atol))
             for t in tests if t.model is not None]
    return sorted(cases, key=lambda c: c.name)


def to_value(v):
    """A data-set entry as the engine sees values: protobufs become arrays/lists/None."""
    from onnx import numpy_helper

    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, onnx.SequenceProto):
        return [to_value(x) for x in numpy_helper.to_list(v)]
    if isinstance(v, onnx.OptionalProto):
        fields = ("tensor_value", "sparse_tensor_value", "sequence_value", "map_value",
                  "optional_value")
        if not any(v.HasField(f) for f in fields):
            return None  # an empty optional
        return to_value(numpy_helper.to_optional(v))
    if isinstance(v, list):
        return [to_value(x) for x in v]
    if isinstance(v, np.generic):
        return np.asarray(v)
    return v


def _compare(expected, actual, rtol: float, atol: float, where: str) -> None:
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            raise AssertionError(f"{where}: expected a sequence of {len(expected)}, got "
                                 f"{type(actual).__name__}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            _compare(e, a, rtol, atol, f"{where}[{i}]")
        return
    if expected is None:
        if actual is not None:
            raise AssertionError(f"{where}: expected an empty optional")
        return
    actual = np.asarray(actual)
    if actual.shape != expected.shape:
        raise AssertionError(f"{where}: shape {list(actual.shape)} != {list(expected.shape)}")
    if expected.dtype.kind in "OUS":
        if actual.dtype.kind not in "OUS":
            raise AssertionError(f"{where}: expected strings, got {actual.dtype}")
        if not np.array_equal(actual.astype(object), expected.astype(object)):
            raise AssertionError(f"{where}: values differ")
        return
    if actual.dtype != expected.dtype:
        raise AssertionError(f"{where}: dtype {actual.dtype} != {expected.dtype}")
    if expected.dtype.kind == "b":
        if not np.array_equal(actual, expected):
            raise AssertionError(f"{where}: values differ")
        return
    e = expected.astype(np.float64) if expected.dtype.kind in "iub" else expected
    a = actual.astype(np.float64) if actual.dtype.kind in "iub" else actual
    if e.dtype.kind == "V" or (e.dtype.kind == "f" and e.dtype.itemsize < 4):
        # float16/bfloat16/float8/int4 (ml_dtypes): compare the values they stand for
        e, a = e.astype(np.float32), a.astype(np.float32)
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=where)


def run_case(case: Case, backend: BackendType | str = BackendType.CPU) -> bool:
    """Run one case; raises (AssertionError or an EngineError) if it does not pass.

    Returns True when the backend ran every layer itself (no CPU fallback; layers that
    are CPU-forced by design do not count against it)."""
    from engine import ModelLoader, Worker

    proto = case.model
    model = ModelLoader.from_proto(proto)
    initializers = {i.name for i in proto.graph.initializer}
    input_names = [i.name for i in proto.graph.input if i.name not in initializers]
    model_inputs = {s.name for s in model.inputs}
    out_names = [o.name for o in proto.graph.output]
    native = True
    with Worker(model, backend) as worker:
        for inputs, expected_outputs in case.data_sets:
            inputs = [to_value(v) for v in inputs]
            expected_outputs = [to_value(v) for v in expected_outputs]
            feeds = {n: v for n, v in zip(input_names, inputs) if n in model_inputs}
            worker.schedule(feeds)
            for name, expected in zip(out_names, expected_outputs):
                actual = worker.peek_output(name).download_to_array()
                _compare(expected, actual, case.rtol, case.atol, f"output {name!r}")
            native = native and not any(
                p.is_fallback or p.is_user_choice for p in worker.placement.values())
    return native


#: cases whose expected outputs are one draw of a random generator the engine cannot
#: reproduce: a match would be luck, so they are never counted as passing
RANDOM_OUTPUT_PREFIXES = ("test_bernoulli",)


def run_conformance(backend: BackendType | str, pattern: str | None = None,
                    progress=None) -> dict:
    """Run every case (optionally those whose name contains ``pattern``)."""
    cases = [c for c in node_cases() if pattern is None or pattern in c.name]
    failed, errors, native = [], {}, []
    for i, case in enumerate(cases):
        if case.name.startswith(RANDOM_OUTPUT_PREFIXES):
            failed.append(case.name)
            errors[case.name] = "expected output is a random sample; not comparable"
            continue
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if run_case(case, backend):
                    native.append(case.name)
        except Exception as exc:  # a failing case is data here, not a crash
            failed.append(case.name)
            errors[case.name] = f"{type(exc).__name__}: {str(exc)[:300]}"
        if progress:
            progress(i + 1, len(cases), case.name)
    passing = [c.name for c in cases if c.name not in errors]
    return {"backend": BackendType.parse(backend).value, "total": len(cases),
            "passed": len(passing), "failed": failed, "passing": passing, "errors": errors,
            "passed_natively": len(native), "native": native}
