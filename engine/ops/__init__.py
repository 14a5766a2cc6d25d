"""Operator shape logic, one module per op family. Importing this package registers them all."""

from engine._autoload import import_submodules
from engine.ops.base import (
    Meta,
    Op,
    cpu_input_indices,
    find_op,
    op_for,
    register_op,
    registered_ops,
)

import_submodules(__name__, __path__)

__all__ = ["Meta", "Op", "cpu_input_indices", "find_op", "op_for", "register_op", "registered_ops"]
