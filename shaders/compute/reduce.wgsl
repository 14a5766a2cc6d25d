// Reduction over a set of axes: one output per invocation, the reduced elements walked in
// row-major order of the reduced dims (kept dims: ks/kst, reduced dims: rs/rst). The
// reduction is the functions of reduce_ops.wgsl named after the op (OP).
struct Params {
    n: i32, R: i32, krank: i32, rrank: i32,
    ks: array<vec4<i32>, 2>,
    kst: array<vec4<i32>, 2>,
    rs: array<vec4<i32>, 2>,
    rst: array<vec4<i32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

//!include common/math.wgsl
//!include compute/reduce_ops.wgsl

// the reduced dims are passed in (registers): a uniform re-read per element was not hoisted
fn offset_of(r: i32, rrank: i32, rs: array<vec4<i32>, 2>, rst: array<vec4<i32>, 2>) -> i32 {
    if (rrank == 1) { return r * rst[0][0]; }
    var rem = r;
    var off = 0;
    for (var d = rrank - 1; d >= 0; d--) {
        let size = rs[d / 4][d % 4];
        off += (rem % size) * rst[d / 4][d % 4];
        rem = rem / size;
    }
    return off;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 64u);
    if (i >= p.n) { return; }
    var base = 0;
    var rem = i;
    for (var d = p.krank - 1; d >= 0; d--) {
        let size = p.ks[d / 4][d % 4];
        base += (rem % size) * p.kst[d / 4][d % 4];
        rem = rem / size;
    }
    let count = f32(p.R);
    let R = p.R;
    let rrank = p.rrank;
    let rs = p.rs;
    let rst = p.rst;
    var acc = init_${OP}();
    var top = neg_inf_f();
    if (two_pass_${OP}()) {
        for (var r = 0; r < R; r++) { top = max_f(top, x[base + offset_of(r, rrank, rs, rst)]); }
        // an infinite maximum shifts by 0: exp(inf - inf) would make a NaN of +-inf
        if (R == 0 || is_inf_f(top)) { top = 0.0; }
    }
    for (var r = 0; r < R; r++) {
        let v = x[base + offset_of(r, rrank, rs, rst)];
        acc = fold_${OP}(acc, v, top);
    }
    y[i] = finish_${OP}(acc, count, top);
}
