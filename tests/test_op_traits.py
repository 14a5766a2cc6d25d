"""Op traits (engine/ops/traits.py): what the passes and the cost model read instead of
their own lists of op names."""

from __future__ import annotations

import numpy as np

from engine.model import Layer
from engine.ops.base import Meta
from engine.ops.costs import layer_cost
from engine.ops.traits import op_traits


def test_traits_of_known_ops():
    assert not op_traits("RandomNormal").deterministic
    assert not op_traits("Dropout").deterministic
    assert op_traits("Relu").deterministic
    assert op_traits("Expand").may_expand and op_traits("ConstantOfShape").may_expand
    assert not op_traits("Relu").may_expand
    assert op_traits("Shape").shape_only and op_traits("Size").shape_only
    assert not op_traits("Gather").shape_only
    assert op_traits("Reshape").moves_only and not op_traits("Add").moves_only
    assert op_traits("Relu").is_activation and not op_traits("Sin").is_activation


def test_an_unknown_op_is_a_plain_computation():
    t = op_traits("NoSuchOp", "com.example")
    assert t.deterministic and not (t.may_expand or t.shape_only or t.moves_only)


def test_cost_model_reads_moves_only():
    f32 = np.dtype(np.float32)
    x = Meta((2, 8), f32)
    assert layer_cost(Layer("r", "Reshape", ["x"], ["y"]), [x], [Meta((16,), f32)]).flops == 0
    assert layer_cost(Layer("a", "Relu", ["x"], ["y"]), [x], [x]).flops == 16
