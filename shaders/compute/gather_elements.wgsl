// GatherElements: y[..., j, ...] = x[..., idx[..., j, ...], ...] along one axis.
struct Params {
    n: i32, rank: i32, axis: i32, words: i32,
    iw: i32, dim: i32, p0: i32, p1: i32,
    shape: array<vec4<i32>, 2>,
    si: array<vec4<i32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    var k = idx[i * p.iw];
    k = select(k, k + p.dim, k < 0);
    var src = 0;
    var rem = i;
    for (var d = p.rank - 1; d >= 0; d--) {
        let size = p.shape[d / 4][d % 4];
        var c = rem % size;
        rem = rem / size;
        if (d == p.axis) { c = k; }
        src += c * p.si[d / 4][d % 4];
    }
    for (var w = 0; w < p.words; w++) {
        y[i * p.words + w] = x[src * p.words + w];
    }
}
