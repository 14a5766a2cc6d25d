// Index-generated ops, one output element per component. Op ${OP}:
//   Range:  f[0] = (start, delta); rank 1, so the element index is e[5].
//   Trilu:  i[0] = (k, upper); keeps X where col - row >= k (upper) or <= k (lower).
//   CumSum: i[0] = (axis (padded), exclusive, reverse); sums X along the axis.

@group(0) @binding(1) var X: texture_2d<f32>;

fn op_Range(e: array<u32, 6>) -> f32 {
    return U.f[0].x + f32(e[5]) * U.f[0].y;
}

fn op_Trilu(e: array<u32, 6>) -> f32 {
    let d = i32(e[5]) - i32(e[4]);
    let k = U.i[0].x;
    let keep = select((d <= k), (d >= k), U.i[0].y != 0);
    return select(0.0, load_elem(X, U.t[0], e), keep);
}

fn op_CumSum(e: array<u32, 6>) -> f32 {
    let ax = u32(U.i[0].x);
    let n = dims6(U.t[0])[ax];
    let pos = e[ax];
    let excl = u32(U.i[0].y != 0);
    var lo = 0u;
    var hi = pos + 1u - excl;
    if (U.i[0].z != 0) {
        lo = pos + excl;
        hi = n;
    }
    var s = 0.0;
    var xe = e;
    for (var j = lo; j < hi; j++) {
        xe[ax] = j;
        s += load_elem(X, U.t[0], xe);
    }
    return s;
}

//!include pixel/per_element.wgsl

fn element(e: array<u32, 6>) -> f32 {
    return op_${OP}(e);
}
