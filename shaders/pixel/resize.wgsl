// Resize along one axis by a tap table T [out, 2 * taps + 1]: for output index o along the
// axis, out = T[o, 2 * taps] + sum_t T[o, taps + t] * X[.., T[o, t], ..] (indices stored as
// floats). Any interpolation (nearest, linear, cubic, antialiased) is a tap table.
// i[0] = (axis (padded), taps)

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var Tb: texture_2d<f32>;

fn tap(o: u32, col: u32) -> f32 {
    return ld(Tb, col / 4u, o)[col % 4u];
}

fn resize_elem(e: array<u32, 6>) -> f32 {
    let axis = u32(U.i[0].x);
    let taps = u32(U.i[0].y);
    let o = e[axis];
    var s = tap(o, 2u * taps);
    var ei = e;
    for (var t = 0u; t < taps; t++) {
        let w = tap(o, taps + t);
        if (w != 0.0) {
            ei[axis] = u32(tap(o, t));
            s += w * load_elem(X, U.t[0], ei);
        }
    }
    return s;
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let b = texel_index(U.o, vec2<u32>(pos.xy));
    let mask = valid_mask(U.o, b);
    var r = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        if (mask[c]) {
            r[c] = resize_elem(elem_of(U.o, b, c));
        }
    }
    return r;
}
