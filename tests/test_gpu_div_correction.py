"""The shaders' corrected division (``div_f``, ``div_f4`` in ``common/math.wgsl`` with
``DIV_CORRECTION`` on), forced on whatever adapter runs the tests: it compiles, it gives
NumPy's float32 quotient where the device's fma is fused (to 1 ulp of the quotient where it is
a multiply and an add, as on lavapipe, whose own division is exact and never corrected), and
zeros, infinities, NaN and divisors whose reciprocal leaves the normal range keep the plain
quotient."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.gpu_common.arith_probe import probe
from engine.backends.gpu_common.shaders import load_shader

pytestmark = pytest.mark.usefixtures("require_gpu")

# test-only entry point around the shipped helpers: lane 0 through div_f, lane 1 through
# div_f4 (the operand in its third component, the others dividing ones)
ENTRY = """
@group(0) @binding(0) var<storage, read> ab: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read_write> res: array<vec2<f32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = g.x;
    if (i >= arrayLength(&ab)) { return; }
    let a = ab[i].x;
    let b = ab[i].y;
    let v = div_f4(vec4<f32>(1.0, 2.0, a, 4.0), vec4<f32>(1.0, 1.0, b, 1.0));
    res[i] = vec2<f32>(div_f(a, b), v.z);
}
"""


def _divide(device, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    import wgpu

    usage = wgpu.BufferUsage
    pairs = np.stack([a, b], axis=1).astype(np.float32)
    src = device.create_buffer_with_data(data=pairs, usage=usage.STORAGE)
    dst = device.create_buffer(size=pairs.nbytes, usage=usage.STORAGE | usage.COPY_SRC)
    module = device.create_shader_module(code=load_shader("common/math.wgsl") + ENTRY)
    pipeline = device.create_compute_pipeline(
        layout="auto",
        compute={"module": module, "entry_point": "main", "constants": {"DIV_CORRECTION": 1}})
    group = device.create_bind_group(
        layout=pipeline.get_bind_group_layout(0),
        entries=[{"binding": 0, "resource": {"buffer": src}},
                 {"binding": 1, "resource": {"buffer": dst}}])
    encoder = device.create_command_encoder()
    cpass = encoder.begin_compute_pass()
    cpass.set_pipeline(pipeline)
    cpass.set_bind_group(0, group)
    cpass.dispatch_workgroups(-(-len(a) // 64))
    cpass.end()
    device.queue.submit([encoder.finish()])
    got = np.frombuffer(device.queue.read_buffer(dst), np.float32).reshape(-1, 2).copy()
    src.destroy()
    dst.destroy()
    return got


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    # in units of the gap above the reference quotient: a result one float below an exact
    # power of two is 1 ulp off (the gap below it is half as wide, so counting floats says 2)
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return err / np.spacing(np.abs(want)).astype(np.float64)


def test_corrected_quotients(rng):
    from engine.backends.gpu_common import get_device

    device = get_device().device
    b = rng.uniform(0.01, 10.0, 8192).astype(np.float32)
    k = rng.integers(-60, 60, 8192).astype(np.float32)
    a = np.concatenate([(k[:4096] * b[:4096]).astype(np.float32),
                        (rng.standard_normal(4096) * 100).astype(np.float32)])
    got = _divide(device, a, b)
    want = a / b
    limit = 0 if probe(device)["fused_fma"] else 1
    for lane in range(2):
        worst = float(_ulps(got[:, lane], want).max())
        assert worst <= limit, (lane, worst, limit)


def test_special_operands_keep_the_plain_quotient(rng):
    from engine.backends.gpu_common import get_device

    device = get_device().device
    a = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5.0, -5.0, 1.0, 0.0, 1e38, 3.0, 7.5],
                 np.float32)
    b = np.array([3.0, 2.0, 3.0, 2.0, 1.0, 0.0, 0.0, np.inf, -4.0, 1e-5, np.nan, -2.5],
                 np.float32)
    got = _divide(device, a, b)
    with np.errstate(all="ignore"):
        want = a / b
    for lane in range(2):
        x = got[:, lane]
        same = (x == want) & (np.signbit(x) == np.signbit(want)) | np.isnan(x) & np.isnan(want)
        assert same.all(), (lane, list(zip(a, b, x, want)))
