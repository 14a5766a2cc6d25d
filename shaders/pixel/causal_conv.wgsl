// CausalConvWithState, one element per texel component. i[0] = (K, has_bias, has_past,
// which): which = 0 draws the output (a depthwise causal conv of [past_state, x] along L),
// 1 the state (the last K - 1 positions of that concatenation).

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var W: texture_2d<f32>;
@group(0) @binding(3) var B: texture_2d<f32>;
@group(0) @binding(4) var P: texture_2d<f32>;

//!include common/activations.wgsl

// position t of row (b, c) of [past_state, x]: t < K - 1 is the past (zeros without one)
fn padded(b: u32, c: u32, t: u32) -> f32 {
    let S = u32(U.i[0].x) - 1u;
    if (t >= S) {
        return load_elem(X, U.t[0], array<u32, 6>(0u, 0u, 0u, b, c, t - S));
    }
    if (U.i[0].z != 0) {
        return load_elem(P, U.t[3], array<u32, 6>(0u, 0u, 0u, b, c, t));
    }
    return 0.0;
}

//!include pixel/per_element.wgsl

fn element(e: array<u32, 6>) -> f32 {
    if (U.i[0].w != 0) {
        return padded(e[3], e[4], dims6(U.t[0])[5] + e[5]);
    }
    var acc = 0.0;
    for (var j = 0u; j < u32(U.i[0].x); j++) {
        acc += padded(e[3], e[4], e[5] + j)
             * load_elem(W, U.t[1], array<u32, 6>(0u, 0u, 0u, e[4], 0u, j));
    }
    if (U.i[0].y != 0) {
        acc += load_elem(B, U.t[2], array<u32, 6>(0u, 0u, 0u, 0u, 0u, e[4]));
    }
    return op_${ACT}(acc, 1.0, 0.0, 0.0);
}
