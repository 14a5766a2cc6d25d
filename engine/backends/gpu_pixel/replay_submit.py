"""Writing a GPU_PIXEL replay's inputs, recording its passes and the early output copies,
and submitting them (``replay.PixelReplay.run``).

Inputs are packed into the same host texel arrays every run (a new array costs page faults)
and written into their textures; the passes (``rawpass.PassList``), then the copies of the
outputs read after the previous run (``replayed.EarlyRead``) and of the sampled timestamps,
go into one command encoder: with wgpu-native (``gpu_common.native``) as direct calls,
otherwise through wgpu-py's public API.
"""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_common.native import NATIVE, RawRun
from engine.backends.gpu_pixel.layout import pack
from engine.backends.gpu_pixel.renderer import padded_row, texture_read_bytes


class PixelSubmitter:
    """One replay's input writes and submission."""

    def __init__(self, backend, r, writes: list):
        self.backend, self.r = backend, r
        #: (texture, (input name, dtype, shape)) of each input write
        self.writes = writes
        self._texels: list = [None] * len(writes)
        #: the encoder, input writes and submit as direct calls (gpu_common/native.py)
        self.raw_run = RawRun(backend.device, r.queue) if NATIVE is not None else None
        self._targets: dict[int, tuple] = {}  # id(texture) -> its raw write descriptors

    def write_inputs(self, values: dict, subst: dict, raw) -> None:
        """Pack ``values``' inputs and write them into their textures (or the output set's
        stand-ins, ``subst``); ``raw``: the RawRun, or None for the public API."""
        r = self.r
        for k, (tex, (name, dtype, shape)) in enumerate(self.writes):
            value = values[name]
            if dtype is not None:
                value = np.ascontiguousarray(value, dtype=dtype)
            if shape is not None:
                value = value.reshape(shape)
            texels = self._texels[k] = pack(value, self._texels[k])
            target = subst.get(id(tex), tex)
            if raw is None:
                r.write(target, texels)
            else:
                raw.write_texture(self._write_target(target), texels)

    def submit(self, replay, raw, passes, sample: bool, subst: dict, early: dict):
        """Record the passes, then copies of the outputs whose previous run's value was
        read (``EarlyRead``) and of the timestamps when ``sample``, and submit them; returns
        the timestamps' staging buffer (None when not ``sample``)."""
        dev = self.backend.dev
        outs = []  # (output texture, staging buffer)
        for name in tuple(replay.read_back):  # (a snapshot: readers add to it from any thread)
            tex = subst[id(replay.outputs[name][0])]
            nbytes = texture_read_bytes(tex)
            early[name].staging, early[name].nbytes = dev.staging_buffer(nbytes), nbytes
            outs.append((tex, early[name].staging))
        count = replay.stamps
        stamps = dev.staging_buffer(count * 8) if sample else None
        stamp_copy = [(replay.resolve_buf, stamps, count * 8)] if sample else []
        try:
            if raw is None:
                self._submit_public(replay, passes, sample, outs, stamp_copy)
            else:
                def record(enc) -> None:
                    passes.record(enc, sample)
                    for tex, staging in outs:
                        raw.copy_texture(tex.texture, tex.width, tex.height, staging,
                                         padded_row(tex))

                raw.run(record, (replay.query_set, count, replay.resolve_buf)
                        if sample else None, stamp_copy)
        except BaseException:
            for staging in [b for _, b in outs] + ([stamps] if sample else []):
                dev.give_back_staging(staging)
            raise
        return stamps

    def _submit_public(self, replay, passes, sample: bool, outs: list,
                       stamp_copy: list) -> None:
        encoder = self.backend.device.create_command_encoder()
        passes.record(encoder, sample)
        if sample:
            encoder.resolve_query_set(replay.query_set, 0, replay.stamps, replay.resolve_buf, 0)
        for src, dst, size in stamp_copy:
            encoder.copy_buffer_to_buffer(src, 0, dst, 0, size)
        for tex, staging in outs:
            encoder.copy_texture_to_buffer(
                {"texture": tex.texture, "origin": (0, 0, 0)},
                {"buffer": staging, "offset": 0, "bytes_per_row": padded_row(tex),
                 "rows_per_image": tex.height}, (tex.width, tex.height, 1))
        self.r.queue.submit([encoder.finish()])

    def _write_target(self, tex) -> tuple:
        """The raw write descriptors of all of ``tex`` (made once per texture)."""
        target = self._targets.get(id(tex))
        if target is None or target[0] is not tex.texture:
            target = self._targets[id(tex)] = self.raw_run.texture_target(
                tex.texture, tex.width, tex.height)
        return target
