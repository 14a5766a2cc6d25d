// First pass of a long reduction with few outputs (a global pool over a large plane): the R
// contiguous values of output o are split over S invocations, invocation s folding values
// s, s + S, s + 2S, ... (neighbouring invocations read neighbouring values) into
// y[o * S + s], times `scale` (1 / R for a mean, 1 otherwise). A second pass reduces the S
// partial results of each output. The fold is the function of reduce_ops.wgsl named after OP.
struct Params {
    n: i32, R: i32, S: i32, _pad: i32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

//!include common/math.wgsl
//!include compute/reduce_ops.wgsl

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 64u);
    if (i >= p.n * p.S) { return; }
    let o = i / p.S;
    let s = i % p.S;
    let base = o * p.R;
    var acc = init_${OP}();
    for (var r = s; r < p.R; r += p.S) {
        acc = fold_${OP}(acc, x[base + r], 0.0);
    }
    y[i] = acc * p.scale;
}
