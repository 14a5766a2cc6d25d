// TopK along one axis: one invocation per line picks its k elements by k scans, each taking
// the best element that comes after the previous pick in the order (value first, larger
// first when `largest`, then the smaller index). NaNs are never picked before numbers.
// Writes values and int64 indices (two words, the high one 0).
struct Params { n: i32, L: i32, inner: i32, k: i32, largest: i32, p0: i32, p1: i32, p2: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
@group(0) @binding(3) var<storage, read_write> indices: array<u32>;

// true when (va, ia) comes before (vb, ib)
fn before(va: f32, ia: i32, vb: f32, ib: i32) -> bool {
    let a_nan = va != va;
    let b_nan = vb != vb;
    if (a_nan || b_nan) {
        return (!a_nan && b_nan) || (a_nan && b_nan && ia < ib);
    }
    if (va == vb) {
        return ia < ib;
    }
    return select((va < vb), (va > vb), p.largest != 0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let t = i32(g.x + g.y * nw.x * 64u);
    if (t >= p.n) { return; }
    let outer = t / p.inner;
    let inner = t % p.inner;
    let base = outer * p.L * p.inner + inner;
    let obase = outer * p.k * p.inner + inner;
    var pv = 0.0;
    var pi = -1;
    for (var r = 0; r < p.k; r++) {
        var bv = 0.0;
        var bi = -1;
        for (var j = 0; j < p.L; j++) {
            let v = x[base + j * p.inner];
            if (pi >= 0 && !before(pv, pi, v, j)) { continue; }
            if (bi < 0 || before(v, j, bv, bi)) {
                bv = v;
                bi = j;
            }
        }
        pv = bv;
        pi = bi;
        let o = obase + r * p.inner;
        values[o] = bv;
        indices[2 * o] = u32(bi);
        indices[2 * o + 1] = 0u;
    }
}
