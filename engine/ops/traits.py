"""What the passes and tools need to know of an op beyond its shape: its traits.

``op_traits(op_type)`` is the one place that says whether an op is deterministic, may make
far more data than it reads, reads only its input's shape, only moves data, or may be fused
as an activation. Constant folding (``passes/fold.py``), the CPU-forced analysis
(``passes/cpu_forced.py``) and the cost model (``ops/costs.py``) read it instead of keeping
their own lists of op names.

An op with shape logic in ``engine/ops`` declares its traits on its ``Op`` class
(``may_expand = True`` ...); the tables below hold the ops that have none there (random
generators, signal ops, control flow, ops the CPU computes from attributes only), and the
long-standing members of each group.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from engine.ops.activations import UNARY_OPS
from engine.ops.base import find_op


@dataclass(frozen=True)
class OpTraits:
    """Traits of one op type; the defaults describe a plain deterministic computation."""

    #: same inputs, same outputs: a constant layer may be folded at load time
    deterministic: bool = True
    #: the output can be far larger than the inputs: fold only with a size estimate
    may_expand: bool = False
    #: the output depends on the input's shape, never its values (a CPU-forced walk stops)
    shape_only: bool = False
    #: moves or reinterprets data and computes nothing (0 FLOPs in the cost model)
    moves_only: bool = False
    #: a unary op the fusion pass may fuse into a Conv/Gemm epilogue
    is_activation: bool = False


#: results differ from run to run (Dropout only in training mode, but folding never trains)
_RANDOM = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                     "Multinomial", "Bernoulli", "Dropout"})
#: can make far more data than they read
_EXPANDING = frozenset({
    "ConstantOfShape", "Expand", "Tile", "Range", "Pad", "Resize", "Upsample", "OneHot",
    "EyeLike", "MatMul", "Gemm", "Einsum", "ConvTranspose", "Col2Im", "BlackmanWindow",
    "HannWindow", "HammingWindow", "MelWeightMatrix", "STFT", "DFT", "Scatter", "ScatterND",
    "ScatterElements", "Loop", "Scan", "If", "SequenceMap", "TfIdfVectorizer", "StringSplit",
    "Unique", "NonZero"})
#: read only their input's shape
_SHAPE_ONLY = frozenset({"Shape", "Size"})
#: move data and compute nothing
_MOVES = frozenset({
    "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice",
    "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Pad", "Identity", "Shape",
    "Size", "Cast", "DepthToSpace", "SpaceToDepth", "ScatterND", "ScatterElements",
    "ConstantOfShape", "Range"})


@cache
def op_traits(op_type: str, domain: str = "") -> OpTraits:
    """The traits of ``op_type``: the tables above, then what its ``Op`` class declares.

    The tables go by name whatever the domain, as the passes always have."""
    op = find_op(op_type, domain)
    rec = UNARY_OPS.get(op_type)
    return OpTraits(
        deterministic=op_type not in _RANDOM and getattr(op, "deterministic", True),
        may_expand=op_type in _EXPANDING or getattr(op, "may_expand", False),
        shape_only=op_type in _SHAPE_ONLY or getattr(op, "shape_only", False),
        moves_only=op_type in _MOVES or getattr(op, "moves_only", False),
        is_activation=bool(rec is not None and rec.activation),
    )
