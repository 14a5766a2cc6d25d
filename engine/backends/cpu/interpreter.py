"""Run a Graph on the CPU kernels, layer by layer. Used for subgraphs and constant folding."""

from __future__ import annotations

from typing import Any

from engine.backends.cpu.registry import KERNELS
from engine.errors import KernelError, UnsupportedOpError
from engine.model import Graph, Layer


def run_layer(layer: Layer, inputs: list[Any]) -> list[Any]:
    """Run one layer on CPU values; returns one value per output."""
    kernel = KERNELS.lookup(layer)
    if kernel is None:
        raise UnsupportedOpError(f"layer {layer.name!r}: the CPU has no {layer.op_type} kernel "
                                 f"(opset {layer.opset})")
    return run_kernel(kernel.fn, layer, inputs)


def call_kernel(fn, layer: Layer, inputs: list[Any]) -> Any:
    """``fn(layer, inputs)`` with any error other than an engine error reported as a
    ``KernelError`` naming the layer (the CPU run loop writes this inline: a call less a
    layer)."""
    try:
        return fn(layer, inputs)
    except (KernelError, UnsupportedOpError):
        raise
    except Exception as exc:
        raise kernel_failure(layer, exc) from exc


def run_kernel(fn, layer: Layer, inputs: list[Any]) -> list[Any]:
    """Run ``fn``, the CPU kernel ``KERNELS.lookup(layer)`` found, as ``run_layer`` does."""
    result = call_kernel(fn, layer, inputs)
    outs = list(result) if isinstance(result, tuple) else [result]
    n = len(layer.outputs)
    if len(outs) < n:
        outs += [None] * (n - len(outs))
    return outs[:n]


def kernel_failure(layer: Layer, exc: Exception) -> KernelError:
    """The error reported when a kernel raised something other than an engine error."""
    return KernelError(f"layer {layer.name!r} ({layer.op_type}) failed: "
                       f"{type(exc).__name__}: {exc}")


def run_graph(graph: Graph, feeds: dict[str, Any], outer: dict[str, Any] | None = None
              ) -> list[Any]:
    """Evaluate ``graph`` with ``feeds`` (and names visible from an enclosing graph).

    A layer with subgraphs gets its captured outer values after its regular inputs,
    as the worker passes them.
    """
    env: dict[str, Any] = dict(outer or {})
    env.update(graph.constants)
    env.update(feeds)
    for layer in graph.layers:
        args = [env[name] if name else None for name in layer.all_inputs()]
        for name, value in zip(layer.outputs, run_layer(layer, args)):
            if name:
                env[name] = value
    return [env[o.name] for o in graph.outputs]
