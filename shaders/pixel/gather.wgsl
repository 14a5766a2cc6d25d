// Gather, GatherElements and GatherND as one index map, one output element per component.
// The indices are a float32 texture holding integers (exact below 2^24).
// i[0..1] = for each data axis (padded), the output axis its coordinate copies (-1: 0)
// i[2..3] = for each index axis (padded), the output axis its coordinate copies (-1: 0)
// i[4] = (first data axis set from the indices, how many (the depth), index axis that
//         runs over them (-1: none, the same index element for all), 0)
// Negative indices count from the end; out-of-range ones are clamped.

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var I: texture_2d<f32>;

fn six(a: vec4<i32>, b: vec4<i32>, k: u32) -> i32 {
    if (k < 4u) {
        return a[k];
    }
    return b[k - 4u];
}

fn gather_elem(e: array<u32, 6>) -> f32 {
    let dd = dims6(U.t[0]);
    var de: array<u32, 6>;
    var ie: array<u32, 6>;
    for (var k = 0u; k < 6u; k++) {
        let s = six(U.i[0], U.i[1], k);
        de[k] = select(0u, e[max(s, 0)], s >= 0);
        let t = six(U.i[2], U.i[3], k);
        ie[k] = select(0u, e[max(t, 0)], t >= 0);
    }
    let first = U.i[4].x;
    let runs = U.i[4].z;
    for (var t = 0; t < U.i[4].y; t++) {
        if (runs >= 0) {
            ie[runs] = u32(t);
        }
        let d = i32(dd[first + t]);
        var v = i32(round(load_elem(I, U.t[1], ie)));
        v = select(v, v + d, v < 0);
        de[first + t] = u32(clamp(v, 0, d - 1));
    }
    return load_elem(X, U.t[0], de);
}

//!include pixel/per_element.wgsl

fn element(e: array<u32, 6>) -> f32 {
    return gather_elem(e);
}
