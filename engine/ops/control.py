"""Control flow records: ``If`` needs its condition on the CPU to choose a branch.

Its output shapes are those of the branch taken, known once the condition is; planning
treats them as decided at run time.
"""

from __future__ import annotations

from engine.errors import KernelError
from engine.model import Graph, Layer
from engine.ops.base import Meta, Op, register_op


@register_op
class If(Op):
    cpu_inputs = (0,)

    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        raise KernelError("If: the output shapes are those of the branch taken at run time")


def taken_branch(layer: Layer, cond: bool) -> tuple[str, Graph]:
    """The branch ``If`` takes for ``cond``, checked to make as many outputs as the node."""
    which = "then" if cond else "else"
    branch: Graph = layer.attr(f"{which}_branch")
    if len(branch.outputs) != len(layer.outputs):
        raise KernelError(f"layer {layer.name!r} (If): the {which} branch makes "
                          f"{len(branch.outputs)} output(s), the node declares "
                          f"{len(layer.outputs)}")
    return which, branch
