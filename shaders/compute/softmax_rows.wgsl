// Softmax / LogSoftmax along contiguous lines (inner = 1), one workgroup of 64 invocations
// per line. For GPUs: softmax.wgsl's one invocation walking a whole line reads memory
// serially and uncoalesced (a Whisper-sized score row of 1500 took 0.7 ms a layer on a real
// GPU); on CPU adapters, where barriers are costly, softmax.wgsl stays. Each invocation folds
// its strided share of the line into (maximum, sum of exp(v - maximum)) as softmax.wgsl
// does; the 64 pairs then merge in workgroup memory. zero: always 0 (as in softmax.wgsl).
struct Params { n: i32, L: i32, inner: i32, zero: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

//!include common/math.wgsl
//!include compute/softmax_ops.wgsl

var<workgroup> tops: array<f32, 64>;
var<workgroup> sums: array<f32, 64>;

// one (maximum, sum) of two: equal maxima add (two -inf or two +inf too, where exp(m - m)
// would be NaN; an invocation without elements holds (-inf, 0)); a NaN stays in the sum
fn merge(m1: f32, s1: f32, m2: f32, s2: f32) -> vec2<f32> {
    if (m1 == m2) { return vec2<f32>(m1, s1 + s2); }
    if (m1 > m2) { return vec2<f32>(m1, s1 + s2 * exp(m2 - m1)); }
    if (m2 > m1) { return vec2<f32>(m2, s2 + s1 * exp(m1 - m2)); }
    return vec2<f32>(m1 + m2, s1 + s2 + m1 + m2);  // a NaN maximum: NaN
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nw: vec3<u32>) {
    let line = i32(wid.x + wid.y * nw.x);
    if (line >= p.n) { return; }
    let L = p.L;
    let base = line * L;
    let inf = bitcast<f32>(0x7f800000u);
    var top = -inf;
    var sum = 0.0;
    for (var j = i32(lid); j < L; j += 64) {
        let v = x[base + j];
        if (v > top) {
            sum = sum * exp(top - v) + 1.0;
            top = v;
        } else if (v == top) {
            sum += 1.0;
        } else {
            sum += exp(v - top);
        }
    }
    tops[lid] = top;
    sums[lid] = sum;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if (lid < s) {
            let m = merge(tops[lid], sums[lid], tops[lid + s], sums[lid + s]);
            tops[lid] = m.x;
            sums[lid] = m.y;
        }
        workgroupBarrier();
    }
    top = tops[0];
    sum = sums[0];
    if (top > 3.4028235e38) {
        sum = top * f32(p.zero);  // the spec's exp(inf - inf) in the sum: the line is NaN
    }
    let lsum = log(sum);
    for (var j = i32(lid); j < L; j += 64) {
        y[base + j] = out_${OP}(x[base + j], j, top, 0, sum, lsum);
    }
}
