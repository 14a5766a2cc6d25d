// Elementwise functions shared by the GPU_PIXEL shaders (also the fused activations of
// Conv/Gemm). u_<Op>(x, p): unary op with its attributes in p. b_<Op>(a, b): binary op.

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

fn u_Identity(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return x; }
fn u_Dropout(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return x; }
fn u_Abs(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return abs(x); }
fn u_Neg(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return -x; }
fn u_Floor(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return floor(x); }
fn u_Ceil(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return ceil(x); }
fn u_Round(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return round(x); }
fn u_Sign(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return sign(x); }
fn u_Sqrt(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return sqrt(x); }
fn u_Exp(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return exp(x); }
fn u_Log(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return log(x); }
fn u_Sin(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return sin(x); }
fn u_Cos(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return cos(x); }
fn u_Tan(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return tan(x); }
fn u_Asin(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return asin(x); }
fn u_Acos(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return acos(x); }
fn u_Atan(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return atan(x); }
fn u_Sinh(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return sinh(x); }
fn u_Cosh(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return cosh(x); }
fn u_Asinh(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    // log form keeps precision for small and large |x| alike
    let a = abs(x);
    return sign(x) * log(a + sqrt(a * a + 1.0));
}
fn u_Acosh(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return log(x + sqrt(x * x - 1.0)); }
fn u_Atanh(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return 0.5 * log((1.0 + x) / (1.0 - x)); }
fn u_Reciprocal(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return 1.0 / x; }
fn u_Relu(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return keep_nan4(max(x, vec4<f32>(0.0)), x); }

fn u_Tanh(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    // clamped: the exp-based expansion overflows to NaN for large |x|; near 0 it cancels,
    // so small |x| use the Taylor series instead
    let t = tanh(clamp(x, vec4<f32>(-15.0), vec4<f32>(15.0)));
    let x2 = x * x;
    let series = x * (1.0 - x2 * (1.0 / 3.0 - x2 * (2.0 / 15.0 - x2 * (17.0 / 315.0))));
    return keep_nan4(select(t, series, abs(x) < vec4<f32>(0.1)), x);
}

fn u_Sigmoid(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    // exp of a non-positive number never overflows
    let e = exp(-abs(x));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= vec4<f32>(0.0));
}

fn u_Softplus(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    // log1p(e) by its series where 1 + e would round away e's digits
    let e = exp(-abs(x));
    let series = e * (1.0 - e * (0.5 - e / 3.0));
    let l = select(log(1.0 + e), series, e < vec4<f32>(1e-3));
    return keep_nan4(max(x, vec4<f32>(0.0)) + l, x);
}

fn u_Softsign(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return x / (1.0 + abs(x)); }

fn u_Mish(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    return x * u_Tanh(u_Softplus(x, p), p);
}

// p.x = alpha
fn u_LeakyRelu(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    return select(p.x * x, x, x >= vec4<f32>(0.0));
}

fn u_Elu(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    return keep_nan4(select(p.x * (exp(min(x, vec4<f32>(0.0))) - 1.0), x, x > vec4<f32>(0.0)), x);
}

// p.x = alpha, p.y = gamma
fn u_Selu(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    let neg = p.x * exp(min(x, vec4<f32>(0.0))) - p.x;
    return keep_nan4(p.y * select(neg, x, x > vec4<f32>(0.0)), x);
}

fn u_Celu(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    let neg = p.x * (exp(min(x, vec4<f32>(0.0)) / p.x) - 1.0);
    return keep_nan4(max(x, vec4<f32>(0.0)) + min(neg, vec4<f32>(0.0)), x);
}

// p.x = alpha, p.y = beta
fn u_HardSigmoid(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    return clamp4(p.x * x + p.y, vec4<f32>(0.0), vec4<f32>(1.0));
}

fn u_HardSwish(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    return x * clamp4(x / 6.0 + 0.5, vec4<f32>(0.0), vec4<f32>(1.0));
}

fn u_ThresholdedRelu(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    return select(vec4<f32>(0.0), x, x > vec4<f32>(p.x));
}

// p.x = lower bound, p.y = upper bound
fn u_Clip(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    return clamp4(x, vec4<f32>(p.x), vec4<f32>(p.y));
}

// p.x = bias, p.y = lambd
fn u_Shrink(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    let lo = select(vec4<f32>(0.0), x + p.x, x < vec4<f32>(-p.y));
    return select(lo, x - p.x, x > vec4<f32>(p.y));
}

fn erf4(x: vec4<f32>) -> vec4<f32> {
    // Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7)
    let a = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
        + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-a * a));
}

fn u_Erf(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> { return erf4(x); }

// p.x = 1 for the tanh approximation
fn u_Gelu(x: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    if (p.x > 0.5) {
        let inner = 0.7978845608028654 * (x + 0.044715 * x * x * x);
        return 0.5 * x * (1.0 + u_Tanh(inner, p));
    }
    return 0.5 * x * (1.0 + erf4(x * 0.7071067811865476));
}

fn b_Add(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a + b; }
fn b_Sum(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a + b; }
fn b_Mean(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a + b; }
fn b_Sub(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a - b; }
fn b_Mul(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a * b; }
fn b_Div(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a / b; }
fn b_Max(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return max4(a, b); }
fn b_Min(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return min4(a, b); }
fn b_PRelu(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return select(a * b, a, a >= vec4<f32>(0.0));
}

// C fmod: the result takes the sign of the dividend
fn b_Mod(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a - b * trunc(a / b); }

fn pow1(a: f32, b: f32) -> f32 {
    if (b == 0.0) {
        return 1.0;
    }
    let m = exp2(b * log2(abs(a)));
    if (a >= 0.0) {
        return m;
    }
    let bi = round(b);
    if (bi != b) {
        return f_nan();
    }
    let odd = abs(bi - 2.0 * floor(bi * 0.5)) > 0.5;
    return select(m, -m, odd);
}

fn b_Pow(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(pow1(a.x, b.x), pow1(a.y, b.y), pow1(a.z, b.z), pow1(a.w, b.w));
}
