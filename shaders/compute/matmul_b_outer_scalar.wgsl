// matmul.wgsl's B operand in any other layout (B_LOAD=outer_scalar): the outer-product
// form, B(k, n..n+3) from four scalar loads, columns past N - 1 clamped to it.
@group(0) @binding(2) var<storage, read> b: array<f32>;

//!include compute/matmul_form_outer.wgsl

fn b_at(i: i32) -> f32 { return b[i]; }

fn load_b4(base: i32, k: i32, n: i32, s: vec4<i32>, nmax: i32) -> vec4<f32> {
    let i = base + k * s.z;
    return vec4<f32>(b_at(i + n * s.w), b_at(i + min(n + 1, nmax) * s.w),
                     b_at(i + min(n + 2, nmax) * s.w), b_at(i + min(n + 3, nmax) * s.w));
}
