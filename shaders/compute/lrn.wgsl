// Local response normalisation across channels.
struct Params { n: i32, C: i32, inner: i32, size: i32, alpha: f32, beta: f32, bias: f32, pad0: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    let c = (i / p.inner) % p.C;
    let lo = max(0, c - (p.size - 1) / 2);
    let hi = min(p.C - 1, c + p.size / 2);
    var sq = 0.0;
    for (var k = lo; k <= hi; k++) {
        let v = x[i + (k - c) * p.inner];
        sq += v * v;
    }
    y[i] = x[i] / pow(p.bias + p.alpha / f32(p.size) * sq, p.beta);
}
