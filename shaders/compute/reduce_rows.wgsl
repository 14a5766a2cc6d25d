// Global pools on GPUs: one workgroup of 64 invocations per contiguous plane of R values.
// One invocation walking a whole plane reads it serially and uncoalesced (MobileNetV3's
// squeeze-and-excitation pools took ~28 us each on an H100 that way); here neighbouring
// invocations read neighbouring values, each folds its strided share, and the 64 partial
// results combine in workgroup memory with the same fold (sums and maxima alone: OP is
// ReduceSum or ReduceMax). The result is times `scale` (1 / R for a mean).
struct Params {
    n: i32, R: i32, _pad0: i32, _pad1: i32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

//!include common/math.wgsl
//!include compute/reduce_ops.wgsl

var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nw: vec3<u32>) {
    let o = i32(wid.x + wid.y * nw.x);
    if (o >= p.n) { return; }
    let base = o * p.R;
    var acc = init_${OP}();
    for (var r = i32(lid); r < p.R; r += 64) {
        acc = fold_${OP}(acc, x[base + r], 0.0);
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if (lid < s) {
            partial[lid] = fold_${OP}(partial[lid], partial[lid + s], 0.0);
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        y[o] = partial[0] * p.scale;
    }
}
