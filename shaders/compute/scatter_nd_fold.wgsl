// ScatterND with a reduction: each output element starts from the data and folds in, in
// index-row order, every update whose row names its slice: a = fold_${FOLD}(a, u) of
// scatter_folds_${T}.wgsl, a the value so far and u the update. Rows are compared per
// element, so duplicates accumulate deterministically.
// `iw` is 1 for int32 and 2 for int64 indices (the low word holds the value).
struct Params {
    n: i32, slice: i32, depth: i32, rows: i32,
    iw: i32, p0: i32, p1: i32, p2: i32,
    dims: array<vec4<i32>, 2>,
    strides: array<vec4<i32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<${T}>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read> upd: array<${T}>;
@group(0) @binding(4) var<storage, read_write> y: array<${T}>;

//!include compute/scatter_folds_${T}.wgsl

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    let base = i - i % p.slice;
    var a = x[i];
    for (var r = 0; r < p.rows; r++) {
        var start = 0;
        for (var d = 0; d < p.depth; d++) {
            var k = idx[(r * p.depth + d) * p.iw];
            let dim = p.dims[d / 4][d % 4];
            k = select(k, k + dim, k < 0);
            start += k * p.strides[d / 4][d % 4];
        }
        if (start == base) {
            let u = upd[r * p.slice + i % p.slice];
            a = fold_${FOLD}(a, u);
        }
    }
    y[i] = a;
}
