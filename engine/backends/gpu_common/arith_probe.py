"""What a device's f32 arithmetic gets right, probed once per device.

Vulkan lets a GPU divide to 2.5 ulp. NVIDIA's driver does (a quarter of random quotients are
1 or 2 ulp off), which moves results across rounding boundaries that ONNX models rely on: a
Round after a Div (DynamicQuantizeLinear written out). Where division is inexact and ``fma``
is fused, the shaders' ``div_f`` corrects the quotient by its exact remainder (``override
DIV_CORRECTION`` in ``common/math.wgsl``). Where ``fma`` is a multiply and an add (lavapipe),
that correction would do harm; there the probe has so far always found division correctly
rounded. (Index arithmetic that must be exact, such as a nearest Resize's source indices,
is done on the host instead.)
"""

from __future__ import annotations

import threading

import numpy as np

from engine.backends.gpu_common.shaders import load_shader

#: name of the pipeline-overridable constant that turns the correction on
OVERRIDE = "DIV_CORRECTION"

_lock = threading.Lock()
_results: dict[int, tuple[object, dict]] = {}


def _pairs() -> np.ndarray:
    rng = np.random.default_rng(12345)
    b = rng.uniform(0.1, 10.0, 2048).astype(np.float32)
    a = np.concatenate([(rng.integers(1, 60, 1024) * b[:1024]).astype(np.float32),
                        rng.uniform(-100.0, 100.0, 1024).astype(np.float32)])
    return np.stack([a, b], axis=1)


def probe(device) -> dict:
    """``{"exact_division": bool, "fused_fma": bool}`` of ``device`` (a wgpu GPUDevice),
    measured by one small dispatch the first time and remembered."""
    with _lock:
        hit = _results.get(id(device))
        if hit is not None and hit[0] is device:
            return hit[1]
        import wgpu

        pairs = _pairs()
        fma_in = np.array([1 + 2.0 ** -12, 1 + 2.0 ** -12, -(1 + 2.0 ** -11), 0], np.float32)
        n = len(pairs)
        usage = wgpu.BufferUsage
        bufs = [device.create_buffer_with_data(data=pairs, usage=usage.STORAGE),
                device.create_buffer_with_data(data=fma_in, usage=usage.STORAGE),
                device.create_buffer(size=4 * (n + 1), usage=usage.STORAGE | usage.COPY_SRC)]
        module = device.create_shader_module(code=load_shader("compute/probe_arith.wgsl"))
        pipeline = device.create_compute_pipeline(
            layout="auto", compute={"module": module, "entry_point": "main"})
        group = device.create_bind_group(
            layout=pipeline.get_bind_group_layout(0),
            entries=[{"binding": k, "resource": {"buffer": b}} for k, b in enumerate(bufs)])
        enc = device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        cpass.set_pipeline(pipeline)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups((n + 63) // 64)
        cpass.end()
        device.queue.submit([enc.finish()])
        got = np.frombuffer(device.queue.read_buffer(bufs[2]), np.float32)
        want = pairs[:, 0] / pairs[:, 1]
        result = {"exact_division": bool(np.array_equal(got[:n], want)),
                  "fused_fma": bool(got[n] == np.float32(2.0 ** -24))}
        for b in bufs:
            b.destroy()
        _results[id(device)] = (device, result)
        return result


def division_constants(device, code: str) -> dict:
    """Pipeline constants for a shader ``code``: the division correction where the shader
    has it and the device needs it and can do it."""
    if f"override {OVERRIDE}" not in code:
        return {}
    found = probe(device)
    if not found["exact_division"] and found["fused_fma"]:
        return {OVERRIDE: 1}
    return {}
