"""Replaying a recorded GPU_PIXEL plan: a run writes its inputs and re-issues recorded passes.

A recorded run (``recording.PixelRecorder``) drew every pass into textures the pool handed
out; a run of the same signature draws the same passes into the same textures. The replay
therefore takes those textures out of the pool and keeps them, with the bind groups the
renderer already made for them. A run then writes the input textures (and the few textures
holding values fixed by the signature: textures are reused within a run, so these are
rewritten too), records every pass with pre-built descriptors (``rawpass.PassList``) into
one command encoder and submits it.

Outputs of earlier runs may still be held by the caller: like GPU_COMPUTE's replays, a ring
of output texture sets is kept, a set reused once the caller released its tensors; another
set is the recorded passes with its textures in place of the recorded outputs'.

Per-layer GPU times come from timestamps written at the start and end of every pass, sampled
as in GPU_COMPUTE's replays (``SAMPLE_EVERY``); other runs' profiles repeat the last sample.
"""

from __future__ import annotations

import time
from concurrent.futures import Future

import numpy as np

from engine.backends.base import BackendType
from engine.backends.gpu_common import gpu_errors
from engine.backends.gpu_compute.replay import SAMPLE_EVERY, SAMPLED, Replays
from engine.backends.gpu_pixel.handles import PixelTensor
from engine.backends.gpu_pixel.layout import pack
from engine.backends.gpu_pixel.rawpass import PassList
from engine.backends.gpu_pixel.targets import record_column_copy
from engine.ops.base import Meta, meta_of
from engine.profile import LayerTiming
from engine.tensor import Stored, free_released

#: timestamps a replay may write (one query set: two per pass)
MAX_STAMPS = 4096
#: output texture sets a replay keeps
RING = 3


class PixelReplay:
    """Everything a run of one plan needs that does not depend on the input values."""

    def __init__(self, backend, rec, outputs: dict):
        r = self.r = backend.r
        self.backend = backend
        self.prefix = list(rec.prefix)  # CPU layers run again on each run's inputs
        self.constants = rec.model.constants
        self.layers = [(layer, BackendType.CPU if rec.plan.placement[layer.name].backend
                        is BackendType.CPU else backend.type) for layer in rec.model.layers]
        local = {id(t): t for t in rec.allocated_tex}
        pooled = {id(t) for t in r._dirty} | {id(t) for ts in r._clean.values() for t in ts}
        self.outputs = {n: (s.dev.tex, s.dev.layout, Meta(s.meta.shape, s.meta.dtype))
                        for n, s in outputs.items()}
        out_ids = {id(t) for t, _, _ in self.outputs.values()}
        # intermediates: made and released during the run; kept by the replay from now on
        self.owned = [t for k, t in local.items() if k in pooled]
        r.take_out(self.owned)
        kept = {id(t) for t in self.owned} | out_ids
        #: (texture, (input name, dtype) or None, fixed texels): writes to textures of the run
        #: (a write into a texture that outlives runs, a constant's, was done for good)
        self.writes: list[tuple] = []
        self.events: list[tuple] = []
        touched: set[int] = set()  # textures used by the events so far
        for ev in rec.events:
            if ev[0] == "draw":
                touched.update(map(id, [ev[3], *ev[4], *(ev[6] if len(ev) > 6 else ())]))
            elif ev[0] == "copy":
                touched.update((id(ev[2]), id(ev[3])))
            if ev[0] != "write":
                self.events.append(ev)
            elif id(ev[1]) in kept:
                tex = ev[1]
                if id(tex) in touched:
                    # the texture held another tensor earlier in the run (reused after a
                    # mid-run submit): queue writes all land before the run's passes, so
                    # this one goes through a texture of its own and a copy in order
                    staging = r.new_owned(tex.width, tex.height)
                    self.owned.append(staging)
                    self.events.append(("copy", None, staging, tex, 0))
                    tex = staging
                touched.add(id(ev[1]))
                self.writes.append((tex, ev[2], ev[3]))
        n_pass = sum(ev[0] == "draw" for ev in self.events)
        self.query_set = self.resolve_buf = None
        self.stamps = 2 * n_pass if r.timestamps and 2 * n_pass <= MAX_STAMPS else 0
        if self.stamps:
            wgpu = r.wgpu
            with gpu_errors("creating a replay's timestamp queries"):
                self.query_set = backend.device.create_query_set(type="timestamp",
                                                                 count=self.stamps)
                self.resolve_buf = backend.device.create_buffer(
                    size=self.stamps * 8,
                    usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
        self.spans = [ev[1] for ev in self.events if ev[0] == "draw"]  # layer of each pass
        self.last_times: dict[str, float] | None = None
        self._since_sample = SAMPLE_EVERY
        self._reading: Future | None = None
        #: output sets: [{recorded output texture id: texture}, ids the caller holds, ops]
        self.ring: list[list] = []
        first = {id(t): t for t, _, _ in self.outputs.values()}
        self._adopt(first, busy=set(first))

    # -- output sets ------------------------------------------------------------------------
    def _adopt(self, textures: dict, busy: set) -> list:
        entry = [textures, busy, self._ops(textures)]
        for tex in textures.values():
            self.r.owned[id(tex)] = lambda t, e=entry: e[1].discard(id(t))
        self.ring.append(entry)
        return entry

    def _output_set(self) -> list:
        for entry in self.ring:
            if not entry[1]:
                return entry
        if len(self.ring) >= RING:  # every set still held: the oldest goes back to its holder
            old = self.ring.pop(0)
            for tex in old[0].values():
                self.r.owned.pop(id(tex), None)
        fresh = {id(t): self.r.new_owned(t.width, t.height) for t, _, _ in
                 self.outputs.values()}
        return self._adopt(fresh, busy=set())

    def _ops(self, subst: dict) -> list:
        """Pass lists and texture copies of one output set (recorded textures substituted);
        with timestamps, pass k writes stamps 2k and 2k + 1."""
        r, ops, passes = self.r, [], []
        count = 0

        def close() -> None:
            if passes:
                ops.append(("passes", PassList(list(passes), self.query_set)))
                passes.clear()

        with gpu_errors("preparing a replayed plan"):
            for ev in self.events:
                if ev[0] == "copy":  # rows from y on, or (x, width): columns from x on
                    close()
                    ops.append(("copy", subst.get(id(ev[2]), ev[2]),
                                subst.get(id(ev[3]), ev[3]), *ev[4:]))
                    continue
                _, _, (pipeline, bgl, n_tex), out, textures, params, *targets = ev
                group = r.bind_group(bgl, n_tex, [subst.get(id(t), t) for t in textures],
                                     params)
                stamp = 2 * count if self.stamps else -1
                count += 1
                if targets:  # several colour targets, the columns [0, width) of each
                    outs, width = targets
                    views = [subst.get(id(t), t).view for t in outs]
                    passes.append((views, pipeline, group, stamp, (width, out.height)))
                else:
                    passes.append((subst.get(id(out), out).view, pipeline, group, stamp))
            close()
        return ops

    def release(self) -> None:
        """Hand every texture back to the pool (the replay is dropped)."""
        self.r.give_back(self.owned)
        for textures, busy, _ in self.ring:
            for tex in textures.values():
                self.r.owned.pop(id(tex), None)
            self.r.give_back([t for t in textures.values() if id(t) not in busy])
        self.owned, self.ring = [], []

    # -- running ----------------------------------------------------------------------------
    def run(self, worker, feeds: dict, futures: dict[str, Future]):
        """The run loop of a replayed plan (a generator yielding each layer, as run_placed)."""
        backend, r = self.backend, self.r
        free_released()
        t_run = time.perf_counter()
        backend.begin_run()
        r.flush()
        values = self._host_values(worker, feeds) if self.prefix else feeds
        with gpu_errors("running a replayed plan"):
            entry = self._output_set()
            subst, ops = entry[0], entry[2]
            for tex, feed, texels in self.writes:
                if feed is not None:
                    name, dtype = feed
                    value = values[name]
                    if dtype is not None:
                        value = np.ascontiguousarray(value, dtype=dtype)
                    texels = pack(value)
                r.write(subst.get(id(tex), tex), texels)
            sample = self._sample_now()
            encoder = backend.device.create_command_encoder()
            for op in ops:
                if op[0] == "passes":
                    op[1].record(encoder, sample)
                elif len(op) == 4:
                    r.record_copy(encoder, *op[1:])
                else:
                    record_column_copy(encoder, op[1], op[2], op[4], op[5])
            if sample:
                encoder.resolve_query_set(self.query_set, 0, self.stamps, self.resolve_buf, 0)
            r.queue.submit([encoder.finish()])
        entry[1].update(subst)
        for name, fut in futures.items():
            tex, layout, meta = self.outputs[name]
            fut.set_result(Stored(backend, PixelTensor(layout, subst[id(tex)]), meta))
        if sample:
            self._reading = self._read_stamps()
            r.add_timings(self._reading)
        t_end = time.perf_counter()
        host_ms = (t_end - t_run) * 1e3 / max(1, len(self.layers))
        gpu = self.last_times or {}
        timings = [LayerTiming(layer.name, layer.op_type, kind.value, gpu[layer.name], SAMPLED)
                   if layer.name in gpu else
                   LayerTiming(layer.name, layer.op_type, kind.value, host_ms,
                               "cpu-clock (replayed: host share of the run)",
                               kind is BackendType.CPU, 0.0)
                   for layer, kind in self.layers]
        worker._finish_profile(timings, (t_end - t_run) * 1e3)
        for layer, _ in self.layers:
            yield layer

    def _host_values(self, worker, feeds: dict) -> dict:
        """The inputs and the host prefix's values computed from them."""
        values, consts, cpu = dict(feeds), self.constants, worker._cpu
        for layer in self.prefix:
            args = [None if not n else values[n] if n in values else consts[n]
                    for n in layer.all_inputs()]
            outs = cpu.run_layer(layer, args, [None if a is None else meta_of(a) for a in args])
            values.update((n, v) for n, v in zip(layer.outputs, outs) if n)
        return values

    def _sample_now(self) -> bool:
        """Whether this run writes and reads per-pass timestamps."""
        self._since_sample += 1
        if not self.stamps or self._since_sample < SAMPLE_EVERY or \
                (self._reading is not None and not self._reading.done()):
            return False
        self._since_sample = 0
        return True

    def _read_stamps(self) -> Future:
        raw = self.backend.dev.read_buffer_async(self.resolve_buf, self.stamps * 8,
                                                 np.dtype(np.uint64), (self.stamps,))
        out: Future = Future()
        spans = self.spans

        def done(f: Future) -> None:
            try:
                stamps = f.result().astype(np.int64)
                ticks = np.maximum(stamps[1::2] - stamps[0::2], 0)
                times: dict[str, float] = {}
                for layer, t in zip(spans, ticks.tolist()):
                    times[layer] = times.get(layer, 0.0) + t * 1e-6
                self.last_times = times
                out.set_result(times)
            except Exception as exc:  # delivered to whoever waits on the profile
                out.set_exception(exc)

        raw.add_done_callback(done)
        return out


class PixelReplays(Replays):
    """GPU_PIXEL's replays by input signature (the bookkeeping is GPU_COMPUTE's)."""

    def recorder(self, model, plan, feeds: dict):
        from engine.backends.gpu_pixel.recording import PixelRecorder

        return PixelRecorder(model, plan, feeds)

    def build(self, backend, rec, outputs: dict):
        return PixelReplay(backend, rec, outputs)
