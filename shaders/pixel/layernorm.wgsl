// LayerNormalization over the trailing axes from i[0].x (padded) on; f[0].x = epsilon.
// Op ${OP}: Mean and InvStdDev write the statistics (the normalised axes kept as 1);
// Apply reads X, Mean, InvStdDev, Scale and (when i[0].y != 0) B, all broadcast.

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var M: texture_2d<f32>;
@group(0) @binding(3) var S: texture_2d<f32>;
@group(0) @binding(4) var G: texture_2d<f32>;
@group(0) @binding(5) var B: texture_2d<f32>;

// element r (row-major) of the normalised block that starts at base
fn nth(base: array<u32, 6>, r: u32) -> array<u32, 6> {
    let d = dims6(U.t[0]);
    var e = base;
    var t = r;
    for (var k = 5; k >= U.i[0].x; k--) {
        e[k] = t % d[k];
        t = t / d[k];
    }
    return e;
}

fn count() -> u32 {
    let d = dims6(U.t[0]);
    var n = 1u;
    for (var k = U.i[0].x; k < 6; k++) {
        n *= d[k];
    }
    return n;
}

fn op_Mean(e: array<u32, 6>) -> f32 {
    let n = count();
    var s = 0.0;
    for (var r = 0u; r < n; r++) {
        s += load_elem(X, U.t[0], nth(e, r));
    }
    return s / f32(n);
}

fn op_InvStdDev(e: array<u32, 6>) -> f32 {
    let n = count();
    let m = op_Mean(e);
    var s = 0.0;
    for (var r = 0u; r < n; r++) {
        let d = load_elem(X, U.t[0], nth(e, r)) - m;
        s += d * d;
    }
    return inverseSqrt(s / f32(n) + U.f[0].x);
}

fn op_Apply(e: array<u32, 6>) -> f32 {
    let x = load_elem(X, U.t[0], e);
    let y = (x - load_bcast(M, U.t[1], e)) * load_bcast(S, U.t[2], e) * load_bcast(G, U.t[3], e);
    if (U.i[0].y != 0) {
        return y + load_bcast(B, U.t[4], e);
    }
    return y;
}

//!include pixel/per_element.wgsl

fn element(e: array<u32, 6>) -> f32 {
    return op_${OP}(e);
}
