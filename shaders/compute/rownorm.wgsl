// Normalise rows of length L: Instance-, Layer- and GroupNormalization. The scale/bias index
// of element j of row r is ((r % sm) * L + j) / sd: per position (layer), per channel
// (instance: sm = C, L = sd) or per channel inside a group (group: sd = spatial size).
struct Params { rows: i32, L: i32, sm: i32, sd: i32, eps: f32, stats: i32, pad0: i32, pad1: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> scale: array<f32>;
@group(0) @binding(3) var<storage, read> shift: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let r = i32(g.x + g.y * nw.x * 64u);
    if (r >= p.rows) { return; }
    let base = r * p.L;
    var mean = 0.0;
    for (var j = 0; j < p.L; j++) { mean += x[base + j]; }
    mean = mean / f32(p.L);
    var var_ = 0.0;
    for (var j = 0; j < p.L; j++) {
        let d = x[base + j] - mean;
        var_ += d * d;
    }
    let inv = 1.0 / sqrt(var_ / f32(p.L) + p.eps);
    let sbase = (r % p.sm) * p.L;
    for (var j = 0; j < p.L; j++) {
        let s = (sbase + j) / p.sd;
        y[base + j] = (x[base + j] - mean) * inv * scale[s] + shift[s];
    }
    if (p.stats != 0) {
        stats[2 * r] = mean;
        stats[2 * r + 1] = inv;
    }
}
