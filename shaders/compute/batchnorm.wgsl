// Inference BatchNormalization: per-channel affine transform of the normalised input.
struct Params { n: i32, C: i32, inner: i32, eps: f32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> scale: array<f32>;
@group(0) @binding(3) var<storage, read> shift: array<f32>;
@group(0) @binding(4) var<storage, read> mean: array<f32>;
@group(0) @binding(5) var<storage, read> variance: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    let c = (i / p.inner) % p.C;
    y[i] = (x[i] - mean[c]) * (scale[c] / sqrt(variance[c] + p.eps)) + shift[c];
}
