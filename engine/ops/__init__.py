"""Operator shape logic, one module per op family. Importing this package registers them all."""

from engine.ops.base import Meta, Op, cpu_input_indices, find_op, op_for, register_op, registered_ops
from engine.ops import elementwise, shape_ops  # noqa: F401  (registration side effects)

__all__ = ["Meta", "Op", "cpu_input_indices", "find_op", "op_for", "register_op", "registered_ops"]
