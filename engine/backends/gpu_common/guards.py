"""``If`` layers in recorded runs (GPU_COMPUTE and GPU_PIXEL replays).

A run records the branch each top-level ``If`` took. The recording can be replayed by later
runs that take the same branches, when the taken branch ran entirely on the GPU and each
condition is computed on the host from the inputs (the host prefix: ``sr == 16000``): a
replayed run computes the conditions again and, if any differs, runs the normal path.
"""

from __future__ import annotations

import time

import numpy as np

from engine.backends.base import BackendType
from engine.ops import op_for
from engine.ops.base import meta_of

#: CPU layers whose outputs depend only on their inputs' shapes
SHAPE_OPS = ("Shape", "Size")
#: layers whose outputs differ from run to run whatever their inputs
RANDOM_OPS = ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
              "Multinomial", "Bernoulli", "Dropout")


def check_runs(model, placement, watched: list[str], gpu_layers: int, values: dict
               ) -> tuple[list[tuple[str, bool]], str | None]:
    """(guards: (condition name, branch taken), why the recorded run cannot be replayed).

    ``watched``: the layers the backend ran, in order (top-level and branch layers);
    ``values``: the run's inputs and host-prefix values (``host_values``)."""
    seen = set(watched)
    guards: list[tuple[str, bool]] = []
    top = {layer.name for layer in model.layers}
    fixed = {spec.name for spec in model.inputs} | set(model.constants)
    ifs = 0
    for layer in model.layers:
        if layer.op_type != "If" or placement[layer.name].backend is BackendType.CPU:
            continue
        ifs += 1
        cond = values.get(layer.inputs[0])
        if cond is None or np.asarray(cond).size != 1:
            return [], f"the condition of {layer.name!r} is not computed from the inputs"
        taken = bool(np.asarray(cond).reshape(-1)[0])
        branch = layer.attr("then_branch" if taken else "else_branch")
        other = layer.attr("else_branch" if taken else "then_branch")
        if not {inner.name for inner in branch.layers} <= seen or \
                {inner.name for inner in other.layers} & seen:
            return [], f"the branch {layer.name!r} took has layers that ran on the CPU"
        made = {o for inner in branch.layers for o in inner.outputs} | set(branch.constants)
        for spec in branch.outputs:  # outer values passed through are read back
            if spec.name not in made | fixed:
                return [], f"{layer.name!r} passes {spec.name!r} through from the GPU"
        guards.append((layer.inputs[0], taken))
    if sum(name in top for name in watched) != gpu_layers - ifs:
        return [], "the run placed layers differently from the plan"
    return guards, None


def guards_hold(guards: list[tuple[str, bool]], values: dict) -> bool:
    """Whether a run with these host values takes the recorded branches."""
    for name, taken in guards:
        value = np.asarray(values[name])
        if value.size != 1 or bool(value.reshape(-1)[0]) != taken:
            return False
    return True


def host_values(worker, prefix: list, constants: dict, feeds: dict,
                times: dict | None = None) -> dict:
    """The inputs and the values of the host prefix's layers computed from them; ``times``
    (when given) gets each layer's milliseconds by name."""
    values, cpu = dict(feeds), worker._cpu
    clock = time.perf_counter
    for layer in prefix:
        t0 = clock()
        args = [None if not n else values[n] if n in values else constants[n]
                for n in layer.all_inputs()]
        outs = cpu.run_layer(layer, args, [None if a is None else meta_of(a) for a in args])
        values.update((n, v) for n, v in zip(layer.outputs, outs) if n)
        if times is not None:
            times[layer.name] = (clock() - t0) * 1e3
    return values


class PrefixMemo:
    """The host prefix's values kept for the inputs it last ran on: a replayed run whose
    inputs read by the prefix are all small and byte-equal to the last run's reuses them
    (a streaming model's sample rate: its ``sr == 16000`` took ~25 us of a ~0.3 ms run's
    host time). The prefix is deterministic (no random layers: ``host_prefix``)."""

    #: most bytes of an input read by the prefix for its values to be kept
    MAX_BYTES = 4096

    def __init__(self, prefix: list, constants: dict):
        made = {o for layer in prefix for o in layer.outputs if o}
        self.reads = sorted({n for layer in prefix for n in layer.all_inputs()
                             if n and n not in made and n not in constants})
        self.made = sorted(made)
        self._key = None
        self._values: dict = {}

    def values(self, worker, prefix: list, constants: dict, feeds: dict,
               times: dict) -> dict:
        """``host_values``, or the kept values when the prefix's inputs did not change
        (``times`` then gets None for each layer: not run)."""
        key = self._key_of(feeds)
        if key is not None and key == self._key:
            values = dict(feeds)
            values.update(self._values)
            times.update((layer.name, None) for layer in prefix)
            return values
        values = host_values(worker, prefix, constants, feeds, times)
        self._key = key
        self._values = {} if key is None else {n: values[n] for n in self.made}
        return values

    def _key_of(self, feeds: dict):
        key = []
        for name in self.reads:
            value = feeds.get(name)
            if not isinstance(value, np.ndarray) or value.nbytes > self.MAX_BYTES or \
                    value.dtype.hasobject:
                return None
            key.append((value.dtype.str, value.shape, value.tobytes()))
        return tuple(key)


def host_prefix(model, placement, feeds) -> tuple[set[str], list, str | None]:
    """(names fixed by the signature, CPU layers computing only on inputs, constants and
    each other, why the plan cannot be replayed or None)."""
    static = set(model.constants)
    made: set[str] = set()  # outputs of the prefix
    prefix: list = []
    reason = None
    for layer in model.layers:
        names = [n for n in layer.all_inputs() if n]
        outs = [o for o in layer.outputs if o]
        on_cpu = placement[layer.name].backend is BackendType.CPU
        if layer.op_type not in RANDOM_OPS and (
                layer.op_type in SHAPE_OPS or all(n in static for n in names)):
            static.update(outs)
        elif on_cpu and layer.op_type not in RANDOM_OPS and layer.op_type != "If" and \
                all(n in made or n in feeds or n in model.constants for n in names):
            prefix.append(layer)
            made.update(outs)
        elif on_cpu:
            return static, prefix, (f"CPU layer {layer.name!r} ({layer.op_type}) computes on "
                                    f"values made on the GPU")
    for layer in model.layers:  # inputs whose values decide a GPU layer's output shapes
        op = op_for(layer)
        if placement[layer.name].backend is BackendType.CPU or op is None:
            continue
        names = layer.all_inputs()
        for i in op.cpu_inputs:
            if layer.op_type == "If" and i == 0:
                continue  # the branch taken: a guard of the recording (check_runs)
            if i < len(names) and names[i] and names[i] not in static:
                reason = (f"layer {layer.name!r} ({layer.op_type}) takes its shape from the "
                          f"value of {names[i]!r}")
                return static, prefix, reason
    return static, prefix, reason
