"""Recording GPU_COMPUTE work: dispatches (each its own compute pass, so that where the
adapter has ``timestamp-query`` every layer gets GPU begin/end stamps) and buffer copies
into the backend's open command encoder, with uniform buffers and bind groups cached by
content. ``Encoding`` is a part of ``GpuComputeBackend`` and works on its state (device,
pipelines, caches, the recorder of a run being recorded for replay, a planning walk).
"""

from __future__ import annotations

import struct
from typing import Any

from engine.backends.gpu_common import gpu_errors
from engine.backends.gpu_compute.memory import GpuTensor
from engine.backends.gpu_compute.pipelines import Program
from engine.errors import KernelError

#: largest workgroup count per dispatch dimension that WebGPU guarantees
MAX_GROUPS = 65535


def pack(*values: int | float) -> bytes:
    """Uniform data: Python ints as i32 (u32 from 2**31), floats as f32, padded to 16 bytes."""
    fmt = "".join("f" if isinstance(v, float) else "I" if v >= 2**31 else "i" for v in values)
    data = struct.pack("<" + fmt, *values)
    size = max(32, (len(data) + 15) // 16 * 16)
    return data + bytes(size - len(data))


def groups_for(n_groups: int) -> tuple[int, int, int]:
    """Spread ``n_groups`` workgroups over x and y (shaders linearise with num_workgroups)."""
    n_groups = max(1, n_groups)
    if n_groups <= MAX_GROUPS:
        return (n_groups, 1, 1)
    return (MAX_GROUPS, (n_groups + MAX_GROUPS - 1) // MAX_GROUPS, 1)


class Encoding:
    """Dispatches and copies of ``GpuComputeBackend`` (see the module docstring)."""

    def _uniform(self, data: bytes):
        buf = self._uniforms.get(data)
        if buf is None:
            with gpu_errors("creating a uniform buffer"):
                buf = self.device.create_buffer_with_data(data=data, usage=self._uniform_usage)
            self._uniforms[data] = buf
            if len(self._uniforms) > 8192:
                self._uniforms.popitem(last=False)
                self._bind_groups.clear()
        return buf

    def dispatch(self, program: Program, bindings: list, params: bytes,
                 groups: tuple[int, int, int] | int) -> None:
        """Record one dispatch of ``program``. ``bindings``: GpuTensors or (tensor, byte
        offset, byte size) ranges for @binding(1...); binding 0 is the uniform ``params``."""
        if isinstance(groups, int):
            groups = groups_for(groups)
        if self._dry is not None:
            if program not in self._dry.programs:
                self._dry.programs.append(program)
            return
        if any(g > MAX_GROUPS for g in groups):
            raise KernelError(f"layer {self._layer!r}: dispatch {groups} exceeds the adapter's "
                              f"{MAX_GROUPS} workgroups per dimension")
        pipeline, layout = self.pipelines.get(program)
        if self._rec is not None:
            self._rec.dispatched(program, [_alloc_range(b) for b in bindings], params, groups)
        ubuf = self._uniform(params)
        ranges = [_range(b) for b in bindings]
        key = (program, id(ubuf), tuple((id(b), o, s) for b, o, s in ranges))
        bind_group = self._bind_groups.get(key)
        with gpu_errors(f"recording {program} for layer {self._layer!r}"):
            if bind_group is None:
                entries = [{"binding": 0, "resource": {"buffer": ubuf, "offset": 0,
                                                       "size": ubuf.size}}]
                entries += [{"binding": i, "resource": {"buffer": b, "offset": o, "size": s}}
                            for i, (b, o, s) in enumerate(ranges, 1)]
                bind_group = self.device.create_bind_group(layout=layout, entries=entries)
                self._bind_groups[key] = bind_group
                if len(self._bind_groups) > 8192:
                    self._bind_groups.popitem(last=False)
            encoder = self._open_encoder()
            writes = self._timestamps.writes(self._layer) if self._timestamps else None
            cpass = encoder.begin_compute_pass(timestamp_writes=writes)
            cpass.set_pipeline(pipeline)
            cpass.set_bind_group(0, bind_group)
            cpass.dispatch_workgroups(*groups)
            cpass.end()
        self.pipelines.warmed.add(program)

    def copy(self, src: GpuTensor, src_offset: int, dst: GpuTensor, dst_offset: int,
             nbytes: int) -> None:
        """Record a buffer-to-buffer copy (byte offsets and size multiples of 4)."""
        if self._dry is not None or nbytes == 0:
            return
        if self._rec is not None:
            self._rec.copied(src.alloc, src_offset, dst.alloc, dst_offset, nbytes)
        with gpu_errors(f"recording a copy for layer {self._layer!r}"):
            self._open_encoder().copy_buffer_to_buffer(src.buffer, src_offset, dst.buffer,
                                                       dst_offset, nbytes)

    def _open_encoder(self):
        if self._encoder is None:
            self._encoder = self.device.create_command_encoder()
        return self._encoder


def _alloc_range(binding) -> tuple[Any, int, int]:
    if isinstance(binding, GpuTensor):
        return binding.alloc, 0, binding.alloc.size
    t, offset, size = binding
    return t.alloc, offset, size


def _range(binding) -> tuple[Any, int, int]:
    if isinstance(binding, GpuTensor):
        return binding.buffer, 0, binding.alloc.size
    t, offset, size = binding
    return t.buffer, offset, size
