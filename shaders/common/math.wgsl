// Helpers shared by elementwise shaders (WGSL has no erf, and leaves pow(x<0) undefined).

fn erf_f(x: f32) -> f32 {
    // Abramowitz-Stegun 7.1.26 refined: |error| < 1.2e-7 over the real line, an absolute
    // error, so small |x| takes the Maclaurin series instead (relative error below 1e-9)
    let a = abs(x);
    let t = 1.0 / (1.0 + 0.5 * a);
    let y = 1.0 - t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196
        + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398
        + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
    let x2 = x * x;
    let series = 1.1283791670955126 * x * (1.0 - x2 * (1.0 / 3.0 - x2 * (1.0 / 10.0
        - x2 * (1.0 / 42.0 - x2 * (1.0 / 216.0 - x2 * (1.0 / 1320.0 - x2 / 9360.0))))));
    return select(select(-y, y, x >= 0.0), series, a < 0.5);
}

fn tanh_f(x: f32) -> f32 {
    // drivers may compute tanh as a ratio of exponentials: NaN from overflow for large |x|,
    // lost digits from cancellation for small |x| (there the series is exact to f32)
    let x2 = x * x;
    let series = x * (1.0 - x2 * (1.0 / 3.0 - x2 * (2.0 / 15.0 - x2 * (17.0 / 315.0))));
    return select(select(tanh(x), sign(x), abs(x) > 15.0), series, abs(x) < 0.1);
}

// a / b, brought to the correctly rounded quotient where the driver's is not. Vulkan lets a
// GPU divide to 2.5 ulp (NVIDIA's is 1 ulp off on a quarter of random operands), which moves
// quotients across rounding boundaries: Round after a Div (DynamicQuantizeLinear written
// out). Where the device needs it and its fma is fused (gpu_common/arith_probe.py sets
// DIV_CORRECTION), the reciprocal takes one Newton step and the quotient a second one on its
// exact remainder: on an H100 this gave NumPy's quotient for a million random pairs, where
// correcting the driver's own quotient by (a - q b) / b left 15% of them 1 ulp off (why is
// not established: that remainder was exact). Zeros, infinities, NaN and reciprocals
// outside the normal range keep the plain quotient.
override DIV_CORRECTION: bool = false;

fn div_f(a: f32, b: f32) -> f32 {
    let q = a / b;
    if (!DIV_CORRECTION) { return q; }
    let y0 = 1.0 / b;
    let y = fma(fma(-b, y0, 1.0), y0, y0);
    let q1 = a * y;
    let c = fma(fma(-q1, b, a), y, q1);
    let big = 3.4028234e38;
    let fine = abs(y0) >= 1.1754944e-38 && abs(y0) <= big;
    return select(q, c, fine && q != 0.0 && abs(q) <= big && abs(c) <= big);
}

fn div_f4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    let q = a / b;
    if (!DIV_CORRECTION) { return q; }
    let one = vec4<f32>(1.0);
    let y0 = one / b;
    let y = fma(fma(-b, y0, one), y0, y0);
    let q1 = a * y;
    let c = fma(fma(-q1, b, a), y, q1);
    let big = vec4<f32>(3.4028234e38);
    let fine = (abs(y0) >= vec4<f32>(1.1754944e-38)) & (abs(y0) <= big);
    return select(q, c, fine & (q != vec4<f32>(0.0)) & (abs(q) <= big) & (abs(c) <= big));
}

fn sigmoid_f(x: f32) -> f32 {
    let e = exp(-abs(x));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= 0.0);
}

fn log1p_f(e: f32) -> f32 {
    // log(1 + e) without losing e's digits when e is small: 2 atanh(s), s = e / (2 + e), by
    // its series (|s| <= 1/3 for e in [-1/2, 1]: seven terms reach f32). Kahan's
    // log(u) * e / (u - 1) is undone by compilers that fold (1 + e) - 1 into e, and GPUs'
    // log near 1 has an absolute, not a relative, error bound.
    let s = e / (2.0 + e);
    let s2 = s * s;
    let series = 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0
        + s2 * (1.0 / 9.0 + s2 * (1.0 / 11.0 + s2 / 13.0))))));
    return select(log(1.0 + e), series, e >= -0.5 && e <= 1.0);
}

fn softplus_f(x: f32) -> f32 {
    return max(x, 0.0) + log1p_f(exp(-abs(x)));
}

// std::pow's special cases (as NumPy's power): 1 for b == 0 or a == 1 whatever the other;
// NaN from a NaN; an infinite exponent gives 0, 1 or inf by |a| against 1; zero and infinite
// bases give 0 or inf by the exponent's sign, negative for a negative base and odd integer b
fn pow_f(a: f32, b: f32) -> f32 {
    let nan = bitcast<f32>(0x7fc00000u);
    let inf = bitcast<f32>(0x7f800000u);
    if (b == 0.0 || a == 1.0) { return 1.0; }
    if (is_nan_f(a) || is_nan_f(b)) { return nan; }
    if (is_inf_f(b)) {
        let m = abs(a);
        if (m == 1.0) { return 1.0; }
        return select(0.0, inf, (m > 1.0) == (b > 0.0));
    }
    let odd = floor(b) == b && abs(b - 2.0 * floor(b * 0.5)) == 1.0;
    let negative = (bitcast<u32>(a) >> 31u) == 1u;
    if (a == 0.0 || is_inf_f(a)) {
        let m = select(0.0, inf, (a == 0.0) == (b < 0.0));
        return select(m, -m, odd && negative);
    }
    let r = exp2(b * log2(abs(a)));
    if (!negative) { return r; }
    if (floor(b) != b) { return nan; }
    return select(r, -r, odd);
}

// C's fmod (the remainder takes the dividend's sign), exact: a - b * trunc(a / b) loses the
// remainder once a / b passes 2^24. The largest multiple of |b| by a power of two not above
// the remainder is taken off until the remainder is below |b|; each subtraction is exact
// (the two are within a factor of 2), and each step lowers the remainder's exponent.
fn fmod_f(a: f32, b: f32) -> f32 {
    let nan = bitcast<f32>(0x7fc00000u);
    if (is_nan_f(a) || is_nan_f(b) || is_inf_f(a) || b == 0.0) { return nan; }
    let m = abs(b);
    var r = abs(a);
    if (is_inf_f(b) || r < m) { return a; }
    for (var i = 0; i < 300; i++) {
        if (r < m) { break; }
        var k = frexp(r).exp - frexp(m).exp;
        var t = ldexp(m, k);
        if (t > r) {
            k -= 1;
            t = ldexp(m, k);
        }
        r -= t;
    }
    return select(r, -r, a < 0.0);
}

fn round_even_f(x: f32) -> f32 {
    let f = floor(x);
    let d = x - f;
    if (d > 0.5) { return f + 1.0; }
    if (d < 0.5) { return f; }
    return select(f + 1.0, f, f - 2.0 * floor(f * 0.5) == 0.0);
}

fn is_nan_f(x: f32) -> bool {
    let b = bitcast<u32>(x);
    return (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0u;
}

fn is_inf_f(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

// IEEE 754-2019 maximum/minimum: NaN when either operand is NaN. WGSL leaves max/min/clamp
// of a NaN to the implementation, and lavapipe (like many GPUs) returns the other operand,
// so max(NaN, 0.0) would be 0. The NaN test is on the bit pattern: `x != x` may be folded
// away by a fast-math compiler.
fn max_f(a: f32, b: f32) -> f32 {
    return select(select(max(a, b), b, is_nan_f(b)), a, is_nan_f(a));
}

fn min_f(a: f32, b: f32) -> f32 {
    return select(select(min(a, b), b, is_nan_f(b)), a, is_nan_f(a));
}

fn clamp_f(x: f32, lo: f32, hi: f32) -> f32 {
    return select(min(max(x, lo), hi), x, is_nan_f(x));
}

fn relu_f(x: f32) -> f32 {
    return select(max(x, 0.0), x, is_nan_f(x));
}
