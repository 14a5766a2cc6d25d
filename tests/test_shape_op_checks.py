"""Support checks of the GPU shape-op kernels at plan time: symbolic dims and unknown
values never raise (a check's exception would surface as "cannot check"), and declines
are sentences naming the limit. Needs no adapter: the kernel tables import without one."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.gpu_compute.kernels import KERNELS as COMPUTE
from engine.backends.gpu_pixel.kernels import KERNELS as PIXEL
from engine.model import Layer
from engine.ops.base import Meta

F32, I64, BOOL = np.dtype(np.float32), np.dtype(np.int64), np.dtype(bool)
TABLES = pytest.mark.parametrize("table", [COMPUTE, PIXEL], ids=["compute", "pixel"])


def sym(*dims, dtype=F32, value=None):
    return Meta(tuple(dims), dtype, value)


CASES = [
    ("Range", {}, [sym(dtype=I64), sym(dtype=I64), sym(dtype=I64)]),
    ("Trilu", {"upper": 0}, [sym("b", "s", "s"), sym(dtype=I64)]),
    ("CumSum", {}, [sym("b", "s"), sym(dtype=I64)]),
    ("Where", {}, [sym(1, 1, "s", "s", dtype=BOOL), sym("b", 12, "s", "s"), sym()]),
    ("Gather", {"axis": -1}, [sym("b", "s", 64), sym("n", dtype=I64)]),
    ("GatherElements", {"axis": 1}, [sym("b", "s"), sym("b", "k", dtype=I64)]),
    ("GatherND", {"batch_dims": 1}, [sym("b", "s", 8), sym("b", "k", 1, dtype=I64)]),
    ("ScatterND", {}, [sym("b", "s", 8), sym("n", 2, dtype=I64), sym("n", 8)]),
    ("TopK", {"axis": -1}, [sym("b", "n"), sym(1, dtype=I64)]),
    ("Einsum", {"equation": "bhid,bhjd->bhij"}, [sym("b", 12, "s", 64), sym("b", 12, "t", 64)]),
    ("Einsum", {"equation": "...ij,...jk->...ik"}, [sym("b", "s", 64), sym(64, "n")]),
    ("LayerNormalization", {"axis": -1}, [sym("b", "s", 768), sym(768), sym(768)]),
    ("ConvTranspose", {"strides": [2, 2]}, [sym("n", 8, "h", "w"), sym(8, 4, 3, 3)]),
]


@TABLES
@pytest.mark.parametrize("op,attrs,metas", CASES, ids=[c[0] for c in CASES])
def test_checks_take_symbolic_dims(table, op, attrs, metas):
    layer = Layer(op, op, [f"i{k}" for k in range(len(metas))], ["y", "z"][:1 + (op == "TopK")],
                  dict(attrs), opset=18)
    assert table.lookup(layer) is not None, f"{table.backend_name} has no {op} kernel"
    reason = table.unsupported_reason(layer, metas)
    assert reason is None, reason


@TABLES
@pytest.mark.parametrize("equation,shapes,words", [
    ("ii->i", [(4, 4)], "operands"), ("ij,ij->i", [(3, 4), (3, 4)], "one row"),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], "3 operands"),
    ("bij,bjk->bik", [(2, 3, 4), (3, 4, 5)], "sizes 2 and 3")])
def test_einsum_declines_with_a_sentence(table, equation, shapes, words):
    layer = Layer("e", "Einsum", [f"x{i}" for i in range(len(shapes))], ["y"],
                  {"equation": equation}, opset=18)
    reason = table.unsupported_reason(layer, [Meta(s, F32) for s in shapes])
    assert reason is not None and words in reason, reason
    assert "cannot check" not in reason


@TABLES
def test_topk_with_a_large_k_says_which_limit(table):
    layer = Layer("t", "TopK", ["x", "k"], ["v", "i"], {"axis": -1}, opset=18)
    reason = table.unsupported_reason(
        layer, [Meta((2, 5000), F32), Meta((1,), I64, np.array([1000]))])
    assert reason is not None and "k=1000" in reason, reason


def test_compute_scatter_nd_reduction_on_int64_says_so():
    layer = Layer("s", "ScatterND", ["x", "i", "u"], ["y"], {"reduction": "add"}, opset=18)
    reason = COMPUTE.unsupported_reason(layer, [Meta((4, 3), I64), Meta((2, 1), I64),
                                                Meta((2, 3), I64)])
    assert reason is not None and "'add'" in reason and "int64" in reason, reason
