// ScatterND (reduction none) after y was filled with a copy of the data: update element u
// goes to the slice named by index row u / slice (negative indices count from the end).
// `iw` is 1 for int32 and 2 for int64 indices (the low word holds the value).
struct Params {
    n: i32, slice: i32, depth: i32, words: i32,
    iw: i32, p0: i32, p1: i32, p2: i32,
    dims: array<vec4<i32>, 2>,
    strides: array<vec4<i32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> idx: array<i32>;
@group(0) @binding(2) var<storage, read> upd: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let u = i32(g.x + g.y * nw.x * 256u);
    if (u >= p.n) { return; }
    let row = u / p.slice;
    var dst = u % p.slice;
    for (var d = 0; d < p.depth; d++) {
        var k = idx[(row * p.depth + d) * p.iw];
        let dim = p.dims[d / 4][d % 4];
        k = select(k, k + dim, k < 0);
        dst += k * p.strides[d / 4][d % 4];
    }
    for (var w = 0; w < p.words; w++) {
        y[dst * p.words + w] = upd[u * p.words + w];
    }
}
