// ArgMax / ArgMin along one axis; writes int64 indices (two words, the high one 0).
struct Params { n: i32, L: i32, inner: i32, last: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 64u);
    if (i >= p.n) { return; }
    let base = (i / p.inner) * p.L * p.inner + i % p.inner;
    var best = x[base];
    var at = 0;
    for (var j = 1; j < p.L; j++) {
        let v = x[base + j * p.inner];
        if (v ${cmp} best || (p.last != 0 && v == best)) {
            best = v;
            at = j;
        }
    }
    y[2 * i] = u32(at);
    y[2 * i + 1] = 0u;
}
