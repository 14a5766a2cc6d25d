"""Turning a ``recording.Recorder``'s trace into a ``replay.Replay``: buffers from a
liveness-planned arena, fixed values written once, bind groups and uniforms built once."""

from __future__ import annotations

from engine.backends.gpu_common import gpu_errors
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.recording import Recorder
from engine.ops.base import Meta


def build(backend, rec: Recorder, outputs: dict):
    """A ``Replay`` of ``rec``'s trace; ``outputs``: {name: Slot} of the recorded run."""
    from engine.backends.gpu_compute.replay import INSIDE_PASSES, MAX_STAMPS, Replay

    replay = Replay(backend, rec.model, rec.plan)
    replay.prefix, replay.guards = rec.prefix, rec.guards
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
            ev = _copy_as_dispatch(ev, backend.copy_strategy)  # keeps the pass going
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


def _copy_as_dispatch(ev: tuple, strategy: str) -> tuple:
    """A recorded buffer copy as a dispatch of the strided-copy shader (whole words; one
    per invocation on GPUs, runs of 64 on CPU adapters: ``copy_strategy``)."""
    from engine.backends.gpu_compute.encoding import groups_for, pack
    from engine.backends.gpu_compute.util import arr8

    _, layer, src, so, dst, do, nbytes = ev
    words = nbytes // 4
    elements = strategy == "elements"
    chunks = 1 if elements else -(-words // 64)
    count = words if elements else chunks
    params = pack(count, 1, so // 4, do // 4, words, chunks, 0, 0, *arr8([words]),
                  *arr8([1]), *arr8([1]), *arr8([words]))
    ranges = [(src, 0, src.size), (dst, 0, dst.size)]
    shader = "copy_elem.wgsl" if elements else "copy.wgsl"
    return ("dispatch", layer, Program.of(shader, W=1, T="word"), ranges, params,
            groups_for(-(-count // 64)))


def _buffer(alloc, buffers: dict):
    """The replay's buffer of ``alloc``: planned, or where a persistent tensor lives."""
    return buffers.get(id(alloc)) or alloc.buffer
