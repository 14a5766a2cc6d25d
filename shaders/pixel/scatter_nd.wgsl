// ScatterND: each output element starts from the data and folds in, in index-row order,
// every update whose index tuple names it (reduction i[0].z: 0 none (the last one wins),
// 1 add, 2 mul, 3 max, 4 min; max and min keep a NaN, as np.maximum.at does). The indices are a float32 texture holding integers, their
// tuple axis padded to axis 5; the updates texture is U.t[2].
// i[0] = (index rows, depth, reduction, first data axis (padded))
// i[1..2] = for each update axis (padded): 0..4 the index-row axis it copies, 10 + k the
//           output axis k, -1: 0

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var I: texture_2d<f32>;
@group(0) @binding(3) var V: texture_2d<f32>;

fn six(a: vec4<i32>, b: vec4<i32>, k: u32) -> i32 {
    if (k < 4u) {
        return a[k];
    }
    return b[k - 4u];
}

fn fold(a: f32, u: f32) -> f32 {
    switch U.i[0].z {
        case 1: { return a + u; }
        case 2: { return a * u; }
        case 3: { return max1(a, u); }
        case 4: { return min1(a, u); }
        default: { return u; }
    }
}

fn scatter_elem(e: array<u32, 6>) -> f32 {
    var v = load_elem(X, U.t[0], e);
    let rows = u32(U.i[0].x);
    let depth = u32(U.i[0].y);
    let pd = u32(U.i[0].w);
    let dd = dims6(U.t[0]);
    let id = dims6(U.t[1]);
    for (var n = 0u; n < rows; n++) {
        var ie: array<u32, 6>;
        var rest = n;
        for (var k = 4; k >= 0; k--) {
            ie[k] = rest % id[k];
            rest = rest / id[k];
        }
        var hit = true;
        for (var t = 0u; t < depth; t++) {
            ie[5] = t;
            let d = i32(dd[pd + t]);
            var j = i32(round(load_elem(I, U.t[1], ie)));
            j = select(j, j + d, j < 0);
            if (j != i32(e[pd + t])) {
                hit = false;
                break;
            }
        }
        if (hit) {
            var ue: array<u32, 6>;
            for (var k = 0u; k < 6u; k++) {
                let s = six(U.i[1], U.i[2], k);
                if (s >= 10) {
                    ue[k] = e[s - 10];
                } else if (s >= 0) {
                    ue[k] = ie[s];
                }
            }
            v = fold(v, load_elem(V, U.t[2], ue));
        }
    }
    return v;
}

//!include pixel/per_element.wgsl

fn element(e: array<u32, 6>) -> f32 {
    return scatter_elem(e);
}
