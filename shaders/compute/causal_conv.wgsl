// CausalConvWithState: a depthwise causal 1-D conv over [past_state, x] along L, and the
// last K - 1 positions of that concatenation as the next step's state. Invocations
// [0, n_out) compute output elements, [n_out, n_out + n_state) copy state elements.
struct Params {
    C: i32, L: i32, K: i32, n_out: i32,
    n_state: i32, has_bias: i32, has_past: i32, _pad: i32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> past: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<f32>;

//!include common/activations.wgsl

// position t of row (b, c) of [past_state, x]: t < K - 1 is the past (zeros without one)
fn padded(row: i32, t: i32) -> f32 {
    let S = p.K - 1;
    if (t >= S) { return x[row * p.L + t - S]; }
    if (p.has_past != 0) { return past[row * S + t]; }
    return 0.0;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i < p.n_out) {
        let l = i % p.L;
        let row = i / p.L;
        let c = row % p.C;
        var acc = 0.0;
        for (var j = 0; j < p.K; j++) {
            acc += padded(row, l + j) * w[c * p.K + j];
        }
        if (p.has_bias != 0) { acc += bias[c]; }
        y[i] = op_${act}(acc, 1.0, 0.0, 0.0);
        return;
    }
    let s = i - p.n_out;
    if (s >= p.n_state) { return; }
    let S = p.K - 1;
    let row = s / S;
    // the last K - 1 positions of the L + K - 1 padded ones
    state[s] = padded(row, p.L + s % S);
}
