"""Einsum (matrix-product forms) on both GPU backends, against onnx's reference."""

from __future__ import annotations

import numpy as np
import pytest

from engine import BackendType, ModelLoader, Worker
from tests.shape_ops_util import GPU, check, one_node

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("require_gpu")]
backends = pytest.mark.parametrize("backend", GPU, ids=lambda b: b.value)


@backends
@pytest.mark.parametrize("eq,sa,sb", [
    ("bhid,bhjd->bhij", (2, 3, 5, 7), (2, 3, 6, 7)),
    ("bhij,bhjd->bhid", (2, 3, 5, 6), (2, 3, 6, 7)),
    ("bij,bjk->bik", (3, 5, 9), (3, 9, 6)),
    ("...ij,...jk->...ik", (2, 3, 5, 4), (2, 3, 4, 7)),
    ("...ij,...jk->...ik", (5, 4), (3, 4, 6)),
    ("ij,jk", (5, 9), (9, 3)),
    ("bid,bjd->bji", (2, 5, 3), (2, 6, 3)),
    ("bhqd,bkhd->bhqk", (2, 3, 5, 4), (2, 6, 3, 4))])
def test_einsum_matmul_forms(backend, eq, sa, sb, rng):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    check(backend, "Einsum", {"a": a, "b": b}, attrs={"equation": eq}, rtol=1e-4)


@backends
@pytest.mark.parametrize("eq,shapes", [("ii->i", [(4, 4)]), ("ij,jk,kl->il",
                                                            [(2, 3), (3, 4), (4, 5)]),
                                        ("ij,ij->i", [(3, 4), (3, 4)])])
def test_einsum_other_forms_fall_back_with_a_reason(backend, eq, shapes, rng):
    feeds = {f"x{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    m = ModelLoader.from_proto(one_node("Einsum", feeds, attrs={"equation": eq}))
    with Worker(m, backend) as w:
        place = next(iter(w.placement.values()))
    assert place.backend is BackendType.CPU
    assert place.reason.startswith("fallback: Einsum") and place.reason.count(" ") > 3
