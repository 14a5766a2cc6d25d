// matmul.wgsl's B operand contiguous along N and 16-byte aligned (B_LOAD=outer_vec4): the
// outer-product form, B(k, n..n+3) in one load.
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;

//!include compute/matmul_form_outer.wgsl

fn b_at(i: i32) -> f32 { return b[u32(i) / 4u][u32(i) % 4u]; }

fn load_b4(base: i32, k: i32, n: i32, s: vec4<i32>, nmax: i32) -> vec4<f32> {
    return b[u32(base + k * s.z + n) / 4u];
}
