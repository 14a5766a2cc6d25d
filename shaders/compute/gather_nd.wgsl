// GatherND: output element i copies element s = i % slice of the data slice named by index
// row r = i / slice, inside batch r / rows (batch_dims > 0). Negative indices count from
// the end. `iw` is 1 for int32 and 2 for int64 indices (the low word holds the value).
struct Params {
    n: i32, slice: i32, depth: i32, words: i32,
    iw: i32, rows: i32, batch: i32, p0: i32,
    dims: array<vec4<i32>, 2>,
    strides: array<vec4<i32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    let r = i / p.slice;
    var src = (r / p.rows) * p.batch + i % p.slice;
    for (var d = 0; d < p.depth; d++) {
        var k = idx[(r * p.depth + d) * p.iw];
        let dim = p.dims[d / 4][d % 4];
        k = select(k, k + dim, k < 0);
        src += k * p.strides[d / 4][d % 4];
    }
    for (var w = 0; w < p.words; w++) {
        y[i * p.words + w] = x[src * p.words + w];
    }
}
