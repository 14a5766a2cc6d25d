// Normalise rows of length L: Instance-, Layer- and GroupNormalization. The scale/bias index
// of element j of row r is ((r % sm) * L + j) / sd: per position (layer), per channel
// (instance: sm = C, L = sd) or per channel inside a group (group: sd = spatial size).
//!include compute/rownorm_params.wgsl

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let r = i32(g.x + g.y * nw.x * 64u);
    if (r >= p.rows) { return; }
    let L = p.L;
    let base = r * L;
    var mean = 0.0;
    for (var j = 0; j < L; j++) { mean += x[base + j]; }
    mean = mean / f32(L);
    var var_ = 0.0;
    for (var j = 0; j < L; j++) {
        let d = x[base + j] - mean;
        var_ += d * d;
    }
    let inv = 1.0 / sqrt(var_ / f32(L) + p.eps);
    let sbase = (r % p.sm) * L;
    let sd = p.sd;
    for (var j = 0; j < L; j++) {
        let s = (sbase + j) / sd;
        y[base + j] = (x[base + j] - mean) * inv * scale[s] + shift[s];
    }
    if (p.stats != 0) {
        stats[2 * r] = mean;
        stats[2 * r + 1] = inv;
    }
}
