// Helpers of rowstats.wgsl, rowstats_part.wgsl and rowstats_merge.wgsl (which define ROW
// and bind X).

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

// the shift of the moments' sums: the row's first element (all 4 components in ROW mode);
// shifted sums keep the variance accurate
fn moments_shift(y: u32) -> vec4<f32> {
    let c = ld(X, 0u, y);
    if (ROW) {
        return c.xxxx;
    }
    return c;
}

// statistic s of the moments from the shifted sums s1 = sum (x - c), s2 = sum (x - c)^2:
// 0 = mean, 1 = 1 / sqrt(variance + f[0].x)
fn finish_moments(s: u32, c: vec4<f32>, s1: vec4<f32>, s2: vec4<f32>) -> vec4<f32> {
    let n = count();
    let m1 = hsum(s1) / n;
    if (s == 0u) {
        return c + m1;
    }
    let var_ = max(hsum(s2) / n - m1 * m1, vec4<f32>(0.0));
    return inverseSqrt(var_ + U.f[0].x);
}
