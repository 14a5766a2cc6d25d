// Inference BatchNormalization, four elements of one channel per invocation (inner % 4 == 0).
struct Params { n: i32, C: i32, inner: i32, eps: f32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> scale: array<f32>;
@group(0) @binding(3) var<storage, read> shift: array<f32>;
@group(0) @binding(4) var<storage, read> mean: array<f32>;
@group(0) @binding(5) var<storage, read> variance: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 64u);
    if (i >= p.n / 4) { return; }
    let c = (i * 4 / p.inner) % p.C;
    let s = scale[c] / sqrt(variance[c] + p.eps);
    y[i] = (x[i] - vec4<f32>(mean[c])) * s + vec4<f32>(shift[c]);
}
