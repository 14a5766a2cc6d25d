// Second level of rowstats_part.wgsl: texel (s, y) = statistic s of texture row y of X as
// rowstats.wgsl writes it, from the i[0].y chunks' partial statistics in P (texels 2c and
// 2c + 1 of row y). X is bound for its row width and first elements. Op ${OP}.

const ROW: bool = ${ROW};

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var P: texture_2d<f32>;

//!include pixel/rowstats_common.wgsl

fn merge_softmax(s: u32, y: u32) -> vec4<f32> {
    let n = u32(U.i[0].y);
    var m = vec4<f32>(-f_inf());
    for (var c = 0u; c < n; c++) {
        m = max(m, ld(P, 2u * c, y));
    }
    if (s == 0u) {
        return m;
    }
    // a row of -inf: 0 * exp(-inf - -inf) is NaN, as rowstats.wgsl's sum is there
    var a = vec4<f32>(0.0);
    for (var c = 0u; c < n; c++) {
        a += ld(P, 2u * c + 1u, y) * exp(ld(P, 2u * c, y) - m);
    }
    return a;
}

fn merge_moments(s: u32, y: u32) -> vec4<f32> {
    let n = u32(U.i[0].y);
    var s1 = vec4<f32>(0.0);
    var s2 = vec4<f32>(0.0);
    for (var k = 0u; k < n; k++) {
        s1 += ld(P, 2u * k, y);
        s2 += ld(P, 2u * k + 1u, y);
    }
    return finish_moments(s, moments_shift(y), s1, s2);
}

fn merge_sum(s: u32, y: u32) -> vec4<f32> {
    let n = u32(U.i[0].y);
    var a = vec4<f32>(0.0);
    for (var c = 0u; c < n; c++) {
        a += ld(P, 2u * c, y);
    }
    return hsum(a) * U.f[0].y;
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    return merge_${OP}(p.x, p.y);
}
