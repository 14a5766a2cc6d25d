// TopK, one output element per component: the element of rank r = e[axis] along the axis,
// found by r + 1 scans that each take the best element after the previous pick (value
// first, larger first when largest, then the smaller index; NaNs after numbers).
// i[0] = (axis (padded), largest, output: 0 values, 1 indices (as floats), 0)

@group(0) @binding(1) var X: texture_2d<f32>;

fn before(va: f32, ia: i32, vb: f32, ib: i32) -> bool {
    let a_nan = va != va;
    let b_nan = vb != vb;
    if (a_nan || b_nan) {
        return (!a_nan && b_nan) || (a_nan && b_nan && ia < ib);
    }
    if (va == vb) {
        return ia < ib;
    }
    return select((va < vb), (va > vb), U.i[0].y != 0);
}

fn topk_elem(e: array<u32, 6>) -> f32 {
    let ax = u32(U.i[0].x);
    let L = i32(dims6(U.t[0])[ax]);
    var xe = e;
    var pv = 0.0;
    var pi = -1;
    for (var r = 0; r <= i32(e[ax]); r++) {
        var bv = 0.0;
        var bi = -1;
        for (var j = 0; j < L; j++) {
            xe[ax] = u32(j);
            let v = load_elem(X, U.t[0], xe);
            if (pi >= 0 && !before(pv, pi, v, j)) { continue; }
            if (bi < 0 || before(v, j, bv, bi)) {
                bv = v;
                bi = j;
            }
        }
        pv = bv;
        pi = bi;
    }
    return select(pv, f32(pi), U.i[0].z == 1);
}

//!include pixel/per_element.wgsl

fn element(e: array<u32, 6>) -> f32 {
    return topk_elem(e);
}
