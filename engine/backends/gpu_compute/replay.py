"""Replaying a recorded plan: a run writes its inputs and records prepared dispatches only.

``build`` turns a ``Recorder``'s trace into fixed device state: intermediate tensors get
buffers from a liveness-planned arena (taken from the backend's pool, kept while the replay
lives), uploads of values fixed by the signature get their own buffers written once,
constants are bound where they already live; each dispatch gets its bind group and uniform
buffer. ``run`` then writes the inputs into their buffers and records every dispatch in as
few compute passes as the trace allows (copies end a pass), with raw wgpu-native calls
(``replay_submit.py``).

Per-layer GPU times come from timestamps written inside the passes at layer boundaries
(``timestamp-query-inside-passes``), sampled: reading stamps back costs the host more than
recording the whole run, so the first replayed run and then every ``SAMPLE_EVERY``-th one
write and read them (the profile's total is then the latency until the GPU finished). The
other runs' profiles repeat the last sampled GPU times, with a source that says so, and
their total is the host time of the run. Without the feature a replay has no GPU times.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from concurrent.futures import Future

import numpy as np

from engine.backends.base import BackendType
from engine.backends.gpu_common import gpu_errors
from engine.backends.gpu_common.device import staging_size
from engine.backends.gpu_common.guards import PrefixMemo, guards_hold
from engine.backends.gpu_common.replayed import SAMPLE_EVERY, EarlyRead, publish_replayed_profile
from engine.backends.gpu_compute.memory import GpuTensor
from engine.backends.gpu_compute.replay_submit import Submitter
from engine.tensor import Stored, free_released

#: timestamps a replay may write (one query set)
MAX_STAMPS = 4096
#: output buffer sets a replay keeps (a set is reused once its tensors are released)
RING = 3
INSIDE_PASSES = "timestamp-query-inside-passes"


class Replay:
    """Everything a run of one plan needs that does not depend on the input values."""

    def __init__(self, backend, model, plan):
        self.backend, self.model = backend, model
        self.feeds: list[tuple[str, object]] = []  # (input name, buffer)
        self.outputs: dict[str, tuple[int, GpuTensor]] = {}  # (allocation id, recorded)
        self.metas: dict[str, object] = {}
        #: output sets: ({allocation id: pool Allocation}, ops writing into them), where
        #: ops are ("pass", [(pipeline, bind group, groups, stamp)], end stamp) and copies
        self.ring: list[tuple[dict, list]] = []
        self.make_ops = None  # {allocation id: Allocation} -> ops (set by recording.build)
        self.uniforms: dict[bytes, object] = {}
        self.spans: list[tuple[str, int, int]] = []  # (layer, first stamp, last stamp)
        self.stamps = 0
        self.query_set = self.resolve_buf = None
        self.last_times: dict[str, float] | None = None  # GPU ms of the last sampled run
        self._since_sample = SAMPLE_EVERY
        self._reading: Future | None = None
        self.prefix_ms: dict[str, float] = {}  # the last run's prefix times (ms)
        #: outputs whose last run's value was read back: runs copy them out early
        self.read_back: set[str] = set()
        self.layers = [(layer, BackendType.CPU if plan.placement[layer.name].backend
                        is BackendType.CPU else backend.type) for layer in model.layers]
        self._arena: list = []  # pool allocations held by the replay
        self.prefix: list = []  # CPU layers computing If conditions (recording.analyse)
        self.guards: list = []  # (condition, branch taken) of each If
        self._memo: PrefixMemo | None = None  # the prefix's values for the last inputs
        self._objects: list = []  # buffers of fixed values: kept alive
        #: writes the inputs, records the ops and submits (replay_submit.py)
        self._submitter = Submitter(backend)

    def inputs_for(self, worker, feeds: dict) -> dict | None:
        """``feeds`` and the host prefix's values, or None when an ``If`` would take
        another branch than the recorded run."""
        self.prefix_ms = {}
        if not self.guards:
            return feeds
        if self._memo is None:
            self._memo = PrefixMemo(self.prefix, self.model.constants)
        values = self._memo.values(worker, self.prefix, self.model.constants, feeds,
                                   self.prefix_ms)
        return values if guards_hold(self.guards, values) else None

    def write_inputs(self, feeds: dict) -> None:
        """Queue writes of ``feeds`` into the input buffers now (``Replays.write_now``)."""
        self._submitter.write_inputs(self, feeds)

    def release(self) -> None:
        """Give the arena and the output sets back to the pool (the replay is dropped)."""
        for alloc in self._arena:
            self.backend.pool.release(alloc)
        self._arena.clear()
        for allocs, _ in self.ring:
            for alloc in allocs.values():
                self.backend.pool.release(alloc)
        self.ring.clear()
        self._submitter.forget()

    def adopt(self, allocs: dict) -> tuple[dict, list]:
        """Add an output set (holding one reference to each allocation) and its ops."""
        for alloc in allocs.values():
            alloc.refs += 1
        self.ring.append((allocs, self.make_ops(allocs)))
        if len(self.ring) > RING:  # every set is still held by tensors: drop the oldest
            for alloc in self.ring.pop(0)[0].values():
                self.backend.pool.release(alloc)
        return self.ring[-1]

    def _output_set(self) -> tuple[dict, list]:
        """A set whose previous tensors were all released (only the ring holds them)."""
        for entry in self.ring:
            if all(a.refs == 1 for a in entry[0].values()):
                return entry
        pool = self.backend.pool
        allocs = {aid: pool.acquire(t.alloc.size) for aid, t in self.outputs.values()}
        for alloc in allocs.values():
            alloc.refs -= 1  # adopt() takes the ring's reference
        return self.adopt(allocs)

    # -- running ----------------------------------------------------------------------------
    def run(self, worker, feeds: dict, futures: dict[str, Future]):
        """The run loop of a replayed plan (a generator yielding each layer, as run_placed)."""
        backend = self.backend
        free_released()
        t_run = time.perf_counter()
        backend.begin_run()
        backend.flush()
        gpu = backend.gpu
        with gpu_errors("running a replayed plan"):
            allocs, ops = self._output_set()
            sample = self._sample_now()
            early = {name: EarlyRead(self, name) for name in self.outputs}
            copies = self._early_copies(gpu, allocs, early, sample)
            try:
                self._submitter.submit(self, feeds, ops, sample, copies)
            except BaseException:
                for _, staging, _ in copies:
                    gpu.give_back_staging(staging)
                raise
            outs = {}
            for name, (aid, like) in self.outputs.items():
                alloc = allocs[aid]
                alloc.refs += 1  # the output tensor's reference; the ring keeps its own
                outs[name] = GpuTensor(alloc, like.shape, like.dtype, early[name])
        if sample:
            self._reading = self._read_stamps(copies[-1][1])
            backend._timestamps.add(self._reading)
        # the profile before the outputs: a reader woken by them (download_staged) then
        # finds the engine thread done with the run rather than competing with it
        publish_replayed_profile(worker, self.layers, self.last_times, t_run,
                                 self.prefix_ms)
        for name, fut in futures.items():
            fut.set_result(Stored(backend, outs[name], self.metas[name]))
        for layer, _ in self.layers:
            yield layer

    def _sample_now(self) -> bool:
        """Whether this run writes and reads per-layer timestamps."""
        self._since_sample += 1
        if self.query_set is None or self.backend._timestamps is None or \
                not self._submitter.stamps or \
                self._since_sample < SAMPLE_EVERY or \
                (self._reading is not None and not self._reading.done()):
            return False
        self._since_sample = 0
        return True

    def _early_copies(self, gpu, allocs: dict, early: dict, sample: bool) -> list:
        """(source, staging buffer, bytes) of the copies the run records after its work: the
        outputs whose previous run's values were read back (``EarlyRead``), then the
        resolved timestamps when ``sample``. A read then maps the staging buffer without a
        command buffer and a submit of its own (the second submit was most of a small
        model's readback on the engine thread)."""
        copies = []
        staging_of = gpu.reader.staging  # (inside the run's gpu_errors)
        for name in tuple(self.read_back):  # (a snapshot: readers add to it from any thread)
            aid, like = self.outputs[name]
            nbytes = like.nbytes
            if nbytes:
                size = staging_size(nbytes)
                entry = early[name]
                entry.staging, entry.nbytes = staging_of(size), nbytes
                copies.append((allocs[aid].buffer, entry.staging, size))
        if sample:
            nbytes = self.stamps * 8
            copies.append((self.resolve_buf, staging_of(staging_size(nbytes)), nbytes))
        return copies

    def _read_stamps(self, staging) -> Future:
        raw = self.backend.gpu.read_staged_async(staging, self.stamps * 8,
                                                 np.dtype(np.uint64), (self.stamps,))
        out: Future = Future()
        spans = self.spans

        def done(f: Future) -> None:
            try:
                stamps = f.result().astype(np.int64)
                times: dict[str, float] = {}
                for layer, start, end in spans:
                    times[layer] = times.get(layer, 0.0) + max(
                        int(stamps[end]) - int(stamps[start]), 0) * 1e-6
                self.last_times = times
                out.set_result(times)
            except Exception as exc:  # delivered to whoever waits on the profile
                out.set_exception(exc)

        raw.add_done_callback(done)
        return out


class WrittenFeeds(dict):
    """Feeds already written into ``replay``'s input buffers (``Replays.write_now``)."""

    def __init__(self, feeds: dict, replay: Replay):
        super().__init__(feeds)
        self.written_by = replay


class Replays:
    """A backend's replays by input signature (the most recently used few), the recorder
    armed for a run, and each signature's status.

    A signature's second run is recorded (a model run once, as in a conformance case or a
    ``compare``, never pays for building a replay; the first run also uploads constants).
    """

    MAX = 4
    #: the run of a signature that is recorded, and the last one tried when recording fails
    RECORD_AT, LAST_TRY = 2, 3

    def __init__(self, backend):
        self.backend = backend
        self._by_sig: OrderedDict = OrderedDict()
        self._runs: dict = {}
        self.status: dict = {}

    def start(self, worker, plan, feeds: dict, futures: dict, keep: set):
        backend = self.backend
        backend._rec = None
        sig = plan.signature
        if keep or sig is None or not backend.replay or backend._closed:
            return None
        replay = self._by_sig.get(sig)
        if replay is not None:
            values = replay.inputs_for(worker, feeds)
            if values is None:  # an If takes another branch than when recorded
                return None
            self._by_sig.move_to_end(sig)
            return replay.run(worker, values, futures)
        if self.status.get(sig, "recording") != "recording":
            return None  # not replayable: the status says why
        runs = self._runs[sig] = self._runs.get(sig, 0) + 1
        if not self.RECORD_AT <= runs <= self.LAST_TRY:
            return None
        rec = self.recorder(worker.model, plan, feeds)
        if rec.reason:
            self.status[sig] = rec.reason
            return None
        self.status[sig] = "recording"
        backend._rec, rec.signature, rec.worker = rec, sig, worker
        return None

    def write_now(self, sig, arrays: dict) -> dict | None:
        """Write ``arrays`` into the input buffers of the replay of ``sig`` now (called off
        the engine thread while no run of the worker is pending: ``Worker._written_feeds``);
        the feeds for its run, or None (no replay, or one with If conditions to check)."""
        replay = self._by_sig.get(sig)
        if replay is None or replay.guards or self.status.get(sig) != "replayed" or \
                self.backend._closed:
            return None
        with gpu_errors("writing a run's inputs"):
            replay.write_inputs(arrays)
        return WrittenFeeds(arrays, replay)

    def finish(self, outputs: dict) -> None:
        backend = self.backend
        rec, backend._rec = backend._rec, None
        if rec is None:
            return
        problem = rec.problem(outputs)
        if problem:
            self.status[rec.signature] = problem
            return
        self._by_sig[rec.signature] = self.build(backend, rec, outputs)
        self.status[rec.signature] = "replayed"
        while len(self._by_sig) > self.MAX:
            sig, old = self._by_sig.popitem(last=False)
            old.release()
            self.status.pop(sig, None)
            self._runs.pop(sig, None)

    def recorder(self, model, plan, feeds: dict):
        from engine.backends.gpu_compute.recording import Recorder

        return Recorder(model, plan, feeds)

    def build(self, backend, rec, outputs: dict):
        from engine.backends.gpu_compute.replay_build import build

        return build(backend, rec, outputs)

    def clear(self) -> None:
        for replay in self._by_sig.values():
            replay.release()
        self._by_sig.clear()
