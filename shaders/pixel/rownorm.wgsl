// Second pass of a reduction over the last axis (see rowstats.wgsl): each output texel
// combines its input texel with the two statistics of its texture row. Op ${OP}.
//   LayerNormalization: (x - mean) * rstd * scale[d] + bias[d], scale/bias are [D] vectors
//   Softmax: exp(x - max) / sum      LogSoftmax: x - max - log(sum)
// ROW as in rowstats.wgsl: true when the last axis is the blocked one (scale is a vec4).

const ROW: bool = ${ROW};

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var S: texture_2d<f32>;
@group(0) @binding(3) var Scale: texture_2d<f32>;
@group(0) @binding(4) var Bias: texture_2d<f32>;

// element d of a 1-D tensor (vec4 of d..d+3 in ROW mode), splat over the 4 components
fn vec_at(t: texture_2d<f32>, x: u32) -> vec4<f32> {
    if (ROW) {
        return ld(t, x, 0u);
    }
    return vec4<f32>(ld(t, x / 4u, 0u)[x % 4u]);
}

fn op_LayerNormalization(x: vec4<f32>, s0: vec4<f32>, s1: vec4<f32>, p: vec2<u32>) -> vec4<f32> {
    var y = (x - s0) * s1 * vec_at(Scale, p.x);
    if (${BIAS}) {
        y += vec_at(Bias, p.x);
    }
    return y;
}

fn op_Softmax(x: vec4<f32>, s0: vec4<f32>, s1: vec4<f32>, p: vec2<u32>) -> vec4<f32> {
    return exp(x - s0) / s1;
}

fn op_LogSoftmax(x: vec4<f32>, s0: vec4<f32>, s1: vec4<f32>, p: vec2<u32>) -> vec4<f32> {
    return x - s0 - log(s1);
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let y = op_${OP}(ld(X, p.x, p.y), ld(S, 0u, p.y), ld(S, 1u, p.y), p);
    return select(vec4<f32>(0.0), y, mask_at(U.o, p));
}
