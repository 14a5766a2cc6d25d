// rownorm.wgsl with one workgroup of 64 invocations per row, for GPUs: one invocation
// walking a whole row reads it serially and uncoalesced three times (a LayerNormalization
// of 64 rows of 256 took 0.28 ms on a real GPU). Mean, then the mean squared deviation, as
// rownorm.wgsl computes them, each summed in strided shares and then in workgroup memory.
//!include compute/rownorm_params.wgsl

var<workgroup> part: array<f32, 64>;

// the workgroup's sum of v (every invocation gets it)
fn total(v: f32, lid: u32) -> f32 {
    part[lid] = v;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if (lid < s) { part[lid] += part[lid + s]; }
        workgroupBarrier();
    }
    let t = part[0];
    workgroupBarrier();  // part is written again by the next call
    return t;
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nw: vec3<u32>) {
    let r = i32(wid.x + wid.y * nw.x);
    if (r >= p.rows) { return; }
    let L = p.L;
    let base = r * L;
    var acc = 0.0;
    for (var j = i32(lid); j < L; j += 64) { acc += x[base + j]; }
    let mean = total(acc, lid) / f32(L);
    acc = 0.0;
    for (var j = i32(lid); j < L; j += 64) {
        let d = x[base + j] - mean;
        acc += d * d;
    }
    let inv = 1.0 / sqrt(total(acc, lid) / f32(L) + p.eps);
    let sbase = (r % p.sm) * L;
    for (var j = i32(lid); j < L; j += 64) {
        let s = (sbase + j) / p.sd;
        y[base + j] = (x[base + j] - mean) * inv * scale[s] + shift[s];
    }
    if (p.stats != 0 && lid == 0u) {
        stats[2 * r] = mean;
        stats[2 * r + 1] = inv;
    }
}
