"""Control flow records: ``If`` needs its condition on the CPU to choose a branch.

Its output shapes are those of the branch taken, known once the condition is; planning
treats them as decided at run time.
"""

from __future__ import annotations

from engine.errors import KernelError
from engine.model import Layer
from engine.ops.base import Meta, Op, register_op


@register_op
class If(Op):
    cpu_inputs = (0,)

    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        raise KernelError("If: the output shapes are those of the branch taken at run time")
