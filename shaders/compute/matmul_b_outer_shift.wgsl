// matmul.wgsl's B operand contiguous along N but not 16-byte aligned (B_LOAD=outer_shift;
// e.g. a 7x7 or 13x13 feature map): B(k, n..n+3) from the two aligned vec4s that hold it,
// shifted into place, instead of four scalar loads. The shift is the same for every
// invocation at one k (n0 is a multiple of 4). Columns past N read what follows the row in
// the buffer (its binding is rounded up to 16 bytes): their results are never stored.
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;

//!include compute/matmul_form_outer.wgsl

fn b_at(i: i32) -> f32 { return b[u32(i) / 4u][u32(i) % 4u]; }

fn load_b4(base: i32, k: i32, n: i32, s: vec4<i32>, nmax: i32) -> vec4<f32> {
    let i = u32(base + k * s.z + n);
    let lo = b[i / 4u];
    let hi = b[i / 4u + 1u];
    let r = i % 4u;
    let one = select(vec4<f32>(lo.yzw, hi.x), vec4<f32>(lo.zw, hi.xy), r == 2u);
    return select(select(one, vec4<f32>(lo.w, hi.xyz), r == 3u), lo, r == 0u);
}
