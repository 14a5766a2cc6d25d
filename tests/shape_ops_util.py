"""Helpers of the GPU shape-op tests: one-node models, run natively, checked against onnx."""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from engine import BackendType, ModelLoader, Worker
from tests.modelgen import model

GPU = [BackendType.GPU_COMPUTE, BackendType.GPU_PIXEL]
ONNX_TYPE = {np.dtype(np.float32): 1, np.dtype(np.int64): 7, np.dtype(np.int32): 6,
             np.dtype(bool): 9}


def one_node(op, feeds: dict, consts: dict | None = None, attrs=None, n_out=1, opset=18,
             order=None, out_dtypes=None):
    """A model of one ``op`` node; ``feeds`` become graph inputs, ``consts`` initializers.
    ``order`` names the node's inputs in order; outputs have ``out_dtypes`` (default: the
    first input's dtype)."""
    consts = consts or {}
    names = order or list(feeds) + list(consts)
    ins = [(n, ONNX_TYPE[np.asarray(v).dtype], list(np.shape(v))) for n, v in feeds.items()]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in consts.items()]
    first = np.asarray({**feeds, **consts}[names[0]]).dtype
    out_dtypes = out_dtypes or [first] * n_out
    out_info = [(o, ONNX_TYPE[np.dtype(t)], ["?"]) for o, t in zip(outs, out_dtypes)]
    proto = model([node], ins, out_info, initializers=inits, opset=opset)
    try:  # declare the outputs' true ranks (symbolic dims) where the reference can run
        ranks = [np.ndim(v) for v in ReferenceEvaluator(proto).run(None, _feed_values(feeds))]
    except Exception:  # noqa: BLE001 - ops the reference rejects keep the rank-1 guess
        return proto
    out_info = [(o, ONNX_TYPE[np.dtype(t)], [f"{o}_{d}" for d in range(r)])
                for o, t, r in zip(outs, out_dtypes, ranks)]
    return model([node], ins, out_info, initializers=inits, opset=opset)


def _feed_values(feeds: dict) -> dict:
    return {n: np.asarray(v) for n, v in feeds.items()}


def run_native(backend, proto, feeds: dict) -> list[np.ndarray]:
    """Outputs on ``backend``; asserts that every layer ran there (no CPU fallback)."""
    m = ModelLoader.from_proto(proto)
    with Worker(m, backend) as w:
        w.schedule(feeds)
        outs = [w.peek_output(o.name).download_to_array() for o in m.outputs]
        placed = {name: (p.backend, p.reason) for name, p in w.placement.items()}
    assert placed, "the model has no layers left to run"
    for name, (where, reason) in placed.items():
        assert where is backend, f"{name} did not run on {backend.name}: {reason}"
    return outs


def reference(proto, feeds: dict) -> list[np.ndarray]:
    """onnx's reference outputs; the CPU backend's where the reference cannot run the node
    (it rejects grouped ConvTranspose, for one)."""
    try:
        return [np.asarray(v) for v in ReferenceEvaluator(proto).run(None, feeds)]
    except Exception:  # noqa: BLE001 - the CPU backend passes the node's conformance cases
        m = ModelLoader.from_proto(proto)
        with Worker(m, BackendType.CPU) as w:
            w.schedule(feeds)
            return [w.peek_output(o.name).download_to_array() for o in m.outputs]


def check(backend, op, feeds, consts=None, attrs=None, n_out=1, opset=18, order=None,
          rtol=1e-5, out_dtypes=None):
    """Run one node natively on ``backend`` and compare every output with onnx's reference."""
    proto = one_node(op, feeds, consts, attrs, n_out, opset, order, out_dtypes)
    got = run_native(backend, proto, feeds)
    want = reference(proto, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape, f"shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"dtype {g.dtype} != {w.dtype}"
        if w.dtype.kind == "f":
            scale = max(1.0, float(np.abs(w).max())) if w.size else 1.0
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale)
        else:
            np.testing.assert_array_equal(g, w)
    return got
