// Softmax / LogSoftmax / Hardmax along one axis: one line (length L, stride inner) per
// invocation.
struct Params { n: i32, L: i32, inner: i32, pad0: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 64u);
    if (i >= p.n) { return; }
    let base = (i / p.inner) * p.L * p.inner + i % p.inner;
    var top = x[base];
    var at = 0;
    for (var j = 1; j < p.L; j++) {
        let v = x[base + j * p.inner];
        if (v > top) { top = v; at = j; }
    }
    var sum = 0.0;
    for (var j = 0; j < p.L; j++) { sum += exp(x[base + j * p.inner] - top); }
    let lsum = log(sum);
    for (var j = 0; j < p.L; j++) {
        let v = x[base + j * p.inner];
        y[base + j * p.inner] = ${expr};
    }
}
