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
from engine.backends.gpu_common import gpu_errors
from engine.backends.gpu_compute.pipelines import Program
from engine.ops import op_for
from engine.ops.base import Meta

#: CPU layers whose outputs depend only on their inputs' shapes
SHAPE_OPS = ("Shape", "Size")
#: layers whose outputs differ from run to run whatever their inputs
RANDOM_OPS = ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
              "Multinomial", "Bernoulli", "Dropout")


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
        self.static, self.reason = static_tensors(model, plan.placement)
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
        static, reason = static_tensors(self.model, self.plan.placement)
        if reason:
            return reason
        if self.layers_run != self.gpu_layers:
            return "the run placed layers differently from the plan"
        for name, slot in outputs.items():
            if slot is None or slot.dev is None or id(slot.dev.alloc) not in self.created \
                    or id(slot.dev.alloc) in self.uploads:
                return f"output {name!r} is not computed on the device"
        return None


def build(backend, rec: Recorder, outputs: dict):
    """A ``Replay`` of ``rec``'s trace; ``outputs``: {name: Slot} of the recorded run."""
    from engine.backends.gpu_compute.replay import INSIDE_PASSES, MAX_STAMPS, Replay

    replay = Replay(backend, rec.model, rec.plan)
    events = rec.events
    out_ids = {id(s.dev.alloc) for s in outputs.values()}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, ev in enumerate(events):
        for a in _allocs_of(ev):
            aid = id(a)
            if aid in rec.created and aid not in out_ids and \
                    (aid not in rec.uploads or rec.uploads[aid][0]):
                first.setdefault(aid, -1 if aid in rec.uploads else i)
                last[aid] = i
    buffers = _plan_arena(backend, replay, rec, first, last)
    for aid, (feed, data) in rec.uploads.items():
        alloc = rec.created[aid]
        if feed is not None:
            replay.feeds.append((feed, buffers[aid]))
        elif alloc.refs > 0:  # a constant the backend keeps: bind it where it lives
            buffers[aid] = alloc.buffer
        else:  # a value fixed by the signature: its own buffer, written once
            with gpu_errors("uploading a replay's fixed values"):
                buf = backend.device.create_buffer(size=alloc.size,
                                                   usage=backend._storage_usage)
                backend.queue.write_buffer(buf, 0, data)
            replay._objects.append(buf)
            buffers[aid] = buf
    ring = {}
    for name, slot in outputs.items():
        replay.outputs[name] = (id(slot.dev.alloc), slot.dev)
        replay.metas[name] = Meta(slot.meta.shape, slot.meta.dtype)
        ring[id(slot.dev.alloc)] = slot.dev.alloc
    n_dispatch = sum(ev[0] == "dispatch" for ev in events)
    stamping = backend._timestamps is not None and INSIDE_PASSES in backend.gpu.features \
        and 2 * n_dispatch + 1 <= MAX_STAMPS

    def make_ops(out_allocs: dict) -> list:
        replay.spans.clear()
        replay.stamps = 0
        where = dict(buffers)
        where.update((aid, a.buffer) for aid, a in out_allocs.items())
        return _build_ops(backend, replay, events, where, stamping)

    replay.make_ops = make_ops
    replay.adopt(ring)  # the recorded run's outputs become the first ring slot
    if stamping and replay.stamps:
        wgpu = backend.gpu.wgpu
        with gpu_errors("creating a replay's timestamp queries"):
            replay.query_set = backend.device.create_query_set(type="timestamp",
                                                               count=replay.stamps)
            replay.resolve_buf = backend.device.create_buffer(
                size=replay.stamps * 8,
                usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
    return replay


def _allocs_of(ev: tuple) -> list:
    if ev[0] == "upload":
        return [ev[1]]
    if ev[0] == "dispatch":
        return [a for a, _, _ in ev[3]]
    return [ev[2], ev[4]]


def _plan_arena(backend, replay, rec: Recorder, first: dict, last: dict) -> dict:
    """Buffers for the run's own tensors: a tensor's buffer is free again after its last
    use, so later tensors of the same size share it (passes run in recording order)."""
    starts: dict[int, list[int]] = {}
    ends: dict[int, list[int]] = {}
    for aid in first:
        starts.setdefault(first[aid], []).append(aid)
        ends.setdefault(last[aid], []).append(aid)
    free: dict[int, list] = {}
    held: dict[int, object] = {}
    buffers: dict[int, object] = {}
    for i in range(-1, len(rec.events) + 1):
        for aid in starts.get(i, ()):
            size = rec.created[aid].size
            spare = free.get(size)
            alloc = spare.pop() if spare else None
            if alloc is None:
                alloc = backend.pool.acquire(size)
                replay._arena.append(alloc)
            held[aid], buffers[aid] = alloc, alloc.buffer
        for aid in ends.get(i, ()):
            free.setdefault(held[aid].size, []).append(held[aid])
    return buffers


def _build_ops(backend, replay, events: list, buffers: dict, stamping: bool) -> list:
    """Passes of dispatches with their bind groups; copies between passes; stamp indices
    at layer boundaries (shared: one stamp ends a layer and starts the next)."""
    uniforms = replay.uniforms
    ops: list = []
    current: list = []
    state = {"layer": None, "start": -1}

    def stamp() -> int:
        replay.stamps += 1
        return replay.stamps - 1

    def close_pass() -> None:
        end = -1
        if current:
            if stamping:
                end = stamp()
                replay.spans.append((state["layer"], state["start"], end))
            ops.append(("pass", list(current), end))
        current.clear()
        state["layer"] = None

    for ev in events:
        if ev[0] == "copy" and _buffer(ev[2], buffers) is not _buffer(ev[4], buffers):
            ev = _copy_as_dispatch(ev)  # a shader copy keeps the pass going
        if ev[0] == "copy":
            close_pass()
            _, _, src, so, dst, do, n = ev
            ops.append(("copy", _buffer(src, buffers), so, _buffer(dst, buffers), do, n))
            continue
        if ev[0] != "dispatch":
            continue
        _, layer, program, ranges, params, groups = ev
        pipeline, layout = backend.pipelines.get(program)
        ubuf = uniforms.get(params)
        with gpu_errors(f"preparing the replay of layer {layer!r}"):
            if ubuf is None:
                ubuf = uniforms[params] = backend.device.create_buffer_with_data(
                    data=params, usage=backend._uniform_usage)
            entries = [{"binding": 0, "resource": {"buffer": ubuf, "offset": 0,
                                                   "size": ubuf.size}}]
            entries += [{"binding": i, "resource": {"buffer": _buffer(a, buffers),
                                                    "offset": o, "size": s}}
                        for i, (a, o, s) in enumerate(ranges, 1)]
            group = backend.device.create_bind_group(layout=layout, entries=entries)
        mark = -1
        if stamping and layer != state["layer"]:
            mark = stamp()
            if state["layer"] is not None:
                replay.spans.append((state["layer"], state["start"], mark))
            state["layer"], state["start"] = layer, mark
        current.append((pipeline, group, groups, mark))
    close_pass()
    return ops


def _copy_as_dispatch(ev: tuple) -> tuple:
    """A recorded buffer copy as a dispatch of the strided-copy shader (whole words)."""
    from engine.backends.gpu_compute.backend import groups_for, pack
    from engine.backends.gpu_compute.util import arr8

    _, layer, src, so, dst, do, nbytes = ev
    words = nbytes // 4
    chunks = -(-words // 64)
    params = pack(chunks, 1, so // 4, do // 4, words, chunks, 0, 0, *arr8([words]),
                  *arr8([1]), *arr8([1]), *arr8([words]))
    ranges = [(src, 0, src.size), (dst, 0, dst.size)]
    return ("dispatch", layer, Program.of("copy.wgsl", W=1), ranges, params,
            groups_for(-(-chunks // 64)))


def _buffer(alloc, buffers: dict):
    """The replay's buffer of ``alloc``: planned, or where a persistent tensor lives."""
    return buffers.get(id(alloc)) or alloc.buffer
