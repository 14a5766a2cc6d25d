// Pad: every output index maps back to an input index (mode 0 constant, 1 reflect, 2 edge,
// 3 wrap); constant mode writes `value` outside the input.
struct Params {
    n: i32, rank: i32, words: i32, mode: i32,
    v0: u32, v1: u32, pad0: i32, pad1: i32,
    shape: array<vec4<i32>, 2>,
    ishape: array<vec4<i32>, 2>,
    before: array<vec4<i32>, 2>,
    si: array<vec4<i32>, 2>,
}

//!include common/int_math.wgsl

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    var ii = 0;
    var inside = true;
    var rem = i;
    for (var d = p.rank - 1; d >= 0; d--) {
        let size = p.shape[d / 4][d % 4];
        let dim = p.ishape[d / 4][d % 4];
        var c = rem % size - p.before[d / 4][d % 4];
        rem = rem / size;
        if (c < 0 || c >= dim) {
            if (p.mode == 0) {
                inside = false;
            } else if (p.mode == 1) {
                let period = max(2 * dim - 2, 1);
                c = abs(c) % period;
                c = select(c, period - c, c >= dim);
            } else if (p.mode == 2) {
                c = clamp(c, 0, dim - 1);
            } else {
                c = wrap_i32(c, dim);
            }
        }
        ii += c * p.si[d / 4][d % 4];
    }
    for (var w = 0; w < p.words; w++) {
        var v = select(p.v0, p.v1, w == 1);
        if (inside) { v = x[ii * p.words + w]; }
        y[i * p.words + w] = v;
    }
}
