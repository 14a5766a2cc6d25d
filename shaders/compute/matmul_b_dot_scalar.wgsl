// matmul.wgsl's B operand contiguous along K but not aligned for vec4 loads
// (B_LOAD=dot_scalar): the dot-product form, B(k..k+3, n) from four scalar loads.
@group(0) @binding(2) var<storage, read> b: array<f32>;

//!include compute/matmul_form_dot.wgsl

fn b_at(i: i32) -> f32 { return b[i]; }

fn load_b4(base: i32, k: i32, n: i32, s: vec4<i32>, nmax: i32) -> vec4<f32> {
    let i = base + n * s.w + k * s.z;
    return vec4<f32>(b_at(i), b_at(i + s.z), b_at(i + 2 * s.z), b_at(i + 3 * s.z));
}
