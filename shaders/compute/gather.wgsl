// Gather along an axis: y[o, j, i] = x[o, idx[j], i] (negative indices count from the end).
// `iw` is 1 for int32 and 2 for int64 indices (the low word holds the value).
struct Params { n: i32, inner: i32, count: i32, dim: i32, words: i32, iw: i32, p0: i32, p1: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    let inner = i % p.inner;
    let j = (i / p.inner) % p.count;
    let outer = i / (p.inner * p.count);
    var k = idx[j * p.iw];
    k = select(k, k + p.dim, k < 0);
    let src = (outer * p.dim + k) * p.inner + inner;
    for (var w = 0; w < p.words; w++) {
        y[i * p.words + w] = x[src * p.words + w];
    }
}
