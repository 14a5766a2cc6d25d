// Strided copy: for every index of an iteration shape, y[out_base + idx . so] =
// x[in_base + (idx mod m) . si], moving `words` 32-bit words per element. Transpose, Slice,
// Expand, Tile, Concat, Split, Pad and DepthToSpace are all this one shader.
struct Params {
    n: i32, rank: i32, words: i32, in_base: i32,
    out_base: i32, pad0: i32, pad1: i32, pad2: i32,
    shape: array<vec4<i32>, 2>,
    si: array<vec4<i32>, 2>,
    so: array<vec4<i32>, 2>,
    m: array<vec4<i32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    var ii = p.in_base;
    var oo = p.out_base;
    var rem = i;
    for (var d = p.rank - 1; d >= 0; d--) {
        let size = p.shape[d / 4][d % 4];
        let c = rem % size;
        rem = rem / size;
        ii += (c % p.m[d / 4][d % 4]) * p.si[d / 4][d % 4];
        oo += c * p.so[d / 4][d % 4];
    }
    for (var w = 0; w < p.words; w++) {
        y[oo * p.words + w] = x[ii * p.words + w];
    }
}
