"""Recording a plan's device work once, so that later runs of its signature replay it.

While a normal run of a plan executes, the backend reports to a ``Recorder`` every upload,
dispatch and copy, naming buffers by their ``Allocation`` (one object per tensor a run
allocates; views share it). At the end of the run the recorder checks that nothing it saw
depends on input *values* and turns the trace into a ``Replay``: intermediate tensors get
buffers from a liveness-planned arena, bind groups and uniform buffers are built once.

Only runs whose CPU layers are *static* are recorded: Shape/Size, and layers whose inputs
are constants or other static tensors (their values are fixed by the input signature). A
GPU kernel that reads the value of any other CPU tensor (a model input feeding Clip's
``min``, a Reshape shape taken from an input) makes the plan value-dependent: it keeps the
normal path, and ``GpuComputeBackend.replay_status`` says why.
"""

from __future__ import annotations

from engine.backends.base import BackendType
from engine.backends.gpu_common.guards import (  # noqa: F401 - SHAPE_OPS re-exported
    RANDOM_OPS,
    SHAPE_OPS,
    check_runs,
    host_prefix,
    host_values,
)
from engine.ops import op_for
from engine.ops.base import Meta


class WatchedMeta(Meta):
    """A Meta whose ``value`` reports that it was read (kernels taking host values).

    Constructed like a Meta (kernels make metas with ``type(m)(shape, dtype)``) it watches
    nothing."""

    def __init__(self, shape, dtype, value=None, name: str | None = None,
                 hits: list[str] | None = None):
        self.shape, self.dtype = shape, dtype
        self.__dict__.update(_value=value, _name=name, _hits=hits)

    @property
    def value(self):
        if self._hits is not None:
            self._hits.append(self._name)
        return self.__dict__["_value"]

    @value.setter
    def value(self, v):
        self.__dict__["_value"] = v


def static_tensors(model, placement) -> tuple[set[str], str | None]:
    """Names whose values are fixed by the input signature, or a reason the plan's CPU work
    depends on input values (then it cannot be replayed)."""
    static = set(model.constants)
    for layer in model.layers:
        names = [n for n in layer.all_inputs() if n]
        if layer.op_type in RANDOM_OPS:
            fixed = False
        else:  # a GPU layer on fixed values makes fixed values too (Range on shapes)
            fixed = layer.op_type in SHAPE_OPS or all(n in static for n in names)
        if fixed:
            static.update(o for o in layer.outputs if o)
        elif placement[layer.name].backend is BackendType.CPU:
            return static, f"CPU layer {layer.name!r} ({layer.op_type}) computes on input values"
    for layer in model.layers:  # inputs whose values decide a GPU layer's output shapes
        op = op_for(layer)
        if placement[layer.name].backend is BackendType.CPU or op is None:
            continue
        names = layer.all_inputs()
        for i in op.cpu_inputs:
            if i < len(names) and names[i] and names[i] not in static:
                return static, (f"layer {layer.name!r} ({layer.op_type}) takes its shape from "
                                f"the value of {names[i]!r}")
    return static, None


class Recorder:
    """The device work of one run, in order, with tensors named by their allocations."""

    def __init__(self, model, plan, feeds: dict):
        self.model, self.plan = model, plan
        self.inputs = set(feeds)
        self.inputs_given = dict(feeds)
        self.worker = None  # set by Replays.start (its CPU backend computes If conditions)
        self.prefix: list = []
        self.guards: list = []
        self.watched: list[str] = []
        self.static, self.reason = self.analyse()
        self.gpu_layers = sum(p.backend is not BackendType.CPU
                              for p in plan.placement.values())
        self.feeds = {id(v): n for n, v in feeds.items()}
        if len(self.feeds) < len(feeds) and not self.reason:
            self.reason = "two inputs were given the same array"
        self.events: list[tuple] = []
        self.created: dict[int, object] = {}  # id -> Allocation, made during the run
        self.keep: list = []  # every allocation seen (ids stay unique while recording)
        self.uploads: dict[int, tuple[str | None, object]] = {}  # alloc id -> (feed, data)
        self.layers_run = 0
        self.hits: list[str] = []
        self.layer: str | None = None

    def host_values(self) -> dict:
        """The recorded run's inputs and host-prefix values (If conditions)."""
        if not any(layer.op_type == "If" for layer in self.model.layers):
            return {}
        return host_values(self.worker, self.prefix, self.model.constants, self.inputs_given)

    def analyse(self) -> tuple[set[str], str | None]:
        """(names fixed by the signature, why the plan's CPU work keeps it from replaying).

        CPU layers on inputs and constants whose values only decide which branch an ``If``
        takes are allowed (``prefix``): a replayed run computes them and checks the
        branches."""
        static, reason = static_tensors(self.model, self.plan.placement)
        if not reason or "computes on input values" not in reason:
            return static, reason
        fixed, prefix, why = host_prefix(self.model, self.plan.placement, self.inputs)
        if why:
            return static, reason
        made = {o for layer in prefix for o in layer.outputs if o}
        for layer in self.model.layers:
            used = [n for n in layer.all_inputs() if n in made]
            if used and layer not in prefix and \
                    (layer.op_type != "If" or used != [layer.inputs[0]]):
                return static, reason
        self.prefix = prefix
        return fixed, None

    # -- events from the backend ------------------------------------------------------------
    def allocated(self, alloc) -> None:
        self.created[id(alloc)] = alloc
        self.keep.append(alloc)

    def uploaded(self, alloc, array, data) -> None:
        feed = self.feeds.get(id(array))
        self.uploads[id(alloc)] = (feed, None if feed is not None else data)
        self.events.append(("upload", alloc))

    def dispatched(self, program, ranges: list, params: bytes, groups: tuple) -> None:
        self.keep.extend(a for a, _, _ in ranges)
        self.events.append(("dispatch", self.layer, program, ranges, params, groups))

    def copied(self, src, src_offset: int, dst, dst_offset: int, nbytes: int) -> None:
        self.keep += [src, dst]
        self.events.append(("copy", self.layer, src, src_offset, dst, dst_offset, nbytes))

    def watch(self, layer, metas: list) -> list:
        """``metas`` with non-static host values wrapped to detect kernels reading them."""
        self.layers_run += 1
        self.watched.append(layer.name)
        names = layer.all_inputs()
        return [WatchedMeta(m.shape, m.dtype, m.value, n, self.hits)
                if m is not None and m.value is not None and n not in self.static else m
                for n, m in zip(names, metas)]

    # -- the end of the run -----------------------------------------------------------------
    def problem(self, outputs: dict) -> str | None:
        """Why this recording cannot be replayed (None: it can)."""
        if self.reason:
            return self.reason
        if self.hits:
            return f"a GPU kernel reads the value of {self.hits[0]!r} (not fixed by the shapes)"
        reason = self.analyse()[1]  # placement may have changed during the run
        if reason:
            return reason
        self.guards, why = check_runs(self.model, self.plan.placement, self.watched,
                                      self.gpu_layers, self.host_values())
        if why:
            return why
        for name, slot in outputs.items():
            if slot is None or slot.dev is None or id(slot.dev.alloc) not in self.created \
                    or id(slot.dev.alloc) in self.uploads:
                return f"output {name!r} is not computed on the device"
        return None
