// Probe of a device's f32 arithmetic (gpu_common/arith_probe.py): y[i] = a / b for each
// pair, and in the last slot fma(f[0], f[1], f[2]), which is 2^-24 for the values the probe
// passes when fma is fused and 0 when it is a multiply and then an add.
@group(0) @binding(0) var<storage, read> pairs: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read> f: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let n = arrayLength(&pairs);
    if (g.x < n) { y[g.x] = pairs[g.x].x / pairs[g.x].y; }
    if (g.x == 0u) { y[n] = fma(f[0], f[1], f[2]); }
}
