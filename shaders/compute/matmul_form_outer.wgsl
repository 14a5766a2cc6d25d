// The outer-product form of matmul.wgsl's inner step (B contiguous along N, or neither):
// the tile holds the rows B(k + j, n0..n0+3), scaled by A(m, k + j) and summed.
fn b_tile(base: i32, k: i32, n: vec4<i32>, s: vec4<i32>, nmax: i32) -> mat4x4<f32> {
    return mat4x4<f32>(load_b4(base, k, n.x, s, nmax), load_b4(base, k + 1, n.x, s, nmax),
                       load_b4(base, k + 2, n.x, s, nmax), load_b4(base, k + 3, n.x, s, nmax));
}

// A(m, k..k+3) times the tile: the row's contribution to C(m, n0..n0+3)
fn mac(a: vec4<f32>, t: mat4x4<f32>) -> vec4<f32> {
    return a.x * t[0] + a.y * t[1] + a.z * t[2] + a.w * t[3];
}
