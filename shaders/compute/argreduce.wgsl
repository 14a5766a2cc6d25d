// ArgMax / ArgMin along one axis; writes int64 indices (two words, the high one 0).
// A NaN counts as the extreme (NumPy's argmax/argmin): the first one wins, or the last one
// with select_last_index.
struct Params { n: i32, L: i32, inner: i32, last: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

//!include common/math.wgsl

// v replaces the best so far (ties and NaNs are handled in main)
fn better_ArgMax(v: f32, best: f32) -> bool { return v > best; }
fn better_ArgMin(v: f32, best: f32) -> bool { return v < best; }

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 64u);
    if (i >= p.n) { return; }
    let L = p.L;
    let inner = p.inner;
    let last = p.last != 0;
    let base = (i / inner) * L * inner + i % inner;
    var best = x[base];
    var at = 0;
    for (var j = 1; j < L; j++) {
        let v = x[base + j * inner];
        let v_nan = is_nan_f(v);
        if (better_${OP}(v, best) || (last && v == best) || (v_nan && (last || !is_nan_f(best)))) {
            best = v;
            at = j;
        }
    }
    y[2 * i] = u32(at);
    y[2 * i + 1] = 0u;
}
