// Helpers shared by elementwise shaders (WGSL has no erf, and leaves pow(x<0) undefined).

fn erf_f(x: f32) -> f32 {
    // Abramowitz-Stegun 7.1.26 refined: |error| < 1.2e-7 over the real line
    let a = abs(x);
    let t = 1.0 / (1.0 + 0.5 * a);
    let y = 1.0 - t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196
        + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398
        + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
    return select(-y, y, x >= 0.0);
}

fn tanh_f(x: f32) -> f32 {
    // some drivers compute tanh as a ratio of exponentials, which overflows to NaN
    return select(tanh(x), sign(x), abs(x) > 15.0);
}

fn sigmoid_f(x: f32) -> f32 {
    let e = exp(-abs(x));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= 0.0);
}

fn softplus_f(x: f32) -> f32 {
    return max(x, 0.0) + log(1.0 + exp(-abs(x)));
}

fn pow_f(a: f32, b: f32) -> f32 {
    if (b == 0.0) { return 1.0; }
    if (a == 0.0) { return select(0.0, bitcast<f32>(0x7f800000u), b < 0.0); }
    let r = exp2(b * log2(abs(a)));
    if (a > 0.0) { return r; }
    if (floor(b) != b) { return bitcast<f32>(0x7fc00000u); }
    let odd = abs(b - 2.0 * floor(b * 0.5)) == 1.0;
    return select(r, -r, odd);
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
