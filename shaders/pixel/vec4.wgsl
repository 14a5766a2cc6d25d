// vec4 helpers of the GPU_PIXEL shaders (included by common.wgsl): infinities, NaN-keeping
// max/min/clamp, b_<Op>(a, b): the binary elementwise ops. Unary ops are the scalar
// functions op_<Op> of shaders/common/activations.wgsl, applied per component (act4.wgsl).

//!include common/math.wgsl

fn f_inf() -> f32 {
    return bitcast<f32>(0x7f800000u);
}

fn f_nan() -> f32 {
    return bitcast<f32>(0x7fc00000u);
}

// NaN tests on the bit pattern (a fast-math compiler may fold `x != x` away). WGSL leaves
// max/min/clamp of a NaN to the implementation (lavapipe returns the other operand), so
// bounds go through these helpers: IEEE 754-2019 maximum/minimum, NaN when either is NaN.
fn is_nan1(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn is_nan4(x: vec4<f32>) -> vec4<bool> {
    return (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u);
}

// y where x is a number, x (its NaN) where x is NaN
fn keep_nan4(y: vec4<f32>, x: vec4<f32>) -> vec4<f32> { return select(y, x, is_nan4(x)); }

fn max1(a: f32, b: f32) -> f32 { return select(select(max(a, b), b, is_nan1(b)), a, is_nan1(a)); }
fn min1(a: f32, b: f32) -> f32 { return select(select(min(a, b), b, is_nan1(b)), a, is_nan1(a)); }
fn max4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return keep_nan4(keep_nan4(max(a, b), b), a); }
fn min4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return keep_nan4(keep_nan4(min(a, b), b), a); }

fn clamp4(x: vec4<f32>, lo: vec4<f32>, hi: vec4<f32>) -> vec4<f32> {
    return keep_nan4(min(max(x, lo), hi), x);
}

fn b_Add(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a + b; }
fn b_Sum(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a + b; }
fn b_Mean(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a + b; }
fn b_Sub(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a - b; }
fn b_Mul(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a * b; }
fn b_Div(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return div_f4(a, b); }
fn b_Max(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return max4(a, b); }
fn b_Min(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return min4(a, b); }
fn b_PRelu(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return select(a * b, a, a >= vec4<f32>(0.0));
}

// C fmod, exact (fmod_f): the result takes the sign of the dividend
fn b_Mod(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(fmod_f(a.x, b.x), fmod_f(a.y, b.y), fmod_f(a.z, b.z), fmod_f(a.w, b.w));
}

fn b_Pow(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(pow_f(a.x, b.x), pow_f(a.y, b.y), pow_f(a.z, b.z), pow_f(a.w, b.w));
}
