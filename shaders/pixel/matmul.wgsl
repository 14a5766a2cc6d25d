// Batched MatMul with broadcast batch axes, one element per component (rank >= 2 operands).
// i[0] = (M, N, K)

@group(0) @binding(1) var A: texture_2d<f32>;
@group(0) @binding(2) var B: texture_2d<f32>;

fn mm_elem(e: array<u32, 6>) -> f32 {
    let K = u32(U.i[0].z);
    let da = dims6(U.t[0]);
    let db = dims6(U.t[1]);
    var ea = e;
    var eb = e;
    for (var k = 0; k < 4; k++) {
        if (da[k] == 1u) { ea[k] = 0u; }
        if (db[k] == 1u) { eb[k] = 0u; }
    }
    var s = 0.0;
    for (var k = 0u; k < K; k++) {
        ea[5] = k;
        eb[4] = k;
        s += load_elem(A, U.t[0], ea) * load_elem(B, U.t[1], eb);
    }
    return s;
}

//!include pixel/per_element.wgsl

fn element(e: array<u32, 6>) -> f32 {
    return mm_elem(e);
}
