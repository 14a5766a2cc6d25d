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
from engine.backends.gpu_common.guards import PrefixMemo, guards_hold
from engine.backends.gpu_common.replayed import SAMPLE_EVERY, EarlyRead, publish_replayed_profile
from engine.backends.gpu_compute.replay import Replays
from engine.backends.gpu_pixel.handles import PixelTensor
from engine.backends.gpu_pixel.rawpass import PassList
from engine.backends.gpu_pixel.replay_submit import PixelSubmitter
from engine.ops.base import Meta
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
        self.prefix_ms: dict[str, float] = {}  # the last run's prefix times
        self.guards = rec.guards  # (condition, branch taken) of each If
        self.constants = rec.model.constants
        self._memo = PrefixMemo(self.prefix, self.constants)  # (unless the inputs repeat)
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
        #: (texture, (input name, dtype, shape)): each run's input writes; passes and copies
        writes, self.events = _plan_writes(r, rec.events, kept, out_ids, self.owned)
        #: input writes, passes and early copies into one submit (replay_submit.py)
        self._submitter = PixelSubmitter(backend, r, writes)
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
        #: outputs whose last run's value was read back: runs copy them out early
        self.read_back: set[str] = set()
        #: output sets: [{recorded output texture id: texture}, ids the caller holds, ops]
        self.ring: list[list] = []
        first = {id(t): t for t, _, _ in self.outputs.values()}
        self._adopt(first, busy=set(first))

    @property
    def writes(self) -> list:
        """(texture, (input name, dtype, shape)) of each run's input writes."""
        return self._submitter.writes

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

    def _ops(self, subst: dict) -> PassList:
        """The passes and texture copies of one output set (recorded textures substituted);
        with timestamps, pass k writes stamps 2k and 2k + 1."""
        r, items, count = self.r, [], 0
        with gpu_errors("preparing a replayed plan"):
            for ev in self.events:
                if ev[0] == "copy":
                    x, width = ev[5:] if len(ev) > 5 else (0, None)
                    items.append((None, subst.get(id(ev[2]), ev[2]),
                                  subst.get(id(ev[3]), ev[3]), (x, ev[4]), width))
                    continue
                _, _, (pipeline, bgl, n_tex), out, textures, params, *targets = ev
                group = r.bind_group(bgl, n_tex, [subst.get(id(t), t) for t in textures],
                                     params)
                stamp = 2 * count if self.stamps else -1
                count += 1
                if targets:  # several colour targets, the columns [0, width) of each
                    outs, width = targets
                    items.append(([subst.get(id(t), t).view for t in outs], pipeline, group,
                                  stamp, (width, out.height)))
                else:
                    items.append((subst.get(id(out), out).view, pipeline, group, stamp))
            return PassList(items, self.query_set)

    def release(self) -> None:
        """Hand every texture back to the pool (the replay is dropped)."""
        self.r.give_back(self.owned)
        for textures, busy, _ in self.ring:
            for tex in textures.values():
                self.r.owned.pop(id(tex), None)
            self.r.give_back([t for t in textures.values() if id(t) not in busy])
        self.owned, self.ring = [], []

    # -- running ----------------------------------------------------------------------------
    def inputs_for(self, worker, feeds: dict) -> dict | None:
        """``feeds`` and the host prefix's values, or None when an ``If`` would take
        another branch than the recorded run."""
        self.prefix_ms = {}
        if not self.prefix:
            return feeds
        values = self._memo.values(worker, self.prefix, self.constants, feeds,
                                   self.prefix_ms)
        return values if guards_hold(self.guards, values) else None

    def run(self, worker, values: dict, futures: dict[str, Future]):
        """The run loop of a replayed plan (a generator yielding each layer, as run_placed);
        ``values``: the inputs and host-prefix values (``inputs_for``)."""
        backend, r = self.backend, self.r
        free_released()
        t_run = time.perf_counter()
        backend.begin_run()
        r.flush()
        with gpu_errors("running a replayed plan"):
            entry = self._output_set()
            subst, passes = entry[0], entry[2]
            submitter = self._submitter
            raw = submitter.raw_run if passes.raw else None
            submitter.write_inputs(values, subst, raw)
            sample = self._sample_now()
            early = {name: EarlyRead(self, name) for name in self.outputs}
            stamps = submitter.submit(self, raw, passes, sample, subst, early)
        entry[1].update(subst)
        if sample:
            self._reading = self._read_stamps(stamps)
            r.add_timings(self._reading)
        # the profile before the outputs (as GPU_COMPUTE's replay: readers woken by them do
        # not compete with the engine thread for the rest of the run)
        publish_replayed_profile(worker, self.layers, self.last_times, t_run,
                                 self.prefix_ms)
        for name, fut in futures.items():
            tex, layout, meta = self.outputs[name]
            fut.set_result(Stored(backend, PixelTensor(layout, subst[id(tex)],
                                                       early=early[name]), meta))
        for layer, _ in self.layers:
            yield layer

    def _sample_now(self) -> bool:
        """Whether this run writes and reads per-pass timestamps."""
        self._since_sample += 1
        if not self.stamps or self._since_sample < SAMPLE_EVERY or \
                (self._reading is not None and not self._reading.done()):
            return False
        self._since_sample = 0
        return True

    def _read_stamps(self, staging) -> Future:
        raw = self.backend.dev.read_staged_async(staging, self.stamps * 8,
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


def _plan_writes(r, recorded: list, kept: set[int], out_ids: set[int], owned: list
                 ) -> tuple[list, list]:
    """(input writes of a run, draws and copies) from a recorded trace.

    A write of a value fixed by the signature gets a texture of its own, written once now:
    draws read that texture instead of the recorded one until the recorded one holds
    another tensor. An input written into a texture that held another tensor earlier in the
    run (reused after a mid-run submit) goes through a texture of its own and a copy in
    order with the passes: a run's queue writes all land before its passes. A write into a
    texture that outlives runs (a constant's) was done for good."""
    writes, events = [], []
    touched: set[int] = set()  # recorded textures used so far
    alias: dict[int, object] = {}  # recorded texture -> the fixed texture standing for it

    def sub(t):
        return alias.get(id(t), t)

    for ev in recorded:
        if ev[0] == "draw":  # [, the targets of a multi-target pass and its width]
            _, label, pipe, out, textures, params, *targets = ev
            events.append((ev[0], label, pipe, out, [sub(t) for t in textures], params,
                           *targets))
            outs = targets[0] if targets else [out]
            for t in outs:
                alias.pop(id(t), None)
            touched.update(map(id, [*outs, *textures]))
            continue
        if ev[0] == "copy":  # rows from y on [, or columns: x and width]
            _, layer, src, dst, y, *columns = ev
            if id(dst) in alias:  # rows copied into a fixed value: start from its data
                events.append(("copy", None, alias.pop(id(dst)), dst, 0))
            events.append(("copy", layer, sub(src), dst, y, *columns))
            touched.update((id(src), id(dst)))
            continue
        tex, feed, texels = ev[1:]
        if id(tex) not in kept:
            continue
        if feed is None:
            fixed = r.new_owned(tex.width, tex.height)
            r.write(fixed, texels)
            owned.append(fixed)
            alias[id(tex)] = fixed
            continue
        alias.pop(id(tex), None)
        if id(tex) in touched:
            staging = r.new_owned(tex.width, tex.height)
            owned.append(staging)
            events.append(("copy", None, staging, tex, 0))
            tex = staging
        touched.add(id(ev[1]))
        writes.append((tex, feed))
    for key, fixed in alias.items():  # an output holding a fixed value
        if key in out_ids:
            events.append(("copy", None, fixed, next(o for o in recorded if o[0] == "write"
                                                      and id(o[1]) == key)[1], 0))
    return writes, events
