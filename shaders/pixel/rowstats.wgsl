// First pass of a reduction over the last axis, which runs along the texture's x: one
// fragment per texture row (and statistic) reads the row once, instead of every output
// texel re-reading it. Op ${OP}.
//   ROW false: each component of a texel is its own row of the tensor (rank >= 3).
//   ROW true: the last axis is also the blocked one (rank <= 2): the whole texture row is
//             one tensor row of i[0].x elements; the statistic is repeated in all 4 components.
// Output: texel (s, y) = statistic s of texture row y of X:
//   moments: s 0 = mean, s 1 = 1 / sqrt(variance + f[0].x)  (LayerNormalization)
//   softmax: s 0 = max, s 1 = sum of exp(x - max)           (Softmax, LogSoftmax)
//   sum:     s 0 = sum, times f[0].y                         (ReduceSum, ReduceMean)

const ROW: bool = ${ROW};

@group(0) @binding(1) var X: texture_2d<f32>;

//!include pixel/rowstats_common.wgsl

fn stat_moments(s: u32, y: u32) -> vec4<f32> {
    let w = row_width();
    let c = moments_shift(y);
    var s1 = vec4<f32>(0.0);
    var s2 = vec4<f32>(0.0);
    for (var x = 0u; x < w; x++) {
        let d = at(x, y, c.x) - c;
        s1 += d;
        s2 += d * d;
    }
    return finish_moments(s, c, s1, s2);
}

fn stat_softmax(s: u32, y: u32) -> vec4<f32> {
    let w = row_width();
    var m = vec4<f32>(-f_inf());
    for (var x = 0u; x < w; x++) {
        m = max(m, at(x, y, -f_inf()));
    }
    m = hmax(m);
    if (s == 0u) {
        return m;
    }
    var a = vec4<f32>(0.0);
    for (var x = 0u; x < w; x++) {
        a += exp(at(x, y, -f_inf()) - m);
    }
    return hsum(a);
}

fn stat_sum(s: u32, y: u32) -> vec4<f32> {
    let w = row_width();
    var a = vec4<f32>(0.0);
    for (var x = 0u; x < w; x++) {
        a += at(x, y, 0.0);
    }
    return hsum(a) * U.f[0].y;
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    return stat_${OP}(p.x, p.y);
}
