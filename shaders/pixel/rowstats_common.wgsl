// Helpers of rowstats.wgsl and rowstats_part.wgsl (which define ROW and bind X).

fn row_width() -> u32 {
    return U.t[0].d1.w;
}

// texel x of row y with the components past the row's end set to `fill` (ROW mode)
fn at(x: u32, y: u32, fill: f32) -> vec4<f32> {
    let v = ld(X, x, y);
    if (!ROW) {
        return v;
    }
    let valid = vec4<u32>(0u, 1u, 2u, 3u) + 4u * x < vec4<u32>(u32(U.i[0].x));
    return select(vec4<f32>(fill), v, valid);
}

fn hsum(v: vec4<f32>) -> vec4<f32> {
    if (ROW) {
        return vec4<f32>(dot(v, vec4<f32>(1.0)));
    }
    return v;
}

fn hmax(v: vec4<f32>) -> vec4<f32> {
    if (ROW) {
        return vec4<f32>(max(max(v.x, v.y), max(v.z, v.w)));
    }
    return v;
}

fn count() -> f32 {
    if (ROW) {
        return f32(U.i[0].x);
    }
    return f32(row_width());
}
