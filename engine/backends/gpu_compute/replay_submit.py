"""Writing a replayed run's inputs, recording its prepared ops and submitting them.

The ops of an output set are compute passes of (pipeline, bind group, workgroups, stamp)
dispatches and buffer copies (``replay.Replay``). Each set's ops are flattened once into raw
handles (``_flat``: the attribute lookups and unpacking were a third of recording a run).
With wgpu-native (``gpu_common.native``) the encoder, passes, copies, input writes, finish
and submit are direct calls; otherwise the same ops go through wgpu-py's public API.
"""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_common.native import NATIVE, RawRun


class Submitter:
    """One replay's run submission (one command encoder and one submit a run)."""

    def __init__(self, backend, raw: bool | None = None):
        self.backend = backend
        self._raw_run = RawRun(backend.device, backend.queue) \
            if NATIVE is not None and raw is not False else None
        self._flat: dict = {}  # id(ops) -> (ops, their dispatches as raw handles)
        #: whether runs can write per-layer timestamps (inside passes: raw calls only)
        self.stamps = self._raw_run is not None

    def forget(self) -> None:
        """Drop the flattened ops (the replay gave its output sets back)."""
        self._flat.clear()

    def submit(self, replay, feeds: dict, ops: list, sample: bool, copies: list = ()) -> None:
        """Write ``feeds`` into the replay's input buffers, record ``ops`` (with timestamps
        when ``sample``) and then ``copies`` ((source, destination, bytes)) into one encoder
        and submit it."""
        raw = self._raw_run
        if getattr(feeds, "written_by", None) is not replay:
            self.write_inputs(replay, feeds)
        if raw is None:
            self._submit_public(ops, copies)
            return
        flat = self._flat_ops(replay, ops)
        raw.run(lambda _: self._record_raw(raw, flat, sample and replay.query_set),
                (replay.query_set, replay.stamps, replay.resolve_buf) if sample else None,
                copies)

    @staticmethod
    def _record_raw(raw: RawRun, flat: list, query_set) -> None:
        _, lib, _ = NATIVE
        null = NATIVE[0].NULL
        qsi = query_set._internal if query_set else None
        stamp_at = lib.wgpuComputePassEncoderWriteTimestamp
        set_pipeline = lib.wgpuComputePassEncoderSetPipeline
        set_group = lib.wgpuComputePassEncoderSetBindGroup
        dispatch = lib.wgpuComputePassEncoderDispatchWorkgroups
        for op, calls in flat:
            if calls is None:
                raw.copy_buffer(*op[1:])
                continue
            p = raw.begin_compute()
            for pipe, group, x, y, z, stamp in calls:
                if stamp >= 0 and qsi is not None:
                    stamp_at(p, qsi, stamp)
                if pipe is not None:
                    set_pipeline(p, pipe)
                set_group(p, 0, group, 0, null)
                dispatch(p, x, y, z)
            if op[2] >= 0 and qsi is not None:
                stamp_at(p, qsi, op[2])
            raw.end_compute(p)

    def _flat_ops(self, replay, ops: list) -> list:
        """``ops`` with each pass's dispatches as (pipeline handle or None when unchanged,
        bind group handle, x, y, z, stamp), made once per output set."""
        known = self._flat.get(id(ops))
        if known is not None and known[0] is ops:
            return known[1]
        flat = []
        for op in ops:
            if op[0] == "copy":
                flat.append((op, None))
                continue
            calls, last = [], None
            for pipeline, group, (x, y, z), stamp in op[1]:
                calls.append((None if pipeline is last else pipeline._internal,
                              group._internal, x, y, z, stamp))
                last = pipeline
            flat.append((op, calls))
        if len(self._flat) > len(replay.ring):  # forget output sets the ring has dropped
            live = {id(entry[1]) for entry in replay.ring}
            self._flat = {k: v for k, v in self._flat.items() if k in live}
        self._flat[id(ops)] = (ops, flat)
        return flat

    def write_inputs(self, replay, feeds: dict) -> None:
        """Queue writes of ``feeds`` into the replay's input buffers (they copy the data:
        the arrays may change afterwards)."""
        raw = self._raw_run
        for name, buf in replay.feeds:
            value = _input_array(feeds[name])
            if not value.nbytes:
                continue
            if raw is not None:
                raw.write(buf, value)
            else:
                self.backend.queue.write_buffer(buf, 0, value)

    def _submit_public(self, ops: list, copies: list) -> None:
        """The same through wgpu-py's public API (no timestamps: ``stamps`` is False)."""
        backend = self.backend
        queue = backend.queue
        encoder = backend.device.create_command_encoder()
        for op in ops:
            if op[0] == "copy":
                encoder.copy_buffer_to_buffer(*op[1:])
                continue
            cpass = encoder.begin_compute_pass()
            for pipeline, group, groups, _ in op[1]:
                cpass.set_pipeline(pipeline)
                cpass.set_bind_group(0, group)
                cpass.dispatch_workgroups(*groups)
            cpass.end()
        for src, dst, size in copies:
            encoder.copy_buffer_to_buffer(src, 0, dst, 0, size)
        queue.submit([encoder.finish()])


def _input_array(value: np.ndarray) -> np.ndarray:
    """A model input as the bytes its buffer holds (booleans as 32-bit words)."""
    if value.dtype == np.dtype(bool):
        value = value.astype(np.uint32)
    return np.ascontiguousarray(value)
